"""Operand spellings of the ``.wave`` text, one parser per operand kind of the instruction
table (:class:`anywave.isa.table.Operand`), and unresolved name references.

Names (kernel arguments, functions) cannot be resolved while a line is read — a function
may be defined after its first call and a ``.func`` body learns its arguments from the
kernels that call it — so the parsers return :class:`ArgRef`/:class:`FuncRef`
placeholders that :mod:`anywave.asm.assembler` replaces with indices once the whole file
has been read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from anywave.asm.floats import FloatLiteralError, decimal_to_bits, is_decimal_literal
from anywave.asm.syntax import (
    IDENT,
    INT_RE,
    Line,
    Token,
    check_literal_length,
    did_you_mean,
    parse_int,
    small_int,
)
from anywave.binary.module import DeviceAddr, LocalAddr, Pred
from anywave.isa.mma import MAX_FRAGMENTS
from anywave.isa.table import InstrDef, Operand
from anywave.isa.types import LIMITS, MemoryOrder, ScalarType, Scope, SpecialRegister

MAX_REG = LIMITS.max_registers - 1
NUM_PREDS = LIMITS.num_predicates

_REG = re.compile(r"r(\d+)")
_REG_RANGE = re.compile(r"r(\d+)\s*:\s*r(\d+)")
_PRED = re.compile(r"(!?)\s*p(\d+)")
_RAW_INDEX = re.compile(r"\$(\d+)")
_DADDR = re.compile(rf"(\$\d+|{IDENT})\s*\[\s*(r\d+(?:\s*:\s*r\d+)?)\s*(?:([+-])\s*(\S+?))?\s*\]")
_LADDR = re.compile(r"\[\s*(r\d+)\s*(?:([+-])\s*(\S+?))?\s*\]")

SREG_NAMES: dict[str, SpecialRegister] = {s.spelling: s for s in SpecialRegister}
SCOPE_NAMES: dict[str, Scope] = {s.spelling: s for s in Scope}
ORDER_NAMES: dict[str, MemoryOrder] = {o.spelling: o for o in MemoryOrder}


@dataclass(frozen=True)
class ArgRef:
    """A kernel argument named in the text; ``buffer`` says which kind the operand needs."""

    name: str
    buffer: bool
    line: Line
    tok: Token


@dataclass(frozen=True)
class FuncRef:
    """A function named by ``call``."""

    name: str
    line: Line
    tok: Token


@dataclass(frozen=True)
class PendingDeviceAddr:
    """A device address whose buffer is still a name (or a raw ``$N`` index)."""

    arg: ArgRef | int
    reg: int
    offset: int


class OperandParser:
    """Parses one operand token of a given kind.

    ``lenient`` selects the reference dialect's spellings on top of the native ones: a
    plain ``rN`` for a register pair/quad (its low register), a plain ``rN`` for a device
    address (``memory[rN]``, buffer argument ``flat_buffer``) or a local address
    (``[rN]``), and scopes without the leading dot.
    """

    def __init__(self, lenient: bool = False, flat_buffer: int = 0) -> None:
        self.lenient = lenient
        self.flat_buffer = flat_buffer

    # -- registers and predicates ---------------------------------------------------------
    def reg(self, line: Line, tok: Token, count: int = 1, text: str | None = None) -> int:
        """``rN`` (count 1), ``rN:rN+1`` (2) or ``rN:rN+3`` (4); returns N."""
        s = tok.text if text is None else text
        if count == 1:
            m = _REG.fullmatch(s)
            if m is None or small_int(m.group(1)) > MAX_REG:
                raise line.error_at(f"expected a register r0-r{MAX_REG}, got {s!r}", tok)
            return small_int(m.group(1))
        what = "pair rN:rN+1" if count == 2 else "quad rN:rN+3"
        m = _REG_RANGE.fullmatch(s)
        if m is None:
            single = _REG.fullmatch(s)
            if single is not None and self.lenient:
                lo = small_int(single.group(1))
                if lo + count - 1 > MAX_REG:
                    raise line.error_at(f"register {what} starting at r{lo} runs past r{MAX_REG}", tok)
                return lo
            raise line.error_at(f"expected a register {what} (e.g. r4:r{3 + count}), got {s!r}", tok)
        lo, hi = small_int(m.group(1)), small_int(m.group(2))
        if hi != lo + count - 1:
            raise line.error_at(f"expected a register {what}: after r{lo} comes r{lo + count - 1}, "
                                f"got {s!r}", tok)
        if hi > MAX_REG:
            raise line.error_at(f"register {what} {s!r} runs past r{MAX_REG}", tok)
        return lo

    def pred_dest(self, line: Line, tok: Token) -> int:
        m = _PRED.fullmatch(tok.text)
        if m is None or m.group(1) or small_int(m.group(2)) >= NUM_PREDS:
            raise line.error_at(f"expected a destination predicate p0-p{NUM_PREDS - 1}, "
                                f"got {tok.text!r}", tok)
        return small_int(m.group(2))

    def pred(self, line: Line, tok: Token) -> Pred:
        m = _PRED.fullmatch(tok.text)
        if m is None or small_int(m.group(2)) >= NUM_PREDS:
            raise line.error_at(f"expected a predicate p0-p{NUM_PREDS - 1} or !p0-!p{NUM_PREDS - 1}, "
                                f"got {tok.text!r}", tok)
        return Pred(small_int(m.group(2)), bool(m.group(1)))

    # -- immediates --------------------------------------------------------------------------
    def imm(self, line: Line, tok: Token, t: ScalarType, words: int) -> int:
        """An immediate read as type ``t``; returns the unsigned bit pattern."""
        width = 32 * words
        text = tok.text
        check_literal_length(line, tok, f"{t.spelling} literal")
        if t.is_float:
            if text[:2].lower() == "0x":
                # raw bits: at most the type's width (4 hex digits for f16/bf16, spec §13.4)
                digits = t.bits // 4
                if len(text) - 2 > digits:
                    raise line.error_at(f"raw {t.spelling} bits take at most {digits} hex digits "
                                        f"(the type is {t.bits} bits wide), got {text!r}", tok)
                return parse_int(line, tok, f"raw {t.spelling} bits", 0, (1 << t.bits) - 1)
            if not (is_decimal_literal(text) or text.lower() in ("inf", "+inf", "-inf", "nan")):
                raise line.error_at(f"expected a {t.spelling} literal (decimal such as 1.5 or -2e-3, "
                                    f"inf, -inf, nan, or raw bits 0x...), got {text!r}", tok)
            try:
                return decimal_to_bits(text, t)
            except FloatLiteralError as exc:
                raise line.error_at(str(exc), tok) from None
        if INT_RE.fullmatch(text) is None:
            raise line.error_at(f"expected an integer immediate for type {t.spelling} "
                                f"(decimal or 0x hex), got {text!r}", tok)
        value = parse_int(line, tok, f"a {width}-bit immediate", -(1 << (width - 1)), (1 << width) - 1)
        return value & ((1 << width) - 1)

    # -- names and enums --------------------------------------------------------------------
    def sreg(self, line: Line, tok: Token) -> SpecialRegister:
        s = SREG_NAMES.get(tok.text)
        if s is None:
            raise line.error_at(f"expected a special register, got {tok.text!r}"
                                + did_you_mean(tok.text, SREG_NAMES), tok)
        return s

    def scope(self, line: Line, tok: Token) -> Scope:
        text = tok.text if tok.text.startswith(".") or not self.lenient else "." + tok.text
        s = SCOPE_NAMES.get(text)
        if s is None:
            raise line.error_at(f"expected a scope ({', '.join(SCOPE_NAMES)}), got {tok.text!r}", tok)
        return s

    def order(self, line: Line, tok: Token) -> MemoryOrder:
        text = tok.text if tok.text.startswith(".") or not self.lenient else "." + tok.text
        o = ORDER_NAMES.get(text)
        if o is None:
            raise line.error_at(f"expected a memory order ({', '.join(ORDER_NAMES)}), got {tok.text!r}", tok)
        return o

    def arg(self, line: Line, tok: Token, buffer: bool) -> ArgRef | int:
        m = _RAW_INDEX.fullmatch(tok.text)
        if m is not None:
            return parse_int(line, Token(m.group(1), tok.col + 1), "an argument index", 0, 0xFFFF)
        if re.fullmatch(IDENT, tok.text) is None:
            kind = "buffer" if buffer else "scalar"
            raise line.error_at(f"expected the name of a {kind} argument, got {tok.text!r}", tok)
        return ArgRef(tok.text, buffer, line, tok)

    def func(self, line: Line, tok: Token) -> FuncRef | int:
        m = _RAW_INDEX.fullmatch(tok.text)
        if m is not None:
            return parse_int(line, Token(m.group(1), tok.col + 1), "a function index", 0, 0xFFFF)
        if re.fullmatch(IDENT, tok.text) is None:
            raise line.error_at(f"expected a function name, got {tok.text!r}", tok)
        return FuncRef(tok.text, line, tok)

    def frag(self, line: Line, tok: Token) -> int:
        """A fragment ``fN`` (docs/spec.md §8.14), N in 0..MAX_FRAGMENTS-1."""
        m = re.fullmatch(r"f(\d+)", tok.text)
        if m is None:
            raise line.error_at(f"expected a fragment f0..f{MAX_FRAGMENTS - 1}, got {tok.text!r}", tok)
        n = int(m.group(1))
        if n >= MAX_FRAGMENTS:
            raise line.error_at(f"fragment f{n} does not exist (fragments are f0..f{MAX_FRAGMENTS - 1})", tok)
        return n

    # -- addresses ---------------------------------------------------------------------------
    def _offset(self, line: Line, tok: Token, sign: str | None, text: str | None) -> int:
        if sign is None or text is None:
            return 0
        if INT_RE.fullmatch(text) is None or text[0] in "+-":
            raise line.error_at(f"expected an integer byte offset after {sign!r}, got {text!r}", tok)
        check_literal_length(line, Token(text, tok.col), "address offset")
        body = int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text, 10)
        value = -body if sign == "-" else body
        if not -(1 << 31) <= value < (1 << 31):
            raise line.error_at(f"address offset {sign}{text} does not fit in a signed 32-bit immediate", tok)
        return value

    def daddr(self, line: Line, tok: Token, wide: bool) -> PendingDeviceAddr:
        if self.lenient and _REG.fullmatch(tok.text):
            if wide:
                raise line.error_at("a 64-bit device offset needs a register pair memory[rN:rN+1]", tok)
            return PendingDeviceAddr(self.flat_buffer, self.reg(line, tok), 0)
        m = _DADDR.fullmatch(tok.text)
        form = "BUFFER[rN:rN+1+OFFSET]" if wide else "BUFFER[rN+OFFSET]"
        if m is None:
            raise line.error_at(f"expected a device address {form} (e.g. x[r3+16]), got {tok.text!r}", tok)
        name, regs, sign, off = m.groups()
        arg = self.arg(line, Token(name, tok.col), buffer=True)
        reg = self.reg(line, tok, 2 if wide else 1, text=re.sub(r"\s+", "", regs))
        return PendingDeviceAddr(arg, reg, self._offset(line, tok, sign, off))

    def laddr(self, line: Line, tok: Token) -> LocalAddr:
        if self.lenient and _REG.fullmatch(tok.text):
            return LocalAddr(self.reg(line, tok), 0)
        m = _LADDR.fullmatch(tok.text)
        if m is None:
            raise line.error_at(f"expected a local address [rN+OFFSET] (e.g. [r3+4]), got {tok.text!r}", tok)
        reg_text, sign, off = m.groups()
        return LocalAddr(self.reg(line, tok, text=reg_text), self._offset(line, tok, sign, off))

    # -- dispatch ----------------------------------------------------------------------------
    def operand(self, line: Line, tok: Token, kind: Operand, defn: InstrDef) -> object:
        """Parse ``tok`` as an operand of ``kind`` for instruction ``defn``."""
        if kind.reg_count:
            return self.reg(line, tok, kind.reg_count)
        if kind is Operand.PD:
            return self.pred_dest(line, tok)
        if kind is Operand.PS:
            return self.pred(line, tok)
        if kind in (Operand.IMM32, Operand.IMM64):
            assert defn.type is not None
            return self.imm(line, tok, defn.type, kind.words)
        if kind is Operand.SREG:
            return self.sreg(line, tok)
        if kind is Operand.ARG:
            return self.arg(line, tok, buffer=False)
        if kind in (Operand.DADDR, Operand.DADDR64):
            return self.daddr(line, tok, kind is Operand.DADDR64)
        if kind is Operand.LADDR:
            return self.laddr(line, tok)
        if kind is Operand.SCOPE:
            return self.scope(line, tok)
        if kind is Operand.ORDER:
            return self.order(line, tok)
        if kind is Operand.FUNC:
            return self.func(line, tok)
        if kind in (Operand.FD, Operand.FS):
            return self.frag(line, tok)
        raise AssertionError(f"unhandled operand kind {kind}")  # pragma: no cover


def operand_kinds_text(defn: InstrDef) -> str:
    """``rd, rs, rs`` — the operand kinds of an instruction, for messages."""
    return ", ".join(k.spelling for k in defn.operands) or "no operands"


# keep DeviceAddr importable from here for the resolver's isinstance checks
__all__ = ["ArgRef", "DeviceAddr", "FuncRef", "OperandParser", "PendingDeviceAddr", "operand_kinds_text"]
