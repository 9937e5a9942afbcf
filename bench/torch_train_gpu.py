"""Bit-identical training on an NVIDIA GPU and the emulator, recorded (issue 8, [TORCH]).

Trains the 64-32-10 MLP on scikit-learn's digits with WAVE kernels (torch.ops.anywave) on
CUDA — eager and torch.compile'd — and on the emulator (at the widths given), in one run;
asserts the per-step losses and final weights are bit-identical; runs torch.library.opcheck
for every op on CUDA tensors; counts graph breaks; compares with plain PyTorch (CUDA and CPU)
and writes ``$OUT/torch_train_gpu.json`` and ``$OUT/torch_train_gpu.png``.

    PYTHONPATH=src python bench/torch_train_gpu.py            # OUT defaults to bench/results
    python bench/torch_train_gpu.py --steps 200 --widths 8,32 --out /tmp/x

Exit status 0 when everything holds, 1 otherwise (the JSON is written either way).
Needs torch with CUDA, cuda-python, numpy, ml_dtypes, scikit-learn, matplotlib (the plot
is skipped with a note when matplotlib is missing); platformdirs is optional.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
# without platformdirs the caches would be off or in ~/.cache: keep them in a scratch dir
os.environ.setdefault("ANYWAVE_CACHE_DIR", tempfile.mkdtemp(prefix="anywave-cache-"))

import torch  # noqa: E402

from anywave.torch import checks, ops  # noqa: E402
from anywave.torch import train as T  # noqa: E402


def _device_facts() -> dict[str, object]:
    p = torch.cuda.get_device_properties(0)
    facts: dict[str, object] = {"name": p.name, "compute_capability": f"{p.major}.{p.minor}",
                                "memory_gib": round(p.total_memory / 2**30, 1), "sm_count": p.multi_processor_count,
                                "torch_cuda": torch.version.cuda}
    try:
        from anywave.runtime.targets import get_target

        info = get_target("cuda").info
        facts["wave_target"] = {"device": info.device, "wave_width": info.wave_width,
                                "details": {k: str(v) for k, v in dict(info.details).items()}}
    except Exception as e:  # noqa: BLE001
        facts["wave_target"] = f"unavailable: {e}"
    return facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--widths", default="8,32", help="emulator wave widths to train at as well")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend for the compiled run")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA device", file=sys.stderr)
        return 1

    cfg = T.TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed)
    data = T.load_data(cfg.seed)
    rec: dict[str, object] = {**T.provenance(), "device": _device_facts(),
                              "config": {"steps": cfg.steps, "batch": cfg.batch, "lr": cfg.lr, "seed": cfg.seed,
                                         "sizes": [T.SIZES[0], cfg.hidden, T.SIZES[2]]}}
    ok = True
    problems: list[str] = []

    def log(msg: str) -> None:
        print(msg, flush=True)

    # 1. opcheck on CUDA tensors, graph breaks on CUDA
    rec["opcheck_cuda"] = oc = checks.opcheck_all("cuda")
    bad = {k: v for k, v in oc.items() if v != "ok"}
    log(f"opcheck on CUDA: {len(oc) - len(bad)}/{len(oc)} ok" + (f"; failing: {bad}" if bad else ""))
    if bad:
        ok = False
        problems.append(f"opcheck failed: {sorted(bad)}")
    model = T.WaveMLP(T.init_params(cfg.seed)).cuda()
    xb = torch.from_numpy(data.train_x[:cfg.batch]).cuda()
    yb = torch.from_numpy(data.train_y[:cfg.batch]).cuda()
    rec["graph_breaks_cuda"] = gb = checks.graph_breaks(model.loss, xb, yb)
    log(f"torch._dynamo.explain on CUDA: {gb['graph_count']} graph(s), {gb['graph_break_count']} break(s)")
    if gb["graph_break_count"] != 0:
        ok = False
        problems.append(f"graph breaks: {gb['break_reasons']}")

    # 2. training: CUDA eager (twice: the first run includes PTX translation and loading),
    #    CUDA compiled, emulator at each W
    runs: list[T.RunResult] = []
    T.train(data, T.TrainConfig(steps=2, batch=cfg.batch, lr=cfg.lr, seed=cfg.seed), label="warm-up", device="cuda")
    r = T.train(data, cfg, label="cuda", device="cuda")
    r.info = {"target": "cuda", "device": torch.cuda.get_device_name(), "wave_width": 32}
    runs.append(r)
    log(f"cuda eager: final loss {r.losses[-1]:.6f}, test accuracy {r.test_accuracy:.1%}, "
        f"{1e3 * r.seconds / cfg.steps:.2f} ms/step")
    backend = args.compile_backend
    try:
        rc = T.train(data, cfg, label=f"cuda compiled ({backend})", device="cuda", compile_backend=backend)
    except Exception as e:  # noqa: BLE001 - fall back, and say so
        rec["compile_fallback"] = f"{backend} failed: {type(e).__name__}: {e}"[:2000]
        log(f"torch.compile backend {backend} failed ({type(e).__name__}); retrying with aot_eager")
        traceback.print_exc()
        backend = "aot_eager"
        rc = T.train(data, cfg, label=f"cuda compiled ({backend})", device="cuda", compile_backend=backend)
    rc.info = {"target": "cuda", "compile_backend": backend}
    runs.append(rc)
    log(f"cuda compiled ({backend}): {1e3 * rc.seconds / cfg.steps:.2f} ms/step (incl. compilation)")
    for w in [int(v) for v in args.widths.split(",") if v.strip()]:
        re_ = T.train_on_cpu_target(data, cfg, "emulator", wave_width=w)
        runs.append(re_)
        log(f"{re_.label}: final loss {re_.losses[-1]:.6f}, {re_.seconds:.1f} s")
    for name in ops.cpu_target_names():
        if name != "emulator":
            ro = T.train_on_cpu_target(data, cfg, name)
            runs.append(ro)
            log(f"{ro.label}: final loss {ro.losses[-1]:.6f}, {ro.seconds:.1f} s")

    try:
        T.assert_identical(runs)
        identical = True
        log(f"BIT-IDENTICAL: per-step losses and final weights of {', '.join(r.label for r in runs)}")
    except T.TrainingMismatch as e:
        identical, ok = False, False
        problems.append(str(e))
        log(f"NOT bit-identical: {e}")

    # 3. plain PyTorch, same model, init and batches (CUDA and CPU), timed in the same run
    ref_cuda = T.train(data, cfg, label="pytorch cuda", device="cuda", reference=True)
    ref_cpu = T.train(data, cfg, label="pytorch cpu", reference=True)
    d_cuda, d_cpu = T.max_abs_diff(runs[0], ref_cuda), T.max_abs_diff(runs[0], ref_cpu)
    log(f"vs plain PyTorch on CUDA: max |loss diff| {d_cuda['losses']:.3g}, max |weight diff| "
        f"{max(d_cuda[n] for n in T.PARAM_NAMES):.3g}; accuracy {ref_cuda.test_accuracy:.1%}")

    rec.update({
        "bit_identical": identical,
        "targets": {r.label: {"losses": [float(v) for v in r.losses], "test_accuracy": r.test_accuracy,
                              "seconds": round(r.seconds, 4), **r.info} for r in runs},
        "final_weight_sha": {n: __import__("hashlib").sha256(runs[0].params[n].tobytes()).hexdigest()[:16]
                             for n in T.PARAM_NAMES},
        "pytorch": {
            "cuda": {"losses": [float(v) for v in ref_cuda.losses], "test_accuracy": ref_cuda.test_accuracy,
                     "seconds": round(ref_cuda.seconds, 4), "max_abs_diff_vs_wave": d_cuda},
            "cpu": {"losses": [float(v) for v in ref_cpu.losses], "test_accuracy": ref_cpu.test_accuracy,
                    "seconds": round(ref_cpu.seconds, 4), "max_abs_diff_vs_wave": d_cpu},
        },
        "ms_per_step": {"wave cuda eager": 1e3 * runs[0].seconds / cfg.steps,
                        "pytorch cuda eager": 1e3 * ref_cuda.seconds / cfg.steps},
        "tolerance_note": "PyTorch differs by summation order (cuBLAS/oneDNN blocked fma) and exp/log "
                          "approximations; the WAVE runs agree with each other bit for bit.",
        "problems": problems,
        "ok": ok,
    })
    png = args.out / "torch_train_gpu.png"
    try:
        T.plot(runs + [ref_cuda], png, title=f"MLP on digits: WAVE on {torch.cuda.get_device_name()} and the emulator")
        rec["plot"] = png.name
    except ImportError as e:
        rec["plot"] = f"skipped: {e}"
    (args.out / "torch_train_gpu.json").write_text(json.dumps(rec, indent=1))
    log(f"wrote {args.out / 'torch_train_gpu.json'}" + (f" and {png}" if rec["plot"] == png.name else ""))
    if not ok:
        log("FAILED: " + "; ".join(problems))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
