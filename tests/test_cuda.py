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

from anywave.runtime import cuda, cuda_launch

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


@pytest.mark.cuda
@gpu
def test_repeated_launches_pass_new_values(target: cuda.CudaTarget) -> None:
    """The bound launcher (third launch on) really passes changed scalars and other arrays."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from anywave.runtime.cuda import load_example

    m = load_example("saxpy")
    n = 1000
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    for a in (1.0, 2.0, 0.5, -3.0):
        y = torch.ones(n, dtype=torch.float32, device="cuda")
        target.launch(m, "saxpy", 4, 256, [a, x, y, n])
        assert torch.equal(y.cpu(), a * torch.arange(n, dtype=torch.float32) + 1.0), a
    y = torch.zeros(n, dtype=torch.float32, device="cuda")
    target.launch(m, "saxpy", 4, 256, [1.0, x, y, 10])  # a smaller n: only 10 elements written
    assert torch.equal(y.cpu()[:11], torch.tensor([*range(10), 0], dtype=torch.float32))


# ------------------------------------------------------------------------ launch path, no GPU

TINY = """.version 1.0

.kernel tiny
.arg out buffer u32 write
.arg n scalar u32
.registers 4
    mov.sr        r0, sr_global_id_x
    ldarg.b32     r1, n
    setp.ge.u32   p0, r0, r1
    halt          p0
    movi.b32      r2, 2
    shl.b32       r3, r0, r2
    st.device.b32 out[r3], r0
    halt
.end

.kernel mixed
.arg out buffer u32 write
.arg s scalar i32
.arg w scalar i64
.arg d scalar f64
.arg f scalar f32
.registers 4
    halt
.end
"""


class FakeTensor:
    """Quacks like a CUDA torch.Tensor on the launch path."""

    def __init__(self, ptr: int, *, cuda: bool = True, contiguous: bool = True) -> None:
        self.ptr, self.is_cuda, self.contiguous = ptr, cuda, contiguous

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        return self.ptr


class DeviceArray:
    """A device array known only by ``__cuda_array_interface__``."""

    def __init__(self, ptr: int, shape: tuple[int, ...] = (64,), strides: Any = None) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<u4", "data": (ptr, False),
                                         "version": 3, "strides": strides}


class Recorder:
    def __init__(self) -> None:
        self.launches: list[dict[str, Any]] = []
        self.nargs = 0

    def __call__(self, f: Any, grid: Any, block: Any, shared: int, stream: Any, kp: int) -> None:
        ptrs = (ctypes.c_void_p * self.nargs).from_address(kp)
        words = [ctypes.c_uint64.from_address(ptrs[i]).value for i in range(self.nargs)]
        self.launches.append({"function": f, "grid": grid, "block": block, "stream": stream, "words": words,
                              "thread": threading.get_ident()})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> cuda.FakeDriver:
    drv = cuda.FakeDriver()
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    monkeypatch.setattr(cuda, "_TORCH_TENSOR", FakeTensor)
    drv.on_launch = Recorder()
    return drv


@pytest.fixture
def tiny(fake: cuda.FakeDriver) -> tuple[cuda.CudaTarget, Any, Recorder]:
    from anywave.asm import assemble

    tgt = cuda.CudaTarget(0, use_cache=False)
    fake.on_launch.nargs = 2
    return tgt, assemble(TINY, "tiny.wave"), fake.on_launch


def count_checked(monkeypatch: pytest.MonkeyPatch, tgt: cuda.CudaTarget) -> list[int]:
    calls = [0]
    real = tgt._launch_checked

    def counting(*a: Any) -> Any:
        calls[0] += 1
        return real(*a)

    monkeypatch.setattr(tgt, "_launch_checked", counting)
    return calls


def test_fake_driver_uses_bindings_context_setter(tiny) -> None:
    tgt, _, _ = tiny
    assert tgt._context_setter[3] == "cuda.bindings cuCtxSetCurrent"
    assert cuda._ctypes_context_setter(tgt.device.context) is None  # only with the real driver


def test_repeated_launch_takes_bound_launcher(tiny, monkeypatch) -> None:
    tgt, m, rec = tiny
    checked = count_checked(monkeypatch, tgt)
    buf = FakeTensor(0x7F0000001000)
    for _ in range(5):
        tgt.launch(m, "tiny", 1, 32, [buf, 32], sync=False)
    assert checked[0] == 2  # the first launch and the one that binds; then the bound launcher
    assert len(tgt._fast) == 1
    assert len(rec.launches) == 5
    for r in rec.launches:
        assert r["grid"] == (1, 1, 1) and r["block"] == (32, 1, 1) and r["stream"] == 0
        assert r["words"] == [0x7F0000001000, 32]


def test_bound_launcher_passes_changed_scalars_and_arrays(tiny, monkeypatch) -> None:
    tgt, m, rec = tiny
    bufs = [FakeTensor(0x7F0000000000 + 0x100 * i) for i in range(4)]
    ns = [0, 1, 12345, 2**32 - 1]
    tgt.launch(m, "tiny", 4, 64, [bufs[0], 7])
    tgt.launch(m, "tiny", 4, 64, [bufs[0], 7])
    checked = count_checked(monkeypatch, tgt)
    for b, n in zip(bufs, ns, strict=True):
        tgt.launch(m, "tiny", 4, 64, [b, n])
        tgt.launch(m, "tiny", 4, 64, (b, n))
        tgt.launch(m, "tiny", 4, 64, {"n": n, "out": b})
    assert checked[0] == 0
    got = [r["words"] for r in rec.launches[2:]]
    assert got == [[b.ptr, n] for b, n in zip(bufs, ns, strict=True) for _ in range(3)]


def test_bound_launcher_scalar_words_match_struct(fake, monkeypatch) -> None:
    from anywave.asm import assemble

    tgt = cuda.CudaTarget(0, use_cache=False)
    m = assemble(TINY, "tiny.wave")
    fake.on_launch.nargs = 5
    b = FakeTensor(0x7F0000004000)
    for _ in range(2):  # bind
        tgt.launch(m, "mixed", 1, 32, [b, 0, 0, 0.0, 0.0])
    checked = count_checked(monkeypatch, tgt)
    cases = [(-1, -2**63, 0.1, 0.1), (2**31 - 1, 2**63 - 1, -0.0, np.float32(1.5)), (-2**31, 5, 1e300, -2.5)]
    for s, w, d, f in cases:
        tgt.launch(m, "mixed", 1, 32, [b, s, w, d, f])
    assert checked[0] == 0
    for (s, w, d, f), r in zip(cases, fake.on_launch.launches[2:], strict=True):
        words = r["words"]
        assert words[0] == b.ptr
        assert words[1] == struct.unpack("<I", struct.pack("<i", s))[0]  # upper half of the slot stays 0
        assert words[2] == struct.unpack("<Q", struct.pack("<q", w))[0]
        assert words[3] == struct.unpack("<Q", struct.pack("<d", d))[0]
        assert words[4] == struct.unpack("<I", struct.pack("<f", float(np.float32(f))))[0]


def test_bound_launcher_rejects_scalars_as_the_checked_path(tiny) -> None:
    tgt, m, _ = tiny
    b = FakeTensor(0x7F0000001000)
    for _ in range(3):
        tgt.launch(m, "tiny", 1, 32, [b, 1])
    assert tgt._fast
    with pytest.raises(ValueError, match=r"'n'.*tiny.*out of range"):
        tgt.launch(m, "tiny", 1, 32, [b, 2**32])
    with pytest.raises(ValueError, match=r"'n'.*out of range"):
        tgt.launch(m, "tiny", 1, 32, [b, -1])
    with pytest.raises(TypeError, match=r"'n'.*takes an integer, got float"):
        tgt.launch(m, "tiny", 1, 32, [b, 1.0])
    with pytest.raises(TypeError, match=r"'n'.*takes an integer, got bool"):
        tgt.launch(m, "tiny", 1, 32, [b, True])


def test_other_geometry_takes_checked_path(tiny, monkeypatch) -> None:
    tgt, m, rec = tiny
    b = FakeTensor(0x7F0000001000)
    for _ in range(2):
        tgt.launch(m, "tiny", 1, 32, [b, 1])
    checked = count_checked(monkeypatch, tgt)
    tgt.launch(m, "tiny", (3, 2), (16, 2), [b, 1])
    assert checked[0] == 1 and rec.launches[-1]["grid"] == (3, 2, 1) and rec.launches[-1]["block"] == (16, 2, 1)
    tgt.launch(m, "tiny", [1], [32], [b, 1])  # lists are unhashable: always checked
    assert checked[0] == 2
    with pytest.raises(cuda.CudaError, match=r"launch refused: kernel 'tiny' grid=\(1, 1, 1\) "
                                             r"workgroup=\(2048, 1, 1\)"):
        tgt.launch(m, "tiny", 1, 2048, [b, 1])
    with pytest.raises(cuda.CudaError, match=r"grid exceeds"):
        tgt.launch(m, "tiny", (1, 70000), 32, [b, 1])
    with pytest.raises(TypeError):  # a float grid equal to a bound int grid is not launched
        tgt.launch(m, "tiny", 1.0, 32, [b, 1])
    assert checked[0] == 5


def test_unusual_arguments_take_checked_path(tiny, monkeypatch) -> None:
    tgt, m, rec = tiny
    b = FakeTensor(0x7F0000001000)
    for _ in range(2):
        tgt.launch(m, "tiny", 1, 32, [b, 1])
    checked = count_checked(monkeypatch, tgt)
    with pytest.raises(TypeError, match=r"kernel 'tiny'.*takes 2 arguments \['out', 'n'\], got 3"):
        tgt.launch(m, "tiny", 1, 32, [b, 1, 2])
    with pytest.raises(TypeError, match=r"missing \['n'\], unknown \['m'\]"):
        tgt.launch(m, "tiny", 1, 32, {"out": b, "m": 1})
    with pytest.raises(ValueError, match=r"'out' is not 16-byte aligned \(address 0x7f0000001004\)"):
        tgt.launch(m, "tiny", 1, 32, [FakeTensor(0x7F0000001004), 1])
    with pytest.raises(TypeError, match=r"'out' takes a NumPy array"):
        tgt.launch(m, "tiny", 1, 32, [FakeTensor(0x7F0000001000, cuda=False), 1])
    with pytest.raises(ValueError, match=r"'out' must be C-contiguous"):
        tgt.launch(m, "tiny", 1, 32, [DeviceArray(0x7F0000002000, (4, 4), (4, 16)), 1])
    assert checked[0] == 5
    # a NumPy array is copied in and out through the checked path
    allocs: list[int] = []
    real_alloc = cuda._DRV.cuMemAlloc
    monkeypatch.setattr(cuda._DRV, "cuMemAlloc", lambda n: (allocs.append(n), real_alloc(n))[1])
    host = np.zeros(64, np.uint32)
    tgt.launch(m, "tiny", 1, 32, [host, 1])
    assert checked[0] == 6 and allocs == [256]
    # a __cuda_array_interface__ array, contiguous by its strides, binds too
    d = DeviceArray(0x7F0000003000, (4, 4), (16, 4))
    for _ in range(3):
        tgt.launch(m, "tiny", 1, 32, [d, 9])
    assert rec.launches[-1]["words"] == [0x7F0000003000, 9]


def test_bound_launcher_errors_name_kernel_and_launch(tiny, fake) -> None:
    tgt, m, _ = tiny
    b = FakeTensor(0x7F0000001000)
    for _ in range(2):
        tgt.launch(m, "tiny", 2, 64, [b, 1])
    shape = r"kernel 'tiny' grid=\(2, 1, 1\) workgroup=\(64, 1, 1\)"
    fake.launch_status = 701
    with pytest.raises(cuda.CudaError, match=shape + r": cuLaunchKernel failed: CUDA_ERROR_701"):
        tgt.launch(m, "tiny", 2, 64, [b, 1])
    fake.launch_status = 0
    fake.ctx_status = 201
    with pytest.raises(cuda.CudaError, match=shape + r": cuCtxSetCurrent failed: CUDA_ERROR_201"):
        tgt.launch(m, "tiny", 2, 64, [b, 1])
    fake.ctx_status = 0
    fake.sync_status = 700
    with pytest.raises(cuda.CudaError, match=shape + r": cuStreamSynchronize failed: CUDA_ERROR_700"):
        tgt.launch(m, "tiny", 2, 64, [b, 1])
    tgt.launch(m, "tiny", 2, 64, [b, 1], sync=False)  # no sync, no error
    fake.sync_status = 0
    assert len(tgt._fast) == 1  # all of these went through the bound launcher


def test_bound_launcher_sets_context_and_stream(tiny, fake) -> None:
    tgt, m, rec = tiny
    b = FakeTensor(0x7F0000001000)

    class Stream:
        cuda_stream = 0x5000

    for _ in range(3):
        fake.current = None
        tgt.launch(m, "tiny", 1, 32, [b, 1], stream=Stream(), sync=False)
        assert fake.current == tgt.device.context  # made current at every launch
    tgt.launch(m, "tiny", 1, 32, [b, 1], stream=0x6000, sync=False)
    assert [r["stream"] for r in rec.launches] == [0x5000] * 3 + [0x6000]
    assert fake.ctx_sets >= 4


def test_bound_launchers_are_per_thread(tiny) -> None:
    import sys

    tgt, m, rec = tiny
    errors: list[BaseException] = []
    together = threading.Barrier(4)  # all alive at once: distinct thread ids, interleaved launches

    def work(k: int) -> None:
        try:
            b = FakeTensor(0x7F0000000000 + 0x1000 * k)
            together.wait()
            for _ in range(300):
                tgt.launch(m, "tiny", 1, 32, [b, k], sync=False)
            together.wait()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors
    assert len(tgt._fast) == 4  # one bound launcher, with its own parameter block, per thread
    by_thread: dict[int, set[tuple[int, ...]]] = {}
    for r in rec.launches:
        by_thread.setdefault(r["thread"], set()).add(tuple(r["words"]))
    assert sorted(by_thread.values(), key=lambda v: sorted(v)) == \
        [{(0x7F0000000000 + 0x1000 * k, k)} for k in range(1, 5)]


def test_cai_contiguous_matches_numpy() -> None:
    for a in (np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32).T, np.zeros((5, 1, 2), np.int64),
              np.zeros((4, 6), np.uint8)[:, ::2], np.zeros((1, 1), np.float32)):
        cai = {"shape": a.shape, "typestr": a.dtype.str, "strides": a.strides, "data": (0, False)}
        assert cuda_launch.cai_contiguous(cai) == (a.flags.c_contiguous or a.size <= 1), (a.shape, a.strides)
    assert cuda_launch.cai_contiguous({"shape": (4,), "typestr": "<f4", "strides": None})
    assert not cuda_launch.cai_contiguous({"shape": (1, 4), "typestr": "<f4", "strides": (999, 4)})


@pytest.mark.cuda
@gpu
def test_constant_buffers_past_the_limit_are_refused_on_every_cuda_path() -> None:
    # the conformance case constant_too_big ran on CUDA (the launch rule was checked on the other
    # runtimes only): NumPy arrays, device arrays, and the repeated launch that a bound launcher
    # would take, each refused before the kernel runs, the output untouched
    import anywave as aw
    from anywave.errors import WaveError

    @aw.kernel
    def first_entry(c: aw.Constant[aw.u32], out: aw.Out[aw.u32]):
        out[aw.global_id(0)] = c[0]

    ok = np.arange(16384, dtype=np.uint32) + 7  # 65,536 bytes: at the limit
    big = np.zeros(16385, np.uint32)  # 65,540 bytes: past it
    out = np.zeros(32, np.uint32)
    first_entry(ok, out, grid=1, workgroup=32, target="cuda")
    assert np.all(out == 7)
    dev_ok, dev_big = aw.array(ok, target="cuda"), aw.array(big, target="cuda")
    dev_out = aw.array(np.zeros(32, np.uint32), target="cuda")
    for _ in range(3):  # the second and later calls are the ones a bound launcher would serve
        first_entry(dev_ok, dev_out, grid=1, workgroup=32, target="cuda")
    for c, o in ((big, out), (dev_big, dev_out)):
        for _ in range(3):
            with pytest.raises(WaveError, match="constant buffers .* hold 65540 bytes; .* at most 65536"):
                first_entry(c, o, grid=1, workgroup=32, target="cuda")
    assert np.all(out == 7) and np.all(dev_out.numpy() == 7)
