"""Vulkan device arrays under hostile use (issue 31: nothing a user does kills, hangs or silently
corrupts the process): freed arrays, fork after Vulkan use, Ctrl-C while waiting, a wait that
was interrupted in the middle of a staged launch, a wedged device, kernels without bounds checks,
thousands of launches without synchronising, Python objects. Whatever can crash runs in a child
process with a timeout. Found by ``bench/hostile_vulkan.py``. Skips when Vulkan is missing."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import anywave as aw
from anywave.errors import WaveError

pytestmark = pytest.mark.vulkan

KERNELS = '''
import os, sys, time
import numpy as np
import anywave as aw
from anywave.errors import WaveError
from anywave.runtime import vulkan
V = "vulkan"
FOREVER_GRID = (64, 1024)  # see forever()

@aw.kernel
def accumulate(x: aw.In[aw.f32], acc: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        acc[i] = acc[i] + x[i]

@aw.kernel
def nocheck(x: aw.In[aw.f32], out: aw.Out[aw.f32], k: aw.i32):
    i = aw.global_id(0)
    out[i * k] = x[i * k] + 1.0

@aw.kernel
def forever(flag: aw.In[aw.i32], out: aw.Buffer[aw.i32]):
    i = aw.global_id(0)
    # lavapipe stops a shader's loops after 65535 turns in all (gallivm's loop limiter): launched
    # over a large grid (FOREVER_GRID), 65535 contended atomics per lane run for hours
    while flag[0] == 0:
        aw.atomic_add(out, i % 64, 1)
'''


@aw.kernel
def accumulate(x: aw.In[aw.f32], acc: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        acc[i] = acc[i] + x[i]


@pytest.fixture(scope="module")
def dev():  # noqa: ANN201
    from anywave.runtime import vulkan

    ok, why = vulkan.status()
    if not ok:
        pytest.skip(f"Vulkan unavailable: {why}")
    return vulkan.get_device()


def _child(tmp_path, body: str, timeout: int = 300, sigint_on: str | None = None) -> subprocess.CompletedProcess:  # noqa: ANN001
    script = tmp_path / "child.py"
    script.write_text(KERNELS + textwrap.dedent(body))
    env = dict(os.environ, ANYWAVE_CACHE_DIR=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    if sigint_on is None:
        return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                              timeout=timeout)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        # a hang guard, not a budget: a child that never announces itself is killed below
        first = p.stdout.readline() if select.select([p.stdout], [], [], timeout)[0] else ""
        if sigint_on in first:
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return subprocess.CompletedProcess(p.args, p.returncode, first + out, err)


def test_a_freed_array_is_refused_not_used(dev, tmp_path) -> None:  # noqa: ANN001
    r = _child(tmp_path, '''
        h = np.arange(1000, dtype=np.float32)
        for what in ("numpy", "assign", "launch"):
            a = aw.array(h, target=V)
            acc = aw.zeros(1000, aw.f32, target=V)
            a._free()  # what the garbage collector does when the array goes away
            try:
                if what == "numpy":
                    a.numpy()
                elif what == "assign":
                    a.assign(h)
                else:
                    accumulate(a, acc, 1000, grid=16, workgroup=64, target=V)
            except WaveError as e:
                assert "freed" in str(e), e
                print(what, "refused")
        b = aw.array(h, target=V)
        b.space.dev.free(b.handle)
        b.space.dev.free(b.handle)  # a second free of the same buffer does nothing
        c = aw.array(h, target=V)
        assert np.array_equal(c.numpy(), h)
        print("alive")
    ''')
    assert r.returncode == 0, r.stderr[-2000:]
    for want in ("numpy refused", "assign refused", "launch refused", "alive"):
        assert want in r.stdout, (r.stdout, r.stderr[-1000:])


def test_a_forked_child_fails_fast_with_a_clear_error(dev, tmp_path) -> None:  # noqa: ANN001
    r = _child(tmp_path, '''
        a = aw.array(np.ones(64, np.float32), target=V)
        acc = aw.zeros(64, aw.f32, target=V)
        for _ in range(20):  # pending at the fork
            accumulate(a, acc, 64, grid=1, workgroup=64, target=V)
        pid = os.fork()
        if pid == 0:
            for what, call in (("launch", lambda: accumulate(a, acc, 64, grid=1, workgroup=64, target=V)),
                               ("numpy", a.numpy), ("sync", aw.synchronize),
                               ("alloc", lambda: aw.zeros(8, target=V))):
                try:
                    call()
                    print("child", what, "ran", flush=True)
                except WaveError as e:
                    print("child", what, "refused" if "fork" in str(e) and "spawn" in str(e) else e, flush=True)
            del a  # its finalizer must not touch the parent's device
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        print("child status", st)
        assert np.array_equal(acc.numpy(), np.full(64, 20, np.float32))
        print("parent ok")
    ''')
    assert r.returncode == 0, r.stderr[-2000:]
    for what in ("launch", "numpy", "alloc"):
        assert f"child {what} refused" in r.stdout, r.stdout
    # the child enqueued nothing itself: its aw.synchronize() waits on nothing (arrays forgets
    # the parent's used spaces at fork), so it returns at once without touching the parent's device
    assert "child sync ran" in r.stdout, r.stdout
    assert "child status 0" in r.stdout and "parent ok" in r.stdout, r.stdout


def test_ctrl_c_while_waiting_raises_keyboard_interrupt(dev, tmp_path) -> None:  # noqa: ANN001
    # the fence budget is set far beyond the child's timeout: a KeyboardInterrupt can only come
    # from the signal, not from the budget running out
    r = _child(tmp_path, '''
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a child of a background job ignores it
        vulkan.FENCE_TIMEOUT_NS = 3600 * 10**9
        flag = aw.zeros(1, aw.i32, target=V)
        out = aw.zeros(64, aw.i32, target=V)
        d = vulkan.get_device()
        real = d._wait_fence

        def announced(slot):  # the parent sends SIGINT once the wait has begun
            print("READY", flush=True)
            return real(slot)

        d._wait_fence = announced
        try:
            # the launch itself waits where the kernel has a status record (lavapipe's loop
            # limit, runtime/vulkan.py); elsewhere it returns at once and synchronize waits
            forever(flag, out, grid=FOREVER_GRID, workgroup=64, target=V)
            aw.synchronize()
            print("returned")
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        os._exit(0)  # the dispatch never ends
    ''', timeout=240, sigint_on="READY")
    assert "KeyboardInterrupt" in r.stdout, (r.stdout, r.stderr[-1000:])


def test_an_interrupted_staged_launch_leaves_nothing_owned_twice(dev, tmp_path) -> None:  # noqa: ANN001
    # a Ctrl-C in the wait of a launch with NumPy arguments: the submission keeps its temporary
    # buffers (freed once, when it retires) and the staging buffer it still copies through is
    # not rewritten by the next transfer before it finished
    r = _child(tmp_path, '''
        d = vulkan.get_device()
        real = d._wait_fence
        calls = []
        def interrupted(slot):
            if not calls:
                calls.append(slot)
                raise KeyboardInterrupt
            return real(slot)
        d._wait_fence = interrupted
        n = 1 << 16
        h = np.arange(n, dtype=np.float32)
        acc = np.zeros(n, np.float32)
        try:
            accumulate(h, acc, n, grid=n // 64, workgroup=64, target=V)
        except KeyboardInterrupt:
            print("interrupted")
        g = np.full(n, 3.0, np.float32)
        acc2 = np.ones(n, np.float32)
        accumulate(g, acc2, n, grid=n // 64, workgroup=64, target=V)
        assert np.array_equal(acc2, np.full(n, 4.0, np.float32)), acc2[:4]
        b = aw.array(h, target=V)
        assert np.array_equal(b.numpy(), h)
        aw.synchronize()
        print("alive")
    ''')
    assert r.returncode == 0, r.stderr[-2000:]
    assert "interrupted" in r.stdout and "alive" in r.stdout, r.stdout


def test_a_wedged_device_refuses_at_once(dev, tmp_path) -> None:  # noqa: ANN001
    r = _child(tmp_path, '''
        vulkan.FENCE_TIMEOUT_NS = 10**9
        flag = aw.zeros(1, aw.i32, target=V)
        out = aw.zeros(64, aw.i32, target=V)
        x = aw.array(np.ones(64, np.float32), target=V)
        forever(flag, out, grid=FOREVER_GRID, workgroup=64, target=V)
        try:
            aw.synchronize()
        except WaveError as e:
            print("first:", "did not finish" in str(e))
        vulkan.FENCE_TIMEOUT_NS = 3600 * 10**9  # a second wait on the stuck dispatch would outlast the test
        for what, call in (("sync", aw.synchronize), ("numpy", x.numpy), ("zeros", lambda: aw.zeros(4, target=V)),
                           ("launch", lambda: accumulate(np.ones(64, np.float32), np.zeros(64, np.float32), 64,
                                                         grid=1, workgroup=64, target=V))):
            try:
                call()
                print(what, "ran")
            except WaveError as e:
                print(what, "refuses" in str(e))
        os._exit(0)
    ''', timeout=240)
    assert "first: True" in r.stdout, (r.stdout, r.stderr[-1000:])
    for what in ("sync", "numpy", "zeros", "launch"):
        assert f"{what} True" in r.stdout, (r.stdout, r.stderr[-1000:])


def test_kernels_without_bounds_checks_stay_inside_their_buffers(dev, tmp_path) -> None:  # noqa: ANN001
    assert dev.robust  # robustBufferAccess: every Vulkan device offers it
    r = _child(tmp_path, '''
        for k in (1000, 2**20, -1000):
            x = aw.array(np.ones(16, np.float32), target=V)
            out = aw.zeros(16, aw.f32, target=V)
            guard = aw.array(np.full(1 << 16, 7.0, np.float32), target=V)
            nocheck(x, out, k, grid=64, workgroup=64, target=V)
            nocheck(np.ones(16, np.float32), np.zeros(16, np.float32), k, grid=64, workgroup=64, target=V)
            aw.synchronize()
            assert np.array_equal(guard.numpy(), np.full(1 << 16, 7.0, np.float32))
        print("alive")
    ''')
    assert r.returncode == 0, r.stderr[-2000:]
    assert "alive" in r.stdout


def test_thousands_of_launches_without_synchronising(dev) -> None:  # noqa: ANN001
    from anywave.runtime import vulkan

    n, L = 64, 2000
    acc = aw.zeros(n, aw.f32, target="vulkan")
    x = aw.array(np.ones(n, np.float32), target="vulkan")
    for j in range(L):
        xx = x if j % 2 else aw.array(np.ones(n, np.float32), target="vulkan")  # fresh arrays freed while pending
        accumulate(xx, acc, n, grid=1, workgroup=64, target="vulkan")
    aw.synchronize()
    assert np.array_equal(acc.numpy(), np.full(n, L, np.float32))
    assert len(dev._free_slots) + len(dev._pending) <= vulkan.MAX_IN_FLIGHT + 1
    assert len(dev._sets) <= vulkan.SET_CACHE


def test_python_objects_never_reach_device_memory(dev) -> None:  # noqa: ANN001
    from anywave.runtime import vulkan

    sp = vulkan.memory_space()
    handle, _, free = sp.allocate(64)
    objs = np.array([object() for _ in range(8)], dtype=object)
    with pytest.raises(WaveError, match="Python objects"):
        sp.from_host(handle, objs)
    with pytest.raises(WaveError, match="Python objects"):
        sp.to_host(handle, np.empty(8, object))
    with pytest.raises(WaveError, match="non-negative int"):
        sp.allocate(-16)
    free()
    with pytest.raises(WaveError):
        aw.array(objs, target="vulkan")


def test_zero_d_data_keeps_its_shape(dev) -> None:  # noqa: ANN001
    for data in (np.float32(3.5), np.array(3.5, np.float32), 3.5):
        a = aw.array(data, aw.f32, target="vulkan")
        got = a.numpy()
        assert a.shape == () and got.shape == (), (a.shape, got.shape)
        assert got == np.float32(3.5)
