"""The compiler's output is verified once: compiling (disk cache on) and launching on the
emulator run the verifier's check a single time, and the cached file reads back to the same
module bytes."""

import importlib

import numpy as np
import pytest

import anywave as aw
from anywave.binary import verify as verify_mod
from anywave.binary.module import Module
from anywave.binary.wbin import read_wbin, write_wbin

kmod = importlib.import_module("anywave.compiler.kernel")  # the package's 'kernel' is the decorator


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANYWAVE_NO_DISK_CACHE", raising=False)


@aw.kernel
def _twice(y: aw.Out[aw.f32], x: aw.In[aw.f32]):
    i = aw.global_id()
    v = x[i]
    if v > 0.0:
        v = v * 2.0
    y[i] = v


@pytest.mark.parametrize("w", [8, 16, 32, 64])
def test_compile_then_launch_verifies_once(monkeypatch, tmp_path, w):
    _twice._memo.clear()
    calls = []
    real = verify_mod.check

    def counting(module):
        calls.append(module)
        return real(module)

    monkeypatch.setattr(verify_mod, "check", counting)
    m = _twice.compile()
    assert len(calls) == 1
    x = np.array([1.5, -2.0, 0.0, 3.25] * 16, np.float32)
    y = np.zeros_like(x)
    _twice(y, x, grid=1, workgroup=x.size, target="emulator", wave_width=w)
    np.testing.assert_array_equal(y, np.where(x > 0, x * 2, x))
    assert len(calls) == 1, "the launch verified the compiled module again"
    # the disk cache holds exactly the verified module's bytes
    stored = list((tmp_path / "cache").rglob("*.wbin"))
    assert len(stored) == 1
    data = stored[0].read_bytes()
    assert data == write_wbin(Module(kernels=list(m.kernels)))
    assert read_wbin(data).kernels[0].code == m.kernels[0].code
