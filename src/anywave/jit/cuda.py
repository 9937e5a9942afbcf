"""``aw.cuda_kernel``: a CUDA C++ ``__global__`` function as a launchable kernel.

The kernel is lowered by :mod:`anywave.compiler.cuda_frontend` and launched exactly like an
``@aw.kernel`` (:class:`~anywave.jit.kernel.KernelFunction`): ``k(*args, grid=..., workgroup=...,
target=..., wave_width=...)``, arguments in the CUDA signature's order, a pointer parameter
taking an array or tensor as a buffer (``const T*``: read only), a scalar parameter a number.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anywave.binary.module import Module
from anywave.binary.verify import verify_cached

from ..compiler.cuda_frontend import compile_cuda
from .kernel import KernelFunction

__all__ = ["CudaKernel", "cuda_kernel"]


def _cuda_source_kernel() -> None:
    """Stands in for the Python function a ``KernelFunction`` is built from (never called)."""


class CudaKernel(KernelFunction):
    """A ``__global__`` function of a CUDA source, compiled on first use (no compile-time
    constants: the module is compiled once per object)."""

    def __init__(self, source: str, name: str, *, path: str = "kernel.cu",
                 workgroup: Sequence[int] | int | None = None, optimize: bool = True,
                 clang_args: Sequence[str] = ()) -> None:
        # KernelFunction's whole state (so that a slot the launch layer adds later exists here
        # too), then the parts that differ: no Python function stands behind this kernel
        super().__init__(_cuda_source_kernel, workgroup=workgroup, name=name, optimize=optimize)
        self.fn = None
        del self.__wrapped__
        self.__name__ = name
        self.__doc__ = f"CUDA kernel {name!r} from {path}"
        self.source = source
        self.path = path
        self.clang_args = tuple(clang_args)
        self._module: Module | None = None
        self._params = None
        self._compile_lock = threading.Lock()
        self._info: Any = None

    def _build(self) -> Module:
        with self._compile_lock:
            if self._module is None:
                k, params, info = compile_cuda(self.source, self.name, self.path, workgroup=self.workgroup,
                                         optimize=self.optimize, clang_args=self.clang_args)
                m = Module(kernels=[k])
                verify_cached(m)
                self._params = params
                self._info = info
                self._module = m
            return self._module

    @property
    def params(self) -> list[Any]:  # type: ignore[override]
        if self._params is None:
            self._build()
        return self._params  # type: ignore[return-value]

    def compile(self, **constants: Any) -> Module:
        """The Module (one kernel). Raises CompileError for a construct not supported, naming it."""
        if constants:
            from anywave.errors import LaunchError
            raise LaunchError(f"CUDA kernel {self.name!r} takes no compile-time constants, got {sorted(constants)}")
        return self._build()

    def compile_kernel(self, consts: Any = None) -> Any:
        return self._build().kernels[0]

    def resources(self, **constants: Any) -> dict[str, Any]:
        """Registers and spills of the kernel (as :meth:`KernelDef.resources`)."""
        self.compile(**constants)
        return self._info.as_dict()

    def _modules_current(self) -> bool:
        return True

    def signature(self) -> str:
        return ", ".join(f"{p.name}: {p.ann!r}" for p in self.params)

    def __repr__(self) -> str:
        return f"<CUDA kernel {self.name}({self.signature()})>"


def cuda_kernel(source_or_path: str | os.PathLike[str], name: str, *,
                workgroup: Sequence[int] | int | None = None, optimize: bool = True,
                clang_args: Sequence[str] = ()) -> CudaKernel:
    """The ``__global__`` function ``name`` of a CUDA C++ source as a launchable kernel.

    Args:
        source_or_path: the source text, or the path of a ``.cu`` file (a ``PathLike``, or a
            string without a newline that names an existing file).
        name: the ``__global__`` function's name.
        workgroup: required workgroup size (as ``@aw.kernel(workgroup=...)``).
        clang_args: extra clang arguments (``-I``, ``-D``).

    Compilation (clang parse and lowering) happens at the first launch or :meth:`compile`;
    CompileError names an unsupported construct at its line and column. Needs the
    ``libclang`` wheel (``pip install 'anywave[cuda-frontend]'``).
    """
    path = "kernel.cu"
    if isinstance(source_or_path, os.PathLike) or ("\n" not in source_or_path and Path(source_or_path).is_file()):
        path = str(source_or_path)
        source = Path(path).read_text()
    else:
        source = str(source_or_path)
    return CudaKernel(source, name, path=path, workgroup=workgroup, optimize=optimize, clang_args=clang_args)

