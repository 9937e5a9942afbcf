"""Compile-time bindings (strings, tuples, dtypes, arrays ...) under run-time control flow.

The compiler translates a run-time ``if`` and a loop body once, so a compile-time value
bound differently on two paths, or rebound in a loop after the body read it, cannot be one
Python value for every lane: it is a CompileError at the read, never one path's value; a
tuple of values bound on both paths of an if becomes a tuple of variables (the string and
tuple cases below gave a wrong answer before). Expectations: NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw

X = np.array([-2, 5, 0, 7, -1, 3, 4, -9, 11, -6, 8, 1, -3, 2, 6, -5], np.int32)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _run(kern, W: int = 8) -> np.ndarray:
    y = np.zeros_like(X)
    kern(X, y, len(X), grid=2, workgroup=8, target="emulator", wave_width=W)
    return y


def _caret(e: aw.CompileError) -> str:
    """The source text under the error's caret."""
    lines = str(e).splitlines()
    col = lines[-1].index("^")
    return lines[-2][col:col + e.length]


@aw.kernel
def str_in_if(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        op = "add"
        if x[i] > 0:
            op = "mul"
        if op == "mul":
            y[i] = x[i] * 3
        else:
            y[i] = x[i] + 3


def test_string_rebound_in_a_runtime_if_is_an_error_at_its_use():
    with pytest.raises(aw.CompileError, match="'op' is bound to different compile-time values") as ei:
        _run(str_in_if)
    assert "'mul'" in str(ei.value) and "'add'" in str(ei.value)
    assert _caret(ei.value) == "op"


@aw.kernel
def tuple_in_if(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        t = (x[i], 0)
        if x[i] > 0:
            t = (x[i] * 2, 1)
        y[i] = t[0] + t[1]


@pytest.mark.parametrize("W", (8, 32))
def test_tuple_rebound_in_a_runtime_if_is_merged_at_the_join(W):
    """Both paths bind a 2-tuple of i32 values / literals: one tuple of variables after the if."""
    assert np.array_equal(_run(tuple_in_if, W), np.where(X > 0, X * 2 + 1, X))


@aw.kernel
def tuple_mixed_types(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        t = (x[i], "a")
        if x[i] > 0:
            t = (x[i] * 2, "b")  # a string element cannot become a variable
        y[i] = t[0]


@aw.kernel
def tuple_int_float(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        t = (x[i],)
        if x[i] > 0:
            t = (aw.f32(x[i]),)  # i32 on one path, f32 on the other: no common type
        y[i] = aw.i32(t[0])


@pytest.mark.parametrize("kern", [tuple_mixed_types, tuple_int_float], ids=lambda k: k.name)
def test_tuple_that_cannot_be_merged_is_an_error_at_its_use(kern):
    with pytest.raises(aw.CompileError, match="'t' is bound to different compile-time values") as ei:
        _run(kern)
    assert _caret(ei.value) == "t"


@aw.kernel
def same_in_both(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i] + 3
        if x[i] > 0:
            op = "mul"
            v = x[i] * 3
        else:
            op = "mul"
        if op == "mul":  # the same on both paths: a plain compile-time value
            v = v * 2
        y[i] = v


@aw.kernel
def branch_local(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i]
        if x[i] > 0:
            t = (x[i], 10)  # bound and read on one path only
            y[i] = t[0] * t[1]
        else:
            t = (x[i], -1)
            y[i] = t[0] * t[1]


@pytest.mark.parametrize("W", (8, 64))
def test_bindings_that_do_not_depend_on_the_path_still_work(W):
    assert np.array_equal(_run(same_in_both, W), np.where(X > 0, X * 3, X + 3) * 2)
    assert np.array_equal(_run(branch_local, W), np.where(X > 0, X * 10, -X))


@aw.kernel
def tuple_carried(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        acc = (x[i], 0)
        for _ in range(x[i] & 3):
            acc = (acc[0] + 1, acc[1] + 2)  # reads the binding from before the loop
        y[i] = acc[0] + acc[1]


def test_tuple_carried_through_a_runtime_loop_is_an_error():
    with pytest.raises(aw.CompileError, match="reads it at line") as ei:
        _run(tuple_carried)
    assert "'acc'" in str(ei.value) and _caret(ei.value) == "acc"


@aw.kernel
def tuple_after_loop(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        t = (x[i], 0)
        for k in range(x[i] & 3):
            t = (k, 1)
        y[i] = t[0] + t[1]


def test_tuple_rebound_in_a_runtime_loop_is_an_error_after_the_loop():
    with pytest.raises(aw.CompileError, match="iterations of the run-time loop") as ei:
        _run(tuple_after_loop)
    assert _caret(ei.value) == "t"


@aw.kernel
def tuple_per_iteration(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        t = (x[i], 0)
        s = t[0]
        for k in range(x[i] & 3):
            t = (k, 2)  # rebound before its first read in the body: every iteration's own
            s += t[0] * t[1]
        y[i] = s


@pytest.mark.parametrize("W", (16, 32))
def test_tuple_rebound_before_its_use_in_a_loop_body_works(W):
    want = X + np.array([sum(2 * k for k in range(v & 3)) for v in X], np.int32)
    assert np.array_equal(_run(tuple_per_iteration, W), want)
