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
    with pytest.raises(_Err, match=r"non-negative / positive"):
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
