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


# ----------------------------------------------------------------------------- the pipeline

def _two_full_rounds(body: list) -> None:
    """The pass pipeline as first written: every pass of both rounds, unconditionally."""
    for _ in range(2):
        passes.fold_constants(body)
        body[:] = passes.strength_reduce(body)
        passes.copy_propagate(body)
        passes.cse(body)
        passes.licm(body)
        passes.dce(body)
    passes.if_convert(body)
    passes.dce(body)


def _shape(body: list) -> list:
    """The IR as nested tuples, each value numbered by its first appearance (ids differ
    between two translations of one kernel)."""
    num: dict[int, int] = {}

    def v(x):
        if isinstance(x, Value):
            return ("v", num.setdefault(id(x), len(num)), x.type.name, x.is_var)
        if isinstance(x, PredUse):
            return ("p", v(x.value), x.negated)
        if isinstance(x, ir.DevAddr):
            return ("dev", x.buffer, v(x.offset), x.imm)
        if isinstance(x, ir.LocAddr):
            return ("loc", v(x.offset), x.imm)
        return ("imm", repr(x))

    def go(nodes):
        out = []
        for n in nodes:
            if isinstance(n, Op):
                out.append((n.mnemonic, tuple(v(o) for o in n.operands), v(n.guard) if n.guard else None,
                            tuple(v(p) for d in n.defs() for p in d.parts)))
            elif isinstance(n, ir.If):
                out.append(("if", v(n.cond), go(n.then), go(n.orelse)))
            elif isinstance(n, ir.Loop):
                out.append(("loop", go(n.body)))
            else:
                out.append((type(n).__name__, v(n.cond) if n.cond else None))
        return out

    return go(body)


def _ir(kf, consts: dict) -> list:
    from anywave.compiler.frontend import Frontend

    params = [(p.name, p.ann) for p in kf.params if p.kind != "const"]
    return Frontend(kf._kernel_source(), kf._consts_from(consts), kf.name).build(params)


def _check_pipeline(kf, consts: dict) -> bool:
    """optimize() gives the IR of the two full rounds; False when the kernel is refused."""
    from anywave.errors import WaveError

    try:
        a, b = _ir(kf, consts), _ir(kf, consts)
    except WaveError:
        return False
    assert _shape(a) == _shape(b)  # the translation is deterministic (ids aside)
    passes.optimize(a)
    _two_full_rounds(b)
    assert _shape(a) == _shape(b), f"{kf.name} {consts}: optimize() differs from two full rounds"
    return True


def _library() -> list:
    import importlib
    import pkgutil

    import anywave.kernels as lib
    from anywave.jit.kernel import KernelFunction

    out = []
    for info in sorted(pkgutil.iter_modules(lib.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"anywave.kernels.{info.name}")
        for v in vars(mod).values():
            if isinstance(v, KernelFunction) and all(v is not k for k, _ in out):
                out.append((v, {}))
                if v.name == "gemm_f32_kernel":
                    out += [(v, dict(c)) for c in mod.CONFIGS if c != mod.DEFAULT]
                    out += [(v, {"epilogue": e}) for e in mod.EPILOGUES if e != "none"]
                if v.name == "matmul_kernel":
                    out += [(v, {"epilogue": e}) for e in ("bias", "bias_relu")]
    return out


def test_optimize_is_two_full_rounds_on_the_library():
    """The second round runs only the passes the first round can have given work
    (passes.optimize's docstring): the result is that of running it in full."""
    jobs = _library()
    assert len(jobs) > 30
    assert sum(_check_pipeline(kf, c) for kf, c in jobs) == len(jobs)


def test_optimize_is_two_full_rounds_on_the_compiler_tests():
    import importlib.util
    from pathlib import Path

    from anywave.jit.kernel import KernelFunction

    done = 0
    for f in sorted(Path(__file__).parent.glob("test_compiler*.py")):
        if "fuzz" in f.name or "property" in f.name or f.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"_pipeline_{f.stem}", f)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for v in vars(mod).values():
            if isinstance(v, KernelFunction):
                done += _check_pipeline(v, {})
    assert done > 40


def test_optimize_is_two_full_rounds_on_random_kernels():
    from test_compiler_fuzz import Chooser, Gen, load_kernel, pressure_program

    for seed in range(24):
        ch = Chooser.from_seed(seed)
        prog = pressure_program(ch, n_live=120) if seed % 12 == 0 else Gen(ch, n_stmts=ch.draw(2, 12)).program()
        assert _check_pipeline(load_kernel(prog.source), {}), prog.source


def _same_as_two_full_rounds(build) -> list:
    """Run optimize() and the two full rounds on two copies of the IR ``build()`` makes;
    assert they agree and return optimize()'s result."""
    a, b = build(), build()
    passes.optimize(a)
    _two_full_rounds(b)
    assert _shape(a) == _shape(b)
    return a


def _ldarg(v: Value, i: int) -> Op:
    return Op.make("ldarg.b32", v, i)


def test_round_two_folds_after_a_constant_is_copied():
    # t = c copied, u = t + c: foldable only once copy propagation made u read c twice
    def build():
        c, t, u, off = (Value(ty.i32) for _ in range(4))
        return [Op.make("movi.i32", c, 5), _mov(t, c), _add(u, t, c), Op.make("movi.b32", off, 0), _st(u, off)]

    body = _same_as_two_full_rounds(build)
    movis = [n.operands[1] for n in body if n.mnemonic.startswith("movi")]
    assert 10 in movis and not any(n.mnemonic.startswith("add") for n in body)


def test_round_two_reduces_and_copies_after_a_constant_is_copied():
    # u = x * t with t = 4 copied: a shift in round two; v = x + z with z = 0 copied: a copy
    # of x in round two, which copy propagation then removes (the store reads x)
    def build():
        x, c4, t, u, c0, z, w, off = (Value(ty.i32) for _ in range(8))
        return [_ldarg(x, 0), Op.make("movi.i32", c4, 4), _mov(t, c4), Op.make("mul.i32", u, x, t),
                Op.make("movi.i32", c0, 0), _mov(z, c0), _add(w, x, z), Op.make("movi.b32", off, 0),
                _st(u, off), _st(w, off)]

    body = _same_as_two_full_rounds(build)
    assert any(n.mnemonic.startswith("shl") for n in body)
    assert not any(n.mnemonic.startswith(("mul", "add")) for n in body)
    x = body[0].operands[0]
    assert [n.operands[1] for n in body if n.mnemonic == "st.device.b32"][1] is x


def test_round_two_hoists_after_cse_inside_a_loop():
    # loop 1 computes a1 = x + y (hoisted in round one); loop 2 computes the same sum inside
    # an if (not hoisted) and b = a2 * z: round two's CSE makes b read a1, and only then is b
    # loop-invariant
    def build():
        x, y, z, a1, a2, b, off = (Value(ty.i32) for _ in range(7))
        p, q = Value(ty.pred), Value(ty.pred)
        loop1 = ir.Loop([_add(a1, x, y), Op.make("movi.b32", off, 0), _st(a1, off), ir.Break(PredUse(p))])
        loop2 = ir.Loop([ir.If(PredUse(q), [_add(a2, x, y)], []), Op.make("mul.i32", b, a2, z), _st(b, off),
                         ir.Break(PredUse(p))])
        return [_ldarg(x, 0), _ldarg(y, 1), _ldarg(z, 2), Op.make("setp.true", p), Op.make("setp.false", q),
                loop1, loop2]

    body = _same_as_two_full_rounds(build)
    loop2 = [n for n in body if isinstance(n, ir.Loop)][1]
    assert not any(isinstance(n, Op) and n.mnemonic.startswith("mul") for n in loop2.body)


def test_retarget_keeps_defs_and_uses_current():
    a, b, t, v = (Value(ty.i32) for _ in range(4))
    o = _add(t, a, b)
    assert o.defs() == [t]
    o.retarget(t, v)
    assert o.operands == [v, a, b] and o.defs() == [v] and o.uses() == [a, b]
    fresh = _add(v, a, b)  # computed from scratch
    assert fresh.defs() == o.defs() and fresh.uses() == o.uses()
