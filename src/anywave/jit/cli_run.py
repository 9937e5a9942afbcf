"""``anywave run``: execute a kernel on the reference emulator (or any runtime target) from the
command line.

    anywave run FILE(.wbin|.wave) --kernel K --grid X,Y,Z --workgroup X,Y,Z
        --arg name=in.npy --arg name=3.5 --out name=out.npy --wave-width 32
        [--trace LANE] [--stats] [--check]
    anywave run FILE --kernel K --memory mem.bin|mem.npy --reg r0=5 [--out-memory out.bin]

Buffer arguments come from ``.npy`` files (or ``zeros:N:TYPE`` for a fresh buffer);
scalars are numbers. ``--out name=path.npy`` saves a buffer after the run. The flat form
(reference-dialect kernels) takes the one flat memory from a raw ``.bin`` or a ``.npy``
file and initial registers with ``--reg``; ``--out-memory`` saves the memory after the run.
``--target`` picks a registered runtime target (:mod:`anywave.runtime.targets`; default the
emulator); tracing, statistics, the checker and the flat form are emulator features.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from anywave.abi import dims3
from anywave.binary.module import Kernel
from anywave.cli import UsageError
from anywave.errors import WaveError


class CliError(WaveError):
    """A bad ``anywave run`` option value."""


_DESCRIPTION = """\
Run a kernel on the reference emulator or on a runtime target (--target).

Normal form:
  anywave run FILE --kernel K --grid X,Y,Z [--workgroup X,Y,Z]
      --arg NAME=in.npy --arg NAME=zeros:N:TYPE --arg NAME=NUMBER
      --out NAME=out.npy [--wave-width 32] [--trace LANE] [--stats] [--check]
Flat-memory form (reference-dialect kernels):
  anywave run FILE --kernel K --grid X --workgroup X --memory mem.bin|mem.npy
      --reg r0=5 [--out-memory out.bin]

FILE is a .wbin or .wave file. Buffer arguments come from .npy files whose dtype must be
the argument's ABI element type (--allow-dtype-mismatch passes the bytes of any dtype), or
zeros:N:TYPE for a fresh buffer of N elements (TYPE: an ABI type such as f32, u32, bf16, or
a NumPy dtype name). Scalar arguments are numbers. --out NAME=PATH.npy saves a buffer after
the run. --workgroup defaults to the kernel's required workgroup size (.workgroup_size)
and is required otherwise. --target runs on another registered target (see
'anywave devices'); --trace, --stats, --check and the flat form need the emulator.
"""

#: NumPy dtype of each ABI element type (spec §12)
ABI_DTYPES: dict[str, str] = {"u8": "uint8", "i8": "int8", "u16": "uint16", "i16": "int16", "u32": "uint32",
                              "i32": "int32", "u64": "uint64", "i64": "int64", "f16": "float16",
                              "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


def abi_dtype(name: str) -> np.dtype:
    """The NumPy dtype of an ABI type spelling (``f32``, ``bf16`` ...) or of a NumPy dtype name.

    Raises CliError for an unknown name."""
    if name in ABI_DTYPES:
        if name == "bf16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(ABI_DTYPES[name]).newbyteorder("<")
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    except (AttributeError, TypeError):
        raise CliError(f"unknown element type {name!r}; expected an ABI type "
                       f"({', '.join(ABI_DTYPES)}) or a NumPy dtype name") from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from anywave.runtime.targets import target_names

    p = subparsers.add_parser("run", help="run a kernel on the emulator or a runtime target",
                              description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help=".wbin or .wave file")
    p.add_argument("--target", "-t", choices=target_names(), default="emulator",
                   help="where to run (default: emulator); 'anywave devices' lists what is available here")
    p.add_argument("--kernel", "-k", help="kernel name (default: the only kernel)")
    p.add_argument("--grid", required=True, help="workgroups per dimension: X[,Y[,Z]]")
    p.add_argument("--workgroup", default=None, help="threads per workgroup: X[,Y[,Z]] "
                   "(default: the kernel's required size; required if it declares none)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="argument: NAME=file.npy, NAME=zeros:N:TYPE, or NAME=number (once per name)")
    p.add_argument("--out", action="append", default=[], metavar="NAME=PATH.npy",
                   help="save buffer argument NAME after the run")
    p.add_argument("--allow-dtype-mismatch", action="store_true",
                   help="accept a buffer .npy whose dtype differs from the argument's element type "
                        "(the kernel sees its bytes)")
    p.add_argument("--wave-width", type=int, default=None, choices=(8, 16, 32, 64),
                   help="wave width W (default: 32 on the emulator, the device's own on a target)")
    p.add_argument("--trace", type=int, default=None, metavar="LANE",
                   help="print register changes of this global thread number")
    p.add_argument("--stats", action="store_true", help="print execution statistics")
    p.add_argument("--check", action="store_true", help="detect data races and uninitialised reads")
    p.add_argument("--memory", help="flat form: memory image (.bin raw bytes or .npy)")
    p.add_argument("--reg", action="append", default=[], metavar="rN=VALUE",
                   help="flat form: initial register value")
    p.add_argument("--out-memory", help="flat form: save the memory after the run (.bin or .npy)")
    return p


def _dims(text: str, what: str) -> tuple[int, int, int]:
    """``--grid``/``--workgroup`` text ``X[,Y[,Z]]`` as 3 ints, checked by the one geometry
    parser (:func:`anywave.abi.dims3`). Raises CliError naming the option and the value."""
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise CliError(f"--{what} {text!r}: expected X[,Y[,Z]] positive integers") from None
    try:
        return dims3(vals, what)
    except (TypeError, ValueError) as e:
        raise CliError(f"--{what} {text!r}: {e}") from None


def _split(item: str, opt: str) -> tuple[str, str]:
    if "=" not in item:
        raise CliError(f"{opt} {item!r}: expected NAME=VALUE")
    name, value = item.split("=", 1)
    return name.strip(), value.strip()


def max_buffer_bytes() -> int:
    """The largest ``zeros:N:TYPE`` buffer the CLI allocates: the machine's physical memory
    (``sysconf``), at most 2^40 bytes."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        phys = 1 << 40
    return int(min(phys, 1 << 40))


def _value(text: str, name: str) -> Any:
    if text.endswith(".npy"):
        return np.ascontiguousarray(np.load(text))
    if text.startswith("zeros:"):
        parts = text.split(":")
        if len(parts) != 3:
            raise CliError(f"--arg {name}={text}: expected zeros:N:TYPE")
        try:
            count = int(parts[1])
        except ValueError:
            raise CliError(f"--arg {name}={text}: N = {parts[1]!r} is not an integer") from None
        if count < 0:
            raise CliError(f"--arg {name}={text}: N = {count} must not be negative")
        dt = abi_dtype(parts[2])
        nbytes = count * np.dtype(dt).itemsize
        limit = max_buffer_bytes()
        if nbytes > limit:
            raise CliError(f"--arg {name}={text}: {count} elements of {parts[2]} are {nbytes} bytes; a buffer may "
                           f"have at most {limit} bytes here (this machine's physical memory, at most 2^40)")
        try:
            return np.zeros(count, dt)
        except MemoryError:
            raise CliError(f"--arg {name}={text}: cannot allocate {nbytes} bytes for the buffer") from None
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise CliError(f"--arg {name}={text}: expected a .npy file, zeros:N:TYPE or a number") from None


def _check_value(kernel: Kernel, name: str, text: str, value: Any, allow_mismatch: bool) -> None:
    """Compare an --arg value with the kernel's ABI (CliError on a mismatch)."""
    arg = next((a for a in kernel.args if a.name == name), None)
    if arg is None:
        return  # emulate() reports unknown names together with the ABI
    if not arg.is_buffer:
        if isinstance(value, np.ndarray):
            raise CliError(f"--arg {name}={text}: {name!r} is a scalar argument ({arg.type.spelling}) and "
                           f"takes a number, got an array of shape {value.shape} and dtype {value.dtype}")
        return
    if not isinstance(value, np.ndarray):
        raise CliError(f"--arg {name}={text}: {name!r} is a buffer argument ({arg.type.spelling}); pass "
                       f"a .npy file or zeros:N:{arg.type.spelling}")
    want = abi_dtype(arg.type.spelling)
    if value.dtype != want and not allow_mismatch:
        raise CliError(f"--arg {name}={text}: array dtype {value.dtype.str} ({value.dtype}) differs from "
                       f"the argument's element type {arg.type.spelling} ({want.str}); convert the array "
                       f"or pass --allow-dtype-mismatch to use its bytes as they are")


def run(args: argparse.Namespace) -> int:
    from anywave.emu.machine import emulate_flat, load_program

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
    elif k.workgroup_size:
        wg = tuple(k.workgroup_size)
    else:
        raise UsageError(f"--workgroup is required: kernel {k.name!r} declares no required workgroup "
                         f"size (.workgroup_size)")
    target = getattr(args, "target", "emulator") or "emulator"
    if target != "emulator":
        emu_only = [opt for opt, on in (("--trace", args.trace is not None), ("--stats", args.stats),
                                        ("--check", args.check), ("--memory", args.memory is not None)) if on]
        if emu_only:
            raise UsageError(f"{', '.join(emu_only)} need the emulator; drop them or use --target emulator "
                             f"(got --target {target})")
    wave_width = 32 if args.wave_width is None and target == "emulator" else args.wave_width
    common = dict(grid=grid, workgroup=wg, wave_width=wave_width, check=args.check,
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
        if args.out_memory:
            _check_out_path("--out-memory", args.out_memory)
        stats = emulate_flat(module, args.kernel, memory, regs, **common)
        if args.out_memory:
            if args.out_memory.endswith(".npy"):
                _save_npy(args.out_memory, memory)
            else:
                Path(args.out_memory).write_bytes(memory.tobytes())
        buffers: dict[str, Any] = {"memory": memory}
    else:
        buffers = {}
        for item in args.arg:
            name, text = _split(item, "--arg")
            if name in buffers:
                raise CliError(f"--arg {name} is given more than once")
            buffers[name] = _value(text, name)
            _check_value(k, name, text, buffers[name], args.allow_dtype_mismatch)
        for item in args.out:
            name, _ = _split(item, "--out")
            arg = next((a for a in k.args if a.name == name), None)
            if arg is None or not arg.is_buffer:
                what = "a scalar argument" if arg is not None else "not an argument"
                raise CliError(f"--out {name}: {name!r} is {what} of kernel {k.name!r}; --out saves a "
                               f"buffer argument (buffers: "
                               f"{', '.join(a.name for a in k.args if a.is_buffer) or 'none'})")
            _check_out_path(f"--out {name}", _split(item, "--out")[1])
        from anywave.compiler import debugprint
        from anywave.jit.targets import get_target as compiler_target

        # the launch's front door (the emulator's too): it gives a kernel that prints its print
        # buffer and prints its lines after the launch
        abi = k.args[:-1] if debugprint.has_prints(k) and k.args[-1].name not in buffers else k.args
        door = compiler_target(target)
        if target == "emulator":
            stats = door.launch(module, args.kernel, grid=grid, workgroup=tuple(wg), args=buffers,
                                wave_width=wave_width, check=args.check, trace_lane=args.trace)
        else:
            missing = [a.name for a in abi if a.name not in buffers]
            if missing:
                raise CliError(f"kernel {k.name!r}: missing --arg for {missing}")
            door.launch(module, args.kernel, grid=grid, workgroup=tuple(wg), args=[buffers[a.name] for a in abi],
                        wave_width=wave_width)
            stats = None
    for item in args.out:
        name, path = _split(item, "--out")
        if name not in buffers:
            raise CliError(f"--out {name}: no such buffer was passed")
        _save_npy(path, buffers[name])
    if args.trace is not None:
        for line in stats.trace:
            print(line)
    if args.stats:
        print(stats.summary(), file=sys.stderr if args.trace is not None else sys.stdout)
    return 0


def _check_out_path(opt: str, path: str) -> None:
    """Refuse, before the run, an output path that cannot be written as given: an existing
    directory, or a file in a directory that does not exist."""
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{opt}={path}: is a directory; give the output file's path (e.g. {p / 'out.npy'})")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CliError(f"{opt}={path}: directory {str(parent)!r} does not exist")


def _save_npy(path: str, array: Any) -> None:
    """``np.save`` to exactly ``path`` (``np.save`` itself appends ``.npy`` to other names)."""
    with open(path, "wb") as f:
        np.save(f, array)
