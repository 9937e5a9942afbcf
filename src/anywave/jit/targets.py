"""Where compiled kernels launch: a thin view of the runtime's target registry
(:mod:`anywave.runtime.targets`), so the compiler, the demo, the torch ops and the CLI all
see the same targets.

``get_target(None)`` is the target named by the environment variable ``ANYWAVE_TARGET`` if
set, else the best available one (:data:`anywave.runtime.targets.PREFERENCE`: a GPU, then a
compiled CPU runtime, then the reference emulator).

A launch that gives no ``wave_width`` runs at the one default rule
(:func:`anywave.runtime.targets.default_wave_width`: W = 32 wherever the target can run it).
Where a target cannot, a kernel that may depend on W (its kernel record lacks the
``w_invariant`` flag and its code observes W) gets a :class:`WaveWidthWarning` naming the
W it runs at, instead of a silently different W. Every launch returns an object with the
``wave_width`` that ran (:class:`anywave.runtime.targets.LaunchResult` or the emulator's
stats).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from anywave.binary.module import w_invariant
from anywave.errors import WaveError
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
        # a target of one W makes one object; a target of several is made once per W asked for
        key = (wave_width if len(self.wave_widths) > 1 else None, device or None)
        inst = self._instances.get(key)
        if inst is None:
            options: dict[str, Any] = {"wave_width": key[0]} if key[0] is not None else {}
            if key[1] is not None:
                options["device"] = key[1]
            inst = self._instances[key] = rt.get_target(self.name, **options)
        return inst

    def launch(self, module: Any, kernel: str, *, grid: tuple[int, int, int], workgroup: tuple[int, int, int],
               args: Sequence[Any], wave_width: int | None = None, **options: Any) -> Any:
        """Run ``kernel`` of ``module`` (buffers in ``args`` are updated in place); ``options``
        (``stream=``, ``sync=``, ``check=``) go to the runtime target's ``launch``. Returns the
        target's launch result, which has the ``wave_width`` that ran; warns
        (:class:`WaveWidthWarning`) when a kernel that may depend on W runs, without a given
        ``wave_width``, at another W than the default."""
        k = module.kernel(kernel)
        names = [a.name for a in k.args]
        inst = self.instance(wave_width)
        ran = inst.info.wave_width
        if wave_width is None:
            check_default_wave_width(self.name, module, k, ran)
        res = inst.launch(module, kernel, grid, workgroup, dict(zip(names, args, strict=True)), **options)
        if getattr(res, "wave_width", None) is None:
            res = rt.LaunchResult(kernel, self.name, inst.info.device, ran)
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


def get_target(name: str | None) -> Target:
    """The named target, or the best available one when ``name`` is None.

    Raises:
        TargetError: unknown or unavailable here (the message lists what is available).
    """
    if name is None:
        name = os.environ.get("ANYWAVE_TARGET") or available_targets()[0]
    # a named target: its own probe only (a launch's full path comes here; probing every
    # runtime, HIP's import attempt and CUDA's device queries included, cost ~0.2 ms a call)
    st = rt.target_status(name)
    if st is None or not st.available:
        avail = available_targets()
        known = rt.target_names()
        what = (f"unknown target {name!r}" if name not in known else
                f"target {name!r} is not available here ({st.reason})" if st is not None and st.reason else
                f"target {name!r} is not available on this machine")
        raise TargetError(f"{what}; available: {', '.join(avail)} (registered: {', '.join(known)})")
    if name not in _CACHE:
        _CACHE[name] = Target(name)
    return _CACHE[name]


register_target = rt.register_target
