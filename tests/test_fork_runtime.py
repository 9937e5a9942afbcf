"""Forked children of a process that used a compiled runtime (issue 31, item 15): the OpenCL,
SYCL and Vulkan CPU runtimes keep worker threads and driver state that ``fork`` does not copy, so
a child's first launch on a device its parent started hung forever. Now it fails at once with an
error that says to use the 'spawn' start method; targets the parent never started (the emulator
here) still work in the child.

Runs the experiment in a child process (which forks a grandchild through multiprocessing's 'fork'
context); the timeouts only detect a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent('''
    import multiprocessing as mp, sys
    import numpy as np
    import anywave as aw

    @aw.kernel
    def fill(out: aw.Out[aw.i32], v: aw.i32, n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = v

    def work(target, device_array, q):
        try:
            out = np.zeros(8, np.int32)
            fill(out, 5, 8, grid=1, workgroup=8, target="emulator")
            q.put(("EMU", out.tolist()))
            if device_array:
                a = aw.zeros(8, np.int32, target=target)
                fill(a, 7, 8, grid=1, workgroup=8, target=target)
                q.put(("OK", a.numpy().tolist()))
            else:
                fill(out, 7, 8, grid=1, workgroup=8, target=target)
                q.put(("OK", out.tolist()))
        except Exception as e:
            q.put(("ERR", f"{type(e).__name__}: {e}"))

    target, device_array = sys.argv[1], sys.argv[2] == "device"
    out = np.zeros(8, np.int32)
    fill(out, 3, 8, grid=1, workgroup=8, target=target)  # the parent starts the runtime
    print("PARENT", out.tolist(), flush=True)
    keep = aw.zeros(8, np.int32, target=target) if device_array and target != "vulkan" else None
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=work, args=(target, device_array and target != "vulkan", q))
    p.start()
    p.join(120)
    if p.is_alive():
        p.kill()
        print("HUNG", flush=True)
    else:
        while not q.empty():
            print(*q.get(), flush=True)
        print("EXIT", p.exitcode, flush=True)
''')


@pytest.mark.parametrize("kind", ["host", "device"])
@pytest.mark.parametrize("target", ["opencl", "sycl", "vulkan"])
def test_forked_child_fails_at_once(tmp_path, target: str, kind: str) -> None:
    from anywave.runtime.targets import target_status

    st = target_status(target)
    if st is None or not st.available:
        pytest.skip(f"{target} unavailable: {None if st is None else st.reason}")
    if target == "vulkan" and kind == "device":
        pytest.skip("vulkan has no device arrays")
    script = tmp_path / "fork_child.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(script), target, kind], capture_output=True, text=True, env=env,
                       timeout=600)
    out = r.stdout
    assert "PARENT [3, 3, 3, 3, 3, 3, 3, 3]" in out, out + r.stderr[-3000:]
    assert "HUNG" not in out, out
    assert "EMU [5, 5, 5, 5, 5, 5, 5, 5]" in out, out + r.stderr[-3000:]
    errs = [ln for ln in out.splitlines() if ln.startswith("ERR ")]
    assert errs, out + r.stderr[-3000:]
    assert "'spawn'" in errs[0] and "fork" in errs[0], errs[0]
    assert "EXIT 0" in out, out


def test_forked_child_runs_the_cpu_target(tmp_path) -> None:
    """The cpu target's worker pool is rebuilt in a forked child (pthread_atfork), so a child of a
    parent that launched on it launches there too, with the parent's compiled plan."""
    from anywave.runtime.targets import target_status

    st = target_status("cpu")
    if st is None or not st.available:
        pytest.skip(f"cpu unavailable: {None if st is None else st.reason}")
    script = tmp_path / "fork_child.py"
    script.write_text(CHILD)
    r = subprocess.run([sys.executable, str(script), "cpu", "host"], capture_output=True, text=True,
                       env=dict(os.environ), timeout=600)
    out = r.stdout
    assert "PARENT [3, 3, 3, 3, 3, 3, 3, 3]" in out, out + r.stderr[-3000:]
    assert "HUNG" not in out, out
    assert "OK [7, 7, 7, 7, 7, 7, 7, 7]" in out, out + r.stderr[-3000:]
    assert "EXIT 0" in out, out


CHILD_LOOP = textwrap.dedent('''
    import multiprocessing as mp, threading
    import numpy as np
    import anywave as aw

    @aw.kernel
    def tri(out: aw.Out[aw.i32], n: aw.i32):
        i = aw.global_id(0)
        s = 0
        for j in range(i):  # a loop: the launch runs on the pool's threads only
            s += j
        if i < n:
            out[i] = s

    def work(q):
        try:
            out = np.zeros(64, np.int32)
            tri(out, 64, grid=4, workgroup=16, target="cpu")
            q.put(("OK", int(out.sum())))
        except Exception as e:
            q.put(("ERR", f"{type(e).__name__}: {e}"))

    out = np.zeros(64, np.int32)
    tri(out, 64, grid=4, workgroup=16, target="cpu")  # the parent starts the pool
    print("PARENT", int(out.sum()), flush=True)
    # another thread holds the launch lock at the fork: the child must not inherit it held
    lock = aw.runtime.cpu.get_device()._launch_lock
    lock.acquire()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=work, args=(q,))
    p.start()
    lock.release()
    p.join(120)
    if p.is_alive():
        p.kill()
        print("HUNG", flush=True)
    else:
        while not q.empty():
            print(*q.get(), flush=True)
        print("EXIT", p.exitcode, flush=True)
''')


def test_forked_child_runs_a_loop_kernel_on_the_cpu_target(tmp_path) -> None:
    """A kernel with a loop runs on the pool's threads only; a forked child starts its own pool
    (the parent's threads do not exist there) and gets fresh locks (one held in the parent at
    the fork stays held in the child otherwise). Hostile test: the child hung for good."""
    from anywave.runtime.targets import target_status

    st = target_status("cpu")
    if st is None or not st.available:
        pytest.skip(f"cpu unavailable: {None if st is None else st.reason}")
    script = tmp_path / "fork_loop.py"
    script.write_text(CHILD_LOOP)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ),
                       timeout=600)
    want = sum(sum(range(i)) for i in range(64))
    out = r.stdout
    assert f"PARENT {want}" in out, out + r.stderr[-3000:]
    assert "HUNG" not in out, out
    assert f"OK {want}" in out and "EXIT 0" in out, out + r.stderr[-3000:]
