"""Which kernels can observe the wave width W (docs/spec.md §2.4, §14.3).

The frontend notes every use of an intrinsic in :data:`W_DEPENDENT_INTRINSICS` outside the
W-invariant library collectives (functions marked with :func:`w_invariant`, whose results
the spec defines independently of W, §8.15). A kernel with no such use gets
``KERNEL_FLAG_W_INVARIANT`` in its kernel record; checks then compare its outputs across
all W, and a kernel without the flag only at equal W.
"""

from __future__ import annotations

from typing import Any

#: intrinsics whose value (or effect) depends on W: the W-dependent special registers, every
#: wave operation (they combine the lanes of a wave, whose membership depends on W), ``mma``
#: (executed by a wave as a whole) and ``wave_barrier`` (it orders the lanes of one wave)
W_DEPENDENT_INTRINSICS = frozenset({
    "lane_id", "wave_id", "wave_width", "num_waves",
    "wave_shfl", "wave_shfl_up", "wave_shfl_down", "wave_shfl_xor", "wave_broadcast",
    "wave_ballot", "wave_any", "wave_all", "wave_sum", "wave_min", "wave_max", "wave_and", "wave_or",
    "wave_xor", "wave_prefix_sum", "mma", "wave_barrier",
})


def w_invariant(f: Any) -> Any:
    """Mark an ``@aw.func`` as W-invariant: its result is the same at every W although it
    uses W-dependent intrinsics internally (the library collectives). Returns ``f``."""
    f.w_invariant = True
    return f
