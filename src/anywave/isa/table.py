"""The WAVE instruction table: the single source of truth for every instruction.

Each :class:`InstrDef` is one record: mnemonic, opcode, operand kinds, the type it
computes in, its category, determinism class, capability, and a one-line summary of
its semantics, plus the facts every consumer needs and would otherwise re-derive: the
semantic key ``sem`` (unambiguous where ``op`` is overloaded), the region ``role`` of
control instructions, which operands are written (``dests``) and read (``srcs``), whether
it is ``pure``, and the ``combine`` operation of reductions, scans and atomics (their
identities: :mod:`anywave.isa.semantics`). The assembler, disassembler, encoder, decoder,
verifier, the emulator's dispatch and every backend are driven from this table
(design.md §2); consumers dispatch on ``sem`` through :mod:`anywave.isa.dispatch`, whose
completeness check names every consumer a new record is missing from.

The records are built by the small generator loops below (the way TableGen multiclasses
expand), but the result is plain data: ``INSTRUCTIONS`` is a tuple of frozen records.

Opcodes are ``category << 8 | index``, where index is the record's position inside its
category. New records are only ever appended to a category, so opcodes of existing
instructions never change (docs/spec.md, "Binary encoding").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from anywave.isa.mma import GROUP_N, ROW_N
from anywave.isa.types import Capability, ScalarType

T = ScalarType


class Category(enum.IntEnum):
    """The WAVE primitive categories (docs/spec.md §6), plus data movement and MMA."""

    INTEGER = 1
    FLOAT = 2
    BITWISE = 3
    COMPARE = 4  # compare, select and predicate logic
    LOCAL_MEMORY = 5
    DEVICE_MEMORY = 6
    ATOMIC = 7
    WAVE = 8
    SYNC = 9
    CONTROL = 10
    CONVERT = 11
    MOVE = 12  # data movement: moves, immediates, special registers, arguments
    MMA = 13  # optional wave-collective matrix multiply-accumulate
    ASYNC_COPY = 14  # asynchronous device -> local copies with commit groups and an explicit wait


class Operand(enum.Enum):
    """Operand kinds. ``words`` is how many 32-bit words the operand takes in the code."""

    RD = ("rd", 1, True)  # destination register
    RS = ("rs", 1, False)  # source register
    RD64 = ("rd64", 1, True)  # destination register pair rN:rN+1 (low word in rN)
    RS64 = ("rs64", 1, False)
    RD128 = ("rd128", 1, True)  # destination register quad rN:rN+3
    RS128 = ("rs128", 1, False)
    PD = ("pd", 1, True)  # destination predicate
    PS = ("ps", 1, False)  # source predicate, optionally negated (!pN)
    IMM32 = ("imm32", 1, False)  # 32-bit immediate, read as the instruction's type
    IMM64 = ("imm64", 2, False)  # 64-bit immediate (low word first)
    SREG = ("sreg", 1, False)  # special register
    ARG = ("arg", 1, False)  # kernel argument index (scalar arguments)
    DADDR = ("daddr", 2, False)  # device address: buffer[rOffset + imm]
    DADDR64 = ("daddr64", 2, False)  # device address with a 64-bit offset pair
    LADDR = ("laddr", 2, False)  # local address: [rOffset + imm]
    SCOPE = ("scope", 1, False)
    ORDER = ("order", 1, False)
    FUNC = ("func", 1, False)  # function index
    FD = ("fd", 1, True)  # destination fragment fN (docs/spec.md §8.14)
    FS = ("fs", 1, False)  # source fragment fN

    def __init__(self, spelling: str, words: int, is_dest: bool) -> None:
        self.spelling = spelling
        self.words = words
        self.is_dest = is_dest

    @property
    def is_source(self) -> bool:
        """Read by the instruction: source registers, predicates and fragments, and the
        register offset of a memory address (``daddr``/``daddr64``/``laddr``)."""
        return not self.is_dest and self.spelling not in _IMMEDIATE_SPELLINGS

    @property
    def is_immediate(self) -> bool:
        """A value encoded in the instruction itself (immediate, special register, argument
        index, scope, order, function index): neither read from nor written to a register."""
        return self.spelling in _IMMEDIATE_SPELLINGS

    @property
    def reg_count(self) -> int:
        """Consecutive registers named by a register operand (0 for non-registers)."""
        return {"rd": 1, "rs": 1, "rd64": 2, "rs64": 2, "rd128": 4, "rs128": 4}.get(self.spelling, 0)


_IMMEDIATE_SPELLINGS = frozenset({"imm32", "imm64", "sreg", "arg", "scope", "order", "func"})


class Role(str, enum.Enum):
    """The structural role of a control instruction (docs/spec.md §7): how it opens, continues
    or closes a region, or leaves one. A ``Role`` compares equal to its spelling
    (``Role.ENDIF == "endif"``), which is also the instruction's mnemonic."""

    IF = "if"
    ELSE = "else"
    ENDIF = "endif"
    LOOP = "loop"
    ENDLOOP = "endloop"
    BREAK = "break"
    CONTINUE = "continue"
    CALL = "call"
    RET = "ret"
    HALT = "halt"

    @property
    def opens(self) -> bool:
        """Opens a region (``if``, ``loop``); :attr:`closer` names the role that closes it."""
        return self in (Role.IF, Role.LOOP)

    @property
    def closes(self) -> bool:
        """Closes the innermost open region (``endif``, ``endloop``)."""
        return self in (Role.ENDIF, Role.ENDLOOP)

    @property
    def closer(self) -> Role | None:
        """The role closing a region this one opens (or continues: ``else`` -> ``endif``)."""
        return {Role.IF: Role.ENDIF, Role.ELSE: Role.ENDIF, Role.LOOP: Role.ENDLOOP}.get(self)

    @property
    def opener(self) -> Role | None:
        """The role opening the region this one continues or closes."""
        return {Role.ELSE: Role.IF, Role.ENDIF: Role.IF, Role.ENDLOOP: Role.LOOP}.get(self)

    @property
    def exits(self) -> bool:
        """Removes lanes from the current mask (``break``, ``continue``, ``ret``, ``halt``)."""
        return self in (Role.BREAK, Role.CONTINUE, Role.RET, Role.HALT)


#: the domain of ``InstrDef.sem`` per category (predicate logic in COMPARE: ``pred``)
SEM_PREFIX: dict[Category, str] = {
    Category.INTEGER: "int", Category.FLOAT: "float", Category.BITWISE: "bit", Category.COMPARE: "cmp",
    Category.LOCAL_MEMORY: "mem", Category.DEVICE_MEMORY: "mem", Category.ATOMIC: "atomic",
    Category.WAVE: "wave", Category.SYNC: "sync", Category.CONTROL: "ctl", Category.CONVERT: "cvt",
    Category.MOVE: "move", Category.MMA: "mma", Category.ASYNC_COPY: "async",
}


class Determinism(enum.Enum):
    """Determinism classes (design.md §1, docs/spec.md "Determinism")."""

    #: bit-identical on every conformant target
    EXACT = "exact"
    #: bit-identical, except that when the result is a NaN only "is NaN" is specified
    EXACT_NAN = "exact-nan"
    #: a documented error bound (ULP) against the correctly rounded result
    APPROX = "approx"
    #: the result depends on the order in which threads are scheduled (racing atomics)
    SCHEDULE = "schedule"
    #: accuracy and rounding inside the operation are implementation-defined, bounded
    BOUNDED = "bounded"


class Flag(enum.Flag):
    NONE = 0
    LOAD = enum.auto()
    STORE = enum.auto()
    ATOMIC = enum.auto()
    #: opens/closes/continues a structured control region
    STRUCTURED = enum.auto()
    #: the guard field is spelled as an operand: ``break p0`` means ``@p0 break``
    GUARD_OPERAND = enum.auto()
    #: may not carry a guard predicate
    NO_GUARD = enum.auto()
    #: executed by the whole wave together (uses the active mask)
    WAVE_COLLECTIVE = enum.auto()
    #: workgroup execution barrier
    BARRIER = enum.auto()
    #: ends the thread or leaves a function
    TERMINATOR = enum.auto()


@dataclass(frozen=True)
class InstrDef:
    """One instruction of the table.

    Attributes:
        mnemonic: the native assembly spelling, unique (``add.f32``).
        opcode: 16-bit opcode, ``category << 8 | index``.
        category: primitive category.
        op: the operation's base name, used by semantic dispatch (``add``, ``cvt``, ``ld``).
        operands: operand kinds, in assembly order.
        type: the type the operation computes in (for ``cvt`` the destination type).
        src_type: for conversions, the source type.
        determinism: determinism class.
        capability: capability a kernel using it must declare (``Capability.NONE`` if core).
        flags: structural properties (loads, stores, control flow ...).
        summary: one-line semantics; the full definition is docs/spec.md.
        variant: extra selector (space ``local``/``device``, comparison ``lt`` ...).
        sem: the semantic key consumers dispatch on: ``<domain>.<op>`` with the domain from
            the category (``int``, ``float``, ``bit``, ``cmp``, ``pred``, ``mem``, ``atomic``,
            ``wave``, ``sync``, ``ctl``, ``cvt``, ``move``, ``mma``), so an overloaded ``op``
            gets one key per meaning: ``bit.and`` / ``pred.and``, ``int.min`` / ``float.min``,
            ``move.mov`` / ``pred.mov``. Records of one ``sem`` differ only by type, variant
            and address width, which the handler reads from the record.
        role: for control instructions the :class:`Role` (``if`` ... ``halt``); None otherwise.
        dests: indices (into ``operands``) of the operands written: registers, predicates,
            fragments. Memory written by stores/atomics is a side effect, not an operand.
        srcs: indices of the operands read: source registers, predicates and fragments, and
            memory-address operands (their offset register). The guard predicate, when an
            instruction has one, is read too but is not an operand.
        immediates: indices of the operands encoded in the instruction (immediates, special
            registers, argument indices, scopes, orders, function indices).
        pure: no side effect, cannot fault, and the result depends only on the source
            operands (not on memory, the active mask or other lanes): the instruction may be
            removed when its results are unused, computed once for equal operands, hoisted or
            executed speculatively. False for loads, stores, atomics, wave collectives,
            barriers, fences, control flow and calls.
        combine: for reductions, scans and atomics the combining operation (``add``, ``sub``,
            ``min``, ``max``, ``and``, ``or``, ``xor``, ``exch``, ``cas``) applied in ``type``;
            None otherwise. Identities: :func:`anywave.isa.semantics.identity`.
        addr64: the device address takes a 64-bit offset register pair (``.o64`` forms).
        since: the WAVE version (major, minor) that introduced the record: (1, 0) for the
            original set; a module using a later record is of that version at least
            (docs/spec.md §1.4, :func:`anywave.binary.module.required_version`).
        types: every value type the record computes correctly in, ``type`` first: a ``bN``
            record also serves ``uN``/``iN`` values, the sign-free integer records
            (``add``/``sub``/``mul``/``neg``/``mad`` ``.iN``) also serve ``uN``, and the
            wrapping atomic ``add``/``sub`` ``.u32`` records serve ``i32``
            (:func:`anywave.isa.index.lookup` uses it).
    """

    mnemonic: str
    opcode: int
    category: Category
    op: str
    operands: tuple[Operand, ...]
    type: ScalarType | None
    determinism: Determinism
    capability: Capability
    flags: Flag
    summary: str
    src_type: ScalarType | None = None
    variant: str = ""
    role: Role | None = None
    pure: bool | None = None
    combine: str | None = None
    since: tuple[int, int] = (1, 0)
    words: int = field(init=False)
    sem: str = field(init=False)
    dests: tuple[int, ...] = field(init=False)
    srcs: tuple[int, ...] = field(init=False)
    immediates: tuple[int, ...] = field(init=False)
    addr64: bool = field(init=False)
    types: tuple[ScalarType, ...] = field(init=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "words", 1 + sum(o.words for o in self.operands))
        prefix = "pred" if self.category is Category.COMPARE and self.type is ScalarType.PRED \
            else SEM_PREFIX[self.category]
        put(self, "sem", f"{prefix}.{self.op}")
        put(self, "dests", tuple(i for i, o in enumerate(self.operands) if o.is_dest))
        put(self, "srcs", tuple(i for i, o in enumerate(self.operands) if o.is_source))
        put(self, "immediates", tuple(i for i, o in enumerate(self.operands) if o.is_immediate))
        put(self, "addr64", Operand.DADDR64 in self.operands)
        if self.pure is None:
            impure = Flag.LOAD | Flag.STORE | Flag.ATOMIC | Flag.WAVE_COLLECTIVE | Flag.BARRIER | \
                Flag.STRUCTURED | Flag.TERMINATOR
            put(self, "pure", not (self.flags & impure) and self.role is None)
        put(self, "types", _served_types(self))


#: integer operations whose two's-complement result does not depend on signedness: the
#: ``.iN`` record serves ``uN`` values too
_SIGN_FREE_INT = frozenset({"add", "sub", "mul", "neg", "mad"})
_BITS_FAMILY = {8: (T.B8, T.U8, T.I8), 16: (T.B16, T.U16, T.I16), 32: (T.B32, T.U32, T.I32),
                64: (T.B64, T.U64, T.I64), 128: (T.B128,)}
_BIT_TYPES = frozenset({T.B8, T.B16, T.B32, T.B64, T.B128})
_UNSIGNED_OF = {T.I32: T.U32, T.I64: T.U64}


def _served_types(d: InstrDef) -> tuple[ScalarType, ...]:
    t = d.type
    if t is None:
        return ()
    if t in _BIT_TYPES:  # bit types: any integer value of the width
        return (t,) + tuple(u for u in _BITS_FAMILY[t.bits] if u is not t)
    if d.category is Category.INTEGER and d.op in _SIGN_FREE_INT and t in _UNSIGNED_OF:
        return (t, _UNSIGNED_OF[t])
    if d.category is Category.ATOMIC and d.combine in ("add", "sub") and t is T.U32:
        return (t, T.I32)  # wrapping add/sub: the u32 atomic serves i32
    return (t,)


# --------------------------------------------------------------------------- builder

_RECORDS: list[InstrDef] = []
_NEXT_INDEX: dict[Category, int] = {}


def _capability_of(*types: ScalarType | None) -> Capability:
    cap = Capability.NONE
    for t in types:
        if t in (T.F16, T.F16X2):
            cap |= Capability.F16
        elif t in (T.BF16, T.BF16X2):
            cap |= Capability.BF16
        elif t is T.F64:
            cap |= Capability.F64
        elif t in (T.I64, T.U64):
            cap |= Capability.INT64
    return cap


def _def(mnemonic: str, category: Category, op: str, operands: Iterable[Operand],
         type_: ScalarType | None, summary: str, *,
         det: Determinism = Determinism.EXACT, cap: Capability = Capability.NONE,
         flags: Flag = Flag.NONE, src_type: ScalarType | None = None, variant: str = "",
         role: Role | None = None, pure: bool | None = None, combine: str | None = None,
         since: tuple[int, int] = (1, 0)) -> None:
    index = _NEXT_INDEX.get(category, 0)
    if index > 0xFF:
        raise AssertionError(f"category {category.name} overflows 256 opcodes")
    _NEXT_INDEX[category] = index + 1
    cap = cap | _capability_of(type_, src_type)
    _RECORDS.append(InstrDef(mnemonic, (int(category) << 8) | index, category, op,
                             tuple(operands), type_, det, cap, flags, summary,
                             src_type, variant, role, pure, combine, since))


R, S = Operand.RD, Operand.RS
R64, S64 = Operand.RD64, Operand.RS64
DET, NAN_ = Determinism.EXACT, Determinism.EXACT_NAN


def _regs(t: ScalarType) -> tuple[Operand, Operand]:
    """(dest, source) operand kinds holding a value of type t."""
    return (R64, S64) if t.bits == 64 else (R, S)


# --- integer --------------------------------------------------------------------------
C = Category.INTEGER
for t in (T.I32, T.I64):
    d, s = _regs(t)
    _def(f"add.{t.spelling}", C, "add", (d, s, s), t, "d = a + b, wrapping modulo 2^n")
    _def(f"sub.{t.spelling}", C, "sub", (d, s, s), t, "d = a - b, wrapping")
    _def(f"mul.{t.spelling}", C, "mul", (d, s, s), t, "d = low n bits of a * b")
    _def(f"neg.{t.spelling}", C, "neg", (d, s), t, "d = -a, wrapping (neg MIN = MIN)")
    _def(f"abs.{t.spelling}", C, "abs", (d, s), t, "d = |a|, wrapping (abs MIN = MIN)")
    for u in ((T.I32, T.U32) if t is T.I32 else (T.I64, T.U64)):
        if u.is_signed:
            div_text = "d = a / b truncated toward zero; b = 0 gives -1; MIN / -1 = MIN"
            rem_text = "d = a - b * (a / b), sign of a; b = 0 gives a; MIN % -1 = 0"
        else:
            div_text = "d = a / b truncated; b = 0 gives all ones"
            rem_text = "d = a - b * (a / b); b = 0 gives a"
        _def(f"div.{u.spelling}", C, "div", (d, s, s), u, div_text)
        _def(f"rem.{u.spelling}", C, "rem", (d, s, s), u, rem_text)
        _def(f"min.{u.spelling}", C, "min", (d, s, s), u, "d = smaller of a and b")
        _def(f"max.{u.spelling}", C, "max", (d, s, s), u, "d = larger of a and b")
for t in (T.I32, T.U32):
    _def(f"mulhi.{t.spelling}", C, "mulhi", (R, S, S), t, "d = high 32 bits of the 64-bit product a * b")
_def("mad.i32", C, "mad", (R, S, S, S), T.I32, "d = low 32 bits of a * b + c")

# --- float ----------------------------------------------------------------------------
C = Category.FLOAT
_FLOATS = (T.F32, T.F64, T.F16, T.BF16)
for t in _FLOATS + (T.F16X2, T.BF16X2):
    d, s = _regs(t)
    lanes = " (per half)" if t.is_packed else ""
    _def(f"add.{t.spelling}", C, "add", (d, s, s), t, f"d = a + b, rounded to nearest even{lanes}", det=NAN_)
    _def(f"sub.{t.spelling}", C, "sub", (d, s, s), t, f"d = a - b, rounded to nearest even{lanes}", det=NAN_)
    _def(f"mul.{t.spelling}", C, "mul", (d, s, s), t, f"d = a * b, rounded to nearest even{lanes}", det=NAN_)
    _def(f"fma.{t.spelling}", C, "fma", (d, s, s, s), t,
         f"d = a * b + c with a single rounding to nearest even{lanes}", det=NAN_)
    _def(f"min.{t.spelling}", C, "min", (d, s, s), t,
         f"IEEE 754-2019 minimumNumber: a NaN operand is ignored, both NaN gives the "
         f"canonical NaN, -0 < +0{lanes}")
    _def(f"max.{t.spelling}", C, "max", (d, s, s), t,
         f"IEEE 754-2019 maximumNumber: a NaN operand is ignored, both NaN gives the "
         f"canonical NaN, -0 < +0{lanes}")
    _def(f"neg.{t.spelling}", C, "neg", (d, s), t, f"d = a with its sign bit flipped (NaN too){lanes}")
    _def(f"abs.{t.spelling}", C, "abs", (d, s), t, f"d = a with its sign bit cleared (NaN too){lanes}")
for t in _FLOATS:
    d, s = _regs(t)
    _def(f"div.{t.spelling}", C, "div", (d, s, s), t, "d = a / b, correctly rounded to nearest even", det=NAN_)
    _def(f"sqrt.{t.spelling}", C, "sqrt", (d, s), t, "d = sqrt(a), correctly rounded; sqrt(-0) = -0", det=NAN_)
    _def(f"floor.{t.spelling}", C, "floor", (d, s), t, "d = largest integral value <= a", det=NAN_)
    _def(f"ceil.{t.spelling}", C, "ceil", (d, s), t, "d = smallest integral value >= a", det=NAN_)
    _def(f"trunc.{t.spelling}", C, "trunc", (d, s), t, "d = a rounded toward zero to an integral value", det=NAN_)
    _def(f"rint.{t.spelling}", C, "rint", (d, s), t, "d = a rounded to the nearest integer, ties to even",
         det=NAN_)
_APPROX = Determinism.APPROX
_def("ex2.approx.f32", C, "ex2", (R, S), T.F32, "d ~ 2^a (max error 2 ulp; see spec)", det=_APPROX)
_def("lg2.approx.f32", C, "lg2", (R, S), T.F32, "d ~ log2(a) (max error 2 ulp; see spec)", det=_APPROX)
_def("sin.approx.f32", C, "sin", (R, S), T.F32, "d ~ sin(a) (abs error 2^-20.5 in [-pi, pi])", det=_APPROX)
_def("cos.approx.f32", C, "cos", (R, S), T.F32, "d ~ cos(a) (abs error 2^-20.5 in [-pi, pi])", det=_APPROX)
_def("rsqrt.approx.f32", C, "rsqrt", (R, S), T.F32, "d ~ 1/sqrt(a) (max error 2 ulp)", det=_APPROX)
_def("rcp.approx.f32", C, "rcp", (R, S), T.F32, "d ~ 1/a (max error 1 ulp)", det=_APPROX)
_def("tanh.approx.f32", C, "tanh", (R, S), T.F32, "d ~ tanh(a) (max rel error 2^-10.9)", det=_APPROX)

# --- bitwise --------------------------------------------------------------------------
C = Category.BITWISE
for t in (T.B32, T.B64):
    d, s = _regs(t)
    _def(f"and.{t.spelling}", C, "and", (d, s, s), t, "d = a & b")
    _def(f"or.{t.spelling}", C, "or", (d, s, s), t, "d = a | b")
    _def(f"xor.{t.spelling}", C, "xor", (d, s, s), t, "d = a ^ b")
    _def(f"not.{t.spelling}", C, "not", (d, s), t, "d = ~a")
for t, u, i in ((T.B32, T.U32, T.I32), (T.B64, T.U64, T.I64)):
    d, s = _regs(t)
    n = t.bits
    # shift counts are always one 32-bit register, read unsigned
    wide = Capability.INT64 if n == 64 else Capability.NONE
    _def(f"shl.{t.spelling}", C, "shl", (d, s, S), t, f"d = a << b; b >= {n} gives 0", cap=wide)
    _def(f"shr.{u.spelling}", C, "shr", (d, s, S), u, f"d = a >> b, zero-filling; b >= {n} gives 0")
    _def(f"shr.{i.spelling}", C, "shr", (d, s, S), i,
         f"d = a >> b, sign-filling; b >= {n} gives 0 or -1 by the sign of a")
_def("popc.b32", C, "popc", (R, S), T.B32, "d = number of set bits of a")
_def("clz.b32", C, "clz", (R, S), T.B32, "d = leading zero bits of a (32 for a = 0)")
_def("ctz.b32", C, "ctz", (R, S), T.B32, "d = trailing zero bits of a (32 for a = 0)")
_def("brev.b32", C, "brev", (R, S), T.B32, "d = a with its bit order reversed")
_def("rotl.b32", C, "rotl", (R, S, S), T.B32,
     "d = a rotated left by b mod 32 bits (the bits shifted out at the top come back in at the bottom)")

# --- compare, select, predicate logic --------------------------------------------------
C = Category.COMPARE
_CMPS = {"eq": "a == b", "ne": "a != b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b"}
for t in (T.I32, T.U32, T.I64, T.U64, T.F32, T.F64, T.F16, T.BF16):
    _, s = _regs(t)
    for cmp, text in _CMPS.items():
        det_note = ("; true if either is NaN" if cmp == "ne" else "; false if either is NaN") if t.is_float else ""
        _def(f"setp.{cmp}.{t.spelling}", C, "setp", (Operand.PD, s, s), t, f"p = {text}{det_note}",
             variant=cmp)
    if t.is_float:
        _def(f"setp.unord.{t.spelling}", C, "setp", (Operand.PD, s, s), t, "p = a or b is NaN",
             variant="unord")
_def("selp.b32", C, "selp", (R, S, S, Operand.PS), T.B32, "d = p ? a : b")
_def("selp.b64", C, "selp", (R64, S64, S64, Operand.PS), T.B64, "d = p ? a : b")
_def("and.pred", C, "and", (Operand.PD, Operand.PS, Operand.PS), T.PRED, "p = a and b")
_def("or.pred", C, "or", (Operand.PD, Operand.PS, Operand.PS), T.PRED, "p = a or b")
_def("xor.pred", C, "xor", (Operand.PD, Operand.PS, Operand.PS), T.PRED, "p = a xor b")
_def("mov.pred", C, "mov", (Operand.PD, Operand.PS), T.PRED, "p = a (negation allowed: mov.pred p1, !p0)")
_def("setp.true", C, "setp_const", (Operand.PD,), T.PRED, "p = true", variant="true")
_def("setp.false", C, "setp_const", (Operand.PD,), T.PRED, "p = false", variant="false")

# --- memory -----------------------------------------------------------------------------
_LOADS = (T.U8, T.I8, T.U16, T.I16, T.B32, T.B64, T.B128)
_STORES = (T.B8, T.B16, T.B32, T.B64, T.B128)


def _data_reg(t: ScalarType, dest: bool) -> Operand:
    if t.bits == 128:
        return Operand.RD128 if dest else Operand.RS128
    if t.bits == 64:
        return R64 if dest else S64
    return R if dest else S


for space, cat, addrs in (("local", Category.LOCAL_MEMORY, (("", Operand.LADDR),)),
                          ("device", Category.DEVICE_MEMORY,
                           (("", Operand.DADDR), (".o64", Operand.DADDR64)))):
    for suffix, addr in addrs:
        cap = Capability.OFFSET64 if addr is Operand.DADDR64 else Capability.NONE
        for t in _LOADS:
            ext = "sign-extended" if t.is_signed else "zero-extended" if t.bits < 32 else "as is"
            _def(f"ld.{space}.{t.spelling}{suffix}", cat, "ld", (_data_reg(t, True), addr), t,
                 f"load {t.bits} bits from {space} memory, {ext}; address aligned to {t.nbytes}",
                 cap=cap, flags=Flag.LOAD, variant=space)
        for t in _STORES:
            what = "the low bits of" if t.bits < 32 else ""
            _def(f"st.{space}.{t.spelling}{suffix}", cat, "st", (addr, _data_reg(t, False)), t,
                 f"store {what} {t.bits} bits to {space} memory; address aligned to {t.nbytes}".replace("  ", " "),
                 cap=cap, flags=Flag.STORE, variant=space)

# --- atomics ----------------------------------------------------------------------------
C = Category.ATOMIC
_ATOMIC_OPS = (
    ("add", T.U32, "old + v, wrapping"), ("sub", T.U32, "old - v, wrapping"),
    ("min", T.I32, "min(old, v)"), ("min", T.U32, "min(old, v)"),
    ("max", T.I32, "max(old, v)"), ("max", T.U32, "max(old, v)"),
    ("and", T.B32, "old & v"), ("or", T.B32, "old | v"), ("xor", T.B32, "old ^ v"),
    ("exch", T.B32, "v"), ("add", T.F32, "old + v, rounded to nearest even"),
)
for space, addr, tail in (("local", Operand.LADDR, ()),
                          ("device", Operand.DADDR, (Operand.SCOPE, Operand.ORDER))):
    for op, t, new in _ATOMIC_OPS:
        cap = Capability.ATOMIC_F32 if t is T.F32 else Capability.NONE
        fl = Flag.ATOMIC | Flag.LOAD | Flag.STORE
        _def(f"atom.{space}.{op}.{t.spelling}", C, "atom", (R, addr, S) + tail, t,
             f"atomically: d = old = mem; mem = {new}", det=Determinism.SCHEDULE, cap=cap,
             flags=fl, variant=f"{space}.{op}", combine=op)
        if op != "exch":
            det = Determinism.SCHEDULE if t is T.F32 else DET
            _def(f"red.{space}.{op}.{t.spelling}", C, "red", (addr, S) + tail, t,
                 f"atomically: mem = {new} (no result)", det=det, cap=cap,
                 flags=Flag.ATOMIC | Flag.STORE, variant=f"{space}.{op}", combine=op)
    _def(f"atom.{space}.cas.b32", C, "atom", (R, addr, S, S) + tail, T.B32,
         "atomically: d = old = mem; if old == cmp (operand 3) then mem = v (operand 4)",
         det=Determinism.SCHEDULE, flags=Flag.ATOMIC | Flag.LOAD | Flag.STORE,
         variant=f"{space}.cas", combine="cas")

# --- wave operations ----------------------------------------------------------------------
C = Category.WAVE
W_ = Capability.WAVE_OPS
WC = Flag.WAVE_COLLECTIVE
for mode, text in (("idx", "lane b"), ("up", "lane id - b"), ("down", "lane id + b"),
                   ("xor", "lane id ^ b")):
    _def(f"shfl.{mode}.b32", C, "shfl", (R, S, S), T.B32,
         f"d = a of source lane ({text}); an out-of-range or inactive source gives the "
         f"lane's own a", cap=W_, flags=WC, variant=mode)
_def("bcast.b32", C, "bcast", (R, S, S), T.B32,
     "every active lane gets a of lane L, L = b of the lowest active lane; L out of range "
     "or inactive gives a of the lowest active lane", cap=W_, flags=WC)
_def("ballot.b64", C, "ballot", (R64, Operand.PS), T.B64,
     "d = W-bit mask of active lanes whose p is true (bit i = lane i; bits >= W are 0)",
     cap=W_, flags=WC)
_def("any.pred", C, "any", (Operand.PD, Operand.PS), T.PRED, "p = a is true in some active lane",
     cap=W_, flags=WC)
_def("all.pred", C, "all", (Operand.PD, Operand.PS), T.PRED, "p = a is true in every active lane",
     cap=W_, flags=WC)
_RED_OPS = (("add", T.I32), ("add", T.U32), ("add", T.F32), ("min", T.I32), ("min", T.U32),
            ("min", T.F32), ("max", T.I32), ("max", T.U32), ("max", T.F32), ("and", T.B32),
            ("or", T.B32), ("xor", T.B32))
for op, t in _RED_OPS:
    order = " in the spec's fixed butterfly order" if t is T.F32 and op == "add" else ""
    _def(f"wred.{op}.{t.spelling}", C, "wred", (R, S), t,
         f"every active lane gets the {op} of a over the active lanes{order}",
         det=NAN_ if t is T.F32 else DET, cap=W_, flags=WC, variant=op, combine=op)
for kind in ("incl", "excl"):
    for t in (T.I32, T.U32, T.F32):
        _def(f"wscan.{kind}.add.{t.spelling}", C, "wscan", (R, S), t,
             f"{'inclusive' if kind == 'incl' else 'exclusive'} prefix sum of a over the "
             f"active lanes in lane order (floats: Kogge-Stone order, see spec)",
             det=NAN_ if t is T.F32 else DET, cap=W_, flags=WC, variant=kind, combine="add")

# --- synchronisation -------------------------------------------------------------------
C = Category.SYNC
_def("barrier", C, "barrier", (), None,
     "workgroup execution barrier; also a workgroup-scope acq_rel fence on local and device memory",
     flags=Flag.BARRIER | Flag.NO_GUARD)
_def("fence", C, "fence", (Operand.SCOPE, Operand.ORDER), None,
     "memory fence with the given scope and order", flags=Flag.NO_GUARD, pure=False)
# WAVE 1.1 (docs/spec.md §7.10): the wave-level barrier of warp-synchronous code (CUDA's __syncwarp)
_def("barrier.wave", C, "wave_barrier", (), None,
     "wave execution barrier of the executing lanes; also a wave-scope acq_rel fence among them on "
     "local and device memory", cap=Capability.WAVE_OPS, flags=Flag.WAVE_COLLECTIVE | Flag.NO_GUARD, since=(1, 1))

# --- control flow -----------------------------------------------------------------------
C = Category.CONTROL
SF = Flag.STRUCTURED | Flag.NO_GUARD
_def("if", C, "if", (Operand.PS,), None, "active lanes where p holds run the then-region", flags=SF, role=Role.IF)
_def("else", C, "else", (), None, "lanes that skipped the then-region run the else-region", flags=SF, role=Role.ELSE)
_def("endif", C, "endif", (), None, "lanes that entered the if reconverge", flags=SF, role=Role.ENDIF)
_def("loop", C, "loop", (), None, "opens a loop region; runs until every lane has left", flags=SF, role=Role.LOOP)
_def("endloop", C, "endloop", (), None, "lanes still in the loop go back to its start", flags=SF, role=Role.ENDLOOP)
_def("break", C, "break", (), None, "lanes (where the guard holds) leave the innermost loop",
     flags=Flag.STRUCTURED | Flag.GUARD_OPERAND, role=Role.BREAK)
_def("continue", C, "continue", (), None,
     "lanes (where the guard holds) skip to the next iteration of the innermost loop",
     flags=Flag.STRUCTURED | Flag.GUARD_OPERAND, role=Role.CONTINUE)
_def("call", C, "call", (Operand.FUNC,), None, "active lanes run the function, then continue here",
     flags=Flag.NO_GUARD, role=Role.CALL)
_def("ret", C, "ret", (), None, "lanes (where the guard holds) leave the function; in a kernel: halt",
     flags=Flag.TERMINATOR | Flag.GUARD_OPERAND, role=Role.RET)
_def("halt", C, "halt", (), None, "lanes (where the guard holds) end their thread",
     flags=Flag.TERMINATOR | Flag.GUARD_OPERAND, role=Role.HALT)
_def("nop", C, "nop", (), None, "does nothing")

# --- conversions -------------------------------------------------------------------------
C = Category.CONVERT
_CVT_TYPES = (T.I32, T.U32, T.I64, T.U64, T.F16, T.BF16, T.F32, T.F64)


def _cvt_rule(dst: ScalarType, src: ScalarType) -> tuple[str, Determinism]:
    if not dst.is_float and not src.is_float:
        if dst.bits > src.bits:
            return ("sign-extend" if src.is_signed else "zero-extend"), DET
        return "keep the low bits (wrapping)", DET
    if dst.is_float and not src.is_float:
        return "round to nearest even", DET
    if not dst.is_float:
        return "truncate toward zero, saturate to the range, NaN gives 0", DET
    if dst.bits > src.bits or (dst, src) == (T.BF16, T.F16):
        # widening, and f16 -> bf16 (bf16's range holds every f16 value): never overflows
        exact = "exact" if dst.bits > src.bits else "round to nearest even"
        return exact + "; NaN stays NaN", NAN_
    return "round to nearest even; overflow gives inf; NaN stays NaN", NAN_


for dst in _CVT_TYPES:
    for src in _CVT_TYPES:
        if dst is src:
            continue
        rule, det = _cvt_rule(dst, src)
        _def(f"cvt.{dst.spelling}.{src.spelling}", C, "cvt", (_regs(dst)[0], _regs(src)[1]), dst,
             f"d = a converted: {rule}", det=det, src_type=src)
_def("cvt.f16x2.f32", C, "cvt_pack", (R, S, S), T.F16X2,
     "d = (f16(b) << 16) | f16(a), each rounded to nearest even", det=NAN_, src_type=T.F32)
_def("cvt.bf16x2.f32", C, "cvt_pack", (R, S, S), T.BF16X2,
     "d = (bf16(b) << 16) | bf16(a), each rounded to nearest even", det=NAN_, src_type=T.F32)

# --- data movement -------------------------------------------------------------------------
C = Category.MOVE
_def("mov.b32", C, "mov", (R, S), T.B32, "d = a")
_def("mov.b64", C, "mov", (R64, S64), T.B64, "d = a (register pair)")
for t in (T.B32, T.U32, T.I32, T.F32, T.F16, T.BF16):
    _def(f"movi.{t.spelling}", C, "movi", (R, Operand.IMM32), t,
         "d = immediate" + (" (16-bit pattern in the low half, high half 0)" if t.bits == 16 else ""))
for t in (T.B64, T.U64, T.I64, T.F64):
    _def(f"movi.{t.spelling}", C, "movi", (R64, Operand.IMM64), t, "d = 64-bit immediate")
_def("mov.sr", C, "mov_sr", (R, Operand.SREG), T.U32, "d = special register")
_def("ldarg.b32", C, "ldarg", (R, Operand.ARG), T.B32, "d = 32-bit scalar kernel argument")
_def("ldarg.b64", C, "ldarg", (R64, Operand.ARG), T.B64, "d = 64-bit scalar kernel argument")

# --- matrix multiply-accumulate ----------------------------------------------------------------
C = Category.MMA
for t in (T.F16, T.BF16):
    _def(f"mma.m16n16k16.f32.{t.spelling}", C, "mma", (S, S, S, S), T.F32,
         f"D = A x B + C on 16x16 tiles in local memory: D, C f32 row-major; A, B {t.spelling} "
         "row-major; operands are wave-uniform byte offsets (D, A, B, C)",
         det=Determinism.BOUNDED, cap=Capability.MMA | Capability.WAVE_OPS,
         flags=WC | Flag.LOAD | Flag.STORE, src_type=t)

# fragments (docs/spec.md §8.14): wave-scope m16n16k16 and thread-scope m4n4k4 (the reference
# toolchain's 4x4 f32 tiles). Appended after the tile mma records: opcodes 0x0D02 onwards.
FD, FS = Operand.FD, Operand.FS
_WAVE_FRAG = Capability.MMA | Capability.WAVE_OPS
for shape, scope_flag, fcap, ins_types in (
        ("m16n16k16", WC, _WAVE_FRAG, (T.F16, T.BF16)), ("m4n4k4", Flag.NONE, Capability.MMA, (T.F32,))):
    where = "the wave's" if scope_flag else "the thread's"
    spaces = (("local", Operand.LADDR), ("device", Operand.DADDR)) if scope_flag else (("local", Operand.LADDR),)
    for role in ("a", "b"):
        for t in ins_types:
            for space, addr in spaces:
                _def(f"mma.load.{role}.{space}.{shape}.{t.spelling}", C, "fload", (FD, addr, S), t,
                     f"fragment d = {role.upper()} tile of {t.spelling} from {space} memory, row-major with a "
                     f"row stride of rS bytes ({where} fragment)",
                     cap=fcap, flags=scope_flag | Flag.LOAD, variant=f"{role}.{space}.{shape}")
    for space, addr in spaces:
        _def(f"mma.load.c.{space}.{shape}.f32", C, "fload", (FD, addr, S), T.F32,
             f"accumulator fragment d = f32 tile from {space} memory, row-major, row stride rS bytes",
             cap=fcap, flags=scope_flag | Flag.LOAD, variant=f"c.{space}.{shape}")
        _def(f"mma.store.{space}.{shape}.f32", C, "fstore", (addr, FS, S), T.F32,
             f"store accumulator fragment a to {space} memory as an f32 tile, row-major, row stride rS bytes",
             cap=fcap, flags=scope_flag | Flag.STORE, variant=f"{space}.{shape}")
    for t in ins_types:
        _def(f"mma.mma.{shape}.f32.{t.spelling}", C, "fmma", (FD, FS, FS, FS), T.F32,
             f"accumulator fragment d = a x b + c ({t.spelling} inputs, f32 accumulation); d may be c",
             det=Determinism.BOUNDED if scope_flag else Determinism.EXACT_NAN, cap=fcap, flags=scope_flag,
             src_type=t, variant=shape)
    _def(f"mma.fill.{shape}.f32", C, "ffill", (FD, S), T.F32,
         "every element of accumulator fragment d = the f32 value rS (wave-uniform for wave scope)",
         cap=fcap, flags=scope_flag, variant=shape)
    _def(f"mma.scale.{shape}.f32", C, "fscale", (FD, FS, S), T.F32,
         "accumulator fragment d = a * rS element-wise (f32 multiply, nearest even)",
         det=NAN_, cap=fcap, flags=scope_flag, variant=shape)
    if scope_flag:
        _def(f"mma.bias.device.{shape}.f32", C, "fbias", (FD, FS, Operand.DADDR), T.F32,
             "accumulator fragment d[i][j] = a[i][j] + bias[j], bias f32 at the device address + 4j",
             det=NAN_, cap=fcap, flags=scope_flag | Flag.LOAD, variant=f"device.{shape}")
del FD, FS

# --- asynchronous copies (docs/spec.md §4.5, §8.16): device -> local memory, completed by a wait
#: the largest N of ``cp.async.wait N`` (groups a thread may leave pending; PTX wait_group takes small constants)
MAX_ASYNC_WAIT = 7
C = Category.ASYNC_COPY
for t in (T.B32, T.B64, T.B128):
    _def(f"cp.async.{t.spelling}", C, "cp_async", (Operand.LADDR, Operand.DADDR), t,
         f"start copying {t.nbytes} bytes from device memory to local memory (both aligned to {t.nbytes}); "
         "the local bytes are defined only after a cp.async.wait that completes the copy's group",
         flags=Flag.LOAD | Flag.STORE)
# commit and wait order the thread's copies and local accesses: never pure (no flag says so)
_def("cp.async.commit", C, "cp_commit", (), None,
     "close the thread's copies issued since its previous commit into one group (possibly empty)", pure=False)
_def("cp.async.wait", C, "cp_wait", (Operand.IMM32,), T.U32,
     "wait until at most N (immediate, 0..7) of the thread's committed groups are incomplete; the "
     "completed copies' local bytes are then visible to the thread", pure=False)


# wave-group MMA (docs/spec.md §8.14): B from local memory in the swizzled panel layout, a 16 x N
# accumulator strip in consecutive slots; appended after the async copies (MMA opcodes continue)
C = Category.MMA
for asy in (False, True):  # then the asynchronous form: the same product, in flight until an mma.wait
    for t in (T.F16, T.BF16):
        for gn in GROUP_N:
            what = (f"start mma.group.m16n{gn}k16 (one group of the wave's in-flight MMA): its accumulators, A "
                    "and B bytes stay in use until an mma.wait completes it" if asy else
                    f"accumulators fD..fD+{gn // 16 - 1} (a 16x{gn} strip) += fragment A x the 16x{gn} "
                    f"{t.spelling} B tile in local memory (swizzled panel layout, panel stride rS bytes); four "
                    "waves of a group together")
            _def(f"mma.group.{'async.' if asy else ''}m16n{gn}k16.f32.{t.spelling}", C, "fgmma",
                 (Operand.FD, Operand.FS, Operand.LADDR, S), T.F32, what,
                 det=Determinism.BOUNDED, cap=_WAVE_FRAG, flags=WC | Flag.LOAD, src_type=t,
                 variant=f"n{gn}.{'async.' if asy else ''}m16n16k16", pure=False if asy else None)
_def("mma.wait", C, "fwait", (Operand.IMM32,), T.U32,
     "wait until at most N (immediate, 0..7) of the wave's mma.group.async groups are incomplete",
     cap=_WAVE_FRAG, flags=WC, pure=False)
del gn, asy, what

_ACC_CAP = _WAVE_FRAG | Capability.MMA_ACC
# wave-group MMA with B given transposed (docs/spec.md §8.14): the tile holds B^T, N rows of 16-bit
# elements along k (a key-major K block for Q K^T), 128-byte swizzled; appended after mma.wait
for asy in (False, True):
    for t in (T.F16, T.BF16):
        for gn in GROUP_N:
            _def(f"mma.group.bt.{'async.' if asy else ''}m16n{gn}k16.f32.{t.spelling}", C, "fgmma",
                 (Operand.FD, Operand.FS, Operand.LADDR, S), T.F32,
                 f"accumulators fD..fD+{gn // 16 - 1} += fragment A x B, B's transpose (N = {gn} rows of 16 "
                 f"{t.spelling} along k) in local memory in the swizzled row layout" + (" (in flight until an "
                 "mma.wait)" if asy else ""),
                 det=Determinism.BOUNDED, cap=_ACC_CAP, flags=WC | Flag.LOAD, src_type=t,
                 variant=f"n{gn}.bt.{'async.' if asy else ''}m16n16k16", pure=False if asy else None)
del gn, asy

# accumulator row and element operations (docs/spec.md §8.14, "Accumulator operations"): what an
# online softmax needs on the accumulators without the layout becoming observable
FD, FS = Operand.FD, Operand.FS
for rn in ROW_N:
    _def(f"mma.rowmax.n{rn}.m16n16k16.f32", C, "frowmax", (FD, FS, FS), T.F32,
         f"d[i][j] = max(c[i][j], max over the {rn} columns of row i of the strip a..a+{rn // 16 - 1}) "
         "(maximumNumber; a zero result's sign unspecified)",
         det=Determinism.BOUNDED, cap=_ACC_CAP, flags=WC, variant=f"n{rn}.m16n16k16")
    _def(f"mma.rowsum.n{rn}.m16n16k16.f32", C, "frowsum", (FD, FS, FS), T.F32,
         f"d[i][j] = c[i][j] + the sum of the {rn} columns of row i of the strip a..a+{rn // 16 - 1} (f32, "
         "order implementation-defined)",
         det=Determinism.BOUNDED, cap=_ACC_CAP, flags=WC, variant=f"n{rn}.m16n16k16")
_def("mma.exp2.m16n16k16.f32", C, "fexp2", (FD, FS, FS, S), T.F32,
     "d[i][j] ~ 2^(fma(a[i][j], rS, -b[i][j])) (exp2 within 2 ulp)",
     det=Determinism.BOUNDED, cap=_ACC_CAP, flags=WC, variant="m16n16k16")
_def("mma.mul.m16n16k16.f32", C, "fmul", (FD, FS, FS), T.F32, "d = a * b element-wise (f32, nearest even)",
     det=NAN_, cap=_ACC_CAP, flags=WC, variant="m16n16k16")
_def("mma.div.m16n16k16.f32", C, "fdiv", (FD, FS, FS), T.F32,
     "d = a / b element-wise (f32, correctly rounded)", det=NAN_, cap=_ACC_CAP, flags=WC, variant="m16n16k16")
_def("mma.mask.m16n16k16.f32", C, "fmask", (FD, FS, S, S), T.F32,
     "d[i][j] = a[i][j] if j - i <= rA and j < rB (signed) else -inf", det=DET, cap=_ACC_CAP, flags=WC,
     variant="m16n16k16")
for t in (T.F16, T.BF16):
    _def(f"mma.cvt.a.m16n16k16.{t.spelling}", C, "fcvt", (FD, FS), t,
         f"A fragment d = accumulator a rounded to {t.spelling} (nearest even), element (i, j) to (i, k = j)",
         det=NAN_, cap=_ACC_CAP, flags=WC, src_type=T.F32, variant="a.m16n16k16")
del FD, FS, rn

INSTRUCTIONS: tuple[InstrDef, ...] = tuple(_RECORDS)
BY_MNEMONIC: dict[str, InstrDef] = {d.mnemonic: d for d in INSTRUCTIONS}
BY_OPCODE: dict[int, InstrDef] = {d.opcode: d for d in INSTRUCTIONS}
if len(BY_MNEMONIC) != len(INSTRUCTIONS) or len(BY_OPCODE) != len(INSTRUCTIONS):
    raise AssertionError("instruction table has duplicate mnemonics or opcodes")
del C, t, shape, scope_flag, fcap, ins_types, where, spaces, role, space, addr

if len({d.sem for d in INSTRUCTIONS} & set(BY_MNEMONIC)):
    raise AssertionError("a semantic key equals a mnemonic (dispatch keys would be ambiguous)")
