"""Test-session defaults and helpers."""

from __future__ import annotations

import os

import pytest

# Kernels launched without target= run on the reference emulator in the tests, whatever
# runtimes are installed; tests of other targets name them. ANYWAVE_TARGET=opencl (say)
# runs the compiler's and the kernel library's tests on that target instead.
os.environ.setdefault("ANYWAVE_TARGET", "emulator")

# The CPU targets' runtime compilers build without their optimisers in the default tier (OpenCL
# -cl-opt-disable, SYCL -O0, the cpu target's GCC -O0, lavapipe GALLIVM_PERF=nopt): a cold default
# tier spends most of its time in those compilers, and the level changes no result (every build
# keeps the spec's arithmetic; anywave.runtime.targets.optimize_target_code). Defaulted, not set:
# .ci/run runs the sweep and slow tiers with ANYWAVE_TARGET_OPT=1, so the optimised builds run
# the conformance suite at every other wave width and every slow test.
os.environ.setdefault("ANYWAVE_TARGET_OPT", "0")

# The emulator's default loop budget is wall-clock seconds (a convenience for interactive use):
# on a loaded machine a long but finite launch could hit it, so no test may depend on it. Tests
# that need a bound on an emulated launch pass max_instructions= (a count of work); see
# tests/test_emu_budget.py. Set, not defaulted: a developer's own setting must not change results.
os.environ["ANYWAVE_EMU_BUDGET"] = "none"
# Vulkan declares a device wedged when one dispatch takes longer than 60 s of wall-clock time: on
# lavapipe under a loaded test run a small exact GEMM took longer (test_vulkan_arrays'
# torch-ops test: 21 s idle, over 60 s beside three other test processes on 2 cores), and every
# later Vulkan test in that worker failed. In tests the limit is a hang guard, like the 600 s of
# the child processes; the tests of the timeout itself set FENCE_TIMEOUT_NS.
os.environ["ANYWAVE_VULKAN_TIMEOUT"] = "600"

try:  # Hypothesis' default 200 ms deadline per example is a wall-clock verdict: off for every test
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("anywave", deadline=None)
    _hypothesis_settings.load_profile("anywave")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass


# ANYWAVE_TEST_CRASH_LOG=DIR: every test process writes DIR/<pid>.log — the test it starts and
# ends, a faulthandler dump on a fatal signal, and the Python stack of any os._exit — so a worker
# that dies (xdist: "node down: Not properly terminated") leaves its cause where pytest's own fd
# capture cannot swallow it.
_CRASH_DIR = os.environ.get("ANYWAVE_TEST_CRASH_LOG")
if _CRASH_DIR:
    import faulthandler
    import traceback

    os.makedirs(_CRASH_DIR, exist_ok=True)
    _CRASH_FILE = open(os.path.join(_CRASH_DIR, f"{os.getpid()}.log"), "a", buffering=1)  # noqa: SIM115
    _real_exit = os._exit

    def pytest_sessionstart(session: pytest.Session) -> None:  # noqa: ARG001
        # here, not at import: pytest's faulthandler plugin points faulthandler at stderr in
        # pytest_configure, after this module is imported
        faulthandler.enable(_CRASH_FILE, all_threads=True)

    def _logged_exit(code: int) -> None:
        _CRASH_FILE.write(f"os._exit({code}) from:\n{''.join(traceback.format_stack())}")
        _CRASH_FILE.flush()
        _real_exit(code)

    os._exit = _logged_exit

    def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:  # noqa: ARG001
        _CRASH_FILE.write(f"start {nodeid}\n")

    def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:  # noqa: ARG001
        _CRASH_FILE.write(f"end {nodeid}\n")


class WorkBoundExceeded(AssertionError):
    """The code under test made more Python calls than the bound a test gave it."""


class work_bound:  # noqa: N801 - used like a function: ``with work_bound(10**6): ...``
    """Bound the work of a block by counting Python function calls (``sys.setprofile`` 'call'
    events), not by reading the clock: a test that something is refused *quickly* (before an
    exponential expansion) fails with :class:`WorkBoundExceeded` as soon as the block makes more
    than ``max_calls`` calls, on any machine at any load. ``calls`` holds the count afterwards."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.calls = 0

    def _profile(self, frame, event, arg) -> None:  # noqa: ANN001
        if event == "call":
            self.calls += 1
            if self.calls > self.max_calls:
                raise WorkBoundExceeded(f"more than {self.max_calls} Python calls")

    def __enter__(self) -> work_bound:
        import sys

        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        import sys

        sys.setprofile(self._previous)


@pytest.fixture(name="work_bound")
def _work_bound_fixture() -> type[work_bound]:
    """:class:`work_bound`, for tests: ``with work_bound(10**5): ...``."""
    return work_bound
