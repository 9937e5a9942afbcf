"""bf16 GEMM through Vulkan cooperative matrices against cuBLAS and the CUDA target, same GPU,
same process (issue 27): :data:`anywave.kernels.gemm_mma.gemm_tiled_kernel` (wave-scope fragments
loaded from padded local tiles, ``mma.mma``: on a device with ``VK_KHR_cooperative_matrix`` these
are ``OpCooperativeMatrixLoadKHR`` / ``MulAddKHR``, :mod:`anywave.backends.spirv_coop`).

    python bench/bench_vulkan_mma.py --out DIR [--commit SHA] [--sizes 4096,8192] [--reps 10]

Timing: the Vulkan kernel time is the difference of the timestamp queries around its dispatch
(``bench_vulkan.vk_times``), the CUDA target's and cuBLAS's (``torch.matmul`` in bf16, f32
accumulate) CUDA events (``bench_vulkan.cuda_times``), median of ``reps`` after a warm-up; TFLOP/s =
2·M·N·K / t. Each configuration's result is checked against a float64 product of the same bf16
inputs on a sample of 64 rows, with the spec's bound for a K loop of 16-deep steps
(``|C - AB| <= 2^-18 (K/16) (|A||B|)`` elementwise, docs/spec.md §8.14) and its worst error
reported. Configurations whose local memory exceeds the device's are listed as skipped.

Writes ``DIR/vulkan_mma_<date>.json`` (device, driver, commit, date, every figure).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from bench_vulkan import cuda_times, med, vk_times  # noqa: E402

import anywave as aw  # noqa: E402

#: (label, constants of gemm_tiled_kernel): BM = 16·TM·WM, BN = 16·TN·WN
CONFIGS = [
    ("128x128_k32", {"TM": 4, "TN": 2, "WM": 2, "WN": 4, "BK": 32, "GM": 8}),
    ("128x128_k64", {"TM": 4, "TN": 2, "WM": 2, "WN": 4, "BK": 64, "GM": 8}),
    ("128x256_k32", {"TM": 4, "TN": 4, "WM": 2, "WN": 4, "BK": 32, "GM": 8}),
    ("64x128_k32", {"TM": 2, "TN": 2, "WM": 2, "WN": 4, "BK": 32, "GM": 8}),
    ("128x128_k32_s3", {"TM": 4, "TN": 2, "WM": 2, "WN": 4, "BK": 32, "GM": 8, "STAGES": 3}),
]


def local_bytes(c: dict[str, int]) -> int:
    bm, bn, bk = 16 * c["TM"] * c["WM"], 16 * c["TN"] * c["WN"], c["BK"]
    nb = max(c.get("STAGES", 0), 2)
    return 4 * (nb * bm * (bk // 2 + 4) + nb * bk * (bn // 2 + 4) + 1 * 16)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "bench" / "results")))
    p.add_argument("--commit", default=os.environ.get("ANYWAVE_COMMIT", "unknown"))
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--only", default="", help="configurations whose label contains this")
    a = p.parse_args(argv)
    import torch

    from anywave.kernels.gemm_mma import gemm_tiled_kernel
    from anywave.runtime import vulkan

    dev = vulkan.get_device()
    rec: dict[str, Any] = {
        "bench": "bf16 GEMM on Vulkan cooperative matrices (issue 27)", "commit": a.commit,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "vulkan_device": dev.name, "vulkan_driver": dev.driver,
        "cuda_device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "coop_types": list(dev.features.cooperative_matrix), "coop_wave_width": dev.features.coop_wave_width,
        "local_memory_limit": dev.local_memory, "sizes": {}}
    print(json.dumps({k: v for k, v in rec.items() if k != "sizes"}), flush=True)
    W = dev.features.coop_wave_width or dev.subgroup_size  # the Vulkan launches' wave width
    WC = 32  # the CUDA target's
    rng = np.random.default_rng(7)
    for n in (int(s) for s in a.sizes.split(",")):
        flop = 2.0 * n * n * n
        at = torch.randn(n, n, dtype=torch.float32).to(torch.bfloat16)
        bt = torch.randn(n, n, dtype=torch.float32).to(torch.bfloat16)
        a32 = at.view(torch.int32).numpy().view(np.uint32)  # pairs of row neighbours per word
        b32 = bt.view(torch.int32).numpy().view(np.uint32)
        rows = np.sort(rng.choice(n, 64, replace=False))
        A64 = at[rows].double().numpy()
        B64 = bt.double().numpy()
        ref = A64 @ B64
        bound = 2.0 ** -18 * (n / 16) * (np.abs(A64) @ np.abs(B64)) * 1.001 + 2.0 ** -100
        out: dict[str, Any] = {}
        gpu = torch.cuda.is_available()
        tc = float("nan")
        if gpu:
            ca, cb = at.cuda(), bt.cuda()
            tc = med(cuda_times(functools.partial(torch.matmul, ca, cb), a.reps))
            out["cublas_bf16"] = {"ms": tc * 1e3, "tflops": flop / tc / 1e12}
            print(n, "cublas", json.dumps(out["cublas_bf16"]), flush=True)
        va, vb = aw.array(a32, target="vulkan"), aw.array(b32, target="vulkan")
        vbias = aw.array(np.zeros(n, np.float32), target="vulkan")
        if gpu:
            ga, gb = aw.array(a32, target="cuda"), aw.array(b32, target="cuda")
            gbias = aw.array(np.zeros(n, np.float32), target="cuda")
        for label, c in CONFIGS:
            if a.only and a.only not in label:
                continue
            lb = local_bytes(c)
            bm, bn = 16 * c["TM"] * c["WM"], 16 * c["TN"] * c["WN"]
            r: dict[str, Any] = {"config": c, "local_bytes": lb}
            if lb > dev.local_memory:
                r["skipped"] = f"needs {lb} bytes of local memory; the Vulkan device has {dev.local_memory}"
                out[label] = r
                print(n, label, json.dumps(r), flush=True)
                continue
            grid = (n // bn, n // bm, 1)
            wg = (c["WM"] * c["WN"] * W, 1, 1)
            consts = {**c, "W": W}  # (the kernel's copies are unrolled for its W)
            try:
                vc = aw.empty((n, n), np.float32, target="vulkan")
                vk_run = functools.partial(gemm_tiled_kernel, va, vb, vbias, vc, n, n, n, grid=grid, workgroup=wg,
                                           target="vulkan", wave_width=W, **consts)
                tv = med(vk_times(vk_run, a.reps))
                got = vc.numpy()[rows]
                err = np.abs(got.astype(np.float64) - ref)
                r.update({"vulkan_ms": tv * 1e3, "vulkan_tflops": flop / tv / 1e12, "vulkan_vs_cublas": tc / tv,
                          "within_bound": bool((err <= bound).all()),
                          "worst_err_over_bound": float((err / bound).max())})
            except Exception as e:  # noqa: BLE001 - record and go on with the next configuration
                r["vulkan_error"] = f"{type(e).__name__}: {e}"[:600]
            if not gpu:
                out[label] = r
                print(n, label, json.dumps(r), flush=True)
                continue
            try:
                gc = aw.empty((n, n), np.float32, target="cuda")
                cu_run = functools.partial(gemm_tiled_kernel, ga, gb, gbias, gc, n, n, n, grid=grid,
                                           workgroup=(c["WM"] * c["WN"] * WC, 1, 1), target="cuda", wave_width=WC,
                                           **{**c, "W": WC})
                tcu = med(cuda_times(cu_run, a.reps))
                r.update({"cuda_target_ms": tcu * 1e3, "cuda_target_tflops": flop / tcu / 1e12})
                if "vulkan_ms" in r:
                    r["vulkan_vs_cuda_target"] = tcu / (r["vulkan_ms"] * 1e-3)
            except Exception as e:  # noqa: BLE001
                r["cuda_error"] = f"{type(e).__name__}: {e}"[:600]
            out[label] = r
            print(n, label, json.dumps(r), flush=True)
        rec["sizes"][str(n)] = out
    d = Path(a.out)
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"vulkan_mma_{rec['date'][:10]}.json"
    f.write_text(json.dumps(rec, indent=1) + "\n")
    print("wrote", f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
