"""Tensor-core MMA on the H200 (issue 15): the issue's tile kernel on CUDA vs references, the mma
conformance group, SASS of the fragment GEMMs (HMMA / LDSM / LDG.128 / LDL / STL counts, ptxas
registers), the GEMMs bit for bit against the emulator (expected outputs made beforehand with
``python bench/gpu_mma.py --make-ref``, no GPU, into bench/_emu_ref/), accuracy vs float64 and
timing vs cuBLAS bf16 (torch.matmul) in the same run: CUDA events, medians of 10, interleaved
rounds. Writes $OUT/gpu_mma.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

VARIANTS = {  # name: (kernel, TM, TN, WM, WN, GM, BK, STAGES): block 16*TM*WM x 16*TN*WN, wave 16*TM x 16*TN;
    # STAGES 0: register-staged double buffer (the measured default), >= 2: aw.async_copy (cp.async) ring
    "tiled_128x256_g8_k64": ("tiled", 4, 4, 2, 4, 8, 64, 0),
    "tiled_256x128_g8_k64": ("tiled", 4, 4, 4, 2, 8, 64, 0),
    "tiled_128x128_w4_g8": ("tiled", 4, 4, 2, 2, 8, 32, 0),
    "async_128x256_g8_k32_s4": ("tiled", 4, 4, 2, 4, 8, 32, 4),
    "async_128x256_g8_k64_s4": ("tiled", 4, 4, 2, 4, 8, 64, 4),
    "async_128x256_g8_k64_s2": ("tiled", 4, 4, 2, 4, 8, 64, 2),
    "async_256x128_g8_k32_s4": ("tiled", 4, 4, 4, 2, 8, 32, 4),
    "async_128x128_w4_g8_k32_s4": ("tiled", 4, 4, 2, 2, 8, 32, 4),
}
REF = Path(__file__).resolve().parent / "_emu_ref"


def _ref_inputs(name: str) -> tuple:
    _, tm, tn, wm, wn, _g, bk, st = VARIANTS[name]
    bm, bn = 16 * tm * wm, 16 * tn * wn
    m, n, k = 2 * bm, 2 * bn, max(128, 2 * st * bk)
    rng = np.random.default_rng(sum(map(ord, name)))
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    return a, b, m, n, k


def make_ref() -> None:
    """Emulator outputs (W = 32) of every tiled variant on a 2 x 2 grid of blocks, K = 128."""
    from anywave.kernels.gemm_mma import gemm_tiled_kernel

    REF.mkdir(exist_ok=True)
    for name, (kind, tm, tn, wm, wn, gm, bk, st) in VARIANTS.items():
        if kind != "tiled" or (REF / f"{name}.npy").exists():
            continue
        a, b, m, n, k = _ref_inputs(name)
        c = np.full(m * n, np.nan, np.float32)
        t0 = time.time()
        from anywave.emu import emulate

        mod = gemm_tiled_kernel.compile(TM=tm, TN=tn, WM=wm, WN=wn, GM=gm, BK=bk, STAGES=st)
        emulate(mod, gemm_tiled_kernel.name, grid=(n // (16 * tn * wn), m // (16 * tm * wm), 1),
                workgroup=(wm * wn * 32, 1, 1), wave_width=32, max_local_memory=228 * 1024,
                args=[a.view(np.uint32).reshape(-1), b.view(np.uint32).reshape(-1), np.zeros(n, np.float32), c,
                      m, n, k])
        np.save(REF / f"{name}.npy", c)
        print(name, "emulated in", round(time.time() - t0, 1), "s", flush=True)


if __name__ == "__main__" and "--make-ref" in sys.argv:
    make_ref()
    sys.exit(0)

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from anywave.backends import ptx  # noqa: E402
from anywave.conformance import run_suite  # noqa: E402
from anywave.emu import emulate  # noqa: E402
from anywave.kernels.gemm_mma import gemm_frag_kernel, gemm_tiled_kernel  # noqa: E402
from anywave.runtime import cuda  # noqa: E402
from mma_issue_kernel import mma_gemm  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp"))
_smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                      text=True).stdout.strip()
res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": torch.cuda.get_device_name(), "driver": _smi,
             "torch": torch.__version__, "commit": os.environ.get("AW_COMMIT", "?")}
tgt = cuda.CudaTarget()


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


KERNELS = {"frag": gemm_frag_kernel, "tiled": gemm_tiled_kernel}
MODS = {}
for _name, (_kind, _tm, _tn, _wm, _wn, _gm, _bk, _st) in VARIANTS.items():
    if _kind == "frag":
        MODS[_name] = gemm_frag_kernel.compile(TM=_tm, TN=_tn, WM=_wm, WN=_wn)
    else:
        MODS[_name] = gemm_tiled_kernel.compile(TM=_tm, TN=_tn, WM=_wm, WN=_wn, GM=_gm, BK=_bk, STAGES=_st)


def sass() -> None:
    out = {}
    for name, mod in MODS.items():
        text = str(ptx.translate(mod))
        (OUT / "k.ptx").write_text(text)
        pv = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(OUT / "k.ptx"), "-o", str(OUT / "k.cubin")],
                            capture_output=True, text=True)
        sa = subprocess.run(["cuobjdump", "--dump-sass", str(OUT / "k.cubin")], capture_output=True, text=True).stdout
        if name == "tiled_128x256_g8_k64":
            (OUT / "gemm_tiled.sass").write_text(sa)
        regs = [ln.strip() for ln in pv.stderr.splitlines() if "registers" in ln or "spill" in ln]
        out[name] = {k: sa.count(k) for k in ("HMMA", "LDSM", "LDG.E.128", "STS.128", "LDGSTS", "BAR.SYNC", "LDL",
                                              "STL", "VOTE", "SEL ")}
        out[name].update({"BRA": sa.count(" BRA"), "ptxas": regs,
                          "control": "per-thread" if "per-thread control flow" in text else "mask-stack"})
        print("sass", name, out[name], flush=True)
    res["sass"] = out


section(sass)


def refkernels() -> None:
    from anywave.asm import assemble
    from anywave.emu.machine import emulate_flat

    runner = cuda.cuda_runner(tgt)
    here = Path(__file__).resolve().parent.parent / "tests" / "ref_kernels"
    out = {}
    for name, grid, wg, size in (("mma_query", (1, 1, 1), (1, 1, 1), 64), ("mma_simple", (1, 1, 1), (1, 1, 1), 256),
                                 ("gemm_mma", (1, 1, 1), (8, 8, 1), 3 * 4096)):
        m = assemble((here / f"{name}.wave").read_text(), name)
        rng = np.random.default_rng(3)
        mem = np.zeros(size, np.uint8)
        if name == "gemm_mma":
            mem[:8192] = rng.standard_normal(2048).astype(np.float32).view(np.uint8)
        elif name == "mma_simple":
            mem[:128] = np.concatenate([np.ones(16, np.float32), np.ones(16, np.float32)]).view(np.uint8)
        e = mem.copy()
        emulate_flat(m, name, e, grid=grid, workgroup=wg, wave_width=32)
        regs = m.kernel(name).registers
        args = {"memory": mem, **{f"init_r{i}": np.uint32(0) for i in range(regs)}}
        runner(m, name, grid, wg, args, 32)
        out[name] = {"bit_identical_to_emulator": bool(np.array_equal(args["memory"], e))}
        if name == "mma_query":
            out[name]["values"] = args["memory"][:16].view(np.uint32).tolist()
        if name == "mma_simple":
            out[name]["all_4"] = bool((args["memory"][128:192].view(np.float32) == 4.0).all())
        print("ref", name, out[name], flush=True)
    res["reference_kernels"] = out


section(refkernels)

stream = torch.cuda.current_stream().cuda_stream


def launcher(name, A, B, bias, C, m, n=None, k=None):
    n = m if n is None else n
    k = m if k is None else k
    kind, tm, tn, wm, wn, _gm, _bk, _st = VARIANTS[name]
    bm, bn = 16 * tm * wm, 16 * tn * wn
    mod = MODS[name]
    kname = KERNELS[kind].name
    if kind == "frag":
        args = [A, B, bias, C, m, n, k]
    else:
        args = [A.view(torch.int32), B.view(torch.int32), bias, C, m, n, k]
    return lambda: tgt.launch(mod, kname, (n // bn, m // bm), wm * wn * 32, args, stream=stream, sync=False)


def emulator_bits() -> None:
    out = {}
    for name, v in VARIANTS.items():
        f = REF / f"{name}.npy"
        if v[0] != "tiled" or not f.exists():
            continue
        a, b, m, n, k = _ref_inputs(name)
        want = np.load(f)
        A = torch.from_numpy(a.view(np.uint16).astype(np.int16)).cuda().view(torch.bfloat16)
        B = torch.from_numpy(b.view(np.uint16).astype(np.int16)).cuda().view(torch.bfloat16)
        C = torch.full((m, n), float("nan"), device="cuda")
        launcher(name, A, B, torch.zeros(n, device="cuda"), C, m, n, k)()
        torch.cuda.synchronize()
        got = C.cpu().numpy().reshape(-1)
        ad, bd = a.astype(np.float64), b.astype(np.float64)
        ref = ad @ bd
        bound = 2.0 ** -18 * (k / 16) * (np.abs(ad) @ np.abs(bd)) * 1.001
        out[name] = {"shape": [m, n, k],
                     "bit_identical_to_emulator": bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))),
                     "elements_differing": int((got.view(np.uint32) != want.view(np.uint32)).sum()),
                     "max_abs_diff_vs_emulator": float(np.abs(got - want).max()),
                     "gpu_within_bound_of_f64": bool((np.abs(got.reshape(m, n) - ref) <= bound).all()),
                     "emulator_within_bound_of_f64": bool((np.abs(want.reshape(m, n) - ref) <= bound).all()),
                     "max_err_over_bound_gpu": float((np.abs(got.reshape(m, n) - ref) / bound).max()),
                     "max_err_over_bound_emulator": float((np.abs(want.reshape(m, n) - ref) / bound).max())}
        print("emulator bits", name, out[name], flush=True)
    res["gemm_vs_emulator"] = out


section(emulator_bits)


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


def gemm() -> None:
    gres = {}
    # correctness of every variant at 1024 (fresh random inputs, poisoned output)
    n = 1024
    g = torch.Generator(device="cuda").manual_seed(11)
    A = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    B = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.zeros(n, device="cuda")
    ref = A.double() @ B.double()
    absb = A.double().abs() @ B.double().abs()
    for name in VARIANTS:
        C = torch.full((n, n), float("nan"), device="cuda")
        launcher(name, A, B, bias, C, n)()
        torch.cuda.synchronize()
        gres[f"{name}@1024"] = {
            "rel_fro_err_vs_f64": float(torch.linalg.norm(C.double() - ref) / torch.linalg.norm(ref)),
            "within_bound": bool(((C.double() - ref).abs() <= 2.0 ** -18 * (n / 16) * absb * 1.001).all())}
        print("gemm", name, gres[f"{name}@1024"], flush=True)
    cb = (A @ B).double()
    gres["cublas_bf16_out@1024"] = {"rel_fro_err_vs_f64": float(torch.linalg.norm(cb - ref) / torch.linalg.norm(ref))}
    del ref, absb
    fl = lambda n: 2 * n ** 3  # noqa: E731
    for n in (4096, 8192):
        g = torch.Generator(device="cuda").manual_seed(n)
        A = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        B = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        bias = torch.zeros(n, device="cuda")
        C = torch.full((n, n), float("nan"), device="cuda")
        ranked = sorted(VARIANTS, key=lambda k: -gres.get(f"{k}@4096", {}).get("tflops", 0))
        names = list(VARIANTS) if n == 4096 else ranked[:4]
        fns = {nm: launcher(nm, A, B, bias, C, n) for nm in names}
        fns["cublas"] = lambda A=A, B=B: A @ B
        for f in fns.values():
            for _ in range(3):
                f()
        torch.cuda.synchronize()
        ts = {k: [] for k in fns}
        for _ in range(5):  # interleaved rounds
            for k, f in fns.items():
                ts[k] += timed(f, 2)
        C.fill_(float("nan"))
        for nm in names:  # every output written, finite, and the product (spot rows vs float64)
            fns[nm]()
            torch.cuda.synchronize()
            rows = torch.arange(0, n, n // 16, device="cuda")
            ref = A[rows].double() @ B.double()
            bad = ~((C[rows].double() - ref).abs() <= 2.0 ** -18 * (n / 16) * (A[rows].double().abs() @
                                                                             B.double().abs()) * 1.001)
            gres[f"{nm}@{n}:rows_within_bound"] = bool(not bad.any()) and bool(torch.isfinite(C).all())
        for k in fns:
            med = float(np.median(ts[k]))
            gres[f"{k}@{n}"] = {"median_s": med, "tflops": fl(n) / med / 1e12,
                                "spread": [float(min(ts[k])), float(max(ts[k]))]}
        for k in names:
            gres[f"{k}@{n}"]["ratio_vs_cublas"] = gres[f"{k}@{n}"]["tflops"] / gres[f"cublas@{n}"]["tflops"]
        if n == 4096:
            res["best_variant"] = max(names, key=lambda k: gres[f"{k}@{n}"]["tflops"])
        print("timing", n, {k: round(gres[f"{k}@{n}"]["tflops"], 1) for k in fns}, flush=True)
        res["gemm"] = gres
        save()
    res["gemm"] = gres


section(gemm)


def probes() -> None:
    """Time the stage-less probes (bench/gpu_mma_probe.py) beside cuBLAS: the mma.sync ceiling."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_mma_probe import hmma_loop, smem_loop

    x = torch.randn(8192, device="cuda").to(torch.bfloat16).view(torch.int32)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    out = {}
    for name, kern, waves, iters in (("hmma_loop_8w", hmma_loop, 8, 2048), ("hmma_loop_4w", hmma_loop, 4, 2048),
                                     ("smem_loop_128x256_k64", smem_loop, 8, 8192)):
        mod = kern.compile()
        blocks = nsm * 8
        c = torch.empty(blocks * waves * 16 * 256, device="cuda")
        if kern is hmma_loop:
            flop = blocks * waves * iters * 16 * 2 * 16 ** 3
        else:
            flop = blocks * 2 * 128 * 256 * iters
        def f(mod=mod, kern=kern, blocks=blocks, waves=waves, c=c, iters=iters):  # noqa: ANN001, ANN202
            tgt.launch(mod, kern.name, (blocks, 1, 1), waves * 32, [x, c, iters], stream=stream, sync=False)

        for _ in range(3):
            f()
        torch.cuda.synchronize()
        ts = timed(f, 10)
        med = float(np.median(ts))
        out[name] = {"median_s": med, "tflops": flop / med / 1e12, "blocks": blocks, "waves": waves}
        print("probe", name, round(out[name]["tflops"], 1), flush=True)
    res["probes"] = out


section(probes)


def torch_op() -> None:
    from anywave.torch import mma_ops  # noqa: F401

    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(1000, 1000, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(1000, 700, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.randn(700, device="cuda", generator=g)
    out = torch.ops.anywave.gemm_mma(a, b, bias)
    ref = a.double() @ b.double() + bias.double()
    absb = a.double().abs() @ b.double().abs()
    bound = 2.0 ** -18 * (1024 / 16) * absb * 1.001 + 2.0 ** -23 * ref.abs()
    r = {"rel_fro_err_vs_f64": float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)),
         "within_bound": bool(((out.double() - ref).abs() <= bound).all())}
    outg = torch.ops.anywave.gemm_mma(a, b, bias, True)
    gel = torch.nn.functional.gelu(ref, approximate="tanh")
    r["gelu_max_abs_err"] = float((outg.double() - gel).abs().max())
    res["torch_op"] = r
    print("torch op", r, flush=True)


section(torch_op)
