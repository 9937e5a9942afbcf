"""SPIR-V's spelling of the shared control walk (:class:`anywave.backends.lowering.control.ControlWalk`).

SPIR-V control flow must be structured (SPIR-V 1.5 §2.11: every selection declares its merge
block with ``OpSelectionMerge``, every loop its merge and continue blocks with ``OpLoopMerge``)
and has no branch that leaves two constructs at once. So SPIR-V takes the walk's mask-stack
strategy for every kernel -- ``break``/``continue``/``ret``/``halt`` only update the per-invocation
masks (``A``, ``fo``/``fp``/``fc`` per depth, ``x``: Function-scope ``bool`` variables) -- and spells
the walk's structure events as constructs:

* :meth:`Control.enter` / :meth:`Control.leave`: one selection construct on "some invocation of
  the subgroup is active" (``OpGroupNonUniformAny`` over ``A`` for kernels with wave operations;
  ``A`` itself otherwise, which by spec §7.8 is the same thing for per-thread code);
* :meth:`Control.loop_open` / :meth:`Control.loop_close`: one loop construct whose only exit is at
  its header, taken when no invocation of the subgroup is still active in it (the walk's "repeat
  while some lane is active"); the lavapipe loop count and cut record
  (:mod:`anywave.backends.spirv_status`) and the side effect of a loop with no way out
  (:meth:`Control.keep_loop`) are part of this spelling;
* instructions run inside a selection on ``A`` (and their guard); consecutive unguarded
  ordinary instructions share one selection.

Subgroup operations therefore always run in converged control flow, with the spec's executing
set passed to their handlers as ``x.ex``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anywave.backends import spirv_status
from anywave.backends.lowering.control import Frame, Mask, of_pred
from anywave.backends.spirv_asm import SCOPE, SEM
from anywave.backends.spirv_ops import ORDER_SEM, SCOPE_OF, SPIRV
from anywave.binary.module import Instruction, Module, Pred
from anywave.isa.table import Flag
from anywave.isa.types import MemoryOrder, Scope


def body_labels(module: Module, kernel: Any) -> dict[int, str]:
    """``id(code)`` -> the name the status record's sites use for that body."""
    out = {id(f.code): f"function {f.name!r}" for f in module.functions}
    out[id(kernel.code)] = f"kernel {kernel.name!r}"
    return out


class Control:
    """The :class:`~anywave.backends.lowering.control.Spelling` of SPIR-V's mask-stack walk,
    writing through the kernel's lowering ``x`` (:class:`anywave.backends.spirv._Lowering`)."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.labels = body_labels(x.m, x.k)
        self._label_stack: list[str] = []
        self._run: list[tuple[int, Instruction]] = []  # pending ordinary instructions (flush)
        self._pc = 0
        self._ins: Any = None  # the instruction at() named last
        self._vars: dict[tuple[str, int], int] = {}  # mask variable of (kind, depth)
        self._open: list[int] = []  # merge blocks of the open region selections
        self._loops: dict[str, tuple[int, int, Instruction, int]] = {}  # tag -> merge, cont, loop ins, pc

    # ---------------------------------------------------------------- bodies and instructions
    def body_begin(self, code: Sequence[Instruction]) -> None:
        self.flush()
        x = self.x
        self._label_stack.append(x.cur_label)
        x.cur_label = self.labels.get(id(code), x.cur_label)

    def body_end(self, code: Sequence[Instruction]) -> None:
        self.flush()
        self.x.cur_label = self._label_stack.pop()

    def at(self, code: Sequence[Instruction], index: int) -> None:
        self._pc = index
        self._ins = code[index]

    def frame_tag(self, kind: str) -> str:
        return str(self.x.fresh())

    def instruction(self, ins: Instruction) -> None:
        if ins.guard is None and not ins.defn.flags & Flag.WAVE_COLLECTIVE and not ins.defn.sem.startswith("sync."):
            self._run.append((self._pc, ins))  # ordinary: batched under one selection on A
            return
        self.flush()
        self.special(ins, self._pc)

    def emit_ins(self, ins: Instruction, pc: int) -> None:
        """One instruction's handler, bounds-guarded where the build or device asks
        (:func:`anywave.backends.spirv_status.guards`)."""
        x = self.x
        x.site = (ins, pc, bool(self._loops))  # for the loops of a fragment instruction (spirv_mma._for)
        handler = SPIRV.handler(ins.defn)
        if spirv_status.guards(x, ins):
            spirv_status.guarded(x, ins, pc, lambda: handler(x, ins))
        else:
            handler(x, ins)

    def flush(self) -> None:
        """The pending ordinary instructions, under one selection on ``A``."""
        run, self._run = self._run, []
        if not run:
            return
        x = self.x
        with x.when(x.flag(x.act)):
            for pc, ins in run:
                self.emit_ins(ins, pc)

    def special(self, ins: Instruction, pc: int) -> None:
        """A barrier, fence, wave-collective or guarded instruction."""
        x = self.x
        sem = ins.defn.sem
        if sem == "sync.barrier":
            bits = SEM["AcquireRelease"] | SEM["UniformMemory"] | SEM["WorkgroupMemory"]
            wg = x.c(SCOPE["Workgroup"])
            x.b.emit("ControlBarrier", wg, wg, x.sem(bits))
            return
        if sem == "sync.wave_barrier":
            # spec §7.10: every lane of the subgroup runs this (the mask-stack walk keeps control
            # converged); a subgroup execution barrier with acq_rel on workgroup and device memory
            bits = SEM["AcquireRelease"] | SEM["UniformMemory"] | SEM["WorkgroupMemory"]
            sg = x.c(SCOPE["Subgroup"])
            x.b.emit("ControlBarrier", sg, sg, x.sem(bits))
            return
        if sem == "sync.fence":
            scope, order = ins.operands
            if MemoryOrder(order) is not MemoryOrder.RELAXED:
                bits = ORDER_SEM[MemoryOrder(order)] | SEM["UniformMemory"] | SEM["WorkgroupMemory"]
                x.b.emit("MemoryBarrier", x.c(SCOPE[SCOPE_OF[Scope(scope)]]), x.sem(bits))
            return
        ex = x.flag(x.act)
        if ins.guard is not None:
            ex = x.and_(ex, x.p(ins.guard))
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            x.ex = ex
            x.site = (ins, pc, bool(self._loops))
            SPIRV.handler(ins.defn)(x, ins)
            return
        with x.when(ex):
            self.emit_ins(ins, pc)

    # ---------------------------------------------------------------- mask updates
    def _ptr(self, m: Mask) -> int:
        x = self.x
        if m.kind == "A":
            return int(x.act)
        key = (m.kind, m.depth)
        if key not in self._vars:
            self._vars[key] = x.var(x.bool_)
        return self._vars[key]

    def _val(self, m: Mask) -> int:
        x = self.x
        if m.kind == "pred":
            assert m.pred is not None
            v = x.flag(x.pv[m.pred.index])
            return x.not_(v) if m.pred.negated != m.neg else v
        v = x.b.const_bool(False) if m.kind == "false" else x.flag(self._ptr(m))
        return x.not_(v) if m.neg else v

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        self.flush()
        x = self.x
        v = self._val(a)
        if op != "mov":
            assert b is not None
            v = (x.and_ if op == "and" else x.or_)(v, self._val(b))
        x.store(self._ptr(dst), v)

    def condition(self, cond: Pred) -> Mask:
        return of_pred(cond)

    # ---------------------------------------------------------------- structure events
    def enter(self, f: Frame, part: str) -> None:
        """A selection construct: the region runs when some invocation of the subgroup is active."""
        self.flush()
        x = self.x
        body, merge = x.b.id(), x.b.id()
        cond = x.any_lane(x.flag(x.act))
        x.b.emit("SelectionMerge", merge, 0)
        x.b.emit("BranchConditional", cond, body, merge)
        x.label(body)
        self._open.append(merge)

    def leave(self, f: Frame, part: str) -> None:
        self.flush()
        x = self.x
        merge = self._open.pop()
        x.b.emit("Branch", merge)
        x.label(merge)

    def loop_open(self, f: Frame) -> None:
        """A loop construct left only at its header, when no invocation of the subgroup is active."""
        self.flush()
        x = self.x
        turns = x.var(x.u32, x.c(0)) if not f.exits else None  # a loop with no way out must spin, not vanish
        merge, cont = x.loop_open()
        if x.f.loop_limit:  # the driver's count: one per pass through a loop's header (spirv_status)
            x.store(x.all_turns, x.add(x.load(x.all_turns), x.c(1)))
        x.loop_exit_unless(x.any_lane(x.flag(x.act)), merge)
        if turns is not None:
            now = x.add(x.load(turns), x.c(1))
            x.store(turns, now)
            self.keep_loop(now)
        self._loops[f.tag] = (merge, cont, self._ins, self._pc)  # the `loop` instruction (at() came first)

    def loop_close(self, f: Frame) -> None:
        self.flush()
        x = self.x
        merge, cont, ins, pc = self._loops.pop(f.tag)
        if x.f.loop_limit:  # the end of a pass, which the driver's count may end the loop at
            cut = x.op("UGreaterThanEqual", x.bool_, x.load(x.all_turns), x.c(x.f.loop_limit))
            with x.when(cut):
                spirv_status.record(x, ins, pc, spirv_status.LOOP_CUT, None, 0, False)
        x.loop_close(merge, cont)

    def keep_loop(self, turns: int) -> None:
        """Give a WAVE loop a side effect, so the driver can never delete it (issue 31, item 8).

        A compiler may delete a loop without side effects (C++ [intro.progress] lets clang; a
        SPIR-V driver's optimiser may do the same); a WAVE loop with no way out
        (:func:`~anywave.backends.lowering.control.loop_may_exit`, :attr:`Frame.exits`) would then
        "complete" and the code after it run, where the spec says the launch never completes
        (§7.8). As the C++ dialects do, such a loop gets a side effect: it counts its turns
        (``turns``, this turn's number) and every 2^16th turn stores the count with a
        ``Volatile`` store to a private workgroup word nothing reads, so it can only be run,
        never skipped. Loops with a way out are unchanged. (Lavapipe's own loop limit is a
        different hazard, reported through the status record: :mod:`anywave.backends.spirv_status`.)"""
        x = self.x
        if "spin" not in x._globals:
            v = x.b.global_var(x.b.t_ptr("Workgroup", x.u32), "Workgroup")
            x.b.name(v, "aw_loop_turns")
            x.interface.append(v)
            x._globals["spin"] = v
        with x.when(x.ieq(x.iand(turns, x.c(0xFFFF)), x.c(0))):
            x.b.emit("Store", x._globals["spin"], turns, 1)  # MemoryAccess Volatile
