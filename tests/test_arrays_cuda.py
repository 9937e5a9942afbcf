"""Issue 12 on an NVIDIA GPU (marker ``cuda``; skipped cleanly without one): every argument
kind zero-copy on the cuda target, device arrays, asynchronous launches on the caller's
stream, device errors, and ``anywave.torch.custom_op`` on CUDA tensors (opcheck,
torch.compile). Expectations are torch/NumPy arithmetic on the inputs."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.runtime import cuda

_OK, _WHY = cuda.driver_status()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not _OK, reason=f"no CUDA: {_WHY}")]


@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


@aw.kernel
def inc(a: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        a[i] += 1.0


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    return ((g.integers(-1024, 1024, n) / 1024).astype(np.float32),
            (g.integers(-1024, 1024, n) / 1024).astype(np.float32))


def expect(x, y):
    return (0.5 * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)


def run(x, y, out, n, **kw):
    axpy(x, y, out, 0.5, n, grid=(n + 255) // 256, workgroup=256, **kw)


def test_device_arrays_numpy_and_chain():
    x, y = data(10_000)
    src, dy = aw.array(x, target="cuda"), aw.array(y, target="cuda")
    dst = aw.zeros(10_000, aw.f32, target="cuda")
    assert dst.target == "cuda" and dst.__cuda_array_interface__["data"][0] == dst.ptr
    ref = x
    for _ in range(5):
        run(src, dy, dst, 10_000)
        ref = expect(ref, y)
        src, dst = dst, src
    aw.synchronize()
    np.testing.assert_array_equal(src.numpy(), ref)


def test_numpy_arguments_copy_in_and_out():
    x, y = data(1000, 1)
    out = np.zeros(1000, np.float32)
    run(x, y, out, 1000, target="cuda")
    np.testing.assert_array_equal(out, expect(x, y))


def test_torch_cuda_tensors_zero_copy_on_current_stream():
    torch = pytest.importorskip("torch")
    x, y = data(4096, 2)
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = torch.empty_like(tx)
        for _ in range(3):
            run(tx, ty, out, 4096)
        got = (out * 1).cpu()  # ordered after the launches only if they ran on s
    np.testing.assert_array_equal(got.numpy(), expect(x, y))


def test_cupy_cai_dlpack_and_capsules():
    torch = pytest.importorskip("torch")
    x, y = data(512, 3)
    want = expect(x, y)
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

    class CAI:
        def __init__(self, t):
            self._t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    out = torch.zeros(512, device="cuda")
    run(CAI(tx), ty, CAI(out), 512)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), want)
    out.zero_()
    run(torch.utils.dlpack.to_dlpack(tx), ty, out, 512)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), want)
    try:
        import cupy
    except ImportError:
        return
    cx, cy, co = cupy.asarray(x), cupy.asarray(y), cupy.zeros(512, cupy.float32)
    run(cx, cy, co, 512)
    cupy.cuda.Device().synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(co), want)


def test_torch_interop_shares_memory():
    torch = pytest.importorskip("torch")
    a = aw.zeros(64, aw.f32, target="cuda")
    t = aw.to_torch(a)
    inc(a, 64, grid=1, workgroup=64)
    aw.synchronize()
    assert float(t.sum()) == 64.0
    src = torch.ones(64, device="cuda")
    b = aw.from_torch(src)
    inc(b, 64, grid=1, workgroup=64)
    torch.cuda.synchronize()
    assert float(src.sum()) == 128.0
    c = torch.from_dlpack(a)
    assert c.data_ptr() == a.ptr


def test_device_errors():
    torch = pytest.importorskip("torch")
    t = torch.zeros(64, device="cuda")
    with pytest.raises(aw.LaunchError, match="lives on cuda:0 but the launch runs on target 'emulator'"):
        inc(t, 64, grid=1, workgroup=64, target="emulator")
    with pytest.raises(aw.LaunchError, match="overlap"):
        run(t, t, t, 64)
    with pytest.raises(aw.LaunchError, match="expected dtype float32"):
        inc(t.double(), 64, grid=1, workgroup=64)
    with pytest.raises(aw.LaunchError, match="C-contiguous"):
        inc(torch.zeros(8, 8, device="cuda").T, 64, grid=1, workgroup=64)
    if torch.cuda.device_count() > 1:
        with pytest.raises(aw.LaunchError, match="lives on cuda:1 but the launch runs on cuda:0"):
            inc(torch.zeros(64, device="cuda:1"), 64, grid=1, workgroup=64, target="cuda:0")


def test_wave_width_on_cuda():
    a = aw.zeros(32, aw.f32, target="cuda")
    inc(a, 32, grid=1, workgroup=32, wave_width=32)
    from anywave.jit.targets import TargetError

    with pytest.raises(TargetError, match="runs wave widths"):
        inc(a, 32, grid=1, workgroup=32, wave_width=16)
    np.testing.assert_array_equal(a.numpy(), np.ones(32, np.float32))


def test_custom_op_on_cuda_opcheck_and_compile():
    torch = pytest.importorskip("torch")
    from anywave.torch.custom_ops import custom_op

    op = custom_op("awtest_cuda::axpy", axpy, out_shape=lambda x, **_: x.shape,
                   scalars={"n": lambda x, **_: x.numel()},
                   backward=lambda ctx, g: (g * ctx.a, g, None),
                   setup_context=lambda ctx, inputs, output: setattr(ctx, "a", inputs[2]))
    x, y = data(3000, 4)
    tx = torch.from_numpy(x).cuda().requires_grad_()
    ty = torch.from_numpy(y).cuda().requires_grad_()
    torch.library.opcheck(op, (tx, ty, 0.5))
    z = op(tx, ty, 0.5)
    np.testing.assert_array_equal(z.detach().cpu().numpy(), expect(x, y))
    z.sum().backward()
    assert float(tx.grad.sum()) == 0.5 * 3000

    def f(a, b):
        return torch.relu(op(a, b, 0.5)) * 2

    cf = torch.compile(f, fullgraph=True)
    np.testing.assert_array_equal(cf(tx.detach(), ty.detach()).cpu().numpy(),
                                  (np.maximum(expect(x, y), 0) * 2).astype(np.float32))
