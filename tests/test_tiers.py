"""The test tiers (issue 30 item 4): the README's command runs the default tier, ``.ci/run``
runs it verbatim and then every other tier, so together they run every test; the runtime
conformance tests run at one W per target by default and at every W in the sweep tier; and no
test reads the clock to decide its outcome."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

import tiers

ROOT = Path(__file__).resolve().parents[1]
TIER_MARKERS = ("slow", "sweep")


def _addopts_expression(config) -> str:  # noqa: ANN001
    opts = config.getini("addopts")  # pyproject.toml's [tool.pytest.ini_options]
    return opts[opts.index("-m") + 1]


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"```bash\n(pip install -e '\.\[test\]' && python -m pytest -q)\n```", text)
    assert m, "README: the test command block is missing"
    return m.group(1)


def _ci_pytest_expressions() -> list[str | None]:
    """The ``-m`` expression of each pytest run in .ci/run (None: the configured default)."""
    out = []
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        line = line.split("#", 1)[0]
        if "python -m pytest" not in line:
            continue
        words = shlex.split(line.split("python -m pytest", 1)[1].split("&&")[0])
        out.append(words[words.index("-m") + 1] if "-m" in words else None)
    return out


def test_ci_runs_the_readme_command_verbatim_then_every_other_tier(pytestconfig):
    ci = (ROOT / ".ci" / "run").read_text()
    assert _readme_test_command() in ci.splitlines()
    default = _addopts_expression(pytestconfig)
    exprs = [default if e is None else e for e in _ci_pytest_expressions()]
    assert exprs[0] == default and len(exprs) >= 2, exprs
    compiled = [Expression.compile(e) for e in exprs]
    # every combination of tier markers (a test with none, either or both) is run by some pytest call
    for marks in product([False, True], repeat=len(TIER_MARKERS)):
        have = {m for m, on in zip(TIER_MARKERS, marks, strict=True) if on}
        assert any(c.evaluate(lambda name, have=have, **_: name in have) for c in compiled), (have, exprs)


def test_the_default_tier_leaves_out_the_tier_markers(pytestconfig):
    c = Expression.compile(_addopts_expression(pytestconfig))
    assert c.evaluate(lambda name, **_: False)
    for m in TIER_MARKERS:
        assert not c.evaluate(lambda name, m=m, **_: name == m), m


def _collected(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                        *args],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode in (0, 5), r.stdout[-3000:] + r.stderr[-3000:]
    return [ln for ln in r.stdout.splitlines() if "::" in ln]


def test_runtime_conformance_runs_at_one_w_by_default_and_every_w_in_the_sweep():
    files = [f"tests/test_{t}.py" for t in tiers.DEFAULT_W]
    default = [n for n in _collected(*files) if "::test_conformance[" in n]
    assert sorted(default) == sorted(f"tests/test_{t}.py::test_conformance[{w}]" for t, w in tiers.DEFAULT_W.items())
    swept = [n for n in _collected("-m", "sweep", *files) if "::test_conformance[" in n]
    assert sorted(swept) == sorted(f"tests/test_{t}.py::test_conformance[{w}]" for t in tiers.DEFAULT_W
                                   for w in tiers.WIDTHS if w != tiers.DEFAULT_W[t])


def test_tier_helpers_refuse_an_unknown_target():
    with pytest.raises(ValueError, match="no default-tier wave width for target 'metal'"):
        tiers.widths("metal")
    with pytest.raises(ValueError, match="no default-tier wave width for target 'metal'"):
        tiers.conformance_batch_bytes("metal", 32)


#: clock reads that report, not decide (the fuzz campaign's summary line)
_CLOCK_OK = {"test_compiler_fuzz.py": 2}


def test_no_test_reads_the_clock():
    clock = re.compile(r"\btime\.(time|perf_counter|monotonic|process_time)(_ns)?\(|\bdatetime\.now\(")
    found = {}
    for p in sorted((ROOT / "tests").glob("*.py")):
        n = len(clock.findall(p.read_text(encoding="utf-8")))
        if n:
            found[p.name] = n
    assert found == _CLOCK_OK, ("a test reads the clock (count work, use a fake clock, or a hang guard "
                                f"timeout instead): {found}")
