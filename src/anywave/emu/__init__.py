"""The vectorised reference emulator: the executable form of the WAVE spec.

``emulate(program, kernel, grid=..., workgroup=..., args=..., wave_width=32)`` runs a
kernel with NumPy arrays as buffers (zero-copy) and returns :class:`EmulationStats`;
``emulate_flat`` runs a reference-dialect (flat memory) kernel. See
:mod:`anywave.emu.machine` for the execution model.
"""

from anywave.emu.machine import DEFAULT_LIMITS, BudgetExceeded, EmulationStats, EmulatorLimits, emulate, emulate_flat
from anywave.errors import EmulationError

__all__ = ["DEFAULT_LIMITS", "BudgetExceeded", "EmulationError", "EmulationStats", "EmulatorLimits", "emulate",
           "emulate_flat"]
