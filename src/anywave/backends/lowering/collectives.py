"""Wave reductions and scans as step lists: the order the spec fixes, written once.

Spec §8.8 fixes the combination order of ``wred`` (a butterfly: at step ``k`` every lane
combines its value with lane ``lane ^ k``'s, ``k = 1, 2, 4, ..., W/2``) and of ``wscan``
(Kogge–Stone: at step ``k`` a lane ``>= k`` combines lane ``lane - k``'s partial on the left
with its own); inactive lanes contribute the operation's identity. The order matters only for
f32, but one order for every type keeps the backends simple. Backends never call a vendor
reduce/scan (whose order is unspecified).

The identities inactive lanes contribute, and what lane 0 of an exclusive scan receives, are
facts of the table: :func:`anywave.isa.semantics.identity` and
:func:`~anywave.isa.semantics.exclusive_first` (re-exported here), read from the record.
"""

from __future__ import annotations

from anywave.isa.semantics import exclusive_first, identity

__all__ = ["butterfly_steps", "exclusive_first", "identity", "kogge_stone_steps"]


def butterfly_steps(wave_width: int) -> tuple[int, ...]:
    """The partner distances of a butterfly reduction over ``wave_width`` lanes, in order:
    ``(1, 2, 4, ..., W/2)`` (step ``k`` combines ``lane`` with ``lane ^ k``)."""
    return tuple(1 << i for i in range(max(wave_width, 1).bit_length() - 1))


def kogge_stone_steps(wave_width: int) -> tuple[int, ...]:
    """The distances of a Kogge–Stone inclusive scan over ``wave_width`` lanes, in order:
    ``(1, 2, 4, ..., W/2)`` (step ``k``: lanes ``>= k`` compute ``s[lane - k] + s[lane]``)."""
    return butterfly_steps(wave_width)
