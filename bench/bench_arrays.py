"""Issue 12 benches: data that stays on the device. Peers run in the same process, interleaved.

    python bench/bench_arrays.py overhead [--calls N --rounds R]   # CUDA: per-call host overhead
    python bench/bench_arrays.py chain [--log2n 26 --rounds R]     # CUDA: 10 launches vs torch
    python bench/bench_arrays.py chain-cpu [--log2n 24 --target opencl]  # OpenCL/SYCL vs NumPy
    python bench/bench_arrays.py torch-op                          # custom_op vs direct call (any device)

Each writes ``<OUT>/arrays_<what>.json`` (OUT: --out, else $OUT, else bench/results) with the
device, driver, commit ($ANYWAVE_COMMIT or ``git rev-parse``), date, method and figures.

* overhead: a 32-thread vadd (x + y into out, 32 floats) launched ``--calls`` times per round
  without waiting, one ``torch.cuda.synchronize()`` per round; per call = round time / calls;
  median / min / max over ``--rounds`` rounds. Loops: ``kernel(...)`` with anywave device
  arrays; ``kernel(...)`` with torch CUDA tensors; ``CudaTarget.launch`` (the runtime's bound
  launcher, issue 7's figure); the same vadd written in Triton (``kernel[grid](...)``);
  ``torch.add(x, y, out=out)``; the ``custom_op`` wrapper of the vadd called on the tensors.
* chain: 10 launches of ``dst = 0.5 * src + y`` over 2^log2n floats, alternating two buffers,
  on anywave device arrays, against ``torch.add(y, src, alpha=0.5, out=dst)`` (one kernel each
  as well); time per chain with CUDA events, median over rounds.
* chain-cpu: the same chain on an OpenCL (or SYCL) target's device arrays against NumPy
  (``np.multiply`` + ``np.add`` with ``out=``), wall time per chain; also the same chain with
  NumPy arrays as kernel arguments (in place through ``CL_MEM_USE_HOST_PTR``).
* torch-op: per-call time of the ``custom_op`` wrapper against a direct ``kernel(...)`` call
  with the same tensors (CUDA when available, else CPU tensors on the emulator at n = 32).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

import anywave as aw  # noqa: E402
from anywave.kernels import vec as V  # noqa: E402


@aw.kernel
def vadd(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] + y[i]


@aw.kernel
def axpy(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


def commit() -> str:
    c = os.environ.get("ANYWAVE_COMMIT")
    if c:
        return c
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def meta() -> dict[str, Any]:
    out: dict[str, Any] = {"commit": commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "host": platform.node(), "python": platform.python_version(), "cpu": platform.processor()}
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            out["gpu"] = r.stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return out


def stats(xs: list[float], scale: float = 1e6) -> dict[str, float]:
    v = [x * scale for x in xs]
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": len(v)}


def interleave(loops: dict[str, Callable[[], None]], rounds: int, sync: Callable[[], None],
               per: int) -> dict[str, list[float]]:
    for fn in loops.values():  # warm-up: compiles, plans, caches
        fn()
    sync()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            acc[k].append((time.perf_counter() - t0) / per)
    return acc


def write(name: str, result: dict[str, Any], out: str | None) -> Path:
    d = Path(out or os.environ.get("OUT") or ROOT / "bench" / "results")
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"arrays_{name}.json"
    p.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return p


# ----------------------------------------------------------------------------- overhead (CUDA)

def bench_overhead(calls: int, rounds: int) -> dict[str, Any]:
    import torch

    from anywave.runtime import cuda
    from anywave.torch.custom_ops import custom_op

    n = 32
    tx, ty, to = (torch.ones(n, device="cuda") for _ in range(3))
    dx, dy, do = (aw.array(np.ones(n, np.float32), target="cuda") for _ in range(3))
    tgt = cuda.CudaTarget(0)
    module = vadd.compile()
    op = custom_op("awbench::vadd", vadd, out_shape=lambda x, **_: x.shape, scalars={"n": lambda x, **_: x.numel()})

    def k_arrays() -> None:
        for _ in range(calls):
            vadd(dx, dy, do, n, grid=1, workgroup=32)

    def k_tensors() -> None:
        for _ in range(calls):
            vadd(tx, ty, to, n, grid=1, workgroup=32)

    targs = [tx, ty, to, n]

    def target_launch() -> None:
        for _ in range(calls):
            tgt.launch(module, "vadd", 1, 32, targs, sync=False)

    def torch_add() -> None:
        for _ in range(calls):
            torch.add(tx, ty, out=to)

    def torch_op() -> None:
        for _ in range(calls):
            op(tx, ty)

    loops: dict[str, Callable[[], None]] = {"anywave kernel(...) device arrays": k_arrays,
                                            "anywave kernel(...) torch CUDA tensors": k_tensors,
                                            "anywave CudaTarget.launch (bound launcher)": target_launch,
                                            "torch.add(out=)": torch_add,
                                            "anywave custom_op wrapper (allocates out)": torch_op}
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def tadd(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton's style
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

        def triton_loop() -> None:
            for _ in range(calls):
                tadd[(1,)](tx, ty, to, n, BLOCK=32)

        loops["triton kernel[grid](...)"] = triton_loop
        tver = triton.__version__
    except Exception as e:  # noqa: BLE001
        tver = f"unavailable: {type(e).__name__}: {e}"
    acc = interleave(loops, rounds, torch.cuda.synchronize, calls)
    np.testing.assert_array_equal(do.numpy(), np.full(n, 2, np.float32))
    props = tgt.device.props
    return {"what": "per-call host overhead of launching a 32-thread vadd (us per call)", **meta(),
            "device": props.name, "driver": props.driver_version, "torch": torch.__version__, "triton": tver,
            "calls_per_round": calls, "method": "calls launches per round without waiting, one "
            "torch.cuda.synchronize per round; per call = round time / calls; loops interleaved",
            "goal": "kernel(...) with device-resident arguments <= 10 us and below Triton",
            "per_call_us": {k: stats(v) for k, v in acc.items()}}


# ----------------------------------------------------------------------------- chain (CUDA)

def bench_chain(log2n: int, rounds: int) -> dict[str, Any]:
    import torch

    n = 1 << log2n
    g = np.random.default_rng(0)
    x = g.standard_normal(n).astype(np.float32)
    y = g.standard_normal(n).astype(np.float32)
    grid, wg = (n + 255) // 256, 256
    a, b, dy = aw.array(x, target="cuda"), aw.empty(n, aw.f32, target="cuda"), aw.array(y, target="cuda")
    ta, tb, ty = torch.from_numpy(x).cuda(), torch.empty(n, device="cuda"), torch.from_numpy(y).cuda()

    def aw_chain() -> None:
        src, dst = a, b
        for _ in range(10):
            axpy(src, dy, dst, 0.5, n, grid=grid, workgroup=wg)
            src, dst = dst, src

    def aw_torch_chain() -> None:
        src, dst = ta, tb
        for _ in range(10):
            axpy(src, ty, dst, 0.5, n, grid=grid, workgroup=wg)
            src, dst = dst, src

    a4, b4 = aw.array(x, target="cuda"), aw.empty(n, aw.f32, target="cuda")

    def aw_chain4() -> None:
        src, dst = a4, b4
        for _ in range(10):
            V.saxpy4_into_kernel(0.5, src, dy, dst, n, grid=V.elementwise_grid(n, 2), workgroup=V.WG)
            src, dst = dst, src

    def torch_chain() -> None:
        src, dst = ta, tb
        for _ in range(10):
            torch.add(ty, src, alpha=0.5, out=dst)
            src, dst = dst, src

    loops = {"anywave device arrays": aw_chain, "anywave on torch tensors": aw_torch_chain,
             "anywave device arrays, axpy4 (load4/store4)": aw_chain4, "torch.add(alpha=0.5)": torch_chain}
    for fn in loops.values():
        fn()
    torch.cuda.synchronize()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            acc[k].append(e0.elapsed_time(e1) / 1e3)
    # the result is right: 10 steps of 0.5 * s + y in float32 (one rounding per step)
    ref = x.copy()
    for _ in range(10):
        ref = (np.float32(0.5) * ref + y).astype(np.float32)
    a.assign(x)
    aw_chain()
    got = a.numpy()  # 10 launches alternate a -> b -> a: the result is back in a
    a4.assign(x)
    aw_chain4()
    ok = bool(np.array_equal(got, ref)) and bool(np.array_equal(a4.numpy(), ref))
    s = {k: stats(v, 1e3) for k, v in acc.items()}
    peer = s["torch.add(alpha=0.5)"]["median"]
    from anywave.runtime import cuda

    props = cuda.device_properties(0)
    return {"what": f"10 elementwise launches over 2^{log2n} float32 (ms per chain)", **meta(),
            "device": props.name, "driver": props.driver_version, "torch": torch.__version__,
            "method": "CUDA events around each chain, median over rounds, chains interleaved",
            "goal": "device arrays within 5% of torch", "bit_exact_vs_numpy": ok,
            "ms_per_chain": s, "ratio_to_torch": {k: v["median"] / peer for k, v in s.items()},
            "effective_GBps": {k: 10 * 3 * 4 * n / (v["median"] * 1e-3) / 1e9 for k, v in s.items()}}


# ----------------------------------------------------------------------------- chain on a CPU target

def bench_chain_cpu(log2n: int, rounds: int, target: str) -> dict[str, Any]:
    n = 1 << log2n
    g = np.random.default_rng(0)
    x = g.standard_normal(n).astype(np.float32)
    y = g.standard_normal(n).astype(np.float32)
    grid, wg = (n + 255) // 256, 256
    a, b, dy = aw.array(x, target=target), aw.empty(n, aw.f32, target=target), aw.array(y, target=target)
    ha, hb = x.copy(), np.empty_like(x)
    na, nb, tmp = x.copy(), np.empty_like(x), np.empty_like(x)

    def aw_chain() -> None:
        src, dst = a, b
        for _ in range(10):
            axpy(src, dy, dst, 0.5, n, grid=grid, workgroup=wg)
            src, dst = dst, src
        aw.synchronize()

    def aw_numpy_chain() -> None:
        src, dst = ha, hb
        for _ in range(10):
            axpy(src, y, dst, 0.5, n, grid=grid, workgroup=wg, target=target)
            src, dst = dst, src

    def numpy_chain() -> None:
        src, dst = na, nb
        for _ in range(10):
            np.multiply(src, np.float32(0.5), out=tmp)
            np.add(tmp, y, out=dst)
            src, dst = dst, src

    loops = {f"anywave {target} device arrays": aw_chain, f"anywave {target} on NumPy arrays": aw_numpy_chain,
             "numpy (multiply + add, out=)": numpy_chain}
    acc = interleave(loops, rounds, lambda: None, 1)
    ref = x.copy()
    for _ in range(10):
        ref = (np.float32(0.5) * ref + y).astype(np.float32)
    a.assign(x)
    ha[...] = x
    aw_chain()
    aw_numpy_chain()
    s = {k: stats(v, 1e3) for k, v in acc.items()}
    from anywave.runtime import targets as rt

    dev = next(st for st in rt.available_targets() if st.name == target).infos[0].device
    return {"what": f"10 elementwise launches over 2^{log2n} float32 on {target} (ms per chain)", **meta(),
            "device": dev, "cpu_count": os.cpu_count(), "method": "wall time per chain (device-array chain "
            "ends with aw.synchronize), median over rounds, chains interleaved; host shared with other jobs",
            "bit_exact_vs_numpy": bool(np.array_equal(a.numpy(), ref)) and bool(np.array_equal(ha, ref)),
            "ms_per_chain": s,
            "ratio_to_numpy": {k: v["median"] / s["numpy (multiply + add, out=)"]["median"] for k, v in s.items()}}


# ----------------------------------------------------------------------------- torch-op wrapper

def bench_torch_op(calls: int, rounds: int) -> dict[str, Any]:
    import torch

    from anywave.torch.custom_ops import custom_op

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = 32
    tx, ty, to = (torch.ones(n, device=dev) for _ in range(3))
    op = custom_op("awbench2::vadd", vadd, out_shape=lambda x, **_: x.shape, scalars={"n": lambda x, **_: x.numel()})
    target = "cuda" if dev == "cuda" else "emulator"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def direct() -> None:
        for _ in range(calls):
            vadd(tx, ty, to, n, grid=1, workgroup=64, target=target)

    def wrapped() -> None:
        for _ in range(calls):
            op(tx, ty)

    def empty_like() -> None:  # what the wrapper adds besides dispatch: allocating its output
        for _ in range(calls):
            torch.empty_like(tx)

    acc = interleave({"direct kernel(...)": direct, "custom_op wrapper": wrapped,
                      "torch.empty_like (allocation alone)": empty_like}, rounds, sync, calls)
    s = {k: stats(v) for k, v in acc.items()}
    return {"what": f"per-call time of the torch-op wrapper vs a direct kernel call, {dev} tensors of 32 floats "
            "(us per call)", **meta(), "device": dev, "torch": torch.__version__, "calls_per_round": calls,
            "per_call_us": s,
            "wrapper_overhead_us": s["custom_op wrapper"]["median"] - s["direct kernel(...)"]["median"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["overhead", "chain", "chain-cpu", "torch-op"])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--log2n", type=int, default=None)
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--out")
    ns = ap.parse_args()
    if ns.what == "overhead":
        write("overhead", bench_overhead(ns.calls, ns.rounds), ns.out)
    elif ns.what == "chain":
        write("chain", bench_chain(ns.log2n or 26, ns.rounds), ns.out)
    elif ns.what == "chain-cpu":
        write(f"chain_{ns.target}", bench_chain_cpu(ns.log2n or 24, ns.rounds, ns.target), ns.out)
    else:
        write("torch_op", bench_torch_op(ns.calls, ns.rounds), ns.out)


if __name__ == "__main__":
    main()
