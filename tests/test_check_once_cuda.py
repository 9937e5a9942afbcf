"""Issue 24, one check of each argument, on an NVIDIA GPU (marker ``cuda``; skipped cleanly
without one): the launch plans that CUDA's plan launcher does not take -- NumPy arguments (copied
in and out) and the bounds-checked build -- launch through the driver's bound launch
(``CudaTarget.bind``) with the arguments the kernel language checked, and compute the same
results; a plan made with one kind of memory refuses or correctly handles another. Expectations
are NumPy arithmetic on the inputs (small integers times 0.5 plus 1: exact in f32)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import anywave as aw
from anywave.errors import OutOfBoundsError
from anywave.runtime import cuda

_OK, _WHY = cuda.driver_status()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not _OK, reason=f"no CUDA: {_WHY}")]


@aw.kernel
def axpb(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * a + 1.0


def _expect(x: np.ndarray, a: float, n: int, y0: np.ndarray) -> np.ndarray:
    y = y0.copy()
    y[:n] = x[:n] * np.float32(a) + np.float32(1.0)
    return y


@pytest.fixture
def driver_checks(monkeypatch):
    """CUDA's checked launch path (``prechecked`` False: it checks every argument) against the
    bound one (``prechecked`` True: no argument check), counted."""
    c: collections.Counter[str] = collections.Counter()
    real = cuda.CudaTarget._launch_checked

    def counting(self, *a, **k):
        c["bound" if k.get("prechecked") else "checked"] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(cuda.CudaTarget, "_launch_checked", counting)
    return c


def test_numpy_arguments_take_the_bound_launch_and_compute(driver_checks):
    axpb._calls.clear()
    x = np.arange(300, dtype=np.float32)
    y0 = np.full(300, -1.0, np.float32)
    for i in range(1, 5):
        y = y0.copy()
        axpb(x, y, 0.5 * i, 300 - i, grid=(300 + 127) // 128, workgroup=128, target="cuda")
        np.testing.assert_array_equal(y, _expect(x, 0.5 * i, 300 - i, y0))
    assert driver_checks == {"bound": 4}


def test_the_bounds_checked_build_takes_the_bound_launch_and_reports_a_small_array(driver_checks):
    axpb._calls.clear()
    x = aw.array(np.arange(64, dtype=np.float32), target="cuda")
    y = aw.zeros(64, aw.f32, target="cuda")
    for _ in range(2):
        axpb(x, y, 0.5, 64, grid=2, workgroup=32, check=True)
    np.testing.assert_array_equal(y.numpy(), _expect(x.numpy(), 0.5, 64, np.zeros(64, np.float32)))
    small = aw.zeros(16, aw.f32, target="cuda")  # the plan's layout; only the size differs
    with pytest.raises(OutOfBoundsError, match="argument 'y' byte offset 64"):
        axpb(x, small, 0.5, 64, grid=2, workgroup=32, check=True)
    assert driver_checks == {"bound": 3}


def test_a_plan_of_cuda_tensors_sends_a_cpu_tensor_to_the_full_path():
    torch = pytest.importorskip("torch")
    axpb._calls.clear()
    axpb._fast = None
    x = torch.arange(64, dtype=torch.float32, device="cuda")
    y = torch.zeros(64, device="cuda")
    for _ in range(2):  # the plan: CUDA's plan launcher (device memory, unchecked)
        axpb(x, y, 0.5, 64, grid=2, workgroup=32)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), _expect(np.arange(64, dtype=np.float32), 0.5, 64,
                                                           np.zeros(64, np.float32)))
    host = torch.zeros(64)  # the same type, another device: never passed as a device pointer
    axpb(x, host, 2.0, 40, grid=2, workgroup=32)  # host memory on the cuda target: copied in and out
    np.testing.assert_array_equal(host.numpy(), _expect(np.arange(64, dtype=np.float32), 2.0, 40,
                                                        np.zeros(64, np.float32)))
    ro = np.zeros(64, np.float32)
    ro.setflags(write=False)
    with pytest.raises(aw.LaunchError, match="is written by the kernel, but the memory is read-only"):
        axpb(x, ro, 2.0, 40, grid=2, workgroup=32)


def test_a_driver_called_directly_checks_every_argument(driver_checks):
    tgt = cuda.CudaTarget(0)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    tgt.launch(axpb.compile(), "axpb", 2, 32, [x, y, 0.5, 50])
    np.testing.assert_array_equal(y, _expect(x, 0.5, 50, np.zeros(64, np.float32)))
    assert driver_checks == {"checked": 1}
    y.setflags(write=False)
    with pytest.raises(ValueError, match="buffer argument 'y' is declared write but the array is read-only"):
        tgt.launch(axpb.compile(), "axpb", 2, 32, [x, y, 0.5, 50])
