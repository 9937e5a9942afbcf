"""Host launch overhead of ``CudaTarget.launch`` per call, against a bare ``cuLaunchKernel`` loop.

    PYTHONPATH=src python bench/bench_launch_overhead.py            # on a GPU: writes $OUT/launch_overhead.json
    PYTHONPATH=src python bench/bench_launch_overhead.py --fake     # no GPU: pure-Python overhead

Real mode (needs an NVIDIA GPU, cuda-python and PyTorch with CUDA), as bench_cuda.py's launch
section: the tiny kernel (bench/wave/tiny.wave: one u32 buffer, one u32 scalar) on grid 1 x 32
threads, ``--calls`` launches per round without syncing, one ``torch.cuda.synchronize()`` per
round; per-call time = round time / calls; figures are medians (and min/max) over ``--rounds``
(>= 10) rounds, all loops interleaved in each round after a warm-up round. Peers in the same
run: a bare ``cuLaunchKernel`` loop through cuda.bindings with a prebuilt kernelParams array (the
floor), the same with a checked ``cuCtxSetCurrent`` before each launch, and each context-set
flavour alone. Writes ``$OUT/launch_overhead.json`` (OUT: --out, else $OUT, else bench/results)
with device, driver, commit ($ANYWAVE_COMMIT or --commit), date, the figures, the no-GPU
(--fake) figures measured on the same host in a subprocess, and a profile of the anywave loop.

Fake mode (``--fake``) installs :class:`anywave.runtime.cuda.FakeDriver`, whose driver calls are
no-op Python callables of the same signatures, and a stand-in CUDA tensor class, so what is
measured is the pure-Python cost of ``CudaTarget.launch`` against a bare loop calling the same
fake ``cuLaunchKernel`` with prebuilt arguments. Prints a table; ``--json PATH`` also writes it.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from anywave.asm import assemble  # noqa: E402
from anywave.runtime import cuda  # noqa: E402


def load_tiny() -> Any:
    path = ROOT / "bench" / "wave" / "tiny.wave"
    return assemble(path.read_text(), "bench/wave/tiny.wave")


def stats(per_call_s: list[float]) -> dict[str, float]:
    us = [t * 1e6 for t in per_call_s]
    return {"median_us": statistics.median(us), "min_us": min(us), "max_us": max(us), "rounds": len(us)}


def measure(loops: dict[str, Callable[[], None]], calls: int, rounds: int,
            sync: Callable[[], None] = lambda: None) -> dict[str, dict[str, float]]:
    """Per-call seconds of each loop (``calls`` calls per round), interleaved over ``rounds``
    rounds after one warm-up round; ``sync`` runs before the clock starts and before it stops."""
    for fn in loops.values():
        fn()
    sync()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            acc[k].append((time.perf_counter() - t0) / calls)
    return {k: stats(v) for k, v in acc.items()}


def profile_top(fn: Callable[[], None], n: int = 12) -> list[str]:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(n)
    return [line.rstrip() for line in s.getvalue().splitlines() if line.strip()][:n + 8]


# ------------------------------------------------------------------------ fake mode

class FakeCudaTensor:
    """Quacks like a contiguous CUDA ``torch.Tensor`` on the launch path (is_cuda, is_contiguous,
    data_ptr), at the cost of plain Python attribute calls."""

    is_cuda = True

    def __init__(self, ptr: int) -> None:
        self._ptr = ptr

    def is_contiguous(self) -> bool:
        return True

    def data_ptr(self) -> int:
        return self._ptr


class FakeDeviceArray:
    """A device array known only through ``__cuda_array_interface__`` (as CuPy/Numba arrays)."""

    def __init__(self, ptr: int, n: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<u4", "data": (ptr, False),
                                         "version": 3, "strides": None}


def run_fake(calls: int, rounds: int) -> dict[str, Any]:
    fake = cuda.FakeDriver()
    saved = cuda._DRV, cuda._init_state, cuda._TORCH_TENSOR
    cuda._DRV, cuda._init_state, cuda._TORCH_TENSOR = fake, None, FakeCudaTensor
    try:
        tgt = cuda.CudaTarget(0, use_cache=False)
        m = load_tiny()
        buf = FakeCudaTensor(0x7F0000001000)
        cai = FakeDeviceArray(0x7F0000002000, 64)
        args = [buf, 32]
        dargs = {"out": buf, "n": 32}
        cargs = [cai, 32]
        tgt.launch(m, "tiny", 1, 32, args, sync=True)
        f = tgt._plans[(id(m), "tiny")][1].function
        vals = (ctypes.c_uint64 * 2)(0x7F0000001000, 32)
        ptrs = (ctypes.c_void_p * 2)(ctypes.addressof(vals), ctypes.addressof(vals) + 8)
        kp = ctypes.addressof(ptrs)
        ctx = tgt.device.context
        launch_drv, setctx = fake.cuLaunchKernel, fake.cuCtxSetCurrent

        def loop_anywave() -> None:
            launch = tgt.launch
            for _ in range(calls):
                launch(m, "tiny", 1, 32, args, sync=False)

        def loop_anywave_dict() -> None:
            launch = tgt.launch
            for _ in range(calls):
                launch(m, "tiny", 1, 32, dargs, sync=False)

        def loop_anywave_cai() -> None:
            launch = tgt.launch
            for _ in range(calls):
                launch(m, "tiny", 1, 32, cargs, sync=False)

        def loop_anywave_scalar_varies() -> None:
            launch = tgt.launch
            for i in range(calls):
                launch(m, "tiny", 1, 32, [buf, i & 63], sync=False)

        def loop_bare() -> None:
            launch = launch_drv
            for _ in range(calls):
                launch(f, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)

        def loop_bare_checked_ctx() -> None:
            launch, sc = launch_drv, setctx
            for _ in range(calls):
                if sc(ctx)[0]:
                    raise RuntimeError
                if launch(f, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)[0]:
                    raise RuntimeError

        def loop_empty() -> None:
            for _ in range(calls):
                pass

        loops = {"anywave_launch": loop_anywave, "anywave_launch_dict_args": loop_anywave_dict,
                 "anywave_launch_cuda_array_interface": loop_anywave_cai,
                 "anywave_launch_scalar_varies": loop_anywave_scalar_varies,
                 "bare_cuLaunchKernel": loop_bare, "bare_cuCtxSetCurrent_plus_cuLaunchKernel_checked":
                 loop_bare_checked_ctx, "empty_loop": loop_empty}
        res: dict[str, Any] = {"mode": "fake driver (no GPU): driver calls are no-op Python callables",
                               "python": platform.python_version(), "host": platform.node(),
                               "launches_per_round": calls}
        res.update(measure(loops, calls, rounds))
        res["anywave_minus_bare_us"] = res["anywave_launch"]["median_us"] - res["bare_cuLaunchKernel"]["median_us"]
        res["profile_top"] = profile_top(loop_anywave)
        return res
    finally:
        cuda._DRV, cuda._init_state, cuda._TORCH_TENSOR = saved


# ------------------------------------------------------------------------ real mode

def run_real(calls: int, rounds: int, commit: str | None) -> dict[str, Any]:
    import torch
    from cuda.bindings import driver as drv

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    tgt = cuda.CudaTarget(0)
    m = load_tiny()
    buf = torch.zeros(64, dtype=torch.int32, device="cuda")
    args = [buf, 32]
    dargs = {"out": buf, "n": 32}
    tgt.launch(m, "tiny", 1, 32, args, sync=True)
    if buf[:32].cpu().tolist() != list(range(32)):
        raise AssertionError("tiny kernel wrote wrong values")
    buf.zero_()
    tgt.launch(m, "tiny", 1, 32, [buf, 16], sync=True)  # a changed scalar really reaches the kernel
    if buf[:32].cpu().tolist() != list(range(16)) + [0] * 16:
        raise AssertionError("tiny kernel with n = 16 wrote wrong values")
    f = tgt._plans[(id(m), "tiny")][1].function
    vals = (ctypes.c_uint64 * 2)(buf.data_ptr(), 32)
    ptrs = (ctypes.c_void_p * 2)(ctypes.addressof(vals), ctypes.addressof(vals) + 8)
    kp = ctypes.addressof(ptrs)
    ctx = tgt.device.context
    ctypes_set = cuda._ctypes_context_setter(ctx)

    def loop_anywave() -> None:
        launch = tgt.launch
        for _ in range(calls):
            launch(m, "tiny", 1, 32, args, sync=False)

    def loop_anywave_dict() -> None:
        launch = tgt.launch
        for _ in range(calls):
            launch(m, "tiny", 1, 32, dargs, sync=False)

    tgt_b = cuda.CudaTarget(0)  # a second target whose context set goes through cuda.bindings
    tgt_b._context_setter = cuda._bindings_context_setter(tgt_b.device.context)

    def loop_anywave_bindings_ctx() -> None:
        launch = tgt_b.launch
        for _ in range(calls):
            launch(m, "tiny", 1, 32, args, sync=False)

    def loop_bare() -> None:
        launch = drv.cuLaunchKernel
        for _ in range(calls):
            launch(f, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)

    def loop_bare_checked_ctx() -> None:
        launch, setctx = drv.cuLaunchKernel, drv.cuCtxSetCurrent
        for _ in range(calls):
            if setctx(ctx)[0]:
                raise RuntimeError
            if launch(f, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)[0]:
                raise RuntimeError

    def loop_ctx_bindings() -> None:
        setctx = drv.cuCtxSetCurrent
        for _ in range(calls):
            setctx(ctx)

    loops: dict[str, Callable[[], None]] = {
        "anywave_launch": loop_anywave, "anywave_launch_dict_args": loop_anywave_dict,
        "anywave_launch_bindings_ctx_set": loop_anywave_bindings_ctx,
        "bare_cuLaunchKernel": loop_bare, "bare_cuCtxSetCurrent_plus_cuLaunchKernel_checked": loop_bare_checked_ctx,
        "cuCtxSetCurrent_only_bindings": loop_ctx_bindings}
    if ctypes_set is not None:
        fn_c, arg_c = ctypes_set[0], ctypes_set[1]

        def loop_ctx_ctypes() -> None:
            for _ in range(calls):
                fn_c(arg_c)

        loops["cuCtxSetCurrent_only_ctypes"] = loop_ctx_ctypes
    res: dict[str, Any] = {
        "kernel": "tiny (1 buffer, 1 u32 scalar), grid 1 x 32 threads, torch CUDA tensor, default stream",
        "launches_per_round": calls, "context_setter": tgt._context_setter[3]}
    res.update(measure(loops, calls, rounds, torch.cuda.synchronize))
    res["anywave_minus_bare_us"] = res["anywave_launch"]["median_us"] - res["bare_cuLaunchKernel"]["median_us"]
    res["goal_us"] = 10.0
    res["goal_met"] = res["anywave_launch"]["median_us"] <= 10.0
    res["profile_top"] = profile_top(loop_anywave)
    torch.cuda.synchronize()
    buf.zero_()
    tgt.launch(m, "tiny", 1, 32, args, sync=True)  # the fast path still computes the right thing
    res["check_after_timing"] = buf[:32].cpu().tolist() == list(range(32))
    p = tgt.device.props
    from importlib.metadata import version

    return {"device": {"name": p.name, "compute_capability": list(p.compute_capability), "arch": p.arch,
                       "multiprocessors": p.multiprocessors, "driver_version": p.driver_version},
            "commit": commit or os.environ.get("ANYWAVE_COMMIT", "unknown"),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda_bindings": version("cuda-bindings"), "host": platform.node(),
            "method": f"{calls} launches per round without sync, torch.cuda.synchronize() per round, "
                      f"per-call = round time / launches; medians over {rounds} interleaved rounds after warm-up",
            "launch": res}


def table(res: dict[str, Any]) -> str:
    bare = res["bare_cuLaunchKernel"]["median_us"]
    lines = ["| loop | median us/call | min | max | minus bare |", "|---|---|---|---|---|"]
    for k, v in res.items():
        if isinstance(v, dict) and "median_us" in v:
            lines.append(f"| {k} | {v['median_us']:.3f} | {v['min_us']:.3f} | {v['max_us']:.3f} | "
                         f"{v['median_us'] - bare:+.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake", action="store_true", help="no GPU: fake driver, pure-Python overhead")
    ap.add_argument("--calls", type=int, default=None, help="launches per round (10000 real, 20000 fake)")
    ap.add_argument("--rounds", type=int, default=11, help="timed rounds (>= 10)")
    ap.add_argument("--out", help="output directory, real mode (default $OUT or bench/results)")
    ap.add_argument("--commit", help="anywave commit to record (default $ANYWAVE_COMMIT)")
    ap.add_argument("--json", help="fake mode: also write the figures to this file")
    ns = ap.parse_args(argv)
    if ns.rounds < 10:
        ap.error("--rounds must be >= 10 (figures are medians of >= 10 repeats)")
    if ns.fake:
        res = run_fake(ns.calls or 20000, ns.rounds)
        print(table(res))
        print("\n".join(res["profile_top"]))
        if ns.json:
            Path(ns.json).write_text(json.dumps(res, indent=1) + "\n")
        return 0
    ok, why = cuda.driver_status()
    if not ok:
        print(f"no CUDA: {why} (use --fake to measure the pure-Python overhead)")
        return 2
    out_dir = Path(ns.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    result = run_real(ns.calls or 10000, ns.rounds, ns.commit)
    fake_json = out_dir / "launch_overhead_fake.json"
    try:  # the pure-Python share on this host, in a clean process (the fake driver swaps globals)
        subprocess.run([sys.executable, __file__, "--fake", "--rounds", str(ns.rounds), "--json", str(fake_json)],
                       check=True, capture_output=True, timeout=300)
        result["fake_driver_same_host"] = json.loads(fake_json.read_text())
        fake_json.unlink()
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        result["fake_driver_same_host"] = {"error": f"{type(e).__name__}: {e}"}
    path = out_dir / "launch_overhead.json"
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(table(result["launch"]))
    fk = result["fake_driver_same_host"]
    if "anywave_minus_bare_us" in fk:
        print(f"fake driver on this host: anywave - bare = {fk['anywave_minus_bare_us']:.3f} us")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
