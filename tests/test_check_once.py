"""Issue 24, one check of each argument: a kernel call checks its arguments in the kernel
language's layer (:mod:`anywave.jit.launch`) and hands them to the driver's bound launch
(:meth:`anywave.runtime.driver.Driver.bind`), which does not check them again; the plan's later
calls do only their type-and-shape checks; a driver called directly still checks everything.
Counted per launch: the language layer's checkers (``check_buffer``, ``_check_arg``, the overlap
rule) and the drivers' (``marshal_args`` and ``check_args`` of the compiled runtimes, the
emulator's ``_bind``, CUDA's checked ``_launch_checked`` and ``_buffer_pointer``). And a plan made
with one set of arrays cannot skip a check another call needs. Expected outputs are NumPy
arithmetic on the inputs (small integers times 0.5: exact in f32); expected CUDA words are struct
packing of the values passed."""

from __future__ import annotations

import collections
import ctypes
import importlib
import re
import struct

import numpy as np
import pytest

import anywave as aw
from anywave.errors import LaunchValueError, OutOfBoundsError, WaveError
from anywave.jit import launch as L
from anywave.jit import targets as T
from anywave.jit.kernel import KernelFunction
from anywave.runtime import arrays as A
from anywave.runtime import driver as D

TARGETS = ["emulator", "opencl", "cpu", "vulkan", "sycl"]
RUNNERS = {"opencl": "anywave.runtime.opencl:OpenCLRunner", "cpu": "anywave.runtime.cpu:CpuRunner",
           "vulkan": "anywave.runtime.vulkan:VulkanRunner", "sycl": "anywave.runtime.sycl:SyclRunner"}


@aw.kernel
def axpb(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * a + 1.0


def _expect(x: np.ndarray, a: float, n: int, y0: np.ndarray) -> np.ndarray:
    y = y0.copy()
    y[:n] = x[:n] * np.float32(a) + np.float32(1.0)
    return y


def _available(name: str) -> None:
    if name not in T.available_targets():
        pytest.skip(f"target {name!r} is not available here")


@pytest.fixture
def checks(monkeypatch):
    """Calls of each argument checker since the fixture started, by layer and name."""
    c: collections.Counter[str] = collections.Counter()

    def spy(owner, name, key):
        real = getattr(owner, name)

        def counting(*a, **k):
            c[key] += 1
            return real(*a, **k)

        monkeypatch.setattr(owner, name, counting)

    spy(L, "check_buffer", "language: buffer")
    spy(A, "check_aliasing", "language: overlap")
    real_arg = KernelFunction._check_arg

    def scalar(self, *a, **k):
        c["language: scalar"] += 1
        return real_arg(self, *a, **k)

    monkeypatch.setattr(KernelFunction, "_check_arg", scalar)
    spy(D, "marshal_args", "driver: marshal_args")
    spy(importlib.import_module("anywave.emu.machine"), "_bind", "driver: emulator _bind")
    for where in RUNNERS.values():
        mod, cls = where.split(":")
        runner = getattr(importlib.import_module(mod), cls)
        real_ca = getattr(runner, "check_args", None)
        if real_ca is None:  # (a tree without the hook: its checks are inside the launch)
            continue

        def check_args(self, launch, real_ca=real_ca):
            c["driver: check_args"] += 1
            return real_ca(self, launch)

        monkeypatch.setattr(runner, "check_args", check_args)
    return c


def _layer(c: collections.Counter[str], layer: str) -> dict[str, int]:
    return {k: v for k, v in c.items() if k.startswith(layer) and v}


@pytest.mark.parametrize("target", TARGETS)
def test_a_kernel_call_checks_each_argument_once_and_a_plan_only_its_layout(target, checks):
    _available(target)
    axpb._calls.clear()
    x = np.arange(48, dtype=np.float32)
    y0 = np.full(48, -1.0, np.float32)
    y = y0.copy()
    axpb(x, y, 0.5, 40, grid=2, workgroup=32, target=target)  # the first call of the layout
    np.testing.assert_array_equal(y, _expect(x, 0.5, 40, y0))
    # the language layer checked the 2 buffers, the 2 scalars and the overlap rule; the driver nothing
    assert _layer(checks, "language") == {"language: buffer": 2, "language: scalar": 2, "language: overlap": 1}
    assert _layer(checks, "driver") == {}
    (plan,) = axpb._calls.values()
    bound = plan.__self__.bound
    assert bound is not None  # the plan launches through the driver's bound launch
    checks.clear()
    for i in range(1, 4):  # the plan's calls: new values each time, no checker at all
        y = y0.copy()
        axpb(x, y, 0.5 * i, 40 - i, grid=2, workgroup=32, target=target)
        np.testing.assert_array_equal(y, _expect(x, 0.5 * i, 40 - i, y0))
    assert checks == {}
    if isinstance(bound, D.BoundLaunch):
        assert bound.calls == 4  # the first call and the three later ones, one launch each


@pytest.mark.parametrize("target", TARGETS)
def test_a_driver_called_directly_checks_every_argument(target, checks):
    _available(target)
    x = np.arange(48, dtype=np.float32)
    y = np.zeros(48, np.float32)
    T.get_target(target).launch(axpb.compile(), "axpb", grid=2, workgroup=32, args=[x, y, 2.0, 33])
    np.testing.assert_array_equal(y, _expect(x, 2.0, 33, np.zeros(48, np.float32)))
    assert _layer(checks, "language") == {}
    assert _layer(checks, "driver") == ({"driver: emulator _bind": 1} if target == "emulator" else
                                        {"driver: marshal_args": 1, "driver: check_args": 1})


@pytest.mark.parametrize("target", ["opencl", "cpu", "sycl"])
def test_a_direct_call_still_refuses_a_read_only_written_buffer(target):
    # the driver's own check (check_args) on its public entry; the kernel call refuses the same
    # array in the language layer (test below)
    _available(target)
    x = np.arange(48, dtype=np.float32)
    y = np.zeros(48, np.float32)
    y.setflags(write=False)
    with pytest.raises(WaveError, match="buffer argument 'y' of kernel 'axpb' is written but the array is "
                                           "read-only"):
        T.get_target(target).launch(axpb.compile(), "axpb", grid=2, workgroup=32, args=[x, y, 2.0, 33])
    assert not y.any()


def test_a_direct_vulkan_call_still_refuses_another_targets_array():
    _available("vulkan")
    _available("opencl")
    x = aw.array(np.arange(48, dtype=np.float32), target="opencl")
    y = np.zeros(48, np.float32)
    with pytest.raises(WaveError, match="buffer argument 'x' of kernel 'axpb' is a opencl array; the vulkan "
                                           "target takes vulkan arrays or host memory"):
        T.get_target("vulkan").launch(axpb.compile(), "axpb", grid=2, workgroup=32, args=[x, y, 2.0, 33])


# ------------------------------------------------------------------ a plan cannot skip a needed check

BAD = ["read-only", "overlap", "dtype", "strided", "too small"]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("target", TARGETS)
def test_a_plan_made_with_good_arrays_cannot_skip_a_check_another_call_needs(target, bad, checks):
    _available(target)
    axpb._calls.clear()
    x = np.arange(48, dtype=np.float32)
    y = np.zeros(48, np.float32)
    for _ in range(2):  # the plan (bounds-checked build: "too small" is found by the launch)
        axpb(x, y, 0.5, 40, grid=2, workgroup=32, target=target, check=True)
    assert len(axpb._calls) == 1
    checks.clear()
    if bad == "too small":  # same layout, same types; only the size differs: the launch's own check
        small = np.zeros(16, np.float32)
        want = r"argument 'y' byte offset (\d+) .*64 bytes, valid offsets 0\.\.60"
        with pytest.raises(OutOfBoundsError, match=want) as ei:
            axpb(x, small, 0.5, 40, grid=2, workgroup=32, target=target, check=True)
        # the first failing access in time is reported (backends/bounds.py): with workgroups on
        # several threads that may be any store of y[16..39]
        off = int(re.search(r"byte offset (\d+)", str(ei.value)).group(1))
        assert off % 4 == 0 and 64 <= off < 160, off
        if target != "emulator":  # (the emulator stops at the store, before any lane of it writes)
            np.testing.assert_array_equal(small, _expect(x, 0.5, 16, small))  # the in-bounds lanes stored
        assert checks == {}  # the plan's layout matched: its type-and-shape checks passed it on
    else:
        z = {"read-only": y.copy(), "overlap": x, "dtype": np.zeros(48, np.float64),
             "strided": np.zeros(96, np.float32)[::2]}[bad]
        if bad == "read-only":
            z.setflags(write=False)
        want = {"read-only": "is written by the kernel, but the memory is read-only", "overlap": "overlap",
                "dtype": "expected dtype float32, got float64", "strided": "must be C-contiguous"}[bad]
        before = z.copy()
        with pytest.raises(aw.LaunchError, match=want):
            axpb(x, z, 0.5, 40, grid=2, workgroup=32, target=target, check=True)
        np.testing.assert_array_equal(z, before)  # nothing ran
        assert checks["language: buffer"] >= 1  # the full path ran, and refused it
        assert _layer(checks, "driver") == {}
    y2 = np.zeros(48, np.float32)
    axpb(x, y2, 2.0, 40, grid=2, workgroup=32, target=target, check=True)  # the plan still works
    np.testing.assert_array_equal(y2, _expect(x, 2.0, 40, np.zeros(48, np.float32)))


@pytest.mark.parametrize("target", TARGETS)
def test_a_float_that_overflows_its_type_is_refused_by_the_bound_launchs_conversion(target, checks):
    # a value check the language layer leaves to the word conversion (abi.scalar_word's error):
    # on the first call of a layout and on the plan's
    _available(target)
    axpb._calls.clear()
    x = np.arange(48, dtype=np.float32)
    y = np.zeros(48, np.float32)
    for _ in range(2):  # a LaunchValueError: a WaveError (errors.md: every input error is one) and a ValueError
        with pytest.raises(LaunchValueError,
                           match=r"scalar argument 'a' of kernel 'axpb' \(f32\) = 1e\+39 overflows f32"):
            axpb(x, y, 1e39, 40, grid=2, workgroup=32, target=target)
    assert not y.any() and len(axpb._calls) == 0  # no launch, no plan
    axpb(x, y, 0.5, 40, grid=2, workgroup=32, target=target)  # the plan
    checks.clear()
    with pytest.raises(ValueError, match="overflows f32"):
        axpb(x, y, -1e39, 40, grid=2, workgroup=32, target=target)
    assert checks == {}
    y2 = np.zeros(48, np.float32)
    axpb(x, y2, 3.4028234663852886e38, 1, grid=2, workgroup=32, target=target)  # the largest f32: taken
    assert y2[0] == np.float32(1.0) and not y2[1:].any()


def test_a_plan_of_device_arrays_refuses_another_devices_array():
    _available("opencl")
    _available("vulkan")
    axpb._calls.clear()
    x = aw.array(np.arange(48, dtype=np.float32), target="opencl")
    y = aw.zeros(48, aw.f32, target="opencl")
    for _ in range(2):
        axpb(x, y, 0.5, 40, grid=2, workgroup=32)  # the target: where the arrays live
    np.testing.assert_array_equal(y.numpy(), _expect(x.numpy(), 0.5, 40, np.zeros(48, np.float32)))
    other = aw.zeros(48, aw.f32, target="vulkan")  # the same type (aw.Array), another device
    for target in (None, "opencl"):
        with pytest.raises(aw.LaunchError, match=r"live on different devices \('x' on opencl:0, 'y' on vulkan:0\)"):
            axpb(x, other, 0.5, 40, grid=2, workgroup=32, target=target)
    assert not other.numpy().any()


def test_a_plan_of_cpu_tensors_refuses_a_tensor_without_host_memory_or_under_autograd():
    torch = pytest.importorskip("torch")
    axpb._calls.clear()
    x = torch.arange(48, dtype=torch.float32)
    y = torch.zeros(48)
    for _ in range(2):
        axpb(x, y, 0.5, 40, grid=2, workgroup=32, target="emulator")
    assert len(axpb._calls) == 1
    with pytest.raises(aw.LaunchError, match="on meta\\) cannot be a buffer: a meta tensor has no memory"):
        axpb(x, torch.zeros(48, device="meta"), 0.5, 40, grid=2, workgroup=32, target="emulator")
    leaf = torch.zeros(48, requires_grad=True)
    with pytest.raises(aw.LaunchError, match="leaf tensor that requires grad"):
        axpb(x, leaf, 0.5, 40, grid=2, workgroup=32, target="emulator")
    assert not leaf.detach().any()


# ----------------------------------------------------------------------------- CUDA, no GPU

@pytest.fixture
def fake_cuda(monkeypatch, checks):
    from anywave.runtime import cuda

    drv = cuda.FakeDriver()
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    monkeypatch.setattr(cuda, "_MEMORY", {})
    monkeypatch.setattr(A, "_SPACES", {})
    monkeypatch.setattr(A, "_USED", {})
    monkeypatch.setattr(T, "_CACHE", {})
    real_lc = cuda.CudaTarget._launch_checked

    def launch_checked(self, *a, **k):
        checks["cuda: bound launch (no argument check)" if k.get("prechecked") else "driver: cuda _launch_checked"] += 1
        return real_lc(self, *a, **k)

    monkeypatch.setattr(cuda.CudaTarget, "_launch_checked", launch_checked)
    real_bp = cuda.CudaTarget._buffer_pointer

    def buffer_pointer(self, *a, **k):
        checks["driver: cuda _buffer_pointer"] += 1
        return real_bp(self, *a, **k)

    monkeypatch.setattr(cuda.CudaTarget, "_buffer_pointer", buffer_pointer)
    seen = Launches()

    def record(f, grid, block, shared, stream, kp):
        ptrs = (ctypes.c_void_p * seen.words).from_address(kp)
        seen.append([ctypes.c_uint64.from_address(ptrs[i]).value for i in range(seen.words)])

    drv.on_launch = record
    return seen


class Launches(list):
    """The kernel parameter words of each launch; ``words``: how many each launch has (4: the
    kernel's ABI; 7 for its bounds-checked build: 2 buffer sizes and the error record added)."""

    words = 4


def _f32(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_cuda_device_arrays_are_checked_once_then_by_the_plan_launcher_alone(fake_cuda, checks):
    axpb._calls.clear()
    axpb._fast = None
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    axpb(dx, dy, 0.5, 50, grid=2, workgroup=32)
    assert _layer(checks, "language") == {"language: buffer": 2, "language: scalar": 2, "language: overlap": 1}
    assert _layer(checks, "driver") == {} and checks["cuda: bound launch (no argument check)"] == 1
    checks.clear()
    for i in range(1, 4):
        axpb(dx, dy, 0.5 * i, 50 - i, grid=2, workgroup=32)
    assert checks == {}  # the driver's plan launcher: its own type-and-shape checks only
    assert [(w[:2], w[2] & 0xFFFFFFFF, w[3] & 0xFFFFFFFF) for w in fake_cuda] == \
        [([dx.ptr, dy.ptr], _f32(0.5 * max(i, 1)), 50 - i) for i in range(4)]


def test_cuda_numpy_arguments_and_the_checked_build_take_the_bound_launch(fake_cuda, checks):
    axpb._calls.clear()
    axpb._fast = None
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    for i in range(3):  # NumPy arguments: copied in and out by the bound launch, checked once by the plan
        axpb(x, y, 0.5 * i, 50, grid=2, workgroup=32, target="cuda")
    assert _layer(checks, "driver") == {}
    assert checks["cuda: bound launch (no argument check)"] == 3
    assert _layer(checks, "language") == {"language: buffer": 2, "language: scalar": 2, "language: overlap": 1}
    addresses = {x.ctypes.data, y.ctypes.data}
    for i, w in enumerate(fake_cuda):
        assert not addresses & set(w[:2]) and w[0] != w[1]  # fresh device copies, not the host arrays
        assert (w[2] & 0xFFFFFFFF, w[3] & 0xFFFFFFFF) == (_f32(0.5 * i), 50)
    fake_cuda.clear()
    fake_cuda.words = 7
    checks.clear()
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    for i in range(3):  # the bounds-checked build: sizes and the error record appended, still no check
        axpb(dx, dy, 1.5, 50 + i, grid=2, workgroup=32, check=True)
    assert _layer(checks, "driver") == {} and checks["cuda: bound launch (no argument check)"] == 3
    assert [(w[:2], w[2] & 0xFFFFFFFF, w[3] & 0xFFFFFFFF, w[4:6]) for w in fake_cuda] == \
        [([dx.ptr, dy.ptr], _f32(1.5), 50 + i, [256, 256]) for i in range(3)]


def test_cuda_called_directly_checks_every_argument_and_a_plan_refuses_a_read_only_array(fake_cuda, checks):
    from anywave.runtime import cuda

    tgt = cuda.CudaTarget(0, use_cache=False)
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    tgt.launch(axpb.compile(), "axpb", 2, 32, [dx, dy, 0.5, 50])
    assert _layer(checks, "driver") == {"driver: cuda _launch_checked": 1, "driver: cuda _buffer_pointer": 2}
    assert _layer(checks, "language") == {}
    with pytest.raises(ValueError, match="buffer argument 'y' is declared write but the array is read-only"):
        ro = np.zeros(64, np.float32)
        ro.setflags(write=False)
        tgt.launch(axpb.compile(), "axpb", 2, 32, [np.zeros(64, np.float32), ro, 0.5, 50])
    axpb._calls.clear()
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    for _ in range(2):
        axpb(x, y, 0.5, 50, grid=2, workgroup=32, target="cuda")
    y.setflags(write=False)
    checks.clear()
    with pytest.raises(aw.LaunchError, match="is written by the kernel, but the memory is read-only"):
        axpb(x, y, 0.5, 50, grid=2, workgroup=32, target="cuda")
    assert checks["language: buffer"] >= 1 and "cuda: bound launch (no argument check)" not in checks


# ------------------------------------------------------------------ the bound launch's conversion

def test_the_word_converter_gives_scalar_words_bits():
    # abi.word_converter (struct packing; what a bound launch uses) against abi.scalar_word (exact
    # rational rounding; what a driver called directly uses): the same bits, the same refusals
    from anywave.abi import scalar_word, word_converter
    from anywave.isa.types import ScalarType

    k = axpb.compile().kernel("axpb")
    rng = np.random.default_rng(24)
    values = [0.0, -0.0, 1.0, 0.1, float("inf"), float("-inf"), float("nan"), -float("nan"), 5e-324, 1e-45, 7e-46,
              2.0 ** -149, 2.0 ** -150, 2.0 ** -126, 2.0 ** -126 * (1 - 2.0 ** -30), 2.0 ** -24, 2.0 ** -25,
              3 * 2.0 ** -26, 65504.0, 65519.99, 65520.0, 3.4028234663852886e38, 3.4028235677973362e38,
              3.4028235677973366e38, 1e300, 16777217.0, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24]
    values += [float(v) for v in rng.standard_normal(2000) * 2.0 ** rng.integers(-160, 140, 2000)]
    values += [float(v) for v in rng.integers(0, 2**63, 2000, dtype=np.uint64).view(np.float64)]
    # exact halfway points between neighbouring f32 / f16 values (ties to even)
    values += [float((2 * int(m) + 1) * 2.0 ** int(e)) for m, e in zip(rng.integers(1, 2**24, 500),
                                                                          rng.integers(-175, 100, 500), strict=True)]
    values += [float((2 * int(m) + 1) * 2.0 ** int(e)) for m, e in zip(rng.integers(1, 2**11, 500),
                                                                          rng.integers(-36, 5, 500), strict=True)]
    for t in (ScalarType.F32, ScalarType.F16, ScalarType.F64, ScalarType.BF16):
        conv = word_converter(k, "a", t)
        for v in values if t is not ScalarType.BF16 else values[:400]:
            try:
                want: object = scalar_word(k, "a", t, v)
            except ValueError as e:
                want = str(e)
            try:
                got: object = conv(v)
            except ValueError as e:
                got = str(e)
            assert got == want, (t, v)
    for t in (ScalarType.I32, ScalarType.U32, ScalarType.I64, ScalarType.U64):
        conv = word_converter(k, "n", t)
        lo, hi = {ScalarType.I32: (-2**31, 2**31 - 1), ScalarType.U32: (0, 2**32 - 1),
                  ScalarType.I64: (-2**63, 2**63 - 1), ScalarType.U64: (0, 2**64 - 1)}[t]
        for v in (lo, hi, 0, 1, -1 if lo else 7, lo + 12345, hi - 999):
            assert conv(v) == scalar_word(k, "n", t, v) == v % (1 << t.bits)
