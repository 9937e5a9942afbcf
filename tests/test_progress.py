"""Progress lines of long runs (issue 31, item 21): off by default off a terminal (tests and pipes
see nothing), on with ANYWAVE_PROGRESS=1, silenced by ANYWAVE_PROGRESS=0. The emulator's shows
after ANYWAVE_PROGRESS_AFTER seconds (0 here, so the test does not depend on the machine's
speed); the autotuner's names each config it times."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw


@aw.kernel
def ident(out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = i


def _launch() -> None:
    out = np.zeros(64, np.int32)
    ident(out, 64, grid=8, workgroup=8, target="emulator")
    assert out.tolist() == list(range(64))


def test_emulator_progress(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANYWAVE_PROGRESS", raising=False)
    monkeypatch.setenv("ANYWAVE_PROGRESS_AFTER", "0")
    _launch()
    assert capsys.readouterr().err == ""  # stderr is not a terminal here: silent by default
    monkeypatch.setenv("ANYWAVE_PROGRESS", "1")
    _launch()
    err = capsys.readouterr().err
    assert "kernel 'ident'" in err and "8/8 workgroups" in err, err
    monkeypatch.setenv("ANYWAVE_PROGRESS", "0")
    _launch()
    assert capsys.readouterr().err == ""


def test_autotune_progress(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from anywave.progress import track

    monkeypatch.setenv("ANYWAVE_PROGRESS", "1")
    assert list(track([10, 20, 30], "autotuning k")) == [10, 20, 30]
    err = capsys.readouterr().err
    assert err.splitlines() == ["autotuning k: 1/3", "autotuning k: 2/3", "autotuning k: 3/3"], err
    monkeypatch.setenv("ANYWAVE_PROGRESS", "0")
    assert list(track([1], "autotuning k")) == [1]
    assert list(track([1], "autotuning k", show=None)) == [1]
    assert capsys.readouterr().err == ""
