"""Per-call cost of small launches on the native cpu target (issue 29), through the public
kernel call with NumPy arrays, against NumPy's own in-place add in the same run.

    PYTHONPATH=src python bench/bench_cpu_launch.py [--out DIR] [--rounds 7] [--calls 500]

The kernel adds 1.0 to each element of a float32 array (one thread per element, workgroups of
256, bounds-checked build, the default); grids of 1, 2, 16, 64, 256 and 1024 workgroups. Each
round times ``--calls`` calls of each variant, interleaved; the figure is the median over rounds
of the per-call time. Variants: ``lazy`` (the default: the launching thread runs a loop-free
kernel alone and wakes the pool only after ``cpu.SOLO_US`` microseconds with workgroups left),
``eager`` (``SOLO_US = 0``: the pool is woken after the first workgroup, close to the behaviour
before the lazy wake), and NumPy's ``x += 1`` on the same array. Writes
``cpu_launch_<commit>.json`` (machine, commit, date, figures) to ``--out`` (default
bench/results).
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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import anywave as aw  # noqa: E402
from anywave.runtime import cpu  # noqa: E402


@aw.kernel
def add_one(x: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        x[i] = x[i] + 1.0


def _commit() -> str:
    env = os.environ.get("ANYWAVE_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    solo = cpu.SOLO_US
    res: dict[str, dict[str, float]] = {}
    for g in (1, 2, 16, 64, 256, 1024):
        x = np.zeros(256 * g, np.float32)
        n = x.size
        add_one(x, n, grid=g, workgroup=256, target="cpu")
        assert np.array_equal(x, np.ones(n, np.float32))

        def lazy(x: np.ndarray = x, n: int = n, g: int = g) -> None:
            cpu.SOLO_US = solo
            add_one(x, n, grid=g, workgroup=256, target="cpu")

        def eager(x: np.ndarray = x, n: int = n, g: int = g) -> None:
            cpu.SOLO_US = 0.0
            add_one(x, n, grid=g, workgroup=256, target="cpu")

        def numpy_add(x: np.ndarray = x) -> None:
            x += np.float32(1.0)

        fns = {"lazy": lazy, "eager": eager, "numpy": numpy_add}
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, f in fns.items():
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    f()
                times[k].append((time.perf_counter() - t0) / args.calls)
        cpu.SOLO_US = solo
        res[f"{g}_workgroups"] = {f"{k}_us": statistics.median(v) * 1e6 for k, v in times.items()}
        r = res[f"{g}_workgroups"]
        print(f"{g:5d} workgroups: lazy {r['lazy_us']:7.1f} us  eager {r['eager_us']:7.1f} us  "
              f"numpy x += 1 {r['numpy_us']:7.1f} us", flush=True)
    dev = cpu.get_device()
    out = {"device": dev.name, "machine": platform.machine(), "cores": dev.cores, "commit": _commit(),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "numpy": np.__version__, "solo_us": solo,
           "method": f"public kernel call, NumPy float32 array, workgroups of 256, bounds-checked; median over "
                     f"{args.rounds} interleaved rounds of {args.calls} calls each",
           "figures": res}
    path = Path(args.out) / f"cpu_launch_{out['commit']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
