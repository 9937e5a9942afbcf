"""``anywave train``: the CLI provider for :mod:`anywave.torch.train` (add_parser/run, see
:mod:`anywave.cli`). Importing this module does not import PyTorch, so the CLI starts fast
and works without it; ``run`` says how to install PyTorch when it is missing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from anywave.errors import WaveError


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the training options to ``p`` (shared with ``python -m anywave.torch.train``)."""
    p.add_argument("--steps", type=int, default=200, help="SGD steps (default 200)")
    p.add_argument("--batch", type=int, default=64, help="mini-batch size (default 64)")
    p.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, split and batch order (default 0)")
    p.add_argument("--widths", default="8,16,32,64", help="emulator wave widths, comma-separated (default all)")
    p.add_argument("--targets", default="all",
                   help="other targets: 'all' (every available one), 'none', or a comma list (opencl,sycl,cuda)")
    p.add_argument("--plot", type=Path, default=Path("torch_train.png"), help="loss-curve PNG path")
    p.add_argument("--json", type=Path, default=None, help="also write a JSON summary here")
    p.add_argument("--nproc", type=int, default=1,
                   help="data-parallel ranks (DistributedDataParallel, one process each; default 1: no DDP)")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo",
                   help="with --nproc: gloo (CPU tensors on --ddp-target) or nccl (one GPU per rank)")
    p.add_argument("--ddp-target", default="emulator",
                   help="with --nproc and gloo: the CPU target of every rank (emulator, opencl, sycl)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``train`` subcommand."""
    p = subparsers.add_parser("train", help="train an MLP on digits with WAVE kernels on every target, check "
                                            "bit-identity, compare with PyTorch, plot the loss curves",
                              description="Train a 64-32-10 MLP on scikit-learn's digits with WAVE kernels only "
                                          "(forward, backward, SGD) on the emulator at several wave widths and every "
                                          "other available target; check losses and weights bit for bit.")
    arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the training demo (:func:`anywave.torch.train.run`)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise WaveError("anywave train needs PyTorch: pip install torch (CPU wheel is enough)") from None
    from anywave.torch import train

    return train.run(args)
