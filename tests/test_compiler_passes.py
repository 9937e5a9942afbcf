"""Unit checks of the linear-time pass machinery (no timing asserts: speed is measured in
bench/bench_compile.py). Expected results are written by hand from the pass definitions."""

from __future__ import annotations

from anywave.compiler import codegen, ir, passes
from anywave.compiler import types as ty
from anywave.compiler.ir import Op, PredUse, Value


def _mov(d: Value, s: Value) -> Op:
    return Op.make("mov.b32", d, s)


def _add(d: Value, a: Value, b: Value) -> Op:
    return Op.make("add.i32", d, a, b)


def _st(v: Value, off: Value) -> Op:
    return Op.make("st.device.b32", ir.DevAddr(0, off), v)


def test_walk_is_preorder_with_nested_regions():
    a, b, c, d = (Value(ty.i32) for _ in range(4))
    p = Value(ty.pred)
    o1, o2, o3, o4, o5 = _mov(b, a), _mov(c, a), _mov(d, a), _mov(a, b), _mov(b, c)
    inner = ir.If(PredUse(p), [o3], [o4])
    loop = ir.Loop([o2, inner])
    top = ir.If(PredUse(p), [loop], [o5])
    body = [o1, top]
    assert list(ir.walk(body)) == [o1, top, loop, o2, inner, o3, o4, o5]
    assert list(ir.walk([])) == []


def test_dce_removes_a_dead_chain_in_one_call():
    x, t1, t2, t3, off = (Value(ty.i32) for _ in range(5))
    keep = _st(x, off)
    body = [Op.make("movi.b32", x, 1), Op.make("movi.b32", off, 0), _add(t1, x, x), _add(t2, t1, x),
            _add(t3, t2, t1), keep]
    passes.dce(body)
    assert [o.mnemonic for o in body] == ["movi.b32", "movi.b32", "st.device.b32"]


def test_dce_second_sweep_for_a_loop_carried_variable():
    # v is assigned after its only reader in the loop; the reader's result is dead, so v's
    # definitions become dead only after the reader goes (a sweep in reverse order meets v's
    # definition first): everything but the store and its operands must go.
    v = Value(ty.i32, "v", is_var=True)
    t, off, z = Value(ty.i32), Value(ty.i32), Value(ty.i32)
    body = [Op.make("movi.b32", off, 0), Op.make("movi.b32", z, 0), _mov(v, z),
            ir.Loop([_add(t, v, v), Op.make("movi.b32", v, 7), ir.Break()]), _st(z, off)]
    passes.dce(body)
    loop = body[2]
    assert isinstance(loop, ir.Loop)
    assert [type(n).__name__ for n in loop.body] == ["Break"]
    assert [getattr(n, "mnemonic", None) for n in body] == ["movi.b32", "movi.b32", None, "st.device.b32"]


def test_dce_removes_if_left_empty_and_its_condition():
    p = Value(ty.pred)
    a, t, off = Value(ty.i32), Value(ty.i32), Value(ty.i32)
    body = [Op.make("movi.b32", a, 3), Op.make("movi.b32", off, 0), Op.make("setp.true", p),
            ir.If(PredUse(p), [_add(t, a, a)], []), _st(a, off)]
    passes.dce(body)
    assert [getattr(n, "mnemonic", None) for n in body] == ["movi.b32", "movi.b32", "st.device.b32"]


def test_cse_scopes_branch_values():
    # a value computed in the then-branch is not reused in the else-branch or after the if;
    # one computed before the if is reused in both branches
    a, b, off = Value(ty.i32), Value(ty.i32), Value(ty.i32)
    p = Value(ty.pred)
    s0, s1, s2, s3 = (Value(ty.i32) for _ in range(4))
    body = [Op.make("movi.b32", off, 0), Op.make("movi.b32", a, 1), Op.make("movi.b32", b, 2),
            Op.make("setp.true", p), _add(s0, a, a),
            ir.If(PredUse(p), [_add(s1, a, b), _add(s2, a, a), _st(s1, off), _st(s2, off)],
                  [_add(s3, a, b), _st(s3, off)]),
            _add(s1 := Value(ty.i32), a, b), _st(s1, off)]
    passes.cse(body)
    then, orelse = body[5].then, body[5].orelse
    # s2 (a+a) reuses s0 from before the if; s1 is kept in then; s3 is kept in else
    assert [o.mnemonic for o in then] == ["add.i32", "st.device.b32", "st.device.b32"]
    assert then[2].operands[1] is s0
    assert [o.mnemonic for o in orelse] == ["add.i32", "st.device.b32"]
    # after the if, a+b is computed again (the branch's value is not visible there)
    assert body[6].mnemonic == "add.i32" and body[7].operands[1] is body[6].operands[0]


def test_first_fit():
    free = [False, True, False, True, True, False, True]
    assert codegen._first_fit(free, 1, 7) == 1
    assert codegen._first_fit(free, 2, 7) == 3
    assert codegen._first_fit(free, 3, 7) is None
    assert codegen._first_fit(free, 1, 1) is None
    assert codegen._first_fit([False] * 4, 1, 4) is None
    assert codegen._first_fit([True] * 4, 2, 4) == 0


def test_defs_uses_follow_operand_changes():
    a, b, c, d = (Value(ty.i32) for _ in range(4))
    o = _add(c, a, b)
    assert o.defs() == [c] and o.uses() == [a, b]
    o.replace_uses({a: d})
    assert o.uses() == [d, b] and o.defs() == [c]
    o.defn, o.operands = Op.make("mov.b32", c, b).defn, [c, b]
    assert o.uses() == [b]
    o.guard = PredUse(Value(ty.pred))
    assert o.uses()[-1] is o.guard.value
