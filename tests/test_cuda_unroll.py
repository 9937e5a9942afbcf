"""The CUDA front end's unrolled counted loops (issue 28, item 3): an innermost ``for (...; k < E;
k += s)`` runs several iterations per test of a guard, then the original loop runs the rest.
Each kernel folds its iterations into an order-sensitive value (``acc = acc * 3 + x[k]``, wrapping
as C's unsigned/int arithmetic does), so a missing, extra or reordered iteration changes the
result; the expected values are Python integer arithmetic on the same trip sequences. Loops that
must not be unrolled (the bound written in the body, a barrier in the body, a ``break``) keep
their results and have a single loop in the compiled code."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from tiers import DEFAULT_W

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

TARGETS = [pytest.param("emulator", 8, id="emulator-W8"),
           pytest.param("emulator", 32, id="emulator-W32", marks=pytest.mark.sweep)] + [
    pytest.param(t, DEFAULT_W[t], id=f"{t}-W{DEFAULT_W[t]}") for t in ("opencl", "cpu")
    if t in aw.available_targets()]

SRC = r"""
__global__ void lt_signed(int* out, const int* x, int lo, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = lo + t; k < hi; k++) acc = acc * 3 + x[k & 255];
    out[t] = acc;
}
__global__ void le_step3(int* out, const int* x, int lo, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = lo - t; k <= hi; k += 3) acc = acc * 3 + x[k & 255];
    out[t] = acc;
}
__global__ void near_int_max(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = hi - t; k < hi; k++) acc = acc * 3 + x[k & 255];
    out[t] = acc;
}
__global__ void unsigned_top(unsigned* out, const unsigned* x, unsigned lo, unsigned hi) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 1u;
    for (unsigned k = lo + t; k < hi; k += 2u) acc = acc * 3u + x[k & 255u];
    out[t] = acc;
}
__global__ void wide_bound(int* out, const int* x, int lo, long long hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = lo + t; k < hi; k++) acc = acc * 3 + x[k & 255];
    out[t] = acc;
}
__global__ void bound_in_buffer(int* out, const int* x, const int* lim) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = 0; k < lim[t]; ++k) acc = acc * 3 + x[(k + t) & 255];
    out[t] = acc;
}
__global__ void warp_stride(int* out, const int* x, const int* len) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize;
    int acc = 1;
    for (int e = lane; e < len[t]; e += warpSize) acc = acc * 3 + x[e & 255];
    out[t] = acc;
}
__global__ void bound_written(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = t; k < hi; k++) { acc = acc * 3 + x[k & 255]; if (x[k & 255] > 90) hi--; }
    out[t] = acc;
}
__global__ void with_barrier(int* out, const int* x, int hi) {
    __shared__ int s[64];
    int t = threadIdx.x;
    int acc = 1;
    for (int k = 0; k < hi; k++) {
        s[t] = x[(k + t) & 255]; __syncthreads(); acc = acc * 3 + s[63 - t]; __syncthreads();
    }
    out[t] = acc;
}
__global__ void with_break(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = t; k < hi; k++) { if (x[k & 255] > 95) break; acc = acc * 3 + x[k & 255]; }
    out[t] = acc;
}
__global__ void bound_through_pointer(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int n = hi, acc = 1;
    int* pn = &n;  /* the bound's address escapes before the loop */
    for (int k = t; k < n; k++) { acc = acc * 3 + x[k & 255]; if (x[k & 255] > 90) *pn -= 1; }
    out[t] = acc;
}
#define AT(i) x[(i) & 255]
__global__ void paren_counter(int* out, const int* x, int lo, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = (lo) + t; (k) < (hi); (k)++) acc = acc * 3 + AT(k);  /* a macro's parentheses */
    out[t] = acc;
}
__global__ void paren_written(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1;
    for (int k = t; k < hi; k++) { acc = acc * 3 + AT(k); if (AT(k) > 90) ((hi)) -= 1; }
    out[t] = acc;
}
__global__ void counter_through_pointer(int* out, const int* x, int hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 1, k = t;
    int* pk = &k;
    for (k = t; k < hi; k++) { acc = acc * 3 + x[k & 255]; if (x[k & 255] > 90) *pk += 1; }
    out[t] = acc;
}
"""

N = 64
X = np.random.default_rng(28).integers(0, 100, 256).astype(np.int32)
M32 = 0xFFFFFFFF


def _fold(ks, x=X, unsigned=False):
    acc = 1
    for k in ks:
        acc = (acc * 3 + int(x[k & 255])) & M32
    return acc if unsigned else (acc - (1 << 32) if acc >> 31 else acc)


def _run(name, args, out_dtype, target, w, **kw):
    k = aw.cuda_kernel(SRC, name)
    out = np.zeros(N, out_dtype)
    k(out, *args, grid=1, workgroup=N, target=target, wave_width=w, **kw)
    return k, out


def _loops(k) -> int:
    return sum(1 for i in k.compile().kernels[0].code if i.mnemonic == "loop")


def _bound_written(t: int, hi: int) -> int:
    """The fold of a loop from t while k < hi whose body lowers hi by one after each x[k] > 90."""
    ks, kk = [], t
    while kk < hi:
        ks.append(kk)
        if X[kk & 255] > 90:
            hi -= 1
        kk += 1
    return _fold(ks)


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_counted_loops_run_every_iteration_in_order(target: str, w: int) -> None:
    # trip counts 0 .. 63 (every remainder of every factor), signed and <=, steps 1 and 3
    k, out = _run("lt_signed", (X, 5, 40), np.int32, target, w)
    assert _loops(k) == 2  # the unrolled loop, then the original for the rest
    np.testing.assert_array_equal(out, [_fold(range(5 + t, 40)) for t in range(N)])
    k, out = _run("le_step3", (X, 60, 70), np.int32, target, w)
    assert _loops(k) == 2
    np.testing.assert_array_equal(out, [_fold(range(60 - t, 71, 3)) for t in range(N)])


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_bounds_at_the_top_of_the_type_do_not_wrap(target: str, w: int) -> None:
    imax = 2**31 - 1
    _, out = _run("near_int_max", (X, imax), np.int32, target, w)
    np.testing.assert_array_equal(out, [_fold(range(imax - t, imax)) for t in range(N)])
    lo, hi = M32 - 100, M32 - 1  # k + 2j past hi would wrap past 2^32 - 1: the guard stops first
    _, out = _run("unsigned_top", (X.astype(np.uint32), lo, hi), np.uint32, target, w)
    np.testing.assert_array_equal(out, np.array([_fold(range(lo + t, hi, 2), unsigned=True) for t in range(N)],
                                                np.uint32))


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_a_64_bit_comparison_and_a_bound_read_from_a_buffer(target: str, w: int) -> None:
    k, out = _run("wide_bound", (X, -20, 25), np.int32, target, w)
    assert _loops(k) == 2
    np.testing.assert_array_equal(out, [_fold(range(-20 + t, 25)) for t in range(N)])
    lim = np.random.default_rng(1).integers(-3, 70, N).astype(np.int32)
    k, out = _run("bound_in_buffer", (X, lim), np.int32, target, w)
    assert _loops(k) == 2
    np.testing.assert_array_equal(out, [_fold([(j + t) & 255 for j in range(lim[t])]) for t in range(N)])


@pytest.mark.parametrize("w", [8, 16, pytest.param(32, marks=pytest.mark.sweep), 64])
def test_a_warp_strided_loop(w: int) -> None:
    ln = np.random.default_rng(2).integers(0, 300, N).astype(np.int32)
    k, out = _run("warp_stride", (X, ln), np.int32, "emulator", w)
    assert _loops(k) == 4  # in each of the kernel's two bodies (for W = 32 and the generic one)
    wc = min(w, 32)
    np.testing.assert_array_equal(out, [_fold(range(t % wc, ln[t], wc)) for t in range(N)])


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_loops_that_must_not_be_unrolled_keep_their_meaning(target: str, w: int) -> None:
    k, out = _run("bound_written", (X, 50), np.int32, target, w)
    assert _loops(k) == 1

    np.testing.assert_array_equal(out, [_bound_written(t, 50) for t in range(N)])
    k, out = _run("with_barrier", (X, 9), np.int32, target, w)
    assert _loops(k) == 1
    np.testing.assert_array_equal(out, [_fold([(j + 63 - t) & 255 for j in range(9)]) for t in range(N)])
    k, out = _run("with_break", (X, 45), np.int32, target, w)
    assert _loops(k) == 1

    def broken(t):
        ks = []
        for kk in range(t, 45):
            if X[kk & 255] > 95:
                break
            ks.append(kk)
        return _fold(ks)

    np.testing.assert_array_equal(out, [broken(t) for t in range(N)])


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_variables_written_through_a_pointer_are_not_invariant(target: str, w: int) -> None:
    # a hostile test's wrong result: `int* pn = &n;` before the loop, `*pn -= 1` in it; the
    # unroller saw no write to n in the body, tested `k < n` once per 8 iterations and overshot
    k, out = _run("bound_through_pointer", (X, 50), np.int32, target, w)
    assert _loops(k) == 1

    np.testing.assert_array_equal(out, [_bound_written(t, 50) for t in range(N)])
    k, out = _run("counter_through_pointer", (X, 50), np.int32, target, w)
    assert _loops(k) == 1

    def skipping(t):
        ks, kk = [], t
        while kk < 50:
            ks.append(kk)
            if X[kk & 255] > 90:
                kk += 1
            kk += 1
        return _fold(ks)

    np.testing.assert_array_equal(out, [skipping(t) for t in range(N)])


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_parentheses_around_the_counter_and_the_bound(target: str, w: int) -> None:
    # a counter read in parentheses (a macro's `x[(i) & 255]`) is still only read: the loop unrolls;
    # a bound written in parentheses, `((hi)) -= 1`, is still written: it does not
    k, out = _run("paren_counter", (X, 5, 40), np.int32, target, w)
    assert _loops(k) == 2
    np.testing.assert_array_equal(out, [_fold(range(5 + t, 40)) for t in range(N)])
    k, out = _run("paren_written", (X, 50), np.int32, target, w)
    assert _loops(k) == 1

    np.testing.assert_array_equal(out, [_bound_written(t, 50) for t in range(N)])
