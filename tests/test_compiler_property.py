"""Property test: random arithmetic expressions compiled and run on the emulator, compared
bit-exactly with NumPy (exact-class operations only)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("ANYWAVE_PROPERTY_EXAMPLES", "25"))
_counter = itertools.count()
_tmp = tempfile.mkdtemp(prefix="aw_prop_")
os.environ.setdefault("ANYWAVE_CACHE_DIR", os.path.join(_tmp, "cache"))


def int_expr(depth: int):
    leaf = st.sampled_from(["a", "b", "c", "3", "7", "-5", "1000", "aw.i32(1000)"])
    if depth == 0:
        return leaf
    sub = int_expr(depth - 1)
    binop = st.tuples(sub, st.sampled_from(["+", "-", "*", "&", "|", "^", "//", "%", ">>", "<<"]), sub).map(
        lambda t: f"({t[0]} {t[1]} ({t[2]} | 1))" if t[1] in ("//", "%") else
        f"({t[0]} {t[1]} ({t[2]} & 15))" if t[1] in (">>", "<<") else f"({t[0]} {t[1]} {t[2]})")
    un = st.tuples(st.sampled_from(["-", "~", "abs", "min", "max", "sel"]), sub, sub).map(
        lambda t: f"(-{t[1]})" if t[0] == "-" else f"(~{t[1]})" if t[0] == "~" else f"abs({t[1]})"
        if t[0] == "abs" else f"({t[1]} if {t[1]} < {t[2]} else {t[2]} + 1)" if t[0] == "sel"
        else f"{t[0]}({t[1]}, {t[2]})")
    return st.one_of(leaf, binop, un)


def float_expr(depth: int):
    leaf = st.sampled_from(["a", "b", "c", "0.5", "3.0", "-1.25", "aw.f32(-1.25)"])
    if depth == 0:
        return leaf
    sub = float_expr(depth - 1)
    binop = st.tuples(sub, st.sampled_from(["+", "-", "*", "/"]), sub).map(
        lambda t: f"({t[0]} / (abs({t[2]}) + 1.0))" if t[1] == "/" else f"({t[0]} {t[1]} {t[2]})")
    un = st.tuples(st.sampled_from(["-", "abs", "min", "max", "sqrt"]), sub, sub).map(
        lambda t: f"(-{t[1]})" if t[0] == "-" else f"abs({t[1]})" if t[0] == "abs"
        else f"aw.sqrt(abs({t[1]}))" if t[0] == "sqrt" else f"{t[0]}({t[1]}, {t[2]})")
    return st.one_of(leaf, binop, un)


def _compile(expr: str, t: str):
    name = f"prop_{next(_counter)}"
    path = os.path.join(_tmp, name + ".py")
    with open(path, "w") as f:
        f.write("import anywave as aw\n\n@aw.kernel\n"
                f"def k(x: aw.In[aw.{t}], y: aw.In[aw.{t}], z: aw.In[aw.{t}], out: aw.Out[aw.{t}], n: aw.i32):\n"
                "    i = aw.global_id(0)\n"
                "    if i < n:\n"
                "        a = x[i]\n        b = y[i]\n        c = z[i]\n"
                f"        out[i] = {expr}\n")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.k


class _Refused(Exception):
    """The compiler must refuse the expression: a compile-time int outside i32 meets a typed value."""


def _reference(expr: str, env: dict[str, np.ndarray], dtype: type) -> np.ndarray:
    """``expr`` evaluated with the kernel language's typing rules (docs/guide/types.md), written
    independently of the compiler: arithmetic among compile-time numbers (literals) is Python's --
    exact ints, double floats -- and a compile-time number meeting a typed value takes its type
    (a float rounded once to f32, an int refused outside i32); typed values compute in ``dtype``
    with NumPy (wrapping ints, floor ``//`` and ``%``). Raises _Refused where the compiler must
    refuse the source."""
    import ast
    import builtins
    import operator

    n = len(next(iter(env.values())))
    py_ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
              ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
              ast.RShift: operator.rshift}
    np_ops = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide,
              ast.FloorDiv: np.floor_divide, ast.Mod: np.remainder, ast.BitAnd: np.bitwise_and,
              ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor, ast.LShift: np.left_shift,
              ast.RShift: np.right_shift}

    def typed(v, t=dtype):
        if isinstance(v, np.ndarray):
            return v
        if t is np.int32 and not -2**31 <= v < 2**31:
            raise _Refused(v)
        return np.full(n, t(v), t)

    def ev(node):
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp):
            x = ev(node.operand)
            return (operator.neg if isinstance(node.op, ast.USub) else operator.invert)(x)
        if isinstance(node, ast.BinOp):
            x, y = ev(node.left), ev(node.right)
            if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
                return py_ops[type(node.op)](x, y)
            return np_ops[type(node.op)](typed(x), typed(y)).astype(dtype)
        if isinstance(node, ast.Compare):
            x, y = ev(node.left), ev(node.comparators[0])
            if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
                return x < y
            return typed(x) < typed(y)
        if isinstance(node, ast.IfExp):
            cond = ev(node.test)
            if not isinstance(cond, np.ndarray):
                return ev(node.body if cond else node.orelse)
            return np.where(cond, typed(ev(node.body)), typed(ev(node.orelse)))
        if isinstance(node, ast.Call):
            args = [ev(a) for a in node.args]
            if isinstance(node.func, ast.Attribute):  # aw.sqrt, aw.f32, aw.i32: typed results
                if node.func.attr == "sqrt":
                    return np.sqrt(typed(args[0], np.float32))
                return typed(args[0], {"f32": np.float32, "i32": np.int32}[node.func.attr])
            fn = node.func.id
            if not any(isinstance(a, np.ndarray) for a in args):
                return getattr(builtins, fn)(*args)
            if fn == "abs":
                return np.abs(args[0])
            return (np.minimum if fn == "min" else np.maximum)(*(typed(a) for a in args))
        raise AssertionError(f"unexpected node {ast.dump(node)}")

    with np.errstate(all="ignore"):
        return typed(ev(ast.parse(expr, mode="eval").body))


def _run_or_refused(expr: str, t: str, args: tuple, n: int, W: int, ref) -> np.ndarray | None:
    """Compile and run ``expr``; None when the compiler refused it (which the reference must
    also have done: ``ref`` is _Refused then)."""
    from anywave import CompileError

    try:
        k = _compile(expr, t)
        out = np.zeros(n, args[0].dtype)
        k(*args, out, n, grid=1, workgroup=32, wave_width=W)
    except CompileError as e:  # refused, and for the reason the reference gives
        assert isinstance(ref, _Refused) and "does not fit" in str(e), (expr, str(e))
        return None
    assert not isinstance(ref, _Refused), (expr, "compiled, but a compile-time int outside i32 met a typed value",
                                           ref)
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_expr(3), seed=st.integers(0, 2**32 - 1), W=st.sampled_from([8, 16, 32, 64]))
# a compile-time product outside i32 meeting an i32 value is refused; typed, it wraps
@example(expr="(a + ((1000 << (15 & 15)) * (1000 << (15 & 15))))", seed=1, W=32)
@example(expr="(a + ((aw.i32(1000) << (15 & 15)) * (1000 << (15 & 15))))", seed=1, W=64)
def test_random_int_expressions(expr, seed, W):
    rng = np.random.default_rng(seed)
    n = 20
    a, b, c = (rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32) for _ in range(3))
    a[:4] = [0, -1, 2**31 - 1, -2**31]
    try:
        ref = _reference(expr, {"a": a, "b": b, "c": c}, np.int32)
    except _Refused as e:
        ref = e
    out = _run_or_refused(expr, "i32", (a, b, c), n, W, ref)
    if out is not None:
        assert np.array_equal(out, ref), (expr, a, b, c, out, ref)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=float_expr(3), seed=st.integers(0, 2**32 - 1), W=st.sampled_from([8, 16, 32, 64]))
# compile-time arithmetic in double, rounded once where it meets a (f32) value: found by this test
@example(expr="(a + (a / (abs((-1.25 / (abs(0.5) + 1.0))) + 1.0)))", seed=0, W=8)
# typed constants fold step by step in f32 (the emulator's semantics)
@example(expr="(a + (a / (abs((aw.f32(-1.25) / (abs(0.5) + 1.0))) + 1.0)))", seed=0, W=16)
def test_random_float_expressions(expr, seed, W):
    rng = np.random.default_rng(seed)
    n = 20
    a, b, c = (rng.standard_normal(n).astype(np.float32) * 10 for _ in range(3))
    ref = _reference(expr, {"a": a, "b": b, "c": c}, np.float32)
    out = _run_or_refused(expr, "f32", (a, b, c), n, W, ref)
    same = (out.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(out) & np.isnan(ref))
    assert same.all(), (expr, out, ref)
