"""The launchable kernel: ``@aw.kernel`` makes a :class:`KernelFunction`, a compiler
:class:`~anywave.compiler.kernel.KernelDef` that can be called to launch.

``saxpy(2.0, x, y, n, grid=..., workgroup=...)`` or ``saxpy[grid, workgroup](...)``; compile-time
constants (``aw.Const[...]`` parameters and keyword-only parameters) are passed like any
argument and select the specialisation. A call looks up the launch plan of its argument layout
(:mod:`anywave.jit.launch`) and runs it; the first call of a layout takes the full path, which
checks everything once and records the plan.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from anywave.compiler import types as ty
from anywave.compiler.kernel import KernelDef, Param
from anywave.errors import LaunchError, LaunchValueError

from . import capture as _capture
from .launch import MISS as _MISS
from .launch import check_buffer
from .launch import launch as _full_launch

__all__ = ["KernelFunction", "LaunchError", "LaunchValueError", "kernel"]

_get_ident = threading.get_ident


class KernelFunction(KernelDef):
    """A compiled-on-demand kernel. Call it to launch; :meth:`compile` for the Module.

    Attributes:
        name: kernel name (the function's name unless given).
        params: parameters in order (buffers, scalars, compile-time constants).
    """

    def __init__(self, fn: Callable[..., Any], *, workgroup: Sequence[int] | int | None = None,
                 max_workgroup_size: int | None = None, name: str | None = None, optimize: bool = True) -> None:
        super().__init__(fn, workgroup=workgroup, max_workgroup_size=max_workgroup_size, name=name,
                         optimize=optimize)
        self._calls: dict[tuple[Any, ...], Any] = {}  # launch plans by argument layout (jit/launch.py)
        self._const_pos: tuple[int, ...] | None = None
        self._const_names: frozenset[str] = frozenset()
        self._const_tail: int | None = None
        #: the last native launch plan of a kernel without constants, for a call with the same
        #: grid, workgroup, target, wave width, check flag and stream from the same thread:
        #: ((grid, workgroup, target, wave_width, check, stream), thread id, launcher). The
        #: launcher itself checks every argument and the kernel's fingerprint (runtime/cuda_native.py)
        self._fast: tuple[Any, int, Any] | None = None

    def _plans_valid(self) -> bool:
        """True when the launch plans' modules are still current (:meth:`_modules_current`);
        otherwise the plans are dropped and the launch takes the full path, which recompiles."""
        if self._modules_current():
            return True
        self._calls.clear()
        self._fast = None
        return False

    # ------------------------------------------------------------ launch
    def __getitem__(self, launch: tuple[Any, Any]) -> Callable[..., Any]:
        """``kernel[grid, workgroup](*args)``."""
        if not isinstance(launch, tuple) or len(launch) != 2:
            raise LaunchError(f"kernel {self.name!r}: write kernel[grid, workgroup](...), got kernel[{launch!r}]")
        grid, wg = launch

        def launcher(*args: Any, **kwargs: Any) -> Any:
            return self(*args, grid=grid, workgroup=wg, **kwargs)

        return launcher

    def __call__(self, *args: Any, grid: Any = None, workgroup: Any = None, target: str | None = None,
                 wave_width: int | None = None, check: bool | None = None, stream: Any = None, **kwargs: Any) -> Any:
        """Launch on ``target``; returns the target's launch statistics (the emulator's), or None.

        Args:
            *args, **kwargs: the kernel's parameters. A buffer takes a NumPy array, a torch
                tensor (CPU or CUDA), a CuPy array, an anywave array (``aw.array`` ...), or any
                object with ``__cuda_array_interface__``, ``__dlpack__`` or
                ``__array_interface__``; its memory is used in place (written buffers are
                updated). Scalars take Python/NumPy numbers (range-checked).
            grid: workgroups per dimension (1-3 ints); workgroup: threads per workgroup
                (default: the kernel's ``workgroup=``).
            target: ``"emulator"``, ``"opencl"``, ``"sycl"``, ``"cuda"``, ``"cuda:N"`` ...;
                None: the device the arguments live on, else the best available target.
            wave_width: W for targets that offer several (8/16/32/64); refused with
                TargetError when the target does not run it.
            check: run a bounds-checked build: every memory access guarded, the first
                out-of-bounds one raises OutOfBoundsError naming the buffer, the byte offset and
                the source line. None (default): ``ANYWAVE_CHECK`` (``1`` on, ``0`` off) where
                set, else the target's default -- on for the targets whose kernels address host
                memory (OpenCL and SYCL CPU runtimes), off elsewhere; ``check=False`` or
                ``ANYWAVE_CHECK=0`` opts out (faster; an overrun then corrupts the process).
            stream: a CUDA stream (handle or object with ``cuda_stream``/``ptr``); default:
                PyTorch's current stream for torch tensors, the producer's for
                ``__cuda_array_interface__`` objects that name one, else the default stream.

        Launches whose buffers are all device memory are asynchronous (``aw.synchronize()``,
        ``.numpy()`` wait); host memory (NumPy, CPU tensors) keeps synchronous semantics.

        Raises:
            LaunchError / LaunchValueError: arguments or geometry do not match the ABI or the
                kernel's launch rules (wrong kind of object, dtype, device, non-contiguous,
                read-only memory for a written buffer, overlapping buffers where one is
                written (spec §4.2), workgroup size rules (spec §2.1), ids past i32).
            TargetError: unknown/unavailable target or wave width. CompileError.
        """
        # the plans' key: the geometry with its types (2.0 == 2, but a float is refused, never
        # truncated) and ANYWAVE_CHECK as it is now (a plan made under one setting keeps its build)
        g = grid if type(grid) is int else _geometry_key(grid)
        w = workgroup if type(workgroup) is int else _geometry_key(workgroup)
        env = _check_env()
        f = self._fast
        if f is not None and not kwargs and not _capture.ACTIVE:
            try:
                same = f[0] == (g, w, target, wave_width, check, stream, env) and f[1] == _get_ident()
            except Exception:  # noqa: BLE001 - a grid that does not compare (an array): the usual path
                same = False
            if same:
                r = f[2](args)
                if r is not _MISS:
                    return r
        key = None
        if _capture.ACTIVE and stream is None:  # inside aw.graph: launches go to the capture's stream
            cap = _capture.current()
            if cap is not None:
                stream = cap.handle
                cap.kernels += 1
        cp = self._const_pos
        if cp is None:
            cp = self._const_pos = tuple(i for i, p in enumerate(self.params) if p.kind == "const")
            self._const_names = frozenset(p.name for p in self.params if p.kind == "const")
            # the usual layout: the constants are the last parameters (keyword-only ones)
            self._const_tail = cp[0] if cp and cp == tuple(range(cp[0], len(self.params))) else None
        if kwargs and not kwargs.keys() <= self._const_names:
            # buffers and scalars by keyword (a CUDA kernel's __constant__ buffers): as positional
            # arguments where they continue the positional ones, so the launch has a plan
            args, kwargs = _positional(self.params, self._const_names, args, kwargs)
        # constants may come by keyword (``bm=128``): they are part of the layout's key, with
        # their types (True == 1 and 1 == 1.0, but they select different specialisations)
        if not kwargs or kwargs.keys() <= self._const_names:
            try:
                tail = self._const_tail
                key = (tuple(map(type, args)), g, w, target, wave_width, check, stream, env, _get_ident(),
                       args[tail:] if tail is not None else
                       (tuple(args[i] for i in cp if i < len(args)) if cp else ()),
                       tuple((k, type(v), v) for k, v in kwargs.items()) if kwargs else ())
                plan = self._calls.get(key)
            except TypeError:  # an unhashable grid or constant: no plan
                key = plan = None
            if plan is not None and self._plans_valid():
                r = plan(args)
                if r is not _MISS:
                    if not kwargs and not cp and not _capture.ACTIVE and getattr(plan, "guarded", False):
                        # the layout in use now is the one tried first next time
                        self._fast = ((g, w, target, wave_width, check, stream, env), _get_ident(), plan)
                    return r
        return _full_launch(self, args, kwargs, grid, workgroup, target, wave_width, check, stream, key)

    def _bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        names = [p.name for p in self.params]
        positional = [p.name for p in self.params]
        if len(args) > len(positional):
            raise LaunchError(f"kernel {self.name!r} takes {len(positional)} arguments ({self.signature()}), "
                              f"got {len(args)}")
        bound = dict(zip(positional, args, strict=False))
        for k, v in kwargs.items():
            if k not in names:
                raise LaunchError(f"kernel {self.name!r} has no parameter {k!r}; its parameters: {self.signature()}")
            if k in bound:
                raise LaunchError(f"kernel {self.name!r}: argument {k!r} given twice")
            bound[k] = v
        tps = self.type_params
        if tps:
            self._infer_type_params(bound, tps)
        missing = [p.name for p in self.params if p.name not in bound
                   and not (p.kind == "const" and p.default is not inspect.Parameter.empty)]
        if missing:
            raise LaunchError(f"kernel {self.name!r}: missing arguments {missing}; its parameters: {self.signature()}")
        return bound

    def _infer_type_params(self, bound: dict[str, Any], tps: Mapping[str, list[str]]) -> None:
        """A type parameter not given (and without a default) takes the dtype of the first buffer
        argument annotated with it (``x: aw.In[T]`` given a float16 array: ``T = aw.f16``)."""
        defaults = {p.name: p.default for p in self.params}
        for name, bufs in tps.items():
            if name in bound or defaults.get(name, inspect.Parameter.empty) is not inspect.Parameter.empty:
                continue
            for b in bufs:
                if b in bound:
                    dt = getattr(bound[b], "dtype", None)
                    t = ty.resolve_dtype(str(dt).removeprefix("torch.") if dt is not None and
                                         type(dt).__module__ == "torch" else dt) if dt is not None else None
                    if t is None:
                        raise LaunchError(f"kernel {self.name!r}: type parameter {name!r} is taken from argument "
                                          f"{b!r}, whose dtype ({dt!r}) is no kernel dtype; give {name}= explicitly")
                    bound[name] = t
                    break

    def _check_arg(self, p: Param, v: Any, target: str = "emulator", device: int = 0) -> Any:
        """The launch value of argument ``p`` = ``v``: for a buffer, the checked memory's value
        for ``target``:``device`` (see :func:`anywave.jit.launch.check_buffer`); for a
        scalar, the range-checked Python number."""
        if p.kind == "buffer":
            return check_buffer(self, p, v, target, device).value
        t: ty.DType = p.ann
        if isinstance(v, (np.ndarray,)) and v.ndim == 0:
            v = v[()]
        if isinstance(v, np.generic) and (t.is_int or not isinstance(v, (np.integer, np.floating))):
            v = v.item()
        if hasattr(v, "__dlpack__") and getattr(v, "ndim", None) == 0 and not isinstance(v, np.ndarray):
            # a 0-d torch/CuPy tensor: its value lives on its device, and reading it would block
            # the launch on that device's queue; the caller decides where that wait goes
            raise LaunchError(f"kernel {self.name!r}: argument {p.name!r} is a {t.name} scalar, got a 0-d "
                              f"{type(v).__name__}; scalars are passed by value at launch, so pass a Python or "
                              "NumPy number (t.item(), which waits for the device) or make it a 1-element buffer "
                              "parameter (no wait)")
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise LaunchError(f"kernel {self.name!r}: argument {p.name!r} is a {t.name} scalar, got "
                              f"{type(v).__name__} {v!r}")
        if t.is_int:
            if isinstance(v, (float, np.floating)):  # (np.longdouble's item() is itself)
                if not (np.isfinite(v) and v == np.trunc(v)):
                    raise LaunchError(f"kernel {self.name!r}: argument {p.name!r} is {t.name}, got float {v!r}")
                v = int(v)
            info = np.iinfo(t.np_dtype)
            if not info.min <= v <= info.max:
                raise LaunchValueError(f"kernel {self.name!r}: argument {p.name!r} = {v} is out of range for "
                                       f"{t.name} ({info.min}..{info.max})")
            return v
        # a float parameter: the value as given (a Python int or float, or a NumPy scalar of any
        # real dtype), converted to the ABI word by scalar_word's rules where the launch makes the
        # word -- exactly, rounded once (an int past 2^53 or an np.longdouble too), a NumPy scalar of
        # the parameter's own type bit for bit (a NaN's payload too); an overflow is scalar_word's
        # ValueError naming the argument
        return v


def _geometry_key(v: Any) -> Any:
    """A grid or workgroup other than an int, as part of a launch plan's key: with the types of
    its parts, so that ``2.0`` (equal to ``2`` and hashing alike) never finds the plan made for ``2``
    and the full path refuses it."""
    if type(v) is tuple:
        return (tuple, tuple(map(type, v)), v)
    return (type(v), v)


#: ANYWAVE_CHECK's value as the process environment holds it (os.environ's own mapping: a plain
#: dict lookup, ~30 ns, where os.environ.get costs ~1 us per launch); CPython keeps it current
#: for os.environ[...] = ... / del / putenv through os.environ
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEY = os.environ.encodekey("ANYWAVE_CHECK") if hasattr(os.environ, "encodekey") else None


def _check_env() -> Any:
    if _ENV_DATA is not None:
        return _ENV_DATA.get(_ENV_KEY)
    return os.environ.get("ANYWAVE_CHECK")


def _positional(params: Sequence[Param], const_names: frozenset[str], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` with the non-constant keyword arguments moved to the positions of their
    parameters, when they fill the positions right after ``args`` (parameter order, constants
    skipped); otherwise unchanged, so that the full launch path binds (and reports) them."""
    extra = {k: v for k, v in kwargs.items() if k not in const_names}
    n = len(args)
    moved: list[Any] = []
    for p in params[n:]:
        if not extra:
            break
        if p.kind == "const" or p.name not in extra:
            return args, kwargs  # a gap (a default, a constant in between): the full path
        moved.append(extra.pop(p.name))
    if extra:  # a name that is not a parameter after the positional ones: the full path says which
        return args, kwargs
    return args + tuple(moved), {k: v for k, v in kwargs.items() if k in const_names}


def kernel(fn: Callable[..., Any] | None = None, *, workgroup: Sequence[int] | int | None = None,
           max_workgroup_size: int | None = None, name: str | None = None,
           optimize: bool = True) -> Any:
    """Decorator: ``@aw.kernel`` or ``@aw.kernel(workgroup=(256, 1, 1))``.

    Args:
        workgroup: required workgroup size (recorded in the ABI; launches must match).
        max_workgroup_size: largest workgroup the kernel supports.
        name: kernel name in the module (default: the function name).
        optimize: run the optimisation passes (default True).
    """
    def wrap(f: Callable[..., Any]) -> KernelFunction:
        return KernelFunction(f, workgroup=workgroup, max_workgroup_size=max_workgroup_size, name=name,
                              optimize=optimize)

    return wrap(fn) if fn is not None else wrap
