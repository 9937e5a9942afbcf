"""GEMM compile time per config, this tree against a peer tree in the same run.

Usage: python bench/bench_compile_gemm.py [--peer DIR] [--repeat N] [--rounds R] [--out FILE]

For each config of ``kernels.gemm.CONFIGS``, times ``gemm_f32_kernel.compile(**cfg)`` on a
cache miss (in-memory cache cleared, disk cache on in a fresh empty directory, so the
compile writes its ``.wbin`` entry as it does for a user), best of N, wall clock and process
CPU time. ``--peer`` names another checkout's root (e.g. an export of the commit before a
change: ``git archive REV src | tar -x -C DIR``); its figures are taken in the same run,
alternating rounds between the trees so that load changes hit both. Goal (issue 14):
<= 50 ms per config. Writes JSON with machine, commit, date and load average.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WORKER = r"""
import json, os, shutil, sys, tempfile, time
from anywave.kernels import gemm
k = gemm.gemm_f32_kernel
n = int(sys.argv[1])
def once(cfg):
    k._memo.clear()
    d = tempfile.mkdtemp(prefix="awc-bench-")
    os.environ["ANYWAVE_CACHE_DIR"] = d
    try:
        t, c = time.perf_counter(), time.process_time()
        k.compile(**cfg)
        return time.perf_counter() - t, time.process_time() - c
    finally:
        shutil.rmtree(d, ignore_errors=True)
once(gemm.CONFIGS[0])  # warm: imports, table lookups
out = {}
for cfg in gemm.CONFIGS:
    runs = [once(cfg) for _ in range(n)]
    out[",".join(f"{a}={b}" for a, b in cfg.items())] = (min(r[0] for r in runs), min(r[1] for r in runs))
print(json.dumps(out))
"""


def _run(tree: Path, repeat: int) -> dict[str, tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    env.pop("ANYWAVE_NO_DISK_CACHE", None)
    res = subprocess.run([sys.executable, "-c", _WORKER, str(repeat)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--peer", default=None, help="root of another checkout to time in the same run")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    trees = {"this": ROOT} | ({"peer": Path(a.peer).resolve()} if a.peer else {})
    best: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    load_before = os.getloadavg()
    for _ in range(a.rounds):
        for name, tree in trees.items():
            for cfg, (wall, cpu) in _run(tree, a.repeat).items():
                cur = best[name].setdefault(cfg, [float("inf"), float("inf")])
                cur[0], cur[1] = min(cur[0], wall), min(cur[1], cpu)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    results = []
    for cfg in best["this"]:
        row = {"config": cfg, "wall_ms": round(best["this"][cfg][0] * 1e3, 2),
               "cpu_ms": round(best["this"][cfg][1] * 1e3, 2)}
        if "peer" in best:
            row["peer_wall_ms"] = round(best["peer"][cfg][0] * 1e3, 2)
            row["peer_cpu_ms"] = round(best["peer"][cfg][1] * 1e3, 2)
        results.append(row)
        print(json.dumps(row))
    doc = {"benchmark": "gemm_f32_kernel.compile(**cfg) on a cache miss (disk cache on, empty), best of N",
           "goal_ms": 50, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "commit": commit, "peer": a.peer, "repeat": a.repeat, "rounds": a.rounds,
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count()},
           "load_average": {"before": [round(x, 2) for x in load_before],
                            "after": [round(x, 2) for x in os.getloadavg()]},
           "results": results}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
