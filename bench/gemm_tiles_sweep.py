"""Tile sweep of the wave-group GEMM (``anywave.kernels.gemm_group.gemm_group_kernel``) at the
GPT's shapes against cuBLAS bf16, same GPU, same process (issue 26: the bf16 GEMM op at the
model's shapes is 0.28–0.46 of cuBLAS at 516897e; its one tiling, 128 x 256 blocks, leaves
N = 768 with 3 block columns). For each shape and configuration (BN 64/128/256, GR 1/2, BK 64,
STAGES 4, asynchronous products), the kernel is launched on torch tensors directly (the op's
packing: u32 pairs, padded to the tile); time = CUDA events around 5 launches, median of 5
interleaved rounds with cuBLAS (``torch.matmul``) after warm-up; each result checked on 32 rows
against the float64 product with the spec's bound ``2^-18 (K/16) |A||B|`` (docs/spec.md §8.14).
The best configuration per shape is what ``torch.ops.anywave.gemm_mma`` should pick.

    PYTHONPATH=src python bench/gemm_tiles_sweep.py OUT.json [--shapes M,N,K;...] [--commit SHA]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

SHAPES = "8192,2304,768;8192,768,768;8192,3072,768;8192,768,3072;8192,50304,768;4096,4096,4096;8192,8192,8192"
CONFIGS = [{"BN": bn, "GR": gr, "BK": 64, "STAGES": 4, "ASYNC": True, "GM": 8}
           for bn in (256, 128, 64) for gr in (2, 1)]


def events(fn, reps: int = 5) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e-3 / reps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--commit", default="unknown")
    a = p.parse_args(argv)
    from anywave.kernels.gemm_group import gemm_group_kernel
    from anywave.runtime.cuda import WAVE_WIDTH as W

    rec = {"bench": "gemm_group tile sweep (issue 26)", "commit": a.commit, "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "shapes": []}
    for spec in a.shapes.split(";"):
        m, n, k = map(int, spec.split(","))
        A = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        rows = torch.randperm(m, device="cuda")[:32].sort().values
        A64, B64 = A[rows].double(), B.double()
        ref = A64 @ B64
        bound = 2.0 ** -18 * (k / 16) * (A64.abs() @ B64.abs()) * 1.001 + 2.0 ** -100
        fl = 2.0 * m * n * k
        entry = {"m": m, "n": n, "k": k, "configs": []}
        runs = {"cublas": lambda A=A, B=B: torch.matmul(A, B)}
        outs = {}
        for c in CONFIGS:
            bm, bn, kb = 64 * c["GR"], c["BN"], c["STAGES"] * c["BK"]
            mp, np_, kp = -(-m // bm) * bm, -(-n // bn) * bn, -(-k // kb) * kb
            ap = torch.nn.functional.pad(A, (0, kp - k, 0, mp - m)).contiguous()
            bp = torch.nn.functional.pad(B, (0, np_ - n, 0, kp - k)).contiguous()
            bias = torch.zeros(np_, device="cuda", dtype=torch.float32)
            out = torch.empty(mp, np_, device="cuda", dtype=torch.float32)
            label = "bn{BN}_gr{GR}_k{BK}_s{STAGES}".format(**c)
            try:
                def run(ap=ap, bp=bp, bias=bias, out=out, c=c, mp=mp, np_=np_, kp=kp, bn=bn, bm=bm):
                    gemm_group_kernel(ap.view(torch.uint32), bp.view(torch.uint32), bias, out, mp, np_, kp,
                                      grid=(np_ // bn, mp // bm, 1), workgroup=(4 * c["GR"] * W, 1, 1),
                                      target="cuda", W=W, **c)
                run()
                torch.cuda.synchronize()
                got = out[rows, :n].double()
                ok = bool(((got - ref).abs() <= bound).all())
                runs[label] = run
                outs[label] = {"config": c, "within_bound": ok}
            except Exception as e:  # noqa: BLE001 - record and go on
                entry["configs"].append({"label": label, "config": c, "error": f"{type(e).__name__}: {e}"[:400]})
        times: dict[str, list[float]] = {name: [] for name in runs}
        for fn in runs.values():
            fn()
        torch.cuda.synchronize()
        for _ in range(5):
            for name, fn in runs.items():
                times[name].append(events(fn))
        tc = statistics.median(times["cublas"])
        entry["cublas_tflops"] = fl / tc / 1e12
        for label, info in outs.items():
            t = statistics.median(times[label])
            entry["configs"].append({"label": label, **info, "tflops": fl / t / 1e12, "vs_cublas": tc / t})
        good = [c for c in entry["configs"] if c.get("within_bound")]
        if good:
            best = max(good, key=lambda c: c["tflops"])
            entry["best"] = {"label": best["label"], "vs_cublas": best["vs_cublas"]}
        print(json.dumps({k: v for k, v in entry.items() if k != "configs"}), flush=True)
        rec["shapes"].append(entry)
        del A, B, runs, outs
        torch.cuda.empty_cache()
    Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
