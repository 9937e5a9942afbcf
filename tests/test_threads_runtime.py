"""Launches from several Python threads (issue 31, item 3), with real threads.

* One kernel launched from 8 threads at once on OpenCL: each thread's launch must run with its
  own arguments (the shared ``cl.Kernel`` object holds set arguments until the enqueue; before
  the fix a launch could run with another thread's buffers, leaving outputs unwritten).
* The first launches of a fresh process made from several threads at once must all find their
  target (the registry was marked loaded before it was filled: "unknown target").

Each thread's expected output is computed independently here with NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import anywave as aw


def _need(name: str) -> None:
    from anywave.runtime.targets import target_status

    st = target_status(name)
    if st is None or not st.available:
        pytest.skip(f"{name} unavailable: {None if st is None else st.reason}")


@aw.kernel
def scale_add(x: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, b: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + b


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("target", ["opencl", "sycl"])
def test_one_kernel_from_many_threads(target: str, check: bool) -> None:
    _need(target)
    n, threads, rounds = 257, 8, 60
    scale_add(np.zeros(n, np.float32), np.zeros(n, np.float32), 1.0, 0.0, n, grid=5, workgroup=64,
              target=target, check=check)  # built once before the race
    failures: list[str] = []
    start = threading.Barrier(threads)
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: inside the set-args/enqueue window too

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        start.wait()
        for r in range(rounds):
            x = rng.standard_normal(n).astype(np.float32)
            out = np.full(n, np.nan, np.float32)
            a, b = np.float32(t + 1), np.float32(r)
            try:
                scale_add(x, out, a, b, n, grid=5, workgroup=64, target=target, check=check)
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(f"thread {t} round {r}: {type(e).__name__}: {e}")
                return
            want = a * x + b
            if not np.array_equal(out, want):
                bad = int(np.count_nonzero(out != want))
                failures.append(f"thread {t} round {r}: {bad} of {n} outputs differ")
                return

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    try:
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert not failures, failures[:5]


CHILD = textwrap.dedent('''
    import sys, threading
    import numpy as np
    import anywave as aw

    @aw.kernel
    def fill(out: aw.Out[aw.i32], v: aw.i32, n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = v

    target = sys.argv[1]
    errors, outs = [], {}
    start = threading.Barrier(6)

    def work(t):
        start.wait()
        out = np.zeros(16, np.int32)
        try:
            fill(out, t, 16, grid=1, workgroup=16, target=target)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
        outs[t] = out

    ts = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in ts: t.start()
    for t in ts: t.join()
    print("ERRORS", len(errors), errors[:2])
    print("RIGHT", sum(int((outs[t] == t).all()) for t in outs))
''')


@pytest.mark.parametrize("target", ["emulator", "opencl"])
def test_first_launches_from_many_threads(tmp_path, target: str) -> None:
    if target != "emulator":
        _need(target)
    script = tmp_path / "threads_child.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    env.pop("ANYWAVE_TARGET", None)
    for _ in range(3):  # a fresh process each time: the race is at the registry's first use
        r = subprocess.run([sys.executable, str(script), target], capture_output=True, text=True, env=env,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "ERRORS 0 []" in r.stdout and "RIGHT 6" in r.stdout, r.stdout + r.stderr[-2000:]
