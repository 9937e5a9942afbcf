"""A/B of one step of the kernel call's CUDA launcher on any host, no GPU: the f32 scalar word
stored through a C float view of the parameter block (the launcher as generated at HEAD) against
the same launcher calling ``scalar()`` (abi.scalar_word through a repr-keyed cache), as the
H200 runs at 8632610 did (the view's guard compared a type name that never matched; fixed
after those runs). cuda.FakeDriver stands in for the driver (``cuLaunchKernel`` a no-op), so
the figures are the launcher's own host cost; interleaved rounds, medians.

    PYTHONPATH=src python bench/bench_launch24_fake_ab.py --out bench/results
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

import anywave as aw
from anywave.runtime import cuda

sys.path.insert(0, str(Path(__file__).parent))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    cuda._DRV, cuda._init_state = cuda.FakeDriver(), None
    import bench_launch24 as B

    dx, dy = aw.empty(32, aw.f32, target="cuda"), aw.empty(32, aw.f32, target="cuda")
    from anywave.runtime import cuda_native  # the A/B is of the generated Python launcher: no native one

    cuda_native._STATE = (None, "forced by the benchmark")
    B.add1(dx, dy, 1.0, 32, grid=1, workgroup=32)
    new = next(iter(B.add1._calls.values()))
    view = ("    if type(v2) is float and -3.4028235677973366e38 < v2 < 3.4028235677973366e38:\n        f32[4] = v2\n"
            "    else:\n        u32[4] = scalar(A2, v2)")
    assert view in new.source, new.source
    ns = dict(new.__globals__)
    exec(compile(new.source.replace(view, "    u32[4] = scalar(A2, v2)"), "<scalar()>", "exec"), ns)  # noqa: S102
    old = ns["fast"]
    args = (dx, dy, 1.0, 32)
    acc: dict[str, list[float]] = {"scalar() (as run on the H200 at 8632610)": [], "f32 view (HEAD)": []}
    for _ in range(a.rounds):
        for name, f in zip(acc, (old, new), strict=True):
            t = time.perf_counter()
            for _ in range(a.calls):
                f(args)
            acc[name].append((time.perf_counter() - t) / a.calls)
    try:
        commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:  # noqa: BLE001
        commit = os.environ.get("ANYWAVE_COMMIT", "unknown")
    res = {"what": "generated CUDA launcher fast(args) of add1(aw.array, aw.array, 1.0, 32), FakeDriver",
           "device": f"{platform.machine()} host, {os.cpu_count()} CPUs (shared), no GPU", "commit": commit,
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "calls": a.calls, "rounds": a.rounds,
           "us_per_call": {k: {"median": statistics.median(v) * 1e6, "min": min(v) * 1e6} for k, v in acc.items()}}
    out = Path(a.out) / "launch24_fake_float_view_ab.json"
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res["us_per_call"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
