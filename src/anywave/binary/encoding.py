"""Instruction encoding: :class:`Instruction` <-> little-endian 32-bit words.

Layout (docs/spec.md, "Instruction encoding"), driven entirely by the instruction table:

* word 0: bits 0-15 opcode; bits 16-18 guard predicate index; bit 19 guard negated;
  bit 23 guard present; bits 20-22 and 24-31 are zero.
* then each operand in assembly order, in ``Operand.words`` words:

  =========== ===========================================================================
  kind        word(s)
  =========== ===========================================================================
  rd/rs/...   register index 0-254 (low register of a pair/quad) in bits 0-7, rest zero
  pd          predicate index 0-7
  ps          bits 0-2 predicate index, bit 3 negated, rest zero
  imm32       the 32 bits
  imm64       low word, then high word
  sreg        special-register number
  arg         argument index 0-65535
  daddr(64)   word A: bits 0-15 buffer argument index, bits 16-23 offset register;
              word B: immediate byte offset, two's-complement i32
  laddr       word A: offset register in bits 0-7; word B: immediate offset, i32
  scope/order enum value
  func        function index
  =========== ===========================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, OperandValue, Pred
from anywave.errors import BinaryFormatError
from anywave.isa.mma import MAX_FRAGMENTS
from anywave.isa.table import BY_OPCODE, Operand
from anywave.isa.types import LIMITS, MemoryOrder, Scope, SpecialRegister

GUARD_PRESENT = 1 << 23
GUARD_NEGATED = 1 << 19
_GUARD_INDEX_SHIFT = 16
_HEADER_RESERVED = ~(0xFFFF | GUARD_PRESENT | GUARD_NEGATED | (7 << _GUARD_INDEX_SHIFT)) & 0xFFFFFFFF
MAX_REG_INDEX = LIMITS.max_registers - 1  # 254


def _s32(word: int) -> int:
    return word - (1 << 32) if word & 0x80000000 else word


def encode_instruction(ins: Instruction) -> list[int]:
    """Encode one instruction to 32-bit words. Raises ValueError for operand values the
    encoding cannot hold (wrong count or type, out-of-range index)."""
    words: list[int] = []
    _encode_into(ins, words)
    return words


def _encode_into(ins: Instruction, words: list[int]) -> None:
    """Append the words of ``ins`` to ``words`` (the checks of :func:`encode_instruction`;
    on an error, words already appended for this instruction stay)."""
    d = ins.defn
    ops = ins.operands
    plan = _PLANS.get(id(d))
    if plan is None or plan[0] is not d:
        plan = _PLANS[id(d)] = (d, tuple((kind, _ENCODERS[kind]) for kind in d.operands))
    kinds = plan[1]
    if len(ops) != len(kinds):
        raise ValueError(f"{d.mnemonic} takes {len(d.operands)} operands, got {len(ops)}")
    head = d.opcode
    g = ins.guard
    if g is not None:
        if not 0 <= g.index < _NUM_PREDICATES:
            raise ValueError(f"guard predicate p{g.index} out of range "
                             f"p0-p{LIMITS.num_predicates - 1}")
        head |= GUARD_PRESENT | (g.index << _GUARD_INDEX_SHIFT)
        if g.negated:
            head |= GUARD_NEGATED
    words.append(head)
    for (kind, enc), value in zip(kinds, ops):  # noqa: B905 - lengths checked above
        enc(d.mnemonic, kind, value, words)


def _check(cond: bool, mnemonic: str, kind: Operand, value: object) -> None:
    if not cond:
        raise ValueError(f"{mnemonic}: operand value {value!r} is not a valid {kind.spelling} operand")


def _encode_operand(mn: str, kind: Operand, v: OperandValue) -> list[int]:
    """The words of one operand (ValueError if the encoding cannot hold it)."""
    out: list[int] = []
    _ENCODERS[kind](mn, kind, v, out)
    return out


# One encoder per operand kind: (mnemonic, kind, value, out) -> None, appending the operand's
# words to ``out`` or raising ValueError (looked up once per table record, see _PLANS).
_NUM_PREDICATES = LIMITS.num_predicates


def _reg_encoder(count: int):  # type: ignore[no-untyped-def]
    top = MAX_REG_INDEX - count + 1

    def enc(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
        if not (isinstance(v, int) and 0 <= v <= top):
            _check(False, mn, kind, v)
        out.append(int(v))  # type: ignore[arg-type]
    return enc


def _enc_pd(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, int) and 0 <= v < _NUM_PREDICATES):
        _check(False, mn, kind, v)
    out.append(int(v))  # type: ignore[arg-type]


def _enc_ps(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, Pred) and 0 <= v.index < _NUM_PREDICATES):
        _check(False, mn, kind, v)
    out.append(v.index | (8 if v.negated else 0))  # type: ignore[union-attr]


def _enc_imm32(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, int) and -(1 << 31) <= v < (1 << 32)):
        _check(False, mn, kind, v)
    out.append(int(v) & 0xFFFFFFFF)  # type: ignore[arg-type]


def _enc_imm64(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, int) and -(1 << 63) <= v < (1 << 64)):
        _check(False, mn, kind, v)
    u = int(v) & 0xFFFFFFFFFFFFFFFF  # type: ignore[arg-type]
    out.append(u & 0xFFFFFFFF)
    out.append(u >> 32)


def _enum_encoder(enum_type: type):  # type: ignore[no-untyped-def]
    def enc(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
        if not isinstance(v, enum_type):
            _check(False, mn, kind, v)
        out.append(int(v))  # type: ignore[arg-type]
    return enc


def _enc_index16(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, int) and 0 <= v <= 0xFFFF):
        _check(False, mn, kind, v)
    out.append(int(v))  # type: ignore[arg-type]


def _daddr_encoder(pair: int):  # type: ignore[no-untyped-def]
    top = MAX_REG_INDEX - pair + 1

    def enc(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
        if not (isinstance(v, DeviceAddr) and 0 <= v.buffer <= 0xFFFF and 0 <= v.reg <= top
                and -(1 << 31) <= v.offset < (1 << 31)):
            _check(False, mn, kind, v)
        out.append(v.buffer | (v.reg << 16))  # type: ignore[union-attr]
        out.append(v.offset & 0xFFFFFFFF)  # type: ignore[union-attr]
    return enc


def _enc_frag(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, int) and 0 <= v < MAX_FRAGMENTS):
        _check(False, mn, kind, v)
    out.append(int(v))  # type: ignore[arg-type]


def _enc_laddr(mn: str, kind: Operand, v: OperandValue, out: list[int]) -> None:
    if not (isinstance(v, LocalAddr) and 0 <= v.reg <= MAX_REG_INDEX and -(1 << 31) <= v.offset < (1 << 31)):
        _check(False, mn, kind, v)
    out.append(v.reg)  # type: ignore[union-attr]
    out.append(v.offset & 0xFFFFFFFF)  # type: ignore[union-attr]


def _encoder_for(kind: Operand):  # type: ignore[no-untyped-def]
    if kind.reg_count:
        return _reg_encoder(kind.reg_count)
    simple = {Operand.PD: _enc_pd, Operand.PS: _enc_ps, Operand.IMM32: _enc_imm32, Operand.IMM64: _enc_imm64,
              Operand.SREG: _enum_encoder(SpecialRegister), Operand.SCOPE: _enum_encoder(Scope),
              Operand.ORDER: _enum_encoder(MemoryOrder), Operand.ARG: _enc_index16, Operand.FUNC: _enc_index16,
              Operand.DADDR: _daddr_encoder(1), Operand.DADDR64: _daddr_encoder(2), Operand.FD: _enc_frag,
              Operand.FS: _enc_frag, Operand.LADDR: _enc_laddr}
    if kind not in simple:  # pragma: no cover - every kind has an encoder (checked at import)
        raise AssertionError(f"unhandled operand kind {kind}")
    return simple[kind]


_ENCODERS = {kind: _encoder_for(kind) for kind in Operand}
#: per table record (by id, the record kept to detect a reused id): its operand encoders
_PLANS: dict[int, tuple] = {}


def decode_instruction(words: Sequence[int], pos: int, base_offset: int = 0) -> tuple[Instruction, int]:
    """Decode the instruction starting at ``words[pos]``; return it and the next position.

    ``base_offset`` is the byte offset of ``words[0]`` in the file, used in error messages.
    Raises BinaryFormatError naming the byte offset for an unknown opcode, a truncated
    instruction, a set reserved bit or an out-of-range operand field.
    """
    where = base_offset + 4 * pos
    head = words[pos]
    opcode = head & 0xFFFF
    d = BY_OPCODE.get(opcode)
    if d is None:
        raise BinaryFormatError(f"unknown opcode {opcode:#06x}", where)
    if head & _HEADER_RESERVED:
        raise BinaryFormatError(f"{d.mnemonic}: reserved bits set in instruction word {head:#010x}", where)
    guard = None
    if head & GUARD_PRESENT:
        guard = Pred((head >> _GUARD_INDEX_SHIFT) & 7, bool(head & GUARD_NEGATED))
    elif head & (GUARD_NEGATED | (7 << _GUARD_INDEX_SHIFT)):
        raise BinaryFormatError(f"{d.mnemonic}: guard fields set without the guard-present bit", where)
    if pos + d.words > len(words):
        raise BinaryFormatError(f"{d.mnemonic}: instruction truncated (needs {d.words} words, "
                                f"{len(words) - pos} left)", where)
    p = pos + 1
    values: list[OperandValue] = []
    for kind in d.operands:
        chunk = words[p:p + kind.words]
        values.append(_decode_operand(d.mnemonic, kind, chunk, base_offset + 4 * p))
        p += kind.words
    return Instruction(d, tuple(values), guard), p


def _decode_operand(mn: str, kind: Operand, w: Sequence[int], where: int) -> OperandValue:
    def bad(what: str) -> BinaryFormatError:
        return BinaryFormatError(f"{mn}: invalid {kind.spelling} operand: {what}", where)

    a = w[0]
    if kind.reg_count:
        if a + kind.reg_count - 1 > MAX_REG_INDEX:
            raise bad(f"register index {a} (registers end at r{MAX_REG_INDEX})")
        return a
    if kind is Operand.PD:
        if a >= LIMITS.num_predicates:
            raise bad(f"predicate index {a}")
        return a
    if kind is Operand.PS:
        if a & ~0xF:
            raise bad(f"word {a:#x}")
        return Pred(a & 7, bool(a & 8))
    if kind is Operand.IMM32:
        return a
    if kind is Operand.IMM64:
        return a | (w[1] << 32)
    if kind in (Operand.SREG, Operand.SCOPE, Operand.ORDER):
        enum_type = {Operand.SREG: SpecialRegister, Operand.SCOPE: Scope, Operand.ORDER: MemoryOrder}[kind]
        try:
            return enum_type(a)
        except ValueError:
            raise bad(f"value {a}") from None
    if kind in (Operand.ARG, Operand.FUNC):
        if a > 0xFFFF:
            raise bad(f"index {a}")
        return a
    if kind in (Operand.DADDR, Operand.DADDR64):
        reg = (a >> 16) & 0xFF
        if a >> 24 or reg + (2 if kind is Operand.DADDR64 else 1) - 1 > MAX_REG_INDEX:
            raise bad(f"word {a:#010x}")
        return DeviceAddr(a & 0xFFFF, reg, _s32(w[1]))
    if kind in (Operand.FD, Operand.FS):
        if a >= MAX_FRAGMENTS:
            raise bad(f"fragment index {a} (fragments are f0..f{MAX_FRAGMENTS - 1})")
        return a
    if kind is Operand.LADDR:
        if a > MAX_REG_INDEX:
            raise bad(f"register index {a}")
        return LocalAddr(a, _s32(w[1]))
    raise AssertionError(f"unhandled operand kind {kind}")  # pragma: no cover


def encode_code(code: Sequence[Instruction]) -> list[int]:
    """Encode an instruction list to one word list."""
    out: list[int] = []
    for ins in code:
        _encode_into(ins, out)
    return out


def decode_code(words: Sequence[int], base_offset: int = 0) -> list[Instruction]:
    """Decode a whole word list; raises BinaryFormatError on the first bad instruction."""
    out: list[Instruction] = []
    pos = 0
    while pos < len(words):
        ins, pos = decode_instruction(words, pos, base_offset)
        out.append(ins)
    return out
