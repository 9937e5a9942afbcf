"""Infinite loops are reported within seconds, and Ctrl-C reaches every CPU target (issue 11,
item 17). The emulator's time budget (spec-independent: emulate(..., budget=seconds)) names the
loop and its source line; on OpenCL and SYCL a SIGINT during a spinning kernel raises
KeyboardInterrupt in the launching process, which then exits (checked in a subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import emulate
from anywave.emu.machine import BudgetExceeded
from anywave.errors import EmulationError, LaunchConfigError

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


@pytest.mark.parametrize("w", [8, 16, 32, 64])
def test_infinite_loop_reported_within_budget(w: int) -> None:
    m = assemble(SPIN, "spin.wave")
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded) as ei:
        emulate(m, "spin", grid=1, workgroup=w, args={"y": np.zeros(w, np.uint32)}, wave_width=w, budget=0.3)
    took = time.perf_counter() - t0
    assert took < 5.0, took
    msg = str(ei.value)
    assert "spin.py:7" in msg and "loop" in msg and "budget" in msg and "'spin'" in msg
    assert isinstance(ei.value, EmulationError)


def test_default_budget_is_seconds(monkeypatch) -> None:
    from anywave.emu.machine import DEFAULT_LOOP_BUDGET, _default_budget

    monkeypatch.delenv("ANYWAVE_EMU_BUDGET", raising=False)
    assert _default_budget() == DEFAULT_LOOP_BUDGET <= 10
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "none")
    assert _default_budget() is None


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ANYWAVE_SLOW"), reason="runs for the default budget: set ANYWAVE_SLOW=1")
def test_default_budget_reports_within_seconds(monkeypatch) -> None:
    monkeypatch.delenv("ANYWAVE_EMU_BUDGET", raising=False)
    from anywave.emu.machine import DEFAULT_LOOP_BUDGET
    m = assemble(SPIN, "spin.wave")
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded):
        emulate(m, "spin", grid=1, workgroup=8, args={"y": np.zeros(8, np.uint32)}, wave_width=8)
    assert time.perf_counter() - t0 < DEFAULT_LOOP_BUDGET + 10


def test_env_budget_and_bad_values(monkeypatch) -> None:
    m = assemble(SPIN, "spin.wave")
    args = {"y": np.zeros(8, np.uint32)}
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "0.2")
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded, match="0.2 s"):
        emulate(m, "spin", grid=1, workgroup=8, args=args, wave_width=8)
    assert time.perf_counter() - t0 < 5
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "soon")
    with pytest.raises(LaunchConfigError, match="ANYWAVE_EMU_BUDGET"):
        emulate(m, "spin", grid=1, workgroup=8, args=args, wave_width=8)
    for bad in (0, -1, "x", True):
        with pytest.raises(LaunchConfigError, match="budget"):
            emulate(m, "spin", grid=1, workgroup=8, args=args, wave_width=8, budget=bad)


def test_budget_through_the_emulator_target() -> None:
    from anywave.runtime.targets import get_target

    m = assemble(SPIN, "spin.wave")
    t = get_target("emulator", wave_width=16)
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded):
        t.launch(m, "spin", (1,), (16,), {"y": np.zeros(16, np.uint32)}, budget=0.2)
    assert time.perf_counter() - t0 < 5


def test_terminating_loops_are_not_affected() -> None:
    src = SPIN.replace("        add.i32 r1, r1, r2\n", "        add.i32 r1, r1, r2\n        movi.b32 r3, 1000\n"
                       "        setp.ge.u32 p0, r1, r3\n        break p0\n")
    src = src.replace("    halt\n.end", "    mov.sr r0, sr_thread_linear_id\n    movi.b32 r2, 2\n"
                      "    shl.b32 r0, r0, r2\n    st.device.b32 y[r0], r1\n    halt\n.end")
    m = assemble(src, "t.wave")
    y = np.zeros(8, np.uint32)
    emulate(m, "spin", grid=1, workgroup=8, args={"y": y}, wave_width=8, budget=30)
    assert np.all(y == 1000)


_CHILD = textwrap.dedent("""
    import sys, numpy as np
    from anywave.asm import assemble
    from anywave.runtime.targets import get_target, TargetUnavailable
    try:
        t = get_target(sys.argv[1], wave_width=8)
    except TargetUnavailable as e:
        print("UNAVAILABLE", e, flush=True); sys.exit(0)
    m = assemble(open(sys.argv[2]).read(), "spin.wave")
    print("READY", flush=True)
    try:
        t.launch(m, "spin", (1,), (8,), {"y": np.zeros(8, np.uint32)})
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        raise
""")


@pytest.mark.parametrize("target", ["opencl", "sycl"])
def test_sigint_interrupts_a_spinning_kernel(target: str, tmp_path: Path) -> None:
    (tmp_path / "spin.wave").write_text(SPIN)
    (tmp_path / "child.py").write_text(_CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), target, str(tmp_path / "spin.wave")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = p.stdout.readline()
        if first.startswith("UNAVAILABLE"):
            p.communicate(timeout=30)
            pytest.skip(first.strip())
        assert first.strip() == "READY", (first, p.stderr.read() if p.poll() is not None else "")
        time.sleep(3.0)  # the kernel is being built or is spinning by now
        assert p.poll() is None, "the kernel did not spin"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{target}: SIGINT did not stop the process within 30 s")
    assert "INTERRUPTED" in out, err[-2000:]
    assert "KeyboardInterrupt" in err


def test_cpp_dialects_keep_a_never_ending_loop() -> None:
    """C++ lets a compiler delete a loop without side effects that never ends (then the kernel
    falls into other code: a SIGSEGV seen on SYCL in CI); the C++ dialects give such a loop a
    volatile access, and only such a loop, so loops with a way out keep their speed."""
    from anywave.backends import hip, metal, opencl, sycl
    from anywave.backends.cfamily import SPIN_SIDE_EFFECT

    spin = assemble(SPIN, "spin.wave")
    ends = assemble(SPIN.replace("        add.i32 r1, r1, r2\n", "        add.i32 r1, r1, r2\n"
                                 "        setp.ge.u32 p0, r1, r2\n        break p0\n"), "ends.wave")
    for backend in (sycl, hip, metal):
        assert SPIN_SIDE_EFFECT in backend.translate(spin, 32).text, backend.__name__
        assert SPIN_SIDE_EFFECT not in backend.translate(ends, 32).text, backend.__name__
    assert "volatile u32 aw_spin" not in opencl.translate(spin, 32).text  # C exempts while (1)
