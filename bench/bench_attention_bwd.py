"""Flash attention backward (``anywave.kernels.attention_fast_bwd``) on the H200 against torch's SDPA
backends (cuDNN, flash) in the same run: gradients against a float64 reference (GQA, S not a
multiple of the block), run-to-run identity, batch invariance (batch 0 alone against inside B), GR
invariance, the SASS of the kernels (HGMMA count, LDL/STL, ptxas registers/spills), and
TFLOP/s = 2.5 · 4·B·H·S²·D / t (halved for causal; FlashAttention's convention: 5 products of the
forward's 2) with t the median time of the backward alone (torch: ``autograd.grad`` of a kept graph).

    python bench/bench_attention_bwd.py OUT_DIR
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from anywave.backends import ptx
from anywave.kernels.attention_fast import attention_fast_kernel, forward
from anywave.kernels.attention_fast_bwd import attn_bwd_dkdv_fast_kernel, attn_bwd_dq_fast_kernel, backward

SHAPES = [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (8, 16, 2048, 64, False), (8, 16, 2048, 64, True)]


def timed(fn, reps=10, rounds=5):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3 / reps)
    ts.sort()
    return ts[len(ts) // 2]


def ref_grads(q, k, v, do, causal):
    """float64 (dq, dk, dv) of batch 0 (GQA: k, v heads repeated, their gradients summed)."""
    rep = q.shape[1] // k.shape[1]
    qd, kd, vd, gd = (x[0].double() for x in (q, k, v, do))
    kd, vd = kd.repeat_interleave(rep, 0), vd.repeat_interleave(rep, 0)
    s = qd @ kd.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(s, -1)
    o = p @ vd
    dp = gd @ vd.transpose(1, 2)
    ds = p * (dp - (gd * o).sum(-1, keepdim=True))
    sc = 1 / math.sqrt(q.shape[-1])
    dq = ds @ kd * sc
    dk = (ds.transpose(1, 2) @ qd * sc).unflatten(0, (-1, rep)).sum(1)
    dv = (p.transpose(1, 2) @ gd).unflatten(0, (-1, rep)).sum(1)
    return dq, dk, dv


def _err(a, r):
    d = (a.double() - r)
    return {"max_abs": float(d.abs().max()), "rel_norm": float(d.norm() / r.norm())}


def sass(out: Path) -> dict:
    res = {}
    for kern in (attn_bwd_dkdv_fast_kernel, attn_bwd_dq_fast_kernel, attention_fast_kernel):
        for D in (64, 128):
            for causal in (False, True):
                name = f"{kern.name}_D{D}{'_causal' if causal else ''}"
                text = ptx.translate(kern.compile(D=D, GR=1, W=32, causal=causal, f16=False), "sm_90").text
                p = Path("/tmp") / f"{name}.ptx"
                p.write_text(text)
                tg = re.search(r"\.target (\S+)", text).group(1)
                pv = subprocess.run(["ptxas", f"-arch={tg}", "-v", str(p), "-o", str(p) + ".cubin"],
                                    capture_output=True, text=True)
                s = subprocess.run(["cuobjdump", "--dump-sass", str(p) + ".cubin"], capture_output=True,
                                   text=True).stdout
                if kern is not attention_fast_kernel and D == 128 and not causal:
                    (out / f"{name}.sass").write_text(s)
                res[name] = {"ptxas": [ln.split("info    : ")[-1].strip() for ln in pv.stderr.splitlines()
                                       if "registers" in ln or "spill" in ln],
                             "HGMMA": len(re.findall(r"\bHGMMA\.", s)), "LDL": len(re.findall(r"\bLDL\b", s)),
                             "STL": len(re.findall(r"\bSTL\b", s)), "BRA": len(re.findall(r"\bBRA\b", s)),
                             "warnings": [ln for ln in pv.stderr.splitlines() if "warn" in ln.lower()]}
                print(name, json.dumps(res[name]), flush=True)
    return res


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(), "cuda": torch.version.cuda, "torch": torch.__version__,
           "commit": os.environ.get("ANYWAVE_COMMIT", "unknown"),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "kernels": "anywave.kernels.attention_fast_bwd (prep + dK/dV over KV blocks + dQ over Q blocks; W=32, "
                      "GR 1 and 2, bf16)",
           "tflops_formula": "2.5*4*B*H*S^2*D/t, halved for causal; t = the backward alone", "cases": []}
    try:
        res["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    res["sass"] = sass(out)
    torch.manual_seed(0)
    res["checks"] = []
    for dt, D, causal in ((torch.bfloat16, 64, False), (torch.bfloat16, 64, True), (torch.bfloat16, 128, False),
                          (torch.bfloat16, 128, True), (torch.float16, 128, True)):
        q = torch.randn(2, 8, 1000, D, device="cuda", dtype=dt)
        k, v = (torch.randn(2, 2, 1000, D, device="cuda", dtype=dt) for _ in range(2))
        do = torch.randn_like(q)
        o, lse = forward(q, k, v, causal=causal)
        g = backward(q, k, v, o, lse, do, None, causal)
        g2 = backward(q, k, v, o, lse, do, None, causal, GR=2)
        r = ref_grads(q, k, v, do, causal)
        chk = {"dtype": str(dt), "D": D, "causal": causal, "shape": "B2 Hq8 Hkv2 S1000",
               "GR_invariant": all(torch.equal(a, b) for a, b in zip(g, g2, strict=True))}
        # the forward (its kernel no longer carries the in-kernel keep-alive of Q: the backend does it)
        rep = q.shape[1] // k.shape[1]
        qd, kd, vd = q[0].double(), k[0].double().repeat_interleave(rep, 0), v[0].double().repeat_interleave(rep, 0)
        sref = qd @ kd.transpose(1, 2) / math.sqrt(D)
        if causal:
            sref = sref.masked_fill(torch.ones_like(sref, dtype=torch.bool).triu(1), -math.inf)
        chk["fwd_o"] = _err(o[0], torch.softmax(sref, -1) @ vd)
        chk["fwd_lse_max_abs"] = float((lse[0].double() - torch.logsumexp(sref, -1)).abs().max())
        for n, a, rr in zip(("dq", "dk", "dv"), g, r, strict=True):
            chk[n] = _err(a[0], rr)
        # the peer on the same inputs (cuDNN needs the heads repeated)
        qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k.repeat_interleave(4, 1),
                                                                     v.repeat_interleave(4, 1)))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
        gq, gk, gv = torch.autograd.grad(oc, (qq, kk, vv), do)
        gk, gv = gk.unflatten(1, (2, 4)).sum(2), gv.unflatten(1, (2, 4)).sum(2)
        for n, a, rr in zip(("dq", "dk", "dv"), (gq, gk, gv), r, strict=True):
            chk["cudnn_" + n] = _err(a[0], rr)
        print(json.dumps(chk), flush=True)
        res["checks"].append(chk)
    for B, H, S, D, causal in SHAPES:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        do = torch.randn_like(q)
        case = {"B": B, "H": H, "S": S, "D": D, "causal": causal}
        o, lse = forward(q, k, v, causal=causal)
        t0 = time.time()
        g = backward(q, k, v, o, lse, do, None, causal)
        torch.cuda.synchronize()
        case["first_call_s"] = round(time.time() - t0, 3)
        g2 = backward(q, k, v, o, lse, do, None, causal)
        case["run_to_run_identical"] = all(torch.equal(a, b) for a, b in zip(g, g2, strict=True))
        g1 = backward(*(x[:1].contiguous() for x in (q, k, v, o)), lse[:1].contiguous(), do[:1].contiguous(), None,
                      causal)
        case["batch_invariant_B1_vs_B"] = all(torch.equal(a[0], b[0]) for a, b in zip(g1, g, strict=True))
        flop = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
        for gr in (1, 2):
            case[f"anywave_GR{gr}_s"] = timed(lambda: backward(q, k, v, o, lse, do, None, causal, GR=gr))  # noqa: B023
        case["anywave_best_GR"] = 1 if case["anywave_GR1_s"] <= case["anywave_GR2_s"] else 2
        case["anywave_s"] = case[f"anywave_GR{case['anywave_best_GR']}_s"]
        case["anywave_tflops"] = flop / case["anywave_s"] / 1e12
        fflop = flop / 2.5
        case["fwd_anywave_tflops"] = fflop / timed(lambda: forward(q, k, v, causal=causal)) / 1e12  # noqa: B023
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            case["fwd_cudnn_tflops"] = fflop / timed(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)) / 1e12  # noqa: B023
        # the op through autograd (forward fast, backward fast): the backward alone
        qa, ka, va = (x.detach().clone().requires_grad_() for x in (q, k, v))
        import anywave.torch.ops  # noqa: F401

        oa = torch.ops.anywave.attention(qa, ka, va, causal, None, "fast")
        case["torch_op_s"] = timed(lambda: torch.autograd.grad(oa, (qa, ka, va), do, retain_graph=True))  # noqa: B023
        case["torch_op_tflops"] = flop / case["torch_op_s"] / 1e12
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    os_ = F.scaled_dot_product_attention(qa, ka, va, is_causal=causal)
                    tb = timed(lambda: torch.autograd.grad(os_, (qa, ka, va), do, retain_graph=True))  # noqa: B023
                    if name == "cudnn":
                        gc = torch.autograd.grad(os_, (qa, ka, va), do, retain_graph=True)
                        case["rel_norm_diff_vs_cudnn"] = [float((a.float() - b.float()).norm() / b.float().norm())
                                                          for a, b in zip(g, gc, strict=True)]
                case[f"{name}_s"] = tb
                case[f"{name}_tflops"] = flop / tb / 1e12
            except RuntimeError as e:
                case[f"{name}_error"] = str(e)[:200]
        if "cudnn_tflops" in case:
            case["ratio_vs_cudnn"] = case["anywave_tflops"] / case["cudnn_tflops"]
        print(json.dumps(case), flush=True)
        res["cases"].append(case)
        torch.cuda.empty_cache()
    (out / "attention_bwd.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
