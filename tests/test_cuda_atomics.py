"""The CUDA atomics beyond atomicAdd (issue 28): atomicSub, atomicMin/atomicMax (int and
unsigned), atomicAnd/Or/Xor, atomicExch (int and float), atomicCAS (a compare-and-swap loop: a
float maximum and a counter), on global and ``__shared__`` memory, and ``__threadfence`` /
``__threadfence_block`` (the last-block reduction). Only results that do not depend on the order
the atomics run in are compared, each against NumPy: reductions, the multiset of values an
exchange chain hands back, the old values an atomicAdd returns (a permutation of the prefix sums).
atomicInc/atomicDec are refused (tests/test_cuda_features.py, tests/test_cuda_refusals.py)."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from tiers import DEFAULT_W

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

TARGETS = [pytest.param("emulator", 8, id="emulator-W8"), pytest.param("emulator", 64, id="emulator-W64")] + [
    pytest.param(t, DEFAULT_W[t], id=f"{t}-W{DEFAULT_W[t]}") for t in ("opencl", "cpu")
    if t in aw.available_targets()]

SRC = r"""
__global__ void atoms(int* gi, unsigned* gu, float* gf, int* exi, float* exf, int* olds, float* oldf,
                      const int* vi, const unsigned* vu, const float* vf, int n) {
    __shared__ int si[4];
    __shared__ unsigned su[3];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) { si[0] = 0; si[1] = 0x7fffffff; si[2] = -0x7fffffff - 1; si[3] = 0;
                            su[0] = 0xffffffffu; su[1] = 0u; su[2] = 0u; }
    __syncthreads();
    if (t < n) {
        int a = vi[t];
        unsigned u = vu[t];
        atomicSub(&gi[0], a);
        atomicMin(&gi[1], a);
        atomicMax(&gi[2], a);
        atomicAnd(&gi[3], a | 0x10101);
        atomicOr(&gi[4], a & 0x7070);
        atomicXor(&gi[5], a);
        atomicMin(&gu[0], u);
        atomicMax(&gu[1], u);
        atomicSub(&gu[2], u);
        atomicAnd(&gu[3], u | 0x80000001u);
        atomicOr(&gu[4], u & 0xf0u);
        atomicXor(&gu[5], u);
        olds[t] = atomicExch(&exi[0], a);                  // a chain: each gets the one before it
        oldf[t] = atomicExch(&exf[0], vf[t]);
        int old = __float_as_int(gf[0]), assumed;           // CUDA's float atomicMax idiom
        do {
            assumed = old;
            if (__int_as_float(assumed) >= vf[t]) break;
            old = atomicCAS((int*)gf, assumed, __float_as_int(vf[t]));
        } while (old != assumed);
        int c;                                              // a CAS-loop counter
        do { c = gi[6]; } while (atomicCAS(&gi[6], c, c + 1) != c);
        atomicSub(&si[0], a);
        atomicMin(&si[1], a);
        atomicMax(&si[2], a);
        atomicXor(&si[3], a);
        atomicMin(&su[0], u);
        atomicMax(&su[1], u);
        atomicOr(&su[2], u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&gi[7], si[0]);
        atomicMin(&gi[8], si[1]);
        atomicMax(&gi[9], si[2]);
        atomicXor(&gi[10], si[3]);
        atomicMin(&gu[6], su[0]);
        atomicMax(&gu[7], su[1]);
        atomicOr(&gu[8], su[2]);
    }
}

// __threadfence: the last workgroup to finish sums the partial sums of all of them
__global__ void last_block_sum(int* partial, unsigned* count, int* total, const int* v, int n) {
    __shared__ int s[64];
    __shared__ bool last;
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? v[i] : 0;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();                                  // the partial sum before the ticket
        unsigned ticket = atomicAdd(count, 1u);
        __threadfence();                                  // the others' partial sums after the ticket
        last = ticket == gridDim.x - 1;
    }
    __threadfence_block();
    __syncthreads();
    if (last && t == 0) {
        int sum = 0;
        for (int b = 0; b < gridDim.x; b++) sum += partial[b];
        total[0] = sum;
        count[0] = 0u;
    }
}
"""

I32 = np.iinfo(np.int32)


def _wrap(x: int) -> int:
    """``x`` modulo 2^32 as an int32 value (C's int arithmetic on the emulator: wrap-around)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_atomics_give_order_free_results(target, w):
    rng = np.random.default_rng(28)
    n, wg = 200, 64
    grid = -(-n // wg)
    vi = rng.integers(I32.min, I32.max, n, dtype=np.int64).astype(np.int32)
    vu = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    vf = rng.standard_normal(n).astype(np.float32)
    gi = np.array([5, I32.max, I32.min, -1, 0, 0x1234, 0, 0, I32.max, I32.min, 0], np.int32)
    gu = np.array([0xFFFFFFFF, 0, 7, 0xFFFFFFFF, 0, 0xABCDEF, 0xFFFFFFFF, 0, 0], np.uint32)
    gf = np.array([-np.inf], np.float32)
    exi, exf = np.array([-77], np.int32), np.array([-7.5], np.float32)
    olds, oldf = np.zeros(n, np.int32), np.zeros(n, np.float32)
    aw.cuda_kernel(SRC, "atoms")(gi, gu, gf, exi, exf, olds, oldf, vi, vu, vf, n, grid=grid, workgroup=wg,
                                 target=target, wave_width=w)
    s64 = int(vi.astype(np.int64).sum())
    ex_i = [_wrap(5 - s64), vi.min(), vi.max(), np.bitwise_and.reduce(vi | 0x10101) & -1,
            np.bitwise_or.reduce(vi & 0x7070), np.bitwise_xor.reduce(vi) ^ 0x1234, n, _wrap(-s64), vi.min(),
            vi.max(), np.bitwise_xor.reduce(vi)]
    np.testing.assert_array_equal(gi, np.array(ex_i, np.int64).astype(np.int32))
    ex_u = [vu.min(), vu.max(), (7 - int(vu.astype(np.uint64).sum())) & 0xFFFFFFFF,
            np.bitwise_and.reduce(vu | np.uint32(0x80000001)), np.bitwise_or.reduce(vu & np.uint32(0xF0)),
            np.bitwise_xor.reduce(vu) ^ 0xABCDEF, vu.min(), vu.max(), np.bitwise_or.reduce(vu)]
    np.testing.assert_array_equal(gu, np.array(ex_u, np.uint64).astype(np.uint32))
    assert gf[0] == vf.max()
    # an exchange chain hands back every value but the last one written, and the first value
    assert sorted([*olds.tolist(), int(exi[0])]) == sorted([*vi.tolist(), -77])
    assert sorted([*oldf.tolist(), float(exf[0])]) == sorted([*vf.tolist(), -7.5])


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_threadfence_last_block_reduction(target, w):
    rng = np.random.default_rng(3)
    n, wg = 1000, 64
    grid = -(-n // wg)
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    partial, count, total = np.zeros(grid, np.int32), np.zeros(1, np.uint32), np.zeros(1, np.int32)
    k = aw.cuda_kernel(SRC, "last_block_sum")
    k(partial, count, total, v, n, grid=grid, workgroup=wg, target=target, wave_width=w)
    np.testing.assert_array_equal(partial, np.pad(v, (0, grid * wg - n)).reshape(grid, wg).sum(axis=1))
    assert total[0] == v.sum() and count[0] == 0
