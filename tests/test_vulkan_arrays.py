"""Vulkan device arrays (issue 27): ``aw.array/empty/zeros(..., target="vulkan")`` in device-local
memory, staged transfers counted by the device, asynchronous launches on device arrays (a chain
of launches moves no byte to or from the host), barriers between dependent dispatches, deferred
frees, timestamp profiling, the on-disk pipeline cache, a dispatch that never ends on an
asynchronous launch, and the conformance suite on device arrays. Skips when Vulkan is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import anywave as aw
from anywave.conformance import suite

pytestmark = pytest.mark.vulkan


@pytest.fixture(scope="module")
def dev():  # noqa: ANN201
    from anywave.runtime import vulkan

    ok, why = vulkan.status()
    if not ok:
        pytest.skip(f"Vulkan unavailable: {why}")
    return vulkan.get_device()


@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


@aw.kernel
def accumulate(x: aw.In[aw.f32], acc: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        acc[i] = acc[i] + x[i]


@aw.kernel
def step(src: aw.In[aw.f32], dst: aw.Out[aw.f32], n: aw.i32):
    # dst[i] <- src[(i + 1) % n] * 0.5 + 1: chained src -> dst -> src, each launch reads what a
    # neighbouring workgroup of the previous launch wrote, so a missing barrier between
    # dispatches (read-after-write or write-after-read) shows as wrong values
    i = aw.global_id(0)
    if i < n:
        j = i + 1
        if j == n:
            j = 0
        dst[i] = src[j] * 0.5 + 1.0


def test_arrays_live_on_the_device_and_round_trip(dev) -> None:  # noqa: ANN001
    g = np.random.default_rng(1)
    for dt in (np.float32, np.int64, np.uint8, np.float16):
        h = (g.standard_normal((7, 13)) * 50).astype(dt)
        a = aw.array(h, target="vulkan")
        assert a.target == "vulkan" and a.shape == (7, 13) and a.dtype == np.dtype(dt)
        assert a.space.kind == "vulkan" and a.ptr == 0
        assert np.array_equal(a.numpy(), h)
        assert np.array_equal(a.reshape(91).numpy(), h.reshape(91))
    z = aw.zeros(1000, aw.i32, target="vulkan")
    assert np.array_equal(z.numpy(), np.zeros(1000, np.int32))
    z.assign(5)
    assert np.array_equal(z.numpy(), np.full(1000, 5, np.int32))
    e = aw.empty(0, aw.f32, target="vulkan")
    assert e.numpy().shape == (0,)


def test_transfers_are_counted(dev) -> None:  # noqa: ANN001
    t0 = dict(dev.transfers)
    h = np.arange(1000, dtype=np.float32)
    a = aw.array(h, target="vulkan")
    assert dev.transfers["to_device"] == t0["to_device"] + 1
    assert dev.transfers["to_device_bytes"] == t0["to_device_bytes"] + 4000
    a.numpy()
    assert dev.transfers["to_host"] == t0["to_host"] + 1
    assert dev.transfers["to_host_bytes"] == t0["to_host_bytes"] + 4000
    t1 = dict(dev.transfers)
    aw.zeros(1000, target="vulkan")  # filled on the device
    assert dev.transfers == t1


def test_a_chain_of_ten_launches_moves_no_bytes(dev) -> None:  # noqa: ANN001
    n = 5000
    g = np.random.default_rng(2)
    h = g.standard_normal(n).astype(np.float32)
    x = aw.array(h, target="vulkan")
    y = aw.empty(n, aw.f32, target="vulkan")
    aw.synchronize()
    t0, s0 = dict(dev.transfers), dev.submissions
    for i in range(10):
        src, dst = (x, y) if i % 2 == 0 else (y, x)
        step(src, dst, n, grid=-(-n // 64), workgroup=64, target="vulkan")
    assert dev.transfers == t0  # nothing crossed while the launches were submitted
    assert dev.submissions == s0 + 10
    aw.synchronize()
    assert dev.transfers == t0
    want = h.copy()
    for _ in range(10):
        want = np.roll(want, -1) * np.float32(0.5) + np.float32(1.0)
    assert np.array_equal(x.numpy(), want)


def test_dependent_launches_and_mixed_arguments(dev) -> None:  # noqa: ANN001
    g = np.random.default_rng(3)
    n = 3001
    x, y = g.standard_normal(n).astype(np.float32), g.standard_normal(n).astype(np.float32)
    dx, dy, d1, d2 = (aw.array(x, target="vulkan"), aw.array(y, target="vulkan"),
                      aw.empty(n, aw.f32, target="vulkan"), aw.empty(n, aw.f32, target="vulkan"))
    grid = -(-n // 128)
    for _ in range(5):  # write-after-read and read-after-write between the two launches
        axpy(dx, dy, d1, 0.75, n, grid=grid, workgroup=128, target="vulkan")
        axpy(d1, dy, dx, -0.5, n, grid=grid, workgroup=128, target="vulkan")
    w = x.copy()
    for _ in range(5):
        t = np.float32(0.75) * w + y
        w = np.float32(-0.5) * t + y
    assert np.array_equal(dx.numpy(), w)
    out = np.zeros(n, np.float32)  # a NumPy output beside device inputs: staged, synchronous
    axpy(dx, y, out, 2.0, n, grid=grid, workgroup=128, target="vulkan")
    assert np.array_equal(out, np.float32(2.0) * w + y)
    axpy(x, dy, d2, 2.0, n, grid=grid, workgroup=128, target="vulkan")
    assert np.array_equal(d2.numpy(), np.float32(2.0) * x + y)


def test_arrays_freed_while_launches_are_pending(dev) -> None:  # noqa: ANN001
    n = 4096
    keep = aw.zeros(n, aw.f32, target="vulkan")
    aw.synchronize()
    sets = len(dev._sets)
    for i in range(20):
        tmp = aw.array(np.full(n, i, np.float32), target="vulkan")
        accumulate(tmp, keep, n, grid=n // 64, workgroup=64, target="vulkan")
        del tmp  # freed by its finalizer while the launch may still be in flight
    assert np.array_equal(keep.numpy(), np.full(n, sum(range(20)), np.float32))
    assert not dev._deferred
    # the descriptor sets cached for those launches went with their buffers (a new buffer that
    # reuses a handle never meets a stale set)
    assert len(dev._sets) == sets


def test_library_kernel_on_device_arrays(dev) -> None:  # noqa: ANN001
    # the same user code as on CUDA: the library's add4 kernel on vulkan arrays
    from anywave.kernels.vec import WG, add4_kernel, elementwise_grid

    g = np.random.default_rng(4)
    n = 10_003
    x, y = g.standard_normal(n).astype(np.float32), g.standard_normal(n).astype(np.float32)
    out = aw.empty(n, aw.f32, target="vulkan")
    add4_kernel(aw.array(x, target="vulkan"), aw.array(y, target="vulkan"), out, n,
                grid=elementwise_grid(n, 2), workgroup=WG, target="vulkan")
    assert np.array_equal(out.numpy(), x + y)


def test_wrong_memory_is_refused(dev) -> None:  # noqa: ANN001
    from anywave.compiler.kernel import LaunchError
    from anywave.runtime.arrays import ArgumentError

    a = aw.zeros(16, aw.f32, target="vulkan")
    with pytest.raises(LaunchError, match="vulkan"):
        axpy(a, a.numpy(), np.zeros(16, np.float32), 1.0, 16, grid=1, workgroup=16, target="emulator")
    with pytest.raises(ArgumentError, match="cannot be exported"):
        a.__dlpack__()
    from anywave.errors import WaveError

    with pytest.raises(WaveError, match="one device"):
        aw.zeros(4, target="vulkan:1")


def test_profile_times_each_dispatch(dev) -> None:  # noqa: ANN001
    from anywave.runtime import vulkan

    n = 1 << 16
    x, y = aw.zeros(n, aw.f32, target="vulkan"), aw.zeros(n, aw.f32, target="vulkan")
    with vulkan.profile() as times:
        for _ in range(3):
            step(x, y, n, grid=n // 64, workgroup=64, target="vulkan")
    assert len(times) == 3
    assert all(lbl.startswith("kernel 'step'") and t > 0 for lbl, t in times)


_CACHE_CHILD = r'''
import numpy as np, anywave as aw
from anywave.runtime import vulkan

@aw.kernel
def k(out: aw.Out[aw.f32]):
    out[aw.global_id(0)] = 2.0

out = np.zeros(32, np.float32)
k(out, grid=1, workgroup=32, target="vulkan")
assert (out == 2).all()
dev = vulkan.get_device()
print("loaded", dev.pipeline_cache_loaded)
print("path", dev._pc_path)
'''


def test_pipeline_cache_is_kept_on_disk(dev, tmp_path) -> None:  # noqa: ANN001
    env = dict(os.environ, ANYWAVE_CACHE_DIR=str(tmp_path / "cache"))
    script = tmp_path / "child.py"
    script.write_text(_CACHE_CHILD)
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(dict(line.split(" ", 1) for line in r.stdout.splitlines()))
    assert outs[0]["loaded"] == "0"  # a fresh cache dir
    assert outs[0]["path"].startswith(str(tmp_path / "cache"))
    assert os.path.getsize(outs[0]["path"]) > 0
    assert int(outs[1]["loaded"]) > 0  # the second process started from the saved cache


_TIMEOUT_ASYNC = r'''
import numpy as np
import anywave as aw
from anywave.runtime import vulkan
from anywave.errors import WaveError

@aw.kernel
def slow(out: aw.Out[aw.f32], n: aw.i32):
    acc = 1.0
    for i in range(n):
        acc = aw.fma(acc, 0.999999, 1e-7)
    out[aw.global_id(0)] = acc

out = aw.zeros(64, aw.f32, target="vulkan")
aw.synchronize()
vulkan.FENCE_TIMEOUT_NS = 1_000  # 1 us: the dispatch below takes far longer
slow(out, 20_000_000, grid=1, workgroup=64, target="vulkan")  # submitted, not waited for
print("submitted")
try:
    aw.synchronize()
except WaveError as e:
    assert "did not finish" in str(e) and "'slow'" in str(e), e
    print("sync:", type(e).__name__)
else:
    raise SystemExit("no timeout reported")
try:
    out.numpy()
except WaveError as e:
    assert "refuses" in str(e), e
    print("numpy: refused")
print("alive")
'''


def test_an_asynchronous_dispatch_that_never_ends_is_an_error(dev, tmp_path) -> None:  # noqa: ANN001
    env = dict(os.environ, ANYWAVE_CACHE_DIR=str(tmp_path / "cache"))
    script = tmp_path / "child.py"
    script.write_text(_TIMEOUT_ASYNC)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    for want in ("submitted", "sync: VulkanError", "numpy: refused", "alive"):
        assert want in r.stdout, r.stdout


@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_conformance_on_device_arrays(dev, W: int) -> None:  # noqa: ANN001
    from anywave.runtime import vulkan

    if W not in dev.features.wave_widths:
        pytest.skip(f"{dev.name} cannot run subgroups of {W} (it offers {list(dev.features.wave_widths)})")
    runner = vulkan.DeviceArrayRunner()
    rep = suite.run_suite(runner, (W,), progress=False)
    bad = rep.failures()
    assert not bad, "\n".join(f"{r.case} W={r.wave_width}: {r.status}: {r.message[:400]}" for r in bad[:10])
    skipped = sum(1 for c in suite.load_cases() if W not in c.wave_widths)
    assert rep.counts().get("pass", 0) == len(suite.load_cases()) - skipped


def test_torch_ops_on_cpu_tensors_through_vulkan(dev) -> None:  # noqa: ANN001
    # CPU tensors staged through Vulkan device memory: the same bits as the emulator target
    torch = pytest.importorskip("torch")
    from anywave.torch import ops

    W = dev.features.wave_widths[0] if dev.features.wave_widths else 8
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 64, generator=g), torch.randn(64, 128, generator=g)
    x, w, bias = torch.randn(32, 64, generator=g), torch.randn(48, 64, generator=g), torch.randn(48, generator=g)
    outs = {}
    for name in ("emulator", "vulkan"):
        with ops.cpu_target(name, wave_width=W) as t:
            assert t.info.name == name
            outs[name] = (ops.mm(a, b), ops.linear(x, w, bias), ops.relu(x - 0.25))
    for e, v in zip(outs["emulator"], outs["vulkan"], strict=True):
        assert torch.equal(e.view(torch.int32), v.view(torch.int32))
