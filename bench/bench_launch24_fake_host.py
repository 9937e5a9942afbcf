"""Host cost per launch of each door into the CUDA driver, on any host (no GPU): the CUDA driver
is ``FakeDriver`` (``anywave.runtime.cuda_fake``: ``cuLaunchKernel`` a no-op), so the figures are
anywave's own per-call work on the CPU. With ``--ab BASE_SRC`` the same measurement runs in
alternating processes on another source tree (``BASE_SRC``, e.g. a ``git archive`` of the base
commit's ``src``) and on this one, for a before/after of a change to the launch layer.

    PYTHONPATH=src python bench/bench_launch24_fake_host.py --out bench/results
    PYTHONPATH=src python bench/bench_launch24_fake_host.py --ab /tmp/base/src --pairs 6 --out bench/results

Loops (a burst of ``--calls`` calls each, ``--rounds`` rounds in a shuffled order per round,
median and min of the rounds, microseconds per call), all on ``y = x + a`` over 32 threads
with ``aw.array`` device arrays:

* ``kernel(...)`` through its launch plan's native launcher and through the generated Python
  launcher (the native one's fallback), Python and NumPy scalars;
* the plan's launcher alone (``plan(args)``);
* the runtime target's ``launch(module, ...)`` (its bound launcher), the conformance runner
  (``cuda_runner``) and the module-level ``anywave.jit`` target's ``launch`` (the CLI's door);
* ``kernel(...)`` with NumPy arrays (copied in and out, the fake's copies no-ops) and with
  ``check=True`` (the bounds-checked build): launch plans without a plan launcher, which launch
  through the driver's bound launch (``CudaTarget.bind``; before it, through ``launch``).

JSON ``launch24_fake_host.json`` (``launch24_fake_host_ab.json`` with ``--ab``): machine,
commit, date, every figure.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _force_python_launcher() -> Any:
    """Make the next CUDA plan use the generated Python launcher; returns an undo function.
    (The native launcher's module moved with the launch layer: look in both places.)"""
    import importlib

    for name in ("anywave.runtime.cuda_native", "anywave.jit.native"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        saved = mod._STATE
        mod.status()  # built (or not) now, outside the timed loops
        mod._STATE = (None, "forced by the benchmark")

        def undo(mod: Any = mod, saved: Any = saved) -> None:
            mod._STATE = saved

        return undo
    raise RuntimeError("no native launcher module found")


_KERNELS: Any = None


def _kernels() -> Any:
    """The two kernels (module-level functions, as a user's: their fingerprint is exact, so
    a repeated call takes the kernel's last native plan first)."""
    global _KERNELS
    if _KERNELS is None:
        import anywave as aw

        def add1(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
            i = aw.global_id(0)
            if i < n:
                y[i] = x[i] + a

        def add1_py(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
            i = aw.global_id(0)
            if i < n:
                y[i] = x[i] + a

        _KERNELS = aw.kernel(add1), aw.kernel(add1_py)
    return _KERNELS


def worker(calls: int, rounds: int) -> dict[str, Any]:
    import numpy as np

    import anywave as aw
    from anywave.runtime import cuda

    cuda._DRV, cuda._init_state = cuda.FakeDriver(), None

    add1, add1_py = _kernels()
    dx, dy = aw.zeros(32, aw.f32, target="cuda"), aw.zeros(32, aw.f32, target="cuda")
    a32, n32 = np.float32(1.0), np.int32(32)
    add1(dx, dy, 1.0, 32, grid=1, workgroup=32)
    add1(dx, dy, a32, n32, grid=1, workgroup=32)
    undo = _force_python_launcher()
    try:
        add1_py(dx, dy, 1.0, 32, grid=1, workgroup=32)
    finally:
        undo()
    paths = {k.__name__ if hasattr(k, "__name__") else "?": sorted({str(getattr(p, "path", "CallPlan"))[:40]
                                                                    for p in k._calls.values()})
             for k in (add1, add1_py)}
    plan = next(p for p in add1._calls.values() if getattr(p, "path", "") == "native")
    module = add1.compile()
    tgt = cuda.CudaTarget(0)
    run = cuda.cuda_runner(tgt)
    from anywave.jit.targets import get_target

    door = get_target("cuda")
    args = (dx, dy, 1.0, 32)
    hx, hy = np.zeros(32, np.float32), np.zeros(32, np.float32)
    named = {"x": dx, "y": dy, "a": 1.0, "n": 32}

    def loop(fn: Callable[[], Any]) -> Callable[[], None]:
        def go() -> None:
            for _ in range(calls):
                fn()
        return go

    loops: dict[str, Callable[[], None]] = {
        "kernel(...) aw.array, native launcher": loop(lambda: add1(dx, dy, 1.0, 32, grid=1, workgroup=32)),
        "kernel(...) aw.array, np.float32/np.int32 scalars, native": loop(
            lambda: add1(dx, dy, a32, n32, grid=1, workgroup=32)),
        "kernel(...) aw.array, Python launcher": loop(lambda: add1_py(dx, dy, 1.0, 32, grid=1, workgroup=32)),
        "the plan's native launcher alone, plan(args)": loop(lambda: plan(args)),
        "runtime target launch(module, ...) (bound launcher)": loop(
            lambda: tgt.launch(module, "add1", 1, 32, [dx, dy, 1.0, 32], sync=False)),
        "conformance runner cuda_runner(...)(module, ...)": loop(
            lambda: run(module, "add1", (1, 1, 1), (32, 1, 1), named, 32)),
        "anywave.jit target launch(module, ...) (the CLI's door)": loop(
            lambda: door.launch(module, "add1", grid=(1, 1, 1), workgroup=(32, 1, 1), args=[dx, dy, 1.0, 32])),
        "kernel(...) NumPy arrays (copied in and out), launch plan": loop(
            lambda: add1(hx, hy, 1.0, 32, grid=1, workgroup=32, target="cuda")),
        "kernel(...) aw.array, check=True (bounds-checked build), launch plan": loop(
            lambda: add1(dx, dy, 1.0, 32, grid=1, workgroup=32, check=True)),
    }
    for fn in loops.values():  # warm: bound launchers made, everything compiled
        for _ in range(3):
            fn()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    order = list(loops)
    for _ in range(rounds):
        random.shuffle(order)
        for k in order:
            t = time.perf_counter()
            loops[k]()
            acc[k].append((time.perf_counter() - t) / calls * 1e6)
    return {"us_per_call": acc, "plan_paths": paths}


def _commit(src: str) -> str:
    try:
        return subprocess.check_output(["git", "-C", src, "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:  # noqa: BLE001
        return os.environ.get("ANYWAVE_COMMIT", "unknown")


def _run_worker(src: str, calls: int, rounds: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.check_output([sys.executable, __file__, "--worker", "--calls", str(calls), "--rounds",
                                   str(rounds)], env=env, text=True)
    return json.loads(out.strip().splitlines()[-1])


def _summary(rounds: list[float]) -> dict[str, float]:
    return {"median_us": round(statistics.median(rounds), 3), "min_us": round(min(rounds), 3), "n": len(rounds)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--ab", metavar="BASE_SRC", help="also measure this source tree, in alternating processes")
    p.add_argument("--pairs", type=int, default=5, help="process pairs with --ab")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--name", help="the JSON's file name (default launch24_fake_host[_ab].json)")
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.calls, a.rounds)))
        return 0
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = {"head": here} if not a.ab else {"base": str(Path(a.ab).resolve()), "head": here}
    acc: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    paths: dict[str, Any] = {}
    for _ in range(1 if not a.ab else a.pairs):
        for t, src in (list(trees.items()) if random.random() < 0.5 else list(trees.items())[::-1]):
            r = _run_worker(src, a.calls, a.rounds)
            paths[t] = r["plan_paths"]
            for k, v in r["us_per_call"].items():
                acc[t].setdefault(k, []).extend(v)
    res: dict[str, Any] = {
        "what": "host cost per call of the doors into the CUDA driver, FakeDriver (no GPU; cuLaunchKernel a no-op)",
        "device": f"{platform.processor() or platform.machine()} host, {os.cpu_count()} CPUs (shared), no GPU",
        "commit": _commit(here), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "calls_per_round": a.calls, "rounds_per_process": a.rounds,
        "trees": trees, "plan_paths": paths,
        "us_per_call": {t: {k: _summary(v) for k, v in d.items()} for t, d in acc.items()}}
    if a.ab:
        res["base_commit_note"] = "base: the source tree given with --ab"
        res["head_over_base"] = {k: round(res["us_per_call"]["head"][k]["median_us"]
                                          / res["us_per_call"]["base"][k]["median_us"], 3)
                                 for k in res["us_per_call"]["head"] if k in res["us_per_call"]["base"]}
    out = Path(a.out) / (a.name or ("launch24_fake_host_ab.json" if a.ab else "launch24_fake_host.json"))
    out.write_text(json.dumps(res, indent=1))
    for t, d in res["us_per_call"].items():
        print(t)
        for k, v in d.items():
            print(f"  {k}: median {v['median_us']:.3f} us, min {v['min_us']:.3f}")
    if a.ab:
        print("head/base", json.dumps(res["head_over_base"], indent=1))
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
