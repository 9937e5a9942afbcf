"""``anywave run``: execute a kernel on the reference emulator from the command line.

    anywave run FILE(.wbin|.wave) --kernel K --grid X,Y,Z --workgroup X,Y,Z
        --arg name=in.npy --arg name=3.5 --out name=out.npy --wave-width 32
        [--trace LANE] [--stats] [--check]
    anywave run FILE --kernel K --memory mem.bin|mem.npy --reg r0=5 [--out-memory out.bin]

Buffer arguments come from ``.npy`` files (or ``zeros:N:dtype`` for a fresh buffer);
scalars are numbers. ``--out name=path.npy`` saves a buffer after the run. The flat form
(reference-dialect kernels) takes the one flat memory from a raw ``.bin`` or a ``.npy``
file and initial registers with ``--reg``; ``--out-memory`` saves the memory after the run.
Provider protocol of :mod:`anywave.cli`: ``add_parser(subparsers)`` and ``run(args)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError


class CliError(WaveError):
    """A bad ``anywave run`` option value."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run", help="run a kernel on the reference emulator",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("file", help=".wbin or .wave file")
    p.add_argument("--kernel", "-k", help="kernel name (default: the only kernel)")
    p.add_argument("--grid", default="1", help="workgroups per dimension: X[,Y[,Z]]")
    p.add_argument("--workgroup", default=None, help="threads per workgroup: X[,Y[,Z]] "
                   "(default: the kernel's required size, else 1)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="argument: NAME=file.npy, NAME=zeros:N:dtype, or NAME=number")
    p.add_argument("--out", action="append", default=[], metavar="NAME=PATH.npy",
                   help="save buffer NAME after the run")
    p.add_argument("--wave-width", type=int, default=32, choices=(8, 16, 32, 64))
    p.add_argument("--trace", type=int, default=None, metavar="LANE",
                   help="print register changes of this global thread number")
    p.add_argument("--stats", action="store_true", help="print execution statistics")
    p.add_argument("--check", action="store_true", help="detect data races and uninitialised reads")
    p.add_argument("--memory", help="flat form: memory image (.bin raw bytes or .npy)")
    p.add_argument("--reg", action="append", default=[], metavar="rN=VALUE",
                   help="flat form: initial register value")
    p.add_argument("--out-memory", help="flat form: save the memory after the run (.bin or .npy)")
    return p


def _dims(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise CliError(f"--{what} {text!r}: expected X[,Y[,Z]] positive integers") from None
    if not 1 <= len(vals) <= 3 or min(vals) < 1:
        raise CliError(f"--{what} {text!r}: expected 1-3 positive integers")
    return vals


def _split(item: str, opt: str) -> tuple[str, str]:
    if "=" not in item:
        raise CliError(f"{opt} {item!r}: expected NAME=VALUE")
    name, value = item.split("=", 1)
    return name.strip(), value.strip()


def _value(text: str, name: str) -> Any:
    if text.endswith(".npy"):
        return np.ascontiguousarray(np.load(text))
    if text.startswith("zeros:"):
        parts = text.split(":")
        if len(parts) != 3:
            raise CliError(f"--arg {name}={text}: expected zeros:N:dtype")
        try:
            return np.zeros(int(parts[1]), np.dtype(parts[2]))
        except (TypeError, ValueError) as e:
            raise CliError(f"--arg {name}={text}: {e}") from None
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise CliError(f"--arg {name}={text}: expected a .npy file, zeros:N:dtype or a number") from None


def run(args: argparse.Namespace) -> int:
    from anywave.emu.machine import emulate, emulate_flat, load_program

    module = load_program(args.file)
    if args.kernel is None:
        if len(module.kernels) != 1:
            raise CliError(f"--kernel is required: {args.file} has kernels "
                           f"{[k.name for k in module.kernels]}")
        args.kernel = module.kernels[0].name
    try:
        k = module.kernel(args.kernel)
    except KeyError as e:
        raise CliError(str(e.args[0])) from None
    grid = _dims(args.grid, "grid")
    if args.workgroup is not None:
        wg = _dims(args.workgroup, "workgroup")
    else:
        wg = tuple(k.workgroup_size) if k.workgroup_size else (1,)
    common = dict(grid=grid, workgroup=wg, wave_width=args.wave_width, check=args.check,
                  trace_lane=args.trace)
    if args.memory is not None:
        mpath = Path(args.memory)
        memory = (np.ascontiguousarray(np.load(mpath)) if mpath.suffix == ".npy"
                  else np.frombuffer(bytearray(mpath.read_bytes()), np.uint8))
        regs = {}
        for item in args.reg:
            name, value = _split(item, "--reg")
            if not (name.startswith("r") and name[1:].isdigit()):
                raise CliError(f"--reg {item!r}: expected rN=VALUE")
            regs[int(name[1:])] = int(value, 0)
        stats = emulate_flat(module, args.kernel, memory, regs, **common)
        if args.out_memory:
            if args.out_memory.endswith(".npy"):
                np.save(args.out_memory, memory)
            else:
                Path(args.out_memory).write_bytes(memory.tobytes())
        buffers: dict[str, Any] = {"memory": memory}
    else:
        buffers = {}
        for item in args.arg:
            name, value = _split(item, "--arg")
            buffers[name] = _value(value, name)
        for item in args.out:
            name, _ = _split(item, "--out")
            if name not in buffers:
                arg = next((a for a in k.args if a.name == name), None)
                if arg is None or not arg.is_buffer:
                    raise CliError(f"--out {name}: not a buffer argument of kernel {k.name!r}")
        stats = emulate(module, args.kernel, args=buffers, **common)
    for item in args.out:
        name, path = _split(item, "--out")
        if name not in buffers:
            raise CliError(f"--out {name}: no such buffer was passed")
        np.save(path, buffers[name])
    if args.trace is not None:
        for line in stats.trace:
            print(line)
    if args.stats:
        print(stats.summary(), file=sys.stderr if args.trace is not None else sys.stdout)
    return 0
