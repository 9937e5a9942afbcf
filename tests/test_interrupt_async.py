"""Ctrl-C while waiting on an asynchronous launch (issue 31, item 7): a kernel that never ends,
enqueued on OpenCL or SYCL device arrays without waiting (unchecked: a checked launch is
synchronous), then waited for by ``aw.synchronize()`` or ``.numpy()``. A SIGINT must raise
KeyboardInterrupt in the waiting process, which then exits. The same when the KeyboardInterrupt
comes before any wait began (CI once caught a SIGINT landing between ``.numpy()`` and its wait:
the process then hung in the runtime's exit-time destructors), and when the program simply ends
with the kernel still running: it says it waits, and a Ctrl-C then ends it. And after an
interrupted wait, the next launch on that queue is refused at once (it would wait behind the
kernel for ever); there a timer raises the interrupt inside the wait, so the signal cannot land
before the wait began (a race the parent's SIGINT after READY would have). Before the fix the wait blocked inside
the driver (``clFinish`` / ``queue::wait``) where Python never runs its signal handler: only
``kill -9`` ended it.

Runs in a child process; the parent's timeout only detects a hang (the child is killed then)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
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
    import signal, sys, numpy as np
    # a child of a non-interactive shell's background job inherits SIGINT ignored: take Python's handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
        if how == "relaunch":  # the interrupt must land inside the wait: a timer raises it there
            def alarm(*_):
                raise KeyboardInterrupt
            signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            aw.synchronize()
        elif how == "synchronize":
            aw.synchronize()
        elif how == "numpy":
            y.numpy()
        elif how == "before-wait":
            raise KeyboardInterrupt  # as if the SIGINT came before the wait began
        else:  # "exit": the program ends with the kernel still running
            sys.exit(0)
        print("RETURNED", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        if how == "relaunch":  # the queue still runs the kernel: the next command must not wait behind it
            try:
                t.launch(m, "spin", (1,), (8,), {"y": np.zeros(8, np.uint32)}, check=False)
                print("RAN", flush=True)
            except Exception as e:
                print("REFUSED", type(e).__name__, str(e)[:300], flush=True)
            sys.exit(0)
        raise
""")


def _line(f: object) -> str:
    """One line read from an unbuffered pipe, without reading past it ('' at end of file)."""
    got = bytearray()
    while not got.endswith(b"\n"):
        b = os.read(f.fileno(), 1)  # type: ignore[attr-defined]
        if not b:
            break
        got += b
    return got.decode(errors="replace")


@pytest.mark.parametrize("how", ["synchronize", "numpy", "before-wait", "exit", "relaunch"])
@pytest.mark.parametrize("target", ["opencl", "sycl"])
def test_sigint_interrupts_a_wait_on_an_async_launch(target: str, how: str, tmp_path: Path) -> None:
    (tmp_path / "spin.wave").write_text(SPIN)
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = env.get("PYTHONPATH") or str(Path(__file__).resolve().parents[1] / "src")
    env.pop("ANYWAVE_CHECK", None)
    p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), target, str(tmp_path / "spin.wave"), how],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=env)
    try:
        # unbuffered, a byte at a time: a buffered readline could swallow what follows READY,
        # which communicate() then never sees
        first = _line(p.stdout)
        if first.startswith("UNAVAILABLE"):
            p.communicate(timeout=60)
            pytest.skip(first.strip())
        said_early = p.stderr.read().decode(errors="replace") if p.poll() is not None else ""
        assert first.strip() == "READY", (first, said_early)
        if how == "exit":  # the exit hook says it waits before the signal is sent
            guard = threading.Timer(600, p.kill)
            guard.start()
            try:
                said = _line(p.stderr)
                while said and "waiting for the work enqueued on" not in said:  # a runtime's own notes first
                    said = _line(p.stderr)
            finally:
                guard.cancel()
            assert "waiting for the work enqueued on" in said, said
        # whether the signal comes before or inside the wait, a KeyboardInterrupt must follow: a
        # handler's flag set just before a blocking driver call is only acted on when it returns
        if how not in ("before-wait", "relaunch"):  # (there the child raises KeyboardInterrupt itself)
            p.send_signal(signal.SIGINT)
        outb, errb = p.communicate(timeout=600)  # a hang guard (a loaded machine took >120 s once)
        out, err = outb.decode(errors="replace"), errb.decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{target}/{how}: SIGINT did not end the wait (the process hung until killed)")
    assert "RETURNED" not in out
    if how == "relaunch":  # refused at once, naming the interrupted command; the exit then does not wait
        assert "INTERRUPTED" in out and "REFUSED" in out and "still runs" in out, (out, err[-2000:])
        assert "RAN" not in out
        assert p.returncode == 130 and "exiting without waiting" in err, (p.returncode, err[-2000:])
        return
    if how == "exit":
        assert "exiting without waiting" in err, err[-2000:]
        assert p.returncode == 130, (p.returncode, err[-2000:])
        return
    assert "INTERRUPTED" in out, (out, err[-2000:])
    assert "KeyboardInterrupt" in err
    assert p.returncode != 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_exits_with_its_own_status(tmp_path: Path) -> None:
    # the parent recorded a command still running (so its own exit would end at once, 130); a
    # child forked from it inherits the record and the exit hook, and must exit as it asked (0)
    script = tmp_path / "fork_exit.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from anywave.runtime import interrupt
        interrupt.abandon("a kernel that never ends", lambda: True)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        sys.exit(0)
    """))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert "child 0" in r.stdout, (r.stdout, r.stderr)
    assert r.returncode == 130 and "still running" in r.stderr, (r.returncode, r.stderr)  # the parent's own exit
