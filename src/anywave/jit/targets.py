"""Where compiled kernels launch: a thin view of the runtime's target registry
(:mod:`anywave.runtime.targets`), so the compiler, the demo, the torch ops and the CLI all
see the same targets, and the front door to their drivers.

Every launch reaches a driver through :meth:`Target.launch` (a compiled module's kernel by name:
the CLI's ``anywave run``, the conformance report's runners, the torch ops' CPU GEMM) or
through ``kernel(...)`` (:mod:`anywave.jit.launch`, which checks the kernel language's rules
first); both end in :func:`drive`, with the options of :func:`launch_options`. Each argument is
checked once, by one layer: through the module-level door the driver checks them against the ABI
(:meth:`anywave.runtime.driver.Driver.prepare`); ``kernel(...)`` checks them itself and hands
them to the driver's bound launch (:func:`bind`, :meth:`anywave.runtime.driver.Driver.bind`),
which checks only what does not depend on them, once per launch plan (the plan's later calls
then call the bound launch, or the driver's own plan launcher, directly).

``get_target(None)`` is the target named by the environment variable ``ANYWAVE_TARGET`` if
set, else the best available one (:func:`anywave.runtime.targets.preferred_names`: a GPU, then
the native ``cpu`` target, then a runtime whose device is the host CPU, then the reference
emulator). A ``kernel(...)`` launch that names no target takes :func:`default_name`: the same,
passing by a target that refuses that kernel (the cpu target and matrix fragments).

A launch that gives no ``wave_width`` runs at the one default rule
(:func:`anywave.runtime.targets.default_wave_width`: W = 32 wherever the target can run it).
Where a target cannot, a kernel that may depend on W (its kernel record lacks the
``w_invariant`` flag and its code observes W) gets a :class:`WaveWidthWarning` naming the
W it runs at, instead of a silently different W. Every launch returns an object with the
``wave_width`` that ran (:class:`anywave.runtime.targets.LaunchResult` or the emulator's
stats).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

from anywave.binary.module import w_invariant
from anywave.compiler import debugprint
from anywave.errors import LaunchError, WaveError
from anywave.runtime import targets as rt


class TargetError(WaveError, ValueError):
    """An unknown or unavailable target, or a wave width it cannot run."""


class WaveWidthWarning(UserWarning):
    """A W-dependent kernel launched without ``wave_width`` runs at a W other than the
    default (:data:`anywave.runtime.targets.DEFAULT_WAVE_WIDTH`) because the target cannot
    run the default; its results may differ from a launch at the default W."""


class Target:
    """A registered runtime target, created lazily once per wave width.

    Attributes:
        name: registry name (``emulator``, ``cuda``, ``opencl`` ...).
        wave_widths: the wave widths it can run (:attr:`~anywave.runtime.targets.TargetInfo.wave_widths`
            of its devices).
        host_memory: its buffers are host memory (:attr:`~anywave.runtime.targets.TargetInfo.host_memory`).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._instances: dict[int | None, Any] = {}
        status = rt.target_status(name)
        if status is None:
            raise TargetError(f"unknown target {name!r}; registered: {', '.join(rt.target_names())}")
        widths: set[int] = set()
        for info in status.infos:
            widths.update(info.wave_widths)
        self.wave_widths: tuple[int, ...] = tuple(sorted(widths))
        self.host_memory = bool(status.infos) and all(info.host_memory for info in status.infos)
        self.devices = max(1, len(status.infos))

    def _instance(self, wave_width: int | None, device: int | None = None) -> Any:
        return self.instance(wave_width, device)

    def instance(self, wave_width: int | None = None, device: int | None = None) -> Any:
        """The runtime target object for ``wave_width`` (None: the target's default) and
        ``device`` (an ordinal, for multi-device targets such as ``cuda``; None: 0).

        Raises:
            TargetError: a wave width the target does not run (the message lists those it does).
        """
        if wave_width is not None and wave_width not in self.wave_widths:
            raise TargetError(f"target {self.name!r} runs wave widths {list(self.wave_widths)}, not {wave_width}")
        if device is not None and not 0 <= device < self.devices:
            which = f"one device here: write {self.name!r} (or '{self.name}:0')" if self.devices == 1 else \
                f"{self.devices} devices here ({self.name}:0 .. {self.name}:{self.devices - 1})"
            raise TargetError(f"target {self.name!r} has no device {device}; it has {which}")
        # a target of one W makes one object; a target of several is made once per W asked for
        key = (wave_width if len(self.wave_widths) > 1 else None, device or None)
        inst = self._instances.get(key)
        if inst is None:
            options: dict[str, Any] = {"wave_width": key[0]} if key[0] is not None else {}
            if key[1] is not None:
                options["device"] = key[1]
            inst = self._instances[key] = rt.get_target(self.name, **options)
        return inst

    def launch(self, module: Any, kernel: str, *, grid: Any, workgroup: Any,
               args: Sequence[Any] | Mapping[str, Any], wave_width: int | None = None, device: int | None = None,
               check: bool | None = None, sync: bool = True, stream: Any = None, **options: Any) -> Any:
        """The front door of a launch of a compiled module's kernel: run ``kernel`` of ``module``
        on this target (buffers in ``args`` are updated in place).

        Args:
            module: a :class:`~anywave.binary.module.Module`.
            grid, workgroup: an int or 1-3 ints, checked by the driver with the one geometry
                parser (:func:`anywave.abi.dims3`).
            args: in ABI order, or by name. A kernel that prints (``aw.print``) gets its print
                buffer here when it is not given, and its lines are printed after the launch.
            wave_width: W (None: the target's default; see the module docs); device: the
                device ordinal of a multi-device target (``cuda``).
            check, sync, stream: see :func:`launch_options`; ``options``: the target's own
                (e.g. the emulator's ``budget=``, ``max_instructions=``, ``trace_lane=``).

        Returns the target's launch result, which has the ``wave_width`` that ran; warns
        (:class:`WaveWidthWarning`) when a kernel that may depend on W runs, without a given
        ``wave_width``, at another W than the default.

        Raises:
            TargetError: a wave width the target does not run; LaunchError: ``stream=`` for a
                target without streams, ``check=True`` for one without a checked build, a
                sequence of arguments of another length than the ABI's; and the driver's errors
                (arguments against the ABI, geometry, launch rules, the device's limits)."""
        k = module.kernel(kernel)
        inst = self.instance(wave_width, device)
        ran = inst.info.wave_width
        if wave_width is None:
            check_default_wave_width(self.name, module, k, ran)
        values = _by_name(k, args)
        # check=None stays None: the target resolves ANYWAVE_CHECK and its own default
        opts = launch_options(inst, self.name, f"kernel {kernel!r}", check=check,
                              stream=None if stream is None else _stream_of(inst, self.name, kernel, stream),
                              sync=sync)
        opts.update(options)
        res = drive(inst, module, k, grid, workgroup, values, opts)
        if getattr(res, "wave_width", None) is None:
            res = rt.LaunchResult(kernel, self.name, inst.info.device, ran)
        return res


def _by_name(k: Any, args: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
    """``args`` by ABI name: a mapping as given (the driver checks its names), a sequence in ABI
    order (the print buffer of a kernel that prints may be left out)."""
    ta = type(args)
    if ta is not list and ta is not tuple:
        if ta is dict or isinstance(args, Mapping):
            return dict(args)
        args = list(args)
    names = [a.name for a in k.args]
    if len(args) != len(names):
        if len(args) == len(names) - 1 and debugprint.has_prints(k):
            names.pop()
        else:
            raise LaunchError(f"kernel {k.name!r} takes {len(names)} arguments {names}, got {len(args)}")
    return dict(zip(names, args, strict=True))


def _stream_of(inst: Any, tname: str, kernel: str, stream: Any) -> int:
    if not getattr(inst, "streams", False):
        raise LaunchError(f"kernel {kernel!r}: stream= is for the cuda target, not {tname!r}")
    return int(inst.stream_handle(stream))


_ACCEPTS: dict[tuple[Any, str], bool] = {}


def _accepts(fn: Any, name: str) -> bool:
    """Whether ``fn`` (a target's ``launch``) takes keyword ``name``; by its signature, read once
    per function."""
    key = (getattr(fn, "__func__", fn), name)
    hit = _ACCEPTS.get(key)
    if hit is None:
        try:
            ps = inspect.signature(fn).parameters
            hit = name in ps or any(p.kind is p.VAR_KEYWORD for p in ps.values())
        except (TypeError, ValueError):
            hit = False
        if len(_ACCEPTS) < 256:
            _ACCEPTS[key] = hit
    return hit


def launch_options(inst: Any, tname: str, who: str, *, check: bool | None, stream: int | None,
                   sync: bool) -> dict[str, Any]:
    """The options of a runtime target's ``launch`` for one launch, decided in one place for every
    door: ``stream`` (the driver's handle; targets with streams, :attr:`Driver.streams
    <anywave.runtime.driver.Driver.streams>`; None: the default stream), ``sync`` (False: a launch whose
    buffers are all device memory may return before it ends; targets that take it), ``check``
    (True: the bounds-checked build, which always waits; False: the explicit opt-out of a
    target's checked default; None: the target's default).

    Raises:
        LaunchError: ``stream`` for a target without streams, ``check=True`` for a target
            without a bounds-checked build (``who`` names the kernel)."""
    options: dict[str, Any] = {}
    if getattr(inst, "streams", False):
        options = {"sync": sync} if stream is None else {"stream": stream, "sync": sync}  # None: the default stream
    elif stream is not None:
        raise LaunchError(f"{who}: stream= is for the cuda target, not {tname!r}")
    elif _accepts(inst.launch, "sync"):
        options = {"sync": sync}
    if check:
        if not _accepts(inst.launch, "check"):
            raise LaunchError(f"{who}: target {tname!r} has no bounds-checked mode (check=True / "
                              "ANYWAVE_CHECK=1)")
        options["check"] = True
        if "sync" in options:
            options["sync"] = True  # a checked launch reports its errors at once, not at the next wait
    elif check is False and getattr(inst, "check_default", False):
        options["check"] = False  # the explicit opt-out of a target's checked default
    return options


def bind(inst: Any, module: Any, k: Any, grid: Any, workgroup: Any, options: dict[str, Any]) -> Any:
    """The runtime target's bound launch of ``k`` with this geometry and ``options``
    (:func:`launch_options`): its ``bind`` (:meth:`anywave.runtime.driver.Driver.bind`,
    :meth:`anywave.runtime.targets.RunnerTarget.bind`, the emulator's and CUDA's), which does
    now every check of the launch that does not depend on its arguments and takes, per call,
    arguments in ABI order that the caller has checked. None for a target without one (its
    ``launch`` checks the arguments again). A kernel that prints is bound to wait (its print
    buffer, added by :func:`drive`, is read after the launch).

    Raises:
        the driver's errors of the kernel, geometry and device (not of the arguments)."""
    b = getattr(inst, "bind", None)
    if b is None:
        return None
    if "sync" in options and debugprint.has_prints(k):
        options["sync"] = True
    return b(module, k.name, grid, workgroup, **options)


def drive(inst: Any, module: Any, k: Any, grid: Any, workgroup: Any, values: dict[str, Any],
          options: dict[str, Any], bound: Any = None) -> Any:
    """Launch ``k`` of ``module`` on the runtime target ``inst`` with ``values`` by ABI name and
    ``options`` (:func:`launch_options`): the one call from the launch layer into a driver. A
    kernel that prints (``aw.print``) and was given no print buffer gets a fresh one (the launch
    then waits) and its lines are printed after the launch. Returns the target's result.

    ``bound``: the target's bound launch (:func:`bind`) when the caller has checked ``values``
    itself (the kernel call): the driver then takes them as they are, without checking them again
    (each argument is checked once, by one layer). Without it the driver's ``launch`` checks
    every argument (the module-level door)."""
    pbuf = None
    if debugprint.has_prints(k) and k.args[-1].name not in values:
        pbuf = values[k.args[-1].name] = debugprint.new_buffer()
        if "sync" in options:
            options["sync"] = True
    try:
        if bound is not None:
            res = bound([values[a.name] for a in k.args])
        else:
            res = inst.launch(module, k.name, grid, workgroup, values, **options)
    except Exception as e:
        if pbuf is not None:
            # a failed launch (a divergent barrier after a failed assert, an out-of-bounds access):
            # the records the threads wrote before it (an assert's message) are printed as a
            # completed launch prints them, then the error goes on
            try:
                lines = debugprint.flush(k, pbuf)
            except Exception:  # noqa: BLE001 - a buffer the failed launch left unreadable: its error wins
                lines = None
            if lines and hasattr(e, "add_note"):
                e.add_note(f"(the kernel printed {len(lines)} line(s) before the error: see its output above)")
        raise
    if pbuf is not None:
        debugprint.flush(k, pbuf)
    return res


def check_default_wave_width(target: str, module: Any, k: Any, ran: int) -> None:
    """Warn (:class:`WaveWidthWarning`) when kernel ``k``, which may depend on W, runs at
    ``ran`` != the default W because the launch gave none and ``target`` cannot run it."""
    if ran != rt.DEFAULT_WAVE_WIDTH and not w_invariant(module, k):
        import warnings

        warnings.warn(f"kernel {k.name!r} may depend on the wave width and target {target!r} cannot run the "
                      f"default W = {rt.DEFAULT_WAVE_WIDTH}; it runs at W = {ran} (pass wave_width={ran} to "
                      "accept, or choose another target)", WaveWidthWarning, stacklevel=5)


_CACHE: dict[str, Target] = {}


def available_targets() -> list[str]:
    """Names of the available targets, best first."""
    return rt.preferred_names()


def default_name(module: Any, kernel: Any, workgroup: Sequence[int] | None = None) -> str:
    """Where a launch of ``kernel`` (of ``module``, at ``workgroup`` threads) that names no target
    runs: ``ANYWAVE_TARGET`` if set, else the best available target that does not refuse the
    kernel (:func:`anywave.runtime.targets.serving_name`)."""
    env = os.environ.get("ANYWAVE_TARGET")
    if env == rt.HOST:
        return rt.serving_name(module, kernel, host=True, workgroup=workgroup)
    return env or rt.serving_name(module, kernel, workgroup=workgroup)


def get_target(name: str | None) -> Target:
    """The named target, or the best available one when ``name`` is None.

    Raises:
        TargetError: unknown or unavailable here (the message lists what is available).
    """
    if name is None:
        name = os.environ.get("ANYWAVE_TARGET") or available_targets()[0]
    if name == rt.HOST:  # the best target on the host CPU (a launch picks it per kernel: default_name)
        name = rt.host_names()[0]
    # a named target: its own probe only (a launch's full path comes here; probing every
    # runtime, HIP's import attempt and CUDA's device queries included, cost ~0.2 ms a call)
    st = rt.target_status(name)
    if st is None or not st.available:
        avail = available_targets()
        known = rt.target_names()
        what = (f"unknown target {name!r}" if name not in known else
                f"target {name!r} is not available here ({st.reason})" if st is not None and st.reason else
                f"target {name!r} is not available on this machine")
        raise TargetError(f"{what}; available: {', '.join(avail)} (registered: {', '.join(known)}); or "
                          f"{rt.HOST!r}: the best of them on this machine's CPU")
    if name not in _CACHE:
        _CACHE[name] = Target(name)
    return _CACHE[name]


register_target = rt.register_target
