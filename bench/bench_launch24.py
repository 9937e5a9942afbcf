"""Issue 24 on an NVIDIA GPU, one process: the launch layer against its peers, per call.

    ANYWAVE_COMMIT=<hash> PYTHONPATH=src python bench/bench_launch24.py --out $OUT   # GPU
    PYTHONPATH=src python bench/bench_launch24.py --cpu --out DIR                    # CPU targets

GPU mode measures, interleaved over ``--rounds`` rounds (medians, min, max), the host time per
call of a burst of ``--calls`` launches of a 32-thread kernel ``y = x + a`` (timed with
``perf_counter`` after a synchronisation, without waiting inside the burst; the queue does not
fill in a burst this short):

* ``kernel(...)`` with ``aw.array`` device arrays and with torch CUDA tensors, and with every
  scalar kind (Python float/int, NumPy float32/float64/float16/int32/int64/uint8 scalars, 0-d
  arrays) against the Python float;
* the peers: a CuPy ``RawKernel`` of the same CUDA C kernel, Triton's ``kernel[grid](...)``,
  ``torch.add(out=)``;
* the floor: ``cuLaunchKernel`` from Python with a pre-packed parameter block, and the steps of
  the kernel call separately (plan lookup, the generated launcher, ``cuCtxSetCurrent``,
  ``cuLaunchKernel``), plus a cProfile of the call;
* ``anywave.torch.custom_op`` made from the kernel against ``torch.add`` (allocating both);
* CUDA graphs: ``aw.graph`` of 100 launches replayed (host time per replay, and wall time per
  kernel with the synchronisation), against ``torch.cuda.graph`` of 100 ``torch.add``; and a
  ``torch.cuda.graph`` capture of 100 custom_op calls (checked against eager);
* copies of 2^24 floats: ``aw.array(a, target="cuda")`` and ``.numpy()`` against
  ``torch.from_numpy(a).to("cuda")`` and ``.cpu()``;
* a many-launch workload: Needleman-Wunsch alignment scores over anti-diagonals (one launch per
  anti-diagonal, 2N - 1 launches for two length-N sequences) written in the kernel language
  against the same algorithm in CUDA C launched from CuPy (and the kernel-language version
  replayed as an ``aw.graph``); the score matrices are checked equal, and against a NumPy
  reference at a small N.

CPU mode: host cost per launch of the same kernel on each CPU target with NumPy arrays
(``kernel(...)`` against the target's own ``launch`` of the compiled module).

JSON: device, driver, commit ($ANYWAVE_COMMIT or git), date, every figure.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as _dt
import io
import json
import os
import platform
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import anywave as aw


@aw.kernel
def add1(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] + a


@aw.kernel
def add1_py(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    """add1, launched through the generated Python launcher (the native one's fallback)."""
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] + a


@aw.kernel
def nw_diag(h: aw.Buffer[aw.i32], sa: aw.In[aw.i32], sb: aw.In[aw.i32], d: aw.i32, i0: aw.i32, cnt: aw.i32,
            w: aw.i32, match: aw.i32, mismatch: aw.i32, gap: aw.i32):
    """One anti-diagonal ``i + j = d`` of the Needleman-Wunsch score matrix ``h`` ((N+1) x w,
    row-major): cell (i, j) = max(diag + s(a_i, b_j), up - gap, left - gap)."""
    t = aw.global_id(0)
    if t < cnt:
        i = i0 + t
        j = d - i
        s = match if sa[i - 1] == sb[j - 1] else mismatch
        best = h[(i - 1) * w + j - 1] + s
        best = max(best, h[(i - 1) * w + j] - gap)
        best = max(best, h[i * w + j - 1] - gap)
        h[i * w + j] = best


CUDA_ADD1 = r"""
extern "C" __global__ void add1(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + a;
}
"""

CUDA_NW = r"""
extern "C" __global__ void nw_diag(int* h, const int* sa, const int* sb, int d, int i0, int cnt, int w,
                                   int match, int mismatch, int gap) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < cnt) {
        int i = i0 + t, j = d - i;
        int s = sa[i - 1] == sb[j - 1] ? match : mismatch;
        int best = h[(i - 1) * w + j - 1] + s;
        best = max(best, h[(i - 1) * w + j] - gap);
        best = max(best, h[i * w + j - 1] - gap);
        h[i * w + j] = best;
    }
}
"""

MATCH, MISMATCH, GAP = 2, -1, 1


def stats(v: list[float]) -> dict[str, float]:
    return {"median_us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6, "max_us": max(v) * 1e6}


def interleaved(loops: dict[str, Callable[[], None]], calls: int, rounds: int, sync: Callable[[], None],
                timed_sync: bool = False) -> dict[str, dict[str, float]]:
    """Per-call seconds of each loop (``calls`` calls a loop), interleaved over ``rounds``; the
    clock stops before the synchronisation unless ``timed_sync``."""
    for fn in loops.values():
        fn()
    sync()
    acc: dict[str, list[float]] = {k: [] for k in loops}
    order = list(loops.items())
    rng = random.Random(24)
    for _ in range(rounds):
        rng.shuffle(order)  # a new order each round: no loop always follows the same one
        for k, fn in order:
            sync()
            t0 = time.perf_counter()
            fn()
            if timed_sync:
                sync()
            acc[k].append((time.perf_counter() - t0) / calls)
            sync()
    return {k: stats(v) for k, v in acc.items()}


def commit() -> str:
    c = os.environ.get("ANYWAVE_COMMIT")
    if c:
        return c
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def profile_top(fn: Callable[[], None], n: int = 14) -> list[str]:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(n)
    return [line.rstrip() for line in s.getvalue().splitlines() if line.strip()][:n + 8]


def nw_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, m = len(a), len(b)
    h = np.zeros((n + 1, m + 1), np.int64)
    h[0, :] = -GAP * np.arange(m + 1)
    h[:, 0] = -GAP * np.arange(n + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            s = MATCH if a[i - 1] == b[j - 1] else MISMATCH
            h[i, j] = max(h[i - 1, j - 1] + s, h[i - 1, j] - GAP, h[i, j - 1] - GAP)
    return h


def nw_init(n: int) -> np.ndarray:
    h = np.zeros((n + 1, n + 1), np.int32)
    h[0, :] = -GAP * np.arange(n + 1)
    h[:, 0] = -GAP * np.arange(n + 1)
    return h


def nw_diagonals(n: int) -> list[tuple[int, int, int]]:
    """(d, first i, cell count) for d = 2 .. 2n: cells (i, d - i) with 1 <= i, j <= n."""
    out = []
    for d in range(2, 2 * n + 1):
        i0, i1 = max(1, d - n), min(n, d - 1)
        out.append((d, i0, i1 - i0 + 1))
    return out


# ----------------------------------------------------------------------------- GPU

def run_gpu(args: argparse.Namespace) -> dict[str, Any]:
    import cupy as cp
    import torch

    from anywave.runtime import cuda

    calls, rounds = args.calls, args.rounds
    props = cuda.device_properties(0)
    res: dict[str, Any] = {"device": props.name, "driver": cuda.driver_version(), "commit": commit(),
                           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "python": platform.python_version(), "torch": torch.__version__, "cupy": cp.__version__,
                           "calls_per_round": calls, "rounds": rounds, "threads_per_launch": 32}
    n = 32
    x = np.arange(n, dtype=np.float32)
    dx, dy = aw.array(x, target="cuda"), aw.zeros(n, aw.f32, target="cuda")
    tx, ty = torch.from_numpy(x).cuda(), torch.zeros(n, device="cuda")
    cx, cy = cp.asarray(x), cp.zeros(n, cp.float32)
    raw = cp.RawKernel(CUDA_ADD1, "add1")
    sync = torch.cuda.synchronize

    def k_arrays() -> None:
        for _ in range(calls):
            add1(dx, dy, 1.0, 32, grid=1, workgroup=32)

    def k_tensors() -> None:
        for _ in range(calls):
            add1(tx, ty, 1.0, 32, grid=1, workgroup=32)

    a32, n32 = np.float32(1.0), np.int32(32)

    def cupy_raw() -> None:
        for _ in range(calls):
            raw((1,), (32,), (cx, cy, a32, n32))

    def torch_add() -> None:
        for _ in range(calls):
            torch.add(tx, 1.0, out=ty)

    # the same kernel with the generated Python launcher (the fallback without a C compiler), in the same run
    from anywave.runtime import cuda_native as _native

    saved = _native._STATE
    _native._STATE = (None, "forced by the benchmark")
    try:
        add1_py(dx, dy, 1.0, 32, grid=1, workgroup=32)
        add1_py(tx, ty, 1.0, 32, grid=1, workgroup=32)
    finally:
        _native._STATE = saved

    def k_arrays_py() -> None:
        for _ in range(calls):
            add1_py(dx, dy, 1.0, 32, grid=1, workgroup=32)

    def k_tensors_py() -> None:
        for _ in range(calls):
            add1_py(tx, ty, 1.0, 32, grid=1, workgroup=32)

    loops: dict[str, Callable[[], None]] = {"aw kernel(...) aw.array": k_arrays,
                                            "aw kernel(...) aw.array, Python launcher": k_arrays_py,
                                            "aw kernel(...) torch tensors, Python launcher": k_tensors_py,
                                            "aw kernel(...) torch tensors": k_tensors,
                                            "cupy RawKernel": cupy_raw, "torch.add(out=)": torch_add}
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def tadd(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton's style
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + a, mask=m)

        def triton_loop() -> None:
            for _ in range(calls):
                tadd[(1,)](tx, ty, 1.0, n, BLOCK=32)

        loops["triton kernel[grid](...)"] = triton_loop
        res["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        res["triton"] = f"unavailable: {e}"

    # the floor: cuLaunchKernel with a pre-packed block, and the kernel call's own steps
    add1(dx, dy, 1.0, 32, grid=1, workgroup=32)
    sync()
    fast = next(iter(add1._calls.values()))
    from anywave.runtime import cuda_native as native

    res["native_launcher"] = native.explain()
    res["plan_path"] = getattr(fast, "path", "?")
    parts = fast.parts if getattr(fast, "path", "") == "native" else fast.keep
    drv = cuda._driver()
    fn, kp, set_ctx, ctx = parts["fn"], parts["kp"], parts["set_ctx"], parts["ctx"]
    res["launcher_source"] = getattr(fast, "source", None)
    stream0 = drv.CUstream(0)
    fast_args = (dx, dy, 1.0, 32)

    def bare_int() -> None:
        launch = drv.cuLaunchKernel
        for _ in range(calls):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)

    def bare_obj() -> None:
        launch = drv.cuLaunchKernel
        for _ in range(calls):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, stream0, kp, 0)

    import ctypes

    lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    launch_c = lib.cuLaunchKernel
    u = ctypes.c_uint
    launch_c.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    launch_c.restype = ctypes.c_int
    fn_ptr = int(fn)

    def bare_ctypes() -> None:  # the same entry through ctypes: slower than the bindings (kept as evidence)
        for _ in range(calls):
            launch_c(fn_ptr, 1, 1, 1, 32, 1, 1, 0, 0, kp, None)

    def step_ctx() -> None:
        for _ in range(calls):
            set_ctx(ctx)

    def step_fast() -> None:
        for _ in range(calls):
            fast(fast_args)

    def step_valid() -> None:
        for _ in range(calls):
            add1._plans_valid()

    loops.update({"floor cuLaunchKernel (int stream, packed block)": bare_int,
                  "floor cuLaunchKernel (CUstream object)": bare_obj,
                  "step cuCtxSetCurrent": step_ctx,
                  **({"floor cuLaunchKernel through ctypes (packed block)": bare_ctypes} if launch_c else {}),
                  "step the plan launcher fast(args) (native when built)": step_fast,
                  "step _plans_valid()": step_valid})

    # every scalar kind
    kinds = {"float": (1.0, 32), "int a": (1, 32), "np.float32": (np.float32(1.0), 32),
             "np.float64": (np.float64(1.0), 32), "np.float16": (np.float16(1.0), 32),
             "0-d float32 array": (np.array(1.0, np.float32), 32), "np.int32 n": (1.0, np.int32(32)),
             "np.int64 n": (1.0, np.int64(32)), "np.uint8 n": (1.0, np.uint8(32)),
             "0-d int32 array n": (1.0, np.array(32, np.int32)),
             "np.float32 + np.int32": (np.float32(1.0), np.int32(32))}

    def scalar_loop(a: Any, nn: Any) -> Callable[[], None]:
        def f() -> None:
            for _ in range(calls):
                add1(dx, dy, a, nn, grid=1, workgroup=32)
        return f

    for k, (a, nn) in kinds.items():
        loops[f"scalar {k}"] = scalar_loop(a, nn)
    res["per_call_host"] = interleaved(loops, calls, rounds, sync)
    np.testing.assert_array_equal(dy.numpy(), x + 1)
    res["profile_kernel_call_aw_array"] = profile_top(k_arrays)

    op: Any = None
    glen = 100
    try:  # section custom_op: a failure is recorded, the others still run
        # custom_op against torch.add, both allocating their output
        from anywave.torch import custom_op

        op = custom_op("bench24::add1", add1, out_shape=lambda x, **_: x.shape, scalars={"n": lambda x, **_: x.numel()},
                       workgroup=32)

        def op_loop() -> None:
            for _ in range(calls):
                op(tx, 1.0)

        def torch_add_alloc() -> None:
            for _ in range(calls):
                torch.add(tx, 1.0)

        # the floor of such an op on this host, step by step: the dispatcher reaching a Python
        # impl (Library.define + impl, the CUDA key) that returns a tensor made beforehand; the
        # same impl allocating its output; the op's own Python body with the launch skipped
        # (fast_path= returning True); the kernel call alone with torch tensors
        flib = torch.library.Library("bench24floor", "FRAGMENT")
        flib.define("ret(Tensor x, float a) -> Tensor")
        flib.define("alloc(Tensor x, float a) -> Tensor")
        made = torch.empty_like(tx)
        flib.impl("ret", lambda x, a: made, "CUDA")
        f32 = torch.float32
        flib.impl("alloc", lambda x, a: torch.empty(x.shape, dtype=f32, device=x.device), "CUDA")
        op_ret, op_alloc = torch.ops.bench24floor.ret.default, torch.ops.bench24floor.alloc.default
        op_nolaunch = custom_op("bench24::add1_nolaunch", add1, out_shape=lambda x, **_: x.shape,
                                scalars={"n": lambda x, **_: x.numel()}, workgroup=32,
                                fast_path=lambda args, target, w: True)
        dev = tx.device

        def loop_of(fn: Callable[[], Any]) -> Callable[[], None]:
            def f() -> None:
                for _ in range(calls):
                    fn()
            return f

        with torch.no_grad():
            res["custom_op"] = interleaved({
                "anywave custom_op op(x, a)": op_loop, "torch.add(x, a)": torch_add_alloc,
                "floor: dispatcher to a Python impl returning a made tensor": loop_of(lambda: op_ret(tx, 1.0)),
                "floor: dispatcher to a Python impl + torch.empty": loop_of(lambda: op_alloc(tx, 1.0)),
                "step: custom_op without the launch (fast_path -> True)": loop_of(lambda: op_nolaunch(tx, 1.0)),
                "step: torch.empty(shape, dtype=, device=)": loop_of(lambda: torch.empty(tx.shape, dtype=f32,
                                                                                         device=dev)),
                "step: x.new_empty(shape)": loop_of(lambda: tx.new_empty(tx.shape)),
                "step: kernel(...) with torch tensors": loop_of(lambda: add1(tx, ty, 1.0, 32, grid=(1,),
                                                                              workgroup=(32,), target="cuda:0"))},
                calls, rounds, sync)
            torch.testing.assert_close(op(tx, 1.0), tx + 1.0, rtol=0, atol=0)
            res["profile_custom_op"] = profile_top(op_loop)

    except Exception as e:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        res["error_custom_op"] = traceback.format_exc(limit=6)
        print("section custom_op failed:", e)
    try:  # section graphs: a failure is recorded, the others still run
        # CUDA graphs
        glen = 100
        ref = x.copy()
        dxa = aw.array(x, target="cuda")
        dya = aw.zeros(n, aw.f32, target="cuda")
        with aw.graph(target="cuda") as g2:
            for k in range(glen):
                if k % 2 == 0:
                    add1(dxa, dya, 1.0, 32, grid=1, workgroup=32)
                else:
                    add1(dya, dxa, 1.0, 32, grid=1, workgroup=32)
        g2.replay()
        aw.synchronize()
        for _ in range(glen):
            ref = ref + np.float32(1.0)
        np.testing.assert_array_equal(dxa.numpy(), ref)  # a replay ran the 100 launches in order
        tg = torch.cuda.CUDAGraph()
        tz = torch.zeros(n, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.add(tx, 1.0, out=tz)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(tg):
            for _ in range(glen):
                torch.add(tz, 1.0, out=tz)
        reps = max(calls // glen, 10)

        def aw_replay() -> None:
            for _ in range(reps):
                g2.replay()

        def torch_replay() -> None:
            for _ in range(reps):
                tg.replay()

        gl = {"aw.graph replay (100 launches)": aw_replay, "torch.cuda.graph replay (100 torch.add)": torch_replay}
        host = interleaved(gl, reps, rounds, sync)
        wall = interleaved(gl, reps * glen, rounds, sync, timed_sync=True)
        res["graphs"] = {"launches_per_graph": glen, "host_per_replay": host, "wall_per_kernel": wall,
                         "host_per_kernel_us": {k: v["median_us"] / glen for k, v in host.items()}}
    except Exception as e:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        res["error_graphs"] = traceback.format_exc(limit=6)
        print("section graphs failed:", e)
    try:  # section torch_graph: a failure is recorded, the others still run
        # torch.cuda.graph capturing custom_op calls (warm-up first, as PyTorch asks)
        with torch.no_grad():
            tin = torch.arange(n, dtype=torch.float32, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    op(tin, 1.0)
            torch.cuda.current_stream().wait_stream(s)
            tg2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(tg2):
                t = tin
                for _ in range(glen):
                    t = op(t, 1.0)
            tin.copy_(torch.arange(n, dtype=torch.float32, device="cuda") * 2)
            tg2.replay()
            sync()
            want = torch.arange(n, dtype=torch.float32, device="cuda") * 2 + glen
            res["graphs"]["torch_graph_of_custom_op_ok"] = bool(torch.equal(t, want))

    except Exception as e:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        res["error_torch_graph"] = traceback.format_exc(limit=6)
        print("section torch_graph failed:", e)
    try:  # section copies: a failure is recorded, the others still run
        # copies of 2^24 floats
        big = np.random.default_rng(0).standard_normal(1 << 24).astype(np.float32)
        tbig = torch.from_numpy(big).cuda()
        dbig = aw.array(big, target="cuda")

        def aw_h2d() -> None:
            aw.array(big, target="cuda")
            aw.synchronize()

        def torch_h2d() -> None:
            torch.from_numpy(big).to("cuda")
            sync()

        def aw_d2h() -> None:
            dbig.numpy()

        def torch_d2h() -> None:
            tbig.cpu()

        out_np = np.empty_like(big)
        nbig = big.size

        def aw_numpy_call() -> None:
            add1(big, out_np, 1.0, nbig, grid=nbig // 256, workgroup=256, target="cuda")

        def torch_numpy_roundtrip() -> None:
            torch.add(torch.from_numpy(big).to("cuda"), 1.0).cpu()

        cp_res = interleaved({"aw.array(np, cuda)": aw_h2d, "torch.from_numpy(a).to(cuda)": torch_h2d,
                              "aw array .numpy()": aw_d2h, "torch tensor .cpu()": torch_d2h,
                              "aw kernel(...) NumPy in and out (both copies)": aw_numpy_call,
                              "torch from_numpy.to(cuda) + add + .cpu()": torch_numpy_roundtrip}, 1,
                             max(rounds // 2, 5), sync, timed_sync=True)
        np.testing.assert_array_equal(out_np, big + np.float32(1.0))
        gb = big.nbytes / 1e9
        res["copies_2p24_f32"] = {k: {**v, "GB_per_s": gb / (v["median_us"] * 1e-6)} for k, v in cp_res.items()}
        np.testing.assert_array_equal(dbig.numpy(), big)

    except Exception as e:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        res["error_copies"] = traceback.format_exc(limit=6)
        print("section copies failed:", e)
    try:  # section nw: a failure is recorded, the others still run
        # many launches: Needleman-Wunsch over anti-diagonals
        res["needleman_wunsch"] = nw_bench(args.nw_n, rounds, cp, sync)
    except Exception as e:  # noqa: BLE001
        import traceback  # noqa: PLC0415
        res["error_nw"] = traceback.format_exc(limit=6)
        print("section nw failed:", e)
    return res


def nw_bench(nn: int, rounds: int, cp: Any, sync: Callable[[], None]) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    # correctness at a small N against the NumPy reference (aw on CUDA, and the CUDA C kernel)
    small = 40
    sa, sb = rng.integers(0, 4, small).astype(np.int32), rng.integers(0, 4, small).astype(np.int32)
    ref = nw_reference(sa, sb)
    h = aw.array(nw_init(small), target="cuda")
    da, db = aw.array(sa, target="cuda"), aw.array(sb, target="cuda")
    for d, i0, cnt in nw_diagonals(small):
        nw_diag(h, da, db, d, i0, cnt, small + 1, MATCH, MISMATCH, GAP, grid=(cnt + 127) // 128, workgroup=128)
    np.testing.assert_array_equal(h.numpy().reshape(small + 1, small + 1), ref)

    a, b = rng.integers(0, 4, nn).astype(np.int32), rng.integers(0, 4, nn).astype(np.int32)
    diags = nw_diagonals(nn)
    w = nn + 1
    init = nw_init(nn)
    h_aw = aw.array(init, target="cuda")
    da, db = aw.array(a, target="cuda"), aw.array(b, target="cuda")
    raw = cp.RawKernel(CUDA_NW, "nw_diag")
    h_cp = cp.asarray(init)
    ca, cb = cp.asarray(a), cp.asarray(b)
    launch_args = [(d, i0, cnt, (cnt + 127) // 128) for d, i0, cnt in diags]
    i32 = np.int32
    cp_args = [(i32(d), i32(i0), i32(cnt), g) for d, i0, cnt, g in launch_args]
    W, M, X, G = i32(w), i32(MATCH), i32(MISMATCH), i32(GAP)

    def run_aw() -> None:
        for d, i0, cnt, g in launch_args:
            nw_diag(h_aw, da, db, d, i0, cnt, w, MATCH, MISMATCH, GAP, grid=g, workgroup=128)

    def run_cp() -> None:
        for d, i0, cnt, g in cp_args:
            raw((g,), (128,), (h_cp, ca, cb, d, i0, cnt, W, M, X, G))

    run_aw()
    with aw.graph(target="cuda") as gr:
        run_aw()

    def run_graph() -> None:
        gr.replay()

    t = interleaved({"aw kernel language (python loop)": run_aw, "CUDA C via cupy RawKernel (python loop)": run_cp,
                     "aw kernel language, aw.graph replay": run_graph}, 1, rounds, lambda: (sync(), aw.synchronize()),
                    timed_sync=True)
    run_aw()
    run_cp()
    aw.synchronize()
    sync()
    same = bool(np.array_equal(h_aw.numpy(), cp.asnumpy(h_cp)))
    cuda_c = t["CUDA C via cupy RawKernel (python loop)"]["median_us"]
    ratio = cuda_c / t["aw kernel language (python loop)"]["median_us"]
    return {"n": nn, "launches": len(diags), "workgroup": 128, "small_n_checked_against_numpy": small,
            "aw_equals_cuda_c": same, "wall": t, "speed_aw_over_cuda_c": ratio,
            "speed_aw_graph_over_cuda_c": t["CUDA C via cupy RawKernel (python loop)"]["median_us"]
            / t["aw kernel language, aw.graph replay"]["median_us"]}


# ----------------------------------------------------------------------------- CPU targets

def run_cpu(args: argparse.Namespace) -> dict[str, Any]:
    from anywave.jit.targets import available_targets, get_target

    res: dict[str, Any] = {"device": platform.processor() or platform.machine(), "commit": commit(),
                           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "python": platform.python_version(), "calls_per_round": args.calls, "rounds": args.rounds,
                           "cpus": os.cpu_count(), "targets": {}}
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    for tname in [t for t in ("emulator", "opencl", "sycl") if t in available_targets()]:
        module = add1.compile()
        tgt = get_target(tname).instance(None)

        def call(tname: str = tname) -> None:
            for _ in range(args.calls):
                add1(x, y, 1.0, 32, grid=1, workgroup=32, target=tname)

        def call_np32(tname: str = tname) -> None:
            for _ in range(args.calls):
                add1(x, y, np.float32(1.0), np.int32(32), grid=1, workgroup=32, target=tname)

        def direct(tgt: Any = tgt, module: Any = module) -> None:
            for _ in range(args.calls):
                tgt.launch(module, "add1", (1, 1, 1), (32, 1, 1), {"x": x, "y": y, "a": 1.0, "n": 32})

        r = interleaved({"kernel(...) numpy arrays": call, "kernel(...) np.float32/np.int32 scalars": call_np32,
                         "target.launch(module, ...) (no kernel-call layer)": direct}, args.calls, args.rounds,
                        lambda: None)
        np.testing.assert_array_equal(y, x + 1)
        # the layer alone: the same calls with the plans' target launch replaced by a no-op (the
        # difference of the two loops above is within the noise of a shared host)
        plans = [p.__self__ for p in add1._calls.values() if hasattr(p, "__self__")]
        saved = [(p.tgt, getattr(p, "bound", None)) for p in plans]

        class Null:
            def launch(self, *a: Any, **k: Any) -> None:
                return None

        for p in plans:  # a plan launches through the driver's bound launch, else the target's launch
            p.tgt = Null()
            if getattr(p, "bound", None) is not None:
                p.bound = lambda values: None
        try:
            r.update(interleaved({"kernel-call layer alone (no-op launch), Python scalars": call,
                                  "kernel-call layer alone (no-op launch), NumPy scalars": call_np32},
                                 args.calls, args.rounds, lambda: None))
        finally:
            for p, (t, b) in zip(plans, saved, strict=True):
                p.tgt = t
                if b is not None:
                    p.bound = b
        res["targets"][tname] = r
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="the CPU targets' host cost per launch")
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--nw-n", type=int, default=2048, help="sequence length of the Needleman-Wunsch run")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    res = run_cpu(args) if args.cpu else run_gpu(args)
    name = "launch24_cpu.json" if args.cpu else "launch24_h200.json"
    out = Path(args.out) / name
    out.write_text(json.dumps(res, indent=1))
    for k, v in res.items():
        if isinstance(v, dict):
            print(k)
            for kk, vv in v.items():
                print(f"  {kk}: {vv.get('median_us', vv) if isinstance(vv, dict) else vv}")
        elif not isinstance(v, list):
            print(k, v)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
