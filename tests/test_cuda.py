"""CUDA target tests.

The GPU tests (marker ``cuda``) need an NVIDIA GPU and cuda-python and skip cleanly otherwise.
The launch-path tests at the end run everywhere: they install :class:`cuda.FakeDriver` (no-op
driver calls) and read back what each ``cuLaunchKernel`` was given: the grid, the workgroup,
the stream and the kernelParams block, decoded here with ctypes."""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np
import pytest

from anywave.runtime import cuda

_OK, _WHY = cuda.driver_status()
gpu = pytest.mark.skipif(not _OK, reason=f"no CUDA: {_WHY}")


@pytest.fixture(scope="module")
def target() -> cuda.CudaTarget:
    if not _OK:
        pytest.skip(f"no CUDA: {_WHY}")
    return cuda.CudaTarget(0)


@pytest.mark.cuda
@gpu
def test_device_properties(target: cuda.CudaTarget) -> None:
    p = target.device.props
    assert p.warp_size == 32 and target.info.wave_width == 32
    assert p.multiprocessors > 0 and p.total_memory > 2**30
    assert target.info.local_memory >= 32 * 1024 and target.info.max_workgroup_size >= 256


@pytest.mark.cuda
@gpu
def test_saxpy_bit_exact_against_numpy(target: cuda.CudaTarget) -> None:
    from anywave.runtime.cuda import load_example

    rng = np.random.default_rng(1)
    n = 10_007
    x = (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)
    y = (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)
    expect = (0.75 * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)  # one rounding
    target.launch(load_example("saxpy"), "saxpy", (n + 255) // 256, 256,
                  {"a": np.float32(0.75), "x": x, "y": y, "n": n})
    assert np.array_equal(y.view(np.uint32), expect.view(np.uint32))


@pytest.mark.cuda
@gpu
@pytest.mark.parametrize("group", ["integer", "control", "wave", "convert"])
def test_conformance_groups(target: cuda.CudaTarget, group: str) -> None:
    from anywave.conformance import run_suite

    rep = run_suite(cuda.cuda_runner(target), [32], progress=False, groups=[group])
    bad = [(r.case, r.message[:300]) for r in rep.failures()]
    assert not bad, bad


@pytest.mark.cuda
@gpu
def test_launch_refused_names_kernel_and_shape(target: cuda.CudaTarget) -> None:
    from anywave.runtime.cuda import load_example

    x = np.zeros(4, np.float32)
    with pytest.raises(cuda.CudaError, match=r"saxpy.*workgroup=\(2048, 1, 1\)"):
        target.launch(load_example("saxpy"), "saxpy", 1, 2048, {"a": 1.0, "x": x, "y": x.copy(), "n": 4})


@pytest.mark.cuda
@gpu
def test_cubin_cache_hit(tmp_path, monkeypatch) -> None:
    from anywave.runtime.cuda import load_example

    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path))
    first = cuda.CudaTarget(0).load(load_example("saxpy"))
    second = cuda.CudaTarget(0).load(load_example("saxpy"))
    assert first.image_kind == "cubin" and not first.cache_hit
    assert second.cache_hit and second.cache_path.exists()


@pytest.mark.cuda
@gpu
def test_zero_copy_device_arrays(target: cuda.CudaTarget) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from anywave.runtime.cuda import load_example

    n = 1000
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    y = torch.ones(n, dtype=torch.float32, device="cuda")
    target.launch(load_example("saxpy"), "saxpy", 4, 256, {"a": 2.0, "x": x, "y": y, "n": n})
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), 2.0 * torch.arange(n, dtype=torch.float32) + 1.0)
