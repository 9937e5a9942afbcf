"""CUDA's warp built-ins in the CUDA front end (anywave.compiler.cuda_warp): shuffles, ballots,
votes and ``warpSize`` at every wave width, checked against a Python model written from the
definitions in docs/guide/cuda.md ("Warps at every W"), which at W = 32 are PTX's ``shfl.sync``
rules; warp reductions against NumPy sums; the refusal of volatile access without ``__syncwarp``."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from tiers import cases

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

WS = (8, 16, 32, 64)
#: the emulator at every W; each compiled CPU target at its default-tier W, the others in the sweep tier
RUNTIMES = [pytest.param(*(p.values if hasattr(p, "values") else p), marks=getattr(p, "marks", ()),
                         id="{}-W{}".format(*(p.values if hasattr(p, "values") else p)))
            for p in [("emulator", w) for w in WS] + cases(
                [(t, w) for t in ("opencl", "cpu") if t in aw.available_targets() for w in WS])]


SHFL = r"""
__global__ void shfl(int* out, long long* out64, const int* vals, const int* bs, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = vals[t], b = bs[t];
    long long w = ((long long)v << 33) ^ (long long)b;
    out[8 * t + 0] = __shfl_sync(0xffffffffu, v, b);
    out[8 * t + 1] = __shfl_up_sync(0xffffffffu, v, (unsigned)b);
    out[8 * t + 2] = __shfl_down_sync(0xffffffffu, v, (unsigned)b);
    out[8 * t + 3] = __shfl_xor_sync(0xffffffffu, v, b);
    out[8 * t + 4] = __shfl_sync(0xffffffffu, v, b, width);
    out[8 * t + 5] = __shfl_up_sync(0xffffffffu, v, (unsigned)b, width);
    out[8 * t + 6] = __shfl_down_sync(0xffffffffu, v, (unsigned)b, width);
    out[8 * t + 7] = __shfl_xor_sync(0xffffffffu, v, b, width);
    out64[t] = __shfl_down_sync(0xffffffffu, w, (unsigned)b, width);
}
"""


def _model_shfl(vals: np.ndarray, bs: np.ndarray, W: int, width: int | None, mode: str) -> np.ndarray:
    """Each thread's result under the definitions: warp of Wc = min(W, 32) lanes, segment
    seg = min(width, Wc), lane offsets modulo Wc; an invalid source lane gives the own value."""
    wc = min(W, 32)
    seg = wc if width is None else min(width, wc)
    out = np.empty_like(vals)
    for t in range(vals.size):
        lane = t % W  # a workgroup is a whole number of waves here
        l_ = lane % wc
        base = lane - l_
        b = int(bs[t])
        b5 = b & (wc - 1)
        lo = l_ & ~(seg - 1)
        hi = lo + seg - 1
        if mode == "idx":
            j, ok = lo | (b & (seg - 1)), True
        elif mode == "up":
            j, ok = l_ - b5, l_ - lo >= b5
        elif mode == "down":
            j, ok = l_ + b5, l_ + b5 <= hi
        else:
            j, ok = l_ ^ b5, (l_ ^ b5) <= hi
        src = t - lane + base + j if ok else t
        out[t] = vals[src]
    return out


@pytest.mark.parametrize(("target", "w"), RUNTIMES)
@pytest.mark.parametrize("width", [8, 16])
def test_shuffles_follow_the_definition(target, w, width):
    rng = np.random.default_rng(11 + w)
    n = 128  # two workgroups of 64: whole waves at every W
    vals = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    bs = rng.integers(0, 40, n).astype(np.int32)  # offsets past the warp and the segment too
    out = np.zeros(8 * n, np.int32)
    out64 = np.zeros(n, np.int64)
    aw.cuda_kernel(SHFL, "shfl")(out, out64, vals, bs, width, grid=2, workgroup=64, target=target, wave_width=w)
    got = out.reshape(n, 8)
    for col, (mode, wd) in enumerate([(m, None) for m in ("idx", "up", "down", "xor")]
                                     + [(m, width) for m in ("idx", "up", "down", "xor")]):
        exp = _model_shfl(vals, bs, w, wd, mode)
        assert np.array_equal(got[:, col], exp), (mode, wd)
    v64 = (vals.astype(np.int64) << 33) ^ bs.astype(np.int64)
    assert np.array_equal(out64, _model_shfl(v64, bs, w, width, "down"))


REDUCE = r"""
__device__ float warp_sum(float v) {
    for (int off = warpSize / 2; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}
__global__ void sums(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = warp_sum(i < n ? in[i] : 0.0f);
    if (threadIdx.x % warpSize == 0) out[i / warpSize] = v;
}
__global__ void sums32(float* out, const float* in) {   // written for NVIDIA's 32-lane warps
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    if ((threadIdx.x & 31) == 0) out[i >> 5] = v;
}
"""


def _tree(x: np.ndarray, k: int, mode: str) -> np.ndarray:
    """float32 sums of groups of k consecutive values in the shuffle tree's order (lane 0's)."""
    g = x.reshape(-1, k).astype(np.float32).copy()
    off = k // 2
    while off:
        if mode == "down":  # lane l adds lane l + off (lanes past the end keep their value)
            g[:, :off] = g[:, :off] + g[:, off:2 * off]
        else:  # xor: lane 0 adds lane off, every lane of the lower half its partner
            g[:, :off] = g[:, :off] + g[:, off:2 * off]
        off //= 2
    return g[:, 0]


@pytest.mark.parametrize(("target", "w"), RUNTIMES)
def test_warp_reductions(target, w):
    rng = np.random.default_rng(12)
    n = 512
    x = rng.standard_normal(n).astype(np.float32)
    wc = min(w, 32)
    out = np.zeros(n // wc, np.float32)
    k = aw.cuda_kernel(REDUCE, "sums")
    k(out, x, n, grid=4, workgroup=128, target=target, wave_width=w)
    assert np.array_equal(out.view(np.uint32), _tree(x, wc, "down").view(np.uint32))
    assert not k.compile().kernels[0].flags & 2  # W-dependent: no w_invariant flag
    # the kernel written for 32-lane warps: the same per-32 sums at W = 32 and 64 (the warp is
    # half a 64-lane wave); at W = 8 and 16 a 32-lane group is not a warp
    if w >= 32:
        out32 = np.zeros(n // 32, np.float32)
        aw.cuda_kernel(REDUCE, "sums32")(out32, x, grid=4, workgroup=128, target=target, wave_width=w)
        assert np.array_equal(out32.view(np.uint32), _tree(x, 32, "xor").view(np.uint32))


VOTE = r"""
__global__ void vote(unsigned* out, const int* x) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned act = 0;
    if (x[t] % 3 != 0) act = __activemask();            // the lanes that took the branch
    out[5 * t + 0] = act;
    out[5 * t + 1] = __ballot_sync(0xffffffffu, x[t] > 50);
    out[5 * t + 2] = __any_sync(0xffffffffu, x[t] == 7);
    out[5 * t + 3] = __all_sync(0xffffffffu, x[t] < 99);
    out[5 * t + 4] = warpSize * 1000 + __popc(out[5 * t + 1]) + 100 * __ffs(out[5 * t + 1]);
}
"""


@pytest.mark.parametrize(("target", "w"), RUNTIMES)
def test_ballot_vote_activemask(target, w):
    rng = np.random.default_rng(13)
    n = 256
    x = rng.integers(0, 100, n).astype(np.int32)
    out = np.zeros(5 * n, np.uint32)
    aw.cuda_kernel(VOTE, "vote")(out, x, grid=2, workgroup=128, target=target, wave_width=w)
    got = out.reshape(n, 5)
    wc = min(w, 32)
    exp = np.zeros((n, 5), np.uint32)
    for g0 in range(0, n, wc):
        warp = x[g0:g0 + wc]
        act = sum(1 << j for j in range(wc) if warp[j] % 3 != 0)
        bal = sum(1 << j for j in range(wc) if warp[j] > 50)
        ffs = (bal & -bal).bit_length()
        for j in range(wc):
            exp[g0 + j] = [act if warp[j] % 3 != 0 else 0, bal, int((warp == 7).any()), int((warp < 99).all()),
                           wc * 1000 + bin(bal).count("1") + 100 * ffs]
    assert np.array_equal(got, exp)


def test_w_invariant_flag_only_without_warp_builtins():
    k = aw.cuda_kernel("__global__ void k(int* o) { o[threadIdx.x] = threadIdx.x; }", "k")
    assert k.compile().kernels[0].flags & 2
    k = aw.cuda_kernel("__global__ void k(int* o) { o[threadIdx.x] = warpSize; }", "k")
    assert not k.compile().kernels[0].flags & 2


#: volatile accesses compile only in a kernel that calls __syncwarp (the pre-Volta idiom relies on
#: lock step: refused at the first volatile access); tests/test_wave_barrier.py runs the idiom
_NO_SYNCWARP = "a volatile memory access in a kernel without __syncwarp()"
REFUSED = [
    ("volatile shared", "__global__ void k(float* o) {\n  __shared__ float s[64];\n  volatile float* v = s;\n"
     "  v[threadIdx.x] += v[threadIdx.x + 16];\n  o[0] = s[0];\n}", _NO_SYNCWARP, 4, 3),
    ("volatile deref", "__global__ void k(volatile int* o) {\n  *o = 1;\n}", _NO_SYNCWARP, 2, 3),
]


@pytest.mark.parametrize(("what", "src", "msg", "line", "col"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(what, src, msg, line, col):
    with pytest.raises(aw.CompileError) as e:
        aw.cuda_kernel(src, "k").compile()
    text = str(e.value)
    assert msg in text, text
    assert f"kernel.cu:{line}:{col}:" in text, text
