"""The wave-group MMA (``mma.group``, docs/spec.md §8.14) on the H200 (issue 15):

1. correctness on the CUDA target of ``mma.group`` alone (N = 64, 128, 256; f16 and bf16; two
   groups, two 16-deep steps) on small-integer data, where every path is exact, through both
   PTX lowerings: ``wgmma`` (sm_90a) and the per-warp ``ldmatrix`` + ``mma.sync`` fallback
   (forced by ``ptx_mma.WGMMA_ARCH = 0``);
2. ``gemm_group_kernel`` (anywave.kernels.gemm_group) at ``N``³ bf16 beside cuBLAS bf16
   (``torch.matmul``) and beside the mma.sync kernel (``gemm_tiled_kernel``, the previous
   fast path) in the same run: CUDA events around 2 launches, medians of 7 interleaved rounds
   after 3 warm-ups; outputs checked on 16 spot rows against the float64 product with the
   kernel's bound ``2^-18 * (K/16) * |A| @ |B|``; ptxas registers/spills and the SASS count of
   ``HGMMA`` (cuobjdump) per variant.

    PYTHONPATH=src OUT=... python bench/gpu_group_gemm.py   # on a GPU; writes $OUT/gpu_group_gemm.json
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import torch

import anywave as aw
from anywave.backends import ptx, ptx_mma
from anywave.kernels.gemm_group import gemm_group_kernel
from anywave.kernels.gemm_mma import gemm_tiled_kernel
from anywave.runtime import cuda

OUT = Path(os.environ.get("OUT", "/tmp"))
N = int(os.environ.get("GROUP_N", "8192"))
W = cuda.WAVE_WIDTH


@aw.kernel
def group_only(a: aw.In[aw.u16], b: aw.In[aw.u16], c: aw.Out[aw.f32], *, NN: int = 256, f16: bool = False):
    # 8 waves: wave w's strip is rows 16w.. of C (128 x NN) = A (128 x 32) @ B (32 x NN); B written
    # into local memory with the spec's swizzled panel layout, panels of 32 rows (stride 4096)
    elt = aw.f16 if f16 else aw.bf16
    tb = aw.local_array(aw.u16, (32 * NN,), align=1024)
    acc = aw.fragments(NN // 16, "acc")
    fa = aw.fragment("a", elt)
    for e in range(aw.local_id(0), 32 * NN, aw.workgroup_size(0)):
        kk = e // NN
        nn = e % NN
        tb[((nn // 64) * 4096 + 128 * kk + 16 * (((nn % 64) // 8) ^ (kk % 8)) + 2 * (nn % 8)) // 2] = b[e]
    aw.barrier()
    wv = aw.wave_id()
    for ks in aw.static_range(2):
        aw.mma_load(fa, a, (16 * wv) * 32 + 16 * ks, 32)
        aw.mma_group(acc, fa, tb, 2048 * ks, 4096)
    for j in aw.static_range(NN // 16):
        aw.mma_store(c, acc[j], (16 * wv) * NN + 16 * j, NN)


def check_group(res: dict) -> None:
    rng = np.random.default_rng(5)
    out = {}
    for path, arch in (("wgmma", 90), ("ldmatrix_mma_sync", 0)):
        ptx_mma.WGMMA_ARCH = arch
        tgt = cuda.CudaTarget()  # its own loaded modules: translated under this lowering
        for f16 in (False, True):
            dt = np.float16 if f16 else ml_dtypes.bfloat16
            for nn in (64, 128, 256):
                A = rng.integers(-4, 5, (128, 32)).astype(dt)
                B = rng.integers(-4, 5, (32, nn)).astype(dt)
                mod = group_only.compile(NN=nn, f16=f16)
                tc = torch.full((128 * nn,), float("nan"), device="cuda")
                ta = torch.from_numpy(A.view(np.int16).reshape(-1).copy()).cuda()
                tb = torch.from_numpy(B.view(np.int16).reshape(-1).copy()).cuda()
                tgt.launch(mod, group_only.name, (1, 1, 1), (8 * W, 1, 1), [ta, tb, tc])
                torch.cuda.synchronize()
                C = tc.cpu().numpy().reshape(128, nn)
                E = np.full_like(C, np.nan)
                group_only(A.view(np.uint16).reshape(-1), B.view(np.uint16).reshape(-1), E.reshape(-1),
                           grid=(1, 1, 1), workgroup=(8 * W, 1, 1), target="emulator", wave_width=W, NN=nn, f16=f16)
                ref = A.astype(np.float64) @ B.astype(np.float64)
                out[f"{path}_{'f16' if f16 else 'bf16'}_n{nn}"] = {
                    "wrong_vs_float64": int((C != ref).sum()), "differ_from_emulator": int((C != E).sum())}
        mod = group_only.compile(NN=256)
        text = ptx.translate(mod, "sm_90").text
        res.setdefault("group_only_target", {})[path] = re.search(r"\.target (\S+)", text).group(1)
    ptx_mma.WGMMA_ARCH = 90
    res["group_only"] = out


def sass_and_regs(mod, name: str) -> dict:
    text = ptx.translate(mod, "sm_90").text
    p = OUT / f"{name}.ptx"
    p.write_text(text)
    target = re.search(r"\.target (\S+)", text).group(1)
    pv = subprocess.run(["ptxas", f"-arch={target}", "-v", str(p), "-o", str(OUT / f"{name}.cubin")],
                        capture_output=True, text=True)
    sass = subprocess.run(["cuobjdump", "--dump-sass", str(OUT / f"{name}.cubin")], capture_output=True,
                          text=True).stdout
    (OUT / f"{name}.sass").write_text(sass)
    return {"target": target, "ptxas": [ln.strip() for ln in pv.stderr.splitlines() if "registers" in ln or "spill"
                                        in ln], "HGMMA": len(re.findall(r"\bHGMMA\.", sass)),
            "HMMA": len(re.findall(r"\bHMMA\.", sass)), "LDSM": len(re.findall(r"\bLDSM\b", sass)),
            "LDGSTS": len(re.findall(r"\bLDGSTS\b", sass)), "warnings": [ln for ln in pv.stderr.splitlines()
                                                                           if "warn" in ln.lower()]}


def main() -> None:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": torch.cuda.get_device_name(), "nvidia_smi": smi,
                 "torch": torch.__version__, "commit": os.environ.get("ANYWAVE_COMMIT", "?"), "n": N,
                 "method": "CUDA events around 2 launches, medians of 7 interleaved rounds after 3 warm-ups"}
    check_group(res)
    print(json.dumps(res["group_only"]), flush=True)
    tgt = cuda.CudaTarget()
    stream = torch.cuda.current_stream().cuda_stream
    g = torch.Generator(device="cuda").manual_seed(N)
    A = torch.randn(N, N, device="cuda", generator=g).to(torch.bfloat16)
    B = torch.randn(N, N, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.zeros(N, device="cuda")
    C = torch.full((N, N), float("nan"), device="cuda")
    grid = (N // 256, N // 128)
    args = [A.view(torch.int32), B.view(torch.int32), bias, C, N, N, N]
    fns, info = {}, {}
    # GR = 3 (192 x 256 blocks, 12 waves) through a kernel object that declares its 384 threads
    # (.maxntid: ptxas fits 168 registers)
    # name: (GR, BK, STAGES, GM, ASYNC): ASYNC = mma_group_async, a slice's wgmma running on into the next
    variants = {"group_k64_s4": (2, 64, 4, 8, False), "group3_k64_s2": (3, 64, 2, 8, False),
                "group_async_k64_s4": (2, 64, 4, 8, True), "group_async_k64_s4_g16": (2, 64, 4, 16, True),
                "group_async_k32_s4": (2, 32, 4, 8, True), "group_async_k32_s8": (2, 32, 8, 8, True),
                "group3_async_k32_s4": (3, 32, 4, 8, True)}
    bounded = aw.kernel(max_workgroup_size=12 * W)(gemm_group_kernel.fn)
    for name, (gr, bk, st, gm, asy) in variants.items():
        if (N // bk) % st:
            continue
        kern = bounded if gr == 3 else gemm_group_kernel
        mod = kern.compile(W=W, GR=gr, GM=gm, STAGES=st, BK=bk, ASYNC=asy)
        info[name] = sass_and_regs(mod, name)
        g = (N // 256, -(-N // (64 * gr)))
        fns[name] = (lambda mod=mod, g=g, nt=4 * gr * W: tgt.launch(mod, gemm_group_kernel.name, g, nt, args,
                                                                    stream=stream, sync=False))
    ptx_mma.WGMMA_ARCH = 0
    mod = gemm_group_kernel.compile(W=W, GM=8, STAGES=4, BK=32)
    tgt_fb = cuda.CudaTarget()
    info["group_k32_s4_no_wgmma"] = sass_and_regs(mod, "group_k32_s4_no_wgmma")
    fns["group_k32_s4_no_wgmma"] = (lambda mod=mod: tgt_fb.launch(mod, gemm_group_kernel.name, grid, 8 * W, args,
                                                                  stream=stream, sync=False))
    fns["group_k32_s4_no_wgmma"]()  # compiled (and cached) while the fallback lowering is selected
    torch.cuda.synchronize()
    ptx_mma.WGMMA_ARCH = 90
    tmod = gemm_tiled_kernel.compile(TM=4, TN=4, WM=2, WN=4, W=W, GM=8, BK=32, STAGES=4)
    info["tiled_mma_sync"] = sass_and_regs(tmod, "tiled_mma_sync")
    fns["tiled_mma_sync"] = (lambda: tgt.launch(tmod, gemm_tiled_kernel.name, grid, 8 * W, args, stream=stream,
                                                sync=False))
    fns["cublas"] = lambda: A @ B
    import anywave.torch.ops  # noqa: F401  (registers torch.ops.anywave.*, gemm_mma included)

    fns["torch_op_gemm_mma"] = lambda: torch.ops.anywave.gemm_mma(A, B)
    h = N // 2  # the torch op and cuBLAS at half the size too
    A2, B2 = A[:h, :h].contiguous(), B[:h, :h].contiguous()
    fns[f"torch_op_gemm_mma_{h}"] = lambda: torch.ops.anywave.gemm_mma(A2, B2)
    fns[f"cublas_{h}"] = lambda: A2 @ B2
    res["kernels"] = info
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
    cub = float(np.median(ts["cublas"]))
    cub_h = float(np.median(ts[f"cublas_{h}"]))
    rows = torch.cat([torch.arange(0, N, N // 16), torch.arange(N - 3, N)]).to("cuda")  # + the last block row
    ref = A[rows].double() @ B.double()
    bound = 2.0 ** -18 * (N / 16) * (A[rows].double().abs() @ B.double().abs()) * 1.001
    out = {}
    for k, v in ts.items():
        med = float(np.median(v))
        small = k.endswith(f"_{h}")
        out[k] = {"median_s": med, "spread": [min(v), max(v)], "tflops": 2 * (h if small else N) ** 3 / med / 1e12,
                  "ratio_vs_cublas": (cub_h if small else cub) / med, "n": h if small else N}
        if k == "torch_op_gemm_mma":
            c = fns[k]()
            torch.cuda.synchronize()
            out[k]["rows_within_bound"] = bool(((c[rows].double() - ref).abs() <= bound).all())
        elif not k.startswith("cublas") and not small:
            C.fill_(float("nan"))
            fns[k]()
            torch.cuda.synchronize()
            out[k]["rows_within_bound"] = bool(((C[rows].double() - ref).abs() <= bound).all()) and bool(
                torch.isfinite(C).all())
    res["results"] = out
    print(json.dumps({k: (round(v["tflops"], 1), round(v["ratio_vs_cublas"], 3), v.get("rows_within_bound"))
                      for k, v in out.items()}, indent=1))
    print(json.dumps(info, indent=1))
    (OUT / "gpu_group_gemm.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(main())
