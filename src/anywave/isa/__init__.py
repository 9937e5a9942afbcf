"""The WAVE instruction set as data: types, enumerations and the instruction table."""

from anywave.isa.table import BY_MNEMONIC, BY_OPCODE, INSTRUCTIONS, Category, Determinism, Flag, InstrDef, Operand
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
    "Category", "Determinism", "Flag", "InstrDef", "MemoryOrder", "Operand", "ScalarType", "Scope",
    "SpecialRegister",
]
