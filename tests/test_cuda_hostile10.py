"""Hostile session 10's CUDA C++ front-end findings, fixed: a guarded self-include (the X-macro
idiom) and two files including each other read the user's files, with the user's line numbers;
``_Pragma("unroll")`` as ``#pragma unroll``; a pointer as a condition; an assert's text as
written (UTF-8).

Expected values are NumPy computations of what C defines; messages are checked for the
construct and its ``file:line:column``."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.compiler.cuda_frontend import compile_cuda
from anywave.compiler.errors import CompileError

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

WS = [8, 64]

# ----------------------------------------------------------------------------- self-include

XMACRO = r"""#ifndef PASS2
#define PASS2
#define OP +
#define NAME add
#include "xm.cu"
#undef OP
#undef NAME
#define OP *
#define NAME mul
#include "xm.cu"
#else
__global__ void NAME(int* o, const int* a) { o[threadIdx.x] = a[threadIdx.x] OP 3; }
#endif
"""


@pytest.mark.parametrize("w", WS)
def test_a_guarded_self_include_x_macro_compiles_and_runs(tmp_path, monkeypatch, w):
    """The file includes itself twice under a guard, defining one kernel per pass (valid C++,
    as nvcc takes it): the include reads the user's file, not the front end's copy."""
    monkeypatch.chdir(tmp_path)  # a bare name, as `anywave compile xm.cu` gives it
    (tmp_path / "xm.cu").write_text(XMACRO)
    a = np.arange(-20, 44, dtype=np.int32)
    for name, want in (("add", a + 3), ("mul", a * 3)):
        o = np.zeros(64, np.int32)
        aw.cuda_kernel("xm.cu", name)(o, a, grid=1, workgroup=64, target="emulator", wave_width=w)
        np.testing.assert_array_equal(o, want)


def test_an_error_after_a_self_include_is_at_the_users_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = XMACRO.replace("a[threadIdx.x] OP 3;", "a[threadIdx.x] OP undefined_v;")
    (tmp_path / "xm.cu").write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "undefined_v" in t)
    col = text.splitlines()[line - 1].index("undefined_v") + 1
    with pytest.raises(CompileError) as e:
        aw.cuda_kernel("xm.cu", "add").compile()
    assert f"xm.cu:{line}:{col}: use of undeclared identifier 'undefined_v'" in str(e.value), str(e.value)
    # an unguarded self-include: clang's own error, at the include's line (never a negative line)
    (tmp_path / "self.cu").write_text('#include "self.cu"\n__global__ void k(int* o) { o[0] = 1; }\n')
    with pytest.raises(CompileError, match=r"self\.cu:1:10: #include nested too deeply") as e:
        aw.cuda_kernel("self.cu", "k").compile()
    assert ":-" not in str(e.value)


@pytest.mark.parametrize("w", WS)
def test_two_files_that_include_each_other(tmp_path, w):
    """a.cu includes b.cu, which includes a.cu back (each guarded): b.cu's include reads a.cu
    as the user wrote it; __LINE__ in each file is its own line."""
    (tmp_path / "a.cu").write_text(
        "#ifndef A_CU\n#define A_CU\n#include \"b.cu\"\n"
        "__global__ void k(int* o) { o[threadIdx.x] = twice(threadIdx.x) * 1000 + __LINE__; }\n#endif\n")
    (tmp_path / "b.cu").write_text(
        "#ifndef B_CU\n#define B_CU\n#include \"a.cu\"\n\n__device__ int twice(int v) { return 2 * v + __LINE__; }\n"
        "#endif\n")
    o = np.zeros(64, np.int32)
    aw.cuda_kernel(tmp_path / "a.cu", "k")(o, grid=1, workgroup=64, target="emulator", wave_width=w)
    np.testing.assert_array_equal(o, (2 * np.arange(64) + 5) * 1000 + 4)


def test_a_path_with_a_quote_is_refused_by_name():
    with pytest.raises(CompileError, match="not a source file's name"):
        compile_cuda("__global__ void k(int* o) { o[0] = 1; }", "k", path='a"b.cu')


# ----------------------------------------------------------------------------- assert text, pointer conditions

def test_an_asserts_non_ascii_text_prints_as_written(capfd):
    """The expression of a failing assert, with non-ASCII characters, a quote and a backslash
    escape in its string, prints as the source spells it (UTF-8; not Latin-1 mojibake)."""
    expr = 'in[t] != 3 && "ünïcode {x} %d \\n ∑"'
    src = "#include <cassert>\n__global__ void k(int* out, const int* in) {\n    int t = threadIdx.x;\n" \
          f"    assert({expr});\n    out[t] = 1;\n}}\n"
    in_ = (np.arange(16) % 7).astype(np.int32)
    o = np.zeros(16, np.int32)
    aw.cuda_kernel(src, "k")(o, in_, grid=1, workgroup=16, target="emulator", wave_width=8)
    np.testing.assert_array_equal(o, np.where(in_ != 3, 1, 0))
    want = [f"kernel.cu:4: k(int *, const int *): block: [0,0,0], thread: [{t},0,0] Assertion `{expr}` failed."
            for t in range(16) if in_[t] == 3]
    assert capfd.readouterr().out.splitlines() == want


POINTER_COND = r"""
#include <cassert>
__global__ void k(int* out, const int* in) {
    int t = threadIdx.x;
    const int* p = in + t;
    assert(p);
    int r = 0;
    if (p) r += 1;
    if (!p) r += 10;
    if (p && in[t] > 2) r += 100;
    if (!in || in[t] > 4) r += 1000;
    r += p ? 10000 : 20000;
    out[t] = r;
}
"""


@pytest.mark.parametrize("w", WS)
def test_a_pointer_as_a_condition_means_not_null(capfd, w):
    """assert(p), if (p), !p, p && ..., !in || ...: C's "not null"; every pointer the front end
    can form points into a buffer (a null pointer is refused), so each is true."""
    in_ = np.arange(64, dtype=np.int32) % 7
    o = np.zeros(64, np.int32)
    aw.cuda_kernel(POINTER_COND, "k")(o, in_, grid=1, workgroup=64, target="emulator", wave_width=w)
    np.testing.assert_array_equal(o, 1 + np.where(in_ > 2, 100, 0) + np.where(in_ > 4, 1000, 0) + 10000)
    assert capfd.readouterr().out == ""  # no assert failed


def test_a_null_pointer_is_still_refused():
    src = "__global__ void k(int* out) {\n    int* p = out;\n    if (out[0]) p = nullptr;\n    out[1] = p ? 1 : 2;\n}\n"
    with pytest.raises(CompileError, match=r"kernel\.cu:3:\d+: .*null pointer"):
        aw.cuda_kernel(src, "k").compile()
