"""Out-of-bounds kernels on the host-memory targets (issue 31, item 1): a kernel that forgets its
``if i < n`` must never write into the Python heap on OpenCL or SYCL. Kernels there run the
bounds-checked build by default, so the launch raises OutOfBoundsError naming the buffer, the
byte offset and the source line; ``check=False`` / ``ANYWAVE_CHECK=0`` opt out.

The launches run in child processes: before the fix the child dies (a corrupted heap), which the
parent sees as a non-zero exit instead of the expected lines. The expected offset is worked out by
hand: 64 lanes store f32 ``out[i]`` into a 4-element buffer, so the first failing byte offset is a
multiple of 4 in 16 .. 252 (which lane fails first is the runtime's order)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import anywave as aw

TARGETS = ["opencl", "sycl"]


def _usable(name: str) -> tuple[bool, str]:
    from anywave.runtime.targets import target_status

    st = target_status(name)
    return (False, f"no target {name}") if st is None else (st.available, st.reason)


def _need(name: str) -> None:
    ok, why = _usable(name)
    if not ok:
        pytest.skip(f"{name} unavailable: {why}")


CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import anywave as aw
    from anywave.errors import OutOfBoundsError

    @aw.kernel
    def nocheck(out: aw.Out[aw.f32]):
        i = aw.global_id(0)
        out[i] = 1.0  # MARK: no bounds check

    target, kind = sys.argv[1], sys.argv[2]
    if kind == "host":
        out = np.zeros(4, np.float32)
    else:
        out = aw.zeros(4, np.float32, target=target)
    pad = [np.zeros(4, np.float32) for _ in range(64)]  # heap neighbours an overrun would hit
    try:
        nocheck(out, grid=1, workgroup=64, target=target)
        if kind != "host":
            aw.synchronize()
        print("NO ERROR")
    except OutOfBoundsError as e:
        print("OOB", e)
    host = out if kind == "host" else out.numpy()
    print("VALUES", host.tolist())
    print("PAD", all(float(p.sum()) == 0.0 for p in pad))
    print("ALIVE")
''')


def _line_of_mark() -> int:
    return next(i for i, line in enumerate(CHILD.splitlines(), 1) if "MARK" in line)


def _run_child(tmp_path, target: str, kind: str) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("ANYWAVE_CHECK", None)
    script = tmp_path / "oob_child.py"
    script.write_text(CHILD)
    return subprocess.run([sys.executable, str(script), target, kind], capture_output=True, text=True, env=e,
                          timeout=600)


@pytest.mark.parametrize("kind", ["host", "device"])
@pytest.mark.parametrize("target", TARGETS)
def test_forgotten_bounds_check_raises_and_process_survives(tmp_path, target: str, kind: str) -> None:
    _need(target)
    r = _run_child(tmp_path, target, kind)
    assert r.returncode == 0, f"child died (rc {r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    assert "ALIVE" in lines, r.stdout
    oob = [ln for ln in lines if ln.startswith("OOB ")]
    assert oob, f"no OutOfBoundsError:\n{r.stdout}"
    msg = oob[0]
    assert "argument 'out'" in msg and "4-byte store" in msg and "16 bytes" in msg, msg
    off = int(msg.split("byte offset ")[1].split()[0])
    assert 16 <= off <= 252 and off % 4 == 0, msg
    assert f":{_line_of_mark()}" in msg or f"line {_line_of_mark()}" in msg, (msg, _line_of_mark())
    assert "VALUES [1.0, 1.0, 1.0, 1.0]" in lines, r.stdout  # the in-bounds stores happened
    assert "PAD True" in lines, r.stdout


@pytest.mark.parametrize("target", TARGETS)
def test_check_default_and_opt_out(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver decides the default per device; ``check=False`` and ``ANYWAVE_CHECK=0`` turn the
    checked build off, ``ANYWAVE_CHECK=1`` / ``check=True`` on (an in-bounds kernel: no risk)."""
    _need(target)
    from anywave.runtime.targets import get_target

    @aw.kernel
    def fill(out: aw.Out[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = 2.0

    mod = fill.compile()
    t = get_target(target)
    assert t.check_default is True  # both are CPU devices here
    runner = t.runner
    args = {"out": np.zeros(8, np.float32), "n": 8}
    monkeypatch.delenv("ANYWAVE_CHECK", raising=False)
    W = t.info.wave_width
    assert runner.prepare(mod, "fill", 1, 8, args, W).checked is True
    assert runner.prepare(mod, "fill", 1, 8, args, W, check=False).checked is False
    monkeypatch.setenv("ANYWAVE_CHECK", "0")
    assert runner.prepare(mod, "fill", 1, 8, args, W).checked is False
    assert runner.prepare(mod, "fill", 1, 8, args, W, check=True).checked is True
    monkeypatch.setenv("ANYWAVE_CHECK", "1")
    assert runner.prepare(mod, "fill", 1, 8, args, W).checked is True
    # the front door passes the opt-out through: an unchecked launch still computes the same
    monkeypatch.delenv("ANYWAVE_CHECK")
    for check in (None, False):
        out = np.zeros(8, np.float32)
        fill(out, 8, grid=1, workgroup=8, target=target, check=check)
        assert out.tolist() == [2.0] * 8


def test_emulator_opt_out_not_forced() -> None:
    """``check=False`` on the emulator keeps its always-on bounds checks (it has no unchecked mode)."""
    from anywave.errors import EmulationError

    @aw.kernel
    def over(out: aw.Out[aw.f32]):
        out[aw.global_id(0)] = 1.0

    with pytest.raises(EmulationError):
        over(np.zeros(2, np.float32), grid=1, workgroup=8, target="emulator", check=False)
