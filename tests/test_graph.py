"""``aw.graph`` (issue 24 item 3) through the no-op CUDA driver (cuda.FakeDriver, which records
the launches made on a capturing stream and replays them at cuGraphLaunch): a capture records
each launch once, runs nothing, and each replay runs the same launches with the argument words
they had at capture; what cannot be recorded is refused with the reason. Expected words are
struct packing of the values passed; the GPU run is in tests/test_arrays_cuda.py."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

import anywave as aw


@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.fixture
def fake(monkeypatch):
    from anywave.jit import targets as ct
    from anywave.runtime import arrays as A
    from anywave.runtime import cuda

    drv = cuda.FakeDriver()
    drv.capture_nargs = 5
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    monkeypatch.setattr(cuda, "_MEMORY", {})
    monkeypatch.setattr(cuda, "_CAPTURE_STREAMS", {})
    monkeypatch.setattr(A, "_SPACES", {})
    monkeypatch.setattr(A, "_USED", {})
    monkeypatch.setattr(ct, "_CACHE", {})
    runs = []

    def record(f, grid, block, shared, stream, kp):
        ptrs = (ctypes.c_void_p * 5).from_address(kp)
        runs.append((grid, stream, [ctypes.c_uint64.from_address(ptrs[i]).value for i in range(5)]))

    drv.on_launch = record
    return drv, runs


def f32_word(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_capture_records_and_replays_the_launches(fake):
    _, runs = fake
    dx, dy, out = (aw.empty(64, aw.f32, target="cuda") for _ in range(3))
    axpy(dx, dy, out, 0.5, 64, grid=2, workgroup=32)  # warm-up: compiled, loaded and run once
    assert len(runs) == 1
    with aw.graph(target="cuda") as g:
        for k in range(3):
            axpy(dx, dy, out, 0.25 * (k + 1), 64 - k, grid=2 + k, workgroup=32)
    assert len(runs) == 1  # recorded, not run
    assert g.kernels == 3
    for rep in range(2):
        g.replay() if rep == 0 else g()
        got = runs[1 + 3 * rep:]
        assert len(got) == 3
        for k, (grid, _, words) in enumerate(got):
            assert grid == (2 + k, 1, 1)
            assert words[:3] == [dx.ptr, dy.ptr, out.ptr]
            assert words[3] & 0xFFFFFFFF == f32_word(0.25 * (k + 1)) and words[4] & 0xFFFFFFFF == 64 - k
    axpy(dx, dy, out, 0.5, 64, grid=2, workgroup=32)  # after the block: runs at once again
    assert len(runs) == 8


def test_what_cannot_be_recorded_is_refused(fake):
    dx, dy, out = (aw.empty(64, aw.f32, target="cuda") for _ in range(3))
    host = np.zeros(64, np.float32)
    with pytest.raises(aw.LaunchError, match="host memory, whose copy would run now"), aw.graph(target="cuda"):
        axpy(dx, dy, host, 0.5, 64, grid=2, workgroup=32, target="cuda")
    with pytest.raises(aw.LaunchError, match="it runs on target 'emulator'"), aw.graph(target="cuda"):
        axpy(np.ones(64, np.float32), host, host.copy(), 0.5, 64, grid=2, workgroup=32, target="emulator")
    with pytest.raises(aw.LaunchError, match="check=True waits"), aw.graph(target="cuda"):
        axpy(dx, dy, out, 0.5, 64, grid=2, workgroup=32, check=True)
    with aw.graph(target="cuda") as g:  # the failed captures were ended: a new one opens
        axpy(dx, dy, out, 0.5, 64, grid=2, workgroup=32)
    assert g.kernels == 1
    with pytest.raises(RuntimeError, match="graphs do not nest"), aw.graph(), aw.graph():
        pass
    with pytest.raises(RuntimeError, match="already captured"), g:
        pass
    with pytest.raises(aw.jit.TargetError, match="graphs are captured on the cuda target"):
        aw.graph(target="opencl")
    with pytest.raises(RuntimeError, match="before the capture ended"):
        aw.graph().replay()


# ----------------------------------------------------------------------------- on a GPU

def _cuda_ok() -> tuple[bool, str]:
    from anywave.runtime import cuda

    return cuda.driver_status()


@pytest.mark.cuda
def test_graph_replays_on_the_gpu():
    ok, why = _cuda_ok()
    if not ok:
        pytest.skip(f"no CUDA: {why}")
    x = np.arange(1000, dtype=np.float32)
    dx = aw.array(x, target="cuda")
    dy, dz = aw.zeros(1000, aw.f32, target="cuda"), aw.zeros(1000, aw.f32, target="cuda")
    axpy(dx, dx, dy, 1.0, 1000, grid=4, workgroup=256)  # warm-up: y = 2x
    with aw.graph(target="cuda") as g:
        axpy(dx, dy, dz, 0.5, 1000, grid=4, workgroup=256)  # z = 0.5 x + y
        axpy(dz, dx, dy, 2.0, 1000, grid=4, workgroup=256)  # y = 2 z + x
    aw.synchronize()
    np.testing.assert_array_equal(dy.numpy(), 2 * x)  # nothing ran at capture
    wy = 2 * x
    for _ in range(3):
        g()
        wz = (np.float32(0.5) * x + wy).astype(np.float32)
        wy = (np.float32(2.0) * wz + x).astype(np.float32)
    aw.synchronize()
    np.testing.assert_array_equal(dz.numpy(), wz)
    np.testing.assert_array_equal(dy.numpy(), wy)


@pytest.mark.cuda
def test_torch_cuda_graph_captures_a_custom_op():
    ok, why = _cuda_ok()
    if not ok:
        pytest.skip(f"no CUDA: {why}")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from anywave.torch import custom_op

    op = custom_op("awgraphtest::axpy", axpy, out_shape=lambda x, **_: x.shape,
                   scalars={"n": lambda x, **_: x.numel()}, workgroup=64)
    x = torch.arange(500, dtype=torch.float32, device="cuda")
    y = torch.ones(500, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op(x, y, 3.0)  # warm-up off the capture, as PyTorch asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = op(op(x, y, 3.0), y, 2.0)
    x.copy_(torch.full((500,), 5.0, device="cuda"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.full((500,), 2.0 * (3.0 * 5.0 + 1.0) + 1.0))
