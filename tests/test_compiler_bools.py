"""Predicate-typed values through every pass: == / != / ^ on bools, bools in variables,
across loop iterations and branches, bool → int casts, bools through @aw.func.

Each kernel's expected output is computed independently with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.compiler import ir, passes
from anywave.compiler import types as ty
from anywave.compiler.ir import Op, PredUse, Value

WIDTHS = (8, 16, 32, 64)
N = 40


def _data(seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32)
    x[::7] = 0.0
    return x


@aw.kernel
def bool_eq(x: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        up = (i & 2) == 0
        if (x[i] > 0.0) == up:
            x[i] = 1.0


@pytest.mark.parametrize("w", WIDTHS)
def test_issue_repro_bool_equality(w):
    x = _data()
    ref = x.copy()
    i = np.arange(N)
    ref[(x > 0) == ((i & 2) == 0)] = 1.0
    bool_eq(x, N, grid=1, workgroup=N, wave_width=w)
    assert np.array_equal(x, ref)


@aw.kernel
def bool_ops(x: aw.In[aw.f32], out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        a = x[i] > 0.0
        b = (i % 3) == 0
        r = 0
        if a != b:
            r |= 1
        if a ^ b:
            r |= 2
        if a == b:
            r |= 4
        if not (a == b):
            r |= 8
        if (a & b) | (not a):
            r |= 16
        if a == True:  # noqa: E712 - the literal comparison is what is tested
            r |= 32
        out[i] = r


@pytest.mark.parametrize("w", WIDTHS)
def test_bool_eq_ne_xor_and_or(w):
    x = _data(2)
    out = np.zeros(N, np.int32)
    bool_ops(x, out, N, grid=1, workgroup=N, wave_width=w)
    a = x > 0
    b = (np.arange(N) % 3) == 0
    ref = ((a != b) * 1 | (a ^ b) * 2 | (a == b) * 4 | (~(a == b)) * 8 | ((a & b) | ~a) * 16 | a * 32)
    assert np.array_equal(out, ref.astype(np.int32))


@aw.kernel
def bool_loop(x: aw.In[aw.f32], out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        parity = False
        seen = False
        prev = x[i] > 0.0
        changes = 0
        for k in range(8):
            cur = x[(i + k) % n] > 0.0
            parity = parity ^ cur
            seen = seen or (cur and k > 2)
            if cur != prev:
                changes += aw.i32(cur != prev)
            prev = cur
        out[i] = aw.i32(parity) + 2 * aw.i32(seen) + 4 * changes


@pytest.mark.parametrize("w", WIDTHS)
def test_bools_live_across_loop_iterations(w):
    x = _data(3)
    out = np.zeros(N, np.int32)
    bool_loop(x, out, N, grid=1, workgroup=N, wave_width=w)
    ref = np.zeros(N, np.int32)
    for i in range(N):
        s = [x[(i + k) % N] > 0 for k in range(8)]
        parity = sum(s) % 2
        seen = any(s[k] for k in range(3, 8))
        prev = x[i] > 0
        changes = 0
        for c in s:
            changes += c != prev
            prev = c
        ref[i] = parity + 2 * seen + 4 * changes
    assert np.array_equal(out, ref)


@aw.kernel
def bool_branches(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        if i % 2 == 0:
            flag = v > 0.0
        elif i % 3 == 0:
            flag = v < -0.5
        else:
            flag = i > 20
        other = (v == 0.0) == flag
        out[i] = aw.f32(flag) + 10.0 * aw.f32(other) + 100.0 * aw.f32(aw.u32(flag) + aw.u32(other))


@pytest.mark.parametrize("w", WIDTHS)
def test_bools_assigned_in_branches_and_cast(w):
    x = _data(4)
    out = np.zeros(N, np.float32)
    bool_branches(x, out, N, grid=1, workgroup=N, wave_width=w)
    i = np.arange(N)
    flag = np.where(i % 2 == 0, x > 0, np.where(i % 3 == 0, x < -0.5, i > 20))
    other = (x == 0) == flag
    ref = (flag + 10.0 * other + 100.0 * (flag.astype(np.int64) + other)).astype(np.float32)
    assert np.array_equal(out, ref)


@aw.func
def both_or_neither(p, q):
    return p == q


@aw.func
def pick(c, a, b):
    if c:
        return a
    return b


@aw.func
def is_big(v):
    return abs(v) > 1.0


@aw.kernel
def bool_funcs(x: aw.In[aw.f32], out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        big = is_big(v)
        same = both_or_neither(big, v > 0.0)
        out[i] = pick(same, 7, -3) + aw.i32(big) * 100 + aw.i32(both_or_neither(same, not big)) * 1000


@pytest.mark.parametrize("w", WIDTHS)
def test_bools_through_device_functions(w):
    x = _data(5) * 2
    out = np.zeros(N, np.int32)
    bool_funcs(x, out, N, grid=1, workgroup=N, wave_width=w)
    big = np.abs(x) > 1
    same = big == (x > 0)
    ref = np.where(same, 7, -3) + big * 100 + (same == ~big) * 1000
    assert np.array_equal(out, ref.astype(np.int32))


@aw.kernel
def bool_short_circuit_var(x: aw.In[aw.f32], y: aw.In[aw.i32], out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        b = x[i] > 0.0
        for k in range(3):
            # the right side loads: the result comes through the short-circuit path
            b = (not b) and y[(i + k) % n] > 0
        c = b or y[i] < -5
        out[i] = aw.i32(b) + 2 * aw.i32(c)


@pytest.mark.parametrize("w", WIDTHS)
def test_short_circuit_result_stored_in_variable(w):
    x = _data(6)
    y = np.random.default_rng(6).integers(-10, 10, N).astype(np.int32)
    out = np.zeros(N, np.int32)
    bool_short_circuit_var(x, y, out, N, grid=1, workgroup=N, wave_width=w)
    ref = np.zeros(N, np.int32)
    for i in range(N):
        b = bool(x[i] > 0)
        for k in range(3):
            b = (not b) and bool(y[(i + k) % N] > 0)
        c = b or bool(y[i] < -5)
        ref[i] = int(b) + 2 * int(c)
    assert np.array_equal(out, ref)


def test_copy_propagation_of_negated_predicate_copy():
    """``p2 = mov.pred !p1`` (source is a PredUse): uses of p2 become !p1, double negation
    cancels, and guards and region conditions are rewritten too."""
    a, b = Value(ty.i32, "a"), Value(ty.i32, "b")
    p1, p2, p3 = Value(ty.pred), Value(ty.pred), Value(ty.pred)
    r = Value(ty.i32, "r", is_var=True)
    body: list[ir.Node] = [
        Op.make("setp.lt.i32", p1, a, b),
        Op.make("mov.pred", p2, PredUse(p1, True)),
        Op.make("mov.pred", p3, PredUse(p2, True)),
        ir.If(PredUse(p2), [Op.make("mov.b32", r, a)], [ir.Halt(PredUse(p3, True))]),
    ]
    guarded = Op.make("mov.b32", r, b)
    guarded.guard = PredUse(p3)
    body.append(guarded)
    passes.copy_propagate(body)
    node = body[3]
    assert isinstance(node, ir.If)
    assert node.cond.value is p1 and node.cond.negated
    halt = node.orelse[0]
    assert halt.cond.value is p1 and halt.cond.negated  # !p3 = !!!p1 = !p1
    assert guarded.guard.value is p1 and not guarded.guard.negated
    passes.dce(body)
    assert not any(isinstance(n, Op) and n.mnemonic == "mov.pred" for n in ir.walk(body))


def test_every_pass_accepts_predicate_copies():
    """Run the whole pipeline on a body full of predicate copies, predicate ops and selects."""
    a, b = Value(ty.i32, "a"), Value(ty.i32, "b")
    ps = [Value(ty.pred) for _ in range(6)]
    out = Value(ty.i32, "o", is_var=True)
    one, zero = Value(ty.u32), Value(ty.u32)
    body: list[ir.Node] = [
        Op.make("ldarg.b32", a, "a") if "ldarg.b32" in passes.BY_MNEMONIC else Op.make("movi.b32", a, 3),
        Op.make("movi.b32", b, 5),
        Op.make("movi.b32", one, 1),
        Op.make("movi.b32", zero, 0),
        Op.make("setp.lt.i32", ps[0], a, b),
        Op.make("setp.true", ps[1]),
        Op.make("xor.pred", ps[2], PredUse(ps[0]), PredUse(ps[1])),
        Op.make("mov.pred", ps[3], PredUse(ps[2], True)),
        Op.make("and.pred", ps[4], PredUse(ps[3]), PredUse(ps[1], True)),
        Op.make("mov.pred", ps[5], PredUse(ps[4])),
        ir.Loop([ir.Break(PredUse(ps[5])), Op.make("selp.b32", out, one, zero, PredUse(ps[3]))]),
    ]
    passes.optimize(body)  # must not raise
    text = ir.dump(body)
    assert "loop" in text
