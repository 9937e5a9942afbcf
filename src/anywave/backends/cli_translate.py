"""``anywave translate FILE --target T``: print or write the vendor code of a WAVE module.

The targets are the registered backends (:mod:`anywave.backends.registry`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from anywave.backends.registry import backends


def _description() -> str:
    rows = []
    for b in backends():
        opt = f"--arch (default {b.arch_default})" if b.arch_default else \
            f"--wave-width {'/'.join(map(str, b.wave_widths))} (default {b.default_wave_width})"
        rows.append(f"  {b.name:<8} {b.language}; {opt}")
    return ("Translate a .wbin or .wave module to a vendor language and print it (or write it with -o).\n\n"
            "Targets:\n" + "\n".join(rows))


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``translate`` subcommand."""
    names = [b.name for b in backends()]
    p = subparsers.add_parser("translate", help=f"translate a WAVE module to vendor code ({', '.join(names)})",
                              description=_description(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help=".wbin or .wave file")
    p.add_argument("--target", "-t", choices=names, default="ptx", help="output language (default ptx)")
    p.add_argument("--arch", default=None, help="GPU architecture for ptx, e.g. sm_75, sm_80, sm_90 (default sm_90)")
    p.add_argument("--wave-width", "-W", type=int, default=None, metavar="W",
                   help="wave (sub-group) width for the C-family targets (default: the target's)")
    p.add_argument("--kernel", action="append", help="translate only this kernel (repeatable)")
    p.add_argument("--no-comments", action="store_true", help="omit the WAVE text comments (ptx)")
    p.add_argument("-o", "--output", help="output file; '-' or none: standard output")
    return p


def run(args: argparse.Namespace) -> int:
    """Translate; WaveErrors propagate to the CLI, which prints them (exit status 1)."""
    from anywave.backends.registry import get_backend, translate
    from anywave.cli import load_module

    module = load_module(args.file)
    backend = get_backend(args.target)
    if backend.binary is not None and args.output and args.output != "-":
        translate(args.target, module, wave_width=args.wave_width, kernels=args.kernel)  # option checks
        w = backend.default_wave_width if args.wave_width is None else args.wave_width
        data = backend.binary(module, wave_width=w, kernels=args.kernel)
        Path(args.output).write_bytes(data)
        print(f"wrote {args.output}: {args.target}, {len(data)} bytes", file=sys.stderr)
        return 0
    text = translate(args.target, module, arch=args.arch, wave_width=args.wave_width, kernels=args.kernel,
                     comments=not args.no_comments)
    if args.output and args.output != "-":
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {args.target}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
