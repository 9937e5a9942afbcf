"""``anywave compile file.py -o out.wbin [--kernel K] [-D NAME=VALUE] [--local-bytes [K=]N]``:
compile every ``@aw.kernel`` of a Python file (or the named ones) into one ``.wbin`` module;
``anywave compile kernel.cu [--kernel 'reduce<float, 256>'] [-D NAME[=VALUE]] [-I DIR]
[--shared-bytes [K=]N]``: the same for the ``__global__`` functions of a CUDA C++ file (the
front end of :mod:`anywave.compiler.cuda_frontend`, as ``aw.cuda_kernel``).

Local memory sized at launch (``aw.local_array(T, aw.dynamic)``, CUDA's ``extern __shared__``)
has no launch-time form in a ``.wbin``: a kernel record declares a fixed ``local_memory``
(spec §12, §14.3), and the compiler lays out the kernel's other local memory and its spill area
after the sized-at-launch bytes. So its size is chosen when compiling, as
``kernel.compile(local_bytes=N)`` / ``k.compile(shared_bytes=N)`` do: ``--local-bytes``
(alias ``--shared-bytes``)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from anywave.binary.module import Module, settle_version
from anywave.errors import WaveError


class CompileCommandError(WaveError):
    """A problem with the compile command's input (no kernels, unknown kernel name ...)."""


_EPILOG = """\
CUDA C++ (.cu): the __global__ functions, compiled as aw.cuda_kernel(path, name,
clang_args=[...]) compiles them. A template kernel is compiled by naming its instance:
--kernel 'reduce<float, 256>' (repeat --kernel for several; the WAVE kernel is named
reduce_float_256). -D and -I go to clang.

Local memory sized at launch (aw.local_array(T, aw.dynamic), CUDA's extern __shared__):
a .wbin declares a fixed size of local memory per kernel, so give it here in bytes:
--local-bytes N (every such kernel) or --local-bytes KERNEL=N (one kernel; repeatable).
--shared-bytes is the same option. The .wbin then runs with that size only.

examples:
  anywave compile kernels.py -o kernels.wbin -D radius=3
  anywave compile scan.cu --shared-bytes scan_blocks=2048
  anywave compile reduce.cu --kernel 'reduce<float, 256>' --kernel 'reduce<int, 128>'
  anywave compile stencil.cu -I include -D N=256 -o stencil.wbin
"""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a text with line breaks (the epilog's examples) is
    printed as written; the one-line description is wrapped as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("compile", help="compile the kernels of a Python or CUDA C++ file to .wbin",
                              formatter_class=_HelpFormatter, epilog=_EPILOG,
                              description="Compile every @aw.kernel function of a Python file, or every "
                                          "__global__ function of a CUDA C++ .cu file (or the ones named with "
                                          "--kernel), into one .wbin module. Debug locations are "
                                          "stored relative to --debug-root (default: the current directory), "
                                          "so the same source gives the same bytes on any machine.")
    p.add_argument("file", help="Python source file defining @aw.kernel functions, or a CUDA C++ .cu file "
                                "(its __global__ functions)")
    p.add_argument("-o", "--output", help="output .wbin (default: FILE with suffix .wbin; - for standard output)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="compile only this kernel (repeatable); for a CUDA template kernel, its instance with "
                        "the template arguments, such as 'reduce<float, 256>'")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                   help="Python: the value of a compile-time constant (a Python literal), for every kernel "
                        "that has it; CUDA: a macro passed to clang (-D NAME or -D NAME=VALUE)")
    p.add_argument("-I", "--include-dir", action="append", default=[], metavar="DIR",
                   help="CUDA: a folder searched for #include files (passed to clang; the .cu file's own "
                        "folder is always searched)")
    p.add_argument("--local-bytes", "--shared-bytes", dest="local_bytes", action="append", default=[],
                   metavar="[KERNEL=]N",
                   help="bytes of local memory sized at launch (aw.dynamic local arrays; CUDA: extern "
                        "__shared__), fixed in the .wbin: N for every kernel that has it, KERNEL=N for one "
                        "(repeatable)")
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


def _is_cuda(path: Path) -> bool:
    return path.suffix in (".cu", ".cuh")


#: the largest local memory a kernel record declares (its u32 field, spec §14.3)
_MAX_LOCAL_BYTES = 2**32 - 1

#: local memory sized at launch is rounded up to a multiple of this many bytes by the compilers
#: (compiler/frontend.py and compiler/cuda_frontend.py: ``-(-n // 16) * 16``)
_LOCAL_ROUND = 16


def kernel_key(name: str) -> str:
    """A kernel's name as ``--kernel``/``--shared-bytes`` compare it: runs of white space made
    one space, and none next to punctuation (``reduce< float,4 >`` and ``reduce<float, 4>``
    are the same kernel)."""
    return re.sub(r"\s*([^\w\s])\s*", r"\1", " ".join(name.split()))


def _local_bytes(specs: list[str], option: str) -> tuple[int | None, dict[str, int]]:
    """``--local-bytes`` values: the size for every kernel (None if not given) and the sizes by
    kernel name. CompileCommandError for a malformed one (naming the option as ``option``)."""
    every: int | None = None
    named: dict[str, int] = {}
    for spec in specs:
        name, sep, num = spec.rpartition("=")
        name = name.strip()
        try:
            n = int(num.strip(), 0)
        except ValueError:
            n = -1
        if n <= 0 or (sep and not name):
            raise CompileCommandError(f"{option} {spec!r}: expected N or KERNEL=N, N a positive number of "
                                      "bytes (such as 1024)")
        rounded = -(-n // _LOCAL_ROUND) * _LOCAL_ROUND
        if rounded > _MAX_LOCAL_BYTES:
            top = _MAX_LOCAL_BYTES // _LOCAL_ROUND * _LOCAL_ROUND
            raise CompileCommandError(f"{option} {spec!r}: {n} bytes (rounded up to a multiple of {_LOCAL_ROUND}: "
                                      f"{rounded}) is more than a kernel's local memory can declare (at most "
                                      f"{_MAX_LOCAL_BYTES} bytes, spec §14.3, so at most {top} here; targets "
                                      "provide at least 32768, spec §11.2)")
        if name:
            key = kernel_key(name)
            if key in named:
                raise CompileCommandError(f"{option} {spec!r}: kernel {name!r} is given a size twice "
                                          f"({named[key][0]!r} and {spec!r}): give each kernel's size once")
            named[key] = (spec, n)
        else:
            if every is not None:
                raise CompileCommandError(f"{option} {spec!r}: a size for every kernel is given twice "
                                          f"({every} and {n}): give it once")
            every = n
    return every, {k: n for k, (_spec, n) in named.items()}


def _python_defines(specs: list[str]) -> dict[str, Any]:
    defines: dict[str, Any] = {}
    for d in specs:
        if "=" not in d:
            raise CompileCommandError(f"-D {d!r}: expected NAME=VALUE")
        k, v = d.split("=", 1)
        try:
            defines[k.strip()] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            defines[k.strip()] = v
    return defines


def _python_kernels(path: Path, args: argparse.Namespace) -> list[tuple[str, Any, dict[str, Any]]]:
    """(name, KernelDef, compile-time constants) of each kernel to compile from a Python file."""
    from .types import DYNAMIC_LOCAL

    if args.include_dir:
        raise CompileCommandError(f"-I applies to CUDA C++ sources (.cu), not to {str(path)!r}")
    kernels = load_kernels(path)
    if not kernels:
        raise CompileCommandError(f"{str(path)!r} defines no @aw.kernel functions")
    chosen = args.kernel or list(kernels)
    unknown = [k for k in chosen if k not in kernels]
    if unknown:
        raise CompileCommandError(f"no kernel named {unknown[0]!r} in {str(path)!r}; its kernels: {', '.join(kernels)}")
    defines = _python_defines(args.define)
    every, named = _local_bytes(args.local_bytes, "--local-bytes")
    out = []
    for name in dict.fromkeys(chosen):
        kf = kernels[name]
        consts = {p.name: defines[p.name] for p in kf.params if p.kind == "const" and p.name in defines}
        dynamic = any(p.name == DYNAMIC_LOCAL and p.kind == "const" for p in kf.params)
        given = name in named
        size = named.pop(name, every)
        if dynamic and size is not None:
            consts[DYNAMIC_LOCAL] = size
        elif given and not dynamic:
            raise CompileCommandError(f"--local-bytes {name}=...: kernel {name!r} has no local memory sized at "
                                      "launch (aw.local_array(T, aw.dynamic))")
        if dynamic and not consts.get(DYNAMIC_LOCAL):
            raise CompileCommandError(
                f"kernel {name!r} has local memory sized at launch (aw.local_array(T, aw.dynamic)); a .wbin declares "
                f"a fixed size: give it in bytes with --local-bytes {name}=N (or --local-bytes N for every such "
                f"kernel, or -D {DYNAMIC_LOCAL}=N)")
        out.append((name, kf, consts))
    if named:
        raise CompileCommandError(f"--local-bytes {next(iter(named))}=...: no kernel of that name is compiled; "
                                  f"the kernels: {', '.join(dict.fromkeys(chosen))}")
    return out


def _cuda_kernels(path: Path, args: argparse.Namespace) -> list[tuple[str, Any, dict[str, Any]]]:
    """(name, CudaKernelDef, {'shared_bytes': N} or {}) of each kernel to compile from a .cu file,
    with the clang arguments -D and -I give (as ``aw.cuda_kernel(..., clang_args=...)``)."""
    from .cuda_frontend import CudaKernelDef, global_functions, kernel_symbol

    if not path.is_file():
        raise CompileCommandError(f"{str(path)!r}: no such file" if not path.exists()
                                  else f"{str(path)!r} is not a file")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CompileCommandError(f"{str(path)!r} is not UTF-8 text: {e}") from None
    for d in args.define:
        if not d.split("=", 1)[0].strip():
            raise CompileCommandError(f"-D {d!r}: expected NAME or NAME=VALUE")
    for d in args.include_dir:
        if not Path(d).is_dir():
            raise CompileCommandError(f"-I {d!r}: no such folder")
    clang_args = tuple(f"-D{d}" for d in args.define) + tuple(f"-I{d}" for d in args.include_dir)
    plain, templates = global_functions(source, str(path), clang_args)

    def listing() -> str:
        text = ", ".join(plain) or "none"
        if templates:
            text += "; template kernels: " + ", ".join(f"{t}<{ps}>" for t, ps in templates.items())
        return text

    def example(t: str) -> str:
        return "--kernel " + shlex.quote(f"{t}<{', '.join(_example_arg(p) for p in templates[t].split(', ') if p)}>")

    if not args.kernel:
        if not plain and templates:
            t = next(iter(templates))
            raise CompileCommandError(
                f"{str(path)!r} defines only template __global__ functions ("
                + ", ".join(f"{t}<{ps}>" for t, ps in templates.items()) + "): name each instance to "
                f"compile with --kernel and its template arguments, such as {example(t)} (repeat --kernel for "
                "several instances)")
        if not plain:
            raise CompileCommandError(f"{str(path)!r} defines no __global__ functions")
    chosen = list(dict.fromkeys(args.kernel or plain))
    for name in chosen:
        if "<" in name:
            continue  # a template's instance: compile_cuda instantiates it (and names a problem)
        if name in templates:
            raise CompileCommandError(f"{name!r} in {str(path)!r} is a template kernel ({name}<{templates[name]}>): "
                                      f"name an instance with its template arguments, such as {example(name)}")
        if name not in plain:
            raise CompileCommandError(f"no kernel named {name!r} in {str(path)!r}; its __global__ functions: "
                                      f"{listing()}")
    symbols: dict[str, str] = {}
    for name in chosen:
        sym = kernel_symbol(name)
        if sym in symbols:
            raise CompileCommandError(f"--kernel {symbols[sym]!r} and --kernel {name!r} both give the WAVE kernel "
                                      f"{sym!r}: name each kernel once")
        symbols[sym] = name
    every, named = _local_bytes(args.local_bytes, "--shared-bytes")

    def key_for(name: str) -> str | None:
        """The --shared-bytes KERNEL that names kernel ``name`` (its CUDA name, spacing aside
        (:func:`kernel_key`), or its WAVE name)."""
        keys = [k for k in named if k in (kernel_key(name), kernel_symbol(name))]
        if len(keys) > 1:
            raise CompileCommandError(f"--shared-bytes {keys[0]}=... and --shared-bytes {keys[1]}=... both name "
                                      f"kernel {name!r}: give each kernel's size once")
        return keys[0] if keys else None

    out = []
    used: set[str] = set()
    for name in chosen:
        kd = CudaKernelDef(source, name, str(path), clang_args)
        key = key_for(name)
        size = every if key is None else named[key]
        if key is not None:
            used.add(key)
        if kd.uses_dynamic_shared:
            if size is None:
                raise CompileCommandError(
                    f"kernel {name!r} uses extern __shared__ memory, whose size CUDA gives at launch; a .wbin "
                    f"declares a fixed size of local memory per kernel: give it in bytes with "
                    f"--shared-bytes {shlex.quote(name + '=N')} (or --shared-bytes N for every such kernel)")
            out.append((name, kd, {"shared_bytes": size}))
        else:
            if key is not None:
                raise CompileCommandError(f"--shared-bytes {key}=...: kernel {name!r} has no extern __shared__ "
                                          "memory")
            out.append((name, kd, {}))
    extra = [k for k in named if k not in used]
    if extra:
        raise CompileCommandError(f"--shared-bytes {extra[0]}=...: no kernel of that name is compiled; the kernels: "
                                  f"{', '.join(chosen)}")
    return out


def _example_arg(param: str) -> str:
    """A template argument to show in an example for template parameter ``param``."""
    if param.startswith("typename") or param.startswith("class"):
        return "float"
    if param.startswith("template"):
        return "..."
    kind = param.rsplit(" ", 1)[0] if " " in param else param
    return "true" if kind == "bool" else "256"


def run(args: argparse.Namespace) -> int:
    from anywave.binary.verify import verify
    from anywave.binary.wbin import write_wbin

    path = Path(args.file)
    todo = _cuda_kernels(path, args) if _is_cuda(path) else _python_kernels(path, args)
    module = Module()
    spills: dict[str, str] = {}
    for _name, kf, consts in todo:
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
        f"{k.name} ({len(k.code)} instructions, {k.registers} registers, {k.local_memory} bytes of local memory"
        f"{spills.get(k.name, '')})" if k.local_memory else
        f"{k.name} ({len(k.code)} instructions, {k.registers} registers{spills.get(k.name, '')})"
        for k in module.kernels))
    if args.asm:
        from anywave.asm import disassemble

        print(disassemble(module))
    return 0
