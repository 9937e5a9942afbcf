"""Inlined functions called on a temporary: a buffer load, an arithmetic expression or another
call passed straight as an argument (``f(x[i])``, ``aw.log(x[i])``).

The frontend used to retarget the instruction defining such a temporary when the function's
first statement copied the parameter (``out = x``), leaving the parameter's register undefined
for the rest of the body: ``aw.log(x[i])`` gave -inf, ``f(x[i])`` read ``x`` as 0 inside its
``if``. A chained assignment ``a = b = x[i]``, or a copy out of a tuple ``t = (x[i], 1.0)``
(in the kernel or passed to a function), lost the other holder's value the same way.

Expectations are NumPy's: the functions' float32 arithmetic evaluated on the host (the
arithmetic is plain adds, multiplies and compares, no contraction), and for the standard
library float64 NumPy with the error bounds of tests/test_compiler_math.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import anywave as aw

WIDTHS = (8, 32)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


@aw.func
def _f_if(x):
    out = x
    if x == 0.0:
        out = -x
    return out


@aw.func
def _f_ifelse(x):
    out = x
    if x > 1.0:
        out = x * 2.0
    else:
        out = x - 1.0
    return out


@aw.func
def _f_loop(x, m):
    acc = x
    for _ in range(m):
        acc = acc + x
    return acc


@aw.func
def _f_inner(y):
    out = y
    if y < 0.0:
        out = -y
    return out


@aw.func
def _f_nested(x):
    return _f_inner(x) + x


@aw.kernel
def _calls(x: aw.In[aw.f32], o: aw.Out[aw.f32], m: aw.i32, *, fn: str = "if", form: str = "load"):
    i = aw.global_id(0)
    if fn == "if":
        if form == "load":
            o[i] = _f_if(x[i])
        elif form == "arith":
            o[i] = _f_if(x[i] * 2.0 - 1.0)
        else:
            o[i] = _f_if(min(x[i], 2.5))
    elif fn == "ifelse":
        if form == "load":
            o[i] = _f_ifelse(x[i])
        elif form == "arith":
            o[i] = _f_ifelse(x[i] * 2.0 - 1.0)
        else:
            o[i] = _f_ifelse(min(x[i], 2.5))
    elif fn == "loop":
        if form == "load":
            o[i] = _f_loop(x[i], m)
        elif form == "arith":
            o[i] = _f_loop(x[i] * 2.0 - 1.0, m)
        else:
            o[i] = _f_loop(min(x[i], 2.5), m)
    else:
        if form == "load":
            o[i] = _f_nested(x[i])
        elif form == "arith":
            o[i] = _f_nested(x[i] * 2.0 - 1.0)
        else:
            o[i] = _f_nested(min(x[i], 2.5))


def _arg_ref(form: str, x: np.ndarray) -> np.ndarray:
    if form == "load":
        return x.copy()
    if form == "arith":
        return x * np.float32(2.0) - np.float32(1.0)
    return np.minimum(x, np.float32(2.5))


def _fn_ref(fn: str, a: np.ndarray, m: int) -> np.ndarray:
    if fn == "if":
        return np.where(a == 0, -a, a)
    if fn == "ifelse":
        return np.where(a > 1, a * np.float32(2.0), a - np.float32(1.0))
    if fn == "loop":
        acc = a.copy()
        for _ in range(m):
            acc = acc + a
        return acc
    return np.where(a < 0, -a, a) + a


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(11)
    special = np.float32([0.0, -0.0, 0.5, 1.0, 1.5, 2.5, 3.0, -2.0])
    return np.concatenate([special, rng.uniform(-4, 4, 120).astype(np.float32)])


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("form", ["load", "arith", "call"])
@pytest.mark.parametrize("fn", ["if", "ifelse", "loop", "nested"])
def test_function_on_a_temporary_argument(W: int, fn: str, form: str) -> None:
    x = _inputs()
    o = np.full_like(x, np.nan)
    m = 3
    _calls(x, o, m, fn=fn, form=form, grid=len(x) // 64, workgroup=64, target="emulator", wave_width=W)
    want = _fn_ref(fn, _arg_ref(form, x), m)
    # bit-exact (the sign of zero included: _f_if maps 0.0 to -0.0)
    np.testing.assert_array_equal(o.view(np.uint32), want.view(np.uint32))


@aw.kernel
def _chained(x: aw.In[aw.f32], o: aw.Out[aw.f32]):
    i = aw.global_id(0)
    a = b = x[i]
    if a > 1.0:
        a = a * 2.0
    o[i] = a + b


@pytest.mark.parametrize("W", WIDTHS)
def test_chained_assignment_of_a_load(W: int) -> None:
    x = _inputs()
    o = np.full_like(x, np.nan)
    _chained(x, o, grid=len(x) // 64, workgroup=64, target="emulator", wave_width=W)
    want = np.where(x > 1, x * np.float32(2.0), x) + x
    np.testing.assert_array_equal(o, want)


@aw.func
def _f_tuple(p):
    q = p[0]
    if q > 1.0:
        q = q * 2.0
    return q + p[0]


@aw.kernel
def _tuple_copy(x: aw.In[aw.f32], o: aw.Out[aw.f32], *, inlined: bool = False):
    i = aw.global_id(0)
    if inlined:
        o[i] = _f_tuple((x[i], 1.0))
    else:
        t = (x[i], 1.0)
        a = t[0]
        if a > 1.0:
            a = a * 2.0
        o[i] = a + t[0]


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("inlined", [False, True])
def test_copy_out_of_a_tuple_holding_a_load(W: int, inlined: bool) -> None:
    x = _inputs()
    o = np.full_like(x, np.nan)
    _tuple_copy(x, o, inlined=inlined, grid=len(x) // 64, workgroup=64, target="emulator", wave_width=W)
    want = np.where(x > 1, x * np.float32(2.0), x) + x
    np.testing.assert_array_equal(o, want)


@aw.kernel
def _math_direct(x: aw.In[aw.f32], o: aw.Out[aw.f32], *, fn: str = "exp"):
    i = aw.global_id(0)
    if fn == "exp":
        o[i] = aw.exp(x[i])
    elif fn == "exp2":
        o[i] = aw.exp2(x[i])
    elif fn == "log":
        o[i] = aw.log(x[i])
    elif fn == "log2":
        o[i] = aw.log2(x[i])
    elif fn == "sin":
        o[i] = aw.sin(x[i])
    elif fn == "cos":
        o[i] = aw.cos(x[i])
    elif fn == "tanh":
        o[i] = aw.tanh(x[i])
    elif fn == "erf":
        o[i] = aw.erf(x[i])
    else:
        o[i] = aw.sqrt(x[i])


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(v)) for v in x])


def _ulp_err(got: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(ref64.astype(np.float32))).astype(np.float64)
    spacing = np.where(spacing == 0, np.float64(2.0**-149), spacing)
    return np.abs(got.astype(np.float64) - ref64) / spacing


# (name, inputs in [lo, hi], float64 reference, bound, unit): the bounds of test_compiler_math.py
_MATH = [
    ("exp", -80.0, 80.0, np.exp, 2.0, "ulp"),
    ("exp2", -120.0, 120.0, np.exp2, 2.0, "ulp"),
    ("log", 1e-3, 1e3, np.log, 2.0, "ulp"),
    ("log2", 1e-3, 1e3, np.log2, 2.0, "ulp"),
    ("tanh", -10.0, 10.0, np.tanh, 4.0, "ulp"),
    ("sqrt", 0.0, 1e4, np.sqrt, 0.5, "ulp"),
    ("sin", -100.0, 100.0, np.sin, 2.0**-22, "abs"),
    ("cos", -100.0, 100.0, np.cos, 2.0**-22, "abs"),
    ("erf", -4.0, 4.0, _erf64, 4e-7, "abs"),
]


def _check_math(fn: str, lo: float, hi: float, ref, bound: float, unit: str, target: str, W: int) -> None:
    x = np.random.default_rng(12).uniform(lo, hi, 256).astype(np.float32)
    o = np.full_like(x, np.nan)
    _math_direct(x, o, fn=fn, grid=len(x) // 64, workgroup=64, target=target, wave_width=W)
    ref64 = ref(x.astype(np.float64))
    err = _ulp_err(o, ref64) if unit == "ulp" else np.abs(o.astype(np.float64) - ref64)
    assert np.all(np.isfinite(o)), (fn, x[~np.isfinite(o)][:4], o[~np.isfinite(o)][:4])
    assert err.max() <= bound, (fn, x[err.argmax()], o[err.argmax()], err.max())


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("fn,lo,hi,ref,bound,unit", _MATH, ids=[m[0] for m in _MATH])
def test_stdlib_on_a_buffer_load(W: int, fn: str, lo: float, hi: float, ref, bound: float, unit: str) -> None:
    _check_math(fn, lo, hi, ref, bound, unit, "emulator", W)


@pytest.mark.opencl
def test_log_of_a_buffer_load_on_opencl() -> None:
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        get_target("opencl", wave_width=16)
    except (TargetUnavailable, ValueError) as e:
        pytest.skip(str(e))
    _check_math("log", 1e-3, 1e3, np.log, 2.0, "ulp", "opencl", 16)
    x = _inputs()
    o = np.full_like(x, np.nan)
    _calls(x, o, 3, fn="if", form="load", grid=len(x) // 64, workgroup=64, target="opencl", wave_width=16)
    want = _fn_ref("if", x, 3)
    np.testing.assert_array_equal(o.view(np.uint32), want.view(np.uint32))
