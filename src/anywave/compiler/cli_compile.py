"""``anywave compile file.py -o out.wbin [--kernel K] [-D NAME=VALUE]``: compile every
``@aw.kernel`` of a Python file (or the named ones) into one ``.wbin`` module."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

from anywave.binary.module import Module, settle_version
from anywave.errors import WaveError


class CompileCommandError(WaveError):
    """A problem with the compile command's input (no kernels, unknown kernel name ...)."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("compile", help="compile the @aw.kernel functions of a Python file to .wbin",
                              description="Compile every @aw.kernel function of a Python file (or the ones "
                                          "named with --kernel) into one .wbin module. Debug locations are "
                                          "stored relative to --debug-root (default: the current directory), "
                                          "so the same source gives the same bytes on any machine.")
    p.add_argument("file", help="Python source file defining @aw.kernel functions, or a CUDA C++ .cu file "
                                "(its __global__ functions; -D is passed to clang)")
    p.add_argument("-o", "--output", help="output .wbin (default: FILE with suffix .wbin)")
    p.add_argument("--kernel", action="append", default=[], help="compile only this kernel (repeatable)")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a compile-time constant (Python literal), for every kernel that has it")
    p.add_argument("-S", "--asm", action="store_true", help="also print the disassembly")
    p.add_argument("--debug-root", default=None, metavar="DIR",
                   help="store source paths relative to DIR (default: the current directory)")
    p.add_argument("--debug-paths", choices=("relative", "absolute", "none"), default="relative",
                   help="relative (default): paths relative to --debug-root, the anywave package as "
                        "<anywave>/...; absolute: as Python reports them; none: no debug table")
    return p


def load_kernels(path: Path, defines: tuple[str, ...] = ()) -> dict[str, Any]:
    """Import ``path`` and return its kernels by name (in definition order); a ``.cu`` file:
    its ``__global__`` functions, ``defines`` (``NAME=VALUE``) passed to clang as ``-D``."""
    from anywave.compiler.kernel import KernelDef

    if not path.is_file():
        raise CompileCommandError(f"{str(path)!r}: no such file" if not path.exists()
                                  else f"{str(path)!r} is not a file")
    if path.suffix in (".cu", ".cuh"):  # CUDA C++: its __global__ functions (compiler/cuda_frontend.py)
        from .cuda_frontend import cuda_kernel_defs

        return cuda_kernel_defs(str(path), defines)
    name = f"_anywave_compile_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CompileCommandError(f"cannot import {str(path)!r} as a Python module (expected a .py file)")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except WaveError:
        sys.modules.pop(name, None)
        raise  # already a user error with its own location
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise CompileCommandError(_syntax_message(path, e)) from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure of the user's module
        sys.modules.pop(name, None)
        raise CompileCommandError(_import_message(path, e)) from None
    return {v.name: v for v in vars(mod).values() if isinstance(v, KernelDef)}


def _syntax_message(path: Path, e: SyntaxError) -> str:
    """``file:line:col: SyntaxError: msg`` and the line with a caret."""
    from anywave.errors import caret_excerpt

    where = f"{e.filename or path}:{e.lineno or '?'}" + (f":{e.offset}" if e.offset else "")
    text = f"{where}: {type(e).__name__}: {e.msg}"
    if e.text:
        text += "\n" + caret_excerpt(e.text, e.offset or 1)
    return text + f"\n(while importing {str(path)!r})"


def _import_message(path: Path, e: BaseException) -> str:
    """``file:line: Type: msg`` for the innermost traceback frame in ``path`` (or, for an
    error raised inside a module it imports, the line of ``path`` that led there and the
    innermost frame), with the source line."""
    import linecache
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    target = str(path.resolve())
    mine = [f for f in frames if f.filename and Path(f.filename).resolve().as_posix() == Path(target).as_posix()]
    detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if isinstance(e, SystemExit):
        detail = f"the module called sys.exit({e.code!r}) while being imported"
    if not mine:
        return f"{path}: error while importing it: {detail}"
    f = mine[-1]
    text = f"{path}:{f.lineno}: error while importing it: {detail}"
    line = f.line or linecache.getline(str(path), f.lineno or 0)
    if line:
        text += "\n    " + line.strip()
    inner = frames[-1]
    if inner is not f:
        text += f"\n(raised in {inner.filename}:{inner.lineno})"
    return text


def run(args: argparse.Namespace) -> int:
    from anywave.binary.verify import verify
    from anywave.binary.wbin import write_wbin

    path = Path(args.file)
    kernels = load_kernels(path, tuple(args.define))
    if not kernels:
        what = "__global__ functions" if path.suffix in (".cu", ".cuh") else "@aw.kernel functions"
        raise CompileCommandError(f"{str(path)!r} defines no {what}")
    chosen = args.kernel or list(kernels)
    unknown = [k for k in chosen if k not in kernels]
    if unknown:
        raise CompileCommandError(f"no kernel named {unknown[0]!r} in {str(path)!r}; its kernels: {', '.join(kernels)}")
    defines: dict[str, Any] = {}
    for d in args.define:
        if "=" not in d:
            raise CompileCommandError(f"-D {d!r}: expected NAME=VALUE")
        k, v = d.split("=", 1)
        try:
            defines[k.strip()] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            defines[k.strip()] = v
    module = Module()
    spills: dict[str, str] = {}
    for name in chosen:
        kf = kernels[name]
        consts = {p.name: defines[p.name] for p in kf.params if p.kind == "const" and p.name in defines} \
            if path.suffix not in (".cu", ".cuh") else {}
        module.kernels.extend(kf.compile(**consts).kernels)
        info = kf.resources(**consts)
        if info["spilled"]:
            spills[module.kernels[-1].name] = (f", {info['spilled']} values spilled to {info['bytes_per_thread']} "
                                               f"bytes of local memory per thread")
    settle_version(module)
    verify(module)
    from anywave.binary.debugpaths import relocate

    module = relocate(module, args.debug_paths, args.debug_root)
    data = write_wbin(module)
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    out = Path(args.output) if args.output else path.with_suffix(".wbin")
    out.write_bytes(data)
    print(f"{out}: {len(module.kernels)} kernel(s): " + ", ".join(
        f"{k.name} ({len(k.code)} instructions, {k.registers} registers{spills.get(k.name, '')})"
        for k in module.kernels))
    if args.asm:
        from anywave.asm import disassemble

        print(disassemble(module))
    return 0
