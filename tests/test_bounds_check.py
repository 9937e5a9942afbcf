"""Bounds-checked builds of the compiled targets (issue 11, item 6): an out-of-bounds access on
OpenCL or SYCL raises OutOfBoundsError in the launching process, naming the kernel, argument,
byte offset, size and source line, instead of corrupting memory or killing the process. The
expected offsets are worked out from the kernels below by hand; the emulator (which always
checks) must agree on the error class."""

from __future__ import annotations

import numpy as np
import pytest

import tiers
from anywave.asm import assemble
from anywave.backends import opencl as ocl_backend
from anywave.emu import emulate
from anywave.errors import EmulationError, OutOfBoundsError

WIDTHS = [8, 16, 32, 64]

SAXPY = """.version 1.0
.kernel saxpy
.arg a scalar f32
.arg x buffer f32 read
.arg y buffer f32 readwrite
.arg n scalar u32
.registers 8
    mov.sr        r0, sr_global_id_x
    ldarg.b32     r1, n
    setp.ge.u32   p0, r0, r1
    halt          p0
    movi.b32      r2, 2
    shl.b32       r3, r0, r2
    ldarg.b32     r4, a
    ld.device.b32 r5, x[r3]
.loc "saxpy.py" 9 5
    ld.device.b32 r6, y[r3]
    fma.f32       r7, r4, r5, r6
    st.device.b32 y[r3], r7
    halt
.end
"""

# every lane writes out[i]; lane i also does a wave shuffle (a wave kernel: mask-stack lowering)
WAVE_STORE = """.version 1.0
.kernel wstore
.arg out buffer u32 write
.registers 8
    mov.sr r0, sr_global_id_x
    mov.sr r1, sr_lane_id
    shfl.idx.b32 r2, r0, r1
    movi.b32 r3, 2
    shl.b32 r4, r2, r3
.loc "wstore.py" 4 9
    st.device.b32 out[r4], r2
    halt
.end
"""

LOCAL = """.version 1.0
.kernel loc
.arg out buffer u32 write
.registers 8
.local_memory 64
    mov.sr r0, sr_thread_linear_id
    movi.b32 r3, 2
    shl.b32 r4, r0, r3
.loc "loc.py" 3 5
    st.local.b32 [r4], r0
    halt
.end
"""


#: one module holding the three kernels: one checked and one plain build per target and W
ALL = SAXPY + "\n" + WAVE_STORE.replace(".version 1.0\n", "") + "\n" + LOCAL.replace(".version 1.0\n", "")


def _target(name: str, w: int):
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        return get_target(name, wave_width=w)
    except TargetUnavailable as e:
        pytest.skip(str(e))
    except ValueError as e:  # W not offered by the device
        pytest.skip(str(e))


#: every target at every W: each target's default-tier W in the default tier, the rest in the
#: sweep tier (SYCL builds take ~10 s each)
CASES = tiers.cases([(name, w) for name in ("opencl", "sycl") for w in WIDTHS])


@pytest.mark.parametrize("name,w", CASES)
def test_too_small_buffer_raises_and_process_survives(name: str, w: int) -> None:
    t = _target(name, w)
    m = assemble(ALL, "all.wave")
    n = 3 * w + 1
    x = np.ones(n, np.float32)
    y = np.ones(2 * w, np.float32)  # too small: lanes 2w .. n-1 read and write past its end
    with pytest.raises(OutOfBoundsError) as ei:
        t.launch(m, "saxpy", (1,), (4 * w,), {"a": 2.0, "x": x, "y": y, "n": n}, check=True)
    msg = str(ei.value)
    assert "'saxpy'" in msg and "argument 'y'" in msg and f"{y.nbytes} bytes" in msg
    # the first failure is the load of some lane >= 2w: offset 4*i for i in [2w, n)
    off = int(msg.split("byte offset ")[1].split()[0])
    assert off % 4 == 0 and y.nbytes <= off < 4 * n
    assert ("saxpy.py:9" in msg) or ("st.device" in msg)
    # the in-bounds lanes still computed: y = 2 * 1 + 1
    assert np.all(y == 3.0)
    # the process and the device survive: a correct launch works afterwards
    y2 = np.ones(n, np.float32)
    t.launch(m, "saxpy", (1,), (4 * w,), {"a": 2.0, "x": x, "y": y2, "n": n}, check=True)
    assert np.all(y2 == 3.0)
    # and so does an unchecked launch of the same module (a separate, cached build; OpenCL only:
    # one more SYCL build costs ~10 s)
    if name != "opencl":
        return
    y3 = np.ones(n, np.float32)
    t.launch(m, "saxpy", (1,), (4 * w,), {"a": 2.0, "x": x, "y": y3, "n": n}, check=False)
    assert np.all(y3 == 3.0)


@pytest.mark.parametrize("name,w", CASES)
def test_wave_kernel_store_and_local_memory(name: str, w: int) -> None:
    t = _target(name, w)
    m = assemble(ALL, "all.wave")
    out = np.zeros(w, np.uint32)  # one wave fits; the second wave stores past the end
    with pytest.raises(OutOfBoundsError, match=r"argument 'out'.*4-byte store.*wstore.py:4"):
        t.launch(m, "wstore", (1,), (2 * w,), {"out": out}, check=True)
    assert np.array_equal(out, np.arange(w, dtype=np.uint32))
    with pytest.raises(OutOfBoundsError, match=r"local memory byte offset \d+ .*64 bytes.*loc.py:3"):
        t.launch(m, "loc", (1,), (32,), {"out": np.zeros(4, np.uint32)}, check=True)


@pytest.mark.parametrize("name", ["opencl", "sycl"])
def test_anywave_check_env_is_the_default(name: str, monkeypatch) -> None:
    t = _target(name, 8 if name == "sycl" else 16)
    m = assemble(ALL, "all.wave")
    monkeypatch.setenv("ANYWAVE_CHECK", "1")
    with pytest.raises(OutOfBoundsError):
        t.launch(m, "wstore", (1,), (32,), {"out": np.zeros(4, np.uint32)})


def test_emulator_raises_the_same_class() -> None:
    m = assemble(SAXPY, "saxpy.wave")
    with pytest.raises(OutOfBoundsError) as ei:
        emulate(m, "saxpy", grid=1, workgroup=32, wave_width=8,
                args={"a": 2.0, "x": np.ones(32, np.float32), "y": np.ones(8, np.float32), "n": 32})
    assert isinstance(ei.value, EmulationError)


def test_checked_build_is_separate_and_plain_build_unchanged() -> None:
    m = assemble(SAXPY, "saxpy.wave")
    plain = ocl_backend.translate(m, 16)
    checked = ocl_backend.translate(m, 16, checked=True)
    assert "aw_err" not in plain.text and "awg_n1" not in plain.text
    assert "aw_err" in checked.text and "awg_n1" in checked.text and "awg_n2" in checked.text
    info = checked.kernels["saxpy"]
    assert info.checked and len(info.sites) == 3  # two loads and a store
    assert [s.ins.mnemonic for s in info.sites] == ["ld.device.b32", "ld.device.b32", "st.device.b32"]
    assert not plain.kernels["saxpy"].checked


@pytest.mark.parametrize("backend", ["sycl", "hip", "metal"])
def test_other_dialects_render_checked(backend: str) -> None:
    import importlib

    mod = importlib.import_module(f"anywave.backends.{backend}")
    m = assemble(WAVE_STORE, "w.wave")
    prog = mod.translate(m, 32, checked=True) if backend != "metal" else mod.translate(m, checked=True)
    assert "aw_err" in prog.text


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_checked_ptx_assembles_with_ptxas(arch: str, tmp_path) -> None:
    import shutil
    import subprocess

    from anywave.backends import ptx

    m = assemble(ALL, "all.wave")
    plain = ptx.translate(m, arch)
    prog = ptx.translate(m, arch, checked=True)
    assert "__wa_err" not in plain.text and "__wa_err" in prog.text
    k = prog.kernels["saxpy"]
    assert k.checked and [s.ins.mnemonic for s in k.sites] == ["ld.device.b32", "ld.device.b32", "st.device.b32"]
    assert prog.kernels["loc"].sites[0].ins.loc.line == 3
    exe = shutil.which("ptxas")
    if exe is None:
        pytest.skip("ptxas not installed")
    src = tmp_path / "k.ptx"
    src.write_text(prog.text)
    r = subprocess.run([exe, f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.cuda
def test_cuda_bounds_checked_launch() -> None:
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        t = get_target("cuda")
    except TargetUnavailable as e:
        pytest.skip(str(e))
    m = assemble(ALL, "all.wave")
    n = 97
    x = np.ones(n, np.float32)
    y = np.ones(64, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"argument 'y' byte offset \d+ \(4-byte load; 256 bytes"):
        t.launch(m, "saxpy", (1,), (128,), {"a": 2.0, "x": x, "y": y, "n": n}, check=True)
    assert np.all(y == 3.0)
    y2 = np.ones(n, np.float32)
    t.launch(m, "saxpy", (1,), (128,), {"a": 2.0, "x": x, "y": y2, "n": n}, check=True)
    assert np.all(y2 == 3.0)
    with pytest.raises(OutOfBoundsError, match=r"local memory.*loc.py:3"):
        t.launch(m, "loc", (1,), (32,), {"out": np.zeros(4, np.uint32)}, check=True)


@pytest.mark.cuda
def test_hip_on_nvidia_bounds_checked_launch() -> None:
    from anywave.runtime import hip_nvidia

    try:
        run = hip_nvidia.HipOnCudaRunner()
    except Exception as e:  # noqa: BLE001 - no GPU / NVRTC here
        pytest.skip(f"HIP on NVIDIA unavailable: {e}")
    m = assemble(ALL, "all.wave")
    n = 97
    x = np.ones(n, np.float32)
    y = np.ones(64, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"HIP on NVIDIA.*argument 'y' .*256 bytes"):
        run(m, "saxpy", (1,), (128,), {"a": 2.0, "x": x, "y": y, "n": n}, 32, check=True)
    assert np.all(y == 3.0)
