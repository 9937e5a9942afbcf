"""Invariants of the instruction table and the instruction encoding."""

from __future__ import annotations

import pytest

from anywave.binary.encoding import decode_code, decode_instruction, encode_instruction
from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.errors import BinaryFormatError
from anywave.isa.table import BY_OPCODE, INSTRUCTIONS, Category, Flag, Operand
from anywave.isa.types import Capability, MemoryOrder, ScalarType, Scope, SpecialRegister


def _sample_operand(kind: Operand, i: int):
    """A valid, non-trivial operand value of ``kind``; varies with i so fields are exercised."""
    reg = 3 + 7 * i % 200
    return {
        Operand.RD: reg, Operand.RS: reg + 1, Operand.RD64: reg, Operand.RS64: reg + 2,
        Operand.RD128: reg, Operand.RS128: reg + 4, Operand.PD: i % 8,
        Operand.PS: Pred(i % 8, bool(i % 2)), Operand.IMM32: (0x9E3779B9 * (i + 1)) & 0xFFFFFFFF,
        Operand.IMM64: (0x9E3779B97F4A7C15 * (i + 1)) & (2**64 - 1),
        Operand.SREG: SpecialRegister(i % len(SpecialRegister)), Operand.ARG: i % 5,
        Operand.DADDR: DeviceAddr(i % 4, reg, -4 * i), Operand.DADDR64: DeviceAddr(i % 4, reg, 8 * i),
        Operand.LADDR: LocalAddr(reg, 16 * i - 8), Operand.SCOPE: Scope(i % 4),
        Operand.ORDER: MemoryOrder(i % 5), Operand.FUNC: i % 3,
        Operand.FD: i % 32, Operand.FS: (i + 7) % 32,
    }[kind]


def test_mnemonics_and_opcodes_unique():
    assert len({d.mnemonic for d in INSTRUCTIONS}) == len(INSTRUCTIONS)
    assert len({d.opcode for d in INSTRUCTIONS}) == len(INSTRUCTIONS)


def test_opcode_scheme_is_category_and_dense_index():
    by_cat: dict[Category, list[int]] = {}
    for d in INSTRUCTIONS:
        assert d.opcode >> 8 == int(d.category)
        by_cat.setdefault(d.category, []).append(d.opcode & 0xFF)
    for indices in by_cat.values():
        assert indices == list(range(len(indices)))


def test_every_category_present():
    assert {d.category for d in INSTRUCTIONS} == set(Category)


@pytest.mark.parametrize("defn", INSTRUCTIONS, ids=lambda d: d.mnemonic)
def test_every_entry_encodes_and_decodes(defn):
    for i in range(3):
        ops = tuple(_sample_operand(k, i + defn.opcode) for k in defn.operands)
        guard = None if Flag.NO_GUARD in defn.flags else Pred(i % 8, i == 1)
        ins = Instruction(defn, ops, guard)
        words = encode_instruction(ins)
        assert len(words) == defn.words
        assert all(0 <= w < 2**32 for w in words)
        back, end = decode_instruction(words, 0)
        assert end == len(words)
        assert back == ins
        assert back.defn is defn


def test_capabilities_follow_types():
    for d in INSTRUCTIONS:
        types = {d.type, d.src_type}
        if types & {ScalarType.F64}:
            assert d.capability & Capability.F64, d.mnemonic
        if types & {ScalarType.F16, ScalarType.F16X2}:
            assert d.capability & Capability.F16, d.mnemonic
        if d.category is Category.WAVE:
            assert d.capability & Capability.WAVE_OPS, d.mnemonic


def test_unknown_opcode_and_truncation_are_format_errors():
    free = next(op for op in range(0x0100, 0x10000) if op not in BY_OPCODE)
    with pytest.raises(BinaryFormatError, match="unknown opcode"):
        decode_code([free])
    words = encode_instruction(Instruction.make("add.i32", 1, 2, 3))
    with pytest.raises(BinaryFormatError, match="truncated"):
        decode_code(words[:-1])
    with pytest.raises(BinaryFormatError, match="reserved"):
        decode_code([words[0] | (1 << 30)] + words[1:])
    with pytest.raises(BinaryFormatError, match="register index"):
        decode_code([words[0], 255, 0, 0])


def test_encode_rejects_bad_operands():
    with pytest.raises(ValueError, match="operands"):
        encode_instruction(Instruction.make("add.i32", 1, 2))
    with pytest.raises(ValueError, match="not a valid rd64"):
        encode_instruction(Instruction.make("mov.b64", 254, 0))
