"""Issue 14's kernels on the CPU targets (OpenCL, SYCL: the Intel CPU runtime) against NumPy, in
one run, so that a regression shows without a GPU.

    python bench/bench_speed_cpu.py [--out DIR] [--targets opencl,sycl] [--reps 5]

Each figure is the median of ``--reps`` calls of the library's host wrapper (host copies
included, as a user calls it), after one warm-up call that compiles; the NumPy peer runs in the
same rounds, interleaved. Results are checked bit for bit against the references first. Writes
``OUT/speed_cpu_<date>.json`` (machine, commit, date).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

import anywave as aw  # noqa: E402
from anywave.kernels import gemm as G  # noqa: E402
from anywave.kernels import reference as R  # noqa: E402
from anywave.kernels import vec as V  # noqa: E402


def _median(fns: dict[str, Callable[[], Any]], reps: int) -> dict[str, float]:
    acc: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            acc[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in acc.items()}


def _same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32)))


def bench_target(t: str, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    res: dict[str, Any] = {}
    m = n = k = 256
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    res["gemm_256_bit_exact"] = _same(G.gemm(a, b, config=G.FAST, target=t), R.matmul_f32(a, b))
    tm = _median({"anywave": lambda: G.gemm(a, b, config=G.FAST, target=t), "numpy": lambda: a @ b}, reps)
    res["gemm_256"] = {"median_s": tm, "gflop_per_s": {kk: 2 * m * n * k / v / 1e9 for kk, v in tm.items()},
                       "over_numpy": tm["numpy"] / tm["anywave"]}
    x = rng.standard_normal(1 << 22, dtype=np.float32)
    y = rng.standard_normal(1 << 22, dtype=np.float32)
    res["add4_bit_exact"] = _same(V.add4(x, y, target=t), x + y)
    tm = _median({"anywave": lambda: V.add4(x, y, target=t), "numpy": lambda: x + y}, reps)
    res["add4_2^22"] = {"median_s": tm, "over_numpy": tm["numpy"] / tm["anywave"]}
    tm = _median({"anywave": lambda: V.sum4(x, target=t), "numpy": lambda: np.sum(x)}, reps)
    res["sum4_2^22"] = {"median_s": tm, "over_numpy": tm["numpy"] / tm["anywave"]}
    xr = rng.standard_normal((1024, 1024), dtype=np.float32)
    gm = rng.standard_normal(1024, dtype=np.float32)
    bt = rng.standard_normal(1024, dtype=np.float32)
    res["layer_norm4_bit_exact"] = _same(V.layer_norm4(xr, gm, bt, target=t), R.layer_norm4_f32(xr, gm, bt, 1e-5, 256))

    def np_softmax() -> np.ndarray:
        e = np.exp(xr - xr.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def np_layer_norm() -> np.ndarray:
        mu = xr.mean(axis=1, keepdims=True)
        return (xr - mu) / np.sqrt(xr.var(axis=1, keepdims=True) + 1e-5) * gm + bt

    tm = _median({"anywave": lambda: V.softmax4(xr, target=t), "numpy": np_softmax}, reps)
    res["softmax4_1024x1024"] = {"median_s": tm, "over_numpy": tm["numpy"] / tm["anywave"]}
    tm = _median({"anywave": lambda: V.layer_norm4(xr, gm, bt, target=t), "numpy": np_layer_norm}, reps)
    res["layer_norm4_1024x1024"] = {"median_s": tm, "over_numpy": tm["numpy"] / tm["anywave"]}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (default bench/results)")
    ap.add_argument("--targets", default="opencl,sycl")
    ap.add_argument("--reps", type=int, default=5)
    ns = ap.parse_args(argv)
    out = Path(ns.out or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    result: dict[str, Any] = {
        "environment": {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                        "anywave_commit": os.environ.get("ANYWAVE_COMMIT", commit), "cpu": platform.processor(),
                        "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                        "note": "shared 2-core development machine: a regression anchor, not a speed claim"},
        "method": "host wrapper calls incl. copies, median of reps after a warm-up, NumPy interleaved"}
    avail = aw.available_targets()
    for t in ns.targets.split(","):
        if t not in avail:
            result[t] = {"skipped": f"target {t} not available here ({avail})"}
            continue
        result[t] = bench_target(t, ns.reps)
        print(t, json.dumps(result[t], indent=None)[:600], flush=True)
    path = out / f"speed_cpu_{result['environment']['date'][:10]}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
