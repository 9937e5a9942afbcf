"""The CUDA front end's second slice (issue 28): templates instantiated from the name, local
headers and macros, numeric limits, ``extern __shared__`` sized at launch, ``__constant__``
memory, structs and arrays of structs in buffers, ``bool`` buffers, the math library (exact,
precise and approx classes), ``printf``, ``half``/``__nv_bfloat16``, early returns, default
arguments and the address of a local. Expected values come from NumPy written from C's
semantics (float32/float16 steps), from Python's own ``%`` formatting (printf), and for the
precise math from the Python language's library on the emulator (the same functions) plus
error bounds against float64."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from tiers import DEFAULT_W

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

#: the emulator at W = 8 (and 64 in the sweep tier: the features are W-invariant), each compiled CPU
#: target at its default-tier W
TARGETS = [pytest.param("emulator", 8, id="emulator-W8"),
           pytest.param("emulator", 64, id="emulator-W64", marks=pytest.mark.sweep)] + [
    pytest.param(t, DEFAULT_W[t], id=f"{t}-W{DEFAULT_W[t]}") for t in ("opencl", "cpu")
    if t in aw.available_targets()]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]) if a.dtype.kind == "f" else a


TEMPLATES = r"""
template <typename T, int N> __device__ T scaled(T v) { return v * (T)N; }
__device__ int clampi(int v, int lo = 0, int hi = 100) {
    if (v < lo) return lo;          // early returns
    for (int k = 0; k < 3; k++) { if (v > hi + k * 1000) return hi + k; }
    return v;
}
template <typename T, int BS>
__global__ void rev(T* out, const T* in, int* cl, int n) {
    __shared__ T s[BS];
    int i = blockIdx.x * BS + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : (T)0;
    __syncthreads();
    out[i] = scaled<T, BS / 16>(s[BS - 1 - threadIdx.x]) + (T)1;
    cl[i] = clampi(i - 20) * 10000 + clampi(i - 20, -5, 1000);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_template_instances_early_return_default_args(target, w):
    n = 200
    ci = np.arange(256) - 20
    for tname, dt in (("float", np.float32), ("int", np.int32)):
        k = aw.cuda_kernel(TEMPLATES, f"rev<{tname}, 64>")
        assert k.name == f"rev_{tname}_64"
        x = (np.arange(256) * 3 - 100).astype(dt)
        out = np.zeros(256, dt)
        cl = np.zeros(256, np.int32)
        k(out, x, cl, n, grid=4, workgroup=64, target=target, wave_width=w)
        xs = np.where(np.arange(256) < n, x, 0).astype(dt).reshape(4, 64)[:, ::-1].reshape(-1)
        assert np.array_equal(bits(out), bits((xs * dt(4) + dt(1)).astype(dt)))
        exp_cl = np.clip(ci, 0, 100) * 10000 + np.clip(ci, -5, 1000)
        assert np.array_equal(cl, exp_cl)


def test_template_errors():
    with pytest.raises(aw.CompileError, match=r"cannot instantiate the kernel 'rev<float>'"):
        aw.cuda_kernel(TEMPLATES, "rev<float>").compile()
    with pytest.raises(aw.CompileError, match=r"template kernel 'rev': name one of its instances"):
        aw.cuda_kernel(TEMPLATES, "rev").compile()


HEADER = r"""
#pragma once
#define TILE 32
enum Op { ADD = 1, MUL = 2 };
static const int SCALE = 3;
constexpr float HALF = 0.5f;
"""

INCLUDES = r"""
#include "defs.h"
#include <cuda_runtime.h>
#include <cfloat>
#include <climits>
#include <cmath>
__global__ void lim(float* f, int* i, unsigned* u) {
    int t = threadIdx.x;
    f[t] = t == 0 ? FLT_MAX : t == 1 ? -FLT_MAX : t == 2 ? FLT_MIN : t == 3 ? FLT_EPSILON
         : t == 4 ? INFINITY : t == 5 ? (float)M_PI : HALF * (float)(TILE + MUL);
    i[t] = t == 0 ? INT_MAX : t == 1 ? INT_MIN : SCALE * ADD + t;
    u[t] = t == 0 ? UINT_MAX : (unsigned)SHRT_MIN;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_local_headers_macros_and_limits(tmp_path, target, w):
    (tmp_path / "defs.h").write_text(HEADER)
    src = tmp_path / "lim.cu"
    src.write_text(INCLUDES)
    k = aw.cuda_kernel(src, "lim")  # the header is found in the source file's folder
    f = np.zeros(8, np.float32)
    i = np.zeros(8, np.int32)
    u = np.zeros(8, np.uint32)
    k(f, i, u, grid=1, workgroup=8, target=target, wave_width=w)
    fi = np.finfo(np.float32)
    exp_f = np.array([fi.max, -fi.max, fi.tiny, fi.eps, np.inf, np.float32(np.pi), 17.0, 17.0], np.float32)
    assert np.array_equal(bits(f), bits(exp_f))
    assert list(i) == [2**31 - 1, -(2**31)] + [3 + t for t in range(2, 8)]
    assert list(u) == [2**32 - 1] + [2**32 - 32768] * 7


DYN = r"""
__global__ void dyn(float* out, int* outi, const float* in, int n) {
    extern __shared__ float smem[];                      // n floats, then n ints (sized at launch)
    extern __shared__ char raw[];                        // the same bytes
    __shared__ float fixed[4];
    int* ints = reinterpret_cast<int*>(raw + n * sizeof(float));
    int t = threadIdx.x;
    smem[t] = in[blockIdx.x * n + t];
    ints[t] = t * 7;
    if (t < 4) fixed[t] = (float)t;
    __syncthreads();
    out[blockIdx.x * n + t] = smem[n - 1 - t] + fixed[t % 4];
    outi[blockIdx.x * n + t] = ints[(t + 1) % n];
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
@pytest.mark.parametrize("n", [32, 96])
def test_extern_shared_sized_at_launch(target, w, n):
    k = aw.cuda_kernel(DYN, "dyn")
    x = np.arange(2 * n, dtype=np.float32) * 0.5
    out = np.zeros(2 * n, np.float32)
    outi = np.zeros(2 * n, np.int32)
    k(out, outi, x, n, grid=2, workgroup=n, target=target, wave_width=w, shared_bytes=n * 8)
    t = np.arange(n)
    exp = (x.reshape(2, n)[:, ::-1] + (t % 4).astype(np.float32)).reshape(-1)
    assert np.array_equal(out, exp)
    assert np.array_equal(outi, np.tile((t + 1) % n * 7, 2))


def test_extern_shared_too_small_is_an_error():
    k = aw.cuda_kernel(DYN, "dyn")
    x = np.zeros(64, np.float32)
    with pytest.raises(aw.emu.EmulationError, match="local memory"):
        k(np.zeros(64, np.float32), np.zeros(64, np.int32), x, 32, grid=2, workgroup=32, target="emulator",
          wave_width=8, shared_bytes=64)
    with pytest.raises(aw.LaunchError, match="shared_bytes"):
        k(np.zeros(64, np.float32), np.zeros(64, np.int32), x, 32, grid=2, workgroup=32, target="emulator",
          shared_bytes=-1)


CONST = r"""
struct Coef { float a; int b; };
__constant__ float centres[8];
__constant__ int offs[3] = {1, -2, 5};
__constant__ Coef cf = {0.25f, 7};
__device__ float near(float v) {          // reads a __constant__ array from a __device__ function
    float best = 0.0f, bd = 1e30f;
    for (int c = 0; c < 8; c++) { float d = fabsf(v - centres[c]); if (d < bd) { bd = d; best = centres[c]; } }
    return best;
}
__global__ void cst(float* out, const float* in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = near(in[i]) + (float)offs[i % 3] + cf.a * (float)cf.b;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_constant_memory(target, w):
    k = aw.cuda_kernel(CONST, "cst")
    assert [p.name for p in k.params] == ["out", "in", "centres", "offs", "cf", "shared_bytes"]
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, 128).astype(np.float32)
    cen = np.linspace(-3.5, 3.5, 8).astype(np.float32)
    out = np.zeros(128, np.float32)
    k(out, x, grid=2, workgroup=64, target=target, wave_width=w, centres=cen)
    d = np.abs(x[:, None] - cen[None, :])
    best = cen[np.argmin(d, axis=1)]  # the first of equal distances, as the strict < keeps it
    offs = np.array([1, -2, 5], np.float32)
    exp = best + offs[np.arange(128) % 3] + np.float32(0.25 * 7)
    assert np.array_equal(out, exp)
    # an initialised __constant__ overridden at launch (cudaMemcpyToSymbol's role)
    k(out, x, grid=2, workgroup=64, target=target, wave_width=w, centres=cen, offs=np.zeros(3, np.int32))
    assert np.array_equal(out, best + np.float32(0.25 * 7))


def test_constant_memory_missing_is_an_error():
    with pytest.raises(aw.LaunchError, match=r"missing arguments \['centres'\]"):
        aw.cuda_kernel(CONST, "cst")(np.zeros(64, np.float32), np.zeros(64, np.float32), grid=1, workgroup=64,
                                     target="emulator")


STRUCTS = r"""
struct Vec { float x, y; };
struct Particle { Vec pos; int id; double mass; bool alive; };
__device__ Vec add(Vec a, Vec b) { Vec r = {a.x + b.x, a.y + b.y}; return r; }
__device__ void bump(Particle* p, int by) { p->id += by; }
__global__ void step(Particle* ps, float4* f4, bool* flags, const Vec* vel, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Particle q = ps[i];
    q.pos = add(q.pos, vel[i]);
    q.mass *= 2.0;
    q.alive = q.pos.x > 0.0f && q.alive;
    bump(&q, 3);
    ps[i] = q;
    ps[i].pos.y -= 1.0f;
    float4 v = f4[i];
    f4[i] = make_float4(v.w, v.z, v.y, v.x + (float)q.id);
    flags[i] = !flags[i] || q.alive;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_structs_in_buffers(target, w):
    k = aw.cuda_kernel(STRUCTS, "step")
    dt = k.struct_dtype("ps")
    assert dt.itemsize == 32 and dt.fields["mass"][1] == 16 and dt.fields["alive"][1] == 24  # the C layout
    n = 100
    rng = np.random.default_rng(4)
    ps = np.zeros(n, dt)
    ps["pos"]["x"] = rng.uniform(-1, 1, n)
    ps["pos"]["y"] = rng.uniform(-1, 1, n)
    ps["id"] = np.arange(n)
    ps["mass"] = rng.uniform(0, 2, n)
    ps["alive"] = rng.integers(0, 2, n).astype(bool)
    vel = np.zeros(n, k.struct_dtype("vel"))
    vel["x"] = rng.uniform(-1, 1, n)
    vel["y"] = rng.uniform(-1, 1, n)
    f4 = rng.standard_normal((n, 4)).astype(np.float32)  # float4 takes plain float32 rows
    flags = rng.integers(0, 2, n).astype(bool)
    e = ps.copy()
    ef4, eflags = f4.copy(), flags.copy()
    k(ps, f4, flags, vel, n, grid=2, workgroup=64, target=target, wave_width=w)
    x = (e["pos"]["x"] + vel["x"]).astype(np.float32)
    alive = (x > 0) & e["alive"]
    assert np.array_equal(ps["pos"]["x"], x)
    assert np.array_equal(ps["pos"]["y"], ((e["pos"]["y"] + vel["y"]).astype(np.float32) - np.float32(1)))
    assert np.array_equal(ps["mass"], e["mass"] * 2.0)
    assert np.array_equal(ps["id"], np.arange(n) + 3)
    assert np.array_equal(ps["alive"], alive)
    assert np.array_equal(f4, np.stack([ef4[:, 3], ef4[:, 2], ef4[:, 1], ef4[:, 0] + (np.arange(n) + 3)], 1)
                          .astype(np.float32))
    assert np.array_equal(flags, ~eflags | alive)


def test_struct_buffer_layout_is_checked():
    k = aw.cuda_kernel(STRUCTS, "step")
    wrong = np.zeros(4, [("x", np.float32), ("y", np.float64)])
    with pytest.raises(aw.LaunchError, match="k.struct_dtype"):
        k(wrong, np.zeros((4, 4), np.float32), np.zeros(4, bool), np.zeros(4, k.struct_dtype("vel")), 4, grid=1,
          workgroup=4, target="emulator")


MATH = r"""
__global__ void prec(float* o, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], s, c;
    sincosf(v, &s, &c);
    o[9 * i + 0] = expf(v);
    o[9 * i + 1] = logf(fabsf(v) + 0.5f);
    o[9 * i + 2] = s;
    o[9 * i + 3] = c;
    o[9 * i + 4] = tanhf(v);
    o[9 * i + 5] = erff(v);
    o[9 * i + 6] = exp2f(v);
    o[9 * i + 7] = log2f(fabsf(v) + 0.5f);
    o[9 * i + 8] = exp(v);            // the float overload, as CUDA's headers declare it
}
"""


@aw.kernel
def _prec_py(o: aw.Buffer[aw.f32], x: aw.In[aw.f32], n: aw.i32):
    i = aw.global_id()
    if i < n:
        v = x[i]
        a = abs(v) + 0.5
        o[9 * i + 0] = aw.exp(v)
        o[9 * i + 1] = aw.log(a)
        o[9 * i + 2] = aw.sin(v)
        o[9 * i + 3] = aw.cos(v)
        o[9 * i + 4] = aw.tanh(v)
        o[9 * i + 5] = aw.erf(v)
        o[9 * i + 6] = aw.exp2(v)
        o[9 * i + 7] = aw.log2(a)
        o[9 * i + 8] = aw.exp(v)


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_precise_math_is_the_language_library(target, w):
    rng = np.random.default_rng(5)
    n = 256
    x = np.concatenate([rng.uniform(-10, 10, n - 6), [0.0, -0.0, 1e-30, 80.0, -80.0, 3.14159265]]).astype(np.float32)
    out = np.zeros(9 * n, np.float32)
    aw.cuda_kernel(MATH, "prec")(out, x, n, grid=4, workgroup=64, target=target, wave_width=w)
    ref = np.zeros(9 * n, np.float32)
    _prec_py(ref, x, n, grid=4, workgroup=64, target="emulator", wave_width=8)
    assert np.array_equal(bits(out), bits(ref))  # the same library, the same bits on every target
    o = out.reshape(n, 9).astype(np.float64)
    xd = x.astype(np.float64)
    a = (np.abs(x) + np.float32(0.5)).astype(np.float64)  # the argument as the kernel rounds it
    ulp = lambda v: np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)  # noqa: E731
    for col, exact in ((0, np.exp(xd)), (1, np.log(a)), (6, np.exp2(xd)), (7, np.log2(a)), (8, np.exp(xd))):
        fin = np.isfinite(exact) & (np.abs(exact) < 3e38) & (np.abs(exact) > 1e-37)
        assert np.all(np.abs(o[fin, col] - exact[fin]) <= 2 * ulp(exact[fin])), col  # the library's bound
    assert np.max(np.abs(o[:, 2] - np.sin(xd))) <= 2.0**-22 and np.max(np.abs(o[:, 3] - np.cos(xd))) <= 2.0**-22


EXACT = r"""
__global__ void ex(float* f, int* i, unsigned* u, const float* x, const int* a, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float v = x[t];
    f[6 * t + 0] = roundf(v);
    f[6 * t + 1] = copysignf(1.5f, v);
    f[6 * t + 2] = fdimf(v, 0.25f);
    f[6 * t + 3] = __saturatef(v);
    f[6 * t + 4] = __int_as_float(__float_as_int(v) ^ 0x80000000);
    f[6 * t + 5] = fmaxf(v, -0.5f) + (float)isnan(v) + 2.0f * (float)isinf(v) + 4.0f * (float)signbit(v);
    i[6 * t + 0] = __float2int_rn(v);
    i[6 * t + 1] = __float2int_rz(v);
    i[6 * t + 2] = __float2int_rd(v);
    i[6 * t + 3] = __float2int_ru(v);
    i[6 * t + 4] = __mul24(a[t], a[t] >> 3) + min(a[t], 5) - max(a[t], -5) + abs(a[t]);
    i[6 * t + 5] = __mulhi(a[t], 0x7654321);
    u[t] = __umulhi((unsigned)a[t], 0x9abcdef1u) ^ __umul24((unsigned)a[t], 3u);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_exact_math_and_integer_intrinsics(target, w):
    rng = np.random.default_rng(6)
    n = 128
    x = np.concatenate([rng.uniform(-4, 4, n - 10) * 4,
                        [0.5, -0.5, 1.5, -2.5, 0.49999997, np.nan, np.inf, -np.inf, -0.0, 1e10]]).astype(np.float32)
    a = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    f = np.zeros(6 * n, np.float32)
    i = np.zeros(6 * n, np.int32)
    u = np.zeros(n, np.uint32)
    aw.cuda_kernel(EXACT, "ex")(f, i, u, x, a, n, grid=2, workgroup=64, target=target, wave_width=w)
    f, i = f.reshape(n, 6), i.reshape(n, 6)
    with np.errstate(invalid="ignore"):
        exp_f = np.stack([
            np.copysign(np.floor(np.abs(x.astype(np.float64)) + 0.5), x).astype(np.float32),  # half away from 0
            np.copysign(np.float32(1.5), x),
            np.where(np.isnan(x), x, np.where(x > 0.25, x - np.float32(0.25), 0)).astype(np.float32),
            np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float32),
            -x,
            (np.fmax(x, np.float32(-0.5)) + np.isnan(x) + 2 * np.isinf(x) + 4 * np.signbit(x)).astype(np.float32),
        ], 1)
    ok = ~np.isnan(exp_f)
    assert np.array_equal(bits(f)[ok], bits(exp_f)[ok]) and np.array_equal(np.isnan(f), np.isnan(exp_f))
    fin = np.isfinite(x) & (np.abs(x) < 2**31)  # out of range: the spec's defined result, not C's
    xd = x.astype(np.float64)
    for col, fn in enumerate((np.rint, np.trunc, np.floor, np.ceil)):
        assert np.array_equal(i[fin, col], fn(xd[fin]).astype(np.int32)), col
    a64 = a.astype(np.int64)

    def s24(v):
        v = v & 0xFFFFFF
        return np.where(v >= 2**23, v - 2**24, v)

    e4 = (s24(a64) * s24(a64 >> 3) + np.minimum(a64, 5) - np.maximum(a64, -5) + np.abs(a64))
    assert np.array_equal(i[:, 4], ((e4 + 2**31) % 2**32 - 2**31).astype(np.int32))
    assert np.array_equal(i[:, 5], ((a64 * 0x7654321) >> 32).astype(np.int32))
    ua = a64 & 0xFFFFFFFF
    assert np.array_equal(u, (((ua * 0x9ABCDEF1) >> 32) ^ (((ua & 0xFFFFFF) * 3) & 0xFFFFFFFF)).astype(np.uint32))


FAST = r"""
__global__ void fast(float* o, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    o[6 * i + 0] = __expf(v);
    o[6 * i + 1] = __logf(fabsf(v) + 1.0f);
    o[6 * i + 2] = __powf(fabsf(v) + 1.0f, 1.7f);
    o[6 * i + 3] = __sinf(v);
    o[6 * i + 4] = __cosf(v);
    o[6 * i + 5] = __fdividef(v, 3.0f);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_fast_intrinsics_within_their_bounds(target, w):
    x = np.linspace(-3.1, 3.1, 256).astype(np.float32)
    o = np.zeros(6 * 256, np.float32)
    aw.cuda_kernel(FAST, "fast")(o, x, 256, grid=4, workgroup=64, target=target, wave_width=w)
    o = o.reshape(256, 6).astype(np.float64)
    xd = x.astype(np.float64)
    a = np.abs(xd) + 1.0
    rel = lambda got, ex: np.max(np.abs(got - ex) / np.abs(ex))  # noqa: E731
    # ex2/lg2/rcp.approx: 2 ulp (spec); the product's rounding adds |arg| * 2^-24
    assert rel(o[:, 0], np.exp(xd)) < 2.0**-19
    assert np.max(np.abs(o[:, 1] - np.log(a))) < 2.0**-19
    assert rel(o[:, 2], a**1.7) < 2.0**-18
    assert np.max(np.abs(o[:, 3] - np.sin(xd))) < 2.0**-20 and np.max(np.abs(o[:, 4] - np.cos(xd))) < 2.0**-20
    assert rel(o[1:-1, 5], xd[1:-1] / 3.0) < 2.0**-21


PRINTF = r"""
__global__ void pr(const float* x) {
    int t = threadIdx.x;
    if (t % 3 == 0)
        printf("t=%d x=%.3f u=%u h=%08x e=%e |%5d|%-4d|%%\n", t, x[t], (unsigned)t + 7u, t * 255 - 3, x[t] * 1e6f,
               t, -t);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_printf(capfd, target, w):
    x = np.linspace(-2, 2, 12).astype(np.float32)
    aw.cuda_kernel(PRINTF, "pr")(x, grid=1, workgroup=12, target=target, wave_width=w)
    lines = capfd.readouterr().out.splitlines()
    fmt = "t=%d x=%.3f u=%u h=%08x e=%e |%5d|%-4d|%%"  # Python's % is C's printf for these conversions
    exp = [fmt % (t, float(x[t]), t + 7, (t * 255 - 3) & 0xFFFFFFFF,  # noqa: UP031
                  float(np.float32(x[t] * np.float32(1e6))), t, -t)
           for t in range(0, 12, 3)]
    assert lines == exp


HALF = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void hk(half* h, __nv_bfloat16* b, float* f, const half* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    half x = a[i], y = h[i];
    half z = x * y + x;                     // two roundings to half
    z += __float2half(0.1f);
    h[i] = z;
    __nv_bfloat16 p = __float2bfloat16(__half2float(x)), q = b[i];
    b[i] = p * q - q;
    f[i] = __half2float(hsqrt(__habs(x))) + (x < y ? 1.0f : 0.0f);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_half_and_bfloat16(target, w):
    ml = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    n = 128
    a = rng.standard_normal(n).astype(np.float16)
    h = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(ml.bfloat16)
    f = np.zeros(n, np.float32)
    ea, eh, eb = a.copy(), h.copy(), b.copy()
    aw.cuda_kernel(HALF, "hk")(h, b, f, a, n, grid=2, workgroup=64, target=target, wave_width=w)
    z = (ea * eh + ea) + np.float16(np.float32(0.1))  # NumPy rounds each float16 operation to float16
    assert np.array_equal(bits(h), bits(z.astype(np.float16)))
    p = ea.astype(np.float32).astype(ml.bfloat16)
    assert np.array_equal(b.view(np.uint16), (p * eb - eb).astype(ml.bfloat16).view(np.uint16))
    assert np.array_equal(f, np.sqrt(np.abs(ea)).astype(np.float32) + (ea < eh))


REFUSED = [
    ("address arithmetic", "__global__ void k(float* o) {\n  float v = 1;\n  float* p = &v;\n  o[0] = p[1];\n}",
     "arithmetic or indexing on the address of a local variable", 4, 10),
    ("64-bit atomic", "__global__ void k(unsigned long long* o) {\n  atomicAdd(o, 1ull);\n}",
     "a u64 atomic (the 32-bit ones only", 2, 3),
    ("double atomic", "__global__ void k(double* o) {\n  atomicAdd(o, 1.0);\n}", "a f64 atomic", 2, 3),
    ("atomicInc", "__global__ void k(unsigned* o) {\n  atomicInc(o, 7u);\n}", "call of 'atomicInc'", 2, 3),
    ("syncthreads_count", "__global__ void k(int* o) {\n  o[0] = __syncthreads_count(1);\n}",
     "call of '__syncthreads_count'", 2, 10),
    ("bad printf arity", "__global__ void k(int* o) {\n  printf(\"%d %d\", o[0]);\n}",
     "the format has 2 conversion(s) but 1 value(s)", 2, 3),
]


@pytest.mark.parametrize(("what", "src", "msg", "line", "col"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(what, src, msg, line, col):
    with pytest.raises(aw.CompileError) as e:
        aw.cuda_kernel(src, "k").compile()
    text = str(e.value)
    assert msg in text, text
    assert f"kernel.cu:{line}:{col}:" in text, text
