"""WAVE -> C for the host CPU in the SPMD-on-SIMD manner (issue 29): the ``cpu`` target's backend.

One C function per kernel runs a range of workgroups. A workgroup runs in **lock step**: each
value (register, predicate, the active bit ``A`` and the frames of the spec's mask-stack
machine, §7.4, :mod:`anywave.backends.lowering.control`) has one element per lane of the
(padded) workgroup. Straight-line code between two points that need every lane at once (a
loop's back-edge, a wave operation, a barrier, a fence, an atomic) is one *lane block*: a loop
over the workgroup's lanes in chunks of 8 (:mod:`anywave.backends.cpu_vector`), in which every
value is a GCC/Clang vector of the chunk's lanes (``aw_vu``, one AVX register). Each instruction
is spelt on the vectors where :mod:`~anywave.backends.cpu_vector` has a spelling (integer and
predicate bodies, f32 arithmetic, conversions, 4/8/16-byte loads and stores with contiguous
and broadcast fast paths); any other runs the C-family statement
(:mod:`anywave.backends.cfamily_ops`, the exact-semantics spelling shared with OpenCL C, SYCL,
HIP and Metal) once per lane of the chunk. Wave operations (shuffles, ballots, votes,
reductions, scans) are written here as loops over each wave's W lanes, in the spec's butterfly /
Kogge-Stone order.

Where values live (:func:`_place`): a value some other code reads (another lane block, a wave
operation, a barrier's count, a loop test) lives in memory between blocks, one block of vectors
per chunk with a slot per value (``awg_S[chunk * AW_NS + slot]``); a value only one block
mentions is a C local of the chunk loop (from 0 in a block that runs once per workgroup; in a
loop only when each read is covered by an earlier write of the same run). A write keeps the old
value where the lane does not execute it (a select) unless no later read looks at those lanes
(active-set versions through the mask updates, :meth:`_CpuRenderer._track`). A chunk with no
active lane skips an if-region that ends in the same block, and a block whose masks stay
within its starting active set. In a block inside a loop, a segment with many selects has a
second copy for chunks whose lanes are all active: no selects, and float results stay in x86's
NaN until a non-float read (then made canonical, as every operation does in the other copy).

Why lock step over the whole workgroup is the spec's machine: the emulator (the oracle) runs
every lane of a batch of workgroups the same way (one mask per lane, a region skipped when no
lane is active, a loop repeated while any lane remains); a barrier is reached by every lane of
the workgroup or is an error (§7.9, "divergent barrier", detected here too), so every access
before a barrier is complete before any after it; lanes of one wave without a barrier are
unordered (§5.3), so running a block chunk by chunk (a lane sees its own earlier stores) is
allowed. Fences, atomics, barriers and wave barriers (``barrier.wave``, §7.10) end a lane block,
so they act in lane order, like the emulator, and every lane's accesses before a wave barrier
are complete before any lane's after it. Local memory belongs to the workgroup and one thread
runs a whole workgroup, so its atomics are plain read-modify-writes in lane order.

Bounds checks (the default, as on every host-memory target): an access outside its buffer (or
local memory) is skipped, a load gives 0, and the lane records the site and offset; after the
lane block the first failure (lowest site, then lowest lane) goes to the error record of
:mod:`anywave.backends.bounds`, which the runtime turns into ``OutOfBoundsError``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anywave.backends import cpu_vector
from anywave.backends.bounds import LOCAL_ARG, Site, accesses_of
from anywave.backends.cfamily import (
    CFamilyError,
    CKernel,
    CProgram,
    Dialect,
    Features,
    _KernelRenderer,
    c_name,
    check_supported,
)
from anywave.backends.cfamily_ops import handler
from anywave.backends.cfamily_prelude import PRELUDE, gen_name
from anywave.backends.lowering.collectives import butterfly_steps, exclusive_first, identity, kogge_stone_steps
from anywave.backends.lowering.control import ControlWalk, Frame, Mask
from anywave.binary.module import DeviceAddr, Instruction, Module, Pred
from anywave.isa.table import Category, Flag, Operand
from anywave.isa.types import ArgKind, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
S = SpecialRegister

#: wave widths the CPU target runs
WAVE_WIDTHS = (8, 16, 32, 64)
#: record word 0 of a divergent barrier (1 is an out-of-bounds access)
ERR_DIVERGENT_BARRIER = 2
#: return codes of a kernel function: 0 done, 1 stopped (Ctrl-C), 2 a divergent barrier
RC_STOPPED, RC_BARRIER = 1, 2

#: the thread-id special registers, from the per-lane tables ``awg_TX/TY/TZ``
_IDS = {
    S.THREAD_ID_X: "aw_pick(aw_1d, aw_l, awg_TX[aw_l])", S.THREAD_ID_Y: "awg_TY[aw_l]", S.THREAD_ID_Z: "awg_TZ[aw_l]",
    S.GLOBAL_ID_X: "aw_gid0 * aw_wgx + aw_pick(aw_1d, aw_l, awg_TX[aw_l])",
    S.GLOBAL_ID_Y: "aw_gid1 * aw_wgy + awg_TY[aw_l]", S.GLOBAL_ID_Z: "aw_gid2 * aw_wgz + awg_TZ[aw_l]",
}

_HEADER = r"""
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <tgmath.h>
typedef uint8_t u8; typedef int8_t i8; typedef uint16_t u16; typedef int16_t i16;
typedef uint32_t u32; typedef int32_t i32; typedef uint64_t u64; typedef int64_t i64;
#define AW_FN static inline
AW_FN float AW_F32(u32 u) { float f; memcpy(&f, &u, 4); return f; }
AW_FN u32 AW_U32(float f) { u32 u; memcpy(&u, &f, 4); return u; }
AW_FN double AW_F64(u64 u) { double f; memcpy(&f, &u, 8); return f; }
AW_FN u64 AW_U64(double f) { u64 u; memcpy(&u, &f, 8); return u; }
#define AW_RINT rint
#define AW_HAS_F64 1
/* c ? a : b with both evaluated (no conditional load: the lane loop stays branch-free) */
AW_FN u32 aw_pick(u32 c, u32 a, u32 b) { return c ? a : b; }
AW_FN u32 aw_clz(u32 x) { return x ? (u32)__builtin_clz(x) : 32u; }
AW_FN u32 aw_ctz(u32 x) { return x ? (u32)__builtin_ctz(x) : 32u; }
AW_FN u32 aw_ctz64(u64 x) { return x ? (u32)__builtin_ctzll(x) : 64u; }
AW_FN u32 aw_amin_u32(u32 *p, u32 v) {
  u32 o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &o, o < v ? o : v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return o;
}
AW_FN u32 aw_amax_u32(u32 *p, u32 v) {
  u32 o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &o, o > v ? o : v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return o;
}
AW_FN u32 aw_amin_i32(u32 *p, i32 v) {
  u32 o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &o, (i32)o < v ? o : (u32)v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return o;
}
AW_FN u32 aw_amax_i32(u32 *p, i32 v) {
  u32 o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &o, (i32)o > v ? o : (u32)v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
  return o;
}
/* the first failing access of a lane loop: lowest site, then lowest lane (instruction order,
   then lane order, as the emulator reports it); resets the lanes' records */
static void aw_report(u32 *err, u32 *es, const u32 *el, const u32 *eh, u32 nl, const u32 (*tab)[6]) {
  u32 best = 0xFFFFFFFFu, lane = 0;
  for (u32 l = 0; l < nl; ++l) {
    if (es[l] < best) { best = es[l]; lane = l; }
  }
  if (best == 0xFFFFFFFFu) return;
  /* the site's base register (pair, for a 64-bit offset) plus its constant offset */
  u64 off = ((u64)el[lane] | (tab[best][3] ? (u64)eh[lane] << 32 : 0ul))
            + ((u64)tab[best][4] | ((u64)tab[best][5] << 32));
  for (u32 l = 0; l < nl; ++l) es[l] = 0xFFFFFFFFu;
  u32 z = 0u;
  if (__atomic_compare_exchange_n(&err[0], &z, 1u, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    err[1] = tab[best][0]; err[2] = (u32)off; err[3] = (u32)(off >> 32); err[4] = best;
    err[5] = tab[best][1]; err[6] = tab[best][2];
  }
}
"""

_RMW = {"add": "__atomic_fetch_add", "sub": "__atomic_fetch_sub", "and": "__atomic_fetch_and",
        "or": "__atomic_fetch_or", "xor": "__atomic_fetch_xor", "exch": "__atomic_exchange_n"}


_PLAIN = {"add": "aw_o + aw_v", "sub": "aw_o - aw_v", "and": "aw_o & aw_v", "or": "aw_o | aw_v",
          "xor": "aw_o ^ aw_v", "exch": "aw_v"}


def _rmw(space: str, op: str, ctype: str, addr: str, val: str, scope: Scope, order: MemoryOrder) -> str:
    if space == "local":
        # local memory belongs to one workgroup, and one thread runs a whole workgroup: the
        # lanes' read-modify-writes run one after another in lane order, as the emulator's
        if op in ("min", "max"):
            cmp = "<" if op == "min" else ">"
            new = f"(({ctype})aw_o {cmp} ({ctype})aw_v ? aw_o : aw_v)"
        else:
            new = f"({_PLAIN[op]})"
        return f"({{ u32 *aw_p = (u32*)({addr}); const u32 aw_o = *aw_p, aw_v = (u32)({val}); *aw_p = {new}; aw_o; }})"
    if op in ("min", "max"):
        return f"aw_a{op}_{'i32' if ctype == 'i32' else 'u32'}((u32*)({addr}), {val})"
    return f"{_RMW[op]}((u32*)({addr}), (u32)({val}), __ATOMIC_SEQ_CST)"


def _cas(space: str, addr: str, expected: str, desired: str, scope: Scope, order: MemoryOrder) -> str:
    if space == "local":  # one thread runs the workgroup (_rmw)
        return (f"{{ u32 *aw_p = (u32*)({addr}); const u32 aw_o = *aw_p; if (aw_o == {expected}) *aw_p = {desired}; "
                f"{expected} = aw_o; }}")
    return (f"__atomic_compare_exchange_n((u32*)({addr}), &{expected}, {desired}, 0, __ATOMIC_SEQ_CST, "
            "__ATOMIC_SEQ_CST);")


def _no_spelling(*_a: object) -> str:  # pragma: no cover - the CPU renderer writes these itself
    raise AssertionError("the cpu renderer writes wave operations and barriers itself")


CPU = Dialect(
    name="cpu",
    header=lambda f: _HEADER,
    kernel_open=lambda *a: "",
    kernel_preamble=lambda W, wave: "",
    global_ptr=lambda t: f"{t}*",
    local_ptr=lambda t: f"{t}*",
    buffer_param=lambda n: f"u8* {n}",
    u32_param=lambda n: f"const u32 {n}",
    u64_param=lambda n: f"const u64 {n}",
    local_decl=lambda n: f"u8 aw_lm[{n}] __attribute__((aligned(64)));",
    local_linear_id="aw_l",
    group_id=lambda i: f"aw_gid{i}",
    num_groups=lambda i: f"aw_ng{i}",
    barrier="",
    fence=lambda s, o: "__atomic_thread_fence(__ATOMIC_SEQ_CST);",
    atomic_rmw=_rmw,
    atomic_cas=_cas,
    math={"sqrt": "sqrt", "fma": "fma", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
          "ex2": "exp2", "lg2": "log2", "sin": "sin", "cos": "cos", "tanh": "tanh"},
    popcount="__builtin_popcount", clz="aw_clz", ctz="aw_ctz",
    shuffle=_no_spelling, ballot=_no_spelling, any_lane=_no_spelling,
    wave_barrier="",
    wave_sync="",
)

#: what the CPU target renders: everything but the matrix fragments (mma / fragment
#: instructions are refused with this reason)
CPU_FEATURES = Features(fp64=True, wave_widths=WAVE_WIDTHS)
_MMA_REASON = "matrix fragment instructions (mma) are not rendered by the cpu target yet"


@dataclass(frozen=True)
class CpuKernel(CKernel):
    """A rendered kernel of the cpu target: :class:`~anywave.backends.cfamily.CKernel` plus the
    bytes of lane state one workgroup of P lanes needs on the stack (``frame_bytes(P)``)."""

    lane_bytes: int = 0
    #: the kernel has a loop (its run time is not bounded by its size)
    loops: bool = True

    def frame_bytes(self, lanes: int) -> int:
        return self.lane_bytes * lanes + self.local_memory + 4096


class _CpuRenderer(_KernelRenderer):
    """The C-family kernel renderer with every value an array of lanes (module docs)."""

    #: no per-thread islands (lowering.control): the workgroup walks every construct in lock step
    islands = False

    def __init__(self, module: Module, kernel, W: int, checked: bool) -> None:  # noqa: ANN001
        super().__init__(CPU, CPU_FEATURES, module, kernel, W, checked)
        self.wave = True  # always the mask-stack machine: the workgroup walks in lock step
        self.block: list[tuple[str, list[str]]] = []
        self.block_guarded = False
        self.masks: set[str] = set()
        self.site_rows: list[tuple[int, ...]] = []
        self.hoisted: list[str] = []  # loop-invariant bounds of the guarded accesses (per call)
        self.site_tab = "aw_sites_" + c_name(kernel.name)
        self.loop_depth = 0
        self.has_loop = False
        # what the lane block reads and writes, in order (_place drops the selects that keep the
        # old value in lanes no later read looks at): ("r", name, cond) / ("w", name, cond, select
        # id); cond = (active-set version, guard) or None (unknown)
        self.events: list[tuple] = []
        self.vparent: dict[int, int | None] = {}
        self.nsel = 0
        self.plain_sel: set[int] = set()
        self.ver = self._newver(None)
        self.mver: dict[tuple[str, int], int] = {}  # frame masks holding a known active-set version
        # a chunk whose lanes are all inactive at the block's start may skip the block when every
        # mask the block writes is a subset of the active set there (it then stays empty): the
        # masks it writes are set to 0 instead
        self.regions: list[tuple[int, int]] = []
        self.closed: set[int] = set()
        self.root = self.ver
        self.skip_ok = True
        self.mask_writes: set[str] = set()

    def _newver(self, parent: int | None) -> int:
        """A new version of the active set, a subset of ``parent``'s (None: unrelated)."""
        v = len(self.vparent)
        self.vparent[v] = parent
        return v

    def _cond(self, ins: Instruction) -> tuple[int, str | None]:
        return (self.ver, None if ins.guard is None else cpu_vector.pred(ins.guard))

    def _reads(self, text: str, cond: tuple | None) -> None:
        for n in dict.fromkeys(m.group(1) for m in _NAME.finditer(text)):
            if n[0] in "rp" and n[1:].isdigit():
                self.events.append(("r", n, cond))

    def _selects(self, lines: list[str], cond: tuple) -> list[str]:
        """Number the ``@SEL@`` selects of ``lines`` (``d = @SEL@(aw_e, value, d);``) and record
        their writes."""
        out = []
        for line in lines:
            m = _SEL_LINE.match(line)
            if m and "@SEL@" in line:
                sid = self.nsel
                self.nsel += 1
                self.events.append(("w", m.group(2), cond, sid))
                if cond[1] is None:
                    self.plain_sel.add(sid)  # executes where the active bit is set: nothing else
                line = line.replace("@SEL@", f"@SEL{sid}@", 1)
            out.append(line)
        return out

    # ---- lane blocks: items of scalar statements (run per lane) and vector statements (per chunk)
    def lane(self, line: str) -> None:
        # a scalar statement: every name it mentions is read, in lanes not known here
        self._reads(line, None)
        for n in dict.fromkeys(m.group(1) for m in _NAME.finditer(line)):
            if n[0] in "rp" and n[1:].isdigit() and _written(line, n):
                self.events.append(("w", n, None, None))
        if self.block and self.block[-1][0] == "s":
            self.block[-1][1].append(line)
        else:
            self.block.append(("s", [line]))

    def vlane(self, lines: list[str]) -> None:
        if self.block and self.block[-1][0] == "v":
            self.block[-1][1].extend(lines)
        else:
            self.block.append(("v", list(lines)))

    def flush(self) -> None:
        if not self.block:
            return
        self.lines.append(_Block(self.block, self.ind, self.loop_depth, self.block_guarded,  # type: ignore[arg-type]
                                 events=self.events, skip=self.mask_writes if self.skip_ok else None))
        self.block = []
        self.block_guarded = False
        self.events = []
        self.ver = self._newver(None)
        self.mver = {}
        self.root, self.skip_ok, self.mask_writes = self.ver, True, set()

    def _under_root(self, v: int | None) -> bool:
        while v is not None:
            if v == self.root:
                return True
            v = self.vparent.get(v)
        return False

    # ---- instructions
    def instruction(self, ins: Instruction) -> None:
        sem = ins.defn.sem
        if sem == "sync.barrier":
            self.flush()
            site = len(self.sites)
            self.sites.append(Site(*self.cur, ins))
            self.site_rows.append((0, 0, 0, 0, 0, 0))
            # the active lanes, counted on the chunks (padding lanes are never active)
            self.emit("{ const u32 aw_na = aw_vcount_s(awg_S, AW_NS, AWS_A, aw_nl / AW_V);")
            self.emit(f"  if (aw_na != 0u && aw_na != aw_n) {{ u32 z = 0u; if (__atomic_compare_exchange_n(&aw_err[0], "
                      f"&z, {ERR_DIVERGENT_BARRIER}u, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {{ aw_err[1] = aw_na; "
                      f"aw_err[2] = aw_n; aw_err[3] = aw_g; aw_err[4] = {site}u; }} return {RC_BARRIER}; }} }}")
            return
        if sem == "sync.fence":
            self.flush()
            if ins.operands[1] is not MemoryOrder.RELAXED:
                self.emit("__atomic_thread_fence(__ATOMIC_SEQ_CST);")
            return
        if sem == "sync.wave_barrier":
            # every lane's accesses before it complete before any lane's after it (the lane loop
            # ends here): the wave barrier of spec §7.10, for every wave of the workgroup at once
            self.flush()
            return
        if ins.defn.flags & Flag.WAVE_COLLECTIVE:
            self.flush()
            self.collective(ins)
            return
        if sem in ("mem.ld", "mem.st") and cpu_vector.vector_access(ins):
            self.vaccess(ins)
            return
        if not sem.startswith("atomic."):
            try:
                vals = cpu_vector.spell(self, ins)
            except cpu_vector.NoVector:
                vals = None
            if vals is not None:
                cond = self._cond(ins)
                self._reads(" ".join(vals.values()) + " " + (cond[1] or ""), cond)
                out = ["{", f"  const aw_vu aw_e = {self.vcond(ins)};"]
                out += self._selects([f"  {d} = @SEL@(aw_e, {e}, {d});" for d, e in vals.items()], cond)
                self.vlane([*out, "}"])
                return
        sr = SpecialRegister(ins.operands[1]) if sem == "move.mov_sr" else None
        if sr in _IDS:
            # thread ids come from per-lane tables made once per call (no division in the lane
            # loop: a division could trap, which keeps the compiler from vectorising); a 1-D
            # workgroup's x id is the lane index itself (affine: contiguous accesses)
            e = _IDS[sr]
            stmts = [f"r{ins.operands[0]} = (u32)({e});"]
        else:
            stmts = handler(ins.defn)(self, ins)
        if not stmts:
            return
        atomic = sem.startswith("atomic.")
        if atomic:
            self.flush()
        cond = "act" if ins.guard is None else f"act & {self.p(ins.guard)}"
        dests = self.dests(ins)
        memory = bool(ins.defn.flags & (Flag.LOAD | Flag.STORE)) or atomic or ins.defn.category in (
            Category.LOCAL_MEMORY, Category.DEVICE_MEMORY, Category.ATOMIC, Category.ASYNC_COPY)
        # branch-free where possible (the compiler then vectorises the lane loop): the instruction
        # runs in every lane, and the lanes that do not execute get their destinations back
        out = ["{", f"  const u32 aw_e = {cond};"]
        out += [f"  const {t} aw_k{i} = {d};" for i, (d, t) in enumerate(dests)]
        if memory:
            go = "aw_e"
            if self.checked and ins.defn.flags & (Flag.LOAD | Flag.STORE):
                pre, go = self.guard(ins)
                out += ["  " + x for x in pre]
            out += [f"  if ({go}) {{", *["    " + x for x in stmts], "  }"]
            if go != "aw_e":
                out += [f"  {d} = aw_e ? ({go} ? {d} : 0) : aw_k{i};" for i, (d, _t) in enumerate(dests)]
            else:
                out += [f"  {d} = aw_e ? {d} : aw_k{i};" for i, (d, _t) in enumerate(dests)]
        else:
            out += ["  {", *["    " + x for x in stmts], "  }"]
            out += [f"  {d} = aw_e ? {d} : aw_k{i};" for i, (d, _t) in enumerate(dests)]
        out.append("}")
        for line in out:
            self.lane(line)
        if atomic:
            self.flush()

    def vcond(self, ins: Instruction) -> str:
        """The lanes that execute ``ins`` (0/1 per lane of the chunk)."""
        return "act" if ins.guard is None else f"(act & {cpu_vector.pred(ins.guard)})"

    def vaccess(self, ins: Instruction) -> None:
        """A load or store of 4, 8 or 16 bytes on the chunk's lanes (:func:`cpu_vector.access`);
        the bounds checks of :meth:`guard` on vectors."""
        out = ["{", f"  const aw_vu aw_e = {self.vcond(ins)};"]
        go = "aw_e"
        if self.checked:
            pre, go = self.vguard(ins)
            out += ["  " + x for x in pre]
        cond = self._cond(ins)
        body = cpu_vector.access(self, ins, go)
        # reads: the address, a store's value, the guard, the bounds tests (a load's destinations
        # are the selects' targets and third operands, not reads)
        sel = [_SEL_LINE.match(x) for x in body]
        self._reads(" ".join(m.group(4) if m and "@SEL@" in x else x for x, m in zip(body, sel, strict=True))
                    + " " + " ".join(out) + " " + (cond[1] or ""), cond)
        out += ["  " + x for x in self._selects(body, cond)]
        self.vlane([*out, "}"])

    def vguard(self, ins: Instruction) -> tuple[list[str], str]:
        """:meth:`guard` on the chunk's lanes (one 32-bit offset: :func:`cpu_vector.vector_access`)."""
        (addr, size, _wrote), = accesses_of(ins)
        site = self.site(ins, addr, size, _wrote)
        r, off = f"r{addr.reg}", int(addr.offset)
        ok = f"aw_in{site}"
        if off >= 0:
            pre = [f"const aw_vu {ok} = aw_ok{site} & AW_B({r} <= aw_lim{site});"]
        else:
            pre = [f"const aw_vu {ok} = aw_ok{site} & AW_B({r} >= {-off}u) & AW_B(({r} - {-off}u) <= aw_lim{site});"]
        bad = f"aw_f{site}"
        # the record is updated only in a chunk where some lane fails (rare: one test otherwise)
        pre += [f"const aw_vu {bad} = aw_e & ({ok} ^ 1u);",
                f"if (aw_vany({bad})) {{ const aw_vu aw_first = {bad} & AW_B(aw_es > {site}u); "
                f"aw_el = aw_vsel(aw_first, {r}, aw_el); aw_es = aw_vsel(aw_first, AW_VB({site}u), aw_es); }}"]
        self.block_guarded = True
        return pre, f"(aw_e & {ok})"

    def dests(self, ins: Instruction) -> list[tuple[str, str]]:
        """The registers and predicates ``ins`` may write, as (C lvalue, C type)."""
        out: list[tuple[str, str]] = []
        nreg = max(1, self.k.registers)
        for kind, v in zip(ins.defn.operands, ins.operands, strict=False):
            if not kind.is_dest:
                continue
            if kind is Operand.PD:
                out.append((f"p{int(v)}", "u32"))
            elif kind.reg_count:
                n = kind.reg_count
                if n == 1 and ins.defn.type is not None and ins.defn.type.bits == 64:
                    n = 2
                out += [(f"r{int(v) + i}", "u32") for i in range(n) if int(v) + i < nreg]
        return out

    def site(self, ins: Instruction, addr: object, size: int, wrote: bool) -> int:
        """Register one guarded access (its row of the site table; for a 32-bit offset its
        loop-invariant bound ``aw_lim<site>`` and ``aw_ok<site>``, buffer large enough);
        returns its site number."""
        site = len(self.sites)
        self.sites.append(Site(*self.cur, ins))
        if isinstance(addr, DeviceAddr):
            n, arg = gen_name("n", addr.buffer), addr.buffer
        else:
            n, arg = f"{int(self.k.local_memory)}ul", LOCAL_ARG
        off = int(addr.offset)  # type: ignore[attr-defined]
        wide = isinstance(addr, DeviceAddr) and Operand.DADDR64 in ins.defn.operands
        self.site_rows.append((arg & 0xFFFFFFFF, size, int(wrote), int(wide), off & 0xFFFFFFFF,
                               (off >> 32) & 0xFFFFFFFF))
        if wide:
            pass
        elif off >= 0:
            # u32 register + constant: the bound is a loop-invariant u32, the test one u32 compare
            lim = f"(({n}) >= {size + off}ul ? (({n}) - {size + off}ul > 0xFFFFFFFFul ? 0xFFFFFFFFu : " \
                  f"(u32)(({n}) - {size + off}ul)) : 0u)"
            self.hoisted.append(f"const u32 aw_lim{site} = {lim}, aw_ok{site} = (u32)(({n}) >= {size + off}ul);")
        else:
            lim = f"(({n}) - {size}ul > 0xFFFFFFFFul ? 0xFFFFFFFFu : (u32)(({n}) - {size}ul))"
            self.hoisted.append(f"const u32 aw_lim{site} = {lim}, aw_ok{site} = (u32)(({n}) >= {size}ul);")
        return site

    def guard(self, ins: Instruction) -> tuple[list[str], str]:
        """Bounds tests of a memory instruction: (statements run in every lane, the condition
        under which the access runs). A failing executing lane records its site and offset."""
        pre: list[str] = []
        oks = []
        for addr, size, wrote in accesses_of(ins):
            site = self.site(ins, addr, size, wrote)
            if isinstance(addr, DeviceAddr):
                n = gen_name("n", addr.buffer)
            else:
                n = f"{int(self.k.local_memory)}ul"
            off = int(addr.offset)
            wide = isinstance(addr, DeviceAddr) and Operand.DADDR64 in ins.defn.operands
            ok, bad = f"aw_in{site}", f"aw_f{site}"
            r = f"r{addr.reg}"
            if wide:  # a 64-bit offset: 64-bit arithmetic
                o = f"aw_o{site}"
                pre += [f"const u64 {o} = {self.u64(addr.reg)} + (u64)(i64){off};",
                        f"const u32 {ok} = ({n} >= {size}ul) & ({o} <= {n} - {size}ul);"]
            elif off >= 0:
                pre.append(f"const u32 {ok} = aw_ok{site} & ({r} <= aw_lim{site});")
            else:
                pre.append(f"const u32 {ok} = aw_ok{site} & ({r} >= {-off}u) & ({r} - {-off}u <= aw_lim{site});")
            pre += [f"const u32 {bad} = aw_e & !{ok} & (aw_es > {site}u);",
                    f"aw_el = {bad} ? {r} : aw_el;"]
            if wide:
                pre.append(f"aw_eh = {bad} ? r{addr.reg + 1} : aw_eh;")
            pre.append(f"aw_es = {bad} ? {site}u : aw_es;")
            oks.append(ok)
            self.block_guarded = True
        return pre, "(aw_e & " + " & ".join(oks) + ")"

    # ---- wave operations: loops over each wave's W lanes
    def collective(self, ins: Instruction) -> None:
        W = self.W
        g = self.p(ins.guard) if ins.guard is not None else None
        self.emit("#pragma GCC ivdep")
        self.emit(f"for (u32 aw_l = 0; aw_l < aw_nl; ++aw_l) awg_EX[aw_l] = {'act && ' + g if g else 'act'};")
        self.emit(f"for (u32 aw_w = 0; aw_w < aw_nl; aw_w += {W}u) {{")
        self.ind += 1
        op = ins.defn.sem
        lines = {"wave.shfl": self._shfl, "wave.bcast": self._bcast, "wave.ballot": self._ballot,
                 "wave.any": self._vote, "wave.all": self._vote, "wave.wred": self._wred,
                 "wave.wscan": self._wscan}.get(op)
        if lines is None:
            raise CFamilyError("cpu", [f"{ins.mnemonic}: no cpu spelling"])
        for line in lines(ins):
            self.emit(line)
        self.ind -= 1
        self.emit("}")

    def _each(self, body: str) -> str:
        return f"for (u32 j = 0; j < {self.W}u; ++j) {{ const u32 aw_l = aw_w + j; (void)aw_l; {body} }}"

    def _mask_of(self, cond: str) -> list[str]:
        return ["u64 m = 0u;", self._each(f"m |= (u64)(({cond}) ? 1u : 0u) << j;")]

    def _shfl(self, ins: Instruction) -> list[str]:
        dreg, a, b = ins.operands
        W = self.W
        src = {"idx": f"(i64)r{b}", "up": f"(i64)j - (i64)r{b}", "down": f"(i64)j + (i64)r{b}",
               "xor": f"(i64)(j ^ r{b})"}[ins.defn.variant]
        return [*self._mask_of("awg_EX[aw_l]"), f"u32 v[{W}];",
                self._each(f"const i64 s = {src}; const bool ok = s >= 0 && s < {W} && ((m >> (u32)(s < 0 ? 0 : "
                           f"s >= {W} ? 0 : s)) & 1u); v[j] = ok ? AWL(AWS_R{a}, aw_w + (u32)s) : r{a};"),
                self._each(f"if (awg_EX[aw_l]) r{dreg} = v[j];")]

    def _bcast(self, ins: Instruction) -> list[str]:
        dreg, a, b = ins.operands
        W = self.W
        return [*self._mask_of("awg_EX[aw_l]"),
                "const u32 low = m == 0u ? 0u : aw_ctz64(m);",
                f"const u32 L = AWL(AWS_R{b}, aw_w + low);",
                f"const u32 src = (L < {W}u && ((m >> L) & 1u)) ? L : low;",
                f"const u32 v = AWL(AWS_R{a}, aw_w + src);",
                self._each(f"if (awg_EX[aw_l]) r{dreg} = v;")]

    def _ballot(self, ins: Instruction) -> list[str]:
        dreg, pr = ins.operands
        return [*self._mask_of(f"awg_EX[aw_l] && {self.p(pr)}"),
                self._each(f"if (awg_EX[aw_l]) {{ r{dreg} = (u32)m; r{dreg + 1} = (u32)(m >> 32); }}")]

    def _vote(self, ins: Instruction) -> list[str]:
        dreg, pr = ins.operands
        if ins.defn.op == "any":
            return [*self._mask_of(f"awg_EX[aw_l] && {self.p(pr)}"),
                    self._each(f"if (awg_EX[aw_l]) p{dreg} = m != 0u;")]
        return [*self._mask_of(f"awg_EX[aw_l] && !({self.p(pr)})"),
                self._each(f"if (awg_EX[aw_l]) p{dreg} = m == 0u;")]

    def _wred(self, ins: Instruction) -> list[str]:
        from anywave.backends.cfamily_ops import _WRED_INT

        dreg, a = ins.operands
        t, op, W = ins.defn.type, ins.defn.variant, self.W
        ident = f"0x{identity(ins.defn):08X}u"
        if t is T.F32:
            comb = {"add": "s[j] + o[j]", "min": "aw_minnum(s[j], o[j])", "max": "aw_maxnum(s[j], o[j])"}[op]
            ctype, init, out = "float", f"awg_EX[aw_l] ? AW_F32(r{a}) : AW_F32({ident})", "aw_c32(s[j])"
        else:
            c = _WRED_INT[op] if op in _WRED_INT else _WRED_INT[(op, t.is_signed)]
            comb = c.replace("s", "s[j]").replace("o", "o[j]")
            ctype, init, out = "u32", f"awg_EX[aw_l] ? r{a} : {ident}", "s[j]"
        lines = [f"{ctype} s[{W}], o[{W}];", self._each(f"s[j] = {init};")]
        for k in butterfly_steps(W):
            lines += [f"for (u32 j = 0; j < {W}u; ++j) o[j] = s[j ^ {k}u];",
                      f"for (u32 j = 0; j < {W}u; ++j) s[j] = {comb};"]
        return lines + [self._each(f"if (awg_EX[aw_l]) r{dreg} = {out};")]

    def _wscan(self, ins: Instruction) -> list[str]:
        dreg, a = ins.operands
        t, W = ins.defn.type, self.W
        f32 = t is T.F32
        ctype = "float" if f32 else "u32"
        get = "AW_F32({})" if f32 else "{}"
        ident, first = f"0x{identity(ins.defn):08X}u", f"0x{exclusive_first(ins.defn) or 0:08X}u"
        lines = [f"{ctype} s[{W}], o[{W}];",
                 self._each(f"s[j] = awg_EX[aw_l] ? {get.format(f'r{a}')} : {get.format(ident)};")]
        for k in kogge_stone_steps(W):
            lines += [f"for (u32 j = 0; j < {W}u; ++j) o[j] = s[j >= {k}u ? j - {k}u : j];",
                      f"for (u32 j = {k}u; j < {W}u; ++j) s[j] = o[j] + s[j];"]
        if ins.defn.variant != "incl":
            lines += [f"for (u32 j = 0; j < {W}u; ++j) o[j] = s[j > 0u ? j - 1u : 0u];",
                      f"for (u32 j = 0; j < {W}u; ++j) s[j] = j == 0u ? {get.format(first)} : o[j];"]
        return lines + [self._each(f"if (awg_EX[aw_l]) r{dreg} = {'aw_c32(s[j])' if f32 else 's[j]'};")]

    # ---- mask-stack control flow in lock step
    def _m(self, m: Mask) -> str:
        if m.kind == "pred":
            assert m.pred is not None
            return ("!" if m.pred.negated != m.neg else "") + f"p{m.pred.index}"
        if m.kind == "false":
            return "!true" if m.neg else "false"
        if m.kind == "raw":
            return ("!" if m.neg else "") + m.name
        name = {"A": "act", "x": "aw_x"}.get(m.kind) or gen_name(m.kind, m.depth)
        if m.kind not in ("A", "x"):
            self.masks.add(name)
        return ("!" if m.neg else "") + name

    def _vm(self, m: Mask) -> str:
        """A mask operand on the chunk's lanes (0/1 each)."""
        t = self._m(m)
        neg = t.startswith("!")
        t = t.removeprefix("!")
        if t in ("true", "false"):
            return "1u" if (t == "true") != neg else "0u"
        return f"({t} ^ 1u)" if neg else t

    def _track(self, op: str, dst: Mask, a: Mask, b: Mask | None) -> None:
        """Keep :attr:`ver` (and the frame masks' versions) through a mask update."""
        ops = [a] + ([b] if b is not None else [])
        plain_a = any(m.kind == "A" and not m.neg for m in ops)
        if dst.kind == "A":
            if op == "mov" and not a.neg and (a.kind, a.depth) in self.mver:
                self.ver = self.mver[(a.kind, a.depth)]
            elif op == "and" and plain_a:
                self.ver = self._newver(self.ver)
            elif op == "and" and any(not m.neg and (m.kind, m.depth) in self.mver for m in ops):
                known = next(m for m in ops if not m.neg and (m.kind, m.depth) in self.mver)
                self.ver = self._newver(self.mver[(known.kind, known.depth)])
            else:
                self.ver = self._newver(None)
            return
        key = (dst.kind, dst.depth)
        if op == "mov" and a.kind == "A" and not a.neg:
            self.mver[key] = self.ver
        elif op == "and" and plain_a:
            self.mver[key] = self._newver(self.ver)
        elif op == "mov" and not a.neg and (a.kind, a.depth) in self.mver:
            self.mver[key] = self.mver[(a.kind, a.depth)]
        else:
            self.mver.pop(key, None)

    def mask(self, op: str, dst: Mask, a: Mask, b: Mask | None = None) -> None:
        self._track(op, dst, a, b)
        self.mask_writes.add(self._m(dst))
        v = self.ver if dst.kind == "A" else self.mver.get((dst.kind, dst.depth))
        if not self._under_root(v):
            self.skip_ok = False
        if op == "mov":
            self.vlane([f"{self._m(dst)} = AW_VB({self._vm(a)});"])
        else:
            assert b is not None
            self.vlane([f"{self._m(dst)} = AW_VB({self._vm(a)} {'&' if op == 'and' else '|'} {self._vm(b)});"])

    def condition(self, cond: Pred) -> Mask:
        name = gen_name("c", self.fresh())
        self._reads(cpu_vector.pred(cond), (self.ver, None))
        self.vlane([f"const aw_vu {name} = AW_VB({cpu_vector.pred(cond)});"])  # used by the mask updates that follow
        return Mask("raw", name=name)

    def enter(self, f: Frame, part: str) -> None:
        # a region of an if: a chunk with no active lane skips it when it ends in the same lane
        # block (its instructions do nothing there; the masks it writes belong to constructs
        # inside it, which set them again on entry)
        k = self.fresh()
        self.regions.append((k, len(self.lines)))
        self.vlane([f"@OPEN{k}@"])

    def leave(self, f: Frame, part: str) -> None:
        k, at = self.regions.pop()
        if at == len(self.lines):  # no lane block ended inside the region
            self.vlane([f"@CLOSE{k}@"])
            self.closed.add(k)

    def loop_open(self, f: Frame) -> None:
        self.flush()
        self.loop_depth += 1
        self.has_loop = True
        self._open("if (aw_any_s(awg_S, AW_NS, AWS_A, aw_nl / AW_V)) {")
        self._open("do {")

    def loop_close(self, f: Frame) -> None:
        self.flush()
        self.emit(f"if (*aw_stop) return {RC_STOPPED};")
        self._close("} while (aw_any_s(awg_S, AW_NS, AWS_A, aw_nl / AW_V));")
        self._close()
        self.loop_depth -= 1

    # ---- the kernel
    def render_cpu(self) -> tuple[str, CpuKernel]:
        k, W = self.k, self.W
        cn = c_name(k.name)
        pinfo = []
        for a in k.args:
            if a.kind is ArgKind.BUFFER:
                pinfo.append((a.name, "buffer"))
            else:
                pinfo.append((a.name, "u64" if a.type.bits == 64 else "u32"))
        self.ind = 1
        walk = ControlWalk(self.m, self, True)
        walk.run(k.code)
        self.flush()
        nreg = max(1, k.registers)
        self.masks |= {gen_name(v, i) for i in range(walk.max_depth) for v in ("fo", "fp", "fc")}
        masks = sorted(self.masks)
        body, slots = _place(self.lines, self.checked, self.site_tab, self.vparent, self.closed, self.plain_sel)
        # lane state kept in memory between lane loops (the values some other lane loop, a wave
        # operation or a loop test reads; the rest are C locals of one lane loop: _place): one
        # block of vectors per chunk, a slot per value (awg_S[chunk * AW_NS + slot]); the other
        # code sees lane l of a slot as AWL(slot, l)
        out = [f"#define AW_NS {len(slots)}u"]
        out += [f"#define {_slot(n)} {i}u" for n, i in sorted(slots.items(), key=lambda t: t[1])]
        out += [f"#define r{i} AWL(AWS_R{i}, aw_l)" for i in range(nreg)]
        out += [f"#define p{i} AWL(AWS_P{i}, aw_l)" for i in range(8)]
        out += ["#define act AWL(AWS_A, aw_l)", "#define aw_x AWL(AWS_X, aw_l)", "#define aw_tl aw_l",
                f"#define aw_lane (aw_l & {W - 1}u)"]
        out += [f"#define {m} AWL(AWS_M_{m}, aw_l)" for m in masks]
        tab = self.site_rows or [(0,) * 6]  # (argument, size, wrote, wide, offset lo, hi) by site number
        out.append(f"static const u32 {self.site_tab}[][6] = {{"
                   + ", ".join("{" + ", ".join(f"{v}u" for v in r) + "}" for r in tab) + "};")
        out.append(f"int {cn}(u8 **aw_bufs, const u64 *aw_sizes, const u64 *aw_scal, const u32 *aw_dims, "
                   "u32 aw_g0, u32 aw_g1, u32 *aw_err, volatile int *aw_stop) {")
        pre = ["const u32 aw_wgx = aw_dims[0], aw_wgy = aw_dims[1], aw_wgz = aw_dims[2];",
               "const u32 aw_ng0 = aw_dims[3], aw_ng1 = aw_dims[4], aw_ng2 = aw_dims[5], aw_nl = aw_dims[6];",
               "const u32 aw_n = aw_wgx * aw_wgy * aw_wgz;", "const bool aw_1d = aw_wgy * aw_wgz == 1u;",
               "(void)aw_ng0; (void)aw_ng1; (void)aw_ng2; (void)aw_1d; (void)aw_err; (void)aw_sizes; (void)aw_scal;"]
        for i, a in enumerate(k.args):
            if a.kind is ArgKind.BUFFER:
                pre.append(f"u8 *const {self.bufname[i]} = aw_bufs[{i}]; const u64 {gen_name('n', i)} = aw_sizes[{i}]; "
                           f"(void){self.bufname[i]}; (void){gen_name('n', i)};")
            else:
                ct = "u64" if a.type.bits == 64 else "u32"
                pre.append(f"const {ct} {self.scal[i]} = ({ct})aw_scal[{i}]; (void){self.scal[i]};")
        pre += self.hoisted
        pre.append("aw_vu awg_S[(aw_nl / AW_V) * AW_NS + 1u];")
        pre.append("u32 awg_EX[aw_nl];")
        lane_bytes = 4 * len(slots) + 4
        if self.checked:
            pre += ["u32 awg_ES[aw_nl], awg_EL[aw_nl], awg_EH[aw_nl];",
                    "for (u32 aw_l = 0; aw_l < aw_nl; ++aw_l) awg_ES[aw_l] = 0xFFFFFFFFu;"]
            lane_bytes += 12
        pre += ["u32 awg_TX[aw_nl], awg_TY[aw_nl], awg_TZ[aw_nl];",
                # (a 1-D workgroup's: no division)
                "if (aw_1d) for (u32 aw_l = 0; aw_l < aw_nl; ++aw_l) { awg_TX[aw_l] = aw_l; awg_TY[aw_l] = 0u; "
                "awg_TZ[aw_l] = 0u; }",
                "else for (u32 aw_l = 0; aw_l < aw_nl; ++aw_l) { awg_TX[aw_l] = aw_l % aw_wgx; "
                "awg_TY[aw_l] = (aw_l / aw_wgx) % aw_wgy; awg_TZ[aw_l] = aw_l / (aw_wgx * aw_wgy); }"]
        lane_bytes += 12
        if k.local_memory:
            pre.append(CPU.local_decl(k.local_memory))
        pre += ["for (u32 aw_g = aw_g0; aw_g < aw_g1; ++aw_g) {",
                "  const u32 aw_gid0 = aw_g % aw_ng0, aw_gid1 = (aw_g / aw_ng0) % aw_ng1, "
                "aw_gid2 = aw_g / (aw_ng0 * aw_ng1);",
                "  (void)aw_gid0; (void)aw_gid1; (void)aw_gid2;",
                "  if (*aw_stop) return 1;",
                "  memset(awg_S, 0, sizeof(aw_vu) * (aw_nl / AW_V) * AW_NS);"]
        if "act" in slots:
            pre.append("  for (u32 aw_ci = 0; aw_ci < aw_nl / AW_V; ++aw_ci) "
                       "awg_S[aw_ci * AW_NS + AWS_A] = AW_B(aw_ci * AW_V + AW_IOTA < aw_n);")
        if k.local_memory:
            pre.append("  memset(aw_lm, 0, sizeof aw_lm);")
        text = "\n".join(out + ["  " + p for p in pre] + body + ["  }", "  return 0;", "}"]
                         + [f"#undef r{i}" for i in range(nreg)] + [f"#undef p{i}" for i in range(8)]
                         + ["#undef act", "#undef aw_x", "#undef aw_tl", "#undef aw_lane", "#undef AW_NS"]
                         + [f"#undef {_slot(n)}" for n in slots]
                         + [f"#undef {m}" for m in masks] + [""])
        info = CpuKernel(k.name, cn, tuple(pinfo), True, k.local_memory, self.checked, tuple(self.sites),
                         lane_bytes=lane_bytes, loops=self.has_loop)
        return text, info


@dataclass
class _Block:
    """The straight-line lane code between two points that need every lane at once: one loop
    over the workgroup's lanes, chunk by chunk. ``depth``: loops around it (0: it runs once per
    workgroup)."""

    items: list[tuple[str, list[str]]]  # ("v", vector statements) / ("s", statements run per lane)
    ind: int
    depth: int
    guarded: bool
    names: set[str] = field(default_factory=set)
    events: list[tuple] = field(default_factory=list)
    skip: set[str] | None = None  # the masks to clear when a chunk skips the block (None: never skips)

    @property
    def lines(self) -> list[str]:
        return [line for _kind, lines in self.items for line in lines]


#: the lane-state names of a lane block's text (registers, predicates, the active bit, the
#: leaving lanes, the mask-stack frames), and their arrays' names in the other code
_NAME = re.compile(r"(?<![\w])(r\d+|p\d+|act|aw_x|awg_f[a-z]\d+)(?![\w])")
#: a select whose old-value operand may be dropped (``d = @SEL<id>@(aw_e, value, d);``)
_SEL_LINE = re.compile(r"^(\s*)(\w+) = @SEL(\d*)@\(aw_e, (.*), \2\);$")
#: in a scalar statement: a lane-state name, or the lane's error record
_ELEM = re.compile(r"(?<![\w])(?:(r\d+|p\d+|act|aw_x|awg_f[a-z]\d+)|(aw_es|aw_el|aw_eh))(?![\w])")
_ARRAY_NAME = re.compile(r"(?<![\w])(?:awg_|AWS_)(R\d+|P\d+|A|X|M_awg_f[a-z]\d+)(?![\w])")


def _canon(array: str) -> str:
    """The lane-state name of an array name's tail (``R5`` -> ``r5``, ``A`` -> ``act``)."""
    if array[0] in "RP":
        return array[0].lower() + array[1:]
    return {"A": "act", "X": "aw_x"}.get(array) or array[2:]


class _Arrays(dict):
    def __missing__(self, n: str) -> str:
        if n[0] in "rp" and n[1:].isdigit():
            return f"awg_{n[0].upper()}{n[1:]}"
        return {"act": "awg_A", "aw_x": "awg_X"}.get(n) or f"awg_M_{n}"


#: the array of a lane-state name (``r5`` -> ``awg_R5``, ``awg_fo0`` -> ``awg_M_awg_fo0``)
_ARRAY = _Arrays()


def _slot(n: str) -> str:
    """The C name of a lane-state name's slot (``r5`` -> ``AWS_R5``, ``act`` -> ``AWS_A``)."""
    return "AWS_" + _ARRAY[n].removeprefix("awg_")


def _local(n: str) -> str:
    """The C local of a lane-state name inside a lane loop (``r5`` -> ``awg_lr5``)."""
    return gen_name("l", {"act": "act", "aw_x": "x"}.get(n, n.removeprefix("awg_")))


def _written(line: str, n: str) -> bool:
    """Whether ``line`` may assign lane-state name ``n`` (any assignment form, ``++``/``--``,
    or its address taken: conservative)."""
    return re.search(rf"(?<![\w]){n}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*{n}(?![\w])|"
                     rf"(?<![\w]){n}\s*(?:\+\+|--)", line) is not None


def _contains(w: tuple | None, r: tuple | None, vparent: dict[int, int | None]) -> bool:
    """Whether every lane of condition ``r`` is in condition ``w`` (both ``(active-set version,
    guard)``; a guarded ``w`` or an unknown one covers nothing)."""
    if w is None or r is None or w[1] is not None:
        return False
    v: int | None = r[0]
    while v is not None:
        if v == w[0]:
            return True
        v = vparent.get(v)
    return False


def _private(x: _Block, n: str, vparent: dict[int, int | None]) -> tuple[bool, set[int]]:
    """For a name only lane block ``x`` mentions: (whether it can live in the lane loop alone,
    the selects of its writes that may drop their old-value operand).

    In a block that runs once per workgroup, the name starts from 0 each time: it lives in the
    loop. In a loop, it does when every read is covered by an earlier write of the same run (the
    write's lanes include the read's): no value crosses iterations. A write's select keeps the
    old value in the lanes that do not execute it; it is dropped when every later read either
    reads only lanes of the write or is covered by a write in between."""
    if n[0] not in "rp" or not n[1:].isdigit():
        return x.depth == 0, set()
    ev = [(i, e) for i, e in enumerate(x.events) if e[1] == n]
    writes = [(i, e[2], e[3]) for i, e in ev if e[0] == "w"]
    reads = [(i, e[2]) for i, e in ev if e[0] == "r"]
    if x.depth > 0 and not all(any(iw < ir and _contains(cw, cr, vparent) for iw, cw, _s in writes)
                               for ir, cr in reads):
        return False, set()
    drop = set()
    for iw, cw, sid in writes:
        if sid is None:
            continue
        if all(_contains(cw, cr, vparent) or any(iw < i3 < ir and _contains(c3, cr, vparent) for i3, c3, _s in writes)
               for ir, cr in reads if ir > iw):
            drop.add(sid)
    return True, drop


_REGION = re.compile(r"^@(OPEN|CLOSE)(\d+)@$")


def _region(line: str, closed: set[int], act: str) -> str:
    """A region marker as C: ``if (some lane active) {`` / ``}``, or nothing when the region
    spans lane blocks."""
    m = _REGION.match(line)
    if m is None:
        return line
    if int(m.group(2)) not in closed:
        return ""
    return f"if (aw_vany({act})) {{" if m.group(1) == "OPEN" else "}"


#: a line of a lane block where the active set may change or a name is declared: segments of
#: the block between such lines run with one active set (_render_items)
_BOUNDARY = re.compile(r"^\s*(act = |const aw_vu awg_c\d+ = |@OPEN|@CLOSE)")
def _bit_use(line: str, n: str, target: str | None) -> bool:
    """Whether ``line`` reads name ``n`` other than as ``AW_VF(n)`` (a float operand) or as the
    target of its assignment."""
    for m in re.finditer(rf"(?<![\w]){n}(?![\w])", line):
        if line[:m.start()].endswith("AW_VF("):
            continue
        if n == target and re.match(rf"^\s*{n} = ", line) and m.start() == line.index(n):
            continue
        return True
    return False


def _balanced(e: str) -> bool:
    """Whether parentheses balance in ``e`` (so ``aw_vc32(e)`` wraps all of it)."""
    depth = 0
    for ch in e:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


#: selects a segment needs before it is worth a copy for chunks whose lanes are all active
VERSION_MIN_SELECTS = 16


def _render_items(x: _Block, pad: str, closed: set[int], drop: set[int], plain_sel: set[int],
                  name: Any, name_of: Any) -> list[str]:
    """The C of a block's items (vector statements with their names, scalar statements in a loop
    over the chunk's lanes). In a block inside a loop, a segment with many selects of writes that
    execute where the active bit is set runs in two copies: for a chunk whose lanes are all
    active, the copy whose selects keep no old value."""
    units: list[tuple[str, Any]] = []
    for kind, body in x.items:
        if kind == "v":
            units += [("v", line) for line in body]
        else:
            units.append(("s", body))
    segs: list[tuple[bool, list]] = []
    for u in units:
        if u[0] == "v" and _BOUNDARY.match(u[1]):
            segs.append((True, [u]))
        elif segs and not segs[-1][0]:
            segs[-1][1].append(u)
        else:
            segs.append((False, [u]))

    def sel_ids(seg: list) -> set[int]:
        return {int(m.group(3)) for k, line in seg if k == "v" for m in [_SEL_LINE.match(line)] if m and m.group(3)}

    def render(seg: list, dropped: set[int], fast: bool = False) -> list[str]:
        out: list[str] = []
        # the copy for fully active chunks: a float result written in every lane stays raw (x86's
        # NaN, not yet the canonical one) until something other than a float operation reads it
        # (AW_VF(r) reads are NaN-payload blind: the float operations, compares, conversions) or
        # the segment ends; then it is made canonical, as each operation does in the other copy
        raw: set[str] = set()

        def canon(names: set[str]) -> None:
            for n in sorted(names):
                out.append(pad + "  " + _NAME.sub(name, f"{n} = aw_vc32(AW_VF({n}));"))
            raw.difference_update(names)

        for kind, body in seg:
            if kind == "v":
                line = _region(body, closed, name_of("act"))
                m = _SEL_LINE.match(line) if "@SEL" in line else None
                made_raw = None
                if m is not None:
                    sid, d, val = int(m.group(3)), m.group(2), m.group(4)
                    if sid in dropped:
                        if fast and val.startswith("aw_vc32(") and val.endswith(")") and _balanced(val[8:-1]):
                            line, made_raw = f"{m.group(1)}{d} = (aw_vu)({val[8:-1]});", d
                        else:
                            line = f"{m.group(1)}{d} = {val};"
                    else:
                        line = f"{m.group(1)}{d} = aw_vsel(aw_e, {val}, {d});"
                if fast and raw:
                    target = m.group(2) if m is not None and int(m.group(3)) in dropped else None
                    canon({n for n in raw if _bit_use(line, n, target)})
                if m is not None and int(m.group(3)) in dropped:
                    raw.discard(m.group(2))  # written in every lane
                if made_raw:
                    raw.add(made_raw)
                out.append(pad + "  " + _NAME.sub(name, line))
                continue
            if fast and raw:
                canon({n for n in raw if any(_bit_use(line, n, None) for line in body)})
            # the scalar statements, once per lane of the chunk: each name is that lane's element
            out.append(pad + f"  for (u32 aw_j = 0; aw_j < {cpu_vector.V}u; ++aw_j) {{")
            out.append(pad + "    const u32 aw_l = aw_c + aw_j; (void)aw_l;")
            out += [pad + "    " + _ELEM.sub(lambda m: (name(m) if m.group(1) else m.group(2)) + "[aw_j]", line)
                    for line in body]
            out.append(pad + "  }")
        canon(set(raw))
        return out

    out: list[str] = []
    for boundary, seg in segs:
        full = (sel_ids(seg) & plain_sel) - drop
        if boundary or x.depth == 0 or len(full) < VERSION_MIN_SELECTS:
            out += render(seg, drop)
            continue
        out.append(pad + f"  if (aw_vall({name_of('act')})) {{")
        out += render(seg, drop | full, fast=True)
        out.append(pad + "  } else {")
        out += render(seg, drop)
        out.append(pad + "  }")
    return out


def _place(lines: list, checked: bool, site_tab: str, vparent: dict[int, int | None],
           closed: set[int], plain_sel: set[int]) -> tuple[list[str], dict[str, int]]:
    """Render the lane blocks of ``lines`` (strings and :class:`_Block`) as lane loops, each
    lane-state name a C local of the loop where that is exact.

    A name is kept in its ``[P]`` array when some other code reads it (a wave operation, a
    barrier's count, a loop test: any non-block line), when two lane loops use it, or when its
    one lane loop is inside a loop (its value then crosses iterations). Otherwise it lives in
    one lane loop that runs once per workgroup, and that loop starts from the value every lane
    has there: 0 (the zeroed state), ``aw_l < aw_n`` for the active bit. In a lane loop, each
    array name is read into a local at the start and written back at the end when assigned, so
    the C compiler keeps the lane's values in (vector) registers: stores through the kernel's
    buffers may alias nothing of them.

    Returns (the C lines, the names that need arrays)."""
    used_outside: set[str] = set()
    where: dict[str, int] = {}
    for x in lines:
        if isinstance(x, _Block):
            x.names = {m.group(1) for line in x.lines for m in _NAME.finditer(line)}
            for n in x.names:
                where[n] = where.get(n, 0) + 1
        else:
            used_outside |= {m.group(1) for m in _NAME.finditer(x)}
            used_outside |= {_canon(m.group(1)) for m in _ARRAY_NAME.finditer(x)}
    arrays = set(used_outside)
    drop: set[int] = set()  # selects whose old values no read looks at
    for x in lines:
        if isinstance(x, _Block):
            for n in x.names:
                if n in used_outside or where[n] > 1:
                    arrays.add(n)
                    continue
                private, dropped = _private(x, n, vparent)
                if not private:
                    arrays.add(n)
                else:
                    drop |= dropped
    slots = {n: i for i, n in enumerate(sorted(arrays))}
    out: list[str] = []
    for x in lines:
        if not isinstance(x, _Block):
            out.append(x)
            continue
        pad = "  " * x.ind
        if x.guarded:
            out.append(pad + "{ u32 aw_bad = 0u;")
        out.append(pad + f"for (u32 aw_ci = 0; aw_ci < aw_nl / {cpu_vector.V}u; ++aw_ci) {{")
        head, tail = [f"const u32 aw_c = aw_ci * {cpu_vector.V}u; const aw_vu aw_lv = aw_c + AW_IOTA; (void)aw_lv;",
                      "aw_vu *const aw_st = awg_S + aw_ci * AW_NS; (void)aw_st;"], []
        for n in sorted(x.names):
            if n not in arrays:
                head.append(f"aw_vu {_local(n)} = {'AW_B(aw_lv < aw_n)' if n == 'act' else 'AW_VB(0u)'};")

        def name_of(n: str, slots: dict[str, int] = slots) -> str:
            return f"aw_st[{slots[n]}]" if n in slots else _local(n)

        def name(m: re.Match) -> str:
            return name_of(m.group(1))
        if x.guarded:
            head.append("aw_vu aw_es = AW_VB(0xFFFFFFFFu), aw_el = AW_VB(0u), aw_eh = AW_VB(0u);")
            tail += ["aw_vst(&awg_ES[aw_c], aw_es); aw_vst(&awg_EL[aw_c], aw_el); aw_vst(&awg_EH[aw_c], aw_eh);",
                     "aw_bad |= aw_vany((aw_vu)(aw_es != 0xFFFFFFFFu));"]
        out += [pad + "  " + h for h in head]
        if x.skip is not None and "act" in x.names:
            # no active lane in this chunk: the block does nothing here but clear its masks
            clear = [f"{name_of(m)} = AW_VB(0u);" for m in sorted(x.skip) if m != "act" and m in arrays]
            out.append(pad + f"  if (!aw_vany({name_of('act')})) {{ {' '.join(clear)} continue; }}")
        out += _render_items(x, pad, closed, drop, plain_sel, name, name_of)
        out += [pad + "  " + t for t in tail]
        out.append(pad + "}")
        if x.guarded:
            out.append(pad + f"if (aw_bad) aw_report(aw_err, awg_ES, awg_EL, awg_EH, aw_nl, {site_tab}); }}")
    return out, slots


def _unsupported(module: Module, kernel) -> list[str]:  # noqa: ANN001
    from anywave.binary.module import kernel_bodies
    from anywave.isa.table import Category

    out = []
    for owner, code in kernel_bodies(module, kernel):
        for i, ins in enumerate(code):
            cat = ins.defn.category
            if ins.defn.sem.startswith("mma.") or getattr(Category, "MMA", None) is cat:
                out.append(f"{owner}, instruction {i}: {ins.mnemonic}: {_MMA_REASON}")
    return out


def refusal(module: Module, kernel) -> str | None:  # noqa: ANN001
    """Why :func:`translate` would refuse ``kernel`` of ``module`` (matrix fragments, a
    feature the target lacks), or None; the reason names the instruction."""
    probs = check_supported(module, CPU_FEATURES, CPU).get(kernel.name, []) + _unsupported(module, kernel)
    return "; ".join(probs[:3]) if probs else None


_AUX = r"""
AW_FN bool aw_any(const u32 *a, u32 n) { u32 r = 0; for (u32 l = 0; l < n; ++l) r |= a[l]; return r != 0; }
AW_FN bool aw_failed(const u32 *es, u32 n) {
  u32 r = 0xFFFFFFFFu; for (u32 l = 0; l < n; ++l) r &= es[l]; return r != 0xFFFFFFFFu;
}
"""

#: the C text every program of this backend begins with, then a newline and its kernels: the
#: same for every module and W, so the runtime compiles it once into a precompiled header
#: (:meth:`anywave.runtime.cpu.CpuDevice.library`)
PREFIX = "\n".join([_HEADER, PRELUDE, _AUX, cpu_vector.VEC_HEADER])


def translate(module: Module, wave_width: int, kernels: Sequence[str] | None = None,
              checked: bool = True) -> CProgram:
    """Render ``module`` as C for the host CPU at wave width ``wave_width`` (module docs).

    Args:
        module: a valid WAVE module (verified first).
        wave_width: W, one of 8, 16, 32, 64.
        kernels: restrict to these kernel names.
        checked: bounds-checked build (every memory access guarded; the default).

    Returns:
        a :class:`~anywave.backends.cfamily.CProgram` (dialect ``cpu``) whose kernels are
        :class:`CpuKernel`; kernels the target cannot run are in ``refused`` with the reason.

    Raises:
        VerifyError: the module breaks a rule of the spec.
        CFamilyError: W not supported, or an unknown kernel name.
    """
    from anywave.binary.verify import verify_cached

    verify_cached(module)
    if wave_width not in WAVE_WIDTHS:
        raise CFamilyError("cpu", [f"wave width {wave_width!r} is not one of {WAVE_WIDTHS}"])
    names = [k.name for k in module.kernels]
    if kernels is not None:
        bad = [n for n in kernels if n not in names]
        if bad:
            raise CFamilyError("cpu", [f"no kernel {bad[0]!r}; the module has {names}"])
    problems = check_supported(module, CPU_FEATURES, CPU)
    parts = [PREFIX]
    out: dict[str, CKernel] = {}
    refused: dict[str, str] = {}
    for k in module.kernels:
        if kernels is not None and k.name not in kernels:
            continue
        probs = problems.get(k.name, []) + _unsupported(module, k)
        if probs:
            refused[k.name] = "; ".join(probs[:3])
            continue
        text, info = _CpuRenderer(module, k, wave_width, checked).render_cpu()
        parts.append(f"/* WAVE kernel {k.name} */\n" + text)
        out[k.name] = info
    return CProgram("\n".join(parts), "cpu", wave_width, out, refused)
