"""The CLI reaches every backend and runtime target, its help is clean, ``-o -`` writes to
standard output, and compiled binaries do not depend on the directory they were built in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anywave import cli
from anywave.backends.registry import backend_names, get_backend
from anywave.binary.wbin import read_wbin, save
from test_wbin import saxpy_module

SRC = Path(__file__).resolve().parents[1] / "src"

KERNEL_PY = """\
import anywave as aw


@aw.kernel
def total(x: aw.In[aw.f32], out: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    v = x[i] if i < n else aw.f32(0.0)
    s = aw.workgroup_reduce(v)
    if aw.local_id(0) == 0:
        aw.atomic_add(out, 0, s)
"""


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["ANYWAVE_CACHE_DIR"] = str(cache)
    return env


@pytest.fixture
def wbin(tmp_path):
    p = tmp_path / "saxpy.wbin"
    save(saxpy_module(), p)
    return p


# ------------------------------------------------------------------ translate / run reach everything

def test_translate_reaches_every_registered_backend(wbin, capsys):
    names = backend_names()
    assert {"ptx", "opencl", "sycl", "hip", "metal"} <= set(names)
    for name in names:
        assert cli.main(["translate", str(wbin), "--target", name, "-o", "-"]) == 0, name
        text = capsys.readouterr().out
        assert "saxpy" in text or "aw_k_saxpy" in text, name
    # each backend's own marker: the text really is that language
    markers = {"ptx": ".visible .entry", "opencl": "__kernel", "sycl": "sycl::", "hip": "__global__",
               "metal": "kernel void"}
    for name, marker in markers.items():
        cli.main(["translate", str(wbin), "-t", name])
        assert marker in capsys.readouterr().out, name


def test_translate_choices_come_from_the_registry(wbin, capsys, monkeypatch):
    from anywave.backends import registry

    seen = []

    def fake(module, *, arch, wave_width, kernels, comments):
        seen.append(wave_width)
        return f"// fake {len(module.kernels)} kernel(s) at W={wave_width}\n"

    monkeypatch.setitem(registry._REGISTRY, "fakelang", registry.Backend("fakelang", "Fake", ".f", fake, (8, 16), 8))
    assert cli.main(["translate", str(wbin), "--target", "fakelang", "-W", "16"]) == 0
    assert capsys.readouterr().out == "// fake 1 kernel(s) at W=16\n" and seen == [16]
    assert cli.main(["translate", "--help"]) == 0
    assert "fakelang" in capsys.readouterr().out


def test_translate_bad_option_values_are_user_errors(wbin, capsys):
    assert cli.main(["translate", str(wbin), "-t", "hip", "-W", "16"]) == 1
    err = capsys.readouterr().err
    assert "hip" in err and "[32, 64]" in err and "16" in err and "Traceback" not in err
    assert cli.main(["translate", str(wbin), "-t", "opencl", "--arch", "sm_80"]) == 1
    assert "--arch" in capsys.readouterr().err
    assert cli.main(["translate", str(wbin), "-t", "nosuch"]) == 2


def test_translate_writes_a_file(wbin, tmp_path):
    out = tmp_path / "k.cl"
    assert cli.main(["translate", str(wbin), "-t", "opencl", "-W", "8", "-o", str(out)]) == 0
    text = out.read_text()
    assert "__kernel" in text
    assert get_backend("opencl").suffix == ".cl"


def test_run_target_choices_are_the_runtime_registry(capsys):
    from anywave.runtime.targets import target_names

    assert cli.main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for name in target_names():
        assert name in text


def test_run_on_opencl_matches_the_emulator(wbin, tmp_path):
    from anywave.runtime import opencl

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100).astype(np.float32)
    y = rng.standard_normal(100).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    outs = {}
    for target in ("emulator", "opencl"):
        out = tmp_path / f"y_{target}.npy"
        assert cli.main(["run", str(wbin), "--target", target, "--grid", "2", "--wave-width", "16",
                         "--arg", "a=1.5", "--arg", f"x={tmp_path / 'x.npy'}", "--arg", f"y={tmp_path / 'y.npy'}",
                         "--arg", "n=100", "--out", f"y={out}"]) == 0
        outs[target] = np.load(out)
    # fma rounds once: the float64 product plus sum of f32 inputs is exact here, rounded to f32 once
    expect = (np.float64(1.5) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    assert np.array_equal(outs["emulator"].view(np.uint32), expect.view(np.uint32))
    assert np.array_equal(outs["opencl"].view(np.uint32), outs["emulator"].view(np.uint32))


def test_run_emulator_only_options_are_refused_on_a_target(wbin, capsys):
    assert cli.main(["run", str(wbin), "--target", "cuda", "--grid", "1", "--trace", "0",
                     "--arg", "n=0"]) == 2
    assert "--trace" in capsys.readouterr().err


# ------------------------------------------------------------------ help texts

_RAW = re.compile(r"``|:(mod|func|class|data|meth):|\bprovider\b|add_parser|\*\*|\.\. ")


def test_every_subcommand_help_is_clean():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert len(sub.choices) >= 10
    for name, p in sub.choices.items():
        text = p.format_help()
        assert not _RAW.search(text), f"anywave {name} --help shows raw markup or internals:\n{text}"
        assert p.description, f"anywave {name} has no description"
    top = parser.format_help()
    assert not _RAW.search(top)


# ------------------------------------------------------------------ -o - and dis --loc

def test_dash_o_writes_to_stdout(tmp_path):
    src = tmp_path / "k.wave"
    from anywave.asm import disassemble

    src.write_text(disassemble(saxpy_module()))
    r = subprocess.run([sys.executable, "-m", "anywave", "asm", str(src), "-o", "-"], capture_output=True,
                       env=_env(tmp_path / "c"), check=True)
    assert read_wbin(r.stdout) == saxpy_module()
    assert not (tmp_path / "k.wbin").exists() and not (tmp_path / "-").exists()


def test_dis_prints_loc_lines_only_when_asked(tmp_path, capsys):
    from anywave.binary.module import Instruction, Kernel, Module
    from anywave.errors import SourceLoc

    m = Module([Kernel("k", code=[Instruction.make("halt", loc=SourceLoc("k.py", 3, 7))])])
    p = tmp_path / "k.wbin"
    save(m, p)
    assert cli.main(["dis", str(p)]) == 0
    plain = capsys.readouterr().out
    assert ".loc" not in plain and ".nodebug" in plain
    assert cli.main(["dis", "--loc", str(p)]) == 0
    assert '.loc "k.py" 3 7' in capsys.readouterr().out


# ------------------------------------------------------------------ reproducible binaries

def _compile_in(directory: Path, cache: Path, *extra: str) -> bytes:
    directory.mkdir(parents=True)
    (directory / "k.py").write_text(KERNEL_PY)
    subprocess.run([sys.executable, "-m", "anywave", "compile", "k.py", "-o", "k.wbin", *extra], cwd=directory,
                   env=_env(cache), check=True, capture_output=True)
    return (directory / "k.wbin").read_bytes()


def test_two_builds_from_different_directories_give_the_same_bytes(tmp_path):
    a = _compile_in(tmp_path / "alice" / "proj", tmp_path / "cache-a")
    b = _compile_in(tmp_path / "bob" / "deep" / "er" / "proj", tmp_path / "cache-b")
    assert a == b
    m = read_wbin(a)
    files = {ins.loc.file for ins in m.kernels[0].code if ins.loc is not None}
    assert files == {"k.py", "<anywave>/compiler/stdlib.py"}  # the kernel calls workgroup_reduce
    assert str(tmp_path).encode() not in a and b"site-packages" not in a


def test_a_shared_cache_does_not_leak_another_directory(tmp_path):
    # the disk cache is keyed by file too: the second build must not reuse the first one's locations
    a = _compile_in(tmp_path / "one", tmp_path / "cache")
    b = _compile_in(tmp_path / "two", tmp_path / "cache")
    assert a == b


def test_debug_path_modes(tmp_path):
    absolute = _compile_in(tmp_path / "p", tmp_path / "c", "--debug-paths", "absolute")
    files = {i.loc.file for i in read_wbin(absolute).kernels[0].code if i.loc is not None}
    assert str((tmp_path / "p" / "k.py").resolve()) in files or str(tmp_path / "p" / "k.py") in files
    none = _compile_in(tmp_path / "q", tmp_path / "c", "--debug-paths", "none")
    assert all(i.loc is None for i in read_wbin(none).kernels[0].code)
    rooted = _compile_in(tmp_path / "r" / "s", tmp_path / "c", "--debug-root", "..")
    files = {i.loc.file for i in read_wbin(rooted).kernels[0].code if i.loc is not None}
    assert "s/k.py" in files


def test_a_binary_backend_writes_bytes_with_o(wbin, tmp_path, capsys, monkeypatch):
    from anywave.backends import registry

    def text(module, *, arch, wave_width, kernels, comments):
        return "; readable\n"

    def binary(module, *, wave_width, kernels):
        return bytes([wave_width, 0, 255])

    monkeypatch.setitem(registry._REGISTRY, "binlang", registry.Backend("binlang", "Bin", ".bin", text, (8, 16), 8,
                                                                          binary=binary))
    assert cli.main(["translate", str(wbin), "-t", "binlang"]) == 0
    assert capsys.readouterr().out == "; readable\n"
    out = tmp_path / "k.bin"
    assert cli.main(["translate", str(wbin), "-t", "binlang", "-W", "16", "-o", str(out)]) == 0
    assert out.read_bytes() == bytes([16, 0, 255])
