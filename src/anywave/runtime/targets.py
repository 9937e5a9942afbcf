"""A small registry of execution targets (design.md §1: a target is a backend plus a device).

Each registered target has a name, a probe saying whether it is usable here (and why not),
and a factory. The emulator is always present; ``cuda`` is present when cuda-python and an
NVIDIA driver with a device are.

    >>> from anywave.runtime.targets import available_targets, get_target
    >>> [t.name for t in available_targets() if t.available]           # doctest: +SKIP
    ['emulator', 'cuda']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anywave.errors import LaunchConfigError, WaveError
from anywave.isa.types import LIMITS, Capability


class TargetUnavailable(WaveError):
    """The requested target cannot be used on this machine; the message says why."""


#: The wave width a launch uses when it gives none (docs/spec.md §2.4, "default wave
#: width"): 32 on every target that can run it (the emulator, the OpenCL and SYCL CPU
#: runtimes, CUDA, Metal, HIP on NVIDIA and RDNA); a target with one other fixed width runs
#: that width (HIP on CDNA: 64). So installing a runtime never changes W for a launch that
#: gives none, and never changes a W-invariant kernel's result at all.
DEFAULT_WAVE_WIDTH = 32


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


_REGISTRY: dict[str, _Entry] = {}


def register_target(name: str, probe: Callable[[], tuple[bool, str, Sequence[TargetInfo]]],
                    factory: Callable[..., Any]) -> None:
    """Register (or replace) a target: ``probe() -> (available, reason, infos)`` must not
    raise; ``factory(**options)`` returns an object with ``info`` and ``launch(...)``."""
    _REGISTRY[name] = _Entry(probe, factory)


def target_names() -> list[str]:
    """Registered target names, in registration order."""
    _load_optional_runtimes()
    return list(_REGISTRY)


def available_targets() -> list[TargetStatus]:
    """Probe every registered target (never raises; a failing probe is reported as the reason)."""
    _load_optional_runtimes()
    out = []
    for name, e in _REGISTRY.items():
        try:
            ok, reason, infos = e.probe()
        except Exception as exc:  # noqa: BLE001 - a probe failure is a reportable status
            ok, reason, infos = False, f"probe failed: {type(exc).__name__}: {exc}", ()
        out.append(TargetStatus(name, ok, reason, tuple(infos)))
    return out


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


#: which available target launches pick by default, best first: a GPU, then the compiled
#: CPU runtimes, then the reference emulator (always present)
PREFERENCE = ("cuda", "hip", "metal", "opencl", "sycl", "vulkan", "emulator")


def preferred_names() -> list[str]:
    """Names of the available targets, best first (:data:`PREFERENCE`, then any others)."""
    ok = [st.name for st in available_targets() if st.available]
    rank = {n: i for i, n in enumerate(PREFERENCE)}
    return sorted(ok, key=lambda n: rank.get(n, len(PREFERENCE)))


def default_target(**options: Any) -> Any:
    """The best available target (:func:`preferred_names`): CUDA when a GPU is present,
    else a CPU runtime, else the emulator."""
    return get_target(preferred_names()[0], **options)


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

class ProcessDevice:
    """A runtime's process-wide device, created on first use under a lock. A failure is
    remembered and raised again (as ``error``) on later calls, so probing an absent runtime
    stays cheap; :meth:`status` turns it into the ``(usable, reason)`` pair probes return."""

    def __init__(self, factory: Callable[[], Any], error: type[Exception], label: str) -> None:
        import threading

        self._factory, self._error, self._label = factory, error, label
        self._lock = threading.Lock()
        self._device: Any = None
        self._failure: str | None = None

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


# ----------------------------------------------------- targets driven by a conformance runner

class RunnerTarget:
    """A target whose driver is a runner ``runner(module, kernel, grid, workgroup, args, W)``
    on a device that offers several wave widths (the OpenCL and SYCL CPU runtimes).

    Subclasses set ``name`` and implement ``make_runner()``; the runner's ``dev`` describes
    the device (``name``, ``features.wave_widths``, ``capabilities()``, ``local_memory``,
    ``max_workgroup``, ``fp64``).

    ``wave_width=None`` (the default) applies :func:`default_wave_width`.

    Raises:
        ValueError: ``wave_width`` is not one the device offers.
    """

    name = ""

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
                               dev.max_workgroup, (dev.max_workgroup,) * 3, (2**31 - 1, 65535, 65535), details)

    def make_runner(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def launch(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any, *,
               sync: bool = True) -> LaunchResult:
        """Run ``kernel`` of ``module``; buffers in ``args`` (NumPy arrays, or this target's
        :class:`~anywave.runtime.arrays.Array`) are updated in place. With ``sync=False`` a
        launch whose buffers are all device arrays is only enqueued (see ``aw.synchronize``).
        Returns the :class:`LaunchResult` (which W ran)."""
        self.runner(module, kernel, grid, workgroup, args, self.info.wave_width, sync=sync)
        return LaunchResult(kernel, self.name, self.info.device, self.info.wave_width)

    @classmethod
    def register(cls, status: Callable[[], tuple[bool, str]]) -> None:
        """Register this target; ``status() -> (usable, reason)`` is its cheap probe."""

        def probe() -> tuple[bool, str, Sequence[TargetInfo]]:
            ok, why = status()
            if not ok:
                return False, why, ()
            return True, "", (cls().info,)

        register_target(cls.name, probe, cls)


# ------------------------------------------------------------------------ the emulator target

class EmulatorTarget:
    """The reference emulator as a target (every capability, the limits of
    :data:`anywave.emu.DEFAULT_LIMITS`, spec §11.3)."""

    def __init__(self, wave_width: int = DEFAULT_WAVE_WIDTH, check: bool = False) -> None:
        if wave_width not in LIMITS.wave_widths:
            raise LaunchConfigError(f"wave_width must be one of {LIMITS.wave_widths}, got {wave_width!r}")
        self.check = check
        caps = Capability.NONE
        for c in Capability.names().values():
            caps |= c
        from anywave.emu import DEFAULT_LIMITS

        wg = DEFAULT_LIMITS.max_workgroup_size
        self.info = TargetInfo("emulator", "anywave reference emulator (NumPy)", wave_width, caps,
                               DEFAULT_LIMITS.max_local_memory, wg, (wg, wg, wg),
                               (2**32 - 1, 2**32 - 1, 2**32 - 1))

    def launch(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any) -> Any:
        """Run ``kernel`` on the emulator (see :func:`anywave.emu.emulate`)."""
        from anywave.emu import emulate

        return emulate(module, kernel, grid=grid, workgroup=workgroup, args=args,
                       wave_width=self.info.wave_width, check=self.check)


def _emulator_probe() -> tuple[bool, str, Sequence[TargetInfo]]:
    return True, "", (EmulatorTarget().info,)


def _cuda_probe() -> tuple[bool, str, Sequence[TargetInfo]]:
    from anywave.runtime import cuda

    ok, reason = cuda.driver_status()
    if not ok:
        return False, reason, ()
    return True, "", tuple(d.target_info() for d in cuda.list_devices())


def _cuda_factory(**options: Any) -> Any:
    from anywave.runtime.cuda import CudaTarget

    return CudaTarget(**options)


register_target("emulator", _emulator_probe, EmulatorTarget)
register_target("cuda", _cuda_probe, _cuda_factory)


#: driver modules with a ``register()`` function, loaded on the registry's first use (not at
#: import time, so importing one of them first cannot see a half-initialised registry)
OPTIONAL_RUNTIMES = ("anywave.runtime.opencl", "anywave.runtime.sycl", "anywave.runtime.hip", "anywave.runtime.metal",
                     "anywave.runtime.vulkan")
_optional_loaded = False


def _load_optional_runtimes() -> None:
    # A missing optional dependency shows up later as an unavailable target with its
    # reason (from the module's own probe), not as an import error here.
    global _optional_loaded
    if _optional_loaded:
        return
    _optional_loaded = True
    import importlib

    for name in OPTIONAL_RUNTIMES:
        try:
            importlib.import_module(name).register()
        except ImportError:
            continue
