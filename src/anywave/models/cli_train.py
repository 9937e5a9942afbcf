"""``anywave train``: the MLP demo (:mod:`anywave.torch.train`, the default ``--model mlp``) and the
GPT (``--model gpt``, :mod:`anywave.models.gpt`). Importing this module imports neither PyTorch
nor the models, so the CLI starts fast.

``anywave train --model gpt --config tiny|small|gpt2 --steps N --mode exact|fast --target T
--wave-width W --out DIR`` trains byte-level on the standard library's source and writes
``DIR/losses.json`` (each step's loss exactly, as ``float.hex``, with the run's settings),
``DIR/loss.png`` (the curve) and ``DIR/checkpoint.npz`` (``--resume FILE`` continues from one)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from anywave.errors import WaveError
from anywave.torch import cli_train as mlp


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``train`` subcommand (MLP options, then the GPT's)."""
    p = subparsers.add_parser("train", help="train a model with WAVE kernels only: the digits MLP on every target "
                                            "(default) or a GPT on the standard library's source (--model gpt)",
                              description="Train with WAVE kernels only. --model mlp (default): a 64-32-10 MLP on "
                                          "scikit-learn's digits on every target, checked bit for bit. --model gpt: "
                                          "a GPT-2-style decoder byte-level on Python's standard library source on "
                                          "one target, writing DIR/losses.json (float.hex per step), DIR/loss.png "
                                          "and DIR/checkpoint.npz.")
    p.add_argument("--model", choices=("mlp", "gpt"), default="mlp", help="what to train (default mlp)")
    mlp.arguments(p)
    g = p.add_argument_group("--model gpt")
    g.add_argument("--config", choices=("tiny", "small", "gpt2"), default="tiny", help="model size (default tiny)")
    g.add_argument("--mode", choices=("exact", "fast"), default="exact", help="op mode (default exact)")
    g.add_argument("--target", default="emulator",
                   help="where the kernels run: a CPU target (emulator, opencl, sycl, vulkan) or cuda")
    g.add_argument("--wave-width", type=int, default=None, help="wave width of a CPU target (default its own)")
    g.add_argument("--out", type=Path, default=Path("gpt_run"), help="output directory (default ./gpt_run)")
    g.add_argument("--gpt-batch", type=int, default=4, help="sequences per step (default 4)")
    g.add_argument("--gpt-lr", type=float, default=3e-3, help="AdamW learning rate (default 3e-3)")
    g.add_argument("--resume", type=Path, default=None, help="continue from a checkpoint.npz")
    g.add_argument("--cuda-graph", action="store_true",
                   help="on cuda: replay the step as one captured CUDA graph after two eager steps (the same "
                        "losses, no per-launch host cost)")
    return p


def run(args: argparse.Namespace) -> int:
    """Dispatch on ``--model``."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise WaveError("anywave train needs PyTorch: pip install torch (CPU wheel is enough)") from None
    if args.model == "mlp":
        return mlp.run(args)
    return run_gpt(args)


def run_gpt(args: argparse.Namespace) -> int:
    """Train the GPT as the options say; print one line per step; write the outputs."""
    import contextlib

    from anywave.models import gpt as M
    from anywave.torch import ops

    if args.steps < 1:
        raise WaveError(f"anywave train: --steps must be >= 1, got {args.steps}")
    cuda = args.target.startswith("cuda")
    if args.cuda_graph and not cuda:
        raise WaveError(f"anywave train: --cuda-graph needs --target cuda, not {args.target!r}")
    if cuda:
        device, where = args.target, contextlib.nullcontext()
    else:
        opts = {} if args.wave_width is None else {"wave_width": args.wave_width}
        device, where = "cpu", ops.cpu_target(args.target, **opts)
    st = M.TrainSettings(steps=args.steps, batch=args.gpt_batch, lr=args.gpt_lr, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with where as tgt:
        model = opt = None
        if args.resume is not None:
            model, opt = M.load_checkpoint(args.resume, device)
        w = None if tgt is None else int(tgt.info.wave_width)
        res = M.train(model.cfg if model else args.config, st, mode=args.mode, device=device, model=model, opt=opt,
                      progress=lambda i, v: print(f"step {i}: loss {v:.4f}", flush=True), cuda_graph=args.cuda_graph)
    info = {"model": "gpt", "config": args.config if model is None else "checkpoint", "mode": args.mode,
            "target": args.target, "wave_width": w, "steps": args.steps, "batch": st.batch, "lr": st.lr,
            "seed": st.seed, "seconds": res.seconds, "losses": [float(v).hex() for v in res.losses],
            "grad_norms": [float(v).hex() for v in res.grad_norms]}
    (out / "losses.json").write_text(json.dumps(info, indent=1) + "\n")
    M.save_checkpoint(out / "checkpoint.npz", res.model, res.optimizer)
    try:
        plot_losses(res.losses, out / "loss.png", f"GPT {info['config']} ({args.mode}, {args.target})")
    except ImportError:
        print("matplotlib is not installed: no loss.png (pip install matplotlib)")
    print(f"wrote {out / 'losses.json'}, {out / 'checkpoint.npz'}; first loss {res.losses[0]:.4f}, last "
          f"{res.losses[-1]:.4f}, {res.seconds:.1f} s")
    return 0


def plot_losses(losses: list[float], path: Path, title: str) -> Path:
    """A PNG of the per-step loss (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(len(losses)), losses)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per byte)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
