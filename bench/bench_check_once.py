"""Host cost per launch on the CPU targets (the emulator, OpenCL, the ``cpu`` target, Vulkan,
SYCL), before and after a change of the launch layer: the same loops in alternating processes on
another source tree (``--ab BASE_SRC``, e.g. a ``git archive`` of the base commit's ``src``) and on
this one. Written for issue 24's "one check of each argument" (a launch plan's call no longer runs
the driver's argument checks, ``Driver.prepare``, on every call).

    PYTHONPATH=src python bench/bench_check_once.py --ab /tmp/base/src --pairs 6 --out bench/results

Loops (a burst of ``--calls`` calls each, ``--rounds`` rounds in a shuffled order per process,
microseconds per call; median and min over every round of every process of a tree), all on
``y = x + a`` over 32 threads with NumPy arrays:

* ``kernel(...)``, Python scalars and np.float32/np.int32 scalars: the whole call, device included;
* the module-level door ``get_target(t).launch(module, ...)`` (a driver called directly: it
  checks every argument, before and after);
* ``host:`` the same calls with the device-specific part a no-op, the same in both trees: on the
  compiled runtimes everything a launch does before it moves buffers and enqueues (base: the
  runner's ``prepare``; after: the bound launch's word conversion, the runner's ``run`` a no-op),
  on the emulator everything but executing the instructions (its batches a no-op).

JSON ``check_once_cpu_ab.json``: machine, commit, date, every figure, the ratio head/base.
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

TARGETS = ("emulator", "opencl", "cpu", "vulkan", "sycl")
RUNNERS = {"opencl": ("anywave.runtime.opencl", "OpenCLRunner"), "cpu": ("anywave.runtime.cpu", "CpuRunner"),
           "vulkan": ("anywave.runtime.vulkan", "VulkanRunner"), "sycl": ("anywave.runtime.sycl", "SyclRunner")}

_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import anywave as aw

        def add1(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
            i = aw.global_id(0)
            if i < n:
                y[i] = x[i] + a

        _KERNEL = aw.kernel(add1)
    return _KERNEL


class _NoDevice:
    """Makes the device-specific part of a launch a no-op on ``target`` while active (the same
    cut in both trees: see the module docs)."""

    def __init__(self, target: str) -> None:
        import importlib

        self.saved: list[tuple[Any, str, Any]] = []
        if target == "emulator":
            from anywave.emu import fragments, machine

            class Batch:
                frames = ()

                def __init__(self, *a: Any, **k: Any) -> None:
                    pass

                def run_code(self, code: Any) -> None:
                    pass

            self.patches = [(machine, "Batch", Batch), (machine, "finish_batch", lambda b: None),
                            (fragments, "finish_batch", lambda b: None)]
            return
        mod, cls = RUNNERS[target]
        runner = getattr(importlib.import_module(mod), cls)
        if hasattr(runner, "run"):  # the driver's device part is its own method
            self.patches = [(runner, "run", lambda self, launch, margs, sync: None)]
        else:  # the device part follows prepare inside the runner's call

            def prepare_only(self: Any, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any,
                             wave_width: int, *, sync: bool = True, check: Any = None, **_: Any) -> None:
                self.prepare(module, kernel, grid, workgroup, args, wave_width, check)

            self.patches = [(runner, "__call__", prepare_only)]

    def __enter__(self) -> None:
        for owner, name, value in self.patches:
            self.saved.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, value)

    def __exit__(self, *exc: Any) -> None:
        while self.saved:
            owner, name, value = self.saved.pop()
            setattr(owner, name, value)


def worker(calls: int, rounds: int, targets: list[str]) -> dict[str, Any]:
    import numpy as np

    from anywave.jit.targets import available_targets, get_target

    add1 = _kernel()
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    a32, n32 = np.float32(1.0), np.int32(32)
    loops: dict[str, Callable[[], None]] = {}
    stubs: dict[str, _NoDevice] = {}
    have = available_targets()
    ran = []
    for t in targets:
        if t not in have:
            continue
        ran.append(t)
        module = add1.compile()
        door = get_target(t)

        def call(t: str = t) -> None:
            for _ in range(calls):
                add1(x, y, 1.0, 32, grid=1, workgroup=32, target=t)

        def call_np(t: str = t) -> None:
            for _ in range(calls):
                add1(x, y, a32, n32, grid=1, workgroup=32, target=t)

        def direct(door: Any = door, module: Any = module) -> None:
            for _ in range(calls):
                door.launch(module, "add1", grid=(1, 1, 1), workgroup=(32, 1, 1), args=[x, y, 1.0, 32])

        for what, fn in (("kernel(...) NumPy arrays, Python scalars", call),
                         ("kernel(...) NumPy arrays, np.float32/np.int32 scalars", call_np),
                         ("module door target.launch(module, ...)", direct)):
            loops[f"{t}: {what}"] = fn
            loops[f"{t}: host: {what}"] = fn
            stubs[f"{t}: host: {what}"] = _NoDevice(t)
        call()
        np.testing.assert_array_equal(y, x + 1)  # the loops compute, before they are timed
    for k, fn in loops.items():  # warm: plans recorded, programs built
        with stubs.get(k) or _Null():
            fn()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    order = list(loops)
    for _ in range(rounds):
        random.shuffle(order)
        for k in order:
            with stubs.get(k) or _Null():
                t0 = time.perf_counter()
                loops[k]()
                acc[k].append((time.perf_counter() - t0) / calls * 1e6)
    y[:] = 0
    add1(x, y, 1.0, 32, grid=1, workgroup=32, target=ran[-1])
    np.testing.assert_array_equal(y, x + 1)  # the stubs were taken out again
    return {"us_per_call": acc, "targets": ran}


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _commit(src: str) -> str:
    try:
        return subprocess.check_output(["git", "-C", src, "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:  # noqa: BLE001
        return os.environ.get("ANYWAVE_COMMIT", "unknown")


def _run_worker(src: str, calls: int, rounds: int, targets: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.check_output([sys.executable, __file__, "--worker", "--calls", str(calls), "--rounds",
                                   str(rounds), "--targets", ",".join(targets)], env=env, text=True)
    return json.loads(out.strip().splitlines()[-1])


def _summary(rounds: list[float]) -> dict[str, float]:
    return {"median_us": round(statistics.median(rounds), 2), "min_us": round(min(rounds), 2), "n": len(rounds)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--ab", metavar="BASE_SRC", help="also measure this source tree, in alternating processes")
    p.add_argument("--pairs", type=int, default=4, help="process pairs with --ab")
    p.add_argument("--base-commit", default=None, help="the commit BASE_SRC was taken from (recorded)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    a = p.parse_args()
    targets = [t for t in a.targets.split(",") if t]
    if a.worker:
        print(json.dumps(worker(a.calls, a.rounds, targets)))
        return 0
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = {"head": here} if not a.ab else {"base": str(Path(a.ab).resolve()), "head": here}
    acc: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    ran: dict[str, Any] = {}
    for _ in range(1 if not a.ab else a.pairs):
        for t, src in (list(trees.items()) if random.random() < 0.5 else list(trees.items())[::-1]):
            r = _run_worker(src, a.calls, a.rounds, targets)
            ran[t] = r["targets"]
            for k, v in r["us_per_call"].items():
                acc[t].setdefault(k, []).extend(v)
    res: dict[str, Any] = {
        "what": "host cost per launch on the CPU targets, y = x + a over 32 threads, NumPy arrays "
                "(see bench/bench_check_once.py)",
        "device": f"{platform.processor() or platform.machine()} host, {os.cpu_count()} CPUs (shared with other jobs)",
        "commit": _commit(here), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "calls_per_round": a.calls, "rounds_per_process": a.rounds,
        "process_pairs": a.pairs if a.ab else 1, "trees": trees, "targets": ran,
        "us_per_call": {t: {k: _summary(v) for k, v in d.items()} for t, d in acc.items()}}
    if a.ab:
        res["base_commit"] = a.base_commit or "the source tree given with --ab"
        res["head_over_base"] = {k: round(res["us_per_call"]["head"][k]["median_us"]
                                          / res["us_per_call"]["base"][k]["median_us"], 3)
                                 for k in res["us_per_call"]["head"] if k in res["us_per_call"]["base"]}
    out = Path(a.out) / ("check_once_cpu_ab.json" if a.ab else "check_once_cpu.json")
    out.write_text(json.dumps(res, indent=1))
    for t, d in res["us_per_call"].items():
        print(t)
        for k, v in d.items():
            print(f"  {k}: median {v['median_us']:.1f} us, min {v['min_us']:.1f}")
    if a.ab:
        print("head/base", json.dumps(res["head_over_base"], indent=1))
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
