"""Compile time per kernel (goal: <= 50 ms each), uncached.

Usage: python bench/bench_compile.py [--repeat N] [--out bench/results/compile_DATE.json]
       [--baseline EARLIER.json]  (records each kernel's earlier figure beside the new one)

Compiles every kernel of the example library ``anywave.kernels`` (with representative
compile-time constants: the defaults plus the variants the wrappers use) and every kernel
defined in tests/test_compiler*.py (and the precise-math specialisations) with the disk
cache off, best of N, and writes JSON with machine, commit and date beside each figure.
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


#: compile-time constant variants of the library kernels worth timing (besides the defaults)
LIBRARY_VARIANTS: dict[str, list[dict[str, object]]] = {
    "matmul_kernel": [{"epilogue": "none"}, {"epilogue": "bias"}, {"epilogue": "bias_relu"}],
    "softmax_kernel": [{"block": 64}, {"block": 256}],
    "layer_norm_kernel": [{"block": 64}, {"block": 256}],
    "histogram_kernel": [{"bins": 64}],
}


def _library_jobs():
    """(name, kernel, constants) for every @aw.kernel of ``anywave.kernels``."""
    import importlib
    import pkgutil

    import anywave.kernels as lib
    from anywave.compiler.kernel import KernelFunction

    seen: set[int] = set()
    for info in sorted(pkgutil.iter_modules(lib.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"anywave.kernels.{info.name}")
        for v in vars(mod).values():
            if isinstance(v, KernelFunction) and id(v) not in seen:
                seen.add(id(v))
                yield f"kernels.{info.name}.{v.name}", v, {}
                for consts in LIBRARY_VARIANTS.get(v.name, []):
                    label = ",".join(f"{k}={c}" for k, c in consts.items())
                    yield f"kernels.{info.name}.{v.name}[{label}]", v, consts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--baseline", default=None,
                    help="an earlier results file: its figure of each kernel is recorded as before_ms")
    a = ap.parse_args()
    before: dict[str, float] = {}
    if a.baseline:
        before = {r["kernel"]: r["compile_ms"] for r in json.loads(Path(a.baseline).read_text())["results"]}
    os.environ["ANYWAVE_NO_DISK_CACHE"] = "1"
    from anywave.compiler.kernel import KernelFunction

    jobs = list(_library_jobs())
    for f in sorted((ROOT / "tests").glob("test_compiler*.py")):
        if "property" in f.name or "fuzz" in f.name:
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
        kf.compile_kernel(kf._consts_from(consts))  # warm: imports, table lookups
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            k = kf.compile_kernel(kf._consts_from(consts))
            best = min(best, time.perf_counter() - t0)
        results.append({"kernel": name, "library": name.startswith("kernels."),
                        "compile_ms": round(best * 1e3, 3), "instructions": len(k.code),
                        "registers": k.registers})
        if name in before:
            results[-1]["before_ms"] = before[name]
        print(f"{name:56s} {best * 1e3:8.2f} ms  {len(k.code):5d} instructions  {k.registers:3d} registers")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=False).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
                                    text=True, check=False).stdout.strip())
    except OSError:
        commit, dirty = "unknown", False
    doc = {"benchmark": "compile time per kernel (best of N, uncached)", "goal_ms": 50,
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
           "src_modified": dirty, "baseline": a.baseline,
           "machine": {"platform": platform.platform(), "processor": platform.processor(),
                       "python": platform.python_version(), "cpus": os.cpu_count()},
           "repeat": a.repeat, "results": results,
           "max_ms": max(r["compile_ms"] for r in results),
           "library_max_ms": max((r["compile_ms"] for r in results if r["library"]), default=0.0),
           "over_goal": [r["kernel"] for r in results if r["compile_ms"] > 50]}
    out = Path(a.out) if a.out else ROOT / "bench" / "results" / f"compile_{_dt.date.today().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    slowest = max(results, key=lambda r: r["compile_ms"])
    print(f"wrote {out}; slowest {slowest['kernel']} {slowest['compile_ms']} ms; over 50 ms: {doc['over_goal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
