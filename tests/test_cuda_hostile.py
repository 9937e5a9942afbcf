"""Hostile session 7's CUDA C++ front-end bugs (C1-C5), fixed: each reproducer of
``tests/test_hostile_session7.py`` (there marked xfail) as a normal test, plus neighbouring cases.

Every expectation is computed here independently (NumPy, :mod:`struct`, exact arithmetic); a
refusal is checked for its message: the construct named at ``file:line:column``."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.compiler.errors import CompileError

pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")

_G = "__global__ void k(float* y, const float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"


def _cuda(src: str, w: int = 8, **launch):
    k = aw.cuda_kernel(src, "k")
    y = np.zeros(64, np.float32)
    k(y, np.arange(64, dtype=np.float32), 50, grid=2, workgroup=32, target="emulator", wave_width=w, **launch)
    return y


def _f32(*vals) -> np.ndarray:
    return np.asarray(vals, np.float32)


# ----------------------------------------------------------------------------- C1: parameter packs


@pytest.mark.parametrize("src, want", [
    ("template <typename... T> __device__ float sum(T... a) { return (a + ... + 0.0f); }\n" + _G +
     "    if (i < n) y[i] = sum(1.0f, 2.0f);\n}\n", 3.0),
    ("__device__ float s2() { return 0.0f; }\n"
     "template <typename H, typename... T> __device__ float s2(H h, T... t) { return h + s2(t...); }\n" + _G +
     "    if (i < n) y[i] = s2(1.0f, 2.0f, 0.0f);\n}\n", 3.0),
], ids=["fold", "recursion"])
def test_parameter_packs_hostile_reproducers(src, want):
    """hostile7 C1: every element of a pack read the last argument (4 and 1 instead of 3)."""
    y = _cuda(src)
    assert (y[:50] == want).all() and not y[50:].any(), y[:4]


def test_a_fold_over_a_pack_reads_each_element():
    """Each element of the pack its own value (x[i], 2x[i], 10): a right fold a0 - (a1 - (a2 - 0))
    in float32, which is wrong if any two elements are swapped or the same."""
    src = ("template <typename... T> __device__ float alt(T... a) { return (a - ... - 0.0f); }\n" + _G +
           "    if (i < n) y[i] = alt(x[i], 2.0f * x[i], 10.0f);\n}\n")
    y = _cuda(src)
    x = np.arange(64, dtype=np.float32)
    a0, a1, a2 = x, np.float32(2) * x, np.float32(10)
    want = a0 - (a1 - (a2 - np.float32(0)))
    assert np.array_equal(y[:50], want[:50]) and not y[50:].any()


def test_a_recursive_variadic_function_with_mixed_types():
    """h + s(t...) over (int, float, double): each element converted from its own type."""
    src = ("__device__ double s() { return 0.0; }\n"
           "template <typename H, typename... T> __device__ double s(H h, T... t) { return h * 3.0 + s(t...); }\n"
           + _G + "    if (i < n) y[i] = (float)s(i, x[i] * 0.5f, 0.25);\n}\n")
    y = _cuda(src)
    i = np.arange(50, dtype=np.float64)
    x = np.arange(50, dtype=np.float32)
    half = (x * np.float32(0.5)).astype(np.float64)
    want = (i * 3.0 + (half * 3.0 + (0.25 * 3.0 + 0.0))).astype(np.float32)
    assert np.array_equal(y[:50], want)


def test_sizeof_a_pack_and_a_pack_of_pointers():
    src = ("template <typename... T> __device__ int count(T... a) { return (int)sizeof...(a) * 10 + "
           "(int)sizeof...(T); }\n"
           "template <typename... P> __device__ void put(int i, float v, P... p) { ((p[i] = v), ...); }\n"
           "__global__ void k(float* y, float* z, int* c) {\n"
           "    int i = threadIdx.x;\n"
           "    put(i, (float)i * 2.0f, y, z);\n"
           "    c[i] = count(1, 2.0f, 3u, y);\n}\n")
    k = aw.cuda_kernel(src, "k")
    y, z, c = np.zeros(16, np.float32), np.full(16, -1, np.float32), np.zeros(16, np.int32)
    k(y, z, c, grid=1, workgroup=16, target="emulator", wave_width=8)
    want = np.arange(16, dtype=np.float32) * np.float32(2)
    assert np.array_equal(y, want) and np.array_equal(z, want)
    assert (c == 4 * 10 + 4).all()


def test_a_pack_of_structs_and_a_local_shadowing_the_pack():
    src = ("struct P { float x, y; };\n"
           "template <typename... T> __device__ float sx(T... p) { return (p.x + ...) + (p.y + ...) * 100.0f; }\n"
           "template <typename... T> __device__ float sh(T... a) {\n"
           "    float r = 0.0f; { float a = 5.0f; r += a; } return r + (a * ...); }\n"
           + _G + "    P a = {x[i], 2.0f}; P b = {3.0f, x[i] * 4.0f};\n"
           "    if (i < n) y[i] = sx(a, b) + sh(x[i], 7.0f);\n}\n")
    y = _cuda(src)
    x = np.arange(50, dtype=np.float32)
    f = np.float32
    sx = (x + f(3)) + (f(2) + x * f(4)) * f(100)
    sh = f(5) + x * f(7)
    assert np.array_equal(y[:50], (sx + sh).astype(np.float32))


def test_a_template_kernel_with_a_parameter_pack():
    """The pack's elements are kernel parameters a_0, a_1 (by position or by those names)."""
    src = "template <typename... T> __global__ void k(float* y, T... a) { y[threadIdx.x] = (a - ... - 1.0f); }\n"
    k = aw.cuda_kernel(src, "k<float, int>")
    assert [p.name for p in k.params][:3] == ["y", "a_0", "a_1"]
    y = np.zeros(8, np.float32)
    k(y, 3.5, 9, grid=1, workgroup=8, target="emulator", wave_width=8)
    assert (y == np.float32(3.5 - (9 - 1.0))).all()
    y2 = np.zeros(8, np.float32)
    k(y2, a_1=9, a_0=3.5, grid=1, workgroup=8, target="emulator", wave_width=8)
    assert np.array_equal(y, y2)


def test_a_pack_element_name_taken_by_another_parameter_is_refused():
    src = "template <typename... T> __global__ void k(float* y, int a_1, T... a) { y[0] = (a + ...) + a_1; }\n"
    k = aw.cuda_kernel(src, "k<float, float>")
    with pytest.raises(CompileError, match=r"kernel\.cu:1:\d+: parameter .*launch name is taken"):
        k.compile()
