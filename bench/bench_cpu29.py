"""Issue 29's figures: the native ``cpu`` target against NumPy, in one run on this machine.

    python bench/bench_cpu29.py [--out DIR] [--reps 5] [--quick]

Kernels (library kernels unless said): element-wise ``add4``/``saxpy4``/``gelu4`` over 2^24
floats; row softmax and layer norm (``softmax4``/``layer_norm4``) on 4096 x 4096; fp32 GEMM
1024^3 (``kernels.gemm``, exact: the spec's k order) vs ``numpy.matmul`` (OpenBLAS); one
5-point Jacobi step on 512 x 512 (a kernel written here: the library has none); an inclusive
u32 scan of 10^6 (``prefix_sum``) vs ``np.cumsum``; a 256-bin histogram of 10^6 values
(``histogram``) vs ``np.bincount``; first launch of a new kernel in a fresh process with a cold
and a warm disk cache. Every anywave result is checked against its reference (bits, or the
emulator's bits) before it is timed.

Each figure is the median of ``--reps`` calls through the host wrapper (as a user calls it),
after a warm-up call that compiles; NumPy runs in the same rounds, interleaved, so the shared
machine's load hits both alike (the figures are noisy: a 2-core machine shared with other
jobs). Writes ``OUT/cpu29_<commit>.json`` (machine, commit, date).
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
import tempfile
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
from anywave.kernels import scan as S  # noqa: E402
from anywave.kernels import vec as V  # noqa: E402

CPU_TIMES: dict[int, dict[str, float]] = {}  # id(the dict _median returned) -> process CPU seconds


def _median(fns: dict[str, Callable[[], Any]], reps: int, settle: float = 0.0) -> dict[str, float]:
    """Median wall seconds of each function over ``reps`` interleaved rounds (after a warm-up
    call); the median process CPU seconds go to :data:`CPU_TIMES`. ``settle``: seconds to wait
    before each timed call (OpenBLAS's threads spin for a while after a matmul and would take a
    core from whatever runs next)."""
    acc: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(reps):
        for k, f in fns.items():
            if settle:
                time.sleep(settle)
            t0, c0 = time.perf_counter(), time.process_time()
            f()
            acc[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    out = {k: statistics.median(v) for k, v in acc.items()}
    CPU_TIMES[id(out)] = {k: statistics.median(v) for k, v in cpu.items()}
    return out


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


@aw.kernel
def jacobi_kernel(u: aw.In[aw.f32], v: aw.Out[aw.f32], n: aw.i32):
    """One 5-point Jacobi step on an n x n grid (boundary copied): v = 0.25 * (N + S + E + W)."""
    i = aw.global_id(0)
    if i < n * n:
        r = i // n
        c = i - r * n
        if r == 0 or c == 0 or r == n - 1 or c == n - 1:
            v[i] = u[i]
        else:
            v[i] = 0.25 * ((u[i - n] + u[i + n]) + (u[i - 1] + u[i + 1]))


def np_jacobi(u: np.ndarray) -> np.ndarray:
    v = u.copy()
    v[1:-1, 1:-1] = np.float32(0.25) * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))
    return v


def jacobi(u: np.ndarray, target: str) -> np.ndarray:
    n = u.shape[0]
    v = np.empty_like(u)
    jacobi_kernel(u.ravel(), v.ravel(), n, grid=(n * n + 255) // 256, workgroup=256, target=target)
    return v


def _entry(tm: dict[str, float], peer: str, **extra: Any) -> dict[str, Any]:
    cpu = CPU_TIMES.get(id(tm), {})
    out = {"median_s": tm, f"over_{peer}": tm[peer] / tm["anywave"], **extra}
    if cpu:  # process CPU seconds (every thread): the cost, less sensitive to the other jobs
        out["median_cpu_s"] = cpu
        out[f"cpu_time_over_{peer}"] = cpu[peer] / cpu["anywave"] if cpu["anywave"] else None
    return out


def bench(reps: int, quick: bool) -> dict[str, Any]:
    t = "cpu"
    rng = np.random.default_rng(0)
    res: dict[str, Any] = {}
    n = 1 << (20 if quick else 24)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    ok = _same(V.add4(x, y, target=t), x + y)
    res["add4_2^24"] = _entry(_median({"anywave": lambda: V.add4(x, y, target=t), "numpy": lambda: x + y}, reps),
                              "numpy", bit_exact_vs_numpy=ok)
    a = np.float32(1.5)
    ok = _same(V.saxpy4(1.5, x, y, target=t), V.saxpy4(1.5, x, y, target="emulator")) if quick else None
    res["saxpy4_2^24"] = _entry(_median({"anywave": lambda: V.saxpy4(1.5, x, y, target=t),
                                         "numpy": lambda: a * x + y}, reps), "numpy", same_bits_as_emulator=ok)
    xs = x[: 1 << 16]
    ok = _same(V.gelu4(xs, target=t), V.gelu4(xs, target="emulator"))

    def np_gelu() -> np.ndarray:
        c0, c1 = np.float32(0.7978846), np.float32(0.044715)
        return np.float32(0.5) * x * (np.float32(1) + np.tanh(c0 * (x + c1 * x ** 3)))

    res["gelu4_2^24"] = _entry(_median({"anywave": lambda: V.gelu4(x, target=t), "numpy": np_gelu}, reps), "numpy",
                               same_bits_as_emulator_first_65536=ok)
    rows = 512 if quick else 4096
    xr = rng.standard_normal((rows, 4096), dtype=np.float32)
    gm = rng.standard_normal(4096, dtype=np.float32)
    bt = rng.standard_normal(4096, dtype=np.float32)
    small = xr[:8].copy()
    ok_s = _same(V.softmax4(small, target=t), V.softmax4(small, target="emulator"))
    ok_l = _same(V.layer_norm4(small, gm, bt, target=t), V.layer_norm4(small, gm, bt, target="emulator"))

    def np_softmax() -> np.ndarray:
        e = np.exp(xr - xr.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def np_layer_norm() -> np.ndarray:
        mu = xr.mean(axis=1, keepdims=True)
        return (xr - mu) / np.sqrt(xr.var(axis=1, keepdims=True) + 1e-5) * gm + bt

    res[f"softmax4_{rows}x4096"] = _entry(_median({"anywave": lambda: V.softmax4(xr, target=t), "numpy": np_softmax},
                                                  reps), "numpy", same_bits_as_emulator_8_rows=ok_s)
    res[f"layer_norm4_{rows}x4096"] = _entry(_median({"anywave": lambda: V.layer_norm4(xr, gm, bt, target=t),
                                                      "numpy": np_layer_norm}, reps), "numpy",
                                             same_bits_as_emulator_8_rows=ok_l)
    m = 256 if quick else 1024
    ga = rng.standard_normal((m, m), dtype=np.float32)
    gb = rng.standard_normal((m, m), dtype=np.float32)
    ok = _same(G.gemm(ga[:128, :128].copy(), gb[:128, :128].copy(), target=t),
               R.matmul_f32(ga[:128, :128], gb[:128, :128]))
    tm = _median({"anywave": lambda: G.gemm(ga, gb, target=t), "numpy": lambda: ga @ gb}, max(1, reps // 2), settle=0.3)
    res[f"gemm_{m}^3"] = _entry(tm, "numpy", bit_exact_vs_reference_128=ok,
                                gflop_per_s={k: 2 * m ** 3 / v / 1e9 for k, v in tm.items()})
    u = rng.standard_normal((512, 512), dtype=np.float32)
    ok = _same(jacobi(u, t), np_jacobi(u))
    res["jacobi_512^2"] = _entry(_median({"anywave": lambda: jacobi(u, t), "numpy": lambda: np_jacobi(u)}, reps),
                                 "numpy", bit_exact_vs_numpy=ok)
    d = rng.integers(0, 1000, 10 ** 6).astype(np.uint32)
    ok = _same(S.prefix_sum(d, target=t), np.cumsum(d, dtype=np.uint32))
    res["scan_u32_10^6"] = _entry(_median({"anywave": lambda: S.prefix_sum(d, target=t),
                                           "numpy": lambda: np.cumsum(d, dtype=np.uint32)}, reps), "numpy",
                                  bit_exact_vs_numpy=ok)
    h = rng.integers(0, 2 ** 32, 10 ** 6, dtype=np.uint64).astype(np.uint32)
    ok = _same(S.histogram(h, 256, target=t), np.bincount(h % 256, minlength=256).astype(np.uint32))
    res["histogram_256_10^6"] = _entry(_median({"anywave": lambda: S.histogram(h, 256, target=t),
                                                "numpy": lambda: np.bincount(h % 256, minlength=256)}, reps), "numpy",
                                       same_counts_as_numpy=ok)
    res["first_launch"] = first_launch()
    return res


_FIRST = """
import time, numpy as np
t0 = time.perf_counter()
import anywave as aw
@aw.kernel
def k(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * 3.0 + 1.0
x = np.ones(4096, np.float32); y = np.zeros_like(x)
t1 = time.perf_counter()
k(x, y, 4096, grid=16, workgroup=256, target="cpu")
t2 = time.perf_counter()
assert (y == 4).all()
print(t1 - t0, t2 - t1)
"""


def first_launch() -> dict[str, Any]:
    """Seconds of import and of the first launch in a fresh process, cold cache then warm."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "ANYWAVE_CACHE_DIR": d, "PYTHONPATH": str(ROOT / "src")}
        script = Path(d) / "first.py"  # kernels must live in a file (their source is read)
        script.write_text(_FIRST)
        for label in ("cold", "warm"):
            r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
            if r.returncode != 0:
                out[label] = {"error": r.stderr[-500:]}
                continue
            imp, first = (float(v) for v in r.stdout.split())
            out[label] = {"import_s": imp, "first_launch_s": first}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (default bench/results)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run; not the issue's figures)")
    ns = ap.parse_args(argv)
    out = Path(ns.out or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    from anywave.runtime.cpu import get_device

    dev = get_device()
    result: dict[str, Any] = {
        "environment": {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                        "anywave_commit": os.environ.get("ANYWAVE_COMMIT", commit), "device": dev.name,
                        "cores": dev.cores, "compiler": dev.cc_version, "python": platform.python_version(),
                        "numpy": np.__version__, "quick": ns.quick,
                        "note": "shared 2-core development machine (other jobs running): noisy; NumPy interleaved "
                                "in the same rounds"},
        "method": "host wrapper calls incl. any copies, median of reps after a warm-up call, NumPy interleaved; "
                  "median_cpu_s: process CPU seconds of the same calls (all threads); the GEMM rounds wait 0.3 s "
                  "before each timed call (OpenBLAS threads spin after a matmul)"}
    result["cpu"] = bench(ns.reps, ns.quick)
    print(json.dumps(result["cpu"], indent=1))
    path = out / f"cpu29_{result['environment']['anywave_commit']}{'_quick' if ns.quick else ''}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
