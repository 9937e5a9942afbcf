"""Out-of-bounds accesses on Vulkan (issue 31, item 1).

``check=True`` runs the bounds-checked SPIR-V build: every device and local access is guarded,
the first failure is recorded in the kernel's status record and the launch raises
OutOfBoundsError naming the buffer, the byte offset and the source line, as on OpenCL/SYCL.
Unchecked builds: lavapipe bounds storage buffers itself, but its workgroup memory is host
memory it does not bound (an overrun killed the process with SIGSEGV), so on such a device
(``VulkanFeatures.guard_local``) local accesses are guarded in every build."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import emulate
from anywave.errors import OutOfBoundsError

DEV = """.version 1.0
.kernel oob
.arg x buffer u32 read
.arg y buffer u32 readwrite
.registers 6
    mov.sr r0, sr_global_id_x
    movi.b32 r2, {skew}
    add.i32 r4, r0, r2
    movi.b32 r2, 2
    shl.b32 r4, r4, r2
    shl.b32 r5, r0, r2
.loc "oob.py" 8 5
    ld.device.b32 r1, x[r4+0]
    movi.b32 r3, 1
    add.i32 r1, r1, r3
.loc "oob.py" 9 5
    st.device.b32 y[r5+0], r1
    halt
.end
"""

LOCAL = """.version 1.0
.kernel oobl
.arg y buffer u32 readwrite
.registers 4
.local_memory 64
    mov.sr r0, sr_thread_linear_id
    movi.b32 r2, {skew}
    add.i32 r0, r0, r2
    movi.b32 r2, 2
    shl.b32 r0, r0, r2
    movi.b32 r3, 0x41414141
.loc "oobl.py" 9 5
    st.local.b32 [r0], r3
    halt
.end
"""


def _vulkan():
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        return get_target("vulkan", wave_width=8)
    except TargetUnavailable as e:
        pytest.skip(str(e))


def test_checked_launch_names_buffer_offset_and_line() -> None:
    t = _vulkan()
    n = 64
    x = np.arange(n, dtype=np.uint32) * 3
    y = np.zeros(n, np.uint32)
    # thread i reads x[i + 8]: threads 56.. read past x's 256 bytes, the first at byte 256
    with pytest.raises(OutOfBoundsError) as ei:
        t.launch(assemble(DEV.format(skew=8), "oob.wave"), "oob", (1,), (n,), {"x": x, "y": y}, check=True)
    msg = str(ei.value)
    assert "argument 'x'" in msg and "oob.py:8" in msg and "4-byte load" in msg, msg
    off = int(msg.split("byte offset ")[1].split()[0])
    assert 256 <= off < 256 + 8 * 4 and off % 4 == 0, msg
    # in-bounds lanes ran; the skipped loads gave 0 (so 1 was stored), as the emulator's spec says
    want = np.where(np.arange(n) + 8 < n, x[np.minimum(np.arange(n) + 8, n - 1)] + 1, 1).astype(np.uint32)
    np.testing.assert_array_equal(y, want)


def test_checked_launch_in_bounds_matches_the_emulator() -> None:
    t = _vulkan()
    n = 64
    x = np.arange(n, dtype=np.uint32) * 7
    m = assemble(DEV.format(skew=0), "ok.wave")
    got, want = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    t.launch(m, "oob", (1,), (n,), {"x": x, "y": got}, check=True)
    emulate(m, "oob", grid=1, workgroup=n, args={"x": x, "y": want}, wave_width=8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, x + 1)


def test_checked_local_overrun_is_reported() -> None:
    t = _vulkan()
    with pytest.raises(OutOfBoundsError, match=r"local memory byte offset 64 .*oobl\.py:9"):
        t.launch(assemble(LOCAL.format(skew=16), "oobl.wave"), "oobl", (1,), (8,), {"y": np.zeros(8, np.uint32)},
                 check=True)


_CHILD = textwrap.dedent("""
    import sys, numpy as np
    from anywave.asm import assemble
    from anywave.runtime.targets import get_target, TargetUnavailable
    try:
        t = get_target("vulkan", wave_width=8)
    except TargetUnavailable as e:
        print("UNAVAILABLE", e, flush=True); sys.exit(0)
    try:
        t.launch(assemble(open(sys.argv[1]).read(), "oobl.wave"), "oobl", (4,), (64,),
                 {"y": np.zeros(8, np.uint32)}, check=False)
        print("COMPLETED", flush=True)
    except Exception as e:
        print("RAISED", type(e).__name__, e, flush=True)
    import gc; gc.collect()
    print("ALIVE", flush=True)
""")


@pytest.mark.parametrize("skew", [16, 100_000, 100_000_000])
def test_unchecked_local_overrun_never_kills_the_process(skew: int, tmp_path: Path) -> None:
    (tmp_path / "oobl.wave").write_text(LOCAL.format(skew=skew))
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("ANYWAVE_CHECK", None)
    r = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(tmp_path / "oobl.wave")],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.stdout.startswith("UNAVAILABLE"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and "ALIVE" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    from anywave.runtime.vulkan import get_device

    if get_device().features.guard_local:  # lavapipe: reported, not only survived
        assert "RAISED OutOfBoundsError" in r.stdout and "oobl.py:9" in r.stdout, r.stdout
