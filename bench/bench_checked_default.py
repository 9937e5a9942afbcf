"""Cost of the bounds-checked default on the host-memory targets (issue 31, item 1).

Usage: ``python bench/bench_checked_default.py [--target opencl] [--reps 15] [--json OUT]``.

For each kernel -- vadd (n = 2^22 f32), saxpy (n = 2^22 f32), a naive f32 GEMM (256^3, one
thread per output element, k-loop of loads) -- on NumPy host arrays, the launch through the
front door (``kernel(..., target=T)``) is timed ``reps`` times after two warm-up launches, with
``check=True`` (the default there now) and with ``check=False`` (the opt-out, the former
default); the median wall time of each and their ratio are recorded. Both builds are the same
kernel, compiled once before timing; outputs are compared bit for bit between the two.
The peer in the same run is the unchecked build.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import anywave as aw


@aw.kernel
def vadd(a: aw.In[aw.f32], b: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a[i] + b[i]


@aw.kernel
def saxpy(x: aw.In[aw.f32], y: aw.Buffer[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]


@aw.kernel
def gemm(a: aw.In[aw.f32], b: aw.In[aw.f32], c: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    row = i // n
    col = i % n
    if row < n:
        acc = 0.0
        for k in range(n):
            acc += a[row * n + k] * b[k * n + col]
        c[i] = acc


def _time(fn, reps: int) -> float:
    for _ in range(2):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    T = args.target
    rng = np.random.default_rng(0)
    n = 1 << 22
    x, y0 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    N = 256
    A, B = rng.standard_normal(N * N).astype(np.float32), rng.standard_normal(N * N).astype(np.float32)
    cases = {
        "vadd n=2^22": lambda out, check: vadd(x, y0, out, n, grid=n // 256, workgroup=256, target=T, check=check),
        "saxpy n=2^22": lambda out, check: saxpy(x, out, 2.0, n, grid=n // 256, workgroup=256, target=T,
                                                  check=check),
        "gemm 256^3 naive": lambda out, check: gemm(A, B, out, N, grid=N * N // 64, workgroup=64, target=T,
                                                     check=check),
    }
    rows = []
    for name, run in cases.items():
        outs, med = {}, {}
        for check in (False, True):
            out = np.zeros(N * N if name.startswith("gemm") else n, np.float32)
            if name.startswith("saxpy"):
                out[:] = y0
            med[check] = _time(lambda out=out, check=check, run=run: run(out, check), args.reps)
            if name.startswith("saxpy"):  # y accumulates: recompute once from the same start for the comparison
                out[:] = y0
                run(out, check)
            outs[check] = out
        same = bool(np.array_equal(outs[True].view(np.uint32), outs[False].view(np.uint32)))
        rows.append({"kernel": name, "unchecked_s": med[False], "checked_s": med[True],
                     "checked_over_unchecked": med[True] / med[False], "same_bits": same})
        print(f"{name:20s} unchecked {med[False] * 1e3:8.3f} ms  checked {med[True] * 1e3:8.3f} ms  "
              f"x{med[True] / med[False]:.3f}  same bits: {same}", flush=True)
    from anywave.runtime.targets import get_target

    info = get_target(T).info
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    out = {"bench": "checked_default", "target": T, "device": info.device, "wave_width": info.wave_width,
           "reps": args.reps, "statistic": "median wall seconds per front-door launch, NumPy host arrays",
           "peer": "the same kernel's unchecked build (check=False), same run", "commit": commit,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
           "machine": platform.machine(), "note": "shared 2-core machine, other jobs running", "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    json.dump(out, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
