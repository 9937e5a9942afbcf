"""Property test: random arithmetic expressions compiled and run on the emulator, compared
bit-exactly with NumPy (exact-class operations only)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("ANYWAVE_PROPERTY_EXAMPLES", "25"))
_counter = itertools.count()
_tmp = tempfile.mkdtemp(prefix="aw_prop_")
os.environ.setdefault("ANYWAVE_CACHE_DIR", os.path.join(_tmp, "cache"))


def int_expr(depth: int):
    leaf = st.sampled_from(["a", "b", "c", "3", "7", "-5", "1000"])
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
    leaf = st.sampled_from(["a", "b", "c", "0.5", "3.0", "-1.25"])
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


def _np_eval(expr: str, env: dict) -> np.ndarray:
    import builtins

    ns = dict(env)
    ns["abs"] = np.abs
    ns["min"] = np.minimum
    ns["max"] = np.maximum

    class _AW:
        @staticmethod
        def sqrt(v):
            return np.sqrt(v)

    ns["aw"] = _AW
    # "x if c else y" on arrays: rewrite into np.where by evaluating element-wise
    n = len(env["a"])
    out = []
    with np.errstate(all="ignore"):
        for j in range(n):
            local = {k: (v[j] if isinstance(v, np.ndarray) else v) for k, v in ns.items()}
            local["abs"] = builtins.abs if False else np.abs
            out.append(eval(expr, {}, local))  # noqa: S307 - our own generated text
    return np.array(out)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_expr(3), seed=st.integers(0, 2**32 - 1), W=st.sampled_from([8, 16, 32, 64]))
def test_random_int_expressions(expr, seed, W):
    rng = np.random.default_rng(seed)
    n = 20
    a, b, c = (rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32) for _ in range(3))
    a[:4] = [0, -1, 2**31 - 1, -2**31]
    k = _compile(expr, "i32")
    out = np.zeros(n, np.int32)
    k(a, b, c, out, n, grid=1, workgroup=32, wave_width=W)
    # reference: the same expression on NumPy int32 scalars (wrapping, floor // and %)
    import re

    ref_expr = re.sub(r"(?<![\w.])(\d+)", r"np.int32(\1)", expr)
    ref = _np_eval(ref_expr, {"a": a, "b": b, "c": c, "np": np}).astype(np.int64).astype(np.int32)
    assert np.array_equal(out, ref), (expr, a, b, c, out, ref)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=float_expr(3), seed=st.integers(0, 2**32 - 1), W=st.sampled_from([8, 16, 32, 64]))
def test_random_float_expressions(expr, seed, W):
    rng = np.random.default_rng(seed)
    n = 20
    a, b, c = (rng.standard_normal(n).astype(np.float32) * 10 for _ in range(3))
    k = _compile(expr, "f32")
    out = np.zeros(n, np.float32)
    k(a, b, c, out, n, grid=1, workgroup=32, wave_width=W)
    env = {"a": a, "b": b, "c": c}
    ref = _np_eval(expr.replace("0.5", "np.float32(0.5)").replace("3.0", "np.float32(3.0)")
                   .replace("-1.25", "np.float32(-1.25)").replace("1.0)", "np.float32(1.0))"),
                   {**env, "np": np}).astype(np.float32)
    same = (out.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(out) & np.isnan(ref))
    assert same.all(), (expr, out, ref)
