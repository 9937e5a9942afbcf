"""``aw.print``: lowered to stores into a hidden buffer, formatted on the host in thread order,
identical on every target; a size limit with a clear note; compile-time checks of the call."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.binary.module import PRINT_ARG
from anywave.binary.wbin import read_wbin, write_wbin
from anywave.compiler import debugprint


@aw.kernel
def show(x: aw.In[aw.f32], n: aw.i32, reps: aw.i32):
    i = aw.global_id(0)
    if i < n:
        for r in range(reps):
            aw.print("t{} r{}: x={} big={} neg={:+d} ok={}", i, r, x[i], aw.i64(i) * 3000000000, -i,
                     x[i] > 1.0)


@aw.kernel
def plain(y: aw.Buffer[aw.f32]):
    y[aw.global_id(0)] = 1.0


def _expected(x: np.ndarray, n: int, reps: int) -> list[str]:
    # independent formatting of what each thread prints, in global-thread order
    out = []
    for i in range(n):
        for r in range(reps):
            out.append(f"t{i} r{r}: x={str(np.float32(x[i]))} big={i * 3000000000} neg={-i:+d} ok={bool(x[i] > 1.0)}")
    return out


def _x(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.float32) * np.float32(0.3)).astype(np.float32)


@pytest.mark.parametrize("w", [8, 16, 32, 64])
def test_emulator_prints_in_thread_order(w, capsys):
    x = _x(37)
    show(x, 37, 2, grid=3, workgroup=16, target="emulator", wave_width=w)
    assert capsys.readouterr().out.splitlines() == _expected(x, 37, 2)


# SYCL JIT-compiles this kernel in ~15 s: in the slow tier
@pytest.mark.parametrize("target", ["opencl", pytest.param("sycl", marks=pytest.mark.slow),
                                    "cuda", "hip", "metal"])
def test_every_target_prints_the_same_lines(target, capsys):
    from anywave.jit.targets import available_targets, get_target

    if target not in available_targets():
        pytest.skip(f"target {target!r} is not available here (anywave devices says why)")
    widths = get_target(target).wave_widths or (32,)
    w = 16 if 16 in widths else widths[0]
    x = _x(37)
    show(x, 37, 2, grid=3, workgroup=16, target=target, wave_width=w)
    assert capsys.readouterr().out.splitlines() == _expected(x, 37, 2)


def test_truncation_note(capsys, monkeypatch):
    monkeypatch.setenv("ANYWAVE_PRINT_BUFFER", "256")  # 64 words: 62 for records of 3 + 7 words
    x = _x(8)
    show(x, 8, 1, grid=1, workgroup=8, target="emulator", wave_width=8)
    lines = capsys.readouterr().out.splitlines()
    kept = 62 // 10
    # the records that fit are the first ones the device wrote; which threads those are is the
    # emulator's lane order, and they are printed sorted by thread
    assert len(lines) == kept + 1
    assert set(lines[:-1]) <= set(_expected(x, 8, 1))
    assert "truncated" in lines[-1] and "ANYWAVE_PRINT_BUFFER" in lines[-1] and "80 words" in lines[-1]


def test_bad_buffer_size_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("ANYWAVE_PRINT_BUFFER", "lots")
    with pytest.raises(ValueError, match="ANYWAVE_PRINT_BUFFER"):
        show(_x(4), 4, 1, grid=1, workgroup=4, target="emulator")


def test_hidden_argument_and_binary_round_trip():
    m = show.compile()
    k = m.kernel("show")
    assert [a.name for a in k.args] == ["x", "n", "reps", PRINT_ARG]
    assert len(k.prints) == 1 and k.prints[0].format.startswith("t{} r{}")
    assert [t.spelling for t in k.prints[0].types] == ["i32", "i32", "f32", "i64", "i32", "pred"]
    back = read_wbin(write_wbin(m))
    assert back.kernel("show").prints == k.prints
    assert [a.name for a in plain.compile().kernel("plain").args] == ["y"]  # no print: no hidden buffer


@pytest.mark.parametrize("body, message", [
    ('aw.print("{} {}", i)', "2 field(s) but 1 value(s)"),
    ('aw.print(i, i)', "compile-time string"),
    ('aw.print("{name}", i)', "automatic fields only"),
    ('aw.print("{", i)', "bad format string"),
    ('aw.print("{}", i, sep=1)', "no keyword arguments"),
    ('print(i)', "aw.print(fmt, *values)"),
])
def test_compile_errors_point_at_the_call(body, message, tmp_path):
    import importlib.util

    src = tmp_path / "bad_print.py"
    src.write_text("import anywave as aw\n\n\n@aw.kernel\ndef k(n: aw.i32):\n    i = aw.global_id(0)\n"
                   "    fmt_var = 'x'\n    if i < n:\n        fmt_var = 'y'\n"
                   f"    {body}\n")
    spec = importlib.util.spec_from_file_location("bad_print", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(aw.CompileError) as ei:
        mod.k.compile()
    text = str(ei.value)
    assert message in text and "bad_print.py:10" in text and "^" in text


def test_f32_prints_its_shortest_repr(capsys):
    @aw.kernel
    def tenth(n: aw.i32):
        if aw.global_id(0) < n:
            aw.print("{} {:.3f} {!r}", aw.f32(0.1), aw.f32(0.1), aw.f32(0.1))

    tenth(1, grid=1, workgroup=1, target="emulator")
    assert capsys.readouterr().out == "0.1 0.100 0.1\n"


def test_format_records_ignores_unwritten_tail():
    k = show.compile().kernel("show")
    buf = debugprint.new_buffer(64)
    assert debugprint.format_records(k, buf) == ([], "")


@aw.func
def report(tag, v):
    aw.print("{}: {}", tag, v)


@aw.kernel
def grid2d(n: aw.i32):
    if aw.local_id(0) < n:
        report(aw.workgroup_id(1) * 10 + aw.workgroup_id(0), aw.local_id(0))


def test_print_from_a_device_function_in_2d_grid_order(capsys):
    # workgroup linear id = y * num_workgroups_x + x: rows of the grid in order
    grid2d(2, grid=(3, 2), workgroup=4, target="emulator", wave_width=8)
    expect = [f"{y * 10 + x}: {t}" for y in range(2) for x in range(3) for t in range(2)]
    assert capsys.readouterr().out.splitlines() == expect


def test_every_backend_translates_a_printing_kernel():
    from anywave.backends.registry import backend_names, translate

    m = show.compile()
    for name in backend_names():
        text = translate(name, m)
        assert "not rendered" not in text, name


def test_zero_capacity_buffer_runs_without_prints():
    from anywave.jit.targets import get_target

    m = show.compile()
    buf = np.zeros(2, np.uint32)  # capacity 0: the kernel stores no record
    x = _x(8)
    get_target("emulator").launch(m, "show", grid=(1, 1, 1), workgroup=(8, 1, 1), args=[x, 8, 1, buf])
    assert buf[1] == 0 and buf[0] == 8 * 10  # the counter still counts the requested words


def test_cli_run_and_info_of_a_printing_binary(tmp_path, capsys):
    from anywave import cli
    from anywave.binary.wbin import save

    p = tmp_path / "show.wbin"
    save(show.compile(), p)
    x = _x(4)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["info", str(p)]) == 0
    assert "aw.print site 0:" in capsys.readouterr().out
    assert cli.main(["run", str(p), "--grid", "1", "--workgroup", "4", "--wave-width", "8",
                     "--arg", f"x={tmp_path / 'x.npy'}", "--arg", "n=4", "--arg", "reps=1"]) == 0
    assert capsys.readouterr().out.splitlines() == _expected(x, 4, 1)


@aw.kernel
def show_two(x: aw.In[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        aw.print("a; \"quoted\" {{x}} #{} at {}", i, x[i])
        if i == 0:
            aw.print("done")


@pytest.mark.parametrize("kernel", [show, show_two], ids=["show", "show_two"])
@pytest.mark.parametrize("debug", [True, False], ids=["with-debug", "nodebug"])
def test_dis_then_asm_keeps_the_print_sites(kernel, debug, tmp_path, capsys):
    # issue 31, item 16: the text form carries the print table; the round trip is byte-identical
    from anywave import cli
    from anywave.asm import assemble, disassemble
    from anywave.binary.wbin import save

    m = kernel.compile()
    if not debug:  # a module without a debug table (what `dis` without -g round-trips exactly)
        m = assemble(disassemble(m, locations=False))
    p = tmp_path / "k.wbin"
    save(m, p)
    text_path = tmp_path / "k.wave"
    assert cli.main(["dis", *(["-g"] if debug else []), str(p), "-o", str(text_path)]) == 0
    text = text_path.read_text()
    sites = m.kernels[0].prints
    assert text.count("\n.print ") == len(sites) >= 1
    back_path = tmp_path / "back.wbin"
    assert cli.main(["asm", str(text_path), "-o", str(back_path)]) == 0
    assert back_path.read_bytes() == p.read_bytes()
    back = read_wbin(back_path.read_bytes())
    assert back.kernels[0].prints == sites
    capsys.readouterr()
    # the reassembled module runs and prints what the kernel prints
    x = _x(4)
    np.save(tmp_path / "x.npy", x)
    extra = ["--arg", "reps=1"] if kernel is show else []
    assert cli.main(["run", str(back_path), "--grid", "1", "--workgroup", "4", "--wave-width", "8",
                     "--arg", f"x={tmp_path / 'x.npy'}", "--arg", "n=4", *extra]) == 0
    out = capsys.readouterr().out.splitlines()
    if kernel is show:
        assert out == _expected(x, 4, 1)
    else:
        want = [f'a; "quoted" {{x}} #{i} at {str(np.float32(x[i]))}' for i in range(4)] + ["done"]
        assert sorted(out) == sorted(want) and out[-1] in want


@pytest.mark.parametrize("line, message", [
    (".print", "expected .print \"FORMAT\""),
    (".print fmt", "expected .print \"FORMAT\""),
    ('.print "{}" q32', "unknown print value type 'q32'"),
    ('.print "{}" i32 at', "double-quoted place"),
    ('.print "{}" i32 at "k.py:1" extra', "unexpected text after the place"),
    ('.print "\\x"', "malformed string literal"),
])
def test_print_directive_errors(line, message):
    from anywave.asm import assemble
    from anywave.errors import AsmError

    text = f".kernel k\n{line}\n.arg {PRINT_ARG} buffer u32 readwrite\nret\n.end\n"
    with pytest.raises(AsmError, match=message):
        assemble(text)


def test_print_sites_need_the_print_buffer_last():
    from anywave.asm import assemble
    from anywave.errors import AsmError

    with pytest.raises(AsmError, match=f"{PRINT_ARG}.*last argument"):
        assemble('.kernel k\n.print "x"\n.arg y buffer u32 readwrite\nret\n.end\n')
    with pytest.raises(AsmError, match="not allowed in a .func block"):
        assemble('.func f\n.print "x"\nret\n.end\n')


@aw.kernel
def _prints_then_diverges(out: aw.Out[aw.i32]):
    i = aw.local_id(0)
    aw.print("lane {}", i)
    if i < 3:
        return
    aw.barrier()
    out[i] = i


def test_a_failed_launch_prints_its_records_and_keeps_its_error(capsys, monkeypatch) -> None:
    """A launch that fails after its threads printed: the records are printed, then the launch's
    own error goes on; a print buffer that cannot be read then (here: flush raising) never hides it."""
    from anywave.errors import EmulationError

    out = np.zeros(8, np.int32)
    with pytest.raises(EmulationError, match="divergent barrier"):
        _prints_then_diverges(out, grid=1, workgroup=8, target="emulator", wave_width=8)
    assert capsys.readouterr().out.splitlines() == [f"lane {i}" for i in range(8)]

    def broken(*a, **k):
        raise ValueError("unreadable print buffer")

    monkeypatch.setattr(debugprint, "flush", broken)
    with pytest.raises(EmulationError, match="divergent barrier"):
        _prints_then_diverges(out, grid=1, workgroup=8, target="emulator", wave_width=8)
