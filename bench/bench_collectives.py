"""Cost of W-invariance: ``aw.workgroup_reduce`` (f32 sum; the tree's levels inside a wave by
shuffles, then the wave nodes through local memory) against two peers measured in the same
run on the same target:

* ``local_only`` — the same tree with every level through local memory (one barrier per
  level, no wave operation): the other design docs/spec.md §8.14 considered;
* ``butterfly`` — the previous, W-dependent library reduction (``wave_sum`` per wave, then
  the wave partials in order by every thread), what a vendor library typically does.

Each kernel sums 256 (or ``--wg``) f32 per workgroup over ``--n`` elements, launched
``--repeat`` times after a warm-up launch (which includes the runtime compile); the figure
is the median launch time. Writes ``bench/results/collectives_<target>_<date>.json``
(machine, device, commit, date).

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
def tree_shuffle(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    i = aw.global_id(0)
    s = aw.workgroup_reduce(x[i])
    if aw.local_id(0) == 0:
        out[aw.workgroup_id(0)] = s


@aw.kernel
def local_only(x: aw.In[aw.f32], out: aw.Out[aw.f32], *, wg: int = 256):
    buf = aw.local_array(aw.f32, wg)
    t = aw.local_id(0)
    buf[t] = x[aw.global_id(0)]
    aw.barrier()
    d = 1
    while d < wg:
        j = t * (d + d)
        if j + d < wg:
            buf[j] = buf[j] + buf[j + d]
        aw.barrier()
        d = d + d
    if t == 0:
        out[aw.workgroup_id(0)] = buf[0]


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
    from anywave.compiler.targets import get_target

    tgt = get_target(a.target)
    widths = a.widths or list(tgt.wave_widths or (8, 16, 32, 64))
    n = a.n - a.n % a.wg
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    g = n // a.wg
    rows = []
    for W in widths:
        for name, k, consts in (("tree_shuffle", tree_shuffle, {}), ("local_only", local_only, {"wg": a.wg}),
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
                         "median_s": round(med, 5), "gelem_per_s": round(n / med / 1e9, 3)})
            print(f"W={W:<3} {name:<13} first {first:7.2f} s  median {med * 1e3:8.2f} ms  "
                  f"{n / med / 1e9:6.2f} Gelem/s", flush=True)
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
