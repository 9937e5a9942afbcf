"""Every tutorial page runs: the ```python blocks of docs/tutorials/*.md, in order, as one
module (their own asserts check the results against independent NumPy computations).

The blocks are written to a file first so that ``@aw.kernel`` can read the kernels' source.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "docs" / "tutorials").glob("*.md"))
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def blocks(page: Path) -> list[str]:
    """The executable code blocks of a page (fences opened with ```python)."""
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def test_there_are_nine_tutorials_with_code():
    assert len(TUTORIALS) == 9
    for page in TUTORIALS:
        assert blocks(page), page.name


#: tutorials run in the slow tier only, with why (the default tier runs the others)
SLOW = {"09-torch-gpt": "31 s training a GPT on the emulator (2-core host); test_gpt_model.py trains the "
                        "same model through the same ops in the default tier"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in TUTORIALS],
                         ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(page: Path, tmp_path, monkeypatch, capsys):
    if "torch" in page.stem:
        pytest.importorskip("torch")
    code = "\n\n".join(blocks(page))
    path = tmp_path / (page.stem.replace("-", "_") + ".py")
    path.write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    name = f"_tutorial_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
