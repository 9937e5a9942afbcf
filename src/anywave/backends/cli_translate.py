"""``anywave translate FILE --target ptx [--arch sm_90] [-o out.ptx]``: print or write the PTX of
a ``.wbin``/``.wave`` module (provider for :mod:`anywave.cli`: ``add_parser``/``run``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TARGETS = ("ptx",)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``translate`` subcommand."""
    p = subparsers.add_parser("translate", help="translate a WAVE module to a vendor language (PTX)",
                              description=__doc__)
    p.add_argument("file", help=".wbin or .wave file")
    p.add_argument("--target", choices=TARGETS, default="ptx", help="output language (default ptx)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture, e.g. sm_75, sm_80, sm_90 (default sm_90)")
    p.add_argument("--kernel", action="append", help="translate only this kernel (repeatable)")
    p.add_argument("--no-comments", action="store_true", help="omit the WAVE text comments")
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    return p


def run(args: argparse.Namespace) -> int:
    """Translate; WaveErrors propagate to the CLI, which prints them (exit status 1)."""
    from anywave.backends.ptx import translate
    from anywave.cli import load_module

    module = load_module(args.file)
    program = translate(module, args.arch, kernels=args.kernel, comments=not args.no_comments)
    if args.output:
        Path(args.output).write_text(program.text)
        print(f"wrote {args.output}: {len(program.kernels)} kernel(s) for {program.arch}", file=sys.stderr)
    else:
        sys.stdout.write(program.text)
    return 0
