"""The ``anywave`` command line: subcommands, exit statuses and messages."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
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


def test_no_arguments_prints_help_to_stderr_as_a_usage_error(capsys):
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for name in ("asm", "dis", "validate", "info", "run"):
        assert name in captured.err


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


def test_info_reads_standard_input(wbin):
    # "-": a .wbin by its magic bytes, else .wave text; in a child process (its real stdin)
    def info(data: bytes) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "anywave", "info", "--json", "-"], input=data,
                              capture_output=True, timeout=120)

    r = info(wbin.read_bytes())
    assert r.returncode == 0, r.stderr
    assert [k["name"] for k in json.loads(r.stdout)["kernels"]] == ["saxpy"]
    r = info(SAXPY_WAVE.encode())
    assert r.returncode == 0, r.stderr
    (k,) = json.loads(r.stdout)["kernels"]
    assert k["registers"] == 8 and k["instructions"] == 12  # the 12 lines of SAXPY_WAVE
    r = info(b"\xff\xfe not text")
    assert r.returncode != 0 and b"<stdin>: not UTF-8 text" in r.stderr and b"Traceback" not in r.stderr


def _stdin_run(args: list[str], data: bytes | None) -> subprocess.CompletedProcess:
    # a child process with ``data`` on its real standard input; None: standard input closed (<&-)
    cmd = [sys.executable, "-m", "anywave", *args]
    if data is None:
        return subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *cmd], capture_output=True, timeout=120)
    return subprocess.run(cmd, input=data, capture_output=True, timeout=120)


@needs_asm
def test_asm_reads_wave_text_from_standard_input(tmp_path):
    # the same module as assembling the text directly (the debug table names the source <stdin>)
    expect = write_wbin(anywave.asm.assemble(SAXPY_WAVE, "<stdin>"))
    r = _stdin_run(["asm", "-", "-o", str(tmp_path / "out.wbin")], SAXPY_WAVE.encode())
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.wbin").read_bytes() == expect
    r = _stdin_run(["asm", "-", "-o", "-"], SAXPY_WAVE.encode())
    assert r.returncode == 0 and r.stdout == expect, r.stderr
    # no -o: no name to derive the output's from; a .wbin is not .wave text
    for args, data, status, msg in ((["asm", "-"], SAXPY_WAVE.encode(), 2, b"needs -o"),
                                    (["asm", "-", "-o", str(tmp_path / "o.wbin")], expect, 1,
                                     b"got a .wbin binary")):
        r = _stdin_run(args, data)
        assert r.returncode == status and msg in r.stderr and b"Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "o.wbin").exists()


@pytest.mark.parametrize("args", [["info"], ["validate"], ["translate", "--target", "opencl", "-o", "-"],
                                  ["asm", "-o", "-"]])
def test_closed_standard_input_is_a_clear_error(args):
    r = _stdin_run([args[0], "-", *args[1:]], None)
    assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
    assert b"<stdin>: standard input is closed" in r.stderr and len(r.stderr.decode().strip().splitlines()) == 1


def test_standard_input_read_once_and_named_in_errors(wbin):
    # "- -" would read an empty second module and call it ok
    r = _stdin_run(["validate", "-", "-"], SAXPY_WAVE.encode())
    assert r.returncode == 2 and b"only once" in r.stderr and r.stdout == b"", (r.stdout, r.stderr)
    # a broken .wbin on standard input is named as a file's would be
    r = _stdin_run(["info", "-"], wbin.read_bytes()[:100])
    assert r.returncode == 1 and r.stderr.startswith(b"anywave: error: <stdin>: truncated file"), r.stderr


def test_validate_ok_and_problems(wbin, tmp_path, capsys):
    assert cli.main(["validate", str(wbin)]) == 0
    assert capsys.readouterr().out.strip() == f"{wbin}: ok"
    m = saxpy_module()
    m.kernels[0].registers = 2
    m.kernels[0].args[1].access = anywave.isa.Access.WRITE
    bad = tmp_path / "bad.wbin"
    save(m, bad, verify=False)
    assert cli.main(["validate", str(wbin), str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{wbin}: ok"]  # ok lines on stdout, problems on stderr
    lines = captured.err.splitlines()
    assert lines and all(line.startswith(f"{bad}: error: ") for line in lines)
    assert any("load from buffer 'x' declared write" in line for line in lines)
    assert any("r2" in line for line in lines)


def test_validate_broken_binary_and_missing_file(tmp_path, capsys):
    junk = tmp_path / "junk.wbin"
    junk.write_bytes(b"WBIN" + b"\0" * 40)
    missing = tmp_path / "missing.wbin"
    assert cli.main(["validate", str(junk), str(missing)]) == 1
    out = capsys.readouterr().err
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
                       capture_output=True, text=True, timeout=600)  # hang guard
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "nope.wbin" in r.stderr
    r = subprocess.run([sys.executable, "-m", "anywave", "--version"], capture_output=True, text=True,
                       timeout=600)  # hang guard, not a budget
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


# ----------------------------------------------------------------------------- review fixes (issues 2, 3)

ADD1_WAVE = """\
; y[i] = x[i] + 1.0 for i < n
.kernel add1
.arg x buffer f32 read
.arg y buffer f32 write
.arg n scalar u32
.registers 6
    mov.sr      r0, sr_global_id_x
    ldarg.b32   r1, n
    setp.ge.u32 p0, r0, r1
    @p0 halt
    movi.b32    r5, 2
    shl.b32     r2, r0, r5
    ld.device.b32 r3, x[r2]
    movi.f32    r4, 1.0
    add.f32     r3, r3, r4
    st.device.b32 y[r2], r3
    halt
.end
"""


@pytest.fixture
def add1(tmp_path):
    p = tmp_path / "add1.wave"
    p.write_text(ADD1_WAVE)
    x = np.arange(10, dtype=np.float32) * 0.5
    np.save(tmp_path / "x.npy", x)
    return p, x


@needs_asm
def test_asm_output_into_a_directory_is_a_clear_error(tmp_path, capsys):
    src = tmp_path / "saxpy.wave"
    src.write_text(SAXPY_WAVE)
    outdir = tmp_path / "outdir"
    outdir.mkdir()
    assert cli.main(["asm", str(src), "-o", str(outdir)]) == 1
    err = capsys.readouterr().err
    assert f"{outdir}: is a directory" in err and "Traceback" not in err


@needs_asm
def test_asm_skips_a_utf8_byte_order_mark(tmp_path):
    src = tmp_path / "bom.wave"
    src.write_bytes(b"\xef\xbb\xbf" + SAXPY_WAVE.encode())
    assert cli.main(["asm", str(src)]) == 0
    plain = tmp_path / "plain.wave"
    plain.write_text(SAXPY_WAVE)
    assert cli.main(["asm", str(plain)]) == 0
    assert read_wbin((tmp_path / "bom.wbin").read_bytes()).kernels == \
        read_wbin((tmp_path / "plain.wbin").read_bytes()).kernels


def test_run_requires_grid(add1, capsys):
    src, _ = add1
    assert cli.main(["run", str(src), "--workgroup", "4", "--arg", "n=1"]) == 2
    assert "--grid" in capsys.readouterr().err


def test_run_requires_workgroup_unless_the_kernel_declares_one(add1, tmp_path, capsys):
    src, x = add1
    base = ["run", str(src), "--grid", "3", "--arg", f"x={tmp_path / 'x.npy'}", "--arg", "y=zeros:10:f32",
            "--arg", "n=10"]
    assert cli.main(base) == 2
    err = capsys.readouterr().err
    assert "--workgroup is required" in err and "'add1'" in err
    fixed = tmp_path / "fixed.wave"
    fixed.write_text(ADD1_WAVE.replace(".registers 6", ".registers 6\n.workgroup_size 4"))
    out = tmp_path / "y.npy"
    assert cli.main(["run", str(fixed), *base[2:], "--out", f"y={out}"]) == 0
    np.testing.assert_array_equal(np.load(out), x + np.float32(1.0))   # 3 workgroups of 4 cover 10


def test_run_accepts_abi_type_names_in_zeros(add1, tmp_path):
    src, x = add1
    out = tmp_path / "y.npy"
    assert cli.main(["run", str(src), "--grid", "2", "--workgroup", "8", "--arg", f"x={tmp_path / 'x.npy'}",
                     "--arg", "y=zeros:10:f32", "--arg", "n=7", "--out", f"y={out}"]) == 0
    y = np.load(out)
    assert y.dtype == np.float32
    expected = np.zeros(10, np.float32)
    expected[:7] = x[:7] + np.float32(1.0)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("extra, msg", [
    (["--arg", "n=3"], "--arg n is given more than once"),
    (["--out", "n=n.npy"], "'n' is a scalar argument of kernel 'add1'"),
    (["--arg", "y=zeros:10:f33"], "unknown element type 'f33'"),
])
def test_run_rejects_repeated_args_and_out_of_a_scalar(add1, tmp_path, capsys, extra, msg):
    src, _ = add1
    argv = ["run", str(src), "--grid", "1", "--workgroup", "16", "--arg", f"x={tmp_path / 'x.npy'}",
            "--arg", "n=10"]
    if "y=" not in " ".join(extra):
        argv += ["--arg", "y=zeros:10:f32"]
    assert cli.main(argv + extra) == 1
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_run_npy_for_a_scalar_gets_a_short_message(add1, tmp_path, capsys):
    src, _ = add1
    big = tmp_path / "big.npy"
    np.save(big, np.arange(1000, dtype=np.float32))
    assert cli.main(["run", str(src), "--grid", "1", "--workgroup", "16", "--arg", f"x={tmp_path / 'x.npy'}",
                     "--arg", "y=zeros:10:f32", "--arg", f"n={big}"]) == 1
    err = capsys.readouterr().err
    assert "scalar argument (u32)" in err and "shape (1000,)" in err and "float32" in err
    assert len(err) < 400 and "999" not in err   # the array itself is not printed


def test_run_buffer_dtype_must_match_the_abi_unless_allowed(add1, tmp_path, capsys):
    src, x = add1
    np.save(tmp_path / "x64.npy", x.astype(np.float64))
    argv = ["run", str(src), "--grid", "1", "--workgroup", "16", "--arg", f"x={tmp_path / 'x64.npy'}",
            "--arg", "y=zeros:10:f32", "--arg", "n=2"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "dtype <f8 (float64) differs from the argument's element type f32" in err
    assert "--allow-dtype-mismatch" in err
    out = tmp_path / "y.npy"
    assert cli.main(argv + ["--allow-dtype-mismatch", "--out", f"y={out}"]) == 0
    # the kernel reads the float64 bytes as f32: element i is word i of the raw bytes, plus 1
    words = x.astype(np.float64).view(np.float32)[:2]
    np.testing.assert_array_equal(np.load(out)[:2], words + np.float32(1.0))


def test_run_grid_beyond_32_bits_is_refused(add1, tmp_path, capsys):
    src, _ = add1
    assert cli.main(["run", str(src), "--grid", "4294967296", "--workgroup", "1", "--arg",
                     f"x={tmp_path / 'x.npy'}", "--arg", "y=zeros:10:f32", "--arg", "n=1"]) == 1
    assert "does not fit in 32 bits" in capsys.readouterr().err


def test_run_help_is_plain_text(capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "anywave run" in out and "--grid" in out and "zeros:N:TYPE" in out
    assert "``" not in out and ":func:" not in out


# --- issue 11 item 23: output paths and empty inputs

@needs_asm
def test_asm_into_a_missing_directory_names_the_users_path(tmp_path, capsys):
    src = tmp_path / "saxpy.wave"
    src.write_text(SAXPY_WAVE)
    out = tmp_path / "nonexistent" / "dir" / "x.wbin"
    assert cli.main(["asm", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert str(out) in err and "does not exist" in err and ".tmp" not in err and "Traceback" not in err


@needs_asm
@pytest.mark.parametrize("text", ["", "; only a comment\n", "\n\n"])
def test_asm_of_an_empty_file_is_an_error(tmp_path, capsys, text):
    src = tmp_path / "empty.wave"
    src.write_text(text)
    assert cli.main(["asm", str(src)]) == 2
    err = capsys.readouterr().err
    assert "no kernel" in err and str(src) in err
    assert not src.with_suffix(".wbin").exists()


def test_run_out_writes_exactly_the_given_path(add1, tmp_path):
    src, x = add1
    out = tmp_path / "adir"  # no .npy suffix: written as given, not as adir.npy
    assert cli.main(["run", str(src), "--grid", "1", "--workgroup", "16", "--arg", f"x={tmp_path / 'x.npy'}",
                     "--arg", "y=zeros:10:f32", "--arg", "n=10", "--out", f"y={out}"]) == 0
    assert out.is_file() and not (tmp_path / "adir.npy").exists()
    np.testing.assert_array_equal(np.load(out), x + np.float32(1.0))


@pytest.mark.parametrize("where", ["directory", "missing_parent"])
def test_run_out_refuses_unwritable_paths_before_running(add1, tmp_path, capsys, where):
    src, _ = add1
    if where == "directory":
        out = tmp_path / "outdir"
        out.mkdir()
    else:
        out = tmp_path / "no" / "such" / "y.npy"
    assert cli.main(["run", str(src), "--grid", "1", "--workgroup", "16", "--arg", f"x={tmp_path / 'x.npy'}",
                     "--arg", "y=zeros:10:f32", "--arg", "n=10", "--out", f"y={out}"]) == 1
    err = capsys.readouterr().err
    assert str(out) in err and "Traceback" not in err
