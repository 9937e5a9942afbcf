"""Which registers a lane that is inactive at a point of a mask-stack kernel may still read
(:class:`Need`), so that a backend (PTX, the C family) predicates a register-only instruction
on the active bit ``A`` only where an inactive lane's copy of its result could be observed
(:func:`unpredicated`).

The mask-stack machine (:mod:`anywave.backends.lowering.control`) makes every lane of a warp
walk the whole program; a lane that is inactive at instruction ``I`` runs the lines of ``I`` with
its predicate false. If ``I`` only writes registers (no memory, no trap) and ran unpredicated,
an inactive lane would get a value it never computed in the program's order. That lane reads
registers again only once it is active again, and ``A`` grows only at a mask update (an
``else``, the end of an ``if``, a loop's iteration end, a call's end). So the value is never
observed when no register ``I`` writes is *read before written* in any straight-line segment
(the code between two mask updates or construct boundaries) that can run after ``I``'s own
segment: the segments after it in the walk's order and, for each loop around ``I``, every
segment of that loop (the next iteration). Within a segment ``A`` only shrinks, so a read
after a write there reads that write for every lane that reads it.

The analysis is a dry run of the same walk (:class:`Need` is a spelling that records), so its
instruction positions are the emitter's: position ``n`` is the ``n``-th call of
``instruction``. It is conservative: construct boundaries, islands and every mask update end
a segment, calls are inlined as the walk inlines them, and a write in another segment never
hides a read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anywave.backends.lowering.control import ControlWalk, Frame, Mask, of_pred
from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Module, Pred
from anywave.isa.table import Category, Operand

#: categories of the instructions that only write registers (no memory, no trap, no effect on
#: other lanes: every backend computes them as total functions of their operands)
REGISTER_ONLY = frozenset({Category.INTEGER, Category.FLOAT, Category.BITWISE, Category.COMPARE,
                           Category.CONVERT, Category.MOVE})


def unpredicated(ins: Instruction, walk: ControlWalk, need: Need | None, pos: int) -> bool:
    """Whether the mask-stack lowering may run ``ins`` (the ``pos``-th instruction of the walk)
    in every lane, active or not: a register-only instruction at the top of the kernel body
    (outside every construct a lane there is inactive only once it has halted, and a halted lane
    is never read again: wave operations read only executing lanes), or one whose results no lane
    inactive there can read later (``need``, :class:`Need`)."""
    if ins.defn.category not in REGISTER_ONLY:
        return False
    if not walk.frames:
        return True
    if need is None:
        return False
    regs, preds = _defs(ins)
    need_r, need_p = need.need(pos)
    return not (regs & need_r or preds & need_p)


def _uses(ins: Instruction) -> tuple[set[int], set[int]]:
    """(registers, predicates) that ``ins`` reads (its guard included)."""
    regs: set[int] = set()
    preds: set[int] = set()
    d = ins.defn
    for i, kind in enumerate(d.operands):
        if kind.is_dest:
            continue
        v = ins.operands[i]
        if kind is Operand.RS:
            regs.add(int(v))
        elif kind is Operand.RS64:
            regs.update((int(v), int(v) + 1))
        elif kind is Operand.RS128:
            regs.update(range(int(v), int(v) + 4))
        elif kind is Operand.PS:
            preds.add(int(v.index))
        elif kind is Operand.DADDR64 and isinstance(v, DeviceAddr):
            regs.update((v.reg, v.reg + 1))
        elif isinstance(v, (DeviceAddr, LocalAddr)):
            regs.add(v.reg)
    if ins.guard is not None:
        preds.add(ins.guard.index)
    return regs, preds


def _defs(ins: Instruction) -> tuple[set[int], set[int]]:
    """(registers, predicates) that ``ins`` writes when it runs (the words its operand kinds
    name); certainly only when it has no guard."""
    regs: set[int] = set()
    preds: set[int] = set()
    d = ins.defn
    for i in d.dests:
        kind = d.operands[i]
        v = ins.operands[i]
        if kind is Operand.PD:
            preds.add(int(v))
        elif kind in (Operand.RD, Operand.RD64, Operand.RD128):
            regs.update(range(int(v), int(v) + {Operand.RD64: 2, Operand.RD128: 4}.get(kind, 1)))
    return regs, preds


class Need:
    """Dry run of a kernel's mask-stack walk: ``need(pos)`` gives the (registers, predicates)
    that a lane inactive at the ``pos``-th instruction may read later (see the module note)."""

    def __init__(self, module: Module, kernel_code: Sequence[Instruction], *, islands: bool,
                 wave_width: int | None, island_barriers: bool = True) -> None:
        self.islands = islands
        self.wave_width = wave_width
        self.island_barriers = island_barriers
        #: per segment: (registers, predicates) read before written in it
        self._ue: list[tuple[set[int], set[int]]] = [(set(), set())]
        self._wr: tuple[set[int], set[int]] = (set(), set())
        #: the segment of each instruction position
        self._seg_of: list[int] = []
        #: (first segment, last segment) of each mask-stack loop, and the loops open at each position
        self._loops: list[list[int]] = []
        self._open: list[int] = []
        self._loops_at: list[tuple[int, ...]] = []
        ControlWalk(module, self, True).run(kernel_code)
        n = len(self._ue)
        self._suffix: list[tuple[frozenset[int], frozenset[int]]] = [(frozenset(), frozenset())] * (n + 1)
        r: set[int] = set()
        p: set[int] = set()
        for i in range(n - 1, -1, -1):
            r |= self._ue[i][0]
            p |= self._ue[i][1]
            self._suffix[i] = (frozenset(r), frozenset(p))
        self._loop_ue: list[tuple[set[int], set[int]]] = []
        for first, last in self._loops:
            lr: set[int] = set()
            lp: set[int] = set()
            for i in range(first, last + 1):
                lr |= self._ue[i][0]
                lp |= self._ue[i][1]
            self._loop_ue.append((lr, lp))

    def need(self, pos: int) -> tuple[set[int] | frozenset[int], set[int] | frozenset[int]]:
        seg = self._seg_of[pos]
        r, p = self._suffix[seg + 1]
        loops = self._loops_at[pos]
        if not loops:
            return r, p
        rr, pp = set(r), set(p)
        for li in loops:
            rr |= self._loop_ue[li][0]
            pp |= self._loop_ue[li][1]
        return rr, pp

    # ---------------------------------------------------------------- recording
    def _read(self, regs: set[int], preds: set[int]) -> None:
        ue, wr = self._ue[-1], self._wr
        ue[0].update(regs - wr[0])
        ue[1].update(preds - wr[1])

    def _boundary(self) -> None:
        self._ue.append((set(), set()))
        self._wr = (set(), set())

    def _pred_read(self, m: Mask | Pred | None) -> None:
        if isinstance(m, Pred):
            self._read(set(), {m.index})
        elif isinstance(m, Mask) and m.kind == "pred" and m.pred is not None:
            self._read(set(), {m.pred.index})

    def instruction(self, ins: Instruction) -> None:
        self._seg_of.append(len(self._ue) - 1)
        self._loops_at.append(tuple(self._open))
        r, p = _uses(ins)
        self._read(r, p)
        if ins.guard is not None:
            return  # a guarded instruction may leave its destinations as they were: no kill
        dr, dp = _defs(ins)
        self._wr[0].update(dr)
        self._wr[1].update(dp)

    def at(self, code: Sequence[Instruction], index: int) -> None:
        pass

    def body_begin(self, code: Sequence[Instruction]) -> None:
        pass

    def body_end(self, code: Sequence[Instruction]) -> None:
        pass

    def frame_tag(self, kind: str) -> str:
        return kind

    def condition(self, cond: Pred) -> Mask:
        return of_pred(cond)

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        self._pred_read(a)
        self._pred_read(b)
        self._boundary()

    def enter(self, f: Frame, part: str) -> None:
        self._boundary()

    def leave(self, f: Frame, part: str) -> None:
        self._boundary()

    def loop_open(self, f: Frame) -> None:
        self._boundary()
        self._open.append(len(self._loops))
        self._loops.append([len(self._ue) - 1, -1])

    def loop_close(self, f: Frame) -> None:
        li = self._open.pop()
        self._loops[li][1] = len(self._ue) - 1
        self._boundary()

    def island_begin(self, tag: str) -> None:
        self._boundary()

    def island_end(self, tag: str) -> None:
        self._boundary()

    # per-thread constructs (inside islands): boundaries; their conditions are reads
    def thread_if(self, f: Frame, cond: Pred) -> None:
        self._pred_read(cond)
        self._boundary()

    def thread_else(self, f: Frame) -> None:
        self._boundary()

    def thread_endif(self, f: Frame) -> None:
        self._boundary()

    def thread_loop(self, f: Frame) -> None:
        self._boundary()
        self._open.append(len(self._loops))
        self._loops.append([len(self._ue) - 1, -1])

    def thread_endloop(self, f: Frame) -> None:
        li = self._open.pop()
        self._loops[li][1] = len(self._ue) - 1
        self._boundary()

    def thread_jump(self, role: str, loop: Frame, guard: Pred | None) -> None:
        self._pred_read(guard)
        self._boundary()

    def thread_ret(self, call: Frame | None, guard: Pred | None) -> None:
        self._pred_read(guard)
        self._boundary()

    def thread_call(self, f: Frame) -> None:
        self._boundary()

    def thread_endcall(self, f: Frame) -> None:
        self._boundary()

    def __getattr__(self, name: str) -> Any:  # any other hook of a spelling: a boundary
        if name.startswith("thread_"):
            return lambda *a, **k: self._boundary()
        raise AttributeError(name)
