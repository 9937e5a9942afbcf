"""Issue 26, item 3 on a CPU target: the batch-invariance demonstration of bench_gpt26.py with the
model's ops on a CPU runtime target (OpenCL on the CPU by default; any name of
``anywave.torch.ops.cpu_target``; ``--target cuda`` runs the same on the GPU).

    python bench/bench_invariance_cpu.py OUT.json [--target opencl] [--runs 1000]

The model is the tiny configuration (2 layers, width 64, context 64) trained first in plain
PyTorch on the CPU (float32, AdamW; ``--train-steps``) on the standard library's text, so that its
greedy completion is text-like rather than one repeated byte, then decoded in ``exact`` mode
through the target: one prompt of 24 bytes, ``--new-tokens`` (12) new tokens, alone and then inside
64 other prompts of 1..``--longest-other`` (24) tokens (a new draw each run).
OUT.json is rewritten every 25 runs (a run cut short keeps what it saw) and says the target, its
device and wave width, the commit and the date.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpt26 import M, batch_invariance, commit, ops, weights_hash  # noqa: E402


def train_reference(steps: int, seed: int = 1) -> tuple[M.GPT, list[float]]:
    """The tiny model trained in plain PyTorch (TorchGPT, float32, CPU): (model, losses)."""
    cfg = M.CONFIGS["tiny"]
    torch.manual_seed(seed)
    ref = M.TorchGPT(cfg, M.init_params(cfg, seed))
    opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    data = np.frombuffer(M.stdlib_text(), np.uint8)
    x, y = M.batches(data, steps, 16, cfg.context, seed)
    losses = []
    for t in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = ref.loss(torch.from_numpy(x[t]), torch.from_numpy(y[t]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return ref, losses


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--wave-width", type=int, default=None)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=6 * 3600.0)
    ap.add_argument("--train-steps", type=int, default=400)
    ap.add_argument("--new-tokens", type=int, default=12)
    ap.add_argument("--longest-other", type=int, default=24, help="the other prompts have 1..N tokens")
    args = ap.parse_args()
    if args.target == "cuda" and args.wave_width is not None:
        ap.error("--wave-width applies to the CPU targets; CUDA runs at the device's own wave width")
    t0 = time.perf_counter()
    ref, losses = train_reference(args.train_steps)
    out = {"issue": 26, "part": f"batch invariance on {args.target}", "commit": commit(),
           "date": datetime.datetime.now(datetime.UTC).isoformat(), "host": platform.processor() or platform.machine(),
           "torch": torch.__version__, "model": "tiny (2 layers, width 64, context 64), exact mode",
           "training": {"steps": args.train_steps, "batch": 16, "optimizer": "torch AdamW lr 3e-3, float32 CPU",
                        "first_loss": losses[0], "last_loss": losses[-1], "seconds": time.perf_counter() - t0}}
    kw = {} if args.wave_width is None else {"wave_width": args.wave_width}
    if args.target == "cuda":  # the same model and batches on the GPU (CUDA tensors: the cuda target)
        ctx = contextlib.nullcontext()
        out.update(target="cuda", device=torch.cuda.get_device_name(0))
    else:
        ctx = ops.cpu_target(args.target, **kw)
    with ctx as t:
        if t is not None:
            out.update(target=t.info.name, device=t.info.device, wave_width=t.info.wave_width)
        model = M.GPT(ref.cfg, ref.numpy_params(), "exact")
        if args.target == "cuda":
            model = model.cuda()
        out["weights"] = weights_hash(model)

        def progress(n: int, distinct: int) -> None:
            if n % 25 == 0:
                out["progress"] = {"runs": n, "distinct_completions": distinct,
                                   "seconds": time.perf_counter() - t0}
                args.out.write_text(json.dumps(out, indent=1))
                print(f"{n} runs, {distinct} distinct, {time.perf_counter() - t0:.0f} s", flush=True)

        res = batch_invariance(model, args.runs, args.seconds, new_tokens=args.new_tokens, prompt=24,
                               longest_other=args.longest_other,
                               progress=progress)
    out.pop("progress", None)
    out["batch_invariance"] = res
    out["completion_alone_text"] = bytes.fromhex(res["completion_alone"]).decode("latin-1")
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(res, indent=1))
    return 0 if res["distinct_completions"] == 1 and res["sampled_same_alone_and_in_batch"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
