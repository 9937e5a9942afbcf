"""The ``anywave`` command line: subcommands, exit statuses and messages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import anywave
import anywave.asm
from anywave import cli
from anywave.binary.wbin import read_wbin, save, write_wbin
from test_wbin import saxpy_module

needs_asm = pytest.mark.skipif(not (hasattr(anywave.asm, "assemble") and hasattr(anywave.asm, "disassemble")),
                               reason="the assembler (anywave.asm.assemble/disassemble) is not available yet")

SAXPY_WAVE = """\
; y = a*x + y
.kernel saxpy
.arg a scalar f32
.arg x buffer f32 read
.arg y buffer f32 readwrite
.arg n scalar u32
.registers 8
.workgroup_size 64
    mov.sr      r0, sr_global_id_x
    ldarg.b32   r1, n
    setp.ge.u32 p0, r0, r1
    @p0 halt
    ldarg.b32   r1, a
    movi.b32    r5, 2
    shl.b32     r2, r0, r5
    ld.device.b32 r3, x[r2]
    ld.device.b32 r4, y[r2]
    fma.f32     r4, r1, r3, r4
    st.device.b32 y[r2], r4
    halt
.end
"""


@pytest.fixture
def wbin(tmp_path):
    p = tmp_path / "saxpy.wbin"
    save(saxpy_module(), p)
    return p


def test_no_arguments_prints_help(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for name in ("asm", "dis", "validate", "info"):
        assert name in out


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"anywave {anywave.__version__}"


@pytest.mark.parametrize("cmd", ["asm", "dis", "validate", "info"])
def test_help_of_each_subcommand(cmd, capsys):
    assert cli.main([cmd, "--help"]) == 0
    assert f"anywave {cmd}" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert cli.main(["info"]) == 2
    assert "required" in capsys.readouterr().err


def test_info_text_and_json(wbin, capsys):
    assert cli.main(["info", str(wbin)]) == 0
    out = capsys.readouterr().out
    assert "kernel saxpy" in out
    assert "registers:          8" in out
    assert "64x1x1" in out
    assert "readwrite" in out
    assert cli.main(["info", "--json", str(wbin)]) == 0
    info = json.loads(capsys.readouterr().out)
    (k,) = info["kernels"]
    assert [a["name"] for a in k["args"]] == ["a", "x", "y", "n"]
    assert k["args"][2] == {"index": 2, "name": "y", "kind": "buffer", "type": "f32", "access": "readwrite"}
    assert k["registers"] == 8 and k["local_memory"] == 0
    assert k["workgroup_size"] == [64, 1, 1] and k["max_workgroup_size"] == 256
    assert k["calls"] == ["helper"]
    # 13 kernel instructions + 2 in helper; counted by hand from saxpy_module()
    assert k["instructions"] == 15
    assert k["instructions_by_category"] == {
        "float": 1, "bitwise": 1, "compare": 1, "device_memory": 3, "control": 5, "move": 4}


def test_validate_ok_and_problems(wbin, tmp_path, capsys):
    assert cli.main(["validate", str(wbin)]) == 0
    assert capsys.readouterr().out.strip() == f"{wbin}: ok"
    m = saxpy_module()
    m.kernels[0].registers = 2
    m.kernels[0].args[1].access = anywave.isa.Access.WRITE
    bad = tmp_path / "bad.wbin"
    save(m, bad, verify=False)
    assert cli.main(["validate", str(wbin), str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{wbin}: ok"
    assert all(line.startswith(f"{bad}: error: ") for line in lines[1:])
    assert any("load from buffer 'x' declared write" in line for line in lines[1:])
    assert any("r2" in line for line in lines[1:])


def test_validate_broken_binary_and_missing_file(tmp_path, capsys):
    junk = tmp_path / "junk.wbin"
    junk.write_bytes(b"WBIN" + b"\0" * 40)
    missing = tmp_path / "missing.wbin"
    assert cli.main(["validate", str(junk), str(missing)]) == 1
    out = capsys.readouterr().out
    assert "junk.wbin: error:" in out and "version" in out
    assert "missing.wbin: error:" in out and "No such file" in out


def test_user_errors_exit_1_without_traceback(tmp_path, capsys):
    junk = tmp_path / "junk.wbin"
    junk.write_bytes(b"not a wave binary at all, no no no")
    assert cli.main(["info", str(junk)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("anywave: error:") and "magic" in err and "Traceback" not in err
    assert cli.main(["info", str(tmp_path / "x.txt")]) == 1
    assert "unknown file type '.txt'" in capsys.readouterr().err


def test_python_dash_m(tmp_path):
    r = subprocess.run([sys.executable, "-m", "anywave", "info", str(tmp_path / "nope.wbin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "nope.wbin" in r.stderr
    r = subprocess.run([sys.executable, "-m", "anywave", "--version"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "anywave" in r.stdout


def test_registry_accepts_new_providers(capsys, monkeypatch):
    class Hello:
        @staticmethod
        def add_parser(sub):
            p = sub.add_parser("hello", help="say hello")
            p.add_argument("--name", default="wave")
            return p

        @staticmethod
        def run(args):
            print(f"hello {args.name}")
            return 0

    monkeypatch.setattr(cli, "COMMANDS", list(cli.COMMANDS))
    cli.register(Hello)
    assert cli.main(["hello", "--name", "gpu"]) == 0
    assert capsys.readouterr().out == "hello gpu\n"


@needs_asm
def test_asm_dis_round_trip(tmp_path, capsys):
    src = tmp_path / "saxpy.wave"
    src.write_text(SAXPY_WAVE)
    assert cli.main(["asm", str(src)]) == 0
    out = tmp_path / "saxpy.wbin"
    m = read_wbin(out.read_bytes())
    k = m.kernel("saxpy")
    assert k.registers == 8 and [a.name for a in k.args] == ["a", "x", "y", "n"]
    assert len(k.code) == 12
    assert cli.main(["dis", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fma.f32" in text
    # the disassembly assembles to the same binary
    again = tmp_path / "again.wave"
    assert cli.main(["dis", str(out), "-o", str(again)]) == 0
    assert cli.main(["asm", str(again), "-o", str(tmp_path / "again.wbin")]) == 0
    assert read_wbin((tmp_path / "again.wbin").read_bytes()) == m
    assert cli.main(["validate", str(src)]) == 0
    assert cli.main(["info", str(src)]) == 0


@needs_asm
def test_asm_error_has_location_and_caret(tmp_path, capsys):
    src = tmp_path / "bad.wave"
    src.write_text(SAXPY_WAVE.replace("fma.f32     r4", "fma.f32     r99"))
    assert cli.main(["asm", str(src)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "instruction 9 (fma.f32)" in err and "r99" in err and "8 registers" in err
    assert not (tmp_path / "bad.wbin").exists()
    # a syntax error: file:line:column and a caret under the offending text
    src.write_text(SAXPY_WAVE.replace("fma.f32     r4", "fmx.f32     r4"))
    assert cli.main(["asm", str(src)]) == 1
    err = capsys.readouterr().err
    assert "bad.wave:18:5" in err and "^" in err and "Traceback" not in err


def test_written_binary_matches_library(wbin):
    assert wbin.read_bytes() == write_wbin(saxpy_module())
