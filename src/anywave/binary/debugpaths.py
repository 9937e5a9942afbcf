"""Source paths in the debug table, made independent of the machine that compiled.

The compiler records each instruction's source location with the path Python reports for
the kernel's file (absolute, e.g. ``/home/alice/proj/kern.py``, or the installed
``.../site-packages/anywave/compiler/stdlib.py``). Written as they are, the same kernel gives
different ``.wbin`` bytes on two machines and leaks their directory layout. :func:`relocate`
rewrites the paths before a module is written, like a C compiler's ``-fdebug-prefix-map``:

* ``relative`` (the default of ``anywave compile``): paths inside the installed anywave package
  become ``<anywave>/compiler/stdlib.py``; every other file path becomes relative to
  ``root`` (POSIX separators, ``..`` where the file lies outside it);
* ``absolute``: paths are stored as given (the pre-0.2 behaviour);
* ``none``: the debug table is dropped.

The places of ``aw.print`` call sites (PRINT section) follow the same rule.
Pseudo-file names such as ``<stdin>`` or ``<string>`` are kept as they are.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from anywave.binary.module import Function, Kernel, Module
from anywave.errors import SourceLoc, WaveError

MODES = ("relative", "absolute", "none")

#: the prefix that stands for the installed anywave package directory
PACKAGE_PREFIX = "<anywave>"


def _package_dir() -> str:
    import anywave

    return os.path.dirname(os.path.abspath(anywave.__file__))


def relative_path(file: str, root: str | os.PathLike[str]) -> str:
    """``file`` as stored in ``relative`` mode (see the module docstring)."""
    if not file or file.startswith("<"):
        return file
    path = os.path.abspath(file)
    pkg = _package_dir()
    if os.path.commonpath([path, pkg]) == pkg:
        return PACKAGE_PREFIX + "/" + Path(os.path.relpath(path, pkg)).as_posix()
    try:
        return Path(os.path.relpath(path, os.path.abspath(root))).as_posix()
    except ValueError:  # another drive on Windows: no relative form
        return Path(path).as_posix()


def relocate(module: Module, mode: str = "relative", root: str | os.PathLike[str] | None = None) -> Module:
    """A copy of ``module`` whose debug locations follow ``mode`` (``relative`` to ``root``,
    default the current directory; ``absolute``; ``none``). The code is unchanged.

    Raises:
        WaveError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise WaveError(f"debug path mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "absolute":
        return module
    base = os.getcwd() if root is None else root
    cache: dict[SourceLoc, SourceLoc] = {}

    def fix(loc: SourceLoc | None) -> SourceLoc | None:
        if loc is None or mode == "none":
            return None
        r = cache.get(loc)
        if r is None:
            r = cache[loc] = SourceLoc(relative_path(loc.file, base), loc.line, loc.col)
        return r

    def code(body: list) -> list:
        return [dataclasses.replace(ins, loc=fix(ins.loc)) if ins.loc is not None else ins for ins in body]

    def place(where: str) -> str:  # an aw.print call site's "file:line"
        if mode == "none" or not where:
            return ""
        file, sep, line = where.rpartition(":")
        return f"{relative_path(file, base)}:{line}" if sep and line.isdigit() else relative_path(where, base)

    kernels: list[Kernel] = [
        dataclasses.replace(k, code=code(k.code),
                            prints=[dataclasses.replace(p, where=place(p.where)) for p in getattr(k, "prints", ())])
        for k in module.kernels]
    functions: list[Function] = [dataclasses.replace(f, code=code(f.code)) for f in module.functions]
    return dataclasses.replace(module, kernels=kernels, functions=functions)
