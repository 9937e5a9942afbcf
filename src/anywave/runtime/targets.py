"""A small registry of execution targets (design.md §1: a target is a backend plus a device).

Each registered target has a name, a probe saying whether it is usable here (and why not),
and a factory. The registry knows no target by name: each runtime module of :data:`RUNTIMES`
registers its own (the emulator, always present, from :mod:`anywave.runtime.emulator`;
``cuda`` when cuda-python and an NVIDIA driver with a device are; ...).

    >>> from anywave.runtime.targets import available_targets, get_target
    >>> [t.name for t in available_targets() if t.available]           # doctest: +SKIP
    ['emulator', 'cuda']
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anywave.errors import LaunchConfigError, WaveError
from anywave.isa.types import Capability


class TargetUnavailable(WaveError):
    """The requested target cannot be used on this machine; the message says why."""


#: The wave width a launch uses when it gives none (docs/spec.md §2.4, "default wave
#: width"): 32 on every target that can run it (the emulator, the OpenCL and SYCL CPU
#: runtimes, CUDA, Metal, HIP on NVIDIA and RDNA); a target with one other fixed width runs
#: that width (HIP on CDNA: 64). So installing a runtime never changes W for a launch that
#: gives none, and never changes a W-invariant kernel's result at all.
DEFAULT_WAVE_WIDTH = 32


#: The environment variable that turns the optimisers of the CPU-side runtime compilers off
#: (:func:`optimize_target_code`).
TARGET_OPT_ENV = "ANYWAVE_TARGET_OPT"


#: the spellings of an on/off setting (``ANYWAVE_TARGET_OPT``, ``ANYWAVE_VULKAN_COOPMAT``)
SETTING_OFF = ("0", "false", "no", "off")
SETTING_ON = ("1", "true", "yes", "on")


def optimize_target_code() -> bool:
    """Whether the runtime compilers of the CPU targets optimise the code they build: True unless
    the environment sets ``ANYWAVE_TARGET_OPT`` to ``0`` (or ``false``, ``no``, ``off``: the
    spellings ``ANYWAVE_CHECK`` takes; unset or empty is the default, ``1``).

    With ``0``, OpenCL builds with ``-cl-opt-disable``, SYCL with ``-O0``, the ``cpu`` target's C
    compiler with ``-O0``, and Mesa's lavapipe (the Vulkan CPU driver) runs its LLVM without
    optimisation passes (``GALLIVM_PERF=nopt`` while the Vulkan device starts, unless the process
    sets ``GALLIVM_PERF`` itself). The variable is read when a launch plan is made (OpenCL,
    SYCL, ``cpu``: the plan keeps its build) and, for lavapipe, once, when the process starts its
    Vulkan device. No result changes at either level: every build keeps the
    spec's arithmetic (no contraction, no fast-math, correctly rounded divide and square root,
    defined integer wrap-around), and the conformance suite runs both ways (the default test tier
    with ``0``, ``.ci/run``'s sweep tier with ``1``). Builds of large kernels take a fifth to a half
    of the time (the conformance suite: OpenCL 4.6x, the cpu target 3x, lavapipe 1.4-1.9x, SYCL
    2.9x), small SYCL kernels about the same (its front end dominates); the kernels run slower.
    GPU drivers (CUDA, HIP, Metal, Vulkan on a GPU) are not affected.

    Raises:
        LaunchConfigError: the variable holds any other value."""
    raw = os.environ.get(TARGET_OPT_ENV, "")
    v = raw.strip().lower()
    if not v or v in SETTING_ON:
        return True
    if v in SETTING_OFF:
        return False
    raise LaunchConfigError(f"{TARGET_OPT_ENV}={raw!r}: use 1 (optimise, the default) or 0 (build without "
                            "optimisation: faster builds, slower kernels, the same results)")


def default_wave_width(offered: Sequence[int] | None) -> int:
    """The default rule: :data:`DEFAULT_WAVE_WIDTH` if ``offered`` (the widths a target can
    run; None or empty = any) contains it, else the smallest offered width."""
    if not offered or DEFAULT_WAVE_WIDTH in offered:
        return DEFAULT_WAVE_WIDTH
    return min(offered)


@dataclass(frozen=True)
class LaunchResult:
    """What a launch on a compiled runtime reports (the emulator returns its richer
    :class:`~anywave.emu.machine.EmulationStats`, which has the same ``wave_width``).

    Attributes:
        kernel: kernel name.
        target: registry name of the target that ran it.
        device: the device's name.
        wave_width: the W the launch ran at.
    """

    kernel: str
    target: str
    device: str
    wave_width: int


@dataclass(frozen=True)
class TargetInfo:
    """Target description (docs/spec.md §11.3).

    Attributes:
        name: registry name (``emulator``, ``cuda``).
        device: human-readable device name.
        wave_width: W.
        capabilities: capability set the target offers.
        local_memory: bytes of local memory per workgroup.
        max_workgroup_size: largest threads per workgroup (total).
        max_workgroup_dims: largest workgroup size per dimension.
        max_grid: largest grid size per dimension (workgroups).
        details: extra properties (compute capability, SM count, memory, driver ...).
        wave_widths: every W the target can run (a target object of each is made with
            ``wave_width=``); default ``(wave_width,)``; empty for a device without wave
            operations (no W can be asked for).
        host_memory: the target's buffers are host memory (it runs on the host CPU, or on
            memory the host addresses directly), so host arrays (NumPy, CPU tensors) are its
            own memory rather than copies of it.
    """

    name: str
    device: str
    wave_width: int
    capabilities: Capability
    local_memory: int
    max_workgroup_size: int
    max_workgroup_dims: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    details: Mapping[str, Any] = field(default_factory=dict)
    wave_widths: tuple[int, ...] = None  # type: ignore[assignment] - None: (wave_width,)
    host_memory: bool = False

    def __post_init__(self) -> None:
        widths = (self.wave_width,) if self.wave_widths is None else tuple(self.wave_widths)
        object.__setattr__(self, "wave_widths", widths)


@dataclass(frozen=True)
class TargetStatus:
    """One registry entry as seen on this machine."""

    name: str
    available: bool
    reason: str = ""
    infos: tuple[TargetInfo, ...] = ()


@dataclass(frozen=True)
class _Entry:
    probe: Callable[[], tuple[bool, str, Sequence[TargetInfo]]]
    factory: Callable[..., Any]
    #: ``refuses(module, kernel, workgroup) -> reason or None``: a kernel (or a workgroup size,
    #: when given) the target cannot run (a default launch then goes to the next target,
    #: :func:`serving_name`)
    refuses: Callable[..., str | None] | None = None


_REGISTRY: dict[str, _Entry] = {}


def register_target(name: str, probe: Callable[[], tuple[bool, str, Sequence[TargetInfo]]],
                    factory: Callable[..., Any],
                    refuses: Callable[..., str | None] | None = None) -> None:
    """Register (or replace) a target: ``probe() -> (available, reason, infos)`` must not
    raise; ``factory(**options)`` returns an object with ``info`` and ``launch(...)``;
    ``refuses(module, kernel, workgroup=None)``, if given, returns why the target cannot run that
    kernel (at that workgroup size, a 3-tuple, when given) or None, so a launch that names no
    target passes it by (:func:`serving_name`). The
    built-in runtimes (:data:`RUNTIMES`) are registered first, so they keep their order."""
    _load_optional_runtimes()
    _REGISTRY[name] = _Entry(probe, factory, refuses)


def target_names() -> list[str]:
    """Registered target names, in registration order."""
    _load_optional_runtimes()
    return list(_REGISTRY)


def available_targets() -> list[TargetStatus]:
    """Probe every registered target (never raises; a failing probe is reported as the reason)."""
    _load_optional_runtimes()
    return [_status(name, e) for name, e in list(_REGISTRY.items())]


def target_status(name: str) -> TargetStatus | None:
    """The status of registered target ``name`` (its probe alone: what :func:`available_targets`
    reports for it, without probing the others), or None when no target has that name."""
    _load_optional_runtimes()
    e = _REGISTRY.get(name)
    return None if e is None else _status(name, e)


def _status(name: str, e: _Entry) -> TargetStatus:
    try:
        ok, reason, infos = e.probe()
    except Exception as exc:  # noqa: BLE001 - a probe failure is a reportable status
        ok, reason, infos = False, f"probe failed: {type(exc).__name__}: {exc}", ()
    return TargetStatus(name, ok, reason, tuple(infos))


def get_target(name: str, **options: Any) -> Any:
    """Create target ``name`` (options go to its factory, e.g. ``wave_width=`` for the
    emulator, ``device=`` for cuda).

    Raises:
        ValueError: unknown name (the message lists the registered ones).
        TargetUnavailable: the target cannot be used here (the message says why).
    """
    _load_optional_runtimes()
    if name not in _REGISTRY:
        raise ValueError(f"unknown target {name!r}; registered targets: {target_names()}")
    e = _REGISTRY[name]
    ok, reason, _ = e.probe()
    if not ok:
        raise TargetUnavailable(f"target {name!r} is not available: {reason}")
    return e.factory(**options)


#: which available target launches pick by default, best first, within the tiers of
#: :func:`preferred_names`: a GPU, then the native ``cpu`` target, then the runtimes whose
#: device is the host CPU (OpenCL and SYCL on Intel's CPU runtime, Vulkan on lavapipe: 1.5-30x
#: slower than NumPy on the issue-29 kernels, where the cpu target is 0.1-8.6x), then the
#: reference emulator (always present)
PREFERENCE = ("cuda", "hip", "metal", "opencl", "sycl", "vulkan", "cpu", "emulator")


def _on_host(st: TargetStatus) -> bool:
    """Whether every device of the target is the host CPU and its memory (:attr:`TargetInfo.host_memory`)."""
    return bool(st.infos) and all(i.host_memory for i in st.infos)


def _tier(st: TargetStatus) -> int:
    """0 a device of its own (a GPU), 1 the native cpu target, 2 a runtime whose devices are
    all the host CPU, 3 the emulator, 4 a target :data:`PREFERENCE` does not name."""
    if st.name not in PREFERENCE:
        return 4
    if st.name == "emulator":
        return 3
    if st.name == "cpu":
        return 1
    return 2 if _on_host(st) else 0


def _preferred(statuses: Sequence[TargetStatus]) -> list[TargetStatus]:
    rank = {n: i for i, n in enumerate(PREFERENCE)}
    ok = [st for st in statuses if st.available]
    return sorted(ok, key=lambda st: (_tier(st), rank.get(st.name, len(PREFERENCE))))


def preferred_names() -> list[str]:
    """Names of the available targets, best first: by tier (:func:`_tier`: a GPU, the cpu
    target, the runtimes on the host CPU, the emulator, then any others), each tier in
    :data:`PREFERENCE` order."""
    return [st.name for st in _preferred(available_targets())]


def refusal(name: str, module: Any, kernel: Any, workgroup: Sequence[int] | None = None) -> str | None:
    """Why target ``name`` cannot run ``kernel`` of ``module`` (at ``workgroup``, if given): its
    ``refuses`` hook, or None."""
    e = _REGISTRY.get(name)
    if e is None or e.refuses is None:
        return None
    return e.refuses(module, kernel, workgroup)


#: the name that asks for the best target on the host CPU (:func:`serving_name` with ``host=True``)
HOST = "host"


def host_names() -> list[str]:
    """The available targets whose devices are all the host CPU and its memory
    (:attr:`TargetInfo.host_memory`: the cpu target, OpenCL/SYCL on a CPU device, Vulkan on
    lavapipe, the emulator), best first (:func:`preferred_names`)."""
    return [st.name for st in _preferred(available_targets()) if _on_host(st)]


def serving_name(module: Any, kernel: Any, host: bool = False, workgroup: Sequence[int] | None = None) -> str:
    """The best available target (:func:`preferred_names`; with ``host``, of :func:`host_names`)
    that does not refuse ``kernel`` of ``module`` at ``workgroup`` (:func:`refusal`; the last one
    when all do): where a launch that names no target (or names ``"host"``) runs."""
    names = host_names() if host else preferred_names()
    for n in names:
        if refusal(n, module, kernel, workgroup) is None:
            return n
    return names[-1]


def default_target(**options: Any) -> Any:
    """The best available target (:func:`preferred_names`): CUDA when a GPU is present,
    else the cpu target, else a runtime on the host CPU, else the emulator. Falling back to the
    emulator warns (once per process, RuntimeWarning) with the reason each other registered
    target is unavailable."""
    best = preferred_names()[0]
    if best == "emulator":
        _warn_fallback()
    return get_target(best, **options)


_FALLBACK_WARNED = False


def _warn_fallback() -> None:
    global _FALLBACK_WARNED
    if _FALLBACK_WARNED:
        return
    _FALLBACK_WARNED = True
    import warnings

    why = [f"{st.name}: {st.reason}" for st in available_targets() if not st.available]
    if why:
        warnings.warn("anywave runs on the reference emulator; no faster target is usable here (" + "; ".join(why)
                      + ")", RuntimeWarning, stacklevel=3)


# ------------------------------------------------------------- launch rules, one place

#: global ids are u32 special registers (spec §3.3): grid * workgroup along a dimension must
#: not exceed 2^32 in a module launch; the kernel language reads them as i32 (2^31)
ID_LIMIT_U32 = 2**32
ID_LIMIT_I32 = 2**31


def check_launch_rules(kernel: Any, grid: Sequence[int], workgroup: Sequence[int], *,
                       id_limit: int = ID_LIMIT_U32, id_type: str = "u32") -> None:
    """The launch rules every target enforces before running (spec §2.1, §3.3): the kernel's
    required ``.workgroup_size``, its ``max_workgroup_size``, and global ids that fit their type
    (``grid[d] * workgroup[d] <= id_limit`` and ``grid[d] < id_limit`` for each dimension d:
    the grid size is a special register of the id type too).

    Args:
        kernel: a :class:`~anywave.binary.module.Kernel` (``name``, ``workgroup_size``,
            ``max_workgroup_size``); grid, workgroup: 3 ints each.
        id_limit, id_type: the id range (2^32 for the u32 special registers; 2^31 for the
            kernel language's i32 ``aw.global_id``).

    Raises:
        LaunchConfigError: naming the kernel, the value and the rule.
    """
    g, wg = tuple(grid), tuple(workgroup)
    total = 1
    for w in wg:
        total *= int(w)
    problems = []
    req = getattr(kernel, "workgroup_size", None)
    if req is not None and tuple(req) != wg:
        problems.append(f"the kernel requires workgroup size {tuple(req)} (its .workgroup_size), got {wg}")
    mx = getattr(kernel, "max_workgroup_size", None)
    if mx is not None and total > mx:
        problems.append(f"workgroup {wg} has {total} threads; the kernel's max_workgroup_size is {mx}")
    for d, (gd, wd) in enumerate(zip(g, wg, strict=True)):
        if int(gd) > id_limit - 1:
            problems.append(f"grid[{d}] = {gd} workgroups, but the grid size along dimension {d} is {id_type} "
                            f"(at most {id_limit - 1})")
        elif int(gd) * int(wd) > id_limit:
            problems.append(f"grid[{d}] * workgroup[{d}] = {gd} * {wd} = {int(gd) * int(wd)} threads, but global ids "
                            f"along dimension {d} are {id_type} (at most {id_limit} threads per dimension)")
    if problems:
        raise LaunchConfigError(f"launch of kernel {getattr(kernel, 'name', '?')!r} with grid={g} workgroup={wg} "
                                "refused: " + "; ".join(problems))


# ------------------------------------------------------------- process-wide runtime devices

#: every ProcessDevice, for the at-fork hook
_PROCESS_DEVICES: list[ProcessDevice] = []


def fork_message(label: str, parent: int) -> str:
    """The error of a runtime used in a child forked after its parent (pid ``parent``) started it."""
    return (f"the {label} runtime was started in process {parent}, which then forked this process "
            f"(multiprocessing's default 'fork' start method on Linux, os.fork, torch DataLoader workers); "
            f"a {label} device does not survive fork (its runtime's threads and driver state stay in the "
            f"parent: the first launch would hang forever), so it cannot be used here. Use the 'spawn' start "
            f"method: multiprocessing.get_context('spawn') / set_start_method('spawn'), or "
            f"DataLoader(..., multiprocessing_context='spawn'); or start {label} only in the children")


class ProcessDevice:
    """A runtime's process-wide device, created on first use under a lock. A failure is
    remembered and raised again (as ``error``) on later calls, so probing an absent runtime
    stays cheap; :meth:`status` turns it into the ``(usable, reason)`` pair probes return.

    Fork (issue 31, item 15): a device created before the process forked is unusable in the
    child (the OpenCL, SYCL and Vulkan CPU runtimes keep worker threads and driver state that
    fork does not copy; a launch there hangs forever). In a forked child the device object is
    marked (``_fork_error``, which :meth:`anywave.runtime.driver.Driver.prepare` and the memory
    spaces raise) and :meth:`get` raises ``error`` with :func:`fork_message` at once. A runtime
    the parent never started is started afresh in the child as usual."""

    def __init__(self, factory: Callable[[], Any], error: type[Exception], label: str) -> None:
        self._factory, self._error, self._label = factory, error, label
        self._lock = threading.Lock()
        self._device: Any = None
        self._failure: str | None = None
        self._pid = os.getpid()
        _PROCESS_DEVICES.append(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._device is not None:
            msg = fork_message(self._label, self._pid)
            try:
                self._device._fork_error = msg
            except AttributeError:  # pragma: no cover - a device class with __slots__
                pass
            self._device, self._failure = None, msg
        self._pid = os.getpid()

    def get(self) -> Any:
        """The device. Raises ``error`` (with the reason) when the runtime is unusable."""
        with self._lock:
            if self._device is None and self._failure is None:
                try:
                    self._device = self._factory()
                except self._error as e:
                    self._failure = str(e)
                except Exception as e:  # noqa: BLE001 - any driver failure makes the target unusable
                    self._failure = f"{self._label} initialisation failed: {type(e).__name__}: {e}"
            if self._device is None:
                raise self._error(self._failure)
            return self._device

    def status(self) -> tuple[bool, str]:
        """``(True, device name)`` or ``(False, reason)``; never raises."""
        try:
            return True, self.get().name
        except self._error as e:
            return False, str(e)


def check_not_forked(device: Any, error: type[Exception]) -> None:
    """Raise ``error`` when ``device`` was created before this process was forked from its parent
    (:class:`ProcessDevice`), or when its queue still runs a command whose wait was interrupted
    (Ctrl-C: :func:`mark_interrupted`) -- a device kernel cannot be cancelled, and every later
    command of an in-order queue would wait behind it for ever."""
    msg = getattr(device, "_fork_error", None)
    if msg:
        raise error(msg)
    held = getattr(device, "_interrupted", None)
    if held is not None:
        what, running = held
        try:
            still = running()
        except Exception:  # noqa: BLE001 - a runtime torn down: nothing runs any more
            still = False
        if not still:
            device._interrupted = None
            return
        raise error(f"{getattr(device, 'name', 'the device')} still runs {what}, whose wait was interrupted "
                    "(Ctrl-C): a kernel on the device cannot be cancelled, and this queue runs commands in "
                    "order, so this one would wait behind it for ever. Let it finish, or start a new "
                    "process (this one ends without waiting for it).")


def mark_interrupted(device: Any, what: str, running: Callable[[], bool]) -> None:
    """Record on ``device`` a command left running by an interrupted wait, so that the device's
    next command raises (:func:`check_not_forked`) instead of waiting behind it while it runs."""
    if device is not None:
        device._interrupted = (what, running)


def _after_fork_in_child() -> None:
    for pd in _PROCESS_DEVICES:
        pd._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ----------------------------------------------------- targets driven by a conformance runner

class RunnerTarget:
    """A target whose driver is a runner ``runner(module, kernel, grid, workgroup, args, W)``
    on a device that offers several wave widths (the OpenCL and SYCL CPU runtimes).

    Subclasses set ``name`` and implement ``make_runner()``; the runner's ``dev`` describes
    the device (``name``, ``features.wave_widths``, ``capabilities()``, ``local_memory``,
    ``max_workgroup``, ``fp64``).

    ``wave_width=None`` (the default) applies :func:`default_wave_width`. ``host_memory``
    (class attribute, default True: the CPU runtimes) goes to :attr:`TargetInfo.host_memory`.

    Raises:
        ValueError: ``wave_width`` is not one the device offers.
    """

    name = ""
    host_memory = True

    def __init__(self, wave_width: int | None = None) -> None:
        self.runner = self.make_runner()
        dev = self.runner.dev
        widths = tuple(dev.features.wave_widths)
        if wave_width is None:
            wave_width = default_wave_width(widths)
        if widths and wave_width not in widths:
            raise ValueError(f"wave_width {wave_width!r} not offered by {dev.name}; it offers {list(widths)}")
        details = {"sub_group_sizes": widths, "fp64": dev.fp64}
        if getattr(dev, "subgroup_note", ""):
            details["sub_group_note"] = dev.subgroup_note
        self.info = TargetInfo(self.name, dev.name, wave_width, dev.capabilities(), dev.local_memory,
                               dev.max_workgroup, (dev.max_workgroup,) * 3, (2**31 - 1, 65535, 65535), details,
                               wave_widths=widths, host_memory=self.host_memory)

    def make_runner(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def check_default(self) -> bool:
        """Whether ``launch(check=None)`` runs the bounds-checked build (the driver's
        :attr:`~anywave.runtime.driver.Driver.check_default`: on for host-memory devices)."""
        return bool(getattr(self.runner, "check_default", False))

    def launch(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any, *,
               sync: bool = True, check: bool | None = None) -> LaunchResult:
        """Run ``kernel`` of ``module``; buffers in ``args`` (NumPy arrays, or this target's
        :class:`~anywave.runtime.arrays.Array`) are updated in place. With ``sync=False`` a
        launch whose buffers are all device arrays is only enqueued (see ``aw.synchronize``).
        Returns the :class:`LaunchResult` (which W ran).

        ``check``: run the bounds-checked build (every memory access guarded; the first
        out-of-bounds one raises :class:`~anywave.errors.OutOfBoundsError` after the launch,
        which is then synchronous). None (default): ``ANYWAVE_CHECK`` (``1``/``0``) where set,
        else :attr:`check_default` (on for the CPU runtimes, whose kernels address host memory:
        an unchecked overrun would write into the Python process). ``check=False`` opts out;
        unchecked launches use a separate build (cost: ``bench/bench_checked_default.py``)."""
        self.runner(module, kernel, grid, workgroup, args, self.info.wave_width, sync=sync, check=check)
        return LaunchResult(kernel, self.name, self.info.device, self.info.wave_width)

    def bind(self, module: Any, kernel: str, grid: Any, workgroup: Any, *, sync: bool = True,
             check: bool | None = None) -> Any:
        """The launch of ``kernel`` with this geometry and these options (see :meth:`launch`),
        checked now except for its arguments, for a caller that checks them itself: the driver's
        :meth:`~anywave.runtime.driver.Driver.bind` at this target's W, whose calls return the
        :class:`LaunchResult`; None when the driver cannot be bound (``launch`` then checks
        everything on every call).

        Raises:
            what :meth:`launch` raises, except the argument errors."""
        bind = getattr(self.runner, "bind", None)
        bound = None if bind is None else bind(module, kernel, grid, workgroup, self.info.wave_width, check=check,
                                               sync=sync)
        if bound is not None:
            bound.result = LaunchResult(kernel, self.name, self.info.device, self.info.wave_width)
        return bound

    @classmethod
    def register(cls, status: Callable[[], tuple[bool, str]]) -> None:
        """Register this target; ``status() -> (usable, reason)`` is its cheap probe."""

        def probe() -> tuple[bool, str, Sequence[TargetInfo]]:
            ok, why = status()
            if not ok:
                return False, why, ()
            return True, "", (cls().info,)

        register_target(cls.name, probe, cls, getattr(cls, "refuses", None))


#: the runtime modules, each with a ``register()`` function, loaded on the registry's first use
#: (not at import time, so importing one of them first cannot see a half-initialised
#: registry), in this order: the reference emulator (always present), CUDA, then the runtimes
#: whose dependencies are optional
RUNTIMES = ("anywave.runtime.emulator", "anywave.runtime.cuda", "anywave.runtime.opencl", "anywave.runtime.sycl",
            "anywave.runtime.hip", "anywave.runtime.metal", "anywave.runtime.vulkan", "anywave.runtime.cpu")
OPTIONAL_RUNTIMES = RUNTIMES[2:]
_optional_loaded = False
_loading = False
#: held while the runtimes register: a thread that asks during that waits for the whole
#: registry instead of seeing it half filled ("unknown target"; issue 31, item 3). Re-entrant:
#: a runtime's register() calls back into the registry on the loading thread.
_LOAD_LOCK = threading.RLock()


def _load_optional_runtimes() -> None:
    # A missing optional dependency shows up later as an unavailable target with its
    # reason (from the module's own probe), not as an import error here.
    global _optional_loaded, _loading
    if _optional_loaded:
        return
    with _LOAD_LOCK:
        if _optional_loaded or _loading:  # done, or a register() of the loading thread itself
            return
        _loading = True
        try:
            import importlib

            for name in RUNTIMES:
                try:
                    importlib.import_module(name).register()
                except ImportError:
                    continue
        finally:
            _loading = False
            _optional_loaded = True  # marked only once every runtime had its turn


def __getattr__(name: str) -> Any:
    # the emulator target lives in anywave.runtime.emulator; this keeps the old import path
    if name == "EmulatorTarget":  # through the registry's own list: the registry imports no runtime by name
        import importlib

        return importlib.import_module(RUNTIMES[0]).EmulatorTarget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
