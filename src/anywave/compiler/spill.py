"""Register spilling: a kernel that needs more than the WAVE limit of 255 registers keeps some
values in local memory instead of being refused (docs/spec.md §4.3, "Spilling").

When the linear scan of :mod:`anywave.compiler.codegen` finds no register, values live at that
point are chosen (longest interval per reference first; never predicates, vectors or their
components) and rewritten *spill everywhere*: each definition is followed by a store of the
value to its slot, each use preceded by a load into a fresh short-lived value (a guarded
definition first loads the old value, so lanes where the guard fails keep it). The scan runs
again until everything fits.

Where slots live: after the kernel's own local memory (rounded up to 16 bytes), one area of
``A`` bytes per thread, at ``spill_base + thread_linear_id * A``; slots are 4 or 8 bytes,
naturally aligned. Every slot is zeroed at the start of the kernel (so a value read before its
first write reads 0 as a register would in the emulator). The area is ordinary local memory of
the thread (no other thread touches it, so no barrier is involved), and the values stored and
loaded are the registers' bits: spilling never changes a result. The local memory grows by
``T * A`` bytes for ``T`` threads per workgroup: ``T`` is the kernel's fixed workgroup size, its
``max_workgroup_size``, or else the largest power of two (at most 1024) that keeps the kernel
within the 32 KiB every target guarantees (spec §11.2); the kernel then declares that
``max_workgroup_size``, and a launch with a larger workgroup is refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anywave.isa.types import LIMITS, SpecialRegister

from . import ir
from . import types as ty
from .codegen import Allocation, _linearise, _scan, _too_many
from .errors import CompileError
from .ir import DevAddr, LocAddr, Op, Value

#: rounds of choose-and-rewrite before giving up (each round spills several values)
MAX_ROUNDS = 64


@dataclass
class SpillInfo:
    """What register allocation did to a kernel.

    Attributes:
        registers: registers the kernel uses (r0..r{registers-1}).
        spilled: values kept in local memory (0: none).
        bytes_per_thread: the per-thread spill area (bytes; 0 when nothing is spilled).
        spill_offset: byte offset of the spill areas in local memory.
        local_memory: the kernel's local memory, spill areas included (bytes).
        max_workgroup_size: the largest workgroup the kernel then allows (None: unchanged).
    """

    registers: int = 0
    spilled: int = 0
    bytes_per_thread: int = 0
    spill_offset: int = 0
    local_memory: int = 0
    max_workgroup_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _spillable(v: Value, fresh: set[Value]) -> bool:
    return (v.type.name != "pred" and not v.parts and v.parent is None and v.type.regs <= 2
            and v not in fresh)


def allocate(body: list[ir.Node], kernel: str, *, local_memory: int, threads: int | None,
             max_workgroup_size: int | None) -> tuple[Allocation, SpillInfo]:
    """Registers for ``body`` (modified in place when values are spilled) and the spill report.

    Args:
        local_memory: the kernel's own local memory (bytes).
        threads: the fixed workgroup size (threads), if the kernel has one.
        max_workgroup_size: the kernel's declared bound, if any.

    Raises:
        CompileError: predicates do not fit (8), or the spill areas do not fit in local memory.
    """
    alloc, fail = _scan(body)
    if fail is None:
        assert alloc is not None
        return alloc, SpillInfo(alloc.registers, local_memory=local_memory, max_workgroup_size=max_workgroup_size)
    slots: dict[Value, int] = {}
    fresh: set[Value] = set()  # the spill code's own values: never spilled again
    base = Value(ty.u32, "spill_base")
    area = Value(ty.u32, "spill_area")
    tid = Value(ty.u32, "spill_tid")
    size_op = Op.make("movi.u32", area, 0)
    prologue = [Op.make("mov.sr", tid, SpecialRegister.THREAD_LINEAR_ID), size_op, Op.make("mul.i32", base, tid, area)]
    fresh.update((base, area, tid))
    body[0:0] = prologue
    top = 0
    for _ in range(MAX_ROUNDS):
        what, limit, loc, live, values = fail
        if what != "registers":
            _too_many(kernel, what, limit, loc, live)
        refs, _, _ = _linearise(body)
        cands = [v for v in values if _spillable(v, fresh) and v not in slots]
        if not cands:
            _too_many(kernel, what, limit, loc, live)
        cands.sort(key=lambda v: -(max(refs[v]) - min(refs[v]) + 1) / len(refs[v]))
        need = live - limit + 4
        chosen: dict[Value, int] = {}
        freed = 0
        for v in cands:
            n = v.type.regs * 4
            top = -(-top // n) * n
            chosen[v] = slots[v] = top
            top += n
            freed += v.type.regs
            if freed >= need:
                break
        body[:] = _rewrite(body, chosen, base, fresh)
        alloc, fail = _scan(body)
        if fail is None:
            break
    else:
        _too_many(kernel, fail[0], fail[1], fail[2], fail[3])
    per_thread = -(-top // 16) * 16
    offset = -(-local_memory // 16) * 16
    budget = LIMITS.min_local_memory
    if threads is None:
        threads = max_workgroup_size
        if threads is None:
            threads = 1024
            while threads > 1 and offset + threads * per_thread > budget:
                threads //= 2
            max_workgroup_size = threads
    total = offset + threads * per_thread
    if total > budget:
        raise CompileError(
            f"kernel {kernel!r} needs more than {LIMITS.max_registers} registers; {len(slots)} values spilled to "
            f"{per_thread} bytes of local memory per thread do not fit: {threads} threads need {total} bytes, "
            f"more than the {budget} bytes every target guarantees (spec §11.2). Use a smaller workgroup "
            f"(max_workgroup_size=) or keep fewer values alive at once", None, None, kernel=kernel)
    # the spill code's constants, now that the layout is known: the area size and the slot zeroing
    size_op.operands = [area, per_thread]
    zero = Value(ty.u32, "spill_zero")
    init: list[ir.Node] = [Op.make("movi.u32", zero, 0)]
    for off in range(0, per_thread, 4):
        init.append(Op.make("st.local.b32", LocAddr(base, offset + off), zero))
    _shift(body, base, offset)
    at = body.index(prologue[-1]) + 1
    body[at:at] = init
    alloc, fail = _scan(body)
    if fail is not None:  # pragma: no cover - the zeroing adds one value where nothing else is live
        _too_many(kernel, fail[0], fail[1], fail[2], fail[3])
    assert alloc is not None
    return alloc, SpillInfo(alloc.registers, len(slots), per_thread, offset, total, max_workgroup_size)


_LD = {1: "ld.local.b32", 2: "ld.local.b64"}
_ST = {1: "st.local.b32", 2: "st.local.b64"}


def _rewrite(nodes: list[ir.Node], victims: dict[Value, int], base: Value, fresh: set[Value]) -> list[ir.Node]:
    """``nodes`` with every use of a victim loaded from its slot and every definition stored
    (slot offsets are relative to the spill area; :func:`_shift` adds the area's offset)."""
    out: list[ir.Node] = []
    for n in nodes:
        if isinstance(n, ir.If):
            n.then = _rewrite(n.then, victims, base, fresh)
            n.orelse = _rewrite(n.orelse, victims, base, fresh)
            out.append(n)
            continue
        if isinstance(n, ir.Loop):
            n.body = _rewrite(n.body, victims, base, fresh)
            out.append(n)
            continue
        if not isinstance(n, Op):
            out.append(n)
            continue
        dests = set(n.defn.dests)
        ops = list(n.operands)
        pre: list[ir.Node] = []
        post: list[ir.Node] = []
        loaded: dict[Value, Value] = {}

        def load(v: Value, n: Op = n, pre: list[ir.Node] = pre, loaded: dict[Value, Value] = loaded) -> Value:
            t = loaded.get(v)
            if t is None:
                t = loaded[v] = Value(v.type, f"{v.name}_ld")
                fresh.add(t)
                pre.append(Op.make(_LD[v.type.regs], t, LocAddr(base, victims[v]), loc=n.loc))
            return t

        touched = False
        for i, o in enumerate(ops):
            if i in dests:
                continue
            if isinstance(o, Value) and o in victims:
                ops[i], touched = load(o), True
            elif isinstance(o, DevAddr) and o.offset in victims:
                ops[i], touched = DevAddr(o.buffer, load(o.offset), o.imm), True
            elif isinstance(o, LocAddr) and o.offset in victims:
                ops[i], touched = LocAddr(load(o.offset), o.imm), True
        for i in dests:
            o = ops[i]
            if isinstance(o, Value) and o in victims:
                t = Value(o.type, f"{o.name}_st")
                fresh.add(t)
                if n.guard is not None:  # lanes where the guard fails keep the old value
                    pre.append(Op.make(_LD[o.type.regs], t, LocAddr(base, victims[o]), loc=n.loc))
                ops[i], touched = t, True
                post.append(Op.make(_ST[o.type.regs], LocAddr(base, victims[o]), t, loc=n.loc))
        if touched:
            n.operands = ops
        out.extend(pre)
        out.append(n)
        out.extend(post)
    return out


def _shift(nodes: list[ir.Node], base: Value, offset: int) -> None:
    """Add the spill area's offset to the immediates of the spill loads and stores."""
    if not offset:
        return
    for n in ir.walk(nodes):
        if not isinstance(n, Op) or n.defn.op not in ("ld", "st"):
            continue
        k = 1 if n.defn.op == "ld" else 0
        a = n.operands[k]
        if isinstance(a, LocAddr) and a.offset is base:
            new = list(n.operands)
            new[k] = LocAddr(base, a.imm + offset)
            n.operands = new
