"""Compile time per kernel (goal: <= 50 ms each), uncached.

Usage: python bench/bench_compile.py [--repeat N] [--out bench/results/compile_DATE.json]
       [--baseline EARLIER.json]  (records each kernel's earlier figures beside the new ones, and
       the ratios full_ratio / full_cpu_ratio of the full figures to them)
       [--only SUBSTRING]  (time only the kernels whose name contains it, e.g. gemm)

Compiles every kernel of the example library ``anywave.kernels`` (with representative
compile-time constants: the defaults plus the variants the wrappers use, and every config of
``kernels.gemm.CONFIGS``) and every kernel defined in tests/test_compiler*.py (and the
precise-math specialisations) with the disk cache off, best of N, and writes JSON with
machine, commit, date and the load average beside each figure.

Per kernel: ``compile_ms``, the pipeline alone (``KernelFunction.compile_kernel``: frontend,
passes, register allocation, emission; wall clock), and ``full_ms``, what
``KernelFunction.compile`` does on a cache miss: the pipeline, the one verification of the
output and the ``.wbin`` bytes the disk cache stores (wall clock); ``full_cpu_ms`` is the
same in process CPU time, the figure to read on a loaded machine (other processes' work
does not count in it; the cache and scheduling effects of the load still do).
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
    from anywave.jit.kernel import KernelFunction

    seen: set[int] = set()
    for info in sorted(pkgutil.iter_modules(lib.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"anywave.kernels.{info.name}")
        for v in vars(mod).values():
            if isinstance(v, KernelFunction) and id(v) not in seen:
                seen.add(id(v))
                yield f"kernels.{info.name}.{v.name}", v, {}
                variants = list(LIBRARY_VARIANTS.get(v.name, []))
                if v.name == "gemm_f32_kernel":  # every config the autotuner compiles
                    variants += [dict(c) for c in mod.CONFIGS if c != mod.DEFAULT]
                for consts in variants:
                    label = ",".join(f"{k}={c}" for k, c in consts.items())
                    yield f"kernels.{info.name}.{v.name}[{label}]", v, consts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--baseline", default=None,
                    help="an earlier results file: its figures of each kernel are recorded beside the new ones")
    ap.add_argument("--only", default=None, help="time only the kernels whose name contains this")
    a = ap.parse_args()
    before: dict[str, dict] = {}
    if a.baseline:
        before = {r["kernel"]: r for r in json.loads(Path(a.baseline).read_text())["results"]}
    os.environ["ANYWAVE_NO_DISK_CACHE"] = "1"
    from anywave.jit.kernel import KernelFunction

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
    if a.only:
        jobs = [j for j in jobs if a.only in j[0]]
    from anywave.binary.module import Module
    from anywave.binary.verify import verify
    from anywave.binary.wbin import write_wbin

    def full(kf, consts):  # KernelFunction.compile on a miss: pipeline, one verification, .wbin bytes
        m = Module(kernels=[kf.compile_kernel(kf._consts_from(consts))])
        verify(m)
        write_wbin(m, verify=False)
        return m.kernels[0]

    load_before = os.getloadavg()
    results = []
    from anywave.errors import WaveError

    skipped: list[str] = []
    for name, kf, consts in jobs:
        try:
            kf.compile_kernel(kf._consts_from(consts))  # warm: imports, table lookups
        except WaveError:  # a test's kernel written to be refused (tests/test_compiler_errors.py)
            skipped.append(name)
            continue
        best = best_full = best_cpu = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            k = kf.compile_kernel(kf._consts_from(consts))
            best = min(best, time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            full(kf, consts)
            best_full = min(best_full, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        results.append({"kernel": name, "library": name.startswith("kernels."),
                        "compile_ms": round(best * 1e3, 3), "full_ms": round(best_full * 1e3, 3),
                        "full_cpu_ms": round(best_cpu * 1e3, 3), "instructions": len(k.code),
                        "registers": k.registers})
        if name in before:  # the baseline's figures of this kernel, and the ratios to them
            r, b = results[-1], before[name]
            r["before_ms"] = b["compile_ms"]
            for key in ("full_ms", "full_cpu_ms"):
                if key in b:
                    r["before_" + key] = b[key]
                    r[key.replace("_ms", "_ratio")] = round(r[key] / b[key], 3) if b[key] else None
        print(f"{name:56s} {best * 1e3:8.2f} ms  full {best_full * 1e3:8.2f} ms ({best_cpu * 1e3:7.2f} ms CPU)  "
              f"{len(k.code):5d} instructions  {k.registers:3d} registers", flush=True)
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
           "load_average": {"before": [round(x, 2) for x in load_before],
                            "after": [round(x, 2) for x in os.getloadavg()]},
           "repeat": a.repeat, "results": results,
           "max_ms": max(r["compile_ms"] for r in results),
           "library_max_ms": max((r["compile_ms"] for r in results if r["library"]), default=0.0),
           "over_goal": [r["kernel"] for r in results if r["compile_ms"] > 50],
           "over_goal_full": [r["kernel"] for r in results if r["full_ms"] > 50],
           "skipped_refused": skipped}
    out = Path(a.out) if a.out else ROOT / "bench" / "results" / f"compile_{_dt.date.today().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    slowest = max(results, key=lambda r: r["compile_ms"])
    print(f"wrote {out}; slowest {slowest['kernel']} {slowest['compile_ms']} ms; over 50 ms: {doc['over_goal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
