"""Optimisation passes on the structured IR, all in place.

* **constant folding** — an instruction whose register operands are all constants is
  evaluated by the emulator's own semantics (the oracle), so folding can never change a
  result; approximate instructions are never folded (a target may round differently).
* **strength reduction** — integer ``mul`` by 2^k → ``shl``; unsigned ``div``/``rem`` by
  2^k → ``shr``/``and``; ``x + 0``, ``x * 1`` → copies.
* **copy propagation** — uses of a temporary copied from another temporary read the source.
* **CSE** — pure instructions with the same operands (variables by version) are computed
  once; scoped over regions (a value computed in a branch is not reused after it).
* **LICM** — pure instructions whose operands do not change inside a loop move before it.
* **if-conversion** — a small ``if``/``else`` with only pure instructions becomes
  straight-line code with ``selp`` on the variables it assigns.
* **DCE** — pure instructions whose results are never read are removed.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np

from anywave.binary.module import Instruction, Pred
from anywave.isa.index import lookup
from anywave.isa.table import BY_MNEMONIC, Category, Determinism, Operand
from anywave.isa.types import ScalarType

from . import ir
from .ir import Op, PredUse, Value

IF_CONVERT_MAX_OPS = 6


def optimize(body: list[ir.Node]) -> None:
    """Run every pass in place: two rounds of fold, strength reduction, copy propagation, CSE,
    LICM and DCE (folding exposes CSE and vice versa), then if-conversion and DCE.

    The result is that of running the second round in full, but a pass of the second round
    runs only when the passes since its first run can have given it work; otherwise it
    would change nothing. The argument (temporaries are defined before every use in program
    order, module docstring of :mod:`~anywave.compiler.ir`):

    * each of the six passes is idempotent: run on its own output it changes nothing
      (folding, strength reduction and copy propagation handle chains in one walk; CSE and
      LICM decide on operands and regions their own removals and moves do not change; DCE
      runs to a fixed point);
    * folding gets new work only from a use redirected to a constant (copy propagation of a
      ``movi`` or constant-predicate result) or from a strength-reduced instruction whose
      sources are all constants: CSE merges only instructions of one opcode and operands, so
      a merged value is a constant exactly when the one it becomes is; LICM moves, DCE removes
      (what folds depends on operands only);
    * strength reduction likewise gets work only from a use redirected to a constant, or from
      folding (new constants);
    * copy propagation gets work only from new copies, which only strength reduction creates
      (``x + 0``, ``x * 1``): the copies it saw have no uses left, and CSE redirects only to
      values whose uses it already rewrote;
    * CSE gets work only from instructions moved across regions (LICM) or changed by the
      passes before it in the round: DCE removes only instructions nothing reads (a variable
      whose version it would change is read nowhere);
    * LICM gets work only from a change inside a loop (or a new or changed instruction); DCE
      from any change, and the second round's DCE matters only to if-conversion: without an
      ``if`` left, the last DCE reaches the same fixed point. The last DCE has work only after
      a change: an ``if`` (if-conversion), a new or moved instruction, or a CSE removal that
      left a value unread (every value an instruction CSE removed reads is also read by the
      instruction it kept, so this does not happen; an ``if`` region CSE shortened counts).

    tests/test_compiler_passes.py checks the result against the two full rounds for every
    kernel of the library and of the compiler tests."""
    fold_constants(body)
    body[:], sr_const, _ = _strength_reduce(body)
    cp_const, _ = _copy_propagate(body)
    _cse(body)
    hoisted = licm(body)
    dce(body)
    # the second round: each pass when the first round's changes can have given it work
    folded = (sr_const or cp_const) and fold_constants(body)
    reduced = copied = False
    if cp_const or folded:
        body[:], _, reduced = _strength_reduce(body)
    if reduced:
        _, copied = _copy_propagate(body)
    changed = folded or reduced or copied
    merged = merged_in_loop = False
    no_dead = True
    if hoisted or changed:
        merged, merged_in_loop, no_dead = _cse(body)
    moved = (merged_in_loop or changed) and licm(body)
    has_if = any(isinstance(n, ir.If) for n in ir.walk(body))
    if (changed or merged or moved) and has_if:
        dce(body)  # (without an if, if-conversion changes nothing: the last DCE does the same)
    if_convert(body)
    if has_if or changed or moved or (merged and not no_dead):
        dce(body)


# ----------------------------------------------------------------------------- helpers

def _consts(body: list[ir.Node]) -> dict[Value, int]:
    """Temporaries defined by a ``movi`` (their bit pattern)."""
    out: dict[Value, int] = {}
    for n in ir.walk(body):
        if isinstance(n, Op) and n.defn.sem == "move.movi" and not n.operands[0].is_var and n.guard is None:
            out[n.operands[0]] = int(n.operands[1])
    return out


def _movi(dst: Value, bits: int, loc: Any) -> Op:
    if dst.type.name == "pred":
        return Op(BY_MNEMONIC["setp.true" if bits else "setp.false"], [dst], loc)
    if dst.type.regs == 2:
        return Op(BY_MNEMONIC["movi.b64"], [dst, bits & (2**64 - 1)], loc)
    return Op(BY_MNEMONIC["movi.b32"], [dst, bits & 0xFFFFFFFF], loc)


class _FakeBatch:
    def __init__(self, nregs: int) -> None:
        self.regs = np.zeros((nregs, 1), np.uint32)
        self.preds = np.zeros((8, 1), bool)


_FOLDABLE = {Category.INTEGER, Category.FLOAT, Category.BITWISE, Category.CONVERT, Category.COMPARE}


def _evaluate(op: Op, consts: dict[Value, int], pconsts: dict[Value, bool]) -> int | None:
    """Bits of the result of ``op`` on constant operands, by the emulator's semantics."""
    from anywave.emu.machine import compile_instruction

    regs: list[int] = []
    slot = 0
    operands: list[Any] = []
    preds: list[bool] = []
    for k, v in zip(op.defn.operands, op.operands, strict=True):
        if k in (Operand.RS, Operand.RS64):
            operands.append(slot)
            bits = consts[v]
            regs.append(bits & 0xFFFFFFFF)
            if k is Operand.RS64:
                regs.append(bits >> 32)
            slot += 2 if k is Operand.RS64 else 1
        elif k is Operand.PS:
            operands.append(Pred(len(preds), v.negated))
            preds.append(pconsts[v.value])
        elif k in (Operand.RD, Operand.RD64):
            operands.append(-1)
        elif k is Operand.PD:
            operands.append(7)
        else:
            operands.append(v)
    dst = slot
    operands = [dst if o == -1 and k in (Operand.RD, Operand.RD64) else o
                for k, o in zip(op.defn.operands, operands, strict=True)]
    st = _FakeBatch(slot + 2)
    for i, b in enumerate(regs):
        st.regs[i, 0] = b
    for i, b in enumerate(preds):
        st.preds[i, 0] = b
    run = compile_instruction(Instruction(op.defn, tuple(operands)))
    if run is None:
        return None
    with np.errstate(all="ignore"):
        run(st, np.ones(1, bool), True)
    kd = op.defn.operands[op.defn.dests[0]]
    if kd is Operand.PD:
        return int(bool(st.preds[7, 0]))
    if kd is Operand.RD64:
        return int(st.regs[dst, 0]) | (int(st.regs[dst + 1, 0]) << 32)
    return int(st.regs[dst, 0])


# ----------------------------------------------------------------------------- folding

#: per instruction record (keyed by id(defn)): _SKIP, _PCONST (``setp.true``/``setp.false``)
#: or _CANDIDATE (foldable when its operands are constants) — a property of the record alone
_FOLD_KIND: dict[int, int] = {}
_SKIP, _PCONST, _CANDIDATE = range(3)


def _fold_kind(n: Op) -> int:
    d = n.defn
    r = _FOLD_KIND.get(id(d))
    if r is None:
        if d.sem == "pred.setp_const":
            r = _PCONST
        elif (d.category not in _FOLDABLE or d.determinism is Determinism.APPROX or not n.is_pure
              or any(k in (Operand.RS128, Operand.RD128) for k in d.operands)):
            r = _SKIP
        else:
            r = _CANDIDATE
            _FOLD_SRC[id(d)] = (tuple(i for i in d.srcs if d.operands[i] in (Operand.RS, Operand.RS64)),
                                tuple(i for i in d.srcs if d.operands[i] is Operand.PS))
        _FOLD_KIND[id(d)] = r
    return r


#: per candidate record: (indices of register sources, indices of predicate sources)
_FOLD_SRC: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def fold_constants(body: list[ir.Node]) -> bool:
    """Replace every instruction whose operands are constants by the constant it computes;
    True when it replaced any."""
    consts = _consts(body)
    pconsts: dict[Value, bool] = {}
    changed = False
    for n in ir.walk(body):
        if not isinstance(n, Op) or n.guard is not None:
            continue
        kind = _FOLD_KIND.get(id(n.defn))
        if kind is None:
            kind = _fold_kind(n)
        if kind == _SKIP:
            continue
        d = n.defn
        if kind == _PCONST:
            if not n.operands[0].is_var:
                pconsts[n.operands[0]] = d.variant == "true"
            continue
        defs = n.defs()
        if len(defs) != 1 or defs[0].is_var:
            continue
        ops = n.operands
        if len(ops) != len(d.operands):
            raise ValueError(f"{d.mnemonic}: {len(ops)} operands, the record has {len(d.operands)}")
        rs, ps = _FOLD_SRC[id(d)]
        foldable = True  # every source a constant (loops, not all(): most fail at the first)
        for i in rs:
            if ops[i] not in consts:
                foldable = False
                break
        if foldable:
            for i in ps:
                if ops[i].value not in pconsts:
                    foldable = False
                    break
        if not foldable:
            continue
        bits = _evaluate(n, consts, pconsts)
        if bits is None:
            continue
        new = _movi(defs[0], bits, n.loc)
        n.defn, n.operands = new.defn, new.operands
        changed = True
        if defs[0].type.name == "pred":
            pconsts[defs[0]] = bool(bits)
        else:
            consts[defs[0]] = bits
    return changed


# ----------------------------------------------------------------------------- strength reduction

def _pow2(bits: int, width: int) -> int | None:
    bits &= (1 << width) - 1
    if bits > 0 and bits & (bits - 1) == 0:
        return bits.bit_length() - 1
    return None


def strength_reduce(body: list[ir.Node]) -> list[ir.Node]:
    """The body with integer multiplications, unsigned divisions and remainders by powers of
    two (and ``x + 0``, ``x * 1``) replaced by shifts, masks and copies."""
    return _strength_reduce(body)[0]


def _strength_reduce(body: list[ir.Node]) -> tuple[list[ir.Node], bool, bool]:
    """:func:`strength_reduce`: (the body, some replacement reads constants only, it replaced
    any instruction)."""
    consts = _consts(body)
    flags = [False, False]

    def go(nodes: list[ir.Node]) -> list[ir.Node]:
        out: list[ir.Node] = []
        for n in nodes:
            if isinstance(n, ir.If):
                n.then = go(n.then)
                n.orelse = go(n.orelse)
            elif isinstance(n, ir.Loop):
                n.body = go(n.body)
            elif isinstance(n, Op) and n.guard is None and _SR_CAND.get(id(n.defn), n) is not None:
                rep = _reduce(n, consts)
                if rep is not None:
                    out.extend(rep)
                    flags[1] = True
                    if not flags[0]:
                        made = {r.operands[0] for r in rep if r.defn.sem == "move.movi"}
                        flags[0] = all(u in consts or u in made for r in rep if r.defn.sem != "move.movi"
                                       for u in r.uses())
                    continue
            out.append(n)
        return out

    out = go(body)
    return out, flags[0], flags[1]


#: per instruction record (keyed by id(defn)): (operation, type) when strength reduction may
#: apply to it (``mul``/``div``/``rem``/``add`` on an integer type), else None
_SR_CAND: dict[int, tuple[str, ScalarType] | None] = {}
_SR_SEMS = frozenset({"int.mul", "int.div", "int.rem", "int.add"})


def _sr_candidate(d: Any) -> tuple[str, ScalarType] | None:
    try:
        return _SR_CAND[id(d)]
    except KeyError:
        pass
    r = (d.op, d.type) if d.sem in _SR_SEMS else None
    _SR_CAND[id(d)] = r
    return r


def _bits_type(width: int) -> ScalarType:
    return ScalarType.B64 if width == 64 else ScalarType.B32


def _reduce(n: Op, consts: dict[Value, int]) -> list[ir.Node] | None:
    cand = _sr_candidate(n.defn)
    if cand is None or len(n.operands) != 3:
        return None
    op, t = cand
    width = t.bits
    d, a, b = n.operands
    if op in ("mul", "add") and a in consts and b not in consts:
        a, b = b, a
    if b not in consts:
        return None
    c = consts[b] & ((1 << width) - 1)
    mov = lookup("mov", type=_bits_type(width))
    if op == "add" and c == 0:
        return [Op(mov, [d, a], n.loc)]
    if op == "mul":
        if c == 1:
            return [Op(mov, [d, a], n.loc)]
        k = _pow2(c, width)
        if k is None:
            return None
        kv = Value(_u32(), "k")
        return [Op(BY_MNEMONIC["movi.b32"], [kv, k], n.loc),
                Op(lookup("shl", type=_bits_type(width)), [d, a, kv], n.loc)]
    if op in ("div", "rem") and not t.is_signed:
        k = _pow2(c, width)
        if k is None:
            return None
        if op == "div":
            kv = Value(_u32(), "k")
            return [Op(BY_MNEMONIC["movi.b32"], [kv, k], n.loc), Op(lookup("shr", type=t), [d, a, kv], n.loc)]
        mv = Value(b.type, "mask")
        return [_movi(mv, c - 1, n.loc), Op(lookup("and", type=_bits_type(width)), [d, a, mv], n.loc)]
    return None


def _u32() -> Any:
    from .types import u32

    return u32


# ----------------------------------------------------------------------------- copies

#: copies: register moves and predicate moves (``mov.pred p2, [!]p1``)
_COPIES = frozenset({"move.mov", "pred.mov"})


def copy_propagate(body: list[ir.Node]) -> bool:
    """``t2 = mov t1`` with both temporaries: every use of t2 reads t1.

    Predicates are copied by ``mov.pred p2, [!]p1`` whose source is a :class:`PredUse`, not
    a register: uses of ``p2`` become uses of ``p1`` with the negations combined (every
    predicate use is a :class:`PredUse` — operands, guards and region conditions).

    Returns True when it found a copy to propagate."""
    return _copy_propagate(body)[1]


def _copy_propagate(body: list[ir.Node]) -> tuple[bool, bool]:
    """:func:`copy_propagate`: (a copy's source is a constant — a ``movi`` or constant-predicate
    result, so uses may have become constants; it found a copy to propagate)."""
    mapping: dict[Value, Value] = {}
    pmap: dict[Value, PredUse] = {}
    const_defs: set[Value] = set()  # temporaries of movi / setp.true / setp.false without guard
    for n in ir.walk(body):
        if not isinstance(n, Op) or n.guard is not None:
            continue
        sem = n.defn.sem
        if sem not in _COPIES:
            if sem == "move.movi" or sem == "pred.setp_const":
                const_defs.add(n.operands[0])
            continue
        dst, src = n.operands[0], n.operands[1]
        if dst.is_var:
            continue
        if isinstance(src, PredUse):
            if src.value.is_var:
                continue
            root = pmap.get(src.value)
            pmap[dst] = (PredUse(root.value, root.negated != src.negated) if root is not None else src)
        elif isinstance(src, Value):
            if not src.is_var and dst.type.regs == src.type.regs:
                mapping[dst] = mapping.get(src, src)
    if mapping:
        _replace_uses(body, mapping)
    if pmap:
        _replace_pred_uses(body, pmap)
    to_const = (any(v in const_defs for v in mapping.values())
                or any(pu.value in const_defs for pu in pmap.values()))
    return to_const, bool(mapping or pmap)


def _subst_pred(pu: PredUse, pmap: dict[Value, PredUse]) -> PredUse:
    r = pmap.get(pu.value)
    if r is None:
        return pu
    return PredUse(r.value, r.negated != pu.negated)


def _replace_pred_uses(body: list[ir.Node], pmap: dict[Value, PredUse]) -> None:
    """Rewrite every predicate use of a key of ``pmap`` to the mapped (possibly negated) use."""
    for n in ir.walk(body):
        if isinstance(n, Op):
            ops, kinds = n.operands, n.defn.operands
            # a new operand list only where a predicate source is mapped (the others keep theirs,
            # and with it their cached defs and uses)
            if len(ops) != len(kinds) or any(isinstance(v, PredUse) and not k.is_dest and v.value in pmap
                                             for k, v in zip(kinds, ops, strict=True)):
                n.operands = [_subst_pred(v, pmap) if (isinstance(v, PredUse) and not k.is_dest) else v
                              for k, v in zip(kinds, ops, strict=True)]
            if n.guard is not None:
                n.guard = _subst_pred(n.guard, pmap)
        else:
            c = getattr(n, "cond", None)
            if c is not None:
                n.cond = _subst_pred(c, pmap)  # type: ignore[union-attr]


def _replace_uses(body: list[ir.Node], mapping: dict[Value, Value]) -> bool:
    """Rewrite every use of a key of ``mapping``; True when there was one. (Each node on its
    own, so the regions are visited in any order; an instruction none of whose uses is a key
    is left as :meth:`Op.replace_uses` leaves it.)"""
    changed = False
    keys = mapping.keys()
    stack = [body]
    while stack:
        for n in stack.pop():
            if isinstance(n, Op):
                if len(n.operands) <= len(n.defn.operands) and keys.isdisjoint(n.uses()):
                    continue
                ops, g = n.operands, n.guard
                n.replace_uses(mapping)
                if ops is not n.operands or g is not n.guard:
                    changed = True
                continue
            if isinstance(n, ir.If):
                stack.append(n.then)
                stack.append(n.orelse)
            elif isinstance(n, ir.Loop):
                stack.append(n.body)
            c = getattr(n, "cond", None)
            if c is not None and c.value in mapping:
                n.cond = PredUse(mapping[c.value], c.negated)  # type: ignore[union-attr]
                changed = True
    return changed


# ----------------------------------------------------------------------------- CSE

def _region_vars(nodes: list[ir.Node], memo: dict[int, set[Value]]) -> set[Value]:
    """The variables an instruction of region ``nodes`` (at any depth) defines, memoised per
    nested region (linear, not quadratic, in the nesting depth)."""
    hit = memo.get(id(nodes))
    if hit is not None:
        return hit
    out: set[Value] = set()
    for n in nodes:
        if isinstance(n, Op):
            for v in n.defs():
                if v.is_var:
                    out.add(v)
        elif isinstance(n, ir.If):
            out |= _region_vars(n.then, memo)
            out |= _region_vars(n.orelse, memo)
        elif isinstance(n, ir.Loop):
            out |= _region_vars(n.body, memo)
    memo[id(nodes)] = out
    return out


def cse(body: list[ir.Node]) -> bool:
    """Common-subexpression elimination (module docstring); True when it removed any
    instruction."""
    return _cse(body)[0]


def _cse(body: list[ir.Node]) -> tuple[bool, bool, bool]:
    """:func:`cse`: (it removed any instruction, it changed a node inside a loop: removed it
    or rewrote its operands, it left no instruction dead that was not: every value a removed
    instruction read is still read, and no region of an ``if`` lost an instruction)."""
    memo: dict[int, set[Value]] = {}
    depth = 0  # loop nesting depth of the walk
    in_loop = False  # a node inside a loop changed
    in_if = 0  # if nesting depth of the walk
    lost: list[Value] = []  # the values removed instructions read
    if_lost = False  # an instruction inside an if was removed
    #: every value read by a node kept so far (after its rewrite): a value read before its
    #: definition is visited (not expected: temporaries are defined first) keeps the reads
    #: the walk passed before it was mapped, and only then is the final rewrite needed
    read: set[Value] = set()
    late = False
    #: a variable's version: a fresh number at each assignment (only equality matters)
    version: dict[Value, int] = {}
    fresh = itertools.count(1).__next__
    mapping: dict[Value, Value] = {}
    keys = mapping.keys()

    def bump(vs: set[Value]) -> None:
        for v in vs:
            version[v] = fresh()

    def key_of(n: Op) -> tuple[Any, ...]:
        d = n.defn
        ops = n.operands
        parts: list[Any] = [d.opcode]
        if len(ops) != len(d.operands):
            raise ValueError(f"{d.mnemonic}: {len(ops)} operands, the record has {len(d.operands)}")
        for i in (ir._SHAPE.get(id(d)) or ir._shape(d))[1]:
            v = ops[i]
            if isinstance(v, Value):
                v = mapping.get(v, v)
                parts.append((v.id, version.get(v, 0)))
            elif isinstance(v, PredUse):
                pv = mapping.get(v.value, v.value)
                parts.append((pv.id, v.negated, version.get(pv, 0)))
            else:
                parts.append(repr(v))
        return tuple(parts)

    # one table for the whole walk, scoped by an undo log: a region's entries are dropped
    # when it is left (the same as giving every region a copy of its parent's table, without
    # copying the table at each of thousands of unrolled regions)
    table: dict[tuple[Any, ...], Value] = {}
    log: list[tuple[tuple[Any, ...], Value | None]] = []

    def undo(mark: int) -> None:
        while len(log) > mark:
            k, old = log.pop()
            if old is None:
                del table[k]
            else:
                table[k] = old

    def go(nodes: list[ir.Node]) -> set[Value]:
        """CSE over ``nodes``; returns the variables the region assigns (nested regions
        included: what :func:`_region_vars` gives — CSE never removes a variable's
        definition, so the set is the same before and after the visit)."""
        nonlocal depth, in_loop, late, in_if, if_lost
        keep: list[ir.Node] = []
        assigned: set[Value] = set()
        for n in nodes:
            if isinstance(n, Op):
                defs, uses = n.defs_uses()
                d = n.defn
                long = len(n.operands) > len(d.operands)
                # n.replace_uses(mapping), which changes nothing when no use is a key (the usual case)
                if mapping and (long or not keys.isdisjoint(uses)):
                    ops, g = n.operands, n.guard
                    n.replace_uses(mapping)
                    if ops is not n.operands or g is not n.guard:
                        defs, uses = n.defs_uses()
                        if depth:
                            in_loop = True
                if long:
                    late = True  # (Op.replace_uses drops the extra operands: leave that to the final rewrite)
                if len(defs) == 1:
                    d0 = defs[0]
                    if d0.is_var:
                        version[d0] = fresh()
                        assigned.add(d0)
                    elif n.guard is None and (_PURE.get(id(d)) if id(d) in _PURE else _pure(n)):
                        key = key_of(n)
                        prev = table.get(key)
                        if prev is not None and prev.type.regs == d0.type.regs:
                            mapping[d0] = prev
                            if d0 in read:
                                late = True
                            if depth:
                                in_loop = True
                            lost.extend(uses)
                            if in_if:
                                if_lost = True
                            continue
                        log.append((key, prev))
                        table[key] = d0
                elif defs:
                    vs = {v for v in defs if v.is_var}
                    if vs:
                        bump(vs)
                        assigned |= vs
                read.update(uses)
            elif isinstance(n, ir.If):
                c = n.cond
                if c.value in mapping:
                    n.cond = PredUse(mapping[c.value], c.negated)
                    if depth:
                        in_loop = True
                read.add(n.cond.value)
                mark = len(log)
                in_if += 1
                changed = go(n.then)
                undo(mark)
                changed = changed | go(n.orelse)
                in_if -= 1
                undo(mark)
                bump(changed)
                assigned |= changed
            elif isinstance(n, ir.Loop):
                inside = _region_vars(n.body, memo)
                bump(inside)
                mark = len(log)
                depth += 1
                go(n.body)
                depth -= 1
                undo(mark)
                bump(inside)
                assigned |= inside
            else:
                c = getattr(n, "cond", None)
                if c is not None:
                    if c.value in mapping:
                        n.cond = PredUse(mapping[c.value], c.negated)  # type: ignore[union-attr]
                        if depth:
                            in_loop = True
                    read.add(n.cond.value)  # type: ignore[union-attr]
            keep.append(n)
        if len(keep) != len(nodes):
            nodes[:] = keep
        return assigned

    go(body)
    if late and _replace_uses(body, mapping):
        in_loop = True  # (a use before its definition: not expected; counted as a change in a loop)
    no_dead = not late and not if_lost and all(v in read for v in lost)
    return bool(mapping), in_loop, no_dead


#: per instruction record (keyed by id(defn)): Op.is_pure, a property of the record alone
_PURE: dict[int, bool] = {}


def _pure(n: Op) -> bool:
    r = _PURE[id(n.defn)] = n.is_pure
    return r


# ----------------------------------------------------------------------------- LICM

def licm(body: list[ir.Node]) -> bool:
    """Loop-invariant code motion (module docstring); True when it moved any instruction."""
    moved = [False]

    def go(nodes: list[ir.Node]) -> None:
        i = 0
        while i < len(nodes):
            n = nodes[i]
            if isinstance(n, ir.If):
                go(n.then)
                go(n.orelse)
            elif isinstance(n, ir.Loop):
                go(n.body)
                hoisted = _hoist(n)
                if hoisted:
                    moved[0] = True
                    nodes[i:i] = hoisted
                    i += len(hoisted)
            i += 1

    go(body)
    return moved[0]


def _hoist(loop: ir.Loop) -> list[ir.Node]:
    # every value defined inside (the variables assigned inside among them): an instruction
    # reading one stays, unless it reads a value hoisted before it
    defined_inside: set[Value] = set()
    for n in ir.walk(loop.body):
        if isinstance(n, Op):
            defined_inside.update(n.defs())
    hoisted: list[ir.Node] = []
    out_set: set[Value] = set()
    keep: list[ir.Node] = []
    for n in loop.body:
        if isinstance(n, Op) and n.guard is None and (_PURE.get(id(n.defn)) if id(n.defn) in _PURE else _pure(n)):
            defs, uses = n.defs_uses()
            if (len(defs) == 1 and not defs[0].is_var and defs[0].type.name != "pred"
                    and all((u in out_set) or (u not in defined_inside) for u in uses)):
                hoisted.append(n)
                out_set.add(defs[0])
                continue
        keep.append(n)
    loop.body[:] = keep
    return hoisted


# ----------------------------------------------------------------------------- DCE

def dce(body: list[ir.Node]) -> None:
    """Remove ``nop``s, pure instructions none of whose results is read, and ``if``s left
    with two empty regions, until none is left.

    Use counts are computed once and decremented as nodes go; each sweep visits the body in
    reverse program order, so a chain of dead temporaries (defined before use) goes in one
    sweep. Removability only grows as nodes go, so the result is the same greatest fixed
    point as re-counting after every sweep, in O(nodes) per sweep. Another sweep runs only
    when a value defined by a node already swept lost its last use (a variable assigned
    after its use in a loop), so usually there is one."""
    flat: list[Value] = []
    for n in ir.walk(body):
        if isinstance(n, Op):
            flat.extend(n.uses())
        else:
            c = getattr(n, "cond", None)
            if c is not None:
                flat.append(c.value)
    uses: dict[Value, int] = Counter(flat)

    def go(nodes: list[ir.Node], passed: set[Value]) -> tuple[bool, bool]:
        """One reverse sweep of ``nodes``: (removed anything, a value defined by a node
        already swept lost its last use — only then can another sweep remove more)."""
        removed = again = False
        keep: list[ir.Node] = []
        for n in reversed(nodes):
            if isinstance(n, Op):
                defs, uses_n = n.defs_uses()
                d = n.defn
                dead = d.sem == "ctl.nop"
                if not dead and (_PURE.get(id(d)) if id(d) in _PURE else _pure(n)):
                    dead = True
                    for v in defs:
                        if uses.get(v):
                            dead = False
                            break
                if dead:
                    for v in uses_n:
                        uses[v] -= 1
                        if uses[v] == 0 and v in passed:
                            again = True
                    removed = True
                    continue
                passed.update(defs)
            elif isinstance(n, ir.If):
                for region in (n.orelse, n.then):
                    r, a = go(region, passed)
                    removed = removed or r
                    again = again or a
                if not n.then and not n.orelse:
                    v = n.cond.value
                    uses[v] -= 1
                    if uses[v] == 0 and v in passed:
                        again = True
                    removed = True
                    continue
            elif isinstance(n, ir.Loop):
                r, a = go(n.body, passed)
                removed = removed or r
                again = again or a
            keep.append(n)
        if removed:
            keep.reverse()
            nodes[:] = keep
        return removed, again

    while go(body, set())[1]:
        pass


# ----------------------------------------------------------------------------- if-conversion

def if_convert(body: list[ir.Node]) -> None:
    def go(nodes: list[ir.Node]) -> None:
        i = 0
        while i < len(nodes):
            n = nodes[i]
            if isinstance(n, ir.If):
                go(n.then)
                go(n.orelse)
                rep = _convert(n)
                if rep is not None:
                    nodes[i:i + 1] = rep
                    i += len(rep)
                    continue
            elif isinstance(n, ir.Loop):
                go(n.body)
            i += 1

    go(body)


def _convert(n: ir.If) -> list[ir.Node] | None:
    branch_ops = n.then + n.orelse
    if len(branch_ops) > IF_CONVERT_MAX_OPS or not branch_ops:
        return None
    if not all(isinstance(o, Op) and o.is_pure and o.guard is None for o in branch_ops):
        return None
    cond = n.cond
    out: list[ir.Node] = []
    for ops, pu in ((n.then, cond), (n.orelse, PredUse(cond.value, not cond.negated))):
        for o in ops:
            assert isinstance(o, Op)
            defs = o.defs()
            if len(defs) != 1:
                return None
            d = defs[0]
            if d.is_var:
                if d.type.regs == 0:
                    return None
                t = Value(d.type, d.name + "_c")
                dests = o.defn.dests
                o.operands = [t if (i in dests and x is d) else x
                              for i, (_, x) in enumerate(zip(o.defn.operands, o.operands, strict=True))]
                out.append(o)
                out.append(Op(lookup("selp", type=_bits_type(32 * d.type.regs)), [d, t, d, pu], o.loc))
            else:
                out.append(o)
    return out
