"""Loops on Vulkan (issue 31, item 8): a loop that never ends must not "complete".

Mesa's lavapipe ends every invocation's loops after 65535 passes in all (llvmpipe's loop
limiter), silently: a spinning kernel "completed" and ran the code after its loop, and a loop of
70000 turns counted to 65535. On a device with that limit (``VulkanFeatures.loop_limit``) the
SPIR-V keeps the driver's count and the launch raises LoopCutError naming the loop's source
line; kernels within the limit run unchanged. A loop with no way out also gets a side effect, so
no driver may delete it (the C++ dialects' fix of the same hazard)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.backends.spirv import VulkanFeatures, translate
from anywave.backends.spirv_status import LoopCutError
from anywave.emu import emulate

COUNT = """.version 1.0
.kernel cnt
.arg y buffer u32 readwrite
.registers 8
    movi.b32 r1, 0
    movi.b32 r4, 0
    movi.b32 r3, {outer}
    movi.b32 r5, {inner}
    movi.b32 r2, 1
.loc "count.py" 4 5
    loop
        setp.ge.u32 p0, r4, r3
        break p0
        movi.b32 r6, 0
.loc "count.py" 6 9
        loop
            setp.ge.u32 p1, r6, r5
            break p1
            add.i32 r6, r6, r2
            add.i32 r1, r1, r2
        endloop
        add.i32 r4, r4, r2
    endloop
    mov.sr r0, sr_thread_linear_id
    movi.b32 r2, 2
    shl.b32 r0, r0, r2
    st.device.b32 y[r0], r1
    halt
.end
"""

SPIN = """.version 1.0
.kernel spin
.arg y buffer u32 readwrite
.registers 4
    movi.b32 r1, 0
.loc "spin.py" 7 5
    loop
        movi.b32 r2, 1
        add.i32 r1, r1, r2
    endloop
    mov.sr r0, sr_thread_linear_id
    movi.b32 r2, 2
    shl.b32 r0, r0, r2
    movi.b32 r3, 7
    st.device.b32 y[r0], r3
    halt
.end
"""


def _vulkan(W: int = 8):
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        return get_target("vulkan", wave_width=W)
    except TargetUnavailable as e:
        pytest.skip(str(e))


def _limited(t) -> int:
    limit = t.runner.dev.features.loop_limit
    if not limit:
        pytest.skip("this Vulkan driver has no loop limit")
    return limit


@pytest.mark.parametrize(("outer", "inner"), [(1, 70000), (300, 300), (70000, 2)])
def test_a_loop_past_the_drivers_limit_raises(outer: int, inner: int) -> None:
    t = _vulkan()
    _limited(t)
    y = np.zeros(8, np.uint32)
    with pytest.raises(LoopCutError, match=r"count\.py:[46]"):
        t.launch(assemble(COUNT.format(outer=outer, inner=inner), "count.wave"), "cnt", (1,), (8,), {"y": y})


@pytest.mark.parametrize(("outer", "inner"), [(1, 60000), (200, 300), (10000, 2), (3, 5)])
def test_loops_within_the_limit_are_exact(outer: int, inner: int) -> None:
    t = _vulkan()
    m = assemble(COUNT.format(outer=outer, inner=inner), "count.wave")
    y = np.zeros(8, np.uint32)
    t.launch(m, "cnt", (1,), (8,), {"y": y})
    assert np.all(y == outer * inner)  # the count by construction
    if outer * inner < 1000:
        want = np.zeros(8, np.uint32)
        emulate(m, "cnt", grid=1, workgroup=8, args={"y": want}, wave_width=8)
        np.testing.assert_array_equal(y, want)


_CHILD = textwrap.dedent("""
    import sys, numpy as np
    import anywave.runtime.vulkan as vkrt
    from anywave.asm import assemble
    from anywave.runtime.targets import get_target, TargetUnavailable
    vkrt.FENCE_TIMEOUT_NS = 5 * 10**9  # a device without the loop limit: the launch budget reports it
    try:
        t = get_target("vulkan", wave_width=8)
    except TargetUnavailable as e:
        print("UNAVAILABLE", e, flush=True); sys.exit(0)
    y = np.zeros(8, np.uint32)
    try:
        t.launch(assemble(open(sys.argv[1]).read(), "spin.wave"), "spin", (1,), (8,), {"y": y})
        print("COMPLETED", y.tolist(), flush=True)
    except Exception as e:
        print("RAISED", type(e).__name__, e, flush=True)
    import os; os._exit(0)
""")


def test_a_spinning_kernel_never_completes(tmp_path: Path) -> None:
    (tmp_path / "spin.wave").write_text(SPIN)
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    try:
        r = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(tmp_path / "spin.wave")],
                           capture_output=True, text=True, env=env, timeout=240)
    except subprocess.TimeoutExpired:
        return  # it spins: never completing is what the spec says
    out = r.stdout.strip()
    if out.startswith("UNAVAILABLE"):
        pytest.skip(out)
    assert out.startswith("RAISED"), (out, r.stderr[-2000:])
    assert ("LoopCutError" in out and "spin.py:7" in out) or "did not finish" in out, out


def test_a_loop_with_no_way_out_gets_a_side_effect() -> None:
    if shutil.which("spirv-dis") is None:
        pytest.skip("spirv-dis is not installed")
    spin = translate(assemble(SPIN, "spin.wave"), 8, VulkanFeatures()).text
    ends = translate(assemble(COUNT.format(outer=2, inner=2), "c.wave"), 8, VulkanFeatures()).text
    assert "aw_loop_turns" in spin and "Volatile" in spin
    assert "aw_loop_turns" not in ends and "Volatile" not in ends


def test_devices_without_a_limit_get_no_status_record() -> None:
    m = assemble(COUNT.format(outer=2, inner=2), "c.wave")
    assert not translate(m, 8, VulkanFeatures()).kernels["cnt"].status
    assert translate(m, 8, VulkanFeatures(loop_limit=65535)).kernels["cnt"].status
