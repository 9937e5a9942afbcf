"""``anywave translate FILE --target ptx [--arch sm_90] [-o out.ptx]``: print or write the PTX of
a ``.wbin``/``.wave`` module; ``--target spirv [--wave-width W]`` prints the SPIR-V disassembly
(``spirv-dis``) or writes one kernel's binary module with ``-o`` (provider for :mod:`anywave.cli`:
``add_parser``/``run``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TARGETS = ("ptx", "spirv")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``translate`` subcommand."""
    p = subparsers.add_parser("translate", help="translate a WAVE module to a vendor language (PTX, SPIR-V)",
                              description=__doc__)
    p.add_argument("file", help=".wbin or .wave file")
    p.add_argument("--target", choices=TARGETS, default="ptx",
                   help="output language: ptx, or spirv (Vulkan compute; default ptx)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture, e.g. sm_75, sm_80, sm_90 (default sm_90)")
    p.add_argument("--wave-width", type=int, default=32,
                   help="spirv: the subgroup size W wave operations are lowered for (default 32)")
    p.add_argument("--kernel", action="append", help="translate only this kernel (repeatable)")
    p.add_argument("--no-comments", action="store_true", help="omit the WAVE text comments")
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    return p


def run(args: argparse.Namespace) -> int:
    """Translate; WaveErrors propagate to the CLI, which prints them (exit status 1)."""
    from anywave.cli import load_module

    module = load_module(args.file)
    if args.target == "spirv":
        return _run_spirv(args, module)
    from anywave.backends.ptx import translate

    program = translate(module, args.arch, kernels=args.kernel, comments=not args.no_comments)
    if args.output:
        Path(args.output).write_text(program.text)
        print(f"wrote {args.output}: {len(program.kernels)} kernel(s) for {program.arch}", file=sys.stderr)
    else:
        sys.stdout.write(program.text)
    return 0


def _run_spirv(args: argparse.Namespace, module: object) -> int:
    from anywave.backends.spirv import SpirvError, translate

    program = translate(module, args.wave_width, kernels=args.kernel)
    if args.output:
        if len(program.kernels) != 1:
            raise SpirvError([f"-o writes one SPIR-V module, but {len(program.kernels)} kernels were translated "
                              f"({sorted(program.kernels)}); choose one with --kernel"
                              + (f"; refused: {program.refused}" if program.refused else "")])
        (k,) = program.kernels.values()
        Path(args.output).write_bytes(k.binary)
        print(f"wrote {args.output}: SPIR-V 1.5 compute module of kernel {k.name!r} (W = {args.wave_width}, "
              f"{len(k.words)} words)", file=sys.stderr)
    else:
        sys.stdout.write(program.text)
    return 0
