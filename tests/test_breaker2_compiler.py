"""Fresh-eyes review (issues 4-8): defects found by using the compiler as a user.

Each test is a strict xfail naming the bug; a fix flips it. Expectations come from the house
rules (errors are WaveError subclasses) and the issue text, not from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.errors import WaveError


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


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


@aw.kernel
def _big_literal(x: aw.Buffer[aw.i32]):
    x[0] = 5000000000


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


def test_overflowing_literal_caret_points_at_the_literal() -> None:
    with pytest.raises(aw.CompileError) as ei:
        _big_literal.compile()
    lines = str(ei.value).splitlines()
    src = next(i for i, ln in enumerate(lines) if "5000000000" in ln and "x[0]" in ln)
    caret = lines[src + 1]
    assert caret.index("^") == lines[src].index("5000000000")
