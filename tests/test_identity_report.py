"""``anywave conformance``: the identity report (matrix targets x groups x W)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from anywave.conformance import report as rep


def test_report_on_the_emulator_and_a_w_dependent_output_fails(monkeypatch) -> None:  # noqa: ANN001
    real = rep.library_kernels()
    keep = [k for k in real if k[0] in ("sum_f32", "softmax_rows")]

    def w_dependent(t: str, w: int) -> np.ndarray:  # a "library kernel" whose output follows W
        return np.array([w], np.int32)

    monkeypatch.setattr(rep, "library_kernels", lambda: keep + [("depends_on_w", w_dependent)])
    r = rep.run_report(["emulator"], [8, 64], ["collectives"], library=True)
    st = {(c["group"], c["wave_width"]): c["status"] for c in r["cells"]}
    assert st[("collectives", 8)] == st[("collectives", 64)] == "bit-identical"
    assert st[("lib:sum_f32", 8)] == st[("lib:sum_f32", 64)] == "bit-identical"
    assert st[("lib:softmax_rows", 64)] == "bit-identical"
    # the reference is the emulator at W = 32: W = 8 and 64 differ from it
    assert st[("lib:depends_on_w", 8)] == st[("lib:depends_on_w", 64)] == "failed"
    assert r["summary"]["emulator"]["failed"] == 2
    page = rep.to_html(r)
    assert "lib:depends_on_w" in page and rep.COLORS["failed"] in page
    table = rep.readme_table(r)
    assert table.startswith(rep.README_BEGIN) and "| emulator |" in table
    json.dumps(r)


def test_cli_writes_json_html_png_and_the_readme_block(tmp_path, capsys) -> None:  # noqa: ANN001
    from anywave.cli import main

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{rep.README_BEGIN}\nold\n{rep.README_END}\n\nrest\n")
    code = main(["conformance", "--target", "emulator", "-W", "16", "--group", "large_workgroups", "--no-library",
                 "--out", str(tmp_path / "out"), "--readme", str(readme), "--no-progress"])
    assert code == 0, capsys.readouterr()
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [c["status"] for c in r["cells"]] == ["bit-identical"]
    off = os.environ.get("ANYWAVE_TARGET_OPT", "").strip().lower() in ("0", "false", "no", "off")
    assert r["target_code_optimised"] is (not off)
    assert (tmp_path / "out" / "report.html").exists()
    pytest.importorskip("matplotlib")
    assert (tmp_path / "out" / "report.png").read_bytes()[:4] == b"\x89PNG"
    text = readme.read_text()
    assert "old" not in text and "rest" in text and "| emulator |" in text and text.count(rep.README_BEGIN) == 1


def test_unknown_target_and_group_are_clear_errors(capsys) -> None:  # noqa: ANN001
    from anywave.cli import main

    assert main(["conformance", "--target", "nosuch", "--no-progress"]) == 1
    assert "target 'nosuch' is unknown; available: emulator" in capsys.readouterr().err
    assert main(["conformance", "--group", "nosuch", "--no-progress"]) == 1
    assert "unknown conformance group(s) ['nosuch']" in capsys.readouterr().err


def test_a_bad_target_opt_is_refused_before_any_cell_runs(tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    from anywave.cli import main

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{rep.README_BEGIN}\nold\n{rep.README_END}\n")
    monkeypatch.setenv("ANYWAVE_TARGET_OPT", "sometimes")
    assert main(["conformance", "--target", "emulator", "-W", "16", "--group", "large_workgroups", "--no-library",
                 "--out", str(tmp_path / "out"), "--readme", str(readme), "--no-progress"]) == 1
    assert "ANYWAVE_TARGET_OPT='sometimes'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and "old" in readme.read_text()  # nothing written
