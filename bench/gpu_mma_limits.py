"""What limits the cp.async bf16 GEMM (issue 15) on the H200: stage count and block-order
variants of ``gemm_tiled_kernel`` at 8192³ beside cuBLAS bf16 (``torch.matmul``) in the same
run, and the ``copy_ring`` probe (bench/gpu_mma_probe.py: the same kernel's device -> local
cp.async ring with the mma left out) on the GEMM's grid, whose bytes over time is the rate
the copies alone reach (METHOD.md: time variants that leave one stage out).

    PYTHONPATH=src OUT=... python bench/gpu_mma_limits.py      # on a GPU; writes $OUT/gpu_mma_limits.json

CUDA events, medians over interleaved rounds; ptxas registers/spills per variant; every GEMM
variant's output checked on 16 spot rows against the float64 product with the kernel's bound
(``2^-18 * (K/16) * |A| @ |B|``, gemm_mma's docstring)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_mma_probe import copy_ring  # noqa: E402

from anywave.backends import ptx  # noqa: E402
from anywave.kernels.gemm_mma import gemm_tiled_kernel  # noqa: E402
from anywave.runtime import cuda  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp"))
N = int(os.environ.get("LIMITS_N", "8192"))
#: name: (GM, BK, STAGES) on the 128 x 256 block of 8 waves of 64 x 64 (TM = TN = 4, WM = 2, WN = 4)
#: (K must be a multiple of STAGES * BK, so STAGES divides N / BK: 2, 4, 8)
VARIANTS = {"s4_g8_k32": (8, 32, 4), "s2_g8_k32": (8, 32, 2), "s8_g8_k32": (8, 32, 8), "s4_g4_k32": (4, 32, 4),
            "s4_g16_k32": (16, 32, 4)}
W = cuda.WAVE_WIDTH  # the kernels unroll their copies for W * WM * WN threads
TILE = {"TM": 4, "TN": 4, "WM": 2, "WN": 4, "W": W}
BM, BN = 128, 256
NT = TILE["WM"] * TILE["WN"] * W  # threads per workgroup


def main() -> None:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": torch.cuda.get_device_name(), "nvidia_smi": smi,
                 "torch": torch.__version__, "commit": os.environ.get("ANYWAVE_COMMIT", "?"), "n": N,
                 "method": "CUDA events around 2 launches, medians of 7 interleaved rounds after 3 warm-ups"}
    tgt = cuda.CudaTarget()
    stream = torch.cuda.current_stream().cuda_stream
    g = torch.Generator(device="cuda").manual_seed(N)
    A = torch.randn(N, N, device="cuda", generator=g).to(torch.bfloat16)
    B = torch.randn(N, N, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.zeros(N, device="cuda")
    C = torch.full((N, N), float("nan"), device="cuda")
    grid = (N // BN, N // BM)
    fns, regs = {}, {}
    for name, (gm, bk, st) in VARIANTS.items():
        mod = gemm_tiled_kernel.compile(**TILE, GM=gm, BK=bk, STAGES=st)
        text = str(ptx.translate(mod))
        (OUT / "k.ptx").write_text(text)
        pv = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(OUT / "k.ptx"), "-o", str(OUT / "k.cubin")],
                            capture_output=True, text=True)
        regs[name] = [ln.strip() for ln in pv.stderr.splitlines() if "registers" in ln or "spill" in ln]
        args = [A.view(torch.int32), B.view(torch.int32), bias, C, N, N, N]
        fns[name] = (lambda mod=mod, args=args: tgt.launch(mod, gemm_tiled_kernel.name, grid, NT, args,
                                                           stream=stream, sync=False))
    cr = torch.empty(grid[0] * grid[1] * NT, device="cuda")
    for st in (4, 8):
        mod = copy_ring.compile(**TILE, GM=8, BK=32, STAGES=st)
        args = [A.view(torch.int32), B.view(torch.int32), cr, N, N, N]
        fns[f"copy_ring_s{st}"] = (lambda mod=mod, args=args: tgt.launch(mod, copy_ring.name, grid, NT, args,
                                                                         stream=stream, sync=False))
    fns["cublas"] = lambda: A @ B
    res["ptxas"] = regs
    for f in fns.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    ts: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(7):
        for k, f in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            f()
            e.record()
            e.synchronize()
            ts[k].append(s.elapsed_time(e) / 2e3)
    out = {}
    flop = 2 * N ** 3
    cub = float(np.median(ts["cublas"]))
    copied = grid[0] * grid[1] * (BM + BN) * N * 2  # bytes each block copies device -> local
    for k, v in ts.items():
        med = float(np.median(v))
        out[k] = {"median_s": med, "spread": [min(v), max(v)]}
        if k.startswith("copy_ring"):
            out[k]["tb_per_s_device_to_local"] = copied / med / 1e12
            out[k]["fraction_of_s4_gemm_time"] = med / float(np.median(ts["s4_g8_k32"]))
        else:
            out[k]["tflops"] = flop / med / 1e12
            out[k]["ratio_vs_cublas"] = cub / med
    rows = torch.arange(0, N, N // 16, device="cuda")
    ref = A[rows].double() @ B.double()
    bound = 2.0 ** -18 * (N / 16) * (A[rows].double().abs() @ B.double().abs()) * 1.001
    for name in VARIANTS:
        C.fill_(float("nan"))
        fns[name]()
        torch.cuda.synchronize()
        out[name]["rows_within_bound"] = bool(((C[rows].double() - ref).abs() <= bound).all()) and bool(
            torch.isfinite(C).all())
    res["results"] = out
    res["bytes_copied_per_gemm"] = copied
    print(json.dumps(out, indent=1))
    (OUT / "gpu_mma_limits.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
