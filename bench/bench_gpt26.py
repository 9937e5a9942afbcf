"""Issue 26 on one GPU: the GPT trains on CUDA (loss falls), its exact-mode bits against the CPU
emulator on the same machine, the batch-invariance demonstration on CUDA, the bf16 GEMM op at the
model's shapes and 4096³ against cuBLAS, a 124M GPT-2 training step in fast mode against plain
PyTorch eager (and torch.compile), the step's time per kernel, and decode tokens/s.

    python bench/bench_gpt26.py OUT.json [--budget SECONDS]

Each part is written to OUT.json as soon as it is done (a run cut short keeps what it measured);
parts that would not fit the budget are skipped and say so. Timing: CUDA events on the current
stream, medians, ours and the peer interleaved in rounds in one process (performance notes).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from anywave.models import gpt as M  # noqa: E402
from anywave.torch import ops  # noqa: E402

T0 = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - T0


def commit() -> str:
    import os

    if os.environ.get("ANYWAVE_COMMIT"):  # a tree sent without its .git (the device machine)
        return os.environ["ANYWAVE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cuda_time(fn, reps: int = 10) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` CUDA-event-timed calls (after one warm-up)."""
    fn()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def interleaved(fns: dict, rounds: int = 5, reps: int = 5) -> dict:
    res = {k: [] for k in fns}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for k, f in fns.items():
            res[k].append(cuda_time(f, reps))
    return {k: statistics.median(v) for k, v in res.items()}


def weights_hash(model) -> str:
    h = hashlib.sha256()
    for n, a in model.numpy_params().items():
        h.update(n.encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def part_train_cuda(out: dict) -> None:
    st = M.TrainSettings(steps=30, batch=8, lr=3e-3)
    r = M.train("tiny", st, mode="exact", device="cuda")
    out["train_tiny_exact_cuda"] = {"settings": "tiny, 30 steps, batch 8, lr 3e-3", "losses": r.losses,
                                    "losses_hex": [v.hex() for v in r.losses], "seconds": r.seconds,
                                    "loss_falls": r.losses[-1] < r.losses[0] - 1.0}
    rf = M.train("tiny", st, mode="fast", device="cuda")
    rf2 = M.train("tiny", st, mode="fast", device="cuda")
    out["train_tiny_fast_cuda"] = {"losses": rf.losses, "identical_run_to_run": rf.losses == rf2.losses and
                                   weights_hash(rf.model) == weights_hash(rf2.model),
                                   "max_abs_loss_diff_vs_exact": max(abs(a - b) for a, b in
                                                                     zip(rf.losses, r.losses, strict=True))}


def part_identity(out: dict) -> None:
    st = M.TrainSettings(steps=3, batch=2)
    rc = M.train("tiny", st, mode="exact", device="cuda")
    with ops.cpu_target("emulator", wave_width=32):
        re = M.train("tiny", st, mode="exact", device="cpu")
    out["identity_tiny_exact"] = {
        "settings": "tiny, 3 steps, batch 2", "cuda_losses_hex": [v.hex() for v in rc.losses],
        "emulator_w32_losses_hex": [v.hex() for v in re.losses], "cuda_weights": weights_hash(rc.model),
        "emulator_weights": weights_hash(re.model),
        "identical": rc.losses == re.losses and weights_hash(rc.model) == weights_hash(re.model)}
    # the configuration options (rotary positions, SwiGLU MLP, RMSNorm) at a small size, 2 steps:
    # CUDA against the emulator at W = 32 and 8
    cfg = M.GPTConfig(2, 64, 2, 64, pos="rotary", mlp="swiglu", norm="rms")
    st = M.TrainSettings(steps=2, batch=2)
    rc = M.train(cfg, st, mode="exact", device="cuda")
    rec = {"settings": "2 layers, width 64, 2 heads, context 64, rotary+swiglu+rms, 2 steps, batch 2",
           "cuda_losses_hex": [v.hex() for v in rc.losses], "cuda_weights": weights_hash(rc.model)}
    same = True
    for w in (32, 8):
        with ops.cpu_target("emulator", wave_width=w):
            re = M.train(cfg, st, mode="exact", device="cpu")
        rec[f"emulator_w{w}_losses_hex"] = [v.hex() for v in re.losses]
        rec[f"emulator_w{w}_weights"] = weights_hash(re.model)
        same = same and rc.losses == re.losses and weights_hash(rc.model) == weights_hash(re.model)
    rec["identical"] = same
    out["identity_options_exact"] = rec


def part_ops(out: dict) -> None:
    """Rotary (with an offset) and SwiGLU, forward and backward through autograd, at shapes that
    leave partial workgroups: CUDA against the emulator at W = 32 and 8, with special values (inf,
    nan, -0, subnormals) among the inputs: bit for bit, and as class exact-nan (NaN payloads
    are implementation-defined, docs/spec.md §8.2; CUDA's default NaN is 0x7fffffff, the
    emulator's 0x7fc00000)."""
    from anywave.torch import gpt as G

    g = torch.Generator().manual_seed(3)
    res = {}

    def special(t):
        f = t.reshape(-1)
        f[:6] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, -3e38])
        return t

    cases = {
        "rotary_offset7": ((3, 5, 37, 32), lambda x: G.rotary(x, 7)),
        "rotary_d2": ((1, 1, 129, 2), lambda x: G.rotary(x, 0)),
        "swiglu": ((100003,), None),
    }
    for name, (shape, fn) in cases.items():
        xs = [special(torch.randn(shape, generator=g) * 4) for _ in range(1 if fn else 2)]
        gy = torch.randn(shape, generator=g)

        def run(dev, xs=xs, gy=gy, fn=fn):
            ins = [x.detach().clone().to(dev).requires_grad_() for x in xs]  # fresh leaves: grads never accumulate
            y = fn(ins[0]) if fn else G.swiglu(ins[0], ins[1])
            y.backward(gy.to(dev))
            return [t.detach().cpu().numpy().view(np.uint32) for t in [y] + [i.grad for i in ins]]

        c = run("cuda")
        same, nan = {}, {}
        for w in (32, 8):
            with ops.cpu_target("emulator", wave_width=w):
                e = run("cpu")
            same[f"w{w}"] = all(np.array_equal(a, b) for a, b in zip(c, e, strict=True))
            # class exact-nan (docs/spec.md §10): NaN where the emulator has NaN (payloads are
            # implementation-defined), every other result bit for bit
            nan[f"w{w}"] = all(np.array_equal(np.isnan(a.view(np.float32)), np.isnan(b.view(np.float32)))
                               and np.array_equal(a[~np.isnan(a.view(np.float32))], b[~np.isnan(b.view(np.float32))])
                               for a, b in zip(c, e, strict=True))
        res[name] = {"shape": list(shape), "bits_identical_to_emulator": same,
                     "identical_exact_nan_to_emulator": nan}
    out["ops_cuda_vs_emulator"] = res


def batch_invariance(model, runs: int, seconds: float, new_tokens: int = 24, prompt: int = 40,
                     longest_other: int = 99, progress=None) -> dict:
    """Item 3's demonstration: one prompt's greedy completion decoded alone, then ``runs`` times
    inside 64 other prompts of 1..``longest_other`` tokens at a random place (a new draw of the
    other prompts' texts, lengths and the place each run), and seeded sampling alone against
    inside 10 others. Counts the distinct completions (1 = batch-invariant). Stops early after
    ``seconds``; ``progress(n, distinct)`` is called after every run. The prompt is ``prompt``
    bytes of the standard library's text; the longest sequence (``longest_other + new_tokens``)
    must fit the model's context."""
    if max(prompt, longest_other) + new_tokens > model.cfg.context:
        raise ValueError(f"batch_invariance: {max(prompt, longest_other)} + {new_tokens} tokens exceed the "
                         f"context of {model.cfg.context}")
    rng = np.random.default_rng(0)
    text = np.frombuffer(M.stdlib_text(1 << 16), np.uint8)
    target = [int(c) for c in text[100:100 + prompt]]
    alone = M.generate(model, [target], new_tokens)[0]
    distinct = {tuple(alone)}
    n = 0
    t = time.perf_counter()
    while n < runs and time.perf_counter() - t < seconds:
        others = [[int(c) for c in text[o:o + m]]
                  for o, m in zip(rng.integers(0, 60000, 64), rng.integers(1, longest_other + 1, 64), strict=True)]
        k = int(rng.integers(0, 65))
        distinct.add(tuple(M.generate(model, others[:k] + [target] + others[k:], new_tokens)[k]))
        n += 1
        if progress is not None:
            progress(n, len(distinct))
    dt = time.perf_counter() - t
    sa = M.generate(model, [target], new_tokens, temperature=1.0, seed=[7])[0]
    sb = M.generate(model, [[1, 2, 3]] * 10 + [target], new_tokens, temperature=1.0,
                    seed=list(range(10)) + [7])[10]
    return {"new_tokens": new_tokens, "prompt": bytes(target).decode("latin-1"),
            "batch": f"the prompt inside 64 others of 1..{longest_other} tokens (new texts, lengths and "
            "place every run)", "runs": n, "seconds": dt, "distinct_completions": len(distinct),
            "completion_alone": bytes(alone).hex(), "sampled_same_alone_and_in_batch": sa == sb}


def part_batch_invariance(out: dict, seconds: float = 20.0) -> None:
    cfg = M.CONFIGS["small"]
    model = M.GPT(cfg, M.init_params(cfg, 1), "exact").cuda()
    out["batch_invariance_cuda"] = {"config": "small (random init, seed 1), exact",
                                    **batch_invariance(model, 1000, seconds)}


def part_identity_vulkan(out: dict) -> None:
    """Item 4 on Vulkan-on-NVIDIA: the tiny model's exact steps with its ops on the vulkan target
    (this machine's Vulkan driver; CPU tensors copied to the device per launch) against the
    emulator at W = 32: losses and weights, bit for bit."""
    st = M.TrainSettings(steps=3, batch=2)
    with ops.cpu_target("vulkan") as t:
        dev, w = t.info.device, t.info.wave_width
        rv = M.train("tiny", st, mode="exact", device="cpu")
    with ops.cpu_target("emulator", wave_width=32):
        re = M.train("tiny", st, mode="exact", device="cpu")
    out["identity_tiny_exact_vulkan"] = {
        "settings": "tiny, 3 steps, batch 2", "vulkan_device": dev, "vulkan_wave_width": w,
        "vulkan_losses_hex": [v.hex() for v in rv.losses], "emulator_w32_losses_hex": [v.hex() for v in re.losses],
        "vulkan_weights": weights_hash(rv.model), "emulator_weights": weights_hash(re.model),
        "identical": rv.losses == re.losses and weights_hash(rv.model) == weights_hash(re.model),
        "vulkan_seconds": rv.seconds}


def part_gemm(out: dict) -> None:
    shapes = [(8192, 2304, 768), (8192, 768, 768), (8192, 3072, 768), (8192, 768, 3072), (8192, 50304, 768),
              (4096, 4096, 4096), (8192, 8192, 8192)]
    res = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        t = interleaved({"anywave": lambda a=a, b=b: torch.ops.anywave.gemm_mma(a, b),
                         "cublas": lambda a=a, b=b: torch.matmul(a, b)}, rounds=3, reps=5)
        fl = 2 * m * n * k
        res.append({"m": m, "n": n, "k": k, "anywave_tflops": fl / t["anywave"] / 1e9,
                    "cublas_tflops": fl / t["cublas"] / 1e9, "ratio": t["cublas"] / t["anywave"]})
        out["gemm_bf16"] = res


def gpt2_124m() -> tuple:
    """The 124M GPT-2 configuration of the step parts: (cfg, params, x, y), a batch of 8 x 1024
    random tokens on CUDA."""
    cfg = M.GPTConfig(12, 768, 12, 1024, 50304)
    params = M.init_params(cfg, 0)
    x = torch.randint(0, cfg.vocab, (8, 1024), device="cuda")
    y = torch.randint(0, cfg.vocab, (8, 1024), device="cuda")
    return cfg, params, x, y


def torch_step(cfg, params, x, y):
    """The peer: the same model in plain PyTorch eager (bf16 autocast, fused AdamW, clipping).
    Returns (model, step); ``step(loss_fn)`` takes another loss (``torch.compile`` of it)."""
    ref = M.TorchGPT(cfg, params).cuda()
    topt = torch.optim.AdamW(ref.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)

    def step(loss_fn=ref.loss):
        topt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        topt.step()

    return ref, step


def part_step(out: dict, budget: float) -> None:
    cfg, params, x, y = gpt2_124m()
    batch, ctx = x.shape
    st = M.TrainSettings(steps=1, batch=batch, lr=1e-4)
    ours = M.GPT(cfg, params, "fast").cuda()
    n_params = sum(p.numel() for p in ours.ordered())
    opt = M._opt_state(ours)

    def step_ours():
        M.train_step(ours, x, y, st, opt)

    ref, step_torch = torch_step(cfg, params, x, y)

    t_first = time.perf_counter()
    step_ours()
    torch.cuda.synchronize()
    first = time.perf_counter() - t_first
    t = interleaved({"anywave_fast": step_ours, "torch_eager": step_torch}, rounds=2, reps=2)
    tokens = batch * ctx
    rec = {"config": "12 layers, width 768, 12 heads, context 1024, vocab 50304", "params": n_params,
           "tokens_per_step": tokens, "anywave_first_step_s": first,
           "anywave_fast_ms": t["anywave_fast"], "torch_eager_bf16_autocast_ms": t["torch_eager"],
           "anywave_tokens_per_s": tokens / t["anywave_fast"] * 1e3,
           "torch_eager_tokens_per_s": tokens / t["torch_eager"] * 1e3,
           "ratio_vs_eager": t["torch_eager"] / t["anywave_fast"]}
    out["step_124m"] = rec
    # the step's GPU time per kernel (CUPTI through torch.profiler)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step_ours()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        dt = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if dt:
            rows.append({"name": ev.key[:80], "calls": ev.count, "ms": dt / 1e3})
    rows.sort(key=lambda r: -r["ms"])
    rec["kernels_by_gpu_time"] = rows[:25]
    out["step_124m"] = rec
    if elapsed() < budget - 90:
        comp = torch.compile(ref.loss)
        t_c = time.perf_counter()
        step_torch(comp)
        torch.cuda.synchronize()
        rec["torch_compile_first_step_s"] = time.perf_counter() - t_c
        tc = interleaved({"torch_compile": lambda: step_torch(comp)}, rounds=2, reps=3)
        rec["torch_compile_ms"] = tc["torch_compile"]
        rec["ratio_vs_compile"] = tc["torch_compile"] / t["anywave_fast"]
    else:
        rec["torch_compile"] = "skipped: budget"
    out["step_124m"] = rec


def part_captured(out: dict) -> None:
    """M.CapturedStep (the step captured once in a CUDA graph, AdamW's scalars written to the
    device each step): the same losses and weights as train_step on the tiny model in exact mode
    over 8 steps with warm-up and weight decay; then the 124M fast step's time, against the eager
    loop and torch eager in the same run."""
    cfg = M.CONFIGS["tiny"]
    st = M.TrainSettings(steps=8, batch=4, lr=3e-3, warmup=4, weight_decay=0.1)
    data = np.frombuffer(M.stdlib_text(1 << 16), np.uint8)
    xs, ys = M.batches(data, 8, 4, cfg.context, 0)
    runs = []
    for captured in (False, True):
        model = M.GPT(cfg, M.init_params(cfg, 0), "exact").cuda()
        opt = M._opt_state(model)
        cs = M.CapturedStep(model, st, opt) if captured else None
        losses = []
        for i in range(8):
            x, y = torch.from_numpy(xs[i]).cuda(), torch.from_numpy(ys[i]).cuda()
            loss, _ = cs(x, y) if cs else M.train_step(model, x, y, st, opt)
            losses.append(float(loss))
        runs.append((losses, weights_hash(model)))
    rec = {"tiny_exact_8_steps": {"eager_losses_hex": [v.hex() for v in runs[0][0]],
                                  "captured_losses_hex": [v.hex() for v in runs[1][0]],
                                  "identical": runs[0] == runs[1]}}
    out["captured_step"] = rec
    # train() itself, 30 steps, exact and fast, eager against cuda_graph=True
    for mode in ("exact", "fast"):
        st30 = M.TrainSettings(steps=30, batch=8, lr=3e-3)
        a = M.train("tiny", st30, mode=mode, device="cuda")
        b = M.train("tiny", st30, mode=mode, device="cuda", cuda_graph=True)
        rec[f"train_tiny_{mode}_30_steps"] = {"identical": a.losses == b.losses and weights_hash(a.model)
                                              == weights_hash(b.model), "eager_s": a.seconds, "graph_s": b.seconds,
                                              "last_loss_hex": [a.losses[-1].hex(), b.losses[-1].hex()]}
    out["captured_step"] = rec
    cfg, params, x, y = gpt2_124m()
    st = M.TrainSettings(steps=1, batch=x.shape[0], lr=1e-4)
    ours = M.GPT(cfg, params, "fast").cuda()
    cs = M.CapturedStep(ours, st, M._opt_state(ours))
    for _ in range(4):
        cs(x, y)
    torch.cuda.synchronize()
    _ref, step_torch = torch_step(cfg, params, x, y)
    t = interleaved({"captured": lambda: cs(x, y), "torch_eager": step_torch}, rounds=3, reps=3)
    rec["step_124m_fast"] = {"captured_ms": t["captured"], "torch_eager_bf16_autocast_ms": t["torch_eager"],
                             "ratio_vs_eager": t["torch_eager"] / t["captured"], "tokens_per_step": 8192}
    out["captured_step"] = rec


def part_decode(out: dict) -> None:
    cfg = M.GPTConfig(12, 768, 12, 1024, 50304)
    params = M.init_params(cfg, 0)
    prompt = [list(range(1, 65))]
    res = {}
    for name, model in (("anywave_exact", M.GPT(cfg, params, "exact").cuda()),
                        ("anywave_fast", M.GPT(cfg, params, "fast").cuda()),
                        ("torch_eager_f32", M.TorchGPT(cfg, params).cuda())):
        M.generate(model, prompt, 4)
        torch.cuda.synchronize()
        t = time.perf_counter()
        M.generate(model, prompt, 33)
        torch.cuda.synchronize()
        res[name] = {"tokens_per_s": 32 / (time.perf_counter() - t - 0.0)}
        # 32 prompts of 16..79 tokens together (one ragged decode launch per layer)
        batch = [list(range(1, 17 + 2 * i)) for i in range(32)]
        t = time.perf_counter()
        M.generate(model, batch, 17)
        torch.cuda.synchronize()
        res[name]["batch32_tokens_per_s"] = 32 * 17 / (time.perf_counter() - t)
        del model
    out["decode_124m_batch1"] = {"prompt": 64, "new_tokens": 33, "note": "the same KV-cache generate() for all "
                                 "three; includes the 64-token prefill (batch32: 32 prompts of 16..78 tokens, 17 "
                                 "new tokens each, prefills included)", **res}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget", type=float, default=220.0)
    ap.add_argument("--parts", default="all", help="comma list of parts to run (default all)")
    ap.add_argument("--invariance-seconds", type=float, default=20.0,
                    help="how long the batch-invariance part decodes batches (at most 1,000 runs)")
    args = ap.parse_args()
    out = {"issue": 26, "commit": commit(), "date": datetime.datetime.now(datetime.UTC).isoformat(),
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "driver": torch.cuda.get_device_properties(0).name, "cuda_runtime": torch.version.cuda, "errors": {}}
    try:
        out["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    parts = [("train_cuda", part_train_cuda, 40), ("identity", part_identity, 90), ("ops", part_ops, 30),
             ("gemm", part_gemm, 30), ("step", lambda o: part_step(o, args.budget), 60),
             ("batch_invariance", lambda o: part_batch_invariance(o, args.invariance_seconds), 30),
             ("decode", part_decode, 20), ("captured", part_captured, 60),
             ("identity_vulkan", part_identity_vulkan, 60)]
    if args.parts != "all":
        parts = [p for p in parts if p[0] in args.parts.split(",")]
    for name, fn, need in parts:
        if elapsed() > args.budget - need:
            out["errors"][name] = f"skipped at {elapsed():.0f} s: budget"
            continue
        t = time.perf_counter()
        try:
            fn(out)
        except Exception as e:  # noqa: BLE001 - a failed part is recorded, the others still run
            out["errors"][name] = f"{type(e).__name__}: {str(e)[:400]}"
        out.setdefault("part_seconds", {})[name] = time.perf_counter() - t
        args.out.write_text(json.dumps(out, indent=1))
        print(name, f"{time.perf_counter() - t:.1f} s", flush=True)
    args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
