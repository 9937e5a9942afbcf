"""One base for the compiled runtimes' drivers: program caches, refusal checks, padding and
marshalling, written once for OpenCL, SYCL, Vulkan, HIP, Metal and HIP on NVIDIA.

What every compiled launch does before the device-specific part (spec §2.1, §2.3, §3.3,
§11.1), in this order, in :meth:`Driver.prepare`:

1. the program of the module at W (rendered once per module object, W and checked build:
   :class:`ProgramCache`);
2. the kernel's refusal (a kernel the backend cannot express on this device, with the
   backend's reason) or absence;
3. device checks a driver adds (:meth:`Driver.check_kernel`), then local memory against the
   device's;
4. the arguments against the ABI (:func:`marshal_args`: names, buffer types, scalar words by
   :func:`anywave.abi.scalar_word`, exactly as the emulator converts them);
5. the launch rules every target enforces (:func:`anywave.runtime.targets.check_launch_rules`)
   and the launched sizes (:func:`launch_dims`: one dimension of ``x*y*z`` threads padded to
   whole waves for wave kernels, at most the device's maximum, u32 global ids).

Then the driver's own checks of the launch's sizes (:meth:`Driver.check_launch`) and of the
marshalled arguments (:meth:`Driver.check_args`: a buffer of another device's kind, read-only
memory for a written buffer ...). Each driver then moves buffers and launches
(:meth:`Driver.run`). Errors are the driver's own :class:`~anywave.errors.WaveError` subclass
(``Driver.error``), except the launch rules' :class:`~anywave.errors.LaunchConfigError`.

Each argument is checked once, by one layer (issue 24). A driver called directly (its
``launch`` / runner call: the module-level door, the conformance suite) checks everything
above. The launch layer above (:mod:`anywave.jit.launch`) checks each argument itself, more
strictly (dtype, device, contiguity, alignment, overlap, scalar ranges), and then binds the launch
(:meth:`Driver.bind`): the checks that do not depend on the arguments (steps 1-3 and 5) are done
once per launch plan, and a bound launch takes the checked values, converts the scalars to their
words (:func:`anywave.abi.word_converter`) and runs, with no argument check of its own. Two more
hooks: :meth:`Driver.plan_launcher`, the driver's own launcher for a launch plan, which does the
plan's per-call type-and-shape checks itself (CUDA's native launcher; None elsewhere: the plan
checks and calls its bound launch), and :meth:`Driver.stream_handle` for drivers with streams
(:attr:`Driver.streams`).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anywave.abi import check_arg_names, check_constant_bytes, dims3, scalar_word, word_converter
from anywave.errors import LaunchConfigError, WaveError
from anywave.isa.types import ArgKind
from anywave.runtime.targets import ID_LIMIT_U32, check_launch_rules, check_not_forked

Dims = tuple[int, int, int]

#: what a plan launcher (:meth:`Driver.plan_launcher`) returns for arguments that do not fit its
#: layout: nothing was launched, and the caller takes its full path, which raises the detailed error
MISS = object()


#: ``ANYWAVE_CHECK`` values that turn the bounds-checked build off (an explicit opt-out)
CHECK_OFF = ("0", "false", "no", "off")


def env_check() -> bool | None:
    """``ANYWAVE_CHECK`` as a launch's ``check``: True for ``1`` (or any other non-empty value),
    False for ``0``/``false``/``no``/``off`` (the opt-out of the checked default of host-memory
    targets), None when unset or empty (the target's default)."""
    v = os.environ.get("ANYWAVE_CHECK", "").strip().lower()
    if not v:
        return None
    return v not in CHECK_OFF


def resolve_check(check: bool | None, default: bool = False) -> bool:
    """A launch's ``check`` option: True/False as given; None means ``ANYWAVE_CHECK``
    (:func:`env_check`) where set, else ``default`` -- the driver's :attr:`Driver.check_default`:
    True on the targets whose kernels address host memory (the OpenCL and SYCL CPU runtimes: an
    unchecked out-of-bounds store there writes into the Python process), False elsewhere. The
    emulator always checks bounds."""
    if check is None:
        env = env_check()
        return default if env is None else env
    return bool(check)


def buffer_nbytes(v: Any) -> int:
    """Bytes of a buffer argument: a NumPy array, a device array, a torch tensor or a
    ``__cuda_array_interface__`` object."""
    if isinstance(v, np.ndarray):
        return int(v.nbytes)
    if hasattr(v, "element_size") and hasattr(v, "numel"):
        return int(v.numel()) * int(v.element_size())
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        n = 1
        for d in cai["shape"]:
            n *= int(d)
        return n * np.dtype(cai["typestr"]).itemsize
    nb = getattr(v, "nbytes", None)
    return int(nb) if nb is not None else int(np.asarray(v).nbytes)


class ProgramCache:
    """Values (rendered programs, loaded modules ...) per module object and key: a conformance
    group renders and builds once. The module is held weakly where it can be (a new object
    that reuses a dead one's id starts afresh), else strongly."""

    def __init__(self) -> None:
        self._by_module: dict[int, tuple[Callable[[], Any], dict[Any, Any]]] = {}

    def get(self, module: Any, key: Any, make: Callable[[], Any]) -> Any:
        """The value for (``module``, ``key``); ``make()`` builds it on the first request."""
        ent = self._by_module.get(id(module))
        if ent is None or ent[0]() is not module:
            try:
                ref: Callable[[], Any] = weakref.ref(module)
            except TypeError:  # not weakly referable: keep it alive, so its id stays unique
                ref = (lambda m: lambda: m)(module)
            ent = self._by_module[id(module)] = (ref, {})
        values = ent[1]
        if key not in values:
            values[key] = make()
        return values[key]


def marshal_args(kernel: Any, info: Any, args: Mapping[str, Any], error: type[Exception] = WaveError,
                 accept: Callable[[Any], bool] | None = None) -> list[tuple[str, Any, Any]]:
    """Check ``args`` against the kernel's ABI; returns ``(kind, host value, arg)`` per
    parameter, kind ``buffer``, ``u32`` or ``u64``.

    Buffers: NumPy arrays (any dtype; their bytes are the buffer) or device arrays
    (:class:`anywave.runtime.arrays.Array`; host-memory arrays become their NumPy view, the
    driver checks the others' kind); ``accept(value)``, where given, decides instead which
    buffer values the driver takes (e.g. ``__cuda_array_interface__`` objects).

    Scalars: numbers, converted exactly as the emulator does
    (:func:`anywave.abi.scalar_word`), as ``np.uint32`` / ``np.uint64`` words; the
    word size is ``info.params``' kind where the backend gives one (C family), else 64 bits
    for 64-bit types.

    Raises:
        error: a missing/extra argument or a buffer that is not an array.
        TypeError, ValueError: a scalar of the wrong kind or out of range (naming it).
    """
    check_arg_names(kernel, list(args), error)
    from anywave.runtime.arrays import Array

    params = getattr(info, "params", None)
    kinds = [kind for _, kind in params] if params is not None else [
        "buffer" if a.kind is ArgKind.BUFFER else ("u64" if a.type.bits == 64 else "u32") for a in kernel.args]
    out = []
    for a, kind in zip(kernel.args, kinds, strict=True):
        v = args[a.name]
        if a.kind is ArgKind.BUFFER:
            if isinstance(v, Array) and v.space.kind == "host":
                v = v._host_view()
            if not (accept(v) if accept is not None else isinstance(v, (np.ndarray, Array))):
                raise error(f"buffer argument {a.name!r} of kernel {kernel.name!r} must be a NumPy "
                            f"array or an anywave device array, got {type(v).__name__}")
            if isinstance(v, np.ndarray) and v.dtype.hasobject:
                raise error(f"buffer argument {a.name!r} of kernel {kernel.name!r} is an array of Python objects "
                            f"(dtype {v.dtype}); its bytes are object pointers a kernel must not read or write. "
                            "Pass a numeric array (e.g. np.asarray(x, np.float32))")
            out.append(("buffer", v, a))
        else:
            word = scalar_word(kernel, a.name, a.type, v)
            out.append((kind, np.uint64(word) if kind == "u64" else np.uint32(word), a))
    if any(a.constant for a in kernel.args):
        check_constant_bytes(kernel, [(a.name, buffer_nbytes(v)) for kind, v, a in out if a.constant], error)
    return out


def launch_dims(info: Any, grid: Dims, workgroup: Dims, W: int, max_workgroup: int | None,
                error: type[Exception] = WaveError) -> tuple[Dims, Dims] | None:
    """(global, local) NDRange sizes of a launch as one dimension of ``P`` threads per workgroup
    (``x*y*z``, padded to a multiple of W when ``info.wave_mode``: the padding lanes never
    become active), or None for an empty grid. ``grid`` and ``workgroup`` are 3 ints each, as
    the one geometry parser (:func:`anywave.abi.dims3`) makes them.

    Raises:
        error: a workgroup dimension of 0, or P above ``max_workgroup`` (None: no device limit
            checked here).
        LaunchConfigError: more than 2^32 threads along a dimension (global ids are u32).
    """
    g, wg = grid, workgroup
    if any(v < 0 for v in g) or any(v < 1 for v in wg):
        raise error(f"grid {g} and workgroup {wg} must be non-negative / positive")
    if 0 in g:
        return None
    P = padded_size(info, wg, W)
    if max_workgroup is not None and P > max_workgroup:
        raise error(f"workgroup {wg} ({P} threads launched) exceeds the device's maximum {max_workgroup}")
    if g[0] * P > ID_LIMIT_U32 or g[1] * wg[1] > ID_LIMIT_U32 or g[2] * wg[2] > ID_LIMIT_U32:
        raise LaunchConfigError(f"grid {g} x workgroup {wg} ({P} threads launched per workgroup) has more than "
                                f"2^32 threads along a dimension; global ids are u32 (spec §3.3)")
    return (g[0] * P, g[1], g[2]), (P, 1, 1)


def padded_size(info: Any, workgroup: Sequence[int], W: int) -> int:
    """Threads launched per workgroup: x*y*z, rounded up to a multiple of W for wave kernels
    (``info.wave_mode``)."""
    n = int(workgroup[0]) * int(workgroup[1]) * int(workgroup[2])
    return -(-n // W) * W if info.wave_mode else n


@dataclass(frozen=True)
class PlanLayout:
    """What a launch plan's launcher checks per call (:meth:`Driver.plan_launcher`), as the launch
    layer recorded it at the first call of an argument layout, after checking every argument once.

    Attributes:
        specs: one tuple per ABI argument, in ABI order. A buffer:
            ``(index, name, "buffer", quick, written, how)`` -- ``index`` its position in a call's
            arguments, ``quick(value)`` the per-call check (``(base, address, nbytes, value)``, or
            None for a value of another layout), ``how`` ``("array", space, dtype)`` (an anywave
            array), ``("torch", dtype, device)`` (a CUDA tensor) or another tag (use ``quick``).
            A scalar: ``(index, name, "scalar", dtype, (lo, hi), mask, conversion)`` -- ``dtype``
            the language type (``is_int``), ``(lo, hi)``/``mask`` its integer range and bit mask
            (None for floats), ``conversion`` ``(exact type, to number)`` for a NumPy scalar or 0-d
            array (None: a Python number).
        nargs: the number of positional arguments of a call.
        stream: the stream handle of the launches (0: the default stream).
        torch_device: launch on torch's current stream of this CUDA device (None: ``stream``).
        guards: the kernel fingerprint's dependencies to re-check per call
            (:class:`anywave.compiler.fingerprint.Fingerprint`), or None.
        undefined: the fingerprint's marker of a name that was unbound.
    """

    specs: list[tuple[Any, ...]]
    nargs: int
    stream: int = 0
    torch_device: int | None = None
    guards: tuple[tuple[Any, ...], ...] | None = None
    undefined: Any = None


@dataclass
class Launch:
    """One checked launch, ready for the device-specific part.

    Attributes:
        program: the rendered program; info: its kernel (``CKernel`` / ``SpirvKernel``);
        kernel: the WAVE :class:`~anywave.binary.module.Kernel`.
        margs: ``(kind, value, arg)`` per ABI argument (:func:`marshal_args`).
        grid, workgroup: the launch's sizes as 3 ints.
        dims: (global, local) sizes of the one-dimensional launch, None for an empty grid.
        threads: P, threads launched per workgroup (0 for an empty grid).
        checked: the bounds-checked build runs.
        wave_width: W; module: the launched module (what the driver's caches are keyed by).
        built: the device's build of ``program`` where the driver keeps one (see the field).

    A bound launch (:meth:`Driver.bind`) keeps one whose ``margs`` is empty and hands each
    call's arguments to :meth:`Driver.run` apart.
    """

    program: Any
    info: Any
    kernel: Any
    margs: list[tuple[str, Any, Any]]
    grid: Dims
    workgroup: Dims
    dims: tuple[Dims, Dims] | None
    threads: int
    checked: bool
    wave_width: int = 0
    module: Any = None
    #: the device's build of ``program``, kept by the first :meth:`Driver.run` that needs it (a
    #: bound launch then keeps its build: OpenCL and SYCL read ``ANYWAVE_TARGET_OPT`` once per plan)
    built: Any = None

    @property
    def empty(self) -> bool:
        return self.dims is None

    def bounds_sizes(self, margs: list[tuple[str, Any, Any]] | None = None) -> list[int]:
        """Byte size per ABI argument (0 for scalars) of ``margs`` (default: this launch's), for
        the bounds-checked build's hidden parameters and
        :func:`anywave.backends.bounds.raise_if_failed`."""
        return [buffer_nbytes(v) if kind == "buffer" else 0 for kind, v, _a in
                (self.margs if margs is None else margs)]


class BoundLaunch:
    """A launch of one kernel with one geometry and one set of options whose checks that do not
    depend on the arguments are done (:meth:`Driver.bind`). ``bound(values)`` launches with
    ``values``, one per ABI argument in ABI order, which the caller has checked: buffers the
    driver takes as they are (NumPy arrays that are C-contiguous, writable where the kernel writes,
    or this driver's device arrays), scalars Python ints within their type's range or Python
    floats. It converts the scalars to their words and runs (:meth:`Driver.run`) without
    checking anything again, and returns :attr:`result`.

    Attributes:
        launch: the checked :class:`Launch` (``margs`` empty).
        result: what a call returns (a driver's target sets its ``LaunchResult``; None).
        calls: launches made through it.
    """

    __slots__ = ("driver", "launch", "slots", "sync", "result", "calls", "constant", "dev")

    def __init__(self, driver: Driver, launch: Launch, sync: bool) -> None:
        self.driver, self.launch, self.sync = driver, launch, sync
        #: the driver's device: a launch bound in a parent process and called in a forked child
        #: must fail as :meth:`Driver.prepare` does there, not run on the parent's runtime and hang
        self.dev = getattr(driver, "dev", None)
        self.result: Any = None
        self.calls = 0
        params = getattr(launch.info, "params", None)
        kinds = [kind for _, kind in params] if params is not None else [
            "buffer" if a.kind is ArgKind.BUFFER else ("u64" if a.type.bits == 64 else "u32")
            for a in launch.kernel.args]
        k = launch.kernel
        slots: list[tuple[str, Any, Any]] = []
        for a, kind in zip(k.args, kinds, strict=True):
            if a.kind is ArgKind.BUFFER:
                slots.append(("buffer", a, None))
            else:
                word = word_converter(k, a.name, a.type)
                box = np.uint64 if kind == "u64" else np.uint32
                slots.append((kind, a, (lambda v, word=word, box=box: box(word(v)))))
        self.slots = slots
        #: ABI indices of the constant buffers (WAVE 1.1): their bytes are checked at each call
        self.constant = [i for i, a in enumerate(k.args) if a.constant]

    def __call__(self, values: Any) -> Any:
        if self.dev is not None:
            check_not_forked(self.dev, self.driver.error)
        if self.constant:
            k = self.launch.kernel
            check_constant_bytes(k, [(k.args[i].name, buffer_nbytes(values[i])) for i in self.constant],
                                 self.driver.error)
        margs = [(kind, v if conv is None else conv(v), a)
                 for (kind, a, conv), v in zip(self.slots, values, strict=True)]
        self.calls += 1
        self.driver.run(self.launch, margs, self.sync)
        return self.result


class Driver:
    """The base of the compiled runtimes' launchers (conformance runners and targets).

    A driver sets ``error`` (its WaveError subclass) and implements :meth:`translate`; it
    gives its device's limits through :meth:`device_limits` (default: ``self.dev``'s
    ``name``, ``local_memory`` and ``max_workgroup``), may add checks in
    :meth:`check_kernel`, :meth:`check_launch` and :meth:`check_args`, and implements
    :meth:`run`, the device-specific part. Its direct launch (runner call, ``launch``) is
    :meth:`prepare` then :meth:`run`; :meth:`bind` gives the launch layer the same launch with
    the argument checks left to that layer.
    """

    error: type[WaveError] = WaveError
    serial_atomics = False
    #: launches take ``stream=`` (see :meth:`stream_handle`)
    streams = False
    #: the bounds-checked build is the default (``check=None``): set by drivers whose kernels
    #: address host memory (an unchecked overrun there corrupts the user's process)
    check_default = False

    def __init__(self) -> None:
        self._programs = ProgramCache()

    # ---- what a driver provides
    def translate(self, module: Any, wave_width: int, checked: bool) -> Any:  # pragma: no cover - abstract
        """The rendered program of ``module`` at W (``checked``: the bounds-checked build)."""
        raise NotImplementedError

    def device_limits(self) -> tuple[str, int | None, int | None]:
        """(device name, bytes of local memory, most threads per workgroup); None: not checked."""
        dev = self.dev  # type: ignore[attr-defined]
        return dev.name, dev.local_memory, dev.max_workgroup

    def check_kernel(self, kernel: Any, info: Any) -> None:
        """Checks of this device beyond local memory and the launch sizes (raise ``error``)."""

    def check_launch(self, launch: Launch) -> None:
        """Checks of this device on the launch's sizes beyond the shared ones (raise ``error``),
        after :func:`launch_dims`; done once per bound launch."""

    def check_args(self, launch: Launch) -> None:
        """This driver's own checks of the marshalled arguments ``launch.margs`` (raise
        ``error``): a device array of another target, read-only memory for a written buffer ...
        Called by :meth:`prepare` (a direct call) only: a bound launch's arguments were checked
        by the layer that bound it."""

    def run(self, launch: Launch, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """The device-specific part of a launch whose checks are done: move the buffers of
        ``margs`` (:func:`marshal_args`' form) and launch ``launch``; ``sync=False`` may return
        before a launch whose buffers are all device memory ends. A driver that implements it can
        be bound (:meth:`bind`)."""
        raise NotImplementedError

    def stream_handle(self, stream: Any) -> int:
        """The driver's handle of a stream given to a launch (drivers with :attr:`streams`).

        Raises:
            error: this driver's launches take no stream."""
        raise self.error(f"{type(self).__name__} launches take no stream=")

    def plan_launcher(self, module: Any, kernel: str, grid: Dims, workgroup: Dims, layout: PlanLayout) -> Any:
        """The driver's own launcher for a launch plan: ``launcher(args)`` launches ``kernel``
        with the positional arguments ``args`` of a call laid out as ``layout`` (checked per call
        by its ``specs``) and returns None, or returns :data:`MISS` with nothing launched. The
        caller has checked the kernel, geometry and arguments once, and asks only for plans
        whose buffers are all device memory and whose build is unchecked.

        Returns None (this default): the driver has none, and the plan does its per-call checks
        itself and calls the driver's bound launch (:meth:`bind`)."""
        return None

    def buffer_ok(self, value: Any) -> bool:
        """Whether this driver takes ``value`` as a buffer argument (default: NumPy arrays and
        anywave device arrays; the driver checks a device array's kind)."""
        from anywave.runtime.arrays import Array

        return isinstance(value, (np.ndarray, Array))

    # ---- shared
    def program(self, module: Any, wave_width: int, checked: bool = False) -> Any:
        """The rendered program (once per module object, W and build)."""
        return self._programs.get(module, (wave_width, checked), lambda: self.translate(module, wave_width, checked))

    def kernel_info(self, program: Any, module: Any, kernel: str) -> Any:
        """The program's launch information of ``kernel``.

        Raises:
            error: the backend refused the kernel here (its reason), or there is no such kernel."""
        if kernel in program.refused:
            raise self.error(f"kernel {kernel!r} cannot run on {self.device_limits()[0]}: {program.refused[kernel]}")
        if kernel not in program.kernels:
            raise self.error(f"module has no kernel {kernel!r}; it has {[k.name for k in module.kernels]}")
        return program.kernels[kernel]

    def prepare(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                args: Mapping[str, Any], wave_width: int, check: bool | None = None) -> Launch:
        """Every check of a launch (the module docs' steps 1-5), in that order, after refusing a
        device started by the parent of this forked process (:class:`~anywave.runtime.targets.ProcessDevice`),
        then :meth:`check_launch` and :meth:`check_args`.

        Raises:
            error: see :meth:`kernel_info`, :meth:`check_kernel`, :func:`marshal_args`,
                :func:`launch_dims`, :meth:`check_launch`, :meth:`check_args`; LaunchConfigError:
                a launch rule.
        """
        launch = self._prepare(module, kernel, grid, workgroup, wave_width, check, args)
        self.check_args(launch)
        return launch

    def bind(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
             wave_width: int | None = None, *, check: bool | None = None, sync: bool = True) -> BoundLaunch | None:
        """The launch of ``kernel`` with this geometry and these options, checked now except for
        its arguments (steps 1-3 and 5 of the module docs, and :meth:`check_launch`), for a caller
        that checks the arguments itself (the kernel language's launch plans): see
        :class:`BoundLaunch`. ``wave_width`` None: the driver's target's (``self.info``). None when
        this driver has no :meth:`run` (its ``launch`` then checks everything on every call).

        Raises:
            what :meth:`prepare` raises, except the argument errors."""
        if type(self).run is Driver.run:
            return None
        if wave_width is None:
            wave_width = self.info.wave_width  # type: ignore[attr-defined]
        return BoundLaunch(self, self._prepare(module, kernel, grid, workgroup, wave_width, check, None), sync)

    def _prepare(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int], wave_width: int,
                 check: bool | None, args: Mapping[str, Any] | None) -> Launch:
        dev = getattr(self, "dev", None)
        if dev is not None:
            check_not_forked(dev, self.error)  # a device of the parent process: fail at once
        checked = resolve_check(check, self.check_default)
        prog = self.program(module, wave_width, checked)
        info = self.kernel_info(prog, module, kernel)
        k = module.kernel(kernel)
        name, local_memory, max_workgroup = self.device_limits()
        self.check_kernel(k, info)
        if local_memory is not None and info.local_memory > local_memory:
            raise self.error(f"kernel {kernel!r} needs {info.local_memory} bytes of local memory; "
                             f"{name} has {local_memory}")
        margs = [] if args is None else marshal_args(k, info, args, self.error, self.buffer_ok)
        try:  # the one geometry parser; dimensions of 0 allowed (an empty grid runs nothing)
            g3, wg = dims3(grid, "grid", empty_ok=True), dims3(workgroup, "workgroup", empty_ok=True)
        except (TypeError, ValueError) as e:
            raise self.error(str(e)) from None
        if min(g3) >= 1 and min(wg) >= 1:
            check_launch_rules(k, g3, wg)
        dims = launch_dims(info, g3, wg, wave_width, max_workgroup, self.error)
        launch = Launch(prog, info, k, margs, g3, wg, dims, dims[1][0] if dims else 0, checked, wave_width, module)
        self.check_launch(launch)
        return launch
