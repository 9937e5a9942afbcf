"""Flash attention forward (``anywave.kernels.attention_fast``) on the H200 against torch's SDPA
backends (cuDNN, flash) in the same run: correctness at real sizes against a float64 reference
(some heads), run-to-run identity, batch invariance (a row's bits for B = 1 against B = 4), and
TFLOP/s = 4·B·H·S²·D / t (halved for causal), median of timed launches (CUDA events).

    python bench/bench_attention_fast.py OUT.json
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from anywave.kernels.attention_fast import forward

SHAPES = [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (8, 16, 2048, 64, False), (8, 16, 2048, 64, True)]


def ref64(q, k, v, causal, heads):
    """float64 reference (o, lse) of batch 0's heads ``heads``."""
    out = []
    for h in heads:
        qd, kd, vd = (x[0, h].double() for x in (q, k, v))
        s = qd @ kd.T / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), -math.inf)
        mx = s.amax(-1, keepdim=True)
        p = torch.exp(s - mx)
        l_ = p.sum(-1, keepdim=True)
        out.append(((p / l_) @ vd, (mx + torch.log(l_))[:, 0]))
    return out


def timed(fn, reps=20):
    for _ in range(3):
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
    ts.sort()
    return ts[len(ts) // 2]


def main() -> None:
    out_path = sys.argv[1]
    res = {"device": torch.cuda.get_device_name(), "driver": torch.version.cuda, "torch": torch.__version__,
           "commit": os.environ.get("ANYWAVE_COMMIT", "unknown"), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                           time.gmtime()),
           "kernel": "anywave.kernels.attention_fast.attention_fast_kernel (GR=2, W=32, bf16)",
           "tflops_formula": "4*B*H*S^2*D/t, halved for causal", "cases": []}
    try:
        res["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    torch.manual_seed(0)
    for B, H, S, D, causal in SHAPES:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        case = {"B": B, "H": H, "S": S, "D": D, "causal": causal}
        t0 = time.time()
        o, lse = forward(q, k, v, causal=causal)
        torch.cuda.synchronize()
        case["first_call_s"] = round(time.time() - t0, 3)
        o2, lse2 = forward(q, k, v, causal=causal)
        case["run_to_run_identical"] = bool(torch.equal(o, o2) and torch.equal(lse, lse2))
        heads = [0, H - 1]
        errs, lerrs = [], []
        for h, (ro, rl) in zip(heads, ref64(q, k, v, causal, heads), strict=True):
            errs.append(float((o[0, h].double() - ro).abs().max()))
            lerrs.append(float((lse[0, h].double() - rl).abs().max()))
        case["max_abs_err_o_vs_f64"] = max(errs)
        case["max_abs_err_lse_vs_f64"] = max(lerrs)
        case["max_abs_v"] = float(v.abs().max())
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        case["max_abs_diff_vs_cudnn"] = float((o.float() - oc.float()).abs().max())
        # batch invariance: batch 0 alone against inside the batch
        o1, l1 = forward(q[:1].contiguous(), k[:1].contiguous(), v[:1].contiguous(), causal=causal)
        case["batch_invariant_B1_vs_B"] = bool(torch.equal(o1[0], o[0]) and torch.equal(l1[0], lse[0]))
        flop = 4 * B * H * S * S * D / (2 if causal else 1)
        t = timed(lambda: forward(q, k, v, causal=causal))  # noqa: B023
        case["anywave_s"] = t
        case["anywave_tflops"] = flop / t / 1e12
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    tb = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))  # noqa: B023
                case[f"{name}_s"] = tb
                case[f"{name}_tflops"] = flop / tb / 1e12
            except RuntimeError as e:
                case[f"{name}_error"] = str(e)[:200]
        if "cudnn_tflops" in case:
            case["ratio_vs_cudnn"] = case["anywave_tflops"] / case["cudnn_tflops"]
        print(json.dumps(case), flush=True)
        res["cases"].append(case)
        del q, k, v, o, o2, oc, o1
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
