"""Ctrl-C while waiting on an asynchronous launch (issue 31, item 7): a kernel that never ends,
enqueued on OpenCL or SYCL device arrays without waiting (unchecked: a checked launch is
synchronous), then waited for by ``aw.synchronize()`` or ``.numpy()``. A SIGINT must raise
KeyboardInterrupt in the waiting process, which then exits. Before the fix the wait blocked inside
the driver (``clFinish`` / ``queue::wait``) where Python never runs its signal handler: only
``kill -9`` ended it.

Runs in a child process; the parent's timeout only detects a hang (the child is killed then)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
    halt
.end
"""

_CHILD = textwrap.dedent("""
    import sys, numpy as np
    import anywave as aw
    from anywave.asm import assemble
    from anywave.runtime.targets import get_target, TargetUnavailable
    target, how = sys.argv[1], sys.argv[3]
    try:
        t = get_target(target, wave_width=8)
    except TargetUnavailable as e:
        print("UNAVAILABLE", e, flush=True); sys.exit(0)
    m = assemble(open(sys.argv[2]).read(), "spin.wave")
    y = aw.zeros(8, np.uint32, target=target)
    t.launch(m, "spin", (1,), (8,), {"y": y}, sync=False, check=False)  # only enqueued
    try:
        print("READY", flush=True)
        if how == "synchronize":
            aw.synchronize()
        else:
            y.numpy()
        print("RETURNED", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        raise
""")


@pytest.mark.parametrize("how", ["synchronize", "numpy"])
@pytest.mark.parametrize("target", ["opencl", "sycl"])
def test_sigint_interrupts_a_wait_on_an_async_launch(target: str, how: str, tmp_path: Path) -> None:
    (tmp_path / "spin.wave").write_text(SPIN)
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = env.get("PYTHONPATH") or str(Path(__file__).resolve().parents[1] / "src")
    env.pop("ANYWAVE_CHECK", None)
    p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), target, str(tmp_path / "spin.wave"), how],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = p.stdout.readline()
        if first.startswith("UNAVAILABLE"):
            p.communicate(timeout=60)
            pytest.skip(first.strip())
        assert first.strip() == "READY", (first, p.stderr.read() if p.poll() is not None else "")
        # whether the signal comes before or inside the wait, a KeyboardInterrupt must follow: a
        # handler's flag set just before a blocking driver call is only acted on when it returns
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=600)  # a hang guard (a loaded machine took >120 s once)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{target}/{how}: SIGINT did not end the wait (the process hung until killed)")
    assert "INTERRUPTED" in out, (out, err[-2000:])
    assert "RETURNED" not in out
    assert "KeyboardInterrupt" in err
    assert p.returncode != 0
