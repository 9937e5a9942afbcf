"""``anywave train``: the CLI provider for :mod:`anywave.torch.train` (add_parser/run, see
:mod:`anywave.cli`). Importing this module does not import PyTorch, so the CLI starts fast
and works without it; ``run`` says how to install PyTorch when it is missing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from anywave.errors import WaveError
from anywave.torch.train_options import arguments

__all__ = ["add_parser", "arguments", "main", "run"]


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
    if getattr(args, "nproc", 1) != 1:  # data-parallel: anywave.torch.distributed runs the ranks
        if args.nproc < 1:
            print(f"error: --nproc must be >= 1, got {args.nproc}", file=sys.stderr)
            return 1
        from anywave.torch import distributed

        return distributed.run_cli(args)
    from anywave.torch import train

    return train.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m anywave.torch.cli_train`` (what ``anywave train`` runs), ``--nproc`` included."""
    p = argparse.ArgumentParser(prog="python -m anywave.torch.cli_train", description="Train a 64-32-10 MLP on "
                                "digits with WAVE kernels on every target and check bit-identity.")
    arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except WaveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
