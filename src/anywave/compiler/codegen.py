"""Register allocation over structured regions and emission of WAVE instructions.

Liveness: the body is linearised in program order (each node one position; an ``if``,
``else``, ``endif``, ``loop`` and ``endloop`` marker one position each). A value's interval
runs from its first to its last reference. A value referenced inside a loop that is live
across the loop's back edge — a mutable variable, or any value whose interval reaches
outside the loop — is extended to cover the whole loop, so no other value shares its
register anywhere in the loop. Because WAVE executes divergent regions with masks (an
inactive lane's registers are never written), linear-scan allocation over this ordering
is exact for if/else regions too.

Allocation: linear scan, lowest free register first; 64-bit values take two consecutive
registers (``rN:rN+1``), the vectors of ``aw.load4``/``aw.store4`` four (their components,
:attr:`ir.Value.parts`, are the vector's registers), predicates p0..p7 are a separate file. A value never shares a
register with an operand of the instruction that defines it. When more than 255 registers
are live at once, :mod:`anywave.compiler.spill` keeps values in local memory and scans
again; more than 8 live predicates (or spills that do not fit) are rejected with a
:class:`CompileError` naming the kernel, the source line where pressure peaks and the count
— never a miscompile.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.errors import SourceLoc
from anywave.isa.table import Operand
from anywave.isa.types import LIMITS, Capability

from . import ir
from .errors import CompileError
from .ir import DevAddr, LocAddr, Op, PredUse, Value


@dataclass
class Allocation:
    """Physical assignment: ``reg[value]`` first GPR, ``pred[value]`` predicate index."""

    reg: dict[Value, int] = field(default_factory=dict)
    pred: dict[Value, int] = field(default_factory=dict)
    registers: int = 1


def _linearise(body: list[ir.Node]) -> tuple[dict[Value, list[int]], list[tuple[int, int]],
                                               list[SourceLoc | None]]:
    refs: dict[Value, list[int]] = {}
    loops: list[tuple[int, int]] = []
    locs: list[SourceLoc | None] = []

    def ref(v: Value, p: int) -> None:
        if v.parent is not None:  # a vector component lives in its vector's registers
            v = v.parent
        r = refs.get(v)
        if r is None:
            refs[v] = [p]
        else:
            r.append(p)

    def go(nodes: list[ir.Node]) -> None:
        for n in nodes:
            p = len(locs)
            if isinstance(n, Op):
                locs.append(n.loc)
                defs, uses = n.defs_uses()
                for vs in (uses, defs):
                    for v in vs:  # ref(v, p), inline (a few per instruction)
                        if v.parent is not None:
                            v = v.parent
                        r = refs.get(v)
                        if r is None:
                            refs[v] = [p]
                        else:
                            r.append(p)
            elif isinstance(n, ir.If):
                locs.append(n.loc)
                ref(n.cond.value, p)
                go(n.then)
                locs.append(n.loc)
                go(n.orelse)
                locs.append(n.loc)
            elif isinstance(n, ir.Loop):
                locs.append(n.loc)
                go(n.body)
                locs.append(n.loc)
                loops.append((p, len(locs) - 1))
            else:
                locs.append(getattr(n, "loc", None))
                c = getattr(n, "cond", None)
                if c is not None:
                    ref(c.value, p)

    go(body)
    return refs, loops, locs


def allocate(body: list[ir.Node], kernel: str) -> Allocation:
    """Assign registers to every value of ``body``; CompileError when they do not fit."""
    alloc, fail = _scan(body)
    if fail is not None:
        what, limit, loc, live, _ = fail
        _too_many(kernel, what, limit, loc, live)
    assert alloc is not None
    return alloc


def _scan(body: list[ir.Node]) -> tuple[Allocation | None, tuple[Any, ...] | None]:
    """Linear scan: (allocation, None), or (None, (what, limit, loc, live count, live values))
    at the first value that finds no register."""
    refs, loops, locs = _linearise(body)
    # (each list of positions is in increasing order: _linearise appends them as it walks)
    iv: dict[Value, list[int]] = {v: [ps[0], ps[-1]] for v, ps in refs.items()}
    loops.sort(key=lambda se: se[1] - se[0])
    if loops:
        # the values referenced at each position: a loop visits only the values referenced
        # inside it (O(loop length)), not every value of the kernel
        at: list[list[Value]] = [[] for _ in locs]
        for v, ps in refs.items():
            for p in ps:
                at[p].append(v)
        for s, e in loops:
            seen: set[Value] = set()
            for p in range(s, e + 1):
                for v in at[p]:
                    if v in seen:
                        continue
                    seen.add(v)
                    rng = iv[v]  # it has a reference in [s, e], so it meets the loop
                    if v.is_var or rng[0] < s or rng[1] > e:
                        rng[0] = min(rng[0], s)
                        rng[1] = max(rng[1], e)
    alloc = Allocation()
    order = sorted(iv, key=lambda v: (iv[v][0], v.id))
    nmax = LIMITS.max_registers
    gpr_free = [True] * nmax
    prd_free = [True] * LIMITS.num_predicates
    # active intervals as a heap on their end: those ending before the next start are freed
    # (the same set a scan of every active interval frees; only the set matters)
    active: list[tuple[int, int, Value]] = []
    high = 0
    for v in order:
        start, end = iv[v]
        while active and active[0][0] < start:
            _, _, av = heapq.heappop(active)
            if av.type.name == "pred":
                prd_free[alloc.pred[av]] = True
            else:
                r = alloc.reg[av]
                for k in range(av.type.regs):
                    gpr_free[r + k] = True
        if v.type.name == "pred":
            idx = _first_fit(prd_free, 1, LIMITS.num_predicates)
            if idx is None:
                return None, ("predicates", LIMITS.num_predicates, locs[start], len(active), [])
            prd_free[idx] = False
            alloc.pred[v] = idx
        else:
            n = v.type.regs
            idx = _first_fit(gpr_free, n, nmax)
            if idx is None:
                live = [a for _, _, a in active if a.type.name != "pred"]
                return None, ("registers", LIMITS.max_registers, locs[start], sum(a.type.regs for a in live),
                              live + [v])
            for k in range(n):
                gpr_free[idx + k] = False
            alloc.reg[v] = idx
            high = max(high, idx + n)
        heapq.heappush(active, (end, v.id, v))
    alloc.registers = max(1, high)
    for v in list(alloc.reg):
        for c in v.parts:
            alloc.reg[c] = alloc.reg[v] + c.part
    return alloc, None


def _first_fit(free: list[bool], n: int, limit: int) -> int | None:
    """Lowest ``i`` with ``free[i:i+n]`` all free and ``i + n <= limit`` (None if none)."""
    i = 0
    while True:
        try:
            i = free.index(True, i, limit)
        except ValueError:
            return None
        if i + n > limit:
            return None
        if n == 1:
            return i
        k = 1
        while k < n and free[i + k]:
            k += 1
        if k == n:
            return i
        i += k


def _too_many(kernel: str, what: str, limit: int, loc: SourceLoc | None, live: int) -> None:
    where = f" at {loc}" if loc else ""
    raise CompileError(
        f"kernel {kernel!r} needs more than {limit} {what}{where}: {live} values are live there at once "
        f"(the WAVE limit is {limit}). Keep fewer values alive at once: "
        "reuse variables, recompute cheap values, or split the kernel", loc, None, kernel=kernel)


_C_REG, _C_PD, _C_PS, _C_DADDR, _C_LADDR, _C_PLAIN = range(6)
_CODE_OF = {Operand.RD: _C_REG, Operand.RS: _C_REG, Operand.RD64: _C_REG, Operand.RS64: _C_REG,
            Operand.RD128: _C_REG, Operand.RS128: _C_REG, Operand.PD: _C_PD, Operand.PS: _C_PS,
            Operand.DADDR: _C_DADDR, Operand.DADDR64: _C_DADDR, Operand.LADDR: _C_LADDR}
#: per instruction record (keyed by id(defn)): how each operand is lowered
_CODES: dict[int, tuple[int, ...]] = {}


def _codes(d: Any) -> tuple[int, ...]:
    r = _CODES.get(id(d))
    if r is None:
        r = _CODES[id(d)] = tuple(_CODE_OF.get(k, _C_PLAIN) for k in d.operands)
    return r


def emit(body: list[ir.Node], alloc: Allocation) -> tuple[list[Instruction], Capability]:
    """Lower the allocated IR to instructions (every one carries its source location)."""
    out: list[Instruction] = []
    caps = Capability.NONE
    cap_ids: dict[int, Capability] = {}

    def pred(pu: PredUse) -> Pred:
        return Pred(alloc.pred[pu.value], pu.negated)

    reg = alloc.reg
    prd = alloc.pred

    def operand(code: int, v: Any) -> Any:
        if code == _C_REG:
            return reg[v]
        if code == _C_PD:
            return prd[v]
        if code == _C_PS:
            return Pred(prd[v.value], v.negated)
        if code == _C_DADDR:
            assert isinstance(v, DevAddr)
            return DeviceAddr(v.buffer, reg[v.offset], v.imm)
        if code == _C_LADDR:
            assert isinstance(v, LocAddr)
            return LocalAddr(reg[v.offset], v.imm)
        return v

    def go(nodes: list[ir.Node]) -> None:
        for n in nodes:
            if isinstance(n, Op):
                ops = tuple([reg[v] if c == _C_REG else operand(c, v)
                             for c, v in zip(_codes(n.defn), n.operands, strict=True)])
                out.append(Instruction(n.defn, ops, pred(n.guard) if n.guard else None, n.loc))
                cap_ids[id(n.defn)] = n.defn.capability
            elif isinstance(n, ir.If):
                out.append(Instruction.make("if", pred(n.cond), loc=n.loc))
                go(n.then)
                if n.orelse:
                    out.append(Instruction.make("else", loc=n.loc))
                    go(n.orelse)
                out.append(Instruction.make("endif", loc=n.loc))
            elif isinstance(n, ir.Loop):
                out.append(Instruction.make("loop", loc=n.loc))
                go(n.body)
                out.append(Instruction.make("endloop", loc=n.loc))
            else:
                name = {ir.Break: "break", ir.Continue: "continue", ir.Halt: "halt"}[type(n)]
                out.append(Instruction.make(name, guard=pred(n.cond) if n.cond else None, loc=n.loc))

    go(body)
    for c in cap_ids.values():  # OR once per distinct record (enum.Flag ``|`` is slow)
        caps |= c
    return out, caps
