"""A tiny registry of launch targets. The emulator is always present; backends (PTX,
OpenCL ...) join with :func:`register_target` as their issues land.

A target has ``name``, ``priority`` (the highest available one is the default),
``available() -> bool`` and ``launch(module, kernel, grid=, workgroup=, args=, wave_width=)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from anywave.errors import WaveError


class Target(Protocol):
    name: str
    priority: int

    def available(self) -> bool: ...

    def launch(self, module: Any, kernel: str, *, grid: tuple[int, int, int], workgroup: tuple[int, int, int],
               args: Sequence[Any], wave_width: int | None = None) -> Any: ...


class TargetError(WaveError, ValueError):
    """An unknown or unavailable target."""


class EmulatorTarget:
    """The reference emulator (:func:`anywave.emu.emulate`). ``wave_width`` defaults to 32,
    the emulator's own default; pass 8, 16, 32 or 64."""

    name = "emulator"
    priority = 0
    default_wave_width = 32

    def available(self) -> bool:
        return True

    def launch(self, module: Any, kernel: str, *, grid: tuple[int, int, int], workgroup: tuple[int, int, int],
               args: Sequence[Any], wave_width: int | None = None) -> Any:
        from anywave.emu import emulate

        return emulate(module, kernel, grid=grid, workgroup=workgroup, args=list(args),
                       wave_width=wave_width or self.default_wave_width)


TARGETS: dict[str, Target] = {"emulator": EmulatorTarget()}


def register_target(target: Target) -> None:
    """Add (or replace) a target by its ``name``."""
    TARGETS[target.name] = target


def available_targets() -> list[str]:
    """Names of the available targets, best first."""
    return [t.name for t in sorted(TARGETS.values(), key=lambda t: -t.priority) if t.available()]


def get_target(name: str | None) -> Target:
    """The named target, or the best available one when ``name`` is None."""
    if name is None:
        return TARGETS[available_targets()[0]]
    t = TARGETS.get(name)
    if t is None:
        raise TargetError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}")
    if not t.available():
        raise TargetError(f"target {name!r} is not available on this machine; available: "
                          f"{', '.join(available_targets())}")
    return t
