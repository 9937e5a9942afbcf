"""Issue 24 item 2: a launch plan per (kernel, argument layout) takes every scalar kind — Python
int/float, NumPy scalars of every dtype, 0-d NumPy arrays — on its path after the first call
(counted: the full launch path is not entered again), with the same values as the full path;
on the emulator and on CUDA through the no-op driver (cuda.FakeDriver). Expected outputs are
NumPy arithmetic on the inputs; expected words are struct packing of the scalar's value."""

from __future__ import annotations

import ctypes
import struct
import sys

import numpy as np
import pytest

import anywave as aw
from anywave.compiler.kernel import LaunchValueError

KMOD = sys.modules["anywave.jit.kernel"]


@aw.kernel
def scale(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * a


@aw.kernel
def shift64(x: aw.In[aw.i64], y: aw.Out[aw.i64], b: aw.i64, c: aw.u32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] + b + aw.i64(c)


FLOATS = [0.75, np.float32(0.75), np.float64(0.75), np.float16(0.75), np.array(0.75, np.float32),
          np.array(0.75), 3, np.int8(3), np.uint16(3), np.int64(3)]
INTS = [40, np.int32(40), np.int64(40), np.uint8(40), np.int16(40), np.uint64(40), np.array(40, np.int32),
        np.array(40, np.uint64)]


@pytest.fixture
def full_launches(monkeypatch):
    calls = []
    real = KMOD._full_launch

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(KMOD, "_full_launch", counting)
    return calls


@pytest.mark.parametrize("a", FLOATS, ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', '')}")
@pytest.mark.parametrize("n", INTS, ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', '')}")
def test_every_scalar_kind_takes_the_plan_on_the_emulator(a, n, full_launches):
    rng = np.random.default_rng(1)
    x = rng.integers(-64, 64, 48).astype(np.float32)
    av = float(np.asarray(a).item())
    for _ in range(3):
        y = np.full(48, -1.0, np.float32)
        scale(x, y, a, n, grid=2, workgroup=32, target="emulator")
        want = np.full(48, -1.0, np.float32)
        want[:40] = x[:40] * np.float32(av)
        np.testing.assert_array_equal(y, want)
    assert len(full_launches) == 1  # the first call records the plan, the next two use it


def test_64_bit_and_unsigned_scalars_take_the_plan(full_launches):
    x = np.arange(-20, 20, dtype=np.int64)
    for b, c in [(np.int64(-2**40), np.uint32(2**32 - 1)), (-2**40, 2**32 - 1), (np.array(-2**40), np.uint32(7))]:
        full_launches.clear()
        for _ in range(3):
            y = np.zeros(40, np.int64)
            shift64(x, y, b, c, 40, grid=2, workgroup=32, target="emulator")
            np.testing.assert_array_equal(y, x + int(b) + int(c))
        assert len(full_launches) == 1


def test_a_plan_refuses_what_the_full_path_refuses():
    x, y = np.ones(32, np.float32), np.zeros(32, np.float32)
    scale(x, y, np.float32(2), np.int32(32), grid=1, workgroup=32, target="emulator")  # warm the plan
    with pytest.raises(aw.LaunchError, match="argument 'n' is i32, got float 3.5"):
        scale(x, y, np.float32(2), 3.5, grid=1, workgroup=32, target="emulator")
    with pytest.raises(aw.LaunchError, match="argument 'n' is a i32 scalar, got bool True"):
        scale(x, y, np.float32(2), np.bool_(True), grid=1, workgroup=32, target="emulator")
    with pytest.raises(LaunchValueError, match="out of range for i32"):
        scale(x, y, np.float32(2), np.int64(2**31), grid=1, workgroup=32, target="emulator")
    with pytest.raises(LaunchValueError, match="out of range for i32"):
        scale(x, y, np.float32(2), np.array(2**31), grid=1, workgroup=32, target="emulator")
    with pytest.raises(aw.LaunchError, match="argument 'a' is a f32 scalar, got ndarray"):
        scale(x, y, np.ones(1, np.float32), 32, grid=1, workgroup=32, target="emulator")


def test_a_0d_tensor_scalar_is_refused_with_the_reason():
    torch = pytest.importorskip("torch")
    x, y = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(aw.LaunchError, match="got a 0-d Tensor; scalars are passed by value"):
        scale(x, y, torch.tensor(2.0), 32, grid=1, workgroup=32, target="emulator")


# ----------------------------------------------------------------------------- CUDA (no-op driver)

@pytest.fixture(params=["native", "python"])
def launcher_path(request, monkeypatch):
    """Each CUDA test runs through both launchers of a plan: the native one (runtime/cuda_native.py, C)
    and the generated Python one (its fallback when no C compiler or Python headers exist)."""
    from anywave.runtime import cuda_native as native

    if request.param == "native":
        ok, why = native.status()
        if not ok:
            pytest.skip(f"no native launcher here: {why}")
    else:
        monkeypatch.setattr(native, "_STATE", (None, "forced by the test"))
    return request.param


@pytest.fixture
def fake_cuda(monkeypatch, launcher_path):
    from anywave.jit import targets as ct
    from anywave.runtime import arrays as A
    from anywave.runtime import cuda

    drv = cuda.FakeDriver()
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    monkeypatch.setattr(cuda, "_MEMORY", {})
    monkeypatch.setattr(A, "_SPACES", {})
    monkeypatch.setattr(A, "_USED", {})
    monkeypatch.setattr(ct, "_CACHE", {})
    launches = []

    def record(f, grid, block, shared, stream, kp):
        ptrs = (ctypes.c_void_p * 4).from_address(kp)
        launches.append([ctypes.c_uint64.from_address(ptrs[i]).value for i in range(4)])

    drv.on_launch = record
    return launches


@pytest.mark.parametrize("a", FLOATS, ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', '')}")
def test_every_scalar_kind_takes_the_cuda_launcher(a, fake_cuda, full_launches):
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    want_a = struct.unpack("<I", struct.pack("<f", float(np.asarray(a).item())))[0]
    for n in INTS:
        full_launches.clear()
        fake_cuda.clear()
        for _ in range(3):
            scale(dx, dy, a, n, grid=2, workgroup=32, stream=5)
        assert len(full_launches) == 1, n
        assert len(fake_cuda) == 3
        for words in fake_cuda:
            assert words[:2] == [dx.ptr, dy.ptr]
            assert words[2] & 0xFFFFFFFF == want_a and words[3] & 0xFFFFFFFF == 40


@aw.kernel
def two_floats(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, b: aw.f64):
    i = aw.global_id(0)
    y[i] = x[i] * a + aw.f32(b)


TRICKY = [0.1, -0.0, 1e-45, 7e-46, 1.4e-45, 1.1754942e-38, 3.4028235e38, 3.4028235677973362e38, -3.40282356779733e38,
          2.0 ** -149, 2.0 ** -150, 2.0 ** -150 * 1.0000001, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24,
          float("inf"), float("-inf"), float("nan"), 16777217.0, 123456789.123]


def test_the_launchers_float_words_are_the_abis(fake_cuda, full_launches):
    # the generated CUDA launcher stores a finite float through a C float/double view of the
    # block; the words must be abi.scalar_word's (round to nearest even, overflow to inf,
    # subnormals), NaNs and ints through scalar_word itself
    from anywave.abi import scalar_word

    two_floats._calls.clear()  # (the other launcher's parametrisation made plans too)
    two_floats._fast = None
    k = two_floats.compile().kernel("two_floats")
    dx, dy = aw.empty(32, aw.f32, target="cuda"), aw.empty(32, aw.f32, target="cuda")
    two_floats(dx, dy, 1.0, 1.0, grid=1, workgroup=32, stream=3)  # the plan
    (fast,) = two_floats._calls.values()
    if fast.path == "native":
        assert fast.guarded
    else:
        assert fast.path == "python: forced by the test"
        assert "f32[4] = v2" in fast.source and "f64[3] = v3" in fast.source  # the float views are used
    for v in TRICKY + [3, -7, 2**60 + 1, 2**53, -2**53, 2**53 + 1, 16777217, -16777219, 0,
                       np.float32(0.1), np.float64(1e-310), np.int64(2**60 + 1)]:
        fake_cuda.clear()
        two_floats(dx, dy, v, v, grid=1, workgroup=32, stream=3)
        (words,) = fake_cuda
        ref = np.asarray(v).item()
        assert words[2] & 0xFFFFFFFF == scalar_word(k, "a", k.args[2].type, ref), v
        assert words[3] == scalar_word(k, "b", k.args[3].type, ref), v
    for v in (3.4028235677973366e38, -3.5e38, 1e300):  # overflows f32: refused, as scalar_word refuses it
        with pytest.raises(ValueError, match="overflows f32"):
            two_floats(dx, dy, v, 1.0, grid=1, workgroup=32, stream=3)
    # one per layout: float, int, np.float32, np.float64, np.int64; the native plan of the last
    # layout is also tried first by the next call (KernelFunction._fast), and a float parameter's
    # launcher takes a Python int as well, so there the int calls reuse the float layout's plan
    assert len(full_launches) == (4 if fast.path == "native" else 5)


# ----------------------------------------------------------------------------- the native launcher

FACTOR = 2.0


@aw.kernel
def by_factor(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * FACTOR + a


def test_a_native_plan_follows_the_kernels_globals(fake_cuda, full_launches, monkeypatch):
    # the launcher checks the kernel's fingerprint per call: a global it read that now holds
    # another object sends the call to the full path, which recompiles
    dx, dy = aw.empty(32, aw.f32, target="cuda"), aw.empty(32, aw.f32, target="cuda")
    for _ in range(3):
        by_factor(dx, dy, 0.5, 32, grid=1, workgroup=32, stream=7)
    assert len(full_launches) == 1 and len(fake_cuda) == 3
    monkeypatch.setitem(globals(), "FACTOR", 3.0)
    for _ in range(2):
        by_factor(dx, dy, 0.5, 32, grid=1, workgroup=32, stream=7)
    assert len(full_launches) == 2 and len(fake_cuda) == 5


def test_the_native_launcher_says_why_it_is_not_used(monkeypatch, tmp_path):
    from anywave.runtime import cuda_native as native

    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))
    try:
        monkeypatch.setenv("ANYWAVE_NATIVE_LAUNCH", "0")
        native.reset()
        assert native.status() == (False, "disabled by ANYWAVE_NATIVE_LAUNCH=0")
        assert "Python launcher" in native.explain()
        monkeypatch.delenv("ANYWAVE_NATIVE_LAUNCH")
        monkeypatch.setattr(native, "_compiler", lambda: None)
        native.reset()
        assert native.status() == (False, "no C compiler found (set CC, or install gcc or clang)")
        monkeypatch.undo()
        monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))
        if native._compiler() is None:
            pytest.skip("no C compiler here")
        bad = tmp_path / "aw_launch.c"
        bad.write_text("this is not C\n")
        monkeypatch.setattr(native, "SOURCE", bad)
        native.reset()
        ok, why = native.status()
        assert not ok and why.startswith("compiling the native launcher failed")
    finally:
        monkeypatch.undo()
        native.reset()


@aw.kernel
def first_entry(c: aw.Constant[aw.u32], out: aw.Out[aw.u32]):
    out[aw.global_id(0)] = c[0]


def test_cuda_refuses_constant_buffers_past_the_limit_on_every_path(fake_cuda):  # noqa: ARG001
    # the conformance case constant_too_big ran on CUDA (an H100, d2a7621): the rule was checked
    # on the Driver-based runtimes only. Every CUDA path now refuses it before the driver is
    # called: NumPy arrays, device arrays, and repeated calls (which a bound launcher would serve)
    from anywave.errors import WaveError
    from anywave.runtime import cuda

    launched = []
    cuda._DRV.on_launch = lambda *a: launched.append(1)  # the fixture's recorder reads four arguments
    ok, big = np.zeros(16384, np.uint32), np.zeros(16385, np.uint32)  # 65,536 and 65,540 bytes
    dev_ok, dev_big = aw.array(ok, target="cuda"), aw.array(big, target="cuda")
    out = aw.empty(32, aw.u32, target="cuda")
    for _ in range(3):
        first_entry(dev_ok, out, grid=1, workgroup=32)
    assert len(launched) == 3
    for c in (big, dev_big, big):
        for _ in range(3):
            with pytest.raises(WaveError, match="constant buffers .* hold 65540 bytes; .* at most 65536"):
                first_entry(c, out, grid=1, workgroup=32)
    first_entry(ok, out, grid=1, workgroup=32)
    assert len(launched) == 4  # no refused launch reached the driver


@aw.kernel
def first_entry_plain(c: aw.In[aw.u32], out: aw.Out[aw.u32]):
    out[aw.global_id(0)] = c[0]


def test_cuda_constant_buffers_take_the_plan_launcher(fake_cuda, monkeypatch):
    # a kernel with a constant buffer used to take the checked bound launch at every call (k-means
    # in the CUDA suite paid ~20 us a call for it); its plan now has the native or generated
    # launcher, preceded by the constant-bytes rule, like a kernel with an ordinary buffer
    from anywave.errors import WaveError
    from anywave.runtime import cuda

    checked = []
    real = cuda.CudaTarget._launch_checked

    def counting(self, *a, **k):
        checked.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(cuda.CudaTarget, "_launch_checked", counting)

    def record(f, grid, block, shared, stream, kp):  # two arguments (the fixture's recorder reads four)
        ptrs = (ctypes.c_void_p * 2).from_address(kp)
        fake_cuda.append([ctypes.c_uint64.from_address(ptrs[i]).value for i in range(2)])

    cuda._DRV.on_launch = record
    c = aw.array(np.arange(16384, dtype=np.uint32), target="cuda")  # 65,536 bytes: at the limit
    out = aw.empty(32, aw.u32, target="cuda")
    counts = {}
    for k in (first_entry_plain, first_entry):
        checked.clear()
        fake_cuda.clear()
        for _ in range(6):
            k(c, out, grid=1, workgroup=32)
        counts[k] = len(checked)
        assert len(fake_cuda) == 6 and all(w[:2] == [c.ptr, out.ptr] for w in fake_cuda)
    assert counts[first_entry] == counts[first_entry_plain] < 6, counts
    big = aw.array(np.zeros(16385, np.uint32), target="cuda")
    fake_cuda.clear()
    with pytest.raises(WaveError, match="constant buffers .* hold 65540 bytes"):
        first_entry(big, out, grid=1, workgroup=32)
    first_entry(c, out, grid=1, workgroup=32)
    assert len(fake_cuda) == 1


@aw.kernel
def bank_reader(c: aw.Constant[aw.f32], x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    i = aw.global_id(0)
    out[i] = x[i] * c[i % 4]


def test_cuda_constant_bank_is_filled_before_every_launch(fake_cuda, monkeypatch):
    # the PTX backend reads a kernel's one constant buffer from the module's constant bank
    # (ld.const, as nvcc's __constant__); every CUDA launch path copies that buffer's bytes to the
    # bank on the launch's stream before the kernel: the bound/checked path, the plan launchers
    # (native and generated), and a new stream (after the previous one is waited for)
    from anywave.backends import ptx
    from anywave.backends.ptx import CONST_BANK, translate
    from anywave.runtime import cuda

    monkeypatch.setattr(ptx, "PTX_CONST_BANK", True)  # whatever ANYWAVE_PTX_CONST_BANK says
    text = translate(bank_reader.compile(), "sm_90").text
    assert f".const .align 16 .b8 {CONST_BANK}[65536];" in text and "ld.const.b32" in text
    drv = cuda._DRV
    order = []
    real_copy = drv.cuMemcpyDtoDAsync
    drv.cuMemcpyDtoDAsync = lambda *a: (order.append(("copy", int(a[1]), int(a[2]), int(a[3] or 0))), real_copy(*a))[1]
    drv.on_launch = lambda f, grid, block, shared, stream, kp: order.append(("launch", int(stream or 0)))
    drv.cuCtxSynchronize = lambda: (order.append(("sync",)), (0,))[1]
    c = aw.array(np.arange(4, dtype=np.float32), target="cuda")
    c2 = aw.array(np.arange(8, dtype=np.float32), target="cuda")
    x = aw.array(np.ones(32, np.float32), target="cuda")
    out = aw.empty(32, aw.f32, target="cuda")
    order.clear()  # (making the arrays synchronises too)
    for _ in range(4):  # the first calls take the checked path, the later ones the plan's launcher
        bank_reader(c, x, out, grid=1, workgroup=32)
    bank_reader(c2, x, out, grid=1, workgroup=32)
    bank_reader(c2, x, out, grid=1, workgroup=32, stream=7)
    # every launch right after a copy of its constant buffer on its stream (a plan launcher's
    # first try of a new layout may copy and answer MISS: an extra copy, never a launch without one)
    launches = [j for j, o in enumerate(order) if o[0] == "launch"]
    assert len(launches) == 6
    want = [(c.ptr, 16, 0)] * 4 + [(c2.ptr, 32, 0), (c2.ptr, 32, 7)]
    for j, (ptr, n, st) in zip(launches, want, strict=True):
        assert order[j - 1] == ("copy", ptr, n, st) and order[j] == ("launch", st), (j, order)
    # the host waited for the context's work when the stream changed (before the copy on stream
    # 7; other parts of the runtime may synchronise too), not while the stream stayed the same
    assert ("sync",) in order[launches[-2] + 1:launches[-1] - 1], order
    assert ("sync",) not in order[:launches[-2]], order
    # NumPy arguments (staged to device memory by the checked path) are copied from their staging
    order.clear()
    bank_reader(np.arange(4, dtype=np.float32), np.ones(32, np.float32), np.zeros(32, np.float32),
                grid=1, workgroup=32, target="cuda")
    assert [o[0] for o in order][-2:] == ["copy", "launch"] and order[-2][2] == 16 and order.count(order[-1]) == 1
