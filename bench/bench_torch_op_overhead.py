"""Per-call cost of the torch ops ``anywave.torch.ops.mm`` / ``linear`` at 1024^3 (float32), in
one run against ``torch.mm`` and against a bare launch of the same GEMM kernel (issue 14).

    PYTHONPATH=src python bench/bench_torch_op_overhead.py          # GPU: writes $OUT/torch_op_overhead.json
    PYTHONPATH=src python bench/bench_torch_op_overhead.py --fake   # no GPU: pure-Python host cost

Real mode (an NVIDIA GPU, cuda-python, PyTorch with CUDA; TF32 off for ``torch.mm``), 1024 x
1024 float32 CUDA tensors:

* ``gpu_ms``: time per call on the GPU's timeline, as bench/gpu_async_spill.py measured the
  1.02 ms of the issue: ``--calls`` calls between two CUDA events after warm-up (when the host
  is slower than the kernel, this is the host's time per call);
* ``host_us``: the host's own time per call: a burst of ``--burst`` calls after a
  synchronisation, timed with ``perf_counter`` without waiting (the launch queue does not fill
  in a burst this short, so no call waits for the GPU);

each the median (min, max) over ``--rounds`` interleaved rounds, for ``ops.mm``, ``ops.linear``,
``torch.mm``, ``torch.nn.functional.linear`` and the bare launch ``gemm_f32_kernel(...)`` of the
config the op chooses (the kernel call the op makes, with the op's arguments: the host floor of
the op), and the GPU time of every tile config of :mod:`anywave.kernels.gemm` that fits (bare
launches; which config the op should pick). Checks in the same run: ``ops.mm`` / ``ops.linear``
equal bit for bit the bare kernel and every config (the arithmetic order does not depend on the
tile). Also the custom_op wrapper's own cost (``ops.relu`` on 32 floats against its bare
kernel launch), a cProfile of the ``ops.mm`` host path, and the ``--fake`` figures of the same
host (a subprocess). JSON: device, driver, commit ($ANYWAVE_COMMIT, --commit or git), date.

Fake mode (``--fake``; no GPU needed): the same host paths in pure Python, the driver replaced
by :class:`anywave.runtime.cuda.FakeDriver` (no-op calls of the same signatures):

* the CUDA launch of the GEMM (``gemm_f32_kernel(...)`` on fake CUDA device arrays, and the
  op's fast path ``_gemm_fast_path`` on them: what the op adds around the launch);
* the whole ``ops.mm`` / ``ops.linear`` path (torch dispatcher, custom_op wrapper, fast path,
  kernel launch plan) on CPU tensors, with the CPU target set to a registered no-op target
  (``null``: the emulator's description, a launch that does nothing), against the bare kernel
  call on the same tensors and target, and against an empty ``torch.library`` op (the
  dispatcher's floor);
* ``ops.relu`` (32 floats) against its bare kernel launch: the custom_op wrapper's overhead;
* the compiled CPU targets (OpenCL, SYCL, where available): ``ops.mm`` against its bare kernel
  launch and ``torch.mm`` at 64^3, where the kernel's own time is small;

and, for each host-path loop, its length in Python function calls (cProfile's count: a figure
that does not move with the machine's load, unlike the microseconds on a shared host).

``--json PATH`` writes the fake figures (real mode always writes ``torch_op_overhead.json``).
"""

from __future__ import annotations

import argparse
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
if not os.environ.get("ANYWAVE_BENCH_OTHER_SRC") and str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # (--baseline runs another tree's src, on PYTHONPATH)

N = 1024


def stats(vals: list[float]) -> dict[str, float]:
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "rounds": len(vals)}


def host_loop(loops: dict[str, Callable[[], None]], calls: int, rounds: int,
              sync: Callable[[], None] = lambda: None) -> dict[str, dict[str, float]]:
    """Host microseconds per call of each loop (``calls`` calls after ``sync``, timed without
    waiting), interleaved over ``rounds`` rounds after one warm-up round."""
    for fn in loops.values():
        for _ in range(3):
            fn()
    sync()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            acc[k].append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return {k: stats(v) for k, v in acc.items()}


def profile_top(fn: Callable[[], None], calls: int, n: int = 18) -> list[str]:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(n)
    return [line.rstrip() for line in s.getvalue().splitlines() if line.strip()][:n + 8]


def python_calls(fn: Callable[[], None], calls: int = 50) -> float:
    """Python-level function calls per call of ``fn`` (cProfile's count, C functions included):
    a measure of the host path's length that does not depend on the machine's load."""
    import cProfile
    import pstats

    fn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    return pstats.Stats(prof).total_calls / calls  # type: ignore[attr-defined]


def _commit(given: str | None) -> str:
    if given or os.environ.get("ANYWAVE_COMMIT"):
        return given or os.environ["ANYWAVE_COMMIT"]
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ------------------------------------------------------------------------ fake mode

def _register_null_target() -> None:
    """A host-memory target whose launch does nothing (the emulator's description), so the
    op path runs in full without any kernel work."""
    from anywave.runtime import targets as rt
    from anywave.runtime.emulator import EmulatorTarget

    info = EmulatorTarget(32).info

    class NullTarget:
        def __init__(self, wave_width: int | None = None, **_: Any) -> None:
            self.info = info

        def launch(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any, **_: Any) -> None:
            return None

    rt.register_target("null", lambda: (True, "", (info,)), NullTarget)


def run_fake(calls: int, rounds: int, cpu_targets: bool = True) -> dict[str, Any]:
    import numpy as np
    import torch

    import anywave as aw
    from anywave.kernels import gemm as G
    from anywave.runtime import cuda
    from anywave.torch import kernels as TK
    from anywave.torch import ops

    res: dict[str, Any] = {"mode": "fake (no GPU): FakeDriver for CUDA; the ops on CPU tensors with a no-op CPU "
                                   "target", "python": platform.python_version(), "torch": torch.__version__,
                           "host": platform.node(), "calls_per_round": calls, "shape": [N, N, N],
                           "device": "none: anywave.runtime.cuda.FakeDriver (reports a fake H200, sm_90, 132 SMs) and "
                                     "the no-op 'null' CPU target", "driver": "FakeDriver (no-op driver calls)",
                           "cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                           "load_average": list(os.getloadavg())}
    loops: dict[str, Callable[[], None]] = {}

    # --- the CUDA launch of the GEMM, driver faked, on fake device arrays
    fake = cuda.FakeDriver()
    saved = cuda._DRV, cuda._init_state
    cuda._DRV, cuda._init_state = fake, None
    try:
        da, db, dc = (aw.empty(N * N, aw.f32, target="cuda") for _ in range(3))
        dbias = aw.empty(N, aw.f32, target="cuda")
        cfg = ops._gemm_config(N, N, N, "cuda:0")
        grid, wg = G.launch_shape(N, N, cfg)
        consts = (cfg["bm"], cfg["bn"], cfg["bk"], "none")
        res["fake_cuda_config"] = dict(cfg)
        fargs = {"a": da, "b": db, "bias": dbias, "c": dc, "m": N, "n": N, "k": N, "trans_a": False,
                 "trans_b": False, "use_bias": False}
        loops["fake_cuda: gemm_f32_kernel(...) bare launch"] = lambda: G.gemm_f32_kernel(
            da, db, dbias, dc, N, N, N, *consts, grid=grid, workgroup=wg, target="cuda:0")
        loops["fake_cuda: gemm_f32_kernel(..., bm=, bn=, bk=, epilogue=) by keyword"] = lambda: G.gemm_f32_kernel(
            da, db, dbias, dc, N, N, N, epilogue="none", **cfg, grid=grid, workgroup=wg, target="cuda:0")
        loops["fake_cuda: the op's fast path _gemm_fast_path(args)"] = lambda: ops._gemm_fast_path(
            fargs, "cuda:0", None)
        # a buffer by keyword never has a plan: the full launch path, which every call of the
        # op's fast path took before (its constants came by keyword)
        loops["fake_cuda: the full launch path (no plan)"] = lambda: G.gemm_f32_kernel(
            da, db, dbias, c=dc, m=N, n=N, k=N, epilogue="none", **cfg, grid=grid, workgroup=wg, target="cuda:0")
        res["fake_cuda"] = host_loop(loops, calls, rounds)
        res["fake_cuda_python_calls_per_call"] = {k: python_calls(f) for k, f in loops.items()}
        res["fake_cuda_profile_fast_path"] = profile_top(loops["fake_cuda: the op's fast path _gemm_fast_path(args)"],
                                                         calls)
    finally:
        cuda._DRV, cuda._init_state = saved

    # --- the whole op on CPU tensors, no-op CPU target
    _register_null_target()
    prev = ops.set_cpu_target("null")
    try:
        x, y = torch.randn(N, N), torch.randn(N, N)
        w, bias = torch.randn(N, N), torch.randn(N)
        c = torch.empty(N, N)
        cfg = ops._gemm_config(N, N, N, "null")
        grid, wg = G.launch_shape(N, N, cfg)
        dummy = torch.zeros(4)
        small = torch.randn(32)
        relu_out = torch.empty(32)

        def empty_impl(a: Any, b: Any) -> Any:
            return torch.empty(N, N)

        empty_op = torch.library.custom_op("anywave_bench::empty_op", empty_impl, mutates_args=(),
                                           schema="(Tensor a, Tensor b) -> Tensor")
        empty_op.register_fake(lambda a, b: a.new_empty(N, N))

        loops = {
            "ops.mm(x, y)": lambda: ops.mm(x, y),
            "bare gemm_f32_kernel(...) (the op's launch)": lambda: G.gemm_f32_kernel(
                x, y, dummy, c, N, N, N, cfg["bm"], cfg["bn"], cfg["bk"], "none", grid=grid, workgroup=wg,
                target="null"),
            "empty torch.library op returning torch.empty": lambda: empty_op(x, y),
            "torch.empty(1024, 1024)": lambda: torch.empty(N, N),
            "ops.relu(32 floats)": lambda: ops.relu(small),
            "bare relu kernel (32 floats)": lambda: TK.relu(small, relu_out, 32, grid=1, workgroup=TK.BLOCK,
                                                           target="null"),
        }
        res["null_cpu_target"] = host_loop(loops, calls, rounds)
        # linear copies the (1024, 1024) weight to (in, out) order first: on the CPU that copy is
        # milliseconds of real work (on CUDA an asynchronous device copy), so fewer calls
        lin = {"ops.linear(x, w, bias) (includes the CPU copy of w.T)": lambda: ops.linear(x, w, bias)}
        res["null_cpu_target"].update(host_loop(lin, max(calls // 20, 5), rounds))
        loops.update(lin)
        res["null_cpu_target_python_calls_per_call"] = {k: python_calls(f) for k, f in loops.items()}
        res["null_cpu_target_config"] = dict(cfg)
        res["profile_ops_mm"] = profile_top(loops["ops.mm(x, y)"], calls)
        t = res["null_cpu_target"]
        res["ops_mm_minus_bare_us"] = t["ops.mm(x, y)"]["median"] - \
            t["bare gemm_f32_kernel(...) (the op's launch)"]["median"]
        res["ops_mm_over_bare"] = t["ops.mm(x, y)"]["median"] / t["bare gemm_f32_kernel(...) (the op's launch)"][
            "median"]
        res["relu_wrapper_minus_bare_us"] = t["ops.relu(32 floats)"]["median"] - \
            t["bare relu kernel (32 floats)"]["median"]
        _ = np
    finally:
        ops.set_cpu_target(prev[0], **prev[1])
    res["cpu_targets"] = _cpu_targets(calls, rounds) if cpu_targets else {"skipped": "--no-cpu-targets"}
    return res


def _cpu_targets(calls: int, rounds: int) -> dict[str, Any]:
    """ops.mm against its bare kernel launch and torch.mm on the compiled CPU targets at a
    small shape (64 x 64 x 64: the kernel's own time is small, the host path shows)."""
    from anywave.runtime import targets as rt
    from anywave.torch import ops

    out: dict[str, Any] = {}
    for name in ("opencl", "sycl"):
        st = rt.target_status(name)
        if st is None or not st.available:
            out[name] = {"skipped": st.reason if st is not None else "not registered"}
            continue
        prev = ops.set_cpu_target(name)
        try:
            out[name] = _cpu_target(name, 64, calls, rounds)
        finally:
            ops.set_cpu_target(prev[0], **prev[1])
    return out


def _cpu_target(name: str, m: int, calls: int, rounds: int) -> dict[str, Any]:
    import torch

    from anywave.kernels import gemm as G
    from anywave.torch import ops

    x, y, c, dummy = torch.randn(m, m), torch.randn(m, m), torch.empty(m, m), torch.zeros(4)
    cfg = ops._gemm_config(m, m, m, name)
    grid, wg = G.launch_shape(m, m, cfg)
    loops = {"ops.mm(x, y)": lambda: ops.mm(x, y),
             "bare gemm_f32_kernel(...)": lambda: G.gemm_f32_kernel(
                 x, y, dummy, c, m, m, m, cfg["bm"], cfg["bn"], cfg["bk"], "none", grid=grid, workgroup=wg,
                 target=name),
             "torch.mm(x, y)": lambda: torch.mm(x, y)}
    r = host_loop(loops, max(calls // 10, 20), rounds)
    return {"shape": [m, m, m], "config": dict(cfg), "us_per_call": r,
            "ops_mm_minus_bare_us": r["ops.mm(x, y)"]["median"] - r["bare gemm_f32_kernel(...)"]["median"],
            "same_bits": bool(torch.equal(ops.mm(x, y).view(torch.int32), c.view(torch.int32)))}


def run_probe(calls: int, rounds: int) -> dict[str, Any]:
    """The two host paths every anywave revision since the GEMM fast path has (``--baseline``
    runs this on another revision's tree): the op's fast path on fake CUDA device arrays and
    the whole ``ops.mm`` on the no-op CPU target, 1024^3."""
    import torch

    import anywave as aw
    from anywave.runtime import cuda
    from anywave.torch import ops

    fake = cuda.FakeDriver()
    cuda._DRV, cuda._init_state = fake, None
    da, db, dc = (aw.empty(N * N, aw.f32, target="cuda") for _ in range(3))
    dbias = aw.empty(4, aw.f32, target="cuda")
    fargs = {"a": da, "b": db, "bias": dbias, "c": dc, "m": N, "n": N, "k": N, "trans_a": False, "trans_b": False,
             "use_bias": False}
    _register_null_target()
    ops.set_cpu_target("null")
    x, y = torch.randn(N, N), torch.randn(N, N)
    loops = {"fake_cuda: the op's fast path _gemm_fast_path(args)": lambda: ops._gemm_fast_path(fargs, "cuda:0", None),
             "null_cpu_target: ops.mm(x, y)": lambda: ops.mm(x, y)}
    res: dict[str, Any] = {"us_per_call": host_loop(loops, calls, rounds),
                           "python_calls_per_call": {k: python_calls(f, 20) for k, f in loops.items()},
                           "anywave": str(Path(aw.__file__).resolve().parent)}
    return res


def run_baseline(rev: str, calls: int, rounds: int) -> dict[str, Any]:
    """:func:`run_probe` on revision ``rev`` (its ``src`` from ``git archive``) and on this tree,
    each in a fresh process, one after the other on the same host."""
    import tempfile

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True)
        for label, src in ((f"baseline {rev}", Path(tmp) / "src"), ("this tree", ROOT / "src")):
            env = dict(os.environ, PYTHONPATH=str(src), ANYWAVE_BENCH_OTHER_SRC="1")
            r = subprocess.run([sys.executable, __file__, "--probe", "--calls", str(calls), "--rounds", str(rounds)],
                               capture_output=True, text=True, env=env, timeout=600)
            out[label] = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr[-2000:]}
    return out


# ------------------------------------------------------------------------ real mode

class _HostEvent:
    """--dry-run's stand-in for torch.cuda.Event (host clock)."""

    def __init__(self, **_: Any) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: _HostEvent) -> float:
        return (other.t - self.t) * 1e3


def run_real(calls: int, burst: int, rounds: int, commit: str | None, dry_run: bool = False) -> dict[str, Any]:
    """The GPU measurements (module docstring). ``dry_run``: the same code on CPU tensors and the
    no-op ``null`` target, to check the script on a machine without a GPU (figures meaningless)."""
    import types

    import numpy as np
    import torch

    from anywave.kernels import gemm as G
    from anywave.torch import kernels as TK
    from anywave.torch import ops

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    if dry_run:
        _register_null_target()
        ops.set_cpu_target("null")
        dev = torch.device("cpu")
        cu = types.SimpleNamespace(
            synchronize=lambda: None, Event=_HostEvent,
            get_device_properties=lambda d: types.SimpleNamespace(name="dry run (CPU, no-op target)", major=0,
                                                                  minor=0, multi_processor_count=0))
    else:
        dev = torch.device("cuda", torch.cuda.current_device())
        cu = torch.cuda
    x, y = torch.randn(N, N, device=dev), torch.randn(N, N, device=dev)
    w, bias = torch.randn(N, N, device=dev), torch.randn(N, device=dev)
    c = torch.empty(N, N, device=dev)
    dummy = torch.zeros(4, device=dev)
    target = "null" if dry_run else f"cuda:{dev.index}"
    cfg = ops._gemm_config(N, N, N, target)
    grid, wg = G.launch_shape(N, N, cfg)
    wt = w.t().contiguous()

    def bare(cf: dict[str, int], out: torch.Tensor) -> Callable[[], None]:
        g, t = G.launch_shape(N, N, cf)
        return lambda: G.gemm_f32_kernel(x, y, dummy, out, N, N, N, cf["bm"], cf["bn"], cf["bk"], "none", grid=g,
                                         workgroup=t, target=target)

    res: dict[str, Any] = {"shape": [N, N, N], "op_config": dict(cfg), "op_grid": list(grid), "op_workgroup": wg,
                           "sm_count": cu.get_device_properties(dev).multi_processor_count}
    # --- bits: the op, the bare kernel and every config
    got = ops.mm(x, y)
    bare(cfg, c)()
    lin = ops.linear(x, w, bias)
    outs = {}
    for cf in G.CONFIGS:
        if G.fits(N, N, N, cf):
            o = torch.empty(N, N, device=dev)
            bare(cf, o)()
            outs[json.dumps(cf)] = o
    cu.synchronize()
    u = got.view(torch.int32)
    res["mm_equals_bare_kernel"] = bool(torch.equal(u, c.view(torch.int32)))
    res["mm_equals_every_config"] = {k: bool(torch.equal(u, o.view(torch.int32))) for k, o in outs.items()}
    lin_ref = torch.empty(N, N, device=dev)
    g0, t0 = G.launch_shape(N, N, cfg)
    G.gemm_f32_kernel(x, wt, bias, lin_ref, N, N, N, cfg["bm"], cfg["bn"], cfg["bk"], "bias", grid=g0, workgroup=t0,
                      target=target)
    cu.synchronize()
    res["linear_equals_bare_kernel_bias_epilogue"] = bool(torch.equal(lin.view(torch.int32),
                                                                      lin_ref.view(torch.int32)))
    small = torch.randn(32, device=dev)
    relu_out = torch.empty(32, device=dev)
    res["relu_equals_bare"] = bool(torch.equal(ops.relu(small), torch.clamp(small, min=0.0)))

    loops: dict[str, Callable[[], None]] = {
        "ops.mm(x, y)": lambda: ops.mm(x, y),
        "ops.linear(x, w, bias)": lambda: ops.linear(x, w, bias),
        "torch.mm(x, y) (TF32 off)": lambda: torch.mm(x, y),
        "torch.nn.functional.linear(x, w, bias)": lambda: torch.nn.functional.linear(x, w, bias),
        "bare gemm_f32_kernel(...) (the op's config)": bare(cfg, c),
    }
    for k, o in outs.items():
        loops[f"bare config {k}"] = bare(json.loads(k), o)
    sync = cu.synchronize

    def gpu_loop() -> dict[str, dict[str, float]]:
        for fn in loops.values():
            for _ in range(3):
                fn()
        sync()
        acc: dict[str, list[float]] = {k: [] for k in loops}
        for _ in range(rounds):
            for k, fn in loops.items():
                s, e = cu.Event(enable_timing=True), cu.Event(enable_timing=True)
                sync()
                s.record()
                for _ in range(calls):
                    fn()
                e.record()
                e.synchronize()
                acc[k].append(s.elapsed_time(e) / calls)
        return {k: stats(v) for k, v in acc.items()}

    res["gpu_ms_per_call"] = gpu_loop()
    res["host_us_per_call"] = host_loop({k: v for k, v in loops.items() if not k.startswith("bare config")}, burst,
                                        rounds, sync)
    empty_op = torch.library.custom_op("anywave_bench::empty_like_op", lambda a: torch.empty_like(a), mutates_args=(),
                                       schema="(Tensor a) -> Tensor")
    empty_op.register_fake(lambda a: torch.empty_like(a))
    res["custom_op_wrapper_host_us"] = host_loop({
        "ops.relu(32 floats)": lambda: ops.relu(small),
        "empty torch.library op (torch.empty_like): the dispatcher's floor": lambda: empty_op(small),
        "bare relu kernel (32 floats)": lambda: TK.relu(small, relu_out, 32, grid=1, workgroup=TK.BLOCK,
                                                       target=target),
        "torch.relu(32 floats)": lambda: torch.relu(small)}, burst, rounds, sync)
    g = res["gpu_ms_per_call"]
    h = res["host_us_per_call"]
    res["ratio_gpu_ops_mm_over_torch_mm"] = g["ops.mm(x, y)"]["median"] / g["torch.mm(x, y) (TF32 off)"]["median"]
    res["ratio_host_ops_mm_over_bare_launch"] = h["ops.mm(x, y)"]["median"] / \
        h["bare gemm_f32_kernel(...) (the op's config)"]["median"]
    res["ratio_host_ops_linear_over_bare_launch"] = h["ops.linear(x, w, bias)"]["median"] / \
        h["bare gemm_f32_kernel(...) (the op's config)"]["median"]
    cfg_ms = {k.removeprefix("bare config "): v["median"] for k, v in g.items() if k.startswith("bare config ")}
    res["fastest_config_gpu"] = min(cfg_ms, key=cfg_ms.get) if cfg_ms else None
    res["op_config_is_fastest"] = res["fastest_config_gpu"] == json.dumps(cfg)
    res["profile_ops_mm_host"] = profile_top(loops["ops.mm(x, y)"], 200)
    sync()
    p = cu.get_device_properties(dev)
    try:
        from anywave.runtime import cuda

        driver = cuda.driver_version()
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        driver = f"unknown ({type(e).__name__})"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = ""
    _ = np
    return {"what": "per-call time of anywave.torch.ops.mm / linear at 1024^3 f32 against torch.mm and a bare launch "
                    "of the same GEMM kernel (issue 14)",
            "device": p.name, "compute_capability": f"{p.major}.{p.minor}", "driver": driver, "nvidia_smi": smi,
            "commit": _commit(commit), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
            "method": f"gpu_ms: {calls} calls between CUDA events after warm-up, per call; host_us: bursts of {burst} "
                      f"calls after a sync, perf_counter, per call; medians over {rounds} interleaved rounds",
            "result": res}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake", action="store_true", help="no GPU: fake driver / no-op CPU target, host cost only")
    ap.add_argument("--calls", type=int, default=None, help="calls per round (real: 20 between events; fake: 200)")
    ap.add_argument("--burst", type=int, default=16, help="real mode: calls per host-time burst")
    ap.add_argument("--rounds", type=int, default=11, help="timed rounds (>= 10)")
    ap.add_argument("--out", help="real mode: output directory (default $OUT, else bench/results)")
    ap.add_argument("--commit", help="commit to record (default $ANYWAVE_COMMIT, else git)")
    ap.add_argument("--json", help="fake mode: also write the figures to this file")
    ap.add_argument("--no-cpu-targets", action="store_true", help="fake mode: skip the OpenCL/SYCL section")
    ap.add_argument("--baseline", metavar="REV", help="fake mode: also run the fast-path/ops.mm probe on git revision "
                    "REV's src and on this tree (fresh processes), e.g. the parent of the fix")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)  # --baseline's subprocess
    ap.add_argument("--dry-run", action="store_true", help="real mode's code on CPU tensors and a no-op target "
                    "(checks the script without a GPU; figures meaningless; writes nothing unless --out)")
    ns = ap.parse_args(argv)
    if ns.rounds < 10:
        ap.error("--rounds must be >= 10 (figures are medians of >= 10 repeats)")
    if ns.probe:
        print(json.dumps(run_probe(ns.calls or 100, ns.rounds)))
        return 0
    if ns.fake:
        res = run_fake(ns.calls or 200, ns.rounds, not ns.no_cpu_targets)
        if ns.baseline:
            res["baseline"] = run_baseline(ns.baseline, min(ns.calls or 100, 100), ns.rounds)
            for label, r in res["baseline"].items():
                for k, v in r.get("us_per_call", {}).items():
                    nc = r["python_calls_per_call"][k]
                    print(f"{label:16s} {k:60s} {v['median']:9.2f} us {nc:7.1f} Python calls")
        res["commit"] = _commit(ns.commit)
        res["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        for section in ("fake_cuda", "null_cpu_target"):
            for k, v in res[section].items():
                nc = res[f"{section}_python_calls_per_call"][k]
                print(f"{section:16s} {k:70s} {v['median']:9.2f} us {nc:7.1f} Python calls")
        print(f"ops.mm - bare launch: {res['ops_mm_minus_bare_us']:.2f} us (x{res['ops_mm_over_bare']:.2f}); "
              f"relu wrapper - bare: {res['relu_wrapper_minus_bare_us']:.2f} us")
        for name, r in res["cpu_targets"].items():
            if "us_per_call" in r:
                print(f"{name}: " + ", ".join(f"{k} {v['median']:.1f} us" for k, v in r["us_per_call"].items())
                      + f"; same bits {r['same_bits']}")
        print("\n".join(res["profile_ops_mm"]))
        if ns.json:
            Path(ns.json).write_text(json.dumps(res, indent=1) + "\n")
        return 0
    from anywave.runtime import cuda

    if ns.dry_run:
        result = run_real(ns.calls or 20, ns.burst, ns.rounds, ns.commit, dry_run=True)
        if ns.out:
            Path(ns.out, "torch_op_overhead_dry_run.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"dry run ok: {len(result['result']['gpu_ms_per_call'])} timed loops, op config "
              f"{result['result']['op_config']}")
        return 0
    ok, why = cuda.driver_status()
    if not ok:
        print(f"no CUDA: {why} (use --fake for the pure-Python host cost)")
        return 2
    out_dir = Path(ns.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    result = run_real(ns.calls or 20, ns.burst, ns.rounds, ns.commit)
    fake_json = out_dir / "torch_op_overhead_fake_same_host.json"
    try:  # the pure-Python share on this host, in a clean process (the fake driver swaps globals)
        subprocess.run([sys.executable, __file__, "--fake", "--no-cpu-targets", "--calls", "100", "--rounds",
                        str(ns.rounds), "--json", str(fake_json)], check=True, capture_output=True, timeout=40)
        result["fake_same_host"] = json.loads(fake_json.read_text())
        fake_json.unlink()
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        result["fake_same_host"] = {"error": f"{type(e).__name__}: {e}"}
    path = out_dir / "torch_op_overhead.json"
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    r = result["result"]
    for k, v in r["gpu_ms_per_call"].items():
        hv = r["host_us_per_call"].get(k)
        print(f"{k:60s} gpu {v['median']:.4f} ms/call" + (f"  host {hv['median']:.1f} us/call" if hv else ""))
    print(f"ops.mm / torch.mm (GPU time): {r['ratio_gpu_ops_mm_over_torch_mm']:.2f}; ops.mm host / bare launch host: "
          f"{r['ratio_host_ops_mm_over_bare_launch']:.2f}; op config {r['op_config']} fastest: "
          f"{r['op_config_is_fastest']} ({r['fastest_config_gpu']})")
    print(f"bits: mm == bare {r['mm_equals_bare_kernel']}, every config {r['mm_equals_every_config']}, linear == bare "
          f"{r['linear_equals_bare_kernel_bias_epilogue']}")
    print(f"wrote {path}")
    ok = r["mm_equals_bare_kernel"] and all(r["mm_equals_every_config"].values()) and \
        r["linear_equals_bare_kernel_bias_epilogue"] and r["relu_equals_bare"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
