"""The host path of a repeated launch (issue 14: ``ops.mm`` at 1024^3 spent ~0.9 ms a call on the
host): constants given by keyword reuse the launch plan (they used to force the full path, which
probed every runtime), CPU tensors take a plan of their own, specialisations share one
fingerprint check, a named target probes only itself and the CUDA probe queries the devices
once per driver. Expectations are NumPy arithmetic on the inputs and counts of what ran."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import anywave as aw
from anywave.runtime import arrays as A

kmod = importlib.import_module("anywave.jit.kernel")  # the package's 'kernel' is the decorator
ct = importlib.import_module("anywave.jit.targets")


@aw.kernel
def scale(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *, k: int = 2, add: float = 0.0):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] * aw.f32(k) + add


OFFSET = 1.0


@aw.kernel
def shifted(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *, k: int = 1):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] * aw.f32(k) + OFFSET


@pytest.fixture
def full_launches(monkeypatch):
    """Counts the launches that take the full path (no plan)."""
    calls = []
    real = kmod._full_launch

    def counting(*a, **kw):
        calls.append(a[0].name)
        return real(*a, **kw)

    monkeypatch.setattr(kmod, "_full_launch", counting)
    return calls


@pytest.mark.parametrize("W", (8, 16, 32, 64))
def test_constants_by_keyword_take_the_launch_plan(W: int, full_launches, monkeypatch) -> None:
    monkeypatch.setattr(scale, "_calls", {})
    x = np.arange(64, dtype=np.float32) - 20.0
    out = np.zeros(64, np.float32)
    for _ in range(3):
        scale(x, out, 64, k=3, grid=1, workgroup=64, target="emulator", wave_width=W)
        np.testing.assert_array_equal(out, x * np.float32(3))
    assert len(full_launches) == 1  # the first call records the plan, the others use it
    # another value of a keyword constant is another layout, never the plan of k=3
    scale(x, out, 64, k=5, add=0.5, grid=1, workgroup=64, target="emulator", wave_width=W)
    np.testing.assert_array_equal(out, x * np.float32(5) + np.float32(0.5))
    scale(x, out, 64, add=0.5, k=5, grid=1, workgroup=64, target="emulator", wave_width=W)
    np.testing.assert_array_equal(out, x * np.float32(5) + np.float32(0.5))
    scale(x, out, 64, k=3, grid=1, workgroup=64, target="emulator", wave_width=W)
    np.testing.assert_array_equal(out, x * np.float32(3))
    assert len(full_launches) == 3  # k=5/add=0.5 in two orders (two keys), k=3 from its plan


def test_buffers_and_scalars_by_keyword_take_the_launch_plan(full_launches, monkeypatch) -> None:
    # (a CUDA kernel's __constant__ buffers come by keyword: issue 28's k-means took the full path
    # on every launch before)
    monkeypatch.setattr(scale, "_calls", {})
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    for i in range(3):
        out = np.zeros(32, np.float32)  # a fresh array each time: the plan reads this call's
        scale(x, out=out, n=32, k=2 + (i == 2), grid=1, workgroup=32, target="emulator")
        np.testing.assert_array_equal(out, x * np.float32(2 + (i == 2)))
    assert len(full_launches) == 2  # k=2 once (then its plan), k=3 once
    out = np.zeros(32, np.float32)
    scale(n=32, out=out, x=x, grid=1, workgroup=32, target="emulator")  # any order of keywords
    np.testing.assert_array_equal(out, x * np.float32(2))
    # what the full path refuses is still refused, with its message
    with pytest.raises(aw.LaunchError, match="missing arguments"):
        scale(x, n=32, grid=1, workgroup=32, target="emulator")
    with pytest.raises(aw.LaunchError, match="given twice"):
        scale(x, out, x=x, n=32, grid=1, workgroup=32, target="emulator")
    with pytest.raises(aw.LaunchError, match="no parameter 'm'"):
        scale(x, out, m=32, grid=1, workgroup=32, target="emulator")


def test_cpu_tensors_take_a_plan_without_describing_them_again(full_launches, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(scale, "_calls", {})
    described = []
    real = A.describe

    def counting(v, what="argument"):
        described.append(what)
        return real(v, what)

    monkeypatch.setattr(A, "describe", counting)
    x = torch.arange(48, dtype=torch.float32) * 0.25 - 3.0
    for i in range(3):
        out = torch.zeros(48)
        scale(x, out, 48, 4, 0.0, grid=1, workgroup=48, target="emulator")
        np.testing.assert_array_equal(out.numpy(), x.numpy() * np.float32(4))
        if i == 0:
            first = len(described)
    assert len(full_launches) == 1 and len(described) == first  # later calls: the plan's own checks
    with pytest.raises(aw.LaunchError, match="C-contiguous"):  # a strided view: the full path's error
        scale(torch.zeros(96)[::2], out, 48, 4, 0.0, grid=1, workgroup=48, target="emulator")
    with pytest.raises(aw.LaunchError, match="dtype"):
        scale(x.double(), out, 48, 4, 0.0, grid=1, workgroup=48, target="emulator")


def test_specialisations_share_one_fingerprint_and_still_see_a_changed_global(monkeypatch) -> None:
    monkeypatch.setattr(shifted, "_calls", {})
    monkeypatch.setattr(shifted, "_memo", {})
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    for k in (1, 2, 3):
        shifted(x, out, 16, k, grid=1, workgroup=16, target="emulator")
        np.testing.assert_array_equal(out, x * np.float32(k) + np.float32(1.0))
    assert len(shifted._memo) == 3 and len({id(v[0]) for v in shifted._memo.values()}) == 1
    monkeypatch.setitem(globals(), "OFFSET", 10.0)
    for k in (3, 1, 2):  # every specialisation's plan sees the change
        shifted(x, out, 16, k, grid=1, workgroup=16, target="emulator")
        np.testing.assert_array_equal(out, x * np.float32(k) + np.float32(10.0))


def test_a_named_target_probes_only_itself(monkeypatch) -> None:
    from anywave.runtime import targets as rt
    from anywave.runtime.emulator import EmulatorTarget

    info = EmulatorTarget(32).info
    probed = []

    def probe(name):
        def p():
            probed.append(name)
            return True, "", (info,)
        return p

    monkeypatch.setattr(ct, "_CACHE", dict(ct._CACHE))
    try:
        rt.register_target("_probe_a", probe("a"), lambda **_: EmulatorTarget(32))
        rt.register_target("_probe_b", probe("b"), lambda **_: EmulatorTarget(32))
        probed.clear()
        t = ct.get_target("_probe_a")
        assert t.name == "_probe_a" and t.wave_widths == info.wave_widths
        assert set(probed) == {"a"}
        probed.clear()
        ct.get_target("_probe_a")
        assert probed == ["a"]  # still probed (availability can change), but alone
        with pytest.raises(ct.TargetError, match="unknown target '_nope'.*registered: .*_probe_b"):
            ct.get_target("_nope")
    finally:
        rt._REGISTRY.pop("_probe_a", None)
        rt._REGISTRY.pop("_probe_b", None)


def test_the_cuda_probe_queries_the_devices_once_per_driver(monkeypatch) -> None:
    from anywave.runtime import cuda
    from anywave.runtime import targets as rt

    monkeypatch.setattr(cuda, "_PROBED", None)
    counts = {}
    for n in range(2):
        drv = cuda.FakeDriver()
        real = drv.cuDeviceGetAttribute
        counts[n] = []

        def counting(attr, dev, _real=real, _seen=counts[n]):
            _seen.append(attr)
            return _real(attr, dev)

        drv.cuDeviceGetAttribute = counting
        monkeypatch.setattr(cuda, "_DRV", drv)
        monkeypatch.setattr(cuda, "_init_state", None)
        for _ in range(3):
            st = rt.target_status("cuda")
            assert st.available and st.infos[0].details["multiprocessors"] == 132
        assert counts[n] and len(counts[n]) == len(set(counts[n]))  # each attribute once, not per probe
