"""Vulkan vs CUDA on the same GPU, same process (issue 27): the library's memory-bound kernels
(add4, saxpy4, sum4, softmax4, layer_norm4 of :mod:`anywave.kernels.vec`), the fp32 GEMM
4096^3 (:data:`anywave.kernels.gemm.gemm_f32_kernel`, config FAST), a chain of 10 launches over
2^26 floats on device arrays, and the staged (NumPy-argument) path for reference.

    python bench/bench_vulkan.py --out DIR [--commit SHA] [--reps 20] [--quick]

Timing: the Vulkan target's kernel time is the difference of the two timestamp queries written
around its dispatch (:func:`anywave.runtime.vulkan.profile`); the CUDA target's is CUDA events
recorded on the launching stream around the same kernel (torch.cuda.Event; the GPU kept busy
before each, so the events bracket the kernel, not the host's launch). Both run on
``aw.array`` device arrays of their target, after a warm-up launch; figure = median of ``reps``
launches. Results of the two targets are compared bit for bit (they run the same WAVE module).
cuBLAS (torch.matmul, fp32 with TF32 off, and bf16) is timed with CUDA events as the GEMM peers.

Writes ``DIR/vulkan_bench_<date>.json`` with device, driver, commit, date and every figure.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
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


def vk_times(fn: Callable[[], None], reps: int, per_call: int = 1) -> list[float]:
    """Device seconds of each call of ``fn`` (``per_call`` dispatches summed), from timestamps."""
    from anywave.runtime import vulkan

    fn()
    aw.synchronize()
    with vulkan.profile() as t:
        for _ in range(reps):
            fn()
    secs = [s for _, s in t]
    return [sum(secs[i:i + per_call]) for i in range(0, len(secs), per_call)]


def cuda_times(fn: Callable[[], None], reps: int) -> list[float]:
    """Seconds of each call of ``fn`` between CUDA events on the current stream. Each timed call
    is preceded by ``torch.cuda._sleep`` (about 1 ms of a spinning kernel), so the GPU is busy
    while the host enqueues the events and the launches: the events then bracket the kernels,
    not the host's launch time (the H200 run at 7b38e15 lacked this; see its JSON's notes)."""
    import torch

    fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        torch.cuda._sleep(2_000_000)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in ev]


def med(ts: list[float]) -> float:
    return float(statistics.median(ts))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "bench" / "results")))
    p.add_argument("--commit", default=os.environ.get("ANYWAVE_COMMIT", "unknown"))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run, e.g. on lavapipe)")
    p.add_argument("--no-cuda", action="store_true", help="Vulkan only (no CUDA peer)")
    args = p.parse_args(argv)

    from anywave.kernels import gemm as G
    from anywave.kernels import vec as V
    from anywave.runtime import vulkan

    dev = vulkan.get_device()
    cuda = not args.no_cuda
    if cuda:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        cuda_name = torch.cuda.get_device_name(0)
    W = 32 if 32 in dev.features.wave_widths else dev.features.wave_widths[0]
    reps = args.reps
    rec: dict[str, Any] = {
        "bench": "vulkan vs cuda (issue 27)", "commit": args.commit,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "vulkan_device": dev.name, "vulkan_driver": dev.driver, "vulkan_api": dev.api_version,
        "vulkan_details": dev.details(), "cuda_device": cuda_name if cuda else None, "wave_width": W,
        "method": "median of reps; Vulkan: timestamp queries around each dispatch; CUDA: CUDA events around "
                  "each launch; device arrays on both", "reps": reps, "kernels": {},
    }
    print(f"vulkan: {dev.name} ({dev.driver}); W={W}", flush=True)
    n = 1 << (20 if args.quick else 26)
    rows, cols = (256, 1024) if args.quick else (16384, 4096)
    g = np.random.default_rng(0)
    x = g.standard_normal(n).astype(np.float32)
    y = g.standard_normal(n).astype(np.float32)
    m2 = g.standard_normal((rows, cols)).astype(np.float32)
    gam = g.standard_normal(cols).astype(np.float32)
    bet = g.standard_normal(cols).astype(np.float32)

    def on(target: str) -> dict[str, Any]:
        return {k: aw.array(v, target=target) for k, v in
                {"x": x, "y": y, "m": m2, "gamma": gam, "beta": bet}.items()} | {
            "out": aw.empty(n, aw.f32, target=target), "mout": aw.empty((rows, cols), aw.f32, target=target),
            "part": aw.empty(64, aw.f32, target=target), "tot": aw.empty(1, aw.f32, target=target)}

    targets = ["vulkan"] + (["cuda"] if cuda else [])
    data = {t: on(t) for t in targets}
    grid2 = V.elementwise_grid(n, 2)
    sg = max(1, min(64, -(-n // (4 * V.SUM_WG))))
    block, vecs = V.row_shape(cols)

    def kernels(t: str) -> dict[str, tuple[Callable[[], None], int, int, str]]:
        d = data[t]
        kw = {"target": t, "wave_width": W}
        return {
            "add4": (lambda: V.add4_kernel(d["x"], d["y"], d["out"], n, per=2, grid=grid2, workgroup=V.WG, **kw),
                     1, 12 * n, "out"),
            "saxpy4": (lambda: V.saxpy4_kernel(np.float32(1.5), d["x"], d["out"], n, per=2, grid=grid2,
                                               workgroup=V.WG, **kw), 1, 12 * n, None),
            "sum4": (lambda: (V.sum4_kernel(d["x"], d["part"], n, grid=sg, workgroup=V.SUM_WG, **kw),
                              V.sum4_kernel(d["part"], d["tot"], sg, grid=1, workgroup=V.SUM_WG, **kw)),
                     2, 4 * n, "tot"),
            "softmax4": (lambda: V.softmax4_kernel(d["m"], d["mout"], cols, block=block, vecs=vecs, grid=rows,
                                                   workgroup=block, **kw), 1, 8 * rows * cols, "mout"),
            "layer_norm4": (lambda: V.layer_norm4_kernel(d["m"], d["gamma"], d["beta"], d["mout"], cols,
                                                         np.float32(1e-5), block=block, vecs=vecs, grid=rows,
                                                         workgroup=block, **kw), 1, 8 * rows * cols, "mout"),
        }

    ks = {t: kernels(t) for t in targets}
    for name in ks["vulkan"]:
        fn, per, nbytes, outname = ks["vulkan"][name]
        r: dict[str, Any] = {"bytes": nbytes}
        tv = med(vk_times(fn, reps, per))
        r["vulkan_ms"] = tv * 1e3
        r["vulkan_GBps"] = nbytes / tv / 1e9
        if cuda:
            fc = ks["cuda"][name][0]
            tc = med(cuda_times(fc, reps))
            r["cuda_ms"] = tc * 1e3
            r["cuda_GBps"] = nbytes / tc / 1e9
            r["vulkan_over_cuda_speed"] = tc / tv
            if outname is not None:
                r["same_bits"] = bool(np.array_equal(data["vulkan"][outname].numpy().view(np.uint8),
                                                     data["cuda"][outname].numpy().view(np.uint8)))
        rec["kernels"][name] = r
        print(name, json.dumps(r), flush=True)

    # fp32 GEMM
    M = 512 if args.quick else 4096
    cfg = G.FAST
    a = (g.standard_normal((M, M)) / 8).astype(np.float32)
    b = (g.standard_normal((M, M)) / 8).astype(np.float32)
    grid, wg = G.launch_shape(M, M, cfg)
    gd = {t: (aw.array(a, target=t), aw.array(b, target=t), aw.zeros(4, aw.f32, target=t),
              aw.empty((M, M), aw.f32, target=t)) for t in targets}

    def gemm_on(t: str) -> Callable[[], None]:
        A, B, bias, C = gd[t]
        return lambda: G.gemm_f32_kernel(A, B, bias, C, M, M, M, epilogue="none", **cfg, grid=grid, workgroup=wg,
                                         target=t, wave_width=W)

    greps = max(5, reps // 2)
    r = {"shape": [M, M, M], "config": cfg, "flop": 2 * M ** 3}
    tv = med(vk_times(gemm_on("vulkan"), greps))
    r["vulkan_ms"] = tv * 1e3
    r["vulkan_TFLOPs"] = 2 * M ** 3 / tv / 1e12
    if cuda:
        tc = med(cuda_times(gemm_on("cuda"), greps))
        r["cuda_ms"] = tc * 1e3
        r["cuda_TFLOPs"] = 2 * M ** 3 / tc / 1e12
        r["vulkan_over_cuda_speed"] = tc / tv
        r["same_bits"] = bool(np.array_equal(gd["vulkan"][3].numpy().view(np.uint32),
                                             gd["cuda"][3].numpy().view(np.uint32)))
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        r["cublas_fp32_ms"] = med(cuda_times(lambda: torch.matmul(ta, tb), greps)) * 1e3
        ha, hb = ta.bfloat16(), tb.bfloat16()
        r["cublas_bf16_ms"] = med(cuda_times(lambda: torch.matmul(ha, hb), greps)) * 1e3
    rec["kernels"]["gemm_f32"] = r
    print("gemm_f32", json.dumps(r), flush=True)

    # chain of 10 launches over n floats on device arrays: no host transfers
    d = data["vulkan"]
    src, dst = d["x"], d["out"]
    aw.synchronize()
    before, subs = dict(dev.transfers), dev.submissions
    t0 = time.perf_counter()
    with vulkan.profile() as prof:
        for i in range(10):
            s_, d_ = (src, dst) if i % 2 == 0 else (dst, src)
            V.add4_kernel(s_, d["y"], d_, n, per=2, grid=grid2, workgroup=V.WG, target="vulkan", wave_width=W)
    wall = time.perf_counter() - t0
    after = dict(dev.transfers)
    rec["chain"] = {"launches": 10, "elements": n, "transfers_before": before, "transfers_after": after,
                    "host_bytes": (after["to_host_bytes"] - before["to_host_bytes"])
                    + (after["to_device_bytes"] - before["to_device_bytes"]),
                    "submissions": dev.submissions - subs, "device_ms": sum(s for _, s in prof) * 1e3,
                    "wall_ms_incl_sync": wall * 1e3}
    print("chain", json.dumps(rec["chain"]), flush=True)

    # the staged path (NumPy arguments), wall clock of one call, for reference (issue 27's table)
    xs, ys = x[: 1 << 24] if not args.quick else x, y[: 1 << 24] if not args.quick else y
    V.add4(xs, ys, target="vulkan", wave_width=W)
    t0 = time.perf_counter()
    V.add4(xs, ys, target="vulkan", wave_width=W)
    rec["staged_add4_numpy_args"] = {"elements": int(xs.size), "wall_ms": (time.perf_counter() - t0) * 1e3}
    print("staged", json.dumps(rec["staged_add4_numpy_args"]), flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"vulkan_bench_{_dt.date.today().isoformat()}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
