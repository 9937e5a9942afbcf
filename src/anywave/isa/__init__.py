"""The WAVE instruction set as data: types, enumerations and the instruction table.

Besides the table (:mod:`anywave.isa.table`): :func:`lookup` / :func:`mnemonic` find a record
by what it computes (:mod:`anywave.isa.index`), :mod:`anywave.isa.semantics` gives the
identities and combine operations of reductions, scans and atomics, and
:mod:`anywave.isa.dispatch` is the consumers' dispatch with its completeness check.
"""

from anywave.isa.index import InstructionLookupError, lookup, mnemonic
from anywave.isa.table import (
    BY_MNEMONIC,
    BY_OPCODE,
    INSTRUCTIONS,
    Category,
    Determinism,
    Flag,
    InstrDef,
    Operand,
    Role,
)
from anywave.isa.types import (
    LIMITS,
    Access,
    ArgKind,
    Capability,
    MemoryOrder,
    ScalarType,
    Scope,
    SpecialRegister,
)

__all__ = [
    "BY_MNEMONIC", "BY_OPCODE", "INSTRUCTIONS", "LIMITS", "Access", "ArgKind", "Capability",
    "Category", "Determinism", "Flag", "InstrDef", "InstructionLookupError", "MemoryOrder", "Operand", "Role",
    "ScalarType", "Scope", "SpecialRegister", "lookup", "mnemonic",
]
