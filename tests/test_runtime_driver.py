"""The shared driver base (anywave.runtime.driver): program cache, refusal checks, padding and
marshalling, once for every compiled runtime; and the registry's TargetInfo facts."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.errors import LaunchConfigError, WaveError
from anywave.runtime import driver as D

SRC = """.version 1.0

.kernel plain
.arg out buffer u32 write
.arg n scalar u32
.arg f scalar f32
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

.kernel waves
.arg out buffer f32 readwrite
.registers 4
    mov.sr        r0, sr_global_id_x
    movi.b32      r1, 2
    shl.b32       r2, r0, r1
    ld.device.b32 r3, out[r2]
    wred.add.f32  r3, r3
    st.device.b32 out[r2], r3
    halt
.end

.kernel fixed
.arg out buffer u32 write
.workgroup_size 64, 1, 1
.registers 4
    halt
.end
"""


class _Err(WaveError):
    pass


class _Info:
    def __init__(self, wave_mode: bool, local_memory: int = 0) -> None:
        self.wave_mode, self.local_memory = wave_mode, local_memory


class _Prog:
    def __init__(self, module: Any, refused: dict[str, str]) -> None:
        self.refused = refused
        self.kernels = {k.name: _Info(k.name == "waves", 0) for k in module.kernels if k.name not in refused}


class _Dev:
    name, local_memory, max_workgroup = "test device", 1024, 256


class _Driver(D.Driver):
    error = _Err

    def __init__(self, refused: dict[str, str] | None = None) -> None:
        super().__init__()
        self.dev = _Dev()
        self.refused = refused or {}
        self.translated: list[tuple[int, int, bool]] = []

    def translate(self, module: Any, wave_width: int, checked: bool) -> _Prog:
        self.translated.append((id(module), wave_width, checked))
        return _Prog(module, self.refused)


@pytest.fixture
def module() -> Any:
    return assemble(SRC, "driver.wave")


def test_program_cache_translates_once_per_module_w_and_build(module) -> None:
    drv = _Driver()
    for _ in range(3):
        drv.program(module, 16)
    drv.program(module, 16, checked=True)
    drv.program(module, 32)
    assert [t[1:] for t in drv.translated] == [(16, False), (16, True), (32, False)]
    other = assemble(SRC, "driver.wave")
    drv.program(other, 16)
    assert len(drv.translated) == 4


@pytest.mark.parametrize("W", [8, 16, 32, 64])
@pytest.mark.parametrize("wg", [(1, 1, 1), (5, 1, 1), (7, 3, 1), (16, 2, 2), (100, 1, 1)])
def test_wave_kernels_are_padded_to_whole_waves(module, W: int, wg: tuple[int, int, int]) -> None:
    drv = _Driver()
    n = wg[0] * wg[1] * wg[2]
    want = ((n + W - 1) // W) * W  # whole waves, computed here independently
    launch = drv.prepare(module, "waves", (3, 2, 1), wg, {"out": np.zeros(4, np.float32)}, W)
    assert launch.threads == want
    assert launch.dims == ((3 * want, 2, 1), (want, 1, 1))
    plain = drv.prepare(module, "plain", (3, 1, 1), wg, {"out": np.zeros(4, np.uint32), "n": 1, "f": 0.5}, W)
    assert plain.threads == n  # no wave operations: no padding


def test_scalars_are_marshalled_as_abi_words(module) -> None:
    drv = _Driver()
    launch = drv.prepare(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 2**32 - 1, "f": -1.5}, 8)
    kinds = [(k, type(v)) for k, v, _ in launch.margs]
    assert kinds == [("buffer", np.ndarray), ("u32", np.uint32), ("u32", np.uint32)]
    assert int(launch.margs[1][1]) == 2**32 - 1
    assert int(launch.margs[2][1]) == int(np.array(-1.5, np.float32).view(np.uint32))
    assert launch.bounds_sizes() == [32, 0, 0]


def test_refusals_name_the_kernel_device_and_reason(module) -> None:
    drv = _Driver({"waves": "no sub-groups here"})
    with pytest.raises(_Err, match=r"kernel 'waves' cannot run on test device: no sub-groups here"):
        drv.prepare(module, "waves", (1,), (8,), {"out": np.zeros(8, np.float32)}, 8)
    with pytest.raises(_Err, match=r"module has no kernel 'nope'"):
        drv.prepare(module, "nope", (1,), (8,), {}, 8)
    with pytest.raises(_Err, match=r"missing \['f'\], unexpected \['g'\]"):
        drv.prepare(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 1, "g": 2}, 8)
    with pytest.raises(_Err, match=r"buffer argument 'out' .* got list"):
        drv.prepare(module, "plain", (1,), (8,), {"out": [0] * 8, "n": 1, "f": 1.0}, 8)
    with pytest.raises(TypeError, match=r"scalar argument 'n'"):
        drv.prepare(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 1.5, "f": 1.0}, 8)
    with pytest.raises(_Err, match=r"exceeds the device's maximum 256"):
        drv.prepare(module, "plain", (1,), (257,), {"out": np.zeros(8, np.uint32), "n": 1, "f": 1.0}, 8)
    with pytest.raises(_Err, match=r"grid must be 1-3 non-negative ints, got \(-1,\)"):
        drv.prepare(module, "plain", (-1,), (8,), {"out": np.zeros(8, np.uint32), "n": 1, "f": 1.0}, 8)
    with pytest.raises(LaunchConfigError, match=r"requires workgroup size \(64, 1, 1\)"):
        drv.prepare(module, "fixed", (1,), (32,), {"out": np.zeros(8, np.uint32)}, 8)
    assert drv.prepare(module, "plain", (0,), (8,), {"out": np.zeros(8, np.uint32), "n": 1, "f": 1.0}, 8).empty


def test_target_infos_carry_wave_widths_and_host_memory() -> None:
    from anywave.isa.types import LIMITS
    from anywave.runtime import targets

    emu = targets.get_target("emulator")
    assert emu.info.wave_widths == tuple(LIMITS.wave_widths) and emu.info.host_memory
    assert targets.EmulatorTarget is type(emu)  # the old import path
    info = targets.TargetInfo("x", "d", 64, emu.info.capabilities, 0, 1, (1, 1, 1), (1, 1, 1))
    assert info.wave_widths == (64,) and not info.host_memory
    for st in targets.available_targets():
        for i in st.infos:
            assert i.wave_width in i.wave_widths or not i.wave_widths, st.name


# ------------------------------------------------------------------ HIP on NVIDIA, no GPU

@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> Any:
    from anywave.runtime import cuda

    drv = cuda.FakeDriver()
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    return drv


def test_hip_on_nvidia_marshals_through_the_base(module, fake_cuda) -> None:
    from anywave.runtime import hip_nvidia

    try:
        hip_nvidia.nvrtc_version()
    except hip_nvidia.HipNvidiaError as e:
        pytest.skip(f"no NVRTC here: {e}")
    seen: list[Any] = []

    def on_launch(f: Any, grid: Any, block: Any, shared: int, stream: Any, kp: int) -> None:
        ptrs = (ctypes.c_void_p * 6)(*(ctypes.c_void_p * 6).from_address(kp))
        words = [ctypes.c_uint32.from_address(ptrs[i]).value for i in range(1, 6)]
        seen.append((grid, block, words))

    fake_cuda.on_launch = on_launch
    run = hip_nvidia.HipOnCudaRunner()
    run(module, "plain", (3, 2), (5, 3), {"out": np.zeros(8, np.uint32), "n": 7, "f": 0.1}, 32)
    f_bits = int(np.array(0.1, np.float32).view(np.uint32))
    assert seen == [((3, 2, 1), (15, 1, 1), [7, f_bits, 5, 3, 1])]
    with pytest.raises(LaunchConfigError, match="requires workgroup size"):
        run(module, "fixed", (1,), (32,), {"out": np.zeros(8, np.uint32)}, 32)
    with pytest.raises(hip_nvidia.HipNvidiaError, match=r"missing \['f'\]"):
        run(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 7}, 32)


# ------------------------------------------------------------------ HIP and Metal, no device
#
# Stand-ins for hip-python and PyObjC's Metal that record what a launch passes; the HIP and
# MSL sources are the real backends' (only the vendor compilers are skipped).

class _HipErr(int):
    value = 0


class _FakeHip:
    class hipMemcpyKind:  # noqa: N801 - hip-python's spelling
        hipMemcpyHostToDevice, hipMemcpyDeviceToHost = 1, 2

    class hipDeviceProp_t:  # noqa: N801
        gcnArchName = b"gfx90a:sramecc+:xnack-"
        warpSize = 64
        sharedMemPerBlock = 65536
        maxThreadsPerBlock = 1024
        name = b"fake MI200"
        maxThreadsDim = (1024, 1024, 1024)
        maxGridSize = (2**31 - 1, 65535, 65535)

    def __init__(self) -> None:
        self.launches: list[tuple[Any, ...]] = []
        self.memory: dict[int, bytes] = {}
        self._next = 0x1000

    def hipSetDevice(self, d: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def hipGetDeviceCount(self) -> tuple[int, int]:  # noqa: N802
        return (0, 1)

    def hipGetDeviceProperties(self, props: Any, d: int) -> tuple[int]:  # noqa: N802
        return (0,)

    def hipModuleLoadData(self, code: bytes) -> tuple[int, str]:  # noqa: N802
        return (0, "module")

    def hipModuleGetFunction(self, handle: Any, name: bytes) -> tuple[int, str]:  # noqa: N802
        return (0, name.decode())

    def hipMalloc(self, n: int) -> tuple[int, int]:  # noqa: N802
        self._next += 0x1000
        return (0, self._next)

    def hipMemcpy(self, dst: Any, src: Any, n: int, kind: int) -> tuple[int]:  # noqa: N802
        if kind == 1:
            self.memory[dst] = np.asarray(src).tobytes()[:n]
        else:  # device to host: the bytes written before (the fake kernel writes nothing)
            dst.reshape(-1).view(np.uint8)[:n] = np.frombuffer(self.memory[src], np.uint8)[:n]
        return (0,)

    def hipModuleLaunchKernel(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, *,  # noqa: N802
                              sharedMemBytes: int, stream: Any, kernelParams: Any, extra: Any) -> tuple[int]:  # noqa: N803
        self.launches.append((fn, (gx, gy, gz), (bx, by, bz), [getattr(e, "value", e) for e in extra]))
        return (0,)

    def hipDeviceSynchronize(self) -> tuple[int]:  # noqa: N802
        return (0,)

    def hipFree(self, p: int) -> tuple[int]:  # noqa: N802
        return (0,)


class _FakeRtc:
    def hiprtcCreateProgram(self, *a: Any) -> tuple[int, str]:  # noqa: N802
        return (0, "prog")

    def hiprtcCompileProgram(self, prog: Any, n: int, opts: Any) -> tuple[int]:  # noqa: N802
        return (0,)

    def hiprtcGetCodeSize(self, prog: Any) -> tuple[int, int]:  # noqa: N802
        return (0, 4)

    def hiprtcGetCode(self, prog: Any, buf: Any) -> tuple[int]:  # noqa: N802
        return (0,)


def test_hip_target_marshals_and_pads_through_the_base(module, monkeypatch) -> None:
    from anywave.runtime import hip as hiprt

    fake = _FakeHip()
    monkeypatch.setattr(hiprt, "_import_hip", lambda: (fake, _FakeRtc()))
    t = hiprt.HipTarget()
    assert t.info.wave_widths == (64,) and not t.info.host_memory
    x = np.arange(8, dtype=np.float32)
    t.launch(module, "waves", (2,), (5, 3), {"out": x})
    (fn, grid, block, extra), = fake.launches
    assert grid == (2, 1, 1) and block == (64, 1, 1)  # 15 threads padded to one wave of 64
    assert extra[1:] == [5, 3, 1] and fake.memory[extra[0]] == np.arange(8, dtype=np.float32).tobytes()
    assert np.array_equal(x, np.arange(8, dtype=np.float32))  # copied back (readwrite)
    t.launch(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 9, "f": 2.5})
    assert fake.launches[-1][2] == (8, 1, 1)
    assert fake.launches[-1][3][1:3] == [9, int(np.array(2.5, np.float32).view(np.uint32))]
    with pytest.raises(LaunchConfigError, match="requires workgroup size"):
        t.launch(module, "fixed", (1,), (32,), {"out": np.zeros(8, np.uint32)})
    with pytest.raises(hiprt.HipError, match="W = 64, asked for W = 32"):
        t.launch(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 9, "f": 2.5}, 32)
    assert len(t._programs._by_module) == 1  # one program, one loaded module for every launch


class _Obj:
    """A PyObjC-like object whose selectors are the given callables."""

    def __init__(self, **methods: Any) -> None:
        self.__dict__.update(methods)


def _fake_metal(calls: list[tuple[Any, ...]]) -> Any:
    def buffer(data: bytes, n: int, opts: int) -> Any:
        raw = bytearray(data)
        return _Obj(contents=lambda: _Obj(as_buffer=lambda k: bytes(raw[:k])), raw=raw)

    pso = _Obj(threadExecutionWidth=lambda: 32, maxTotalThreadsPerThreadgroup=lambda: 1024)
    lib = _Obj(newFunctionWithName_=lambda name: name)
    enc = _Obj(setComputePipelineState_=lambda p: None,
               setBuffer_offset_atIndex_=lambda b, o, i: calls.append(("buffer", i, bytes(b.raw))),
               setBytes_length_atIndex_=lambda d, n, i: calls.append(("bytes", i, bytes(d))),
               setThreadgroupMemoryLength_atIndex_=lambda n, i: calls.append(("local", n)),
               dispatchThreadgroups_threadsPerThreadgroup_=lambda g, t: calls.append(("dispatch", g, t)),
               endEncoding=lambda: None)
    cb = _Obj(computeCommandEncoder=lambda: enc, commit=lambda: None, waitUntilCompleted=lambda: None,
              error=lambda: None)
    device = _Obj(newCommandQueue=lambda: _Obj(commandBuffer=lambda: cb), maxThreadgroupMemoryLength=lambda: 32768,
                  name=lambda: "fake Apple GPU", newBufferWithBytes_length_options_=buffer,
                  newLibraryWithSource_options_error_=lambda text, o, e: (lib, None),
                  newComputePipelineStateWithFunction_error_=lambda fn, e: (pso, None))
    opts = _Obj(setLanguageVersion_=lambda v: None, setFastMathEnabled_=lambda v: None)
    return _Obj(MTLCreateSystemDefaultDevice=lambda: device, MTLSizeMake=lambda *s: s,
                MTLCompileOptions=_Obj(alloc=lambda: _Obj(init=lambda: opts)))


def test_metal_target_marshals_and_pads_through_the_base(module, monkeypatch) -> None:
    from anywave.runtime import metal as metalrt

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(metalrt, "_import_metal", lambda: _fake_metal(calls))
    t = metalrt.MetalTarget()
    assert t.info.wave_widths == (32,) and t.info.host_memory
    x = np.arange(8, dtype=np.float32)
    t.launch(module, "waves", (2,), (5, 3), {"out": x})
    assert ("buffer", 0, x.tobytes()) in calls
    assert [c for c in calls if c[0] == "bytes"] == [("bytes", 1 + j, np.uint32(n).tobytes()) for j, n in
                                                    enumerate((5, 3, 1))]
    assert calls[-1] == ("dispatch", (2, 1, 1), (32, 1, 1))  # 15 threads padded to one SIMD-group
    calls.clear()
    t.launch(module, "plain", (1,), (8,), {"out": np.zeros(8, np.uint32), "n": 9, "f": -0.0})
    assert ("bytes", 1, np.uint32(9).tobytes()) in calls and ("bytes", 2, np.float32(-0.0).tobytes()) in calls
    with pytest.raises(LaunchConfigError, match="requires workgroup size"):
        t.launch(module, "fixed", (1,), (32,), {"out": np.zeros(8, np.uint32)})
