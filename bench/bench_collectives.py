"""Cost of W-invariance: ``aw.workgroup_reduce`` (f32 sum; the pairwise tree over thread ids,
every level through local memory, docs/spec.md §8.15) against two peers measured in the same
run on the same target:

* ``shuffle_tree`` — the same tree (same bits) with its levels inside a wave done by
  ``wave_shfl_down`` and only the wave nodes through local memory: the alternative design
  (fewer barriers, more wave operations);
* ``butterfly`` — the previous, W-dependent library reduction (``wave_sum`` per wave, then
  the wave partials in order), what a vendor library typically does.

Each kernel sums ``--wg`` f32 per workgroup over ``--n`` elements, launched ``--repeat``
times after a warm-up launch (which includes the runtime compile); the figure is the median
launch time. Writes ``bench/results/collectives_<target>_<date>.json`` (machine, device,
commit, date).

    python bench/bench_collectives.py --target opencl [--wg 256] [--n 4194304] [--repeat 5]
    python bench/bench_collectives.py --target cuda            # on the H200
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import anywave as aw

ROOT = Path(__file__).resolve().parent.parent


@aw.kernel
def library(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    s = aw.workgroup_reduce(x[aw.global_id(0)])
    if aw.local_id(0) == 0:
        out[aw.workgroup_id(0)] = s


@aw.kernel
def shuffle_tree(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    # workgroups of at most 128 waves (the benchmark's)
    sums = aw.local_array(aw.f32, 128)
    i = aw.local_id(0)
    n = aw.workgroup_size(0)
    s = x[aw.global_id(0)]
    d = 1
    while d < aw.wave_width():
        o = aw.wave_shfl_down(s, d)
        s = aw.where(i + d < n, s + o, s)
        d = d + d
    if aw.lane_id() == 0:
        sums[aw.wave_id()] = s
    aw.barrier()
    m = aw.num_waves()
    d = 1
    while d < m:
        j = i * (d + d)
        if j + d < m:
            sums[j] = sums[j] + sums[j + d]
        aw.barrier()
        d = d + d
    if i == 0:
        out[aw.workgroup_id(0)] = sums[0]


@aw.kernel
def butterfly(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    sums = aw.local_array(aw.f32, 128)
    s = aw.wave_sum(x[aw.global_id(0)])
    if aw.lane_id() == 0:
        sums[aw.wave_id()] = s
    aw.barrier()
    if aw.local_id(0) == 0:
        total = sums[0]
        for w in range(1, aw.num_waves()):
            total = total + sums[w]
        out[aw.workgroup_id(0)] = total


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--wave-width", "-W", type=int, action="append", dest="widths")
    ap.add_argument("--wg", type=int, default=256)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    a = ap.parse_args(argv)
    from anywave.jit.targets import get_target

    tgt = get_target(a.target)
    widths = a.widths or list(tgt.wave_widths or (8, 16, 32, 64))
    n = a.n - a.n % a.wg
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    g = n // a.wg
    rows = []
    for W in widths:
        for name, k, consts in (("library", library, {}), ("shuffle_tree", shuffle_tree, {}),
                                ("butterfly", butterfly, {})):
            out = np.zeros(g, np.float32)
            t0 = time.perf_counter()
            res = k(x, out, grid=g, workgroup=a.wg, target=a.target, wave_width=W, **consts)
            first = time.perf_counter() - t0
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                k(x, out, grid=g, workgroup=a.wg, target=a.target, wave_width=W, **consts)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            rows.append({"kernel": name, "wave_width": res.wave_width, "first_launch_s": round(first, 3),
                         "median_s": round(med, 5), "melem_per_s": round(n / med / 1e6, 2)})
            print(f"W={W:<3} {name:<13} first {first:7.2f} s  median {med * 1e3:8.2f} ms  "
                  f"{n / med / 1e6:8.2f} Melem/s", flush=True)
    info = getattr(tgt._instance(widths[0]), "info", None)
    rec = {"bench": "collectives", "target": a.target, "device": getattr(info, "device", ""),
           "machine": platform.node(), "python": sys.version.split()[0], "commit": _commit(),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "n": n, "workgroup": a.wg, "repeat": a.repeat, "results": rows}
    a.out.mkdir(parents=True, exist_ok=True)
    p = a.out / f"collectives_{a.target}_{_dt.date.today().isoformat()}.json"
    p.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
