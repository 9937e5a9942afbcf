"""The CUDA C++ front end (aw.cuda_kernel): kernels run on the emulator at W = 8 and 32 and on
OpenCL, compared bit for bit with NumPy computations written from C's semantics (explicit
float32/float64 steps and casts, integer wrap by masking); every refused construct class has a
test of its message (construct named, line and column)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import anywave as aw

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

TARGETS = [("emulator", 8), ("emulator", 32)]
if "opencl" in aw.available_targets():
    TARGETS.append(("opencl", None))
TARGET_IDS = [f"{t}-W{w}" if w else t for t, w in TARGETS]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64) if a.dtype.kind == "f" else a


def launch(k, *args, grid, workgroup, target, w):
    if w is None:
        k(*args, grid=grid, workgroup=workgroup, target=target)
    else:
        k(*args, grid=grid, workgroup=workgroup, target=target, wave_width=w)


SAXPY = r"""
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_saxpy(target, w):
    rng = np.random.default_rng(1)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = 1.7
    exp = np.float32(a) * x  # a*x rounded to float, then + y rounded (no contraction)
    exp = (exp + y).astype(np.float32)
    k = aw.cuda_kernel(SAXPY, "saxpy")
    launch(k, y, x, a, n, grid=(n + 127) // 128, workgroup=128, target=target, w=w)
    assert np.array_equal(bits(y), bits(exp))


STENCIL = r"""
#define ETA 0.3
__global__ void smooth(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) {
        out[i] = in[i] + ETA * (in[i - 1] - 2.0 * in[i] + in[i + 1]);
    } else if (i == 0 || i == n - 1) {
        out[i] = in[i];
    }
}
"""


def _stencil_expected(v: np.ndarray, promote: bool) -> np.ndarray:
    out = v.copy()
    if promote:  # C: every step in double (ETA and 2.0 are double), one rounding to float at the store
        d = v.astype(np.float64)
        t = (d[:-2] - 2.0 * d[1:-1]) + d[2:]
        out[1:-1] = (d[1:-1] + 0.3 * t).astype(np.float32)
    else:  # what a float-only port computes (the trap the promotion avoids)
        f = np.float32
        t = (v[:-2] - f(2.0) * v[1:-1]) + v[2:]
        out[1:-1] = v[1:-1] + f(0.3) * t
    return out


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_stencil_double_promotion(target, w):
    rng = np.random.default_rng(2)
    n = 4099
    v = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    k = aw.cuda_kernel(STENCIL, "smooth")
    launch(k, out, v, n, grid=(n + 63) // 64, workgroup=64, target=target, w=w)
    exp = _stencil_expected(v, promote=True)
    assert np.array_equal(bits(out), bits(exp))
    # the data tell the two semantics apart (otherwise this test could not see a lost promotion)
    assert not np.array_equal(bits(exp), bits(_stencil_expected(v, promote=False)))


REDUCE = r"""
__global__ void block_sum(float* out, const float* in, unsigned n) {
    __shared__ float s[256];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned off = blockDim.x / 2; off > 0; off >>= 1) {
        if (tid < off) s[tid] += s[tid + off];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("wg", [256, 64])
def test_shared_block_reduction(target, w, wg):
    rng = np.random.default_rng(3)
    n = 5000
    v = rng.standard_normal(n).astype(np.float32)
    groups = (n + wg - 1) // wg
    out = np.zeros(groups, np.float32)
    k = aw.cuda_kernel(REDUCE, "block_sum")
    launch(k, out, v, n, grid=groups, workgroup=wg, target=target, w=w)
    padded = np.zeros(groups * wg, np.float32)
    padded[:n] = v
    exp = padded.reshape(groups, wg).copy()
    off = wg // 2
    while off > 0:  # the same tree, in float32
        exp[:, :off] = exp[:, :off] + exp[:, off:2 * off]
        off //= 2
    assert np.array_equal(bits(out), bits(exp[:, 0].copy()))


INTS = r"""
__device__ unsigned mixstep(unsigned h, int k) {
    h = h * 2654435761u + (unsigned)k;
    h ^= h >> 13;
    return h;
}
__global__ void ints(unsigned* hash, int* prom, unsigned char* bytes,
                     const unsigned char* a, const unsigned char* b, unsigned seed, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = seed;
    for (int k = 0; k < 4; k++) h = mixstep(h, i + k);
    hash[i] = h - 4000000000u;
    unsigned char x = a[i], y = b[i];
    short s = (short)(x << 8);
    int neg = -1 < (unsigned)i;
    prom[i] = x + y - 300 + s / 3 + s % 7 + neg * 1000;
    bytes[i] = x * y + 7;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_unsigned_wrap_and_promotions(target, w):
    rng = np.random.default_rng(4)
    n = 300
    a = rng.integers(0, 256, n, dtype=np.uint8)
    b = rng.integers(0, 256, n, dtype=np.uint8)
    seed = 0xDEADBEEF
    hash_ = np.zeros(n, np.uint32)
    prom = np.zeros(n, np.int32)
    by = np.zeros(n, np.uint8)
    k = aw.cuda_kernel(INTS, "ints")
    launch(k, hash_, prom, by, a, b, seed, n, grid=(n + 31) // 32, workgroup=32, target=target, w=w)
    m32 = (1 << 32) - 1
    exp_h, exp_p, exp_b = [], [], []
    for i in range(n):
        h = seed
        for kk in range(4):
            h = (h * 2654435761 + (i + kk)) & m32
            h ^= h >> 13
        exp_h.append((h - 4000000000) & m32)
        x, y = int(a[i]), int(b[i])
        s = (x << 8) & 0xFFFF
        s = s - 0x10000 if s >= 0x8000 else s  # conversion to short: two's complement wrap
        q = abs(s) // 3 * (1 if s >= 0 else -1)  # C division truncates toward zero
        r = s - 7 * (abs(s) // 7 * (1 if s >= 0 else -1))  # remainder has the dividend's sign
        neg = 0  # -1 becomes 0xFFFFFFFF in the unsigned comparison: never less
        exp_p.append(x + y - 300 + q + r + neg * 1000)
        exp_b.append((x * y + 7) & 0xFF)
    assert np.array_equal(hash_, np.array(exp_h, np.uint32))
    assert np.array_equal(prom, np.array(exp_p, np.int32))
    assert np.array_equal(by, np.array(exp_b, np.uint8))


MATH = r"""
__device__ float clampf(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }
__global__ void mathk(float* out, const float* a, const float* b, const float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float* o = out + 4 * i;
        o[0] = a[i] * b[i] + c[i];
        o[1] = fmaf(a[i], b[i], c[i]);
        o[2] = sqrtf(fabsf(a[i]));
        *(o + 3) = clampf(c[i], -0.5f, 0.5f);
    }
}
"""


def _fma_f32(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """The float32 nearest a*b+c, ties to even, from the exact rational value."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    f = np.float32(float(exact))
    best = f
    for g in (np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))):
        db, dg = abs(Fraction(float(best)) - exact), abs(Fraction(float(g)) - exact)
        if dg < db or (dg == db and int(g.view(np.uint32)) % 2 == 0):
            best = g
    return best


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_math_no_contraction_and_device_function(target, w):
    rng = np.random.default_rng(5)
    n = 200
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    out = np.zeros(4 * n, np.float32)
    k = aw.cuda_kernel(MATH, "mathk")
    launch(k, out, a, b, c, n, grid=(n + 63) // 64, workgroup=64, target=target, w=w)
    exp = np.zeros((n, 4), np.float32)
    exp[:, 0] = a * b + c  # float32 product rounded, then the sum rounded
    exp[:, 1] = [_fma_f32(a[i], b[i], c[i]) for i in range(n)]
    exp[:, 2] = np.sqrt(np.abs(a))
    exp[:, 3] = np.fmin(np.fmax(c, np.float32(-0.5)), np.float32(0.5))
    assert np.array_equal(bits(out), bits(exp.reshape(-1)))
    assert not np.array_equal(bits(exp[:, 0].copy()), bits(exp[:, 1].copy()))  # the data separate the two


def test_signature_and_source_file(tmp_path):
    p = tmp_path / "saxpy.cu"
    p.write_text(SAXPY)
    k = aw.cuda_kernel(p, "saxpy")
    assert [(q.name, q.kind) for q in k.params] == [("y", "buffer"), ("x", "buffer"), ("a", "scalar"),
                                                    ("n", "scalar"), ("shared_bytes", "const")]
    assert k.compile().kernel("saxpy").args[1].access is aw.compiler.types.Access.READ


# ----------------------------------------------------------------------------- refused constructs

REFUSED = [
    ("struct", "struct P { float v; };\n__global__ void k(float* o, P p) { o[0] = p.v; }",
     "a parameter of type 'P'", 2, 31),
    ("template", "template <int N>\n__global__ void k(float* o) { o[0] = N; }", "template kernel 'k': name one", 2,
     17),
    ("unknown call", "__global__ void k(float* o) {\n  o[0] = atan2f(o[0], o[1]);\n}", "call of 'atan2f'", 2, 10),
    ("double exp", "__global__ void k(double* o) {\n  o[0] = exp(o[0]);\n}", "call of 'exp'", 2, 10),
    ("member function", "struct P { float v; __device__ float get() const { return v; } };\n"
     "__global__ void k(P* p, float* o) {\n  o[0] = p->get();\n}", "a member function", 3, 10),
    ("printf %s", "__global__ void k(int* o) {\n  printf(\"%s\\n\", \"x\");\n}", "printf conversion %s", 2, 3),
    ("struct array member local", "struct P { float v[2]; };\n__global__ void k(P* p, float* o) {\n"
     "  P q = p[0];\n  o[0] = q.v[0];\n}", "a struct value with an array member", 3, 9),
    ("local array", "__global__ void k(float* o) {\n  float t[4];\n  o[0] = 0;\n}", "a local (per-thread) array",
     2, 9),
    ("static local", "__global__ void k(float* o) {\n  static float s;\n  o[0] = s;\n}",
     "a static local variable", 2, 16),
    ("lambda", "__global__ void k(int* o) {\n  auto f = [](int x) { return x; };\n  o[0] = f(1);\n}",
     "a variable of type", 2, 8),
    ("pointer comparison", "__global__ void k(int* o, int* p) {\n  if (o == p) o[0] = 1;\n}",
     "operator == on pointers", 2, 7),
    ("file-scope variable", "__device__ float g;\n__global__ void k(float* o) {\n  o[0] = g;\n}",
     "reference to 'g'", 3, 10),
    ("switch", "__global__ void k(float* o, int n) {\n  switch (n) { default: o[0] = 1; }\n}", "switch stmt", 2, 3),
    ("pointer difference", "__global__ void k(float* o, float* p) {\n  o[0] = (float)(p - o);\n}",
     "pointer difference", 2, 18),
    ("pointer cast", "__global__ void k(const float* o) {\n  float* q = (float*)o;\n}", "a pointer cast", 2, 14),
    ("goto", "__global__ void k(float* o) {\n  goto end;\n  end: o[0] = 1;\n}", "goto stmt", 2, 3),
]


@pytest.mark.parametrize(("what", "src", "msg", "line", "col"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(what, src, msg, line, col):
    k = aw.cuda_kernel(src, "k")
    with pytest.raises(aw.CompileError) as e:
        k.compile()
    text = str(e.value)
    assert msg in text, text
    assert f"kernel.cu:{line}:{col}:" in text, text


def test_clang_errors_and_missing_kernel():
    with pytest.raises(aw.CompileError, match=r"kernel.cu:2:\d+: .*undeclared"):
        aw.cuda_kernel("__global__ void k(float* o) {\n  o[0] = zz;\n}", "k").compile()
    with pytest.raises(aw.CompileError, match="no __global__ function 'nope'.*'k'"):
        aw.cuda_kernel("__global__ void k(float* o) { o[0] = 1; }", "nope").compile()



MISC = r"""
#define T 8
__device__ void bump(int* p, int v) { *p += v; }
__global__ void misc(int* out, float* tr, const float* in, const double* dd, double scale,
                     long long big, int n) {
    __shared__ float tile[T][T + 1];
    unsigned tx = threadIdx.x % T, ty = threadIdx.x / T;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[ty][tx] = in[i];
    __syncthreads();
    tr[blockIdx.x * blockDim.x + tx * T + ty] = tile[ty][tx];
    int* o = &out[4 * i];
    int acc = 0, k = 0;
    while (k < 10) { k++; if (k % 3 == 0) continue; acc += k; }
    do { acc -= 1; } while (acc > i);
    o[0] = acc;
    bool odd = i & 1;
    o[1] = !odd ? ~i : (int)(static_cast<long long>(i) * big % 1000003);
    o += 2;
    bump(o, i);
    o[1] = (int)(dd[i] * scale) + (i < n - 1 || i == 5);
    o[1]++;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_loops_pointers_2d_shared_and_64bit(target, w):
    n = 192  # three workgroups of 64 = T*T
    rng = np.random.default_rng(6)
    inp = rng.standard_normal(n).astype(np.float32)
    dd = rng.uniform(-40, 40, n)
    big, scale = 3_000_000_007, 2.5
    out = np.zeros(4 * n, np.int32)
    tr = np.zeros(n, np.float32)
    k = aw.cuda_kernel(MISC, "misc")
    launch(k, out, tr, inp, dd, scale, big, n, grid=3, workgroup=64, target=target, w=w)
    exp_tr = inp.reshape(3, 8, 8).transpose(0, 2, 1).reshape(-1)
    assert np.array_equal(bits(tr), bits(exp_tr))
    exp = np.zeros((n, 4), np.int64)
    for i in range(n):
        acc = sum(k for k in range(1, 11) if k % 3)  # the while loop, continue skipping multiples of 3
        acc -= 1
        while acc > i:  # do-while: the body once, then while the test holds
            acc -= 1
        exp[i, 0] = acc
        exp[i, 1] = ~i if i % 2 == 0 else (i * big) % 1000003
        exp[i, 2] = i
        prod = float(np.float64(dd[i]) * np.float64(scale))
        exp[i, 3] = int(prod) + (i < n - 1 or i == 5) + 1  # int() truncates toward zero, as C
    assert np.array_equal(out.reshape(n, 4), exp.astype(np.int32))


CONTINUE = r"""
__global__ void cont(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int acc = 0;
    for (int k = 0; k < 100; k++) {
        if (k % 4 == 1) continue;
        if (k > i) break;
        acc += k;
    }
    int m = 0, j = 0;
    do { j++; if (j & 1) continue; m += j; } while (j < 9);
    out[i] = acc * 100 + m;
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_continue_and_break_in_for_and_do(target, w):
    n = 150
    out = np.zeros(n, np.int32)
    k = aw.cuda_kernel(CONTINUE, "cont")
    launch(k, out, n, grid=(n + 31) // 32, workgroup=32, target=target, w=w)
    exp = []
    for i in range(n):
        acc = sum(kk for kk in range(min(i, 99) + 1) if kk % 4 != 1)  # continue skips; break past i
        m = sum(j for j in range(1, 10) if j % 2 == 0)  # do: continue goes to the test (j < 9)
        exp.append(acc * 100 + m)
    assert np.array_equal(out, np.array(exp, np.int32))


def test_anywave_compile_writes_wbin(tmp_path):
    import subprocess
    import sys

    from anywave.binary.wbin import read_wbin

    src = tmp_path / "two.cu"
    src.write_text(SAXPY + "\n__global__ void fill(int* o, int v) { o[threadIdx.x] = v * SCALE + sizeof(short); }\n")
    out = tmp_path / "two.wbin"
    r = subprocess.run([sys.executable, "-m", "anywave", "compile", str(src), "-o", str(out), "-D", "SCALE=3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = read_wbin(out.read_bytes())
    assert [k.name for k in m.kernels] == ["saxpy", "fill"]
    o = np.zeros(8, np.int32)
    k = aw.cuda_kernel(src.read_text(), "fill", clang_args=["-DSCALE=3"])
    assert m.kernels[1].code == k.compile().kernels[0].code
    k(o, 5, grid=1, workgroup=8, target="emulator", wave_width=8)
    assert np.array_equal(o, np.full(8, 5 * 3 + 2, np.int32))


HIST = r"""
#define BINS 16
__global__ void hist(unsigned* counts, int* maxv, float* total, const int* data, int n) {
    __shared__ unsigned local[BINS];
    if (threadIdx.x < BINS) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int v = __ldg(&data[i]);
        atomicAdd(&local[v % BINS], 1u);
        atomicMax(maxv, v);
        atomicAdd(total, (float)(v % 7));
    }
    __syncthreads();
    if (threadIdx.x < BINS) atomicAdd(counts + threadIdx.x, local[threadIdx.x]);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_atomics_histogram(target, w):
    rng = np.random.default_rng(7)
    n = 3000
    data = rng.integers(0, 100000, n, dtype=np.int32)
    counts = np.zeros(16, np.uint32)
    maxv = np.full(1, -1, np.int32)
    total = np.zeros(1, np.float32)
    k = aw.cuda_kernel(HIST, "hist")
    launch(k, counts, maxv, total, data, n, grid=4, workgroup=64, target=target, w=w)
    assert np.array_equal(counts, np.bincount(data % 16, minlength=16).astype(np.uint32))
    assert maxv[0] == data.max()
    # small integers: every order of the float additions gives the same exact sum
    assert total[0] == np.float32(int((data % 7).sum()))


CONV = r"""
__global__ void conv(float* f, double* d, int* si, unsigned* ui, short* sh, const int* a, const unsigned* b,
                     const float* x, const short* s, long long big) {
    int i = threadIdx.x;
    f[2 * i] = a[i];                 // int -> float, round to nearest even
    f[2 * i + 1] = b[i];             // unsigned -> float
    d[2 * i] = big + a[i];           // long long -> double
    d[2 * i + 1] = x[i] * 3.0f + b[i];   // float arithmetic (unsigned converted to float), then to double
    si[i] = (int)(x[i] * 1000.0f);   // float -> int truncates toward zero
    ui[i] = (unsigned)a[i] * 3u + (s[i] < 0);   // wraps; short loads sign-extend
    sh[i] = s[i] * 3;                // int product stored as short (wraps)
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS, ids=TARGET_IDS)
def test_conversions(target, w):
    rng = np.random.default_rng(8)
    n = 64
    a = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
    x = rng.uniform(-1e5, 1e5, n).astype(np.float32)
    s = rng.integers(-(2**15), 2**15 - 1, n, dtype=np.int64).astype(np.int16)
    big = 2**53 + 12345
    f = np.zeros(2 * n, np.float32)
    d = np.zeros(2 * n, np.float64)
    si = np.zeros(n, np.int32)
    ui = np.zeros(n, np.uint32)
    sh = np.zeros(n, np.int16)
    k = aw.cuda_kernel(CONV, "conv")
    launch(k, f, d, si, ui, sh, a, b, x, s, big, grid=1, workgroup=n, target=target, w=w)
    ef = np.empty(2 * n, np.float32)
    ef[0::2] = a.astype(np.float32)  # NumPy's int -> float conversion rounds to nearest even, as C
    ef[1::2] = b.astype(np.float32)
    ed = np.empty(2 * n, np.float64)
    ed[0::2] = (np.int64(big) + a.astype(np.int64)).astype(np.float64)
    ed[1::2] = ((x * np.float32(3.0)) + b.astype(np.float32)).astype(np.float64)
    esi = np.trunc((x * np.float32(1000.0)).astype(np.float64)).astype(np.int32)
    eui = ((a.astype(np.int64) & 0xFFFFFFFF) * 3 + (s < 0)) & 0xFFFFFFFF
    esh = ((s.astype(np.int64) * 3 + 2**15) % 2**16 - 2**15).astype(np.int16)
    assert np.array_equal(bits(f), bits(ef))
    assert np.array_equal(bits(d), bits(ed))
    assert np.array_equal(si, esi)
    assert np.array_equal(ui, eui.astype(np.uint32))
    assert np.array_equal(sh, esh)


def test_syncthreads_is_the_barrier_the_checked_emulator_sees():
    """Without the loop's __syncthreads the reduction races; the checked emulator reports it."""
    v = np.random.default_rng(9).standard_normal(1000).astype(np.float32)
    out = np.zeros(4, np.float32)
    aw.cuda_kernel(REDUCE, "block_sum")(out, v, 1000, grid=4, workgroup=256, target="emulator", wave_width=8,
                                       check=True)
    racy = REDUCE.replace("        __syncthreads();\n    }", "    }")
    assert racy != REDUCE
    with pytest.raises(aw.emu.EmulationError, match="data race on local memory"):
        aw.cuda_kernel(racy, "block_sum")(out, v, 1000, grid=4, workgroup=256, target="emulator", wave_width=8,
                                          check=True)
