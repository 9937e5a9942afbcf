"""Issue 14 on an NVIDIA GPU: kernels written in anywave's Python language against cuBLAS, torch
and Triton, in one run.

    python bench/bench_speed.py [--out DIR] [--commit SHA] [--quick]

Sections (each figure a median over 3 interleaved rounds of 10 repetitions, CUDA events on the
launching stream, a 256 MiB L2 scrub before every repetition; peers in the same rounds):

1. fp32 GEMM (``kernels.gemm.gemm_f32_kernel``, every tile config of ``gemm.CONFIGS``) at 4096³
   and 8192³ vs cuBLAS via ``torch.matmul`` with ``allow_tf32 = False``; bit-exact checks: the
   GPU result against the emulator (128 x 256 x 64) and against the sequential-order fma
   reference (computed on the GPU in float64 with round-to-odd, as ``reference.fma_f32``) on 64
   sampled rows at 4096³; our compiler's time per config;
2. element-wise over 2^28 f32 (``kernels.vec``: ``add4``, ``saxpy4``, ``gelu4`` at several
   quads per thread) vs torch and Triton; bit-exact against torch (add, mul+add saxpy) and
   against the emulator on a slice (GELU);
3. row softmax 32768 x 4096 and layer norm (``softmax4``/``layer_norm4``) vs torch; sum of
   2^28 (``sum4``) vs ``torch.sum``;
4. per kernel: registers and spills (``ptxas -v`` via the CUDA target's load), SASS counts
   (``cuobjdump --dump-sass``: FFMA, LDS.128, LDG.E.128, STG.E.128, LDL/STL).

Writes ``OUT/speed_<date>.json`` (device, driver, commit, date); ``bench/speed_report.py``
turns it into the bar chart PNG and the README table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "src", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
from bench_cuda import Timer, _tr_add, _tr_saxpy, environment, same_bits, with_bw  # noqa: E402

from anywave.emu import emulate  # noqa: E402
from anywave.kernels import gemm as G  # noqa: E402
from anywave.kernels import vec as V  # noqa: E402
from anywave.runtime import cuda  # noqa: E402

SASS_OPS = ("FFMA", "LDS.128", "LDS", "STS.128", "STS", "LDG.E.128.CONSTANT", "LDG.E.128", "LDG.E.CONSTANT",
            "LDG.E", "STG.E.128", "STG.E", "LDL", "STL", "BAR.SYNC")


def sass_counts(sass: str) -> dict[str, int]:
    """Count each opcode of :data:`SASS_OPS` exactly (``LDS`` does not count ``LDS.128``)."""
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    out = {k: 0 for k in SASS_OPS}
    for op in ops:
        for k in SASS_OPS:
            if op == k or (k == "BAR.SYNC" and op.startswith("BAR.SYNC")) or (k in ("LDL", "STL") and op.startswith(k)):
                out[k] += 1
                break
    out["instructions"] = len(ops)
    return out


def kernel_report(tgt: cuda.CudaTarget, mod: Any, name: str, out_dir: Path, tag: str = "") -> dict[str, Any]:
    lm = tgt.load(mod)
    fname = name + tag
    out_dir = out_dir / "dumps"
    out_dir.mkdir(exist_ok=True)
    info: dict[str, Any] = {"wave_registers": mod.kernels[0].registers,
                            "ptx_registers": lm.kernels[name].num_regs}
    try:
        sass = subprocess.run(["cuobjdump", "--dump-sass", str(lm.cache_path)], capture_output=True, text=True,
                              timeout=60).stdout
        (out_dir / f"sass_{fname}.txt").write_text(sass)
        info["sass"] = sass_counts(sass)
    except (OSError, subprocess.SubprocessError) as e:
        info["sass"] = f"cuobjdump failed: {e}"
    try:
        ptx = lm.program.text
        pf = out_dir / f"{fname}.ptx"
        pf.write_text(ptx)
        v = subprocess.run(["ptxas", f"-arch={tgt.device.props.arch}", "-v", str(pf), "-o", os.devnull],
                           capture_output=True, text=True, timeout=120)
        info["ptxas_v"] = " ".join(line.strip() for line in (v.stdout + v.stderr).splitlines() if "Used" in line
                                   or "spill" in line)
    except (OSError, subprocess.SubprocessError) as e:
        info["ptxas_v"] = f"ptxas failed: {e}"
    return info


def fma_f32_torch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Correctly rounded f32 fma on the GPU (the algorithm of ``reference.fma_f32``)."""
    a64, b64, c64 = a.double(), b.double(), c.double()
    p = a64 * b64
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    even = (s.view(torch.int64) & 1) == 0
    fix = (e != 0) & even
    toward = torch.where(e > 0, torch.full_like(s, float("inf")), torch.full_like(s, float("-inf")))
    s = torch.where(fix, torch.nextafter(s, toward), s)
    return s.float()


def bench_gemm(tgt: cuda.CudaTarget, timer: Timer, out_dir: Path, quick: bool) -> dict[str, Any]:
    stream = torch.cuda.current_stream().cuda_stream
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    res: dict[str, Any] = {"peer": "torch.matmul (cuBLAS), allow_tf32=False", "configs": list(G.CONFIGS)}
    mods, compile_ms = {}, {}
    for i, cfg in enumerate(G.CONFIGS):
        t0 = time.perf_counter()
        G.gemm_f32_kernel.compile_kernel({**cfg, "epilogue": "none"})
        compile_ms[i] = (time.perf_counter() - t0) * 1e3
        mods[i] = G.gemm_f32_kernel.compile(**cfg, epilogue="none")
    res["compile_ms_per_config"] = compile_ms
    res["kernels"] = {str(i): kernel_report(tgt, mods[i], "gemm_f32_kernel", out_dir, f"_cfg{i}") for i in mods}
    # bit-exact vs the emulator, small
    rng = np.random.default_rng(0)
    m_, n_, k_ = 128, 256, 64
    a_s = rng.standard_normal((m_, k_), dtype=np.float32)
    b_s = rng.standard_normal((k_, n_), dtype=np.float32)
    bias_s = rng.standard_normal(n_, dtype=np.float32)
    exact_emu = {}
    for ep in G.EPILOGUES:
        mod = G.gemm_f32_kernel.compile(**G.DEFAULT, epilogue=ep)
        ce = np.zeros((m_, n_), np.float32)
        grid, wg = G.launch_shape(m_, n_)
        emulate(mod, "gemm_f32_kernel", grid=grid, workgroup=wg, args=[a_s, b_s, bias_s, ce, m_, n_, k_],
                wave_width=32)
        cg = torch.zeros(m_, n_, device="cuda")
        tgt.launch(mod, "gemm_f32_kernel", grid, wg, [torch.from_numpy(a_s).cuda(), torch.from_numpy(b_s).cuda(),
                                                      torch.from_numpy(bias_s).cuda(), cg, m_, n_, k_],
                   stream=stream, sync=True)
        exact_emu[ep] = bool(np.array_equal(cg.cpu().numpy().view(np.uint32), ce.view(np.uint32)))
    res["bit_exact_vs_emulator_128x256x64"] = exact_emu
    for size in ((4096,) if quick else (4096, 8192)):
        m = n = k = size
        g = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn(m, k, device="cuda", generator=g)
        b = torch.randn(k, n, device="cuda", generator=g)
        bias = torch.zeros(n, device="cuda")
        c = torch.empty(m, n, device="cuda")
        flop = 2 * m * n * k
        fns: dict[str, Any] = {"cublas": lambda a=a, b=b: torch.matmul(a, b)}
        for i, cfg in enumerate(G.CONFIGS):
            grid, wg = G.launch_shape(m, n, cfg)
            args = [a, b, bias, c, m, n, k]
            fns[f"anywave_cfg{i}"] = (lambda mod=mods[i], grid=grid, wg=wg, args=args:
                                      tgt.launch(mod, "gemm_f32_kernel", grid, wg, args, stream=stream, sync=False))
        entry: dict[str, Any] = {}
        if size == 4096:
            fns["anywave_cfg0"]()
            torch.cuda.synchronize()
            rows = torch.arange(0, m, m // 64, device="cuda")
            acc = torch.zeros(len(rows), n, device="cuda")
            ar = a[rows]
            for kk in range(k):
                acc = fma_f32_torch(ar[:, kk:kk + 1], b[kk:kk + 1, :], acc)
            entry["bit_exact_vs_sequential_fma_64_rows"] = same_bits(c[rows], acc)
            ref = torch.matmul(a.double(), b.double())
            entry["max_abs_err_vs_f64"] = {"anywave": (c.double() - ref).abs().max().item(),
                                           "cublas": (torch.matmul(a, b).double() - ref).abs().max().item()}
            for i in range(1, len(G.CONFIGS)):
                c2 = c.clone()
                fns[f"anywave_cfg{i}"]()
                torch.cuda.synchronize()
                entry[f"cfg{i}_same_bits_as_cfg0"] = same_bits(c, c2)
                c.copy_(c2)
        if size == 4096:
            entry["autotune"] = autotune_on_gpu(tgt, mods, a, b, bias, c, m, n, k, stream)
        grp = timer.group(fns, rounds=3, reps=5 if size == 8192 else 10)
        for v in grp.values():
            v["tflop_per_s"] = flop / v["median_s"] / 1e12
        best = max((k2 for k2 in grp if k2 != "cublas"), key=lambda k2: grp[k2]["tflop_per_s"])
        entry.update({"times": grp, "best": best, "ratio_best_over_cublas": grp[best]["tflop_per_s"]
                      / grp["cublas"]["tflop_per_s"]})
        res[f"{size}"] = entry
        del a, b, c
        torch.cuda.empty_cache()
    return res


def autotune_on_gpu(tgt: cuda.CudaTarget, mods: dict[int, Any], a: torch.Tensor, b: torch.Tensor,
                    bias: torch.Tensor, c: torch.Tensor, m: int, n: int, k: int, stream: int) -> dict[str, Any]:
    """``aw.autotune`` on the CUDA target: CUDA-event timing, the cuda launch with torch
    tensors; then a second tuner finds the choice in the on-disk cache without timing."""
    from anywave.jit import autotune as A

    def launch(cfg: dict[str, Any], args: dict[str, Any]) -> None:
        i = next(j for j, cc in enumerate(G.CONFIGS) if all(cfg[x] == cc[x] for x in cc))
        grid, wg = G.launch_shape(args["m"], args["n"], cfg)
        tgt.launch(mods[i], "gemm_f32_kernel", grid, wg, [args["a"], args["b"], args["bias"], args["c"],
                                                           args["m"], args["n"], args["k"]], stream=stream, sync=False)

    def event_timer(run: Any) -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e-3

    def make() -> Any:
        return A.Autotuner(G.gemm_f32_kernel, G.CONFIGS, key=["m", "n", "k"], launch=launch, timer=event_timer,
                           warmup=2, reps=10, progress=False)

    t0 = time.perf_counter()
    best = make().best_config(a, b, bias, c, m, n, k, target="cuda")
    tune_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = make().best_config(a, b, bias, c, m, n, k, target="cuda")
    cached_s = time.perf_counter() - t0
    choices = A._read(A.cache_path())
    entry = next(iter(v for v in choices.values() if v.get("kernel") == "gemm_f32_kernel"), {})
    return {"best": best, "median_s_per_config": entry.get("median_s"), "device": entry.get("device"),
            "tuning_s": tune_s, "second_lookup_s": cached_s, "second_lookup_same_choice": again == best}


def bench_elementwise(tgt: cuda.CudaTarget, timer: Timer, out_dir: Path, quick: bool) -> dict[str, Any]:
    stream = torch.cuda.current_stream().cuda_stream
    n = 1 << 28
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    out = torch.empty_like(x)
    res: dict[str, Any] = {"n": n}
    pers = (1, 2, 4) if not quick else (2,)
    add = {}
    for per in pers:
        mod = V.add4_kernel.compile(per=per)
        grid = V.elementwise_grid(n, per)
        add[per] = (lambda mod=mod, grid=grid: tgt.launch(mod, "add4_kernel", grid, V.WG, [x, y, out, n],
                                                          stream=stream, sync=False))
        add[per]()
        torch.cuda.synchronize()
        res[f"add4_per{per}_bit_exact_vs_torch"] = same_bits(out, x + y)
    res["add4_kernel"] = kernel_report(tgt, V.add4_kernel.compile(per=2), "add4_kernel", out_dir)
    fns = {f"anywave_per{p}": f for p, f in add.items()}
    fns["torch"] = lambda: torch.add(x, y, out=out)
    fns["triton"] = lambda: _tr_add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    grp = {k: with_bw(v, 12 * n) for k, v in timer.group(fns).items()}
    best = max((k for k in grp if k.startswith("anywave")), key=lambda k: grp[k]["tb_per_s"])
    res["add"] = {"times": grp, "best": best, "over_torch": grp[best]["tb_per_s"] / grp["torch"]["tb_per_s"],
                  "over_triton": grp[best]["tb_per_s"] / grp["triton"]["tb_per_s"]}
    # saxpy (mul + add, two roundings) in place, a small a keeps repeated updates bounded
    a = 1e-3
    y0 = y.clone()
    smod = V.saxpy4_kernel.compile(per=2)
    sgrid = V.elementwise_grid(n, 2)
    tgt.launch(smod, "saxpy4_kernel", sgrid, V.WG, [a, x, y, n], stream=stream, sync=True)
    res["saxpy4_bit_exact_vs_torch_y_plus_a_times_x"] = same_bits(y, y0 + torch.tensor(a, dtype=torch.float32) * x)
    y.copy_(y0)
    fns = {"anywave": lambda: tgt.launch(smod, "saxpy4_kernel", sgrid, V.WG, [a, x, y, n], stream=stream,
                                         sync=False),
           "torch_add_alpha": lambda: y.add_(x, alpha=a),
           "triton": lambda: _tr_saxpy[(triton.cdiv(n, 1024),)](a, x, y, n, BLOCK=1024)}
    grp = {k: with_bw(v, 12 * n) for k, v in timer.group(fns).items()}
    res["saxpy"] = {"times": grp, "over_torch": grp["anywave"]["tb_per_s"] / grp["torch_add_alpha"]["tb_per_s"],
                    "over_triton": grp["anywave"]["tb_per_s"] / grp["triton"]["tb_per_s"]}
    # GELU (tanh form, precise tanh) vs torch's tanh GELU
    gmod = V.gelu4_kernel.compile(per=1)
    ggrid = V.elementwise_grid(n, 1)
    tgt.launch(gmod, "gelu4_kernel", ggrid, V.WG, [x, out, n], stream=stream, sync=True)
    xs = x[:1 << 16].cpu().numpy()
    oe = np.zeros_like(xs)
    emulate(gmod, "gelu4_kernel", grid=V.elementwise_grid(xs.size, 1), workgroup=V.WG, args=[xs, oe, xs.size],
            wave_width=32)
    res["gelu4_bit_exact_vs_emulator_first_2^16"] = bool(np.array_equal(out[:1 << 16].cpu().numpy().view(np.uint32),
                                                                        oe.view(np.uint32)))
    res["gelu4_max_abs_diff_vs_torch"] = (out - torch.nn.functional.gelu(x, approximate="tanh")).abs().max().item()
    res["gelu4_kernel"] = kernel_report(tgt, gmod, "gelu4_kernel", out_dir)
    fns = {"anywave": lambda: tgt.launch(gmod, "gelu4_kernel", ggrid, V.WG, [x, out, n], stream=stream, sync=False),
           "torch": lambda: torch.nn.functional.gelu(x, approximate="tanh")}
    grp = {k: with_bw(v, 8 * n) for k, v in timer.group(fns).items()}
    res["gelu"] = {"times": grp, "over_torch": grp["anywave"]["tb_per_s"] / grp["torch"]["tb_per_s"]}
    # sum
    part_n = {}
    smod4 = V.sum4_kernel.compile()
    for wgs in ((264, 528, 1056) if not quick else (528,)):
        part = torch.empty(wgs, device="cuda")
        tot = torch.empty(1, device="cuda")
        def run(wgs: int = wgs, part: torch.Tensor = part, tot: torch.Tensor = tot) -> None:
            tgt.launch(smod4, "sum4_kernel", wgs, V.SUM_WG, [x, part, n], stream=stream, sync=False)
            tgt.launch(smod4, "sum4_kernel", 1, V.SUM_WG, [part, tot, wgs], stream=stream, sync=False)
        part_n[wgs] = (run, tot)
    ref = float(x.double().sum())
    fns = {f"anywave_wg{w}": r for w, (r, _) in part_n.items()}
    fns["torch"] = lambda: torch.sum(x)
    grp = {k: with_bw(v, 4 * n) for k, v in timer.group(fns).items()}
    best = max((k for k in grp if k.startswith("anywave")), key=lambda k: grp[k]["tb_per_s"])
    run, tot = part_n[int(best[len("anywave_wg"):])]
    run()
    torch.cuda.synchronize()
    res["sum"] = {"times": grp, "best": best, "over_torch": grp[best]["tb_per_s"] / grp["torch"]["tb_per_s"],
                  "rel_err_vs_f64": abs(float(tot[0]) - ref) / abs(ref),
                  "torch_rel_err_vs_f64": abs(float(torch.sum(x)) - ref) / abs(ref)}
    res["sum4_kernel"] = kernel_report(tgt, V.sum4_kernel.compile(), "sum4_kernel", out_dir)
    return res


def bench_rows(tgt: cuda.CudaTarget, timer: Timer, out_dir: Path, quick: bool) -> dict[str, Any]:
    stream = torch.cuda.current_stream().cuda_stream
    rows, cols = 32768, 4096
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(rows, cols, device="cuda", generator=g) * 3.0
    out = torch.empty_like(x)
    res: dict[str, Any] = {"shape": [rows, cols]}
    ref64 = torch.softmax(x.double(), dim=1)
    shapes = [(256, 4), (512, 2), (1024, 1)] if not quick else [(512, 2)]
    fns = {}
    for block, vecs in shapes:
        mod = V.softmax4_kernel.compile(block=block, vecs=vecs)
        def f(mod: Any = mod, block: int = block) -> None:
            tgt.launch(mod, "softmax4_kernel", rows, block, [x, out, cols], stream=stream, sync=False)

        f()
        torch.cuda.synchronize()
        xs = x[:2].cpu().numpy().copy()
        oe = np.zeros_like(xs)
        emulate(mod, "softmax4_kernel", grid=2, workgroup=block, args=[xs, oe, cols], wave_width=32)
        res[f"softmax4_block{block}"] = {
            "bit_exact_vs_emulator_rows_0_1": bool(np.array_equal(out[:2].cpu().numpy().view(np.uint32),
                                                                  oe.view(np.uint32))),
            "max_rel_err_vs_f64": ((out.double() - ref64).abs() / ref64.abs().clamp_min(1e-300)).max().item(),
            "kernel": kernel_report(tgt, mod, "softmax4_kernel", out_dir, f"_block{block}")}
        fns[f"anywave_block{block}"] = f
    fns["torch"] = lambda: torch.softmax(x, dim=1)
    grp = {k: with_bw(v, 8 * rows * cols) for k, v in timer.group(fns).items()}
    best = max((k for k in grp if k.startswith("anywave")), key=lambda k: grp[k]["tb_per_s"])
    res["softmax"] = {"times": grp, "best": best, "over_torch": grp[best]["tb_per_s"] / grp["torch"]["tb_per_s"]}
    gm = torch.randn(cols, device="cuda", generator=g)
    bt = torch.randn(cols, device="cuda", generator=g)
    fns = {}
    for block, vecs in shapes:
        mod = V.layer_norm4_kernel.compile(block=block, vecs=vecs)
        def f(mod: Any = mod, block: int = block) -> None:
            tgt.launch(mod, "layer_norm4_kernel", rows, block, [x, gm, bt, out, cols, 1e-5], stream=stream,
                       sync=False)

        f()
        torch.cuda.synchronize()
        xs = x[:2].cpu().numpy().copy()
        oe = np.zeros_like(xs)
        emulate(mod, "layer_norm4_kernel", grid=2, workgroup=block,
                args=[xs, gm.cpu().numpy(), bt.cpu().numpy(), oe, cols, np.float32(1e-5)], wave_width=32)
        res[f"layer_norm4_block{block}_bit_exact_vs_emulator_rows_0_1"] = bool(
            np.array_equal(out[:2].cpu().numpy().view(np.uint32), oe.view(np.uint32)))
        fns[f"anywave_block{block}"] = f
    fns["torch"] = lambda: torch.nn.functional.layer_norm(x, (cols,), gm, bt, 1e-5)
    grp = {k: with_bw(v, 8 * rows * cols) for k, v in timer.group(fns).items()}
    best = max((k for k in grp if k.startswith("anywave")), key=lambda k: grp[k]["tb_per_s"])
    res["layer_norm"] = {"times": grp, "best": best, "over_torch": grp[best]["tb_per_s"] / grp["torch"]["tb_per_s"]}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (default $OUT or bench/results)")
    ap.add_argument("--commit", help="anywave commit to record (default $ANYWAVE_COMMIT)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="gemm,rows,elementwise", help="comma-separated sections")
    ns = ap.parse_args(argv)
    out_dir = Path(ns.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    ok, why = cuda.driver_status()
    if not ok:
        print(f"no CUDA: {why}")
        return 2
    torch.zeros(1, device="cuda")
    tgt = cuda.CudaTarget(0)
    timer = Timer()
    result: dict[str, Any] = {"environment": environment(ns.commit),
                              "method": "CUDA events, 256 MiB L2 scrub before each repetition, medians of 3 "
                                        "interleaved rounds x 10 (GEMM 8192: x 5); peers in the same rounds"}
    sections = {"gemm": bench_gemm, "elementwise": bench_elementwise, "rows": bench_rows}
    for name in ns.only.split(","):
        t0 = time.perf_counter()
        try:
            result[name] = sections[name](tgt, timer, out_dir, ns.quick)
        except Exception as e:  # noqa: BLE001 - record and go on
            import traceback

            result[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            print(result[name]["traceback"], flush=True)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        print(f"[{name}: {time.perf_counter() - t0:.1f} s]", flush=True)
        path = out_dir / f"speed_{result['environment']['date'][:10]}.json"
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(short_table(result))
    print(f"wrote {path}")
    return 0


def short_table(r: dict[str, Any]) -> str:
    """A few lines for the end of the log: each ratio against its peer, and the checks."""
    lines = []
    g = r.get("gemm", {})
    for size in ("4096", "8192"):
        e = g.get(size)
        if isinstance(e, dict) and "times" in e:
            t = e["times"]
            lines.append(f"gemm {size}: " + ", ".join(f"{k} {v['tflop_per_s']:.1f}" for k, v in t.items())
                         + f" TFLOP/s; best/cublas {e['ratio_best_over_cublas']:.3f}")
    for sec in ("elementwise", "rows"):
        d = r.get(sec, {})
        for k, v in d.items():
            if isinstance(v, dict) and "times" in v:
                ratios = {kk: round(vv, 3) for kk, vv in v.items() if kk.startswith("over")}
                tb = {kk: round(vv["tb_per_s"], 2) for kk, vv in v["times"].items()}
                lines.append(f"{k}: {tb} TB/s; {ratios}")
    checks = []

    def walk(prefix: str, d: Any) -> None:
        if isinstance(d, dict):
            for k, v in d.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(d, bool) and ("exact" in prefix or "same_bits" in prefix):
            checks.append(f"{prefix}={d}")

    walk("", {k: v for k, v in r.items() if k != "environment"})
    lines.append("checks: " + " ".join(checks))
    for sec in ("gemm", "elementwise", "rows"):
        if isinstance(r.get(sec), dict) and "error" in r[sec]:
            lines.append(f"{sec} ERROR: {r[sec]['error']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
