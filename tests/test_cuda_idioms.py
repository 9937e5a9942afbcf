"""Common CUDA idioms the front end takes unchanged (issue 28): ``#pragma unroll`` in its forms,
``++``/``--`` on pointers (``*p++ = v``), ``(void)x;`` and ``assert`` (``<cassert>``). Expected
values are Python/NumPy computations of what C defines (iteration sequences folded in order,
pointer walks by element), and for ``assert`` CUDA's message text written out here."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import anywave as aw
from tiers import DEFAULT_W

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

#: the emulator at W = 8 and 64, each compiled CPU target at its default-tier W
TARGETS = [pytest.param("emulator", 8, id="emulator-W8"), pytest.param("emulator", 64, id="emulator-W64")] + [
    pytest.param(t, DEFAULT_W[t], id=f"{t}-W{DEFAULT_W[t]}") for t in ("opencl", "cpu")
    if t in aw.available_targets()]

X = np.random.default_rng(28).integers(0, 100, 256).astype(np.int32)
N = 64
M32 = 0xFFFFFFFF

# an order-sensitive fold (acc = acc * 3 + x[k]): a missing, extra or reordered iteration changes it
UNROLL = r"""
#define FOLD(k) acc = acc * 3 + x[k & 255]
__global__ void hinted(int* out, const int* x, int hi) {
    int t = threadIdx.x, acc = 1;
    HINT
    for (int k = BEGIN; k < LIMIT; k++) FOLD(k);
    out[t] = acc;
}
"""


def _fold(ks):
    acc = 1
    for k in ks:
        acc = (acc * 3 + int(X[k & 255])) & M32
    return acc - (1 << 32) if acc >> 31 else acc


def _code(k):
    code = k.compile().kernels[0].code
    return (sum(1 for i in code if i.mnemonic == "loop"), sum(1 for i in code if i.mnemonic.startswith("ld.device")))


#: (pragma, start, bound, loops in the code, loads of x in the code): the bound 8 with start 0 is a
#: constant trip count; ``hi`` (a parameter) and a start of ``t`` are not
HINTS = [
    ("", "0", "8", 0, 8),                               # no pragma: a constant trip count is unrolled in full
    ("#pragma unroll", "0", "8", 0, 8),                 # bare: the default choice (in full here)
    ("#pragma unroll 1", "0", "8", 1, 1),               # kept rolled
    ("#pragma nounroll", "0", "8", 1, 1),
    ("#pragma clang loop unroll(disable)", "0", "8", 1, 1),
    ("#pragma unroll 4", "0", "8", 2, 5),               # 4 iterations per test, then the rest loop
    ("#pragma unroll 8", "0", "8", 0, 8),               # N >= trip count: in full
    ("#pragma unroll", "t", "hi", 2, 17),               # not constant: the default factor (16 for this body)
    ("#pragma unroll 1", "t", "hi", 1, 1),
    ("#pragma unroll (2)", "t", "hi", 2, 3),
    ("#pragma unroll 3", "t", "hi", 2, 4),
    ("#pragma unroll FACTOR", "t", "hi", 2, 17),        # not a literal: the default
    # the operator form, as macros such as CUTLASS_PRAGMA_UNROLL expand to: the same hints
    ('_Pragma("unroll 4")', "0", "8", 2, 5),
    ('_Pragma("nounroll")', "t", "hi", 1, 1),
    ('_Pragma("unroll (2)")', "t", "hi", 2, 3),
    ("UNROLL", "t", "hi", 2, 17),                        # #define UNROLL _Pragma("unroll")
    ("UNROLL4", "0", "8", 2, 5),                         # #define UNROLL4 _Pragma("unroll 4")
]

#: the macros the HINTS use
HINT_MACROS = '#define FACTOR 4\n#define UNROLL _Pragma("unroll")\n#define UNROLL4 _Pragma("unroll 4")\n'


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_pragma_unroll_forms_keep_the_iterations(target, w):
    for hint, begin, limit, loops, loads in HINTS:
        src = HINT_MACROS + UNROLL.replace("HINT", hint).replace("BEGIN", begin).replace("LIMIT", limit)
        k = aw.cuda_kernel(src, "hinted")
        assert _code(k) == (loops, loads), (hint, begin, limit, _code(k))
        for hi in (37, 3):
            out = np.zeros(N, np.int32)
            k(out, X, hi, grid=1, workgroup=N, target=target, wave_width=w)
            start = (lambda t: 0) if begin == "0" else (lambda t: t)
            end = 8 if limit == "8" else hi
            np.testing.assert_array_equal(out, [_fold(range(start(t), end)) for t in range(N)], err_msg=hint)


@pytest.mark.parametrize("w", [8, 64])
def test_pragma_unroll_through_a_macro_of_a_header(tmp_path, w):
    """A _Pragma macro defined in a header (the statement's tokens start in another file): the
    hint is read from the macro's definition, and the loop computes the same."""
    (tmp_path / "hints.h").write_text('#pragma once\n#define HDR_UNROLL3 _Pragma("unroll 3")\n')
    cu = tmp_path / "k.cu"
    cu.write_text('#include "hints.h"\n' + UNROLL.replace("HINT", "HDR_UNROLL3").replace("BEGIN", "t")
                  .replace("LIMIT", "hi"))
    k = aw.cuda_kernel(cu, "hinted")
    assert _code(k) == (2, 4)  # as #pragma unroll 3
    out = np.zeros(N, np.int32)
    k(out, X, 37, grid=1, workgroup=N, target="emulator", wave_width=w)
    np.testing.assert_array_equal(out, [_fold(range(t, 37)) for t in range(N)])


def test_pragma_unroll_before_other_statements_and_nested_loops():
    """A hint applies to the loop right after it, not to loops inside it; before a while loop it
    is taken and ignored."""
    src = r"""
__global__ void k(int* out, const int* x, int hi) {
    int t = threadIdx.x, acc = 1, j = 0;
#pragma unroll 1
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 3; b++) acc = acc * 3 + x[(a * 3 + b + t) & 255];
    }
#pragma unroll
    while (j < hi) { acc = acc * 3 + x[j & 255]; j++; }
    out[t] = acc;
}
"""
    k = aw.cuda_kernel(src, "k")
    assert _code(k)[0] == 2  # the outer loop kept, its inner one unrolled in full; the while loop
    out = np.zeros(N, np.int32)
    k(out, X, 5, grid=1, workgroup=N, target="emulator", wave_width=8)
    np.testing.assert_array_equal(out, [_fold([*(range(t, t + 6)), *range(5)]) for t in range(N)])


POINTERS = r"""
__global__ void walk(int* out, const int* in, int* back, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int* p = in + 4 * t;
    int* q = out + 4 * t;
    *q++ = *p++;              // element 0
    int v = *p++;             // element 1
    *q++ = v * 10;
    ++p;                      // skip element 2
    *q = *p--;                // element 3; p back to element 2
    q++;
    int e2 = *p;
    *q = e2 + (*--p) * 100;   // element 2 + element 1 * 100
    back++;                   // a parameter written: a pointer variable into its buffer
    back[t] = t;
    --back;
    back[n + 1 + t] = 2 * t;
    __shared__ int s[64];
    int* sp = s + threadIdx.x;
    *sp++ = t;
    sp--;
    *sp += 1;
    back[2 * n + 1 + t] = *sp;
    (void)v;
    (void)0;
    (void)(q[0] += 0);
}
"""


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_pointer_increments_and_void_casts(target, w):
    n = 64
    inp = np.random.default_rng(5).integers(-1000, 1000, 4 * n).astype(np.int32)
    out = np.zeros(4 * n, np.int32)
    back = np.full(3 * n + 1, -1, np.int32)
    aw.cuda_kernel(POINTERS, "walk")(out, inp, back, n, grid=2, workgroup=32, target=target, wave_width=w)
    e = inp.reshape(n, 4)
    exp = np.stack([e[:, 0], e[:, 1] * 10, e[:, 3], e[:, 2] + e[:, 1] * 100], axis=1).reshape(-1)
    np.testing.assert_array_equal(out, exp)
    eb = np.full_like(back, -1)
    eb[1:n + 1] = np.arange(n)
    eb[n + 1:2 * n + 1] = 2 * np.arange(n)
    eb[2 * n + 1:] = np.arange(n) + 1
    np.testing.assert_array_equal(back, eb)


ASSERT = r"""
#include <cassert>
__device__ int checked(int v) {
    assert(v % 5 != 0 && "no multiples of 5");
    return v * 2;
}
__global__ void k(int* o, const int* in) {
    int t = threadIdx.x;
    o[t] = -1;
    int v = checked(in[t]);
    assert(v < 60);
    o[t] = v;
}
"""


def _assert_lines(in_, bad1, bad2):
    lines = []
    for t, v in enumerate(in_):
        if bad1(v):
            lines.append(f"kernel.cu:4: checked(int): block: [0,0,0], thread: [{t},0,0] Assertion "
                         "`v % 5 != 0 && \"no multiples of 5\"` failed.")
        elif bad2(v):
            lines.append(f"kernel.cu:11: k(int *, const int *): block: [0,0,0], thread: [{t},0,0] Assertion "
                         "`v < 60` failed.")
    return lines


@pytest.mark.parametrize(("target", "w"), TARGETS)
def test_assert_prints_cudas_message_and_ends_the_thread(capfd, target, w):
    """A failing assert prints CUDA's message (file:line, the function, block and thread, the
    expression) and ends that thread: its later store does not happen; the others run on."""
    in_ = np.arange(40, dtype=np.int32)
    o = np.zeros(40, np.int32)
    aw.cuda_kernel(ASSERT, "k")(o, in_, grid=1, workgroup=40, target=target, wave_width=w)
    exp = np.where(in_ % 5 == 0, -1, np.where(2 * in_ >= 60, -1, 2 * in_))
    np.testing.assert_array_equal(o, exp)
    lines = capfd.readouterr().out.splitlines()
    assert lines == _assert_lines(in_, lambda v: v % 5 == 0, lambda v: 2 * v >= 60)


ASSERT_BARRIER = r"""
#include <cassert>
__global__ void k(int* out, const int* in) {
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = t;
    assert(in[t] != 3);
    __syncthreads();
    out[t] = s[63 - t] + 1;
}
"""


@pytest.mark.parametrize(("target", "w"), [p for p in TARGETS if p.values[0] in ("emulator", "cpu")])
def test_failed_assert_then_barrier_raises_and_still_prints_the_asserts(capfd, target, w):
    """Threads ended by a failed assert miss the next ``__syncthreads``: the launch fails
    (divergent barrier), and the messages those threads printed before it reach the output."""
    in_ = (np.arange(64) % 7).astype(np.int32)
    o = np.zeros(64, np.int32)
    with pytest.raises(Exception, match="divergent barrier") as info:
        aw.cuda_kernel(ASSERT_BARRIER, "k")(o, in_, grid=1, workgroup=64, target=target, wave_width=w)
    bad = [t for t in range(64) if in_[t] == 3]
    exp = [f"kernel.cu:7: k(int *, const int *): block: [0,0,0], thread: [{t},0,0] Assertion `in[t] != 3` failed."
           for t in bad]
    assert capfd.readouterr().out.splitlines() == exp
    if sys.version_info >= (3, 11):  # the error's note (add_note) says so
        assert any(f"printed {len(bad)} line(s) before the error" in n for n in info.value.__notes__)


def test_assert_with_ndebug_compiles_to_nothing(capfd):
    in_ = np.arange(40, dtype=np.int32)
    o = np.zeros(40, np.int32)
    k = aw.cuda_kernel("#define NDEBUG\n" + ASSERT, "k")
    assert not k.compile().kernels[0].prints  # no print record, no print buffer
    k(o, in_, grid=1, workgroup=40, target="emulator", wave_width=8)
    np.testing.assert_array_equal(o, 2 * in_)
    assert capfd.readouterr().out == ""
    # <assert.h> too, and NDEBUG given as a clang argument
    k2 = aw.cuda_kernel(ASSERT.replace("<cassert>", "<assert.h>"), "k", clang_args=("-DNDEBUG",))
    assert not k2.compile().kernels[0].prints
    assert aw.cuda_kernel(ASSERT.replace("<cassert>", "<assert.h>"), "k").compile().kernels[0].prints


def test_assert_without_the_header_is_clangs_undeclared_identifier():
    with pytest.raises(aw.CompileError, match=r"kernel\.cu:2:3: use of undeclared identifier 'assert'"):
        aw.cuda_kernel("__global__ void k(int* o) {\n  assert(o[0] > 0);\n}", "k").compile()
