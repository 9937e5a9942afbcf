"""``anywave compile FILE``: a file that fails to import is a user error (exit 1, file:line,
no traceback)."""

from __future__ import annotations

import textwrap

import pytest

from anywave.cli import _error_text, main
from anywave.compiler.errors import CompileError
from anywave.errors import SourceLoc, WaveError


def _run(tmp_path, name: str, text: str, capsys) -> tuple[int, str]:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    rc = main(["compile", str(p), "-o", str(tmp_path / "out.wbin")])
    err = capsys.readouterr().err
    return rc, err


@pytest.mark.parametrize("name, text, line, what", [
    ("syn.py", "import anywave as aw\n\ndef f(:\n    pass\n", 3, "SyntaxError"),
    ("imp.py", "import anywave as aw\nimport no_such_module_for_anywave_test\n", 2, "ModuleNotFoundError"),
    ("exc.py", "import anywave as aw\n\nx = 1\ny = {}['k']\n", 4, "KeyError"),
    ("name.py", "import anywave as aw\n\n\nundefined_name + 1\n", 4, "NameError"),
    ("val.py", "x = int('seven')\n", 1, "ValueError"),
    ("ex.py", "import sys\nsys.exit(3)\n", 2, "sys.exit(3)"),
    ("deep.py", "import json\n\njson.loads('{')\n", 3, "JSONDecodeError"),
])
def test_import_failures_are_user_errors(tmp_path, capsys, name, text, line, what):
    rc, err = _run(tmp_path, name, text, capsys)
    assert rc == 1
    assert "Traceback" not in err
    assert f"{name}:{line}" in err
    assert what in err


def test_syntax_error_shows_caret(tmp_path, capsys):
    rc, err = _run(tmp_path, "s.py", "x = (1 +\n", capsys)
    assert rc == 1 and "Traceback" not in err and "s.py:1" in err and "^" in err


def test_missing_file(tmp_path, capsys):
    rc = main(["compile", str(tmp_path / "nope.py")])
    err = capsys.readouterr().err
    assert rc == 1 and "no such file" in err and "Traceback" not in err


def test_good_file_still_compiles(tmp_path, capsys):
    rc, err = _run(tmp_path, "ok.py", """
        import anywave as aw

        @aw.kernel
        def add(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
            i = aw.global_id(0)
            if i < n:
                y[i] = x[i] + 1.0
        """, capsys)
    assert rc == 0, err
    assert (tmp_path / "out.wbin").stat().st_size > 0


def test_compile_error_in_kernel_keeps_its_location(tmp_path, capsys):
    rc, err = _run(tmp_path, "bad.py", """
        import anywave as aw

        @aw.kernel
        def k(x: aw.Buffer[aw.f32]):
            x[0] = "text"
        """, capsys)
    assert rc == 1 and "Traceback" not in err and "bad.py:6" in err
    # the compiler's own head, file:line:col: error: ..., once (it was printed after another
    # "anywave: error: ")
    head = err.splitlines()[0]
    assert head.startswith(str(tmp_path / "bad.py") + ":6:") and head.count("error: ") == 1, err


@pytest.mark.parametrize(("error", "printed"), [
    (CompileError("t.cu: cannot instantiate the kernel 'plain<int, 3>'"),
     "anywave: error: t.cu: cannot instantiate the kernel 'plain<int, 3>'"),
    (CompileError("bad type", SourceLoc("k.py", 6, 18), "    x = y", 1, "k"),
     "k.py:6:18: error: bad type (in kernel 'k')"),
    (CompileError("no column", SourceLoc("k.py", 6, 0)), "k.py:6: error: no column"),
    (WaveError("plain message"), "anywave: error: plain message"),
    (FileNotFoundError(2, "No such file or directory", "x.wbin"), "anywave: error: x.wbin: No such file or directory"),
])
def test_cli_errors_print_one_prefix(error, printed):
    """A compile error's str starts with 'error: ' (or 'file:line:col: error: '); the CLI printed
    'anywave: error: error: ...' (issue 28's CUDA front end showed it). One prefix now."""
    text = _error_text(error)
    assert text.splitlines()[0] == printed
    assert text.count("error: ") == 1
