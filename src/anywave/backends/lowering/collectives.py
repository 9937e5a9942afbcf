"""Wave reductions and scans as step lists: the order the spec fixes, written once.

Spec §8.8 fixes the combination order of ``wred`` (a butterfly: at step ``k`` every lane
combines its value with lane ``lane ^ k``'s, ``k = 1, 2, 4, ..., W/2``) and of ``wscan``
(Kogge–Stone: at step ``k`` a lane ``>= k`` combines lane ``lane - k``'s partial on the left
with its own); inactive lanes contribute the operation's identity. The order matters only for
f32, but one order for every type keeps the backends simple. Backends never call a vendor
reduce/scan (whose order is unspecified).

Identities are bit patterns of the 32-bit register (``-0.0`` for f32 ``add``, the canonical
NaN for f32 ``min``/``max``: minimumNumber/maximumNumber ignore a NaN operand).
"""

from __future__ import annotations

from anywave.isa.types import ScalarType

T = ScalarType


def butterfly_steps(wave_width: int) -> tuple[int, ...]:
    """The partner distances of a butterfly reduction over ``wave_width`` lanes, in order:
    ``(1, 2, 4, ..., W/2)`` (step ``k`` combines ``lane`` with ``lane ^ k``)."""
    return tuple(1 << i for i in range(max(wave_width, 1).bit_length() - 1))


def kogge_stone_steps(wave_width: int) -> tuple[int, ...]:
    """The distances of a Kogge–Stone inclusive scan over ``wave_width`` lanes, in order:
    ``(1, 2, 4, ..., W/2)`` (step ``k``: lanes ``>= k`` compute ``s[lane - k] + s[lane]``)."""
    return butterfly_steps(wave_width)


#: (op, type) -> identity bits of ``wred.<op>.<type>`` (what an inactive lane contributes)
REDUCTION_IDENTITY: dict[tuple[str, ScalarType], int] = {
    ("add", T.I32): 0, ("add", T.U32): 0, ("add", T.F32): 0x80000000,
    ("min", T.I32): 0x7FFFFFFF, ("min", T.U32): 0xFFFFFFFF, ("min", T.F32): 0x7FC00000,
    ("max", T.I32): 0x80000000, ("max", T.U32): 0, ("max", T.F32): 0x7FC00000,
    ("and", T.B32): 0xFFFFFFFF, ("or", T.B32): 0, ("xor", T.B32): 0,
}


def reduction_identity(op: str, t: ScalarType) -> int:
    """Identity bits of ``wred.<op>.<t>``. Raises KeyError for a pair the ISA does not have."""
    return REDUCTION_IDENTITY[(op, t)]


def scan_identity(t: ScalarType) -> int:
    """Identity bits of ``wscan.<variant>.<t>`` (an add): ``-0.0`` for f32, else 0."""
    return 0x80000000 if t is T.F32 else 0


def exclusive_first(t: ScalarType) -> int:
    """What lane 0 gets from an exclusive scan: ``+0.0`` for f32, else 0 (spec §8.8)."""
    return 0
