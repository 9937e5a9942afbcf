"""Attention on a CUDA GPU (issue 25): anywave's ``exact`` variant (``torch.ops.anywave.attention``,
mode="exact", docs/spec.md §8.17) and, when present, the ``fast`` kernel
(``anywave.kernels.attention_fast.forward``/``backward``) beside PyTorch's SDPA backends (cuDNN,
flash, memory-efficient) in the same run, forward and backward, bf16 inputs.

Shapes (B, H, S, D, causal): B4 H16 S4096 D128, the same causal, B8 H16 S2048 D64 (override with
``SHAPES="4,16,4096,128,0;..."``). TFLOP/s = 4·B·H·S²·D / t, halved for causal; the backward
counts 2.5 times the forward's FLOPs. Timing: CUDA events around one call, the median of ``REPS``
(default 10; 3 for the exact variant, ``EXACT_REPS``) after 2 warm-ups. Each anywave output is
checked against the cuDNN backend's on the whole tensor (largest absolute difference recorded).

    PYTHONPATH=src OUT=... ANYWAVE_COMMIT=<hash> python bench/bench_attention.py
    # writes $OUT/bench_attention.json: device, driver, torch, commit, date, one record per
    # (shape, implementation, pass)
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import anywave.torch.ops  # noqa: F401  (registers torch.ops.anywave.attention)

OUT = Path(os.environ.get("OUT", "/tmp"))
REPS = int(os.environ.get("REPS", "10"))
EXACT_REPS = int(os.environ.get("EXACT_REPS", "3"))
DEFAULT_SHAPES = "4,16,4096,128,0;4,16,4096,128,1;8,16,2048,64,0"
SKIP_EXACT_BWD = os.environ.get("SKIP_EXACT_BWD", "") == "1"


def shapes() -> list[tuple[int, int, int, int, bool]]:
    out = []
    for part in os.environ.get("SHAPES", DEFAULT_SHAPES).split(";"):
        b, h, s, d, c = (int(x) for x in part.split(","))
        out.append((b, h, s, d, bool(c)))
    return out


def timed(fn, reps: int) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after 2 warm-ups (CUDA events)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts)


def flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def run_shape(shape, record, fast_fwd, fast_bwd, res) -> None:
    """Time every implementation at one shape (its tensors are freed on return)."""
    b, h, s, d, causal = shape
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
    do = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, generator=g)
    ref = None
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                          ("sdpa_mem_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
                out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
                if ref is None:
                    ref = out.detach().float()
                record(shape, name, "forward",
                       timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), REPS))
                record(shape, name, "backward",
                       timed(lambda: torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True), REPS))  # noqa: B023
        except RuntimeError as e:  # a backend that refuses the shape or the device
            record(shape, name, "forward", None, {"error": str(e)[:300]})
    qe, ke, ve = (x.clone().requires_grad_() for x in (q, k, v))
    oe = torch.ops.anywave.attention(qe, ke, ve, causal, None, "exact")
    diff = (oe.detach().float() - ref).abs().max().item() if ref is not None else None
    record(shape, "anywave_exact", "forward",
           timed(lambda: torch.ops.anywave.attention(q, k, v, causal, None, "exact"), EXACT_REPS),
           {"max_abs_diff_vs_cudnn": diff})
    if not SKIP_EXACT_BWD:
        record(shape, "anywave_exact", "backward",
               timed(lambda: torch.autograd.grad(oe, (qe, ke, ve), do, retain_graph=True), EXACT_REPS))
    if fast_fwd is not None:
        sc = 1.0 / d ** 0.5
        try:
            of, _ = fast_fwd(q, k, v, causal, sc)
            diff = (of.float() - ref).abs().max().item() if ref is not None else None
            record(shape, "anywave_fast", "forward", timed(lambda: fast_fwd(q, k, v, causal, sc), REPS),
                   {"max_abs_diff_vs_cudnn": diff})
        except Exception as e:  # noqa: BLE001  (recorded; the other figures still count)
            record(shape, "anywave_fast", "forward", None, {"error": f"{type(e).__name__}: {str(e)[:300]}"})
        if fast_bwd is not None:
            res.setdefault("notes", []).append("attention_fast.backward present; not timed by this script yet")


def main() -> int:
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    try:
        from anywave.kernels import attention_fast as fast_mod
    except ImportError:
        fast_mod = None
    fast_fwd = getattr(fast_mod, "forward", None)
    fast_bwd = getattr(fast_mod, "backward", None)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown"
    res: dict = {"device": props.name, "driver": driver, "cuda_runtime": torch.version.cuda, "torch": torch.__version__,
                 "commit": os.environ.get("ANYWAVE_COMMIT", "unknown"),
                 "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "dtype": "bfloat16", "reps": REPS, "exact_reps": EXACT_REPS,
                 "fast_available": fast_fwd is not None, "records": []}

    def record(shape, impl, pass_, t, extra=None):
        b, h, s, d, c = shape
        fl = flops(b, h, s, d, c) * (2.5 if pass_ == "backward" else 1.0)
        r = {"B": b, "H": h, "S": s, "D": d, "causal": c, "impl": impl, "pass": pass_, "seconds": t,
             "tflops": fl / t / 1e12 if t else None}
        r.update(extra or {})
        res["records"].append(r)
        print(json.dumps(r), flush=True)

    for shape in shapes():
        run_shape(shape, record, fast_fwd, fast_bwd, res)
        torch.cuda.empty_cache()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_attention.json").write_text(json.dumps(res, indent=1))
    print("wrote", OUT / "bench_attention.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
