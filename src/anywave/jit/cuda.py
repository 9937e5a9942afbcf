"""``aw.cuda_kernel``: a CUDA C++ ``__global__`` function as a launchable kernel.

The kernel is lowered by :mod:`anywave.compiler.cuda_frontend` and launched exactly like an
``@aw.kernel`` (:class:`~anywave.jit.kernel.KernelFunction`): ``k(*args, grid=..., workgroup=...,
target=..., wave_width=...)``, arguments in the CUDA signature's order, a pointer parameter
taking an array or tensor as a buffer (``const T*``: read only), a scalar parameter a number.
After the CUDA parameters come the ``__constant__`` variables the kernel reads (read-only
buffers, by keyword with the variable's name; an initialised one defaults to its initialiser),
and ``shared_bytes=`` gives the bytes of ``extern __shared__`` memory (CUDA's third launch
argument; default 0). A buffer of structs takes a NumPy structured array of the struct's layout
(:meth:`CudaKernel.struct_dtype`) or any array of the same bytes; a ``bool*`` buffer takes a
NumPy bool array.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anywave.binary.module import Module, settle_version
from anywave.binary.verify import verify_cached
from anywave.errors import LaunchError

from ..compiler import types as ty
from ..compiler.cuda_frontend import CudaCompiled, compile_cuda, kernel_symbol
from ..compiler.kernel import Param
from .kernel import KernelFunction

__all__ = ["CudaKernel", "cuda_kernel"]

#: the launch keyword giving the bytes of ``extern __shared__`` memory
SHARED_BYTES = "shared_bytes"


def _cuda_source_kernel() -> None:
    """Stands in for the Python function a ``KernelFunction`` is built from (never called)."""


def numpy_dtype(ctype: Any) -> np.dtype:
    """The NumPy dtype laid out like C type ``ctype`` (a scalar, or ``('struct', _Struct)``:
    a structured dtype with the struct's field names, offsets and size; nested structs
    nested, arrays as subarrays; ``bool`` as ``np.bool_``; a union's members at one offset, the
    members of an anonymous struct or union as the struct's own)."""
    if isinstance(ctype, ty.DType):
        return np.dtype(np.bool_) if ctype is ty.bool_ else np.dtype(ctype.np_dtype)
    if ctype[0] == "arr":
        return np.dtype((numpy_dtype(ctype[1]), (ctype[2],)))
    names: list[str] = []
    formats: list[np.dtype] = []
    offsets: list[int] = []

    def add(st: Any, base: int) -> None:
        for name, t, off in st.fields:
            if name.startswith("(anonymous"):  # an anonymous struct or union: its members are the struct's
                add(t[1], base + off)
            else:
                names.append(name)
                formats.append(numpy_dtype(t))
                offsets.append(base + off)

    add(ctype[1], 0)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": ctype[1].size})


class CudaKernel(KernelFunction):
    """A ``__global__`` function of a CUDA source, compiled on first use, once per value of
    ``shared_bytes`` that changes its code (kernels without ``extern __shared__`` compile once)."""

    def __init__(self, source: str, name: str, *, path: str = "kernel.cu",
                 workgroup: Sequence[int] | int | None = None, optimize: bool = True,
                 clang_args: Sequence[str] = ()) -> None:
        symbol = kernel_symbol(name)
        # KernelFunction's whole state (so that a slot the launch layer adds later exists here
        # too), then the parts that differ: no Python function stands behind this kernel
        super().__init__(_cuda_source_kernel, workgroup=workgroup, name=symbol, optimize=optimize)
        self.fn = None
        del self.__wrapped__
        self.__name__ = symbol
        #: the kernel's CUDA name (a template's instance: ``reduce<float, 256>``)
        self.cuda_name = name
        self.__doc__ = f"CUDA kernel {name!r} from {path}"
        self.source = source
        self.path = path
        self.clang_args = tuple(clang_args)
        self._modules: dict[int, Module] = {}
        self._compiled: dict[int, CudaCompiled] = {}
        self._params: list[Param] | None = None
        self._compile_lock = threading.Lock()

    def _compile(self, shared_bytes: int) -> CudaCompiled:
        """The front end's result for ``shared_bytes`` (cached; lock held by the caller)."""
        first = self._compiled.get(0)
        if first is not None and not first.dynamic_shared:
            shared_bytes = 0  # no extern __shared__: the size changes nothing
        r = self._compiled.get(shared_bytes)
        if r is None:
            r = compile_cuda(self.source, self.cuda_name, self.path, workgroup=self.workgroup,
                             optimize=self.optimize, clang_args=self.clang_args, shared_bytes=shared_bytes)
            self._compiled[shared_bytes] = r
            if self._params is None:
                self._params = [*r.params, Param(SHARED_BYTES, "const", int, 0)]
        return r

    def _build(self, shared_bytes: int = 0) -> Module:
        with self._compile_lock:
            r = self._compile(shared_bytes)
            if r.dynamic_shared and shared_bytes == 0:
                raise LaunchError(f"kernel {self.cuda_name!r} uses extern __shared__ memory: give its size in bytes "
                                  f"at launch, {SHARED_BYTES}=N (CUDA's third launch argument)")
            key = shared_bytes if r.dynamic_shared else 0
            m = self._modules.get(key)
            if m is None:
                m = settle_version(Module(kernels=[r.kernel]))
                verify_cached(m)
                self._modules[key] = m
            return m

    def _first(self) -> CudaCompiled:
        with self._compile_lock:
            return self._compile(0)

    @property
    def params(self) -> list[Any]:  # type: ignore[override]
        if self._params is None:
            self._first()
        return self._params  # type: ignore[return-value]

    def compile(self, **constants: Any) -> Module:
        """The Module (one kernel) for ``shared_bytes`` (default 0). Raises CompileError for a
        construct not supported, naming it."""
        sb = constants.pop(SHARED_BYTES, 0)
        if constants:
            raise LaunchError(f"CUDA kernel {self.cuda_name!r} takes no compile-time constants other than "
                              f"{SHARED_BYTES}=, got {sorted(constants)}")
        if isinstance(sb, bool) or not isinstance(sb, (int, np.integer)) or sb < 0:
            raise LaunchError(f"CUDA kernel {self.cuda_name!r}: {SHARED_BYTES}= must be a non-negative int "
                              f"(bytes of extern __shared__ memory), got {sb!r}")
        return self._build(int(sb))

    def compile_kernel(self, consts: Any = None) -> Any:
        return self.compile(**dict(consts or {})).kernels[0]

    def resources(self, **constants: Any) -> dict[str, Any]:
        """Registers and spills of the kernel (as :meth:`KernelDef.resources`)."""
        sb = int(constants.get(SHARED_BYTES, 0))
        self.compile(**constants)
        r = self._compiled.get(sb) or self._compiled[0]
        return r.info.as_dict()

    def struct_dtype(self, param: str) -> np.dtype:
        """The NumPy dtype of the elements of buffer parameter ``param`` as the kernel lays them
        out (a structured dtype for a buffer of structs). KeyError for another name."""
        return numpy_dtype(self._first().buffer_ctypes[param])

    def _modules_current(self) -> bool:
        return True

    def _bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        params = self.params
        given = {p.name for p in params[:len(args)]} | set(kwargs)
        kw = dict(kwargs)
        for p in params:  # an initialised __constant__ variable: its initialiser by default
            if p.kind == "buffer" and p.name not in given and p.default is not inspect.Parameter.empty:
                kw[p.name] = p.default
        bound = super()._bind(args, kw)
        ctypes = self._first().buffer_ctypes
        for p in params:
            if p.kind != "buffer" or not isinstance(bound.get(p.name), np.ndarray):
                continue
            v = bound[p.name]
            ct = ctypes[p.name]
            abi = np.dtype(p.ann.elem.np_dtype)
            if v.dtype == abi or (isinstance(ct, ty.DType) and ct is not ty.bool_):
                continue  # the ABI's own elements, or a plain scalar buffer (the usual checks apply)
            want = numpy_dtype(ct)
            if v.dtype != want:
                raise LaunchError(f"kernel {self.cuda_name!r}: argument {p.name!r} holds {want} elements (the C "
                                  f"layout: k.struct_dtype({p.name!r})) or their bytes as {abi}, got {v.dtype}")
            if not v.flags.c_contiguous:
                raise LaunchError(f"kernel {self.cuda_name!r}: argument {p.name!r} must be C-contiguous")
            bound[p.name] = v.reshape(-1).view(abi)  # the same memory, seen as the ABI's elements
        return bound

    def signature(self) -> str:
        return ", ".join(f"{p.name}: {p.ann!r}" for p in self.params)

    def __repr__(self) -> str:
        return f"<CUDA kernel {self.cuda_name}({self.signature()})>"


def _names_a_file(s: str) -> bool:
    """Whether string ``s`` names an existing file (False for a one-line source text, however long:
    a name past the system's limit raises OSError in ``is_file``)."""
    try:
        return Path(s).is_file()
    except (OSError, ValueError):  # ENAMETOOLONG; a NUL byte
        return False


def cuda_kernel(source_or_path: str | os.PathLike[str], name: str, *,
                workgroup: Sequence[int] | int | None = None, optimize: bool = True,
                clang_args: Sequence[str] = ()) -> CudaKernel:
    """The ``__global__`` function ``name`` of a CUDA C++ source as a launchable kernel.

    Args:
        source_or_path: the source text, or the path of a ``.cu`` file (a ``PathLike``, or a
            string without a newline that names an existing file); ``#include "x.h"`` is found
            in the file's folder (the current folder for a source text).
        name: the ``__global__`` function's name, or a template kernel's instance
            (``"reduce<float, 256>"``).
        workgroup: required workgroup size (as ``@aw.kernel(workgroup=...)``).
        clang_args: extra clang arguments (``-I``, ``-D``).

    Compilation (clang parse and lowering) happens at the first launch or :meth:`compile`;
    CompileError names an unsupported construct at its line and column. Needs the
    ``libclang`` wheel (``pip install 'anywave[cuda-frontend]'``).
    """
    path = "kernel.cu"
    if isinstance(source_or_path, os.PathLike) or ("\n" not in source_or_path and _names_a_file(source_or_path)):
        path = str(source_or_path)
        source = Path(path).read_text()
    else:
        source = str(source_or_path)
    return CudaKernel(source, name, path=path, workgroup=workgroup, optimize=optimize, clang_args=clang_args)
