"""Compiler errors: each names the construct/type, shows the user's own line and a caret;
launch validation; register pressure."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import anywave as aw
from anywave.compiler import CompileError, LaunchError
from anywave.compiler.bindings import Intrinsic
from anywave.errors import WaveError


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _line_of(fn, needle: str) -> tuple[int, str]:
    lines, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    for k, text in enumerate(lines):
        if needle in text:
            return first + k, text.rstrip("\n")
    raise AssertionError(needle)


def _check(kern, needle: str, *words: str, caret_at: str | None = None) -> CompileError:
    with pytest.raises(CompileError) as ei:
        kern.compile()
    e = ei.value
    line, text = _line_of(kern, needle)
    msg = str(e)
    assert isinstance(e, WaveError)
    assert e.loc is not None and e.loc.line == line, msg
    assert f"test_compiler_errors.py:{line}:" in msg
    assert text.strip() in msg  # the source line is shown
    caret_line = msg.splitlines()[-1]
    assert "^" in caret_line
    col = caret_line.index("^") - 4  # excerpt is indented by 4
    target = caret_at or needle
    assert text.expandtabs(1).index(target) == col, msg
    for w in words:
        assert w in msg, msg
    return e


@aw.kernel
def e_int_div(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    x[i] = x[i] / 2


@aw.kernel
def e_mixed(x: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    x[i] = x[i] + n


@aw.kernel
def e_signed(x: aw.Buffer[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    x[i] = x[i] + aw.u32(i) * n


@aw.kernel
def e_read_out(x: aw.Out[aw.f32]):
    i = aw.global_id(0)
    x[i] = x[i + 1]


@aw.kernel
def e_write_in(x: aw.In[aw.f32]):
    i = aw.global_id(0)
    x[i] = 1.0


@aw.kernel
def e_undefined(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    if i > 3:
        v = 1
    x[i] = v


@aw.kernel
def e_unknown_name(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    x[i] = undefined_thing + 1  # noqa: F821


@aw.kernel
def e_listcomp(x: aw.Buffer[aw.i32]):
    ys = [k for k in range(3)]
    x[0] = ys[0]


@aw.kernel
def e_retype(x: aw.Buffer[aw.i32]):
    acc = 0
    acc = 1.5
    x[0] = acc


@aw.kernel
def e_float_literal(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    x[i] = x[i] * 2.5


@aw.kernel
def e_range_float(x: aw.Buffer[aw.f32]):
    for _k in range(x[0]):
        x[1] = 0.0


@aw.kernel
def e_return_value(x: aw.Buffer[aw.f32]):
    return x[0]


@aw.kernel
def e_literal_range(x: aw.Buffer[aw.u32]):
    x[0] = x[0] + 5000000000


@aw.kernel
def e_bad_call(x: aw.Buffer[aw.f32]):
    print(x[0])


@aw.kernel
def e_atomic_in(x: aw.In[aw.i32], y: aw.Buffer[aw.i32]):
    aw.atomic_add(x, 0, 1)


@aw.kernel
def e_walrus(x: aw.Buffer[aw.i32]):
    if (k := x[0]) > 0:
        x[1] = k


@aw.kernel
def e_try(x: aw.Buffer[aw.i32]):
    try:
        x[0] = 1
    except Exception:
        pass


# errors raised with their own node: the caret under the sub-expression at fault
@aw.kernel
def e_where_float(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    x[i] = aw.where(i < 4, x[i], 1.5)


@aw.kernel
def e_wave_of_buffer(x: aw.Buffer[aw.f32]):
    x[0] = aw.wave_sum(x)


@aw.kernel
def e_augassign_float(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    acc = x[i]
    acc += 2.5
    x[i] = acc


@aw.kernel
def e_compare_float(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    if x[i] < 2.5:
        x[i] = 0


@aw.kernel
def e_min_float(x: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    x[i] = min(x[i], 7, 2.5)


@aw.kernel
def e_shape(x: aw.Buffer[aw.f32]):
    t = aw.local_array(aw.f32, (4, 4))
    t[1] = 0.0


CASES = [
    (e_int_div, "x[i] / 2", ("'/'", "i32", "//")),
    (e_mixed, "x[i] + n", ("f32", "i32", "aw.f32")),
    (e_signed, "x[i] + aw.u32(i) * n", ("u32", "i32"), "aw.u32(i) * n"),
    (e_read_out, "x[i + 1]", ("aw.Out", "write only")),
    (e_write_in, "x[i] = 1.0", ("aw.In", "read only"), "x[i]"),
    (e_unknown_name, "undefined_thing", ("'undefined_thing'", "not defined")),
    (e_listcomp, "[k for k in range(3)]", ("list comprehension",)),
    (e_retype, "acc = 1.5", ("'acc'", "i32", "f32"), "acc"),
    (e_float_literal, "x[i] * 2.5", ("2.5", "i32"), "2.5"),
    (e_range_float, "range(x[0])", ("integers", "f32")),
    (e_return_value, "return x[0]", ("cannot return a value",), "x[0]"),
    (e_literal_range, "x[0] + 5000000000", ("5000000000", "u32"), "5000000000"),
    (e_bad_call, "print(x[0])", ("print()",)),
    (e_atomic_in, "aw.atomic_add(x, 0, 1)", ("read-write",), "x, 0"),
    (e_walrus, "k := x[0]", ("assignment expression",)),
    (e_try, "try:", ("try statement",)),
    (e_shape, "t[1] = 0.0", ("shape (4, 4)", "2 indices"), "t[1]"),
    (e_where_float, "aw.where(i < 4, x[i], 1.5)", ("1.5", "i32"), "1.5"),
    (e_wave_of_buffer, "aw.wave_sum(x)", ("buffer 'x'", "value"), "x)"),
    (e_augassign_float, "acc += 2.5", ("2.5", "i32"), "2.5"),
    (e_compare_float, "x[i] < 2.5", ("2.5", "i32"), "2.5"),
    (e_min_float, "min(x[i], 7, 2.5)", ("2.5", "i32"), "2.5"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0].name for c in CASES])
def test_compile_error_points_at_the_line(case):
    kern, needle, words = case[:3]
    caret = case[3] if len(case) > 3 else None
    e = _check(kern, needle, *words, caret_at=caret)
    assert e.kernel == kern.name


def test_undefined_caret_on_the_name():
    with pytest.raises(CompileError) as ei:
        e_undefined.compile()
    msg = str(ei.value)
    line, text = _line_of(e_undefined, "x[i] = v")
    col = msg.splitlines()[-1].index("^") - 4
    assert col == text.rindex("v")
    assert "'v' may be undefined" in msg and f":{line}:" in msg


@aw.kernel
def _big_literal(x: aw.Buffer[aw.i32]):
    x[0] = 5000000000


def test_overflowing_literal_caret_points_at_the_literal() -> None:
    with pytest.raises(aw.CompileError) as ei:
        _big_literal.compile()
    lines = str(ei.value).splitlines()
    src = next(i for i, ln in enumerate(lines) if "5000000000" in ln and "x[0]" in ln)
    caret = lines[src + 1]
    assert caret.index("^") == lines[src].index("5000000000")


def test_every_marker_has_a_lowering():
    """The registry in compiler/language.py: each marker is declared with a callable lowering."""
    from anywave.compiler.language import INTRINSICS

    assert len(INTRINSICS) > 70
    missing = [n for n, m in INTRINSICS.items() if not callable(m.lower)]
    assert not missing, missing
    assert all(m.name == n for n, m in INTRINSICS.items())


_unregistered = Intrinsic("frobnicate", "a marker declared without a lowering")


@aw.kernel
def e_unregistered(x: aw.Buffer[aw.f32]):
    x[0] = _unregistered(x[1])


def test_marker_without_lowering_is_a_clear_error():
    e = _check(e_unregistered, "_unregistered(x[1])", "aw.frobnicate()", "no lowering", "anywave.compiler.language")
    assert e.kernel == "e_unregistered"


def test_bad_parameter_annotation():
    def k(x: int):
        pass

    with pytest.raises(CompileError, match="annotated"):
        _ = aw.kernel(k).params


# ----------------------------------------------------------------------------- launch validation

@aw.kernel
def add1(x: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        x[i] = x[i] + 1.0


def test_launch_validation():
    x = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match="takes 2 arguments"):
        add1(x, 8, 9, grid=1, workgroup=8)
    with pytest.raises(LaunchError, match="dtype float32, got float64"):
        add1(np.zeros(8), 8, grid=1, workgroup=8)
    with pytest.raises(LaunchError, match="C-contiguous"):
        add1(np.zeros(16, np.float32)[::2], 8, grid=1, workgroup=8)
    with pytest.raises(WaveError, match="out of range for i32"):
        add1(x, 2**40, grid=1, workgroup=8)
    with pytest.raises(LaunchError, match="NumPy array"):
        add1([0.0] * 8, 8, grid=1, workgroup=8)
    with pytest.raises(LaunchError, match="grid="):
        add1(x, 8, workgroup=8)
    with pytest.raises(WaveError, match="unknown target"):
        add1(x, 8, grid=1, workgroup=8, target="nope")
    add1(x, 8, grid=1, workgroup=8, target="emulator", wave_width=8)
    assert np.all(x == 1)


# Found by using the compiler as a user (review of issues 4-8): launch-configuration errors on
# the emulator are WaveErrors with complete messages
@aw.kernel
def _copy(x: aw.In[aw.i32], y: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i]


@aw.kernel
def _big_local(x: aw.Buffer[aw.f32]):
    t = aw.local_array(aw.f32, (1000, 100))
    t[0, 0] = 1.0
    x[0] = t[0, 0]


def _args(n: int = 16) -> list:
    return [np.zeros(n, np.int32), np.zeros(n, np.int32), n]


def test_too_large_workgroup_on_emulator_is_a_wave_error() -> None:
    with pytest.raises(WaveError):
        _copy(*_args(), grid=1, workgroup=2000, target="emulator")


def test_invalid_wave_width_on_emulator_is_a_wave_error() -> None:
    with pytest.raises(WaveError):
        _copy(*_args(), grid=2, workgroup=8, target="emulator", wave_width=12)


def test_too_much_local_memory_on_emulator_is_a_wave_error() -> None:
    with pytest.raises(WaveError) as ei:
        _big_local(np.zeros(4, np.float32), grid=1, workgroup=1, target="emulator", wave_width=8)
    assert "=)" not in str(ei.value)


# ----------------------------------------------------------------------------- register pressure

def _pressure_kernel(nvals: int):
    src = ["def pressure(x: aw.In[aw.f32], out: aw.Out[aw.f32]):", "    i = aw.global_id(0)"]
    src += [f"    v{k} = x[i + {k}]" for k in range(nvals)]
    src += ["    acc = 0.0"]
    src += [f"    acc = acc * v{k} + v{nvals - 1 - k}" for k in range(nvals)]
    src += ["    out[i] = acc"]
    return "\n".join(src) + "\n"


@pytest.mark.parametrize("nvals,spills", [(100, False), (300, True)])
def test_register_pressure(tmp_path, nvals, spills):
    # 300 live values do not fit in 255 registers: some are spilled to local memory
    # (compiler/spill.py), and the result is still the sequential reference
    import importlib.util
    import sys

    path = tmp_path / f"pressure_{nvals}.py"
    path.write_text("import anywave as aw\n\n@aw.kernel\n" + _pressure_kernel(nvals))
    spec = importlib.util.spec_from_file_location(f"pressure_{nvals}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    m = mod.pressure.compile()
    assert m.kernel("pressure").registers <= 255
    assert (mod.pressure.resources()["spilled"] > 0) == spills
    x = (np.arange(nvals + 4) % 10 / 10).astype(np.float32)  # < 1: the chain stays finite
    out = np.zeros(4, np.float32)
    mod.pressure(x, out, grid=1, workgroup=4, wave_width=8, target="emulator")
    for i in range(4):
        acc = np.float32(0)
        for k in range(nvals):
            acc = acc * x[i + k] + x[i + nvals - 1 - k]
        assert out[i] == acc


# ----------------------------------------------------------------------------- CLI and disk cache

def test_cli_compile_provider(tmp_path):
    import argparse

    from anywave.binary.wbin import read_wbin
    from anywave.compiler import cli_compile

    src = tmp_path / "kern.py"
    src.write_text("import anywave as aw\n\n@aw.kernel\n"
                   "def scale(x: aw.Buffer[aw.f32], n: aw.i32, *, f: float = 2.0):\n"
                   "    i = aw.global_id(0)\n    if i < n:\n        x[i] = x[i] * f\n")
    p = argparse.ArgumentParser()
    cli_compile.add_parser(p.add_subparsers(dest="cmd"))
    out = tmp_path / "kern.wbin"
    assert cli_compile.run(p.parse_args(["compile", str(src), "-o", str(out), "-D", "f=3.0"])) == 0
    m = read_wbin(out.read_bytes())
    assert [k.name for k in m.kernels] == ["scale"]
    x = np.arange(8, dtype=np.float32)
    aw.emulate(m, "scale", grid=1, workgroup=8, args=[x, 8], wave_width=8)
    assert np.array_equal(x, np.arange(8, dtype=np.float32) * 3)
    with pytest.raises(WaveError, match="no kernel named"):
        cli_compile.run(p.parse_args(["compile", str(src), "--kernel", "nope"]))


def test_disk_cache_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "c2"))
    k = aw.kernel(add1.fn, name="add1_cached")
    m1 = k.compile()
    files = list((tmp_path / "c2" / "compiled").glob("*.wbin"))
    assert len(files) == 1
    k2 = aw.kernel(add1.fn, name="add1_cached")  # fresh object: no memory cache
    m2 = k2.compile()
    assert m2.kernel("add1_cached").code == m1.kernel("add1_cached").code
    assert not list((tmp_path / "c2" / "compiled").glob(".tmp-*"))
