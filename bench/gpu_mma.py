"""Tensor-core MMA on the H200 (issue 15): the issue's tile kernel on CUDA vs references, the mma
conformance group, SASS of the fragment GEMM (HMMA / LDL / STL counts), GEMM accuracy vs float64
and GEMM timing vs cuBLAS bf16 (torch.matmul) in the same run: CUDA events, medians of 10,
interleaved rounds. Writes $OUT/gpu_mma.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from anywave.backends import ptx  # noqa: E402
from anywave.conformance import run_suite  # noqa: E402
from anywave.emu import emulate  # noqa: E402
from anywave.kernels.gemm_mma import DEFAULT_TILE, gemm_frag_kernel  # noqa: E402
from anywave.runtime import cuda  # noqa: E402
from mma_issue_kernel import mma_gemm  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp"))
res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": torch.cuda.get_device_name(),
             "torch": torch.__version__, "commit": os.environ.get("AW_COMMIT", "?")}
tgt = cuda.CudaTarget()
GM = gemm_frag_kernel.compile(**DEFAULT_TILE)


def save() -> None:
    (OUT / "gpu_mma.json").write_text(json.dumps(res, indent=1, default=str))


def section(fn):
    """Run one part; record its error and go on with the next."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - a bench script reports every part
        import traceback
        res.setdefault("errors", []).append(f"{fn.__name__}: {traceback.format_exc()[-1500:]}")
        print("ERROR", fn.__name__, e, flush=True)
    save()


def issue_kernel() -> None:
    iss = {}
    mod = mma_gemm.compile()
    for n in (16, 32, 64, 256, 1024):
        rng = np.random.default_rng(n)
        a = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal(n * n).astype(ml_dtypes.bfloat16)
        c = np.zeros(n * n, np.float32)
        tgt.launch(mod, "mma_gemm", (n // 16, n // 16), 32, [a, b, c, n])
        ref = (a.astype(np.float64).reshape(n, n) @ b.astype(np.float64).reshape(n, n))
        absb = np.abs(a.astype(np.float64).reshape(n, n)) @ np.abs(b.astype(np.float64).reshape(n, n))
        bound = 2.0 ** -18 * (n / 16) * absb * 1.001
        r = {"max_abs_err_vs_f64": float(np.abs(c.reshape(n, n) - ref).max()),
             "within_bound": bool((np.abs(c.reshape(n, n) - ref) <= bound).all())}
        if n <= 64:
            e = np.zeros(n * n, np.float32)
            emulate(mod, "mma_gemm", grid=(n // 16, n // 16, 1), workgroup=(32, 1, 1), args=[a, b, e, n], wave_width=32)
            r["bit_identical_to_emulator"] = bool(np.array_equal(e.view(np.uint32), c.view(np.uint32)))
        iss[n] = r
        print("issue kernel", n, r, flush=True)
    res["issue_kernel"] = iss
    save()


section(issue_kernel)


def conformance() -> None:
    # 2. conformance (mma group)
    rep = run_suite(cuda.cuda_runner(tgt), [32], progress=False, groups=["mma", "mma_frag"])
    fails = [f"{r.case}: {r.message[:300]}" for r in rep.failures()]
    res["conformance_mma"] = {"counts": rep.counts(), "failures": fails}
    print("conformance", res["conformance_mma"], flush=True)
    save()


section(conformance)


def sass() -> None:
    # 3. SASS of the fragment GEMM
    text = str(ptx.translate(GM))
    (OUT / "gemm_frag.ptx").write_text(text)
    subprocess.run(["ptxas", "-arch=sm_90", "-v", str(OUT / "gemm_frag.ptx"), "-o", str(OUT / "gemm_frag.cubin")],
                   capture_output=True, text=True)
    pv = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(OUT / "gemm_frag.ptx"), "-o", str(OUT / "gemm_frag.cubin")],
                        capture_output=True, text=True)
    sass = subprocess.run(["cuobjdump", "--dump-sass", str(OUT / "gemm_frag.cubin")], capture_output=True,
                          text=True).stdout
    (OUT / "gemm_frag.sass").write_text(sass)
    res["sass"] = {"HMMA": sass.count("HMMA"), "LDL": sass.count("LDL"), "STL": sass.count("STL"),
                   "ptxas_v": pv.stderr[-600:]}
    print("sass", res["sass"], flush=True)
    save()


section(sass)


def gemm() -> None:
    # 4/5. GEMM accuracy and timing vs cuBLAS bf16
    p = DEFAULT_TILE
    bm, bn = 16 * p["TM"] * p["WM"], 16 * p["TN"] * p["WN"]
    waves = p["WM"] * p["WN"]
    stream = torch.cuda.current_stream().cuda_stream


    def run_aw(A, B, bias, C, n):
        tgt.launch(GM, "gemm_frag_kernel", (n // bn, n // bm), waves * 32, [A, B, bias, C, n, n, n],
                   stream=stream, sync=False)


    def timed(fn, reps=10):
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        return ts


    gres = {}
    for n in (1024, 4096, 8192):
        g = torch.Generator(device="cuda").manual_seed(n)
        A = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        B = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        bias = torch.zeros(n, device="cuda")
        C = torch.full((n, n), float("nan"), device="cuda")  # poisoned: every element must be written
        run_aw(A, B, bias, C, n)
        torch.cuda.synchronize()
        r = {}
        if n <= 4096:
            ref = A.double() @ B.double()
            r["rel_fro_err_vs_f64"] = float(torch.linalg.norm(C.double() - ref) / torch.linalg.norm(ref))
            absb = A.double().abs() @ B.double().abs()
            r["within_bound"] = bool(((C.double() - ref).abs() <= 2.0 ** -18 * (n / 16) * absb * 1.001).all())
            cb = (A @ B).float()
            r["cublas_rel_fro_err_vs_f64"] = float(torch.linalg.norm(cb.double() - ref) / torch.linalg.norm(ref))
            del ref, absb
        if n >= 4096:
            for _ in range(3):
                run_aw(A, B, bias, C, n)
                A @ B
            torch.cuda.synchronize()
            ta, tc = [], []
            for _ in range(5):  # interleaved rounds
                ta += timed(lambda A=A, B=B, bias=bias, C=C, n=n: run_aw(A, B, bias, C, n), 2)
                tc += timed(lambda A=A, B=B: A @ B, 2)
            fl = 2 * n ** 3
            r["anywave_median_s"] = float(np.median(ta))
            r["cublas_median_s"] = float(np.median(tc))
            r["anywave_tflops"] = fl / r["anywave_median_s"] / 1e12
            r["cublas_tflops"] = fl / r["cublas_median_s"] / 1e12
            r["ratio"] = r["anywave_tflops"] / r["cublas_tflops"]
        gres[n] = r
        print("gemm", n, r, flush=True)
        save()
    res["gemm"] = gres
    save()


section(gemm)
