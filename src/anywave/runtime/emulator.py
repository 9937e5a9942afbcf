"""The reference emulator as an execution target (registered as ``emulator``; always present).

Kept apart from the registry (:mod:`anywave.runtime.targets`), which knows no target by name:
this module registers itself like every other runtime (:func:`register`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anywave.errors import LaunchConfigError
from anywave.isa.types import LIMITS, Capability
from anywave.runtime.targets import DEFAULT_WAVE_WIDTH, TargetInfo, register_target


class EmulatorTarget:
    """The reference emulator as a target (every capability, every wave width of
    ``LIMITS.wave_widths``, the limits of :data:`anywave.emu.DEFAULT_LIMITS`, host memory;
    spec §11.3).

    Raises:
        LaunchConfigError: ``wave_width`` is not one of ``LIMITS.wave_widths``.
    """

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
                               (2**32 - 1, 2**32 - 1, 2**32 - 1), wave_widths=tuple(LIMITS.wave_widths),
                               host_memory=True)

    def launch(self, module: Any, kernel: str, grid: Any, workgroup: Any, args: Any, *,
               check: bool | None = None, budget: float | None | str = "default",
               max_instructions: int | None = None, trace_lane: int | None = None) -> Any:
        """Run ``kernel`` on the emulator (see :func:`anywave.emu.emulate`).

        ``check``: the emulator's checked mode (race and uninitialised-local-memory detection;
        out-of-bounds accesses are always reported); None: the target's ``check``.
        ``budget``: wall-clock seconds one loop may run before
        :class:`~anywave.emu.machine.BudgetExceeded` (None: unbounded; default 10 s or
        ``ANYWAVE_EMU_BUDGET``; depends on the machine's speed and load).
        ``max_instructions``: the launch's bound in wave-instructions issued, a count of work
        independent of the machine (None: unbounded); see :func:`anywave.emu.emulate`.
        ``trace_lane``: record the register changes of this global thread number (the stats'
        ``trace``)."""
        from anywave.emu import emulate

        return emulate(module, kernel, grid=grid, workgroup=workgroup, args=args,
                       wave_width=self.info.wave_width, check=self.check if check is None else bool(check),
                       budget=budget, max_instructions=max_instructions, trace_lane=trace_lane)

    def bind(self, module: Any, kernel: str, grid: Any, workgroup: Any, *, check: bool | None = None,
             budget: float | None | str = "default", max_instructions: int | None = None,
             trace_lane: int | None = None) -> Any:
        """The launch of ``kernel`` with this geometry and these options (see :meth:`launch`),
        checked now except for its arguments, for a caller that checks them itself (the kernel
        language's launch plans): ``bound(values)`` runs it with ``values`` in ABI order, checked
        (:meth:`anywave.emu.machine.PreparedLaunch.run_checked`), and returns the stats.

        Raises:
            what :meth:`launch` raises before it reads the arguments."""
        from anywave.emu.machine import PreparedLaunch

        prep = PreparedLaunch(module, kernel, grid=grid, workgroup=workgroup, wave_width=self.info.wave_width,
                              check=self.check if check is None else bool(check), budget=budget,
                              max_instructions=max_instructions)
        prep.check_trace_lane(trace_lane)
        run = prep.run_checked

        def bound(values: Any) -> Any:
            return run(values, trace_lane)

        bound.prepared = prep  # type: ignore[attr-defined]
        return bound


def _probe() -> tuple[bool, str, Sequence[TargetInfo]]:
    return True, "", (EmulatorTarget().info,)


def register() -> None:
    """Register the ``emulator`` target with :mod:`anywave.runtime.targets`."""
    register_target("emulator", _probe, EmulatorTarget)
