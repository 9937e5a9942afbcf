"""Compiler limits are CompileErrors at the user's line, reached early (issue 31, item 12):
``@aw.func`` inlining has a budget (counted calls, not time), deep expressions compile (or fail
with a CompileError, never a raw RecursionError), and a local array beyond the u32 local-memory
size is refused at its line instead of an "internal compiler error"."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from anywave.compiler import frontend_inline
from anywave.compiler.errors import CompileError
from anywave.compiler.frontend import Frontend


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("ANYWAVE_NO_DISK_CACHE", "1")  # every test compiles (no cached result)


def _load(tmp_path: Path, name: str, text: str):
    p = tmp_path / f"{name}.py"
    p.write_text(text)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _chain_source(levels: int, fanout: int) -> str:
    """f0 adds 1; f<i> sums ``fanout`` calls of f<i-1>; kernel k calls f<levels-1> once:
    ``fanout ** (levels - 1)`` calls of f0 in all."""
    out = ["import anywave as aw", "", "@aw.func", "def f0(x):", "    return x + 1.0", ""]
    for i in range(1, levels):
        calls = " + ".join([f"f{i - 1}(x)"] * fanout)
        out += ["@aw.func", f"def f{i}(x):", f"    return {calls}", ""]
    out += ["@aw.kernel", "def k(y: aw.Out[aw.f32], x: aw.In[aw.f32]):", "    i = aw.global_id()",
            f"    y[i] = f{levels - 1}(x[i])", ""]
    return "\n".join(out)


def _inlined(levels: int, fanout: int) -> int:
    return sum(fanout ** d for d in range(levels))  # every call site of every level


def test_inlining_budget_stops_an_exponential_chain_at_once(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(frontend_inline, "MAX_INLINED_CALLS", 40)
    mod = _load(tmp_path, "chain_small", _chain_source(5, 4))  # 341 calls > 40
    counted = []
    real = Frontend.inline

    def counting(self, fn, node):
        counted.append(fn.name)
        return real(self, fn, node)

    monkeypatch.setattr(Frontend, "inline", counting)
    with pytest.raises(CompileError) as ei:
        mod.k.compile()
    msg = str(ei.value)
    assert "inlining budget" in msg and "40" in msg and "f4 -> f3 -> f2" in msg, msg
    assert "chain_small.py" in msg  # at the user's call
    assert len(counted) == 41  # it stopped at the first call over the budget


def test_inlining_within_the_budget_compiles_and_runs(tmp_path, monkeypatch) -> None:
    levels, fanout = 3, 3
    monkeypatch.setattr(frontend_inline, "MAX_INLINED_CALLS", _inlined(levels, fanout))
    mod = _load(tmp_path, "chain_ok", _chain_source(levels, fanout))
    x = np.arange(8, dtype=np.float32)
    y = np.zeros_like(x)
    mod.k(y, x, grid=1, workgroup=8, target="emulator", wave_width=8)
    np.testing.assert_array_equal(y, (x + 1) * fanout ** (levels - 1))


def test_default_budget_refuses_the_reported_chain(tmp_path) -> None:
    # 9 functions calling each other 4 times (issue 31: 10-20 s and 400 MB, one level more never ended)
    mod = _load(tmp_path, "chain9", _chain_source(9, 4))
    assert _inlined(9, 4) > frontend_inline.MAX_INLINED_CALLS
    with pytest.raises(CompileError, match="inlining budget"):
        mod.k.compile()


def test_a_500_term_sum_compiles(tmp_path) -> None:
    terms = " + ".join(f"x[{i % 4}]" for i in range(500))
    mod = _load(tmp_path, "sum500", "import anywave as aw\n\n@aw.kernel\n"
                "def big(y: aw.Out[aw.f32], x: aw.In[aw.f32]):\n    y[0] = " + terms + "\n")
    x = np.array([1, 2, 3, 4], np.float32)
    y = np.zeros(1, np.float32)
    mod.big(y, x, grid=1, workgroup=1, target="emulator", wave_width=8)
    assert y[0] == 125 * 10  # small integers: exact in f32 in any order


def test_150_nested_intrinsic_calls_compile(tmp_path) -> None:
    expr = "x[0]"
    for _ in range(150):
        expr = f"aw.sqrt({expr})"
    mod = _load(tmp_path, "nest150", "import anywave as aw\n\n@aw.kernel\n"
                "def nest(y: aw.Out[aw.f32], x: aw.In[aw.f32]):\n    y[0] = " + expr + "\n")
    x = np.array([1.0], np.float32)
    y = np.zeros(1, np.float32)
    mod.nest(y, x, grid=1, workgroup=1, target="emulator", wave_width=8)
    assert y[0] == 1.0  # sqrt(1) = 1 exactly


def test_too_deep_an_expression_is_a_compile_error(tmp_path, monkeypatch) -> None:
    # past the compile's recursion allowance (lowered here, so the test stays small) the
    # RecursionError becomes a CompileError naming the kernel's line
    kmod = importlib.import_module("anywave.compiler.kernel")
    monkeypatch.setattr(kmod, "_RECURSION_LIMIT", sys.getrecursionlimit())
    terms = " + ".join(f"x[{i % 4}]" for i in range(1500))
    mod = _load(tmp_path, "sum500b", "import anywave as aw\n\n@aw.kernel\n"
                "def big(y: aw.Out[aw.f32], x: aw.In[aw.f32]):\n    y[0] = " + terms + "\n")
    with pytest.raises(CompileError, match="nested too deeply") as ei:
        mod.big.compile()
    assert "sum500b.py" in str(ei.value)


def test_a_4_gib_local_array_is_a_compile_error_at_its_line(tmp_path) -> None:
    mod = _load(tmp_path, "huge", "import anywave as aw\n\n@aw.kernel\ndef huge(y: aw.Out[aw.f32]):\n"
                "    s = aw.local_array(aw.f32, 1 << 30)\n    s[0] = 1.0\n    y[0] = s[0]\n")
    with pytest.raises(CompileError) as ei:
        mod.huge.compile()
    msg = str(ei.value)
    assert "huge.py:5" in msg and "4294967296 bytes" in msg and "internal compiler error" not in msg, msg
