"""The compiler's typed IR: instructions on virtual values inside structured regions.

Shape (design.md §3.1, MLIR ``scf`` as the model): a body is a list of nodes; a node is an
:class:`Op` (one WAVE instruction on virtual :class:`Value` operands, chosen from the
instruction table), or a structured node — :class:`If` (then/else regions), :class:`Loop`
(a body region, left by :class:`Break`), :class:`Break`, :class:`Continue`, :class:`Halt`.
Lowering to the ISA is a walk: the structure *is* the ISA's structure.

Values are virtual registers. *Temporaries* have one definition that precedes every use in
program order; *variables* (``Value.is_var``) are the kernel's mutable Python variables and
may be assigned in several places (the "mutable variables lowered to registers" form of
structured IR). Passes treat only temporaries as pure SSA values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from anywave.binary.structure import walk as _walk
from anywave.errors import SourceLoc
from anywave.isa.table import BY_MNEMONIC, Category, Flag, InstrDef, Operand

from .types import DType

_ids = itertools.count()


@dataclass(eq=False)
class Value:
    """A virtual register holding a value of ``type`` (``pred`` values live in predicate
    registers; 64-bit ones in register pairs)."""

    type: DType
    name: str = ""
    is_var: bool = False
    id: int = field(default_factory=_ids.__next__)
    #: a vector value (``vec2``/``vec4``: the destination of ``ld.*.b64``/``b128`` or the
    #: source of ``st.*``) names its 32-bit components; each component has ``parent`` set and
    #: lives in register ``reg(parent) + part``. An instruction that defines or reads the
    #: vector defines or reads its components too (``Op.defs``/``Op.uses`` list them).
    parts: tuple[Value, ...] = field(default=(), repr=False)
    parent: Value | None = field(default=None, repr=False)
    part: int = 0

    def __repr__(self) -> str:
        return f"%{self.name or 'v'}{self.id}:{self.type.name}"


@dataclass(frozen=True, eq=False)
class PredUse:
    """A source predicate operand, optionally negated."""

    value: Value
    negated: bool = False


@dataclass(frozen=True, eq=False)
class DevAddr:
    """``buffer[offset + imm]``; ``wide``: ``offset`` is a 64-bit value (``.o64`` form)."""

    buffer: int
    offset: Value
    imm: int = 0


@dataclass(frozen=True, eq=False)
class LocAddr:
    """Local memory ``[offset + imm]``."""

    offset: Value
    imm: int = 0


#: per instruction record (keyed by id(defn)): (indices of destination operands, indices of
#: the other operands, whether vector operands count with their components: a load or store
#: wider than 32 bits) in assembly order, from the table's ``dests`` — computed once, so
#: ``defs``/``uses`` do not re-test every operand of every instruction on every call. The
#: "other" operands are the sources and the immediates (CSE keys on both).
_SHAPE: dict[int, tuple[tuple[int, ...], tuple[int, ...], bool]] = {}


def _shape(d: InstrDef) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    r = _SHAPE.get(id(d))
    if r is None:
        # fragment operands (fN) are plain slot numbers: the IR tracks no fragment values
        dst = tuple(i for i in d.dests if d.operands[i] is not Operand.FD)
        src = tuple(i for i in range(len(d.operands)) if i not in dst)
        wide = d.type is not None and d.type.bits > 32 and bool(d.flags & (Flag.LOAD | Flag.STORE))
        r = _SHAPE[id(d)] = (dst, src, wide)
    return r


@dataclass(eq=False)
class Op:
    """One instruction: table record, operands in assembly order, optional guard.

    Operand values by kind: registers → :class:`Value`; ``PS`` → :class:`PredUse`; ``PD`` →
    :class:`Value` (pred); addresses → :class:`DevAddr`/:class:`LocAddr`; immediates and
    enumerations → their plain value (as :class:`anywave.binary.module.Instruction`)."""

    defn: InstrDef
    operands: list[Any]
    loc: SourceLoc | None = None
    guard: PredUse | None = None

    @classmethod
    def make(cls, mnemonic: str, *operands: Any, loc: SourceLoc | None = None) -> Op:
        return cls(BY_MNEMONIC[mnemonic], list(operands), loc)

    @property
    def mnemonic(self) -> str:
        return self.defn.mnemonic

    #: (defn, operands, guard, defs, uses) as last computed: passes ask for an instruction's
    #: defs and uses many times between changes; the operand list is never modified in place
    #: (every change assigns a new list), so identity of the three inputs tells a valid entry
    _du: tuple[Any, ...] | None = field(default=None, init=False, repr=False)

    def _defs_uses(self) -> tuple[Any, ...]:
        c = self._du
        d = self.defn
        ops = self.operands
        g = self.guard
        if c is not None and c[0] is d and c[1] is ops and c[2] is g:
            return c
        n = len(ops)
        sh = _SHAPE.get(id(d)) or _shape(d)
        defs = [ops[i] for i in sh[0] if i < n]
        out: list[Value] = []
        for i in sh[1]:
            if i >= n:
                break
            v = ops[i]
            if isinstance(v, Value):
                out.append(v)
            elif isinstance(v, PredUse):
                out.append(v.value)
            elif isinstance(v, (DevAddr, LocAddr)):
                out.append(v.offset)
        if g is not None:
            out.append(g.value)
        if sh[2]:
            for v in defs[:]:
                if v.parts:
                    defs = [*defs, *v.parts]
            for v in out[:]:
                if v.parts:
                    out.extend(v.parts)
        c = self._du = (d, ops, g, defs, out)
        return c

    def defs(self) -> list[Value]:
        """Values written, in operand order (a shared list: do not modify it)."""
        c = self._du  # the cache check of _defs_uses, inline: this is asked very often
        if c is not None and c[0] is self.defn and c[1] is self.operands and c[2] is self.guard:
            return c[3]
        return self._defs_uses()[3]

    def uses(self) -> list[Value]:
        """Values read — registers, predicates, address offsets, the guard (a shared list:
        do not modify it)."""
        c = self._du
        if c is not None and c[0] is self.defn and c[1] is self.operands and c[2] is self.guard:
            return c[4]
        return self._defs_uses()[4]

    def defs_uses(self) -> tuple[list[Value], list[Value]]:
        """(:meth:`defs`, :meth:`uses`) in one call (shared lists: do not modify them)."""
        c = self._du
        if c is None or c[0] is not self.defn or c[1] is not self.operands or c[2] is not self.guard:
            c = self._defs_uses()
        return c[3], c[4]

    def retarget(self, old: Value, new: Value) -> None:
        """Write ``new`` instead of ``old``, the one value this instruction defines and does not
        read (``defs() == [old]``, ``old not in uses()``): every operand that is ``old`` becomes
        ``new`` (the destinations; the cached defs and uses follow)."""
        c = self._defs_uses()
        ops = [new if o is old else o for o in self.operands]
        self.operands = ops
        d = self.defn
        if not (_SHAPE.get(id(d)) or _shape(d))[2] and old not in c[4]:  # defs: the destinations
            self._du = (d, ops, self.guard, [new if v is old else v for v in c[3]], c[4])

    def replace_uses(self, mapping: dict[Value, Value]) -> None:
        if not mapping:
            return
        ops = self.operands
        if len(ops) > len(self.defn.operands):
            self._replace_uses_slow(mapping)
            return
        if mapping.keys().isdisjoint(self.uses()):  # the usual case: nothing to replace
            return
        new: list[Any] | None = None  # copied on the first replacement only
        for i in _shape(self.defn)[1]:
            if i >= len(ops):
                break
            v = ops[i]
            if isinstance(v, Value):
                r = mapping.get(v)
                if r is None:
                    continue
            elif isinstance(v, PredUse):
                if v.value not in mapping:
                    continue
                r = PredUse(mapping[v.value], v.negated)
            elif isinstance(v, DevAddr):
                if v.offset not in mapping:
                    continue
                r = DevAddr(v.buffer, mapping[v.offset], v.imm)
            elif isinstance(v, LocAddr):
                if v.offset not in mapping:
                    continue
                r = LocAddr(mapping[v.offset], v.imm)
            else:
                continue
            if new is None:
                new = list(ops)
            new[i] = r
        if new is not None:
            self.operands = new
        if self.guard is not None and self.guard.value in mapping:
            self.guard = PredUse(mapping[self.guard.value], self.guard.negated)

    def _replace_uses_slow(self, mapping: dict[Value, Value]) -> None:
        """:meth:`replace_uses` for an operand list longer than the record's (extra operands
        are dropped, as ``zip`` drops them)."""
        new: list[Any] = []
        for k, v in zip(self.defn.operands, self.operands, strict=False):
            if not k.is_dest:
                if isinstance(v, Value):
                    v = mapping.get(v, v)
                elif isinstance(v, PredUse) and v.value in mapping:
                    v = PredUse(mapping[v.value], v.negated)
                elif isinstance(v, DevAddr) and v.offset in mapping:
                    v = DevAddr(v.buffer, mapping[v.offset], v.imm)
                elif isinstance(v, LocAddr) and v.offset in mapping:
                    v = LocAddr(mapping[v.offset], v.imm)
            new.append(v)
        self.operands = new
        if self.guard is not None and self.guard.value in mapping:
            self.guard = PredUse(mapping[self.guard.value], self.guard.negated)

    @property
    def is_pure(self) -> bool:
        """No side effect and cannot fault: may be removed, duplicated, hoisted or executed
        speculatively."""
        d = self.defn
        # the table's purity, for records with a result the IR tracks: MMA fragment records act
        # on the fragment file, which the IR does not model, and a record without a result
        # (nop) is removed by DCE on its own
        return d.pure and d.category is not Category.MMA and bool(d.dests)

    def __repr__(self) -> str:
        g = f"@{'!' if self.guard.negated else ''}{self.guard.value} " if self.guard else ""
        return f"{g}{self.mnemonic} " + ", ".join(map(repr, self.operands))


@dataclass(eq=False)
class If:
    cond: PredUse
    then: list[Node] = field(default_factory=list)
    orelse: list[Node] = field(default_factory=list)
    loc: SourceLoc | None = None


@dataclass(eq=False)
class Loop:
    body: list[Node] = field(default_factory=list)
    loc: SourceLoc | None = None


@dataclass(eq=False)
class Break:
    cond: PredUse | None = None
    loc: SourceLoc | None = None


@dataclass(eq=False)
class Continue:
    cond: PredUse | None = None
    loc: SourceLoc | None = None


@dataclass(eq=False)
class Halt:
    cond: PredUse | None = None
    loc: SourceLoc | None = None


Node = Op | If | Loop | Break | Continue | Halt


def node_uses(n: Node) -> list[Value]:
    """Values a node reads directly (not those of nested regions)."""
    if isinstance(n, Op):
        return n.uses()
    c = getattr(n, "cond", None)
    return [c.value] if c is not None else []


def regions(n: Node) -> tuple[list[Node], ...]:
    """The regions directly inside node ``n``, in code order (``()`` for a leaf)."""
    t = type(n)
    if t is Op:  # the usual node (Op, If and Loop have no subclasses)
        return ()
    if t is If:
        return (n.then, n.orelse)  # type: ignore[union-attr]
    if t is Loop:
        return (n.body,)  # type: ignore[union-attr]
    return ()


def walk(body: list[Node]) -> Iterator[Node]:
    """Every node, pre-order, nested regions included (then-region before else-region): the
    region walker of :mod:`anywave.binary.structure`, the one the ISA's tree uses, over this
    IR's :func:`regions`."""
    return _walk(body, regions)


def dump(body: list[Node], indent: int = 0) -> str:
    """Readable text of a body (debugging)."""
    pad = "  " * indent
    lines: list[str] = []
    for n in body:
        if isinstance(n, Op):
            lines.append(pad + repr(n))
        elif isinstance(n, If):
            lines.append(pad + f"if {'!' if n.cond.negated else ''}{n.cond.value}")
            lines.append(dump(n.then, indent + 1))
            if n.orelse:
                lines.append(pad + "else")
                lines.append(dump(n.orelse, indent + 1))
            lines.append(pad + "endif")
        elif isinstance(n, Loop):
            lines.append(pad + "loop")
            lines.append(dump(n.body, indent + 1))
            lines.append(pad + "endloop")
        else:
            c = getattr(n, "cond", None)
            cs = f" {'!' if c.negated else ''}{c.value}" if c else ""
            lines.append(pad + type(n).__name__.lower() + cs)
    return "\n".join(x for x in lines if x)


def vector(vt: DType, elem: DType, n: int, *, is_var: bool = False, name: str = "vec") -> Value:
    """A vector value of type ``vt`` (``vec2``/``vec4``) with ``n`` 32-bit components of
    type ``elem`` (see :attr:`Value.parts`). ``is_var``: the components are written one by
    one (the source of a vector store), so passes treat them as variables."""
    v = Value(vt, name, is_var=is_var)
    v.parts = tuple(Value(elem, f"{name}.{i}", is_var=is_var, parent=v, part=i) for i in range(n))
    return v
