"""Issue 24, "one check of each argument", on an NVIDIA GPU, in one call (a couple of minutes):

    ANYWAVE_COMMIT=<sha> PYTHONPATH=src python3 bench/check_once_h200.py      # writes into $OUT

1. The launch layer's CUDA tests (``pytest -m cuda -n 0`` of test_check_once_cuda.py,
   test_launch_plan.py, test_front_door.py, test_cuda.py, test_arrays_cuda.py, test_graph.py,
   test_torch_custom_op.py, test_torch_buffers.py), the FakeDriver tests of test_check_once.py
   and test_print.py's CUDA case: their summary lines in the JSON, the whole log in
   ``$OUT/check_once_cuda_tests.log``.
2. Host time per call on the device, the loops interleaved in one process (a burst of ``--calls``
   calls, ``--rounds`` rounds in a new order each; median and min, microseconds per call) for
   ``y = x + a`` over 32 threads:

   * ``kernel(...)`` with ``aw.array`` and with torch tensors: CUDA's plan launcher (native), not
     changed by this branch (compare with ``launch24_h200_*.json`` only loosely: other hosts);
   * ``kernel(...)`` with NumPy arrays (copied in and out) and with ``check=True`` (the
     bounds-checked build): launch plans that launch through the driver's bound launch
     (``CudaTarget.bind``, no argument check);
   * the driver called directly for the same launches (``CudaTarget.launch(module, ...)``, which
     checks every argument): what those plans called on every call before this branch;
   * CuPy's ``RawKernel`` of the same kernel, the peer.

JSON ``$OUT/check_once_h200.json``: device, driver, commit, date, the figures, the tests' summary.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import anywave as aw

TESTS = ["tests/test_check_once_cuda.py", "tests/test_launch_plan.py", "tests/test_front_door.py", "tests/test_cuda.py",
         "tests/test_arrays_cuda.py", "tests/test_graph.py", "tests/test_torch_custom_op.py",
         "tests/test_torch_buffers.py"]

CUDA_ADD1 = r"""
extern "C" __global__ void add1(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + a;
}
"""


@aw.kernel
def add1(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] + a


def commit() -> str:
    c = os.environ.get("ANYWAVE_COMMIT")
    if c:
        return c
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def run_tests(out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": "src"}
    r1 = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "cuda", "-p", "no:cacheprovider",
                         *TESTS], env=env, text=True, capture_output=True)
    r2 = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                         "tests/test_check_once.py"], env=env, text=True, capture_output=True)
    r3 = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                         "tests/test_print.py", "-k", "cuda"], env=env, text=True, capture_output=True)
    log = (f"$ pytest -q -n 0 -m cuda {' '.join(TESTS)}\n{r1.stdout}{r1.stderr}\n"
           f"$ pytest -q -n 0 tests/test_check_once.py\n{r2.stdout}{r2.stderr}\n"
           f"$ pytest -q -n 0 tests/test_print.py -k cuda\n{r3.stdout}{r3.stderr}")
    (out / "check_once_cuda_tests.log").write_text(log)

    def last(s: str) -> str:
        lines = [ln for ln in s.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    return {"cuda tests": {"rc": r1.returncode, "summary": last(r1.stdout)},
            "test_check_once.py": {"rc": r2.returncode, "summary": last(r2.stdout)},
            "test_print.py -k cuda (a printing kernel's call on cuda)": {"rc": r3.returncode,
                                                                         "summary": last(r3.stdout)}}


def timings(calls: int, rounds: int) -> dict[str, Any]:
    import cupy as cp
    import torch

    from anywave.runtime import cuda

    n = 32
    x = np.arange(n, dtype=np.float32)
    hx, hy = x.copy(), np.zeros(n, np.float32)
    dx, dy = aw.array(x, target="cuda"), aw.zeros(n, aw.f32, target="cuda")
    tx, ty = torch.from_numpy(x).cuda(), torch.zeros(n, device="cuda")
    cx, cy = cp.asarray(x), cp.zeros(n, cp.float32)
    raw = cp.RawKernel(CUDA_ADD1, "add1")
    a32, n32 = np.float32(1.0), np.int32(32)
    tgt = cuda.CudaTarget(0)
    module = add1.compile()
    sync = torch.cuda.synchronize

    def loop(fn: Callable[[], Any]) -> Callable[[], None]:
        def go() -> None:
            for _ in range(calls):
                fn()
        return go

    loops = {
        "kernel(...) aw.array (plan launcher)": loop(lambda: add1(dx, dy, 1.0, 32, grid=1, workgroup=32)),
        "kernel(...) torch tensors (plan launcher)": loop(lambda: add1(tx, ty, 1.0, 32, grid=1, workgroup=32)),
        "kernel(...) NumPy arrays (plan + bound launch)": loop(
            lambda: add1(hx, hy, 1.0, 32, grid=1, workgroup=32, target="cuda")),
        "CudaTarget.launch(module, ...) NumPy arrays (checks every argument)": loop(
            lambda: tgt.launch(module, "add1", 1, 32, [hx, hy, 1.0, 32])),
        "kernel(...) aw.array check=True (plan + bound launch)": loop(
            lambda: add1(dx, dy, 1.0, 32, grid=1, workgroup=32, check=True)),
        "CudaTarget.launch(module, ..., check=True) aw.array (checks every argument)": loop(
            lambda: tgt.launch(module, "add1", 1, 32, [dx, dy, 1.0, 32], check=True)),
        "cupy RawKernel": loop(lambda: raw((1,), (32,), (cx, cy, a32, n32))),
    }
    for fn in loops.values():
        fn()
    sync()
    np.testing.assert_array_equal(hy, x + 1)
    np.testing.assert_array_equal(dy.numpy(), x + 1)
    acc: dict[str, list[float]] = {k: [] for k in loops}
    order = list(loops.items())
    rng = random.Random(24)
    for _ in range(rounds):
        rng.shuffle(order)
        for k, fn in order:
            sync()
            t0 = time.perf_counter()
            fn()
            acc[k].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    plans = sorted({str(getattr(p, "path", type(getattr(p, "__self__", p)).__name__)) for p in add1._calls.values()})
    return {"us_per_call": {k: {"median_us": round(statistics.median(v), 2), "min_us": round(min(v), 2)}
                            for k, v in acc.items()}, "plan_kinds": plans}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--no-tests", action="store_true")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from anywave.runtime import cuda

    props = cuda.device_properties(0)
    res: dict[str, Any] = {"device": props.name, "driver": cuda.driver_version(), "commit": commit(),
                           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "python": platform.python_version(), "calls_per_round": a.calls, "rounds": a.rounds}
    if not a.no_tests:
        res["tests"] = run_tests(out)
    res.update(timings(a.calls, a.rounds))
    (out / "check_once_h200.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
