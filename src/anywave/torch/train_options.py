"""The training demo's command-line options, shared by ``anywave train``
(:mod:`anywave.torch.cli_train`) and ``python -m anywave.torch.train``; importing this module
does not import PyTorch."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["arguments"]


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
