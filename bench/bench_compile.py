"""Compile time per kernel (goal: <= 50 ms each), uncached.

Usage: python bench/bench_compile.py [--repeat N] [--out bench/results/compile_DATE.json]

Compiles every kernel defined in tests/test_compiler*.py (and the precise-math
specialisations) with the disk cache off, best of N, and writes JSON with machine, commit
and date beside each figure.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ["ANYWAVE_NO_DISK_CACHE"] = "1"
    from anywave.compiler.kernel import KernelFunction

    jobs = []
    for f in sorted((ROOT / "tests").glob("test_compiler*.py")):
        if "property" in f.name:
            continue
        mod = _load(f)
        for v in vars(mod).values():
            if isinstance(v, KernelFunction):
                if v.name == "math_all":
                    for fn in ("exp", "log", "sin", "tanh", "erf"):
                        jobs.append((f"math_all[{fn}]", v, {"fn": fn}))
                elif v.name.startswith("e_"):
                    continue
                else:
                    jobs.append((v.name, v, {}))
    results = []
    for name, kf, consts in jobs:
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            k = kf.compile_kernel(kf._consts_from(consts))
            best = min(best, time.perf_counter() - t0)
        results.append({"kernel": name, "compile_ms": round(best * 1e3, 3), "instructions": len(k.code),
                        "registers": k.registers})
        print(f"{name:24s} {best * 1e3:8.2f} ms  {len(k.code):5d} instructions  {k.registers:3d} registers")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=False).stdout.strip()
    except OSError:
        commit = "unknown"
    doc = {"benchmark": "compile time per kernel (best of N, uncached)", "goal_ms": 50,
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
           "machine": {"platform": platform.platform(), "processor": platform.processor(),
                       "python": platform.python_version(), "cpus": os.cpu_count()},
           "repeat": a.repeat, "results": results,
           "max_ms": max(r["compile_ms"] for r in results)}
    out = Path(a.out) if a.out else ROOT / "bench" / "results" / f"compile_{_dt.date.today().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}; slowest {doc['max_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
