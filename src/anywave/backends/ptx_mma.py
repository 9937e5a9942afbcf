"""PTX lowering of the MMA fragment instructions (docs/spec.md §8.14) onto the tensor cores.

Wave scope ``m16n16k16`` (W = 32, one warp) uses the ``mma.sync.aligned.m16n8k16`` layouts
(PTX ISA, "Matrix fragments for mma.m16n8k16"); with ``g = lane >> 2`` and ``t = lane & 3``:

* A (16x16, 4 b32 per lane, two 16-bit elements each): ``a0 = A[g][2t..2t+1]``,
  ``a1 = A[g+8][2t..]``, ``a2 = A[g][2t+8..]``, ``a3 = A[g+8][2t+8..]``;
* B (16x16 as two 16x8 halves, 4 b32): ``b{2h} = B[2t..2t+1][8h+g]``, ``b{2h+1} =
  B[2t+8..2t+9][8h+g]``;
* C/D (16x16 f32 as two 16x8 halves, 8 b32): ``c{4h}, c{4h+1} = C[g][8h+2t..]``,
  ``c{4h+2}, c{4h+3} = C[g+8][8h+2t..]``.

Loads from local memory use ``ldmatrix.sync.aligned.m8n8.x4`` (``.trans`` for B): lane l
names row ``(l & 7) + 8*((l >> 3) & 1)`` and column block ``8*(l >> 4)`` of the tile, so the
four 8x8 pieces land exactly in a0..a3 (b0..b3). Device-memory loads gather the same
elements with ordinary loads. One ``mma`` is two ``mma.sync.m16n8k16`` (one per n half); the
accumulator stays in registers. Hardware accumulation order and internal precision are
NVIDIA's (class ``bounded``, spec §8.13's bound per mma).

Thread scope ``m4n4k4``: 16 f32 registers per slot and per thread, ``fma.rn.f32`` in k order
(the emulator's order: bit-identical).

Every fragment slot a kernel uses becomes PTX registers ``%fr<slot>_<i>`` (declared and set
to +0.0 in the prologue); the WAVE register count is not involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from anywave.backends.lowering.fragments import fragment_slots
from anywave.binary.module import DeviceAddr, Instruction, Kernel, LocalAddr, Module, Pred, reachable_functions
from anywave.binary.structure import If, Loop, parse
from anywave.isa.mma import GROUP_ALIGN, FragKind, fragment_kinds, group_async, group_bt, group_n, row_n
from anywave.isa.table import Category, Flag, Operand
from anywave.isa.types import ScalarType as T
from anywave.isa.types import SpecialRegister as SR

#: ldmatrix needs sm_75, mma.sync.m16n8k16 with bf16 sm_80
MIN_ARCH = 80
#: the architecture whose ``mma.group`` is ``wgmma`` (sm_90a; Blackwell has tcgen05 instead)
WGMMA_ARCH = 90


#: special registers with one value in every lane of a wave (the others differ per lane)
WAVE_UNIFORM_SREGS = frozenset({SR.WAVE_ID, SR.WORKGROUP_ID_X, SR.WORKGROUP_ID_Y, SR.WORKGROUP_ID_Z,
                                SR.WORKGROUP_SIZE_X, SR.WORKGROUP_SIZE_Y, SR.WORKGROUP_SIZE_Z, SR.GRID_SIZE_X,
                                SR.GRID_SIZE_Y, SR.GRID_SIZE_Z, SR.WAVE_WIDTH, SR.NUM_WAVES, SR.MMA_SUPPORTED,
                                SR.MMA_M, SR.MMA_N, SR.MMA_K})


def _reads_writes(ins: Instruction) -> tuple[list[str], list[str]]:
    """(sources, destinations) of an instruction as names ``r<N>`` / ``p<N>`` (the guard is a source)."""
    src: list[str] = []
    dst: list[str] = []
    for kind, v in zip(ins.defn.operands, ins.operands, strict=True):
        n = kind.reg_count
        if n:
            (dst if kind.is_dest else src).extend(f"r{int(v) + i}" for i in range(n))
        elif kind is Operand.PD:
            dst.append(f"p{int(v)}")
        elif kind is Operand.PS:
            src.append(f"p{v.index}")
        elif isinstance(v, DeviceAddr | LocalAddr):
            src += [f"r{v.reg}", f"r{v.reg + 1}"] if kind is Operand.DADDR64 else [f"r{v.reg}"]
    if isinstance(ins.guard, Pred):
        src.append(f"p{ins.guard.index}")
    return src, dst


class _Varying(Exception):
    """A branch condition that may differ between the lanes of a wave."""


def _tree(code: list[Instruction]) -> list[Any]:
    """Structured code as nested nodes: ``ins``, ``("if", ins, then, else)``, ``("loop", body)``
    (from the shared region tree, :mod:`anywave.binary.structure`)."""
    def node(n: Any) -> Any:
        if isinstance(n, If):
            return ("if", n.ins, [node(c) for c in n.then], [node(c) for c in n.orelse])
        if isinstance(n, Loop):
            return ("loop", [node(c) for c in n.body])
        return n.ins

    return [node(n) for n in parse(code).nodes]


def _join(*states: set[str] | None) -> set[str] | None:
    live = [x for x in states if x is not None]
    return set().union(*live) if live else None


class _UniformFlow:
    """Forward analysis of the varying registers/predicates along the (single) path of a warp."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.loops: list[tuple[list[set[str]], list[set[str]]]] = []  # (breaks, continues)
        self.rets: list[list[set[str]]] = []

    def check(self, st: set[str], preds: list[Pred | None]) -> None:
        if any(p is not None and f"p{p.index}" in st for p in preds):
            raise _Varying

    def seq(self, nodes: list[Any], st: set[str] | None) -> set[str] | None:
        for node in nodes:
            if st is None:
                return None  # unreachable after an unconditional break/continue/ret/halt
            if isinstance(node, tuple) and node[0] == "if":
                _, ins, then, other = node
                self.check(st, [ins.operands[0]])
                st = _join(self.seq(then, set(st)), self.seq(other, set(st)))
            elif isinstance(node, tuple):  # loop
                entry, head = st, set(st)
                while True:
                    self.loops.append(([], []))
                    end = self.seq(node[1], set(head))
                    breaks, conts = self.loops.pop()
                    nxt = _join(entry, end, *conts)
                    if nxt == head:
                        break
                    head = nxt
                st = _join(*breaks)
            else:
                st = self.ins(node, st)
        return st

    def ins(self, ins: Instruction, st: set[str]) -> set[str] | None:
        d = ins.defn
        if d.category is Category.CONTROL:
            self.check(st, [ins.guard])
            if d.op == "call":
                self.rets.append([])
                end = self.seq(_tree(self.module.functions[int(ins.operands[0])].code), set(st))
                return _join(end, *self.rets.pop())
            if d.op in ("break", "continue"):
                self.loops[-1][0 if d.op == "break" else 1].append(set(st))
            elif d.op == "ret" and self.rets:
                self.rets[-1].append(set(st))
            elif d.op not in ("ret", "halt"):
                return st
            return st if ins.guard is not None else None
        src, dst = _reads_writes(ins)
        per_lane = (d.flags & (Flag.LOAD | Flag.ATOMIC | Flag.WAVE_COLLECTIVE)
                    or (d.op == "mov_sr" and ins.operands[1] not in WAVE_UNIFORM_SREGS)
                    or any(x in st for x in src))
        if per_lane:
            return st | set(dst)
        if ins.guard is None:
            return st - set(dst)
        return st  # a uniform guard that may be false leaves the old values


def warp_uniform_control(module: Module, kernel: Kernel) -> bool:
    """Whether every branch condition of ``kernel`` (``if`` predicates, ``break``/``continue``/
    ``ret``/``halt`` guards, in the kernel and the functions it calls) provably has one value
    in all lanes of a wave, so that the lanes of a warp always walk the same path.

    A forward analysis along the structured program (loops to a fixed point, both arms of an
    ``if``, calls inlined) tracks the *varying* registers and predicates: those written from a
    per-lane source (``sr_thread_id_*``, ``sr_lane_id``, ``sr_global_id_*``,
    ``sr_thread_linear_id``; every load, atomic and wave operation; a varying operand or
    guard). Everything else is uniform: registers start at 0, immediates, arguments, the
    wave-uniform special registers and arithmetic on uniform values. If no branch condition is
    varying where it is read, then by induction over the steps of a warp all its lanes walk
    one path and uniform registers hold one value in all of them. The PTX backend then lowers
    control flow as plain branches, and every existing lane executes each wave operation (the
    executing set of spec §7.4 is the whole wave, minus lanes an instruction guard excludes)."""
    try:
        _UniformFlow(module).seq(_tree(list(kernel.code)), set())
    except _Varying:
        return False
    return True


def frag_reg(slot: int, i: int) -> str:
    return f"%fr{slot}_{i}"


def _count(kind: FragKind) -> int:
    return kind.lane_registers(32)




def declarations(module: Module, code: Iterable[Instruction]) -> list[str]:
    """Prologue lines: registers of every fragment slot, set to +0.0 (spec §8.14)."""
    lines: list[str] = []
    for s, k in sorted(fragment_slots(module, code).items()):
        n = _count(k)
        lines.append(f".reg .b32 %fr{s}_<{n}>;")
        lines += [f"mov.b32 {frag_reg(s, i)}, 0;" for i in range(n)]
    return lines


def _loop_invariant_a(nodes: list[Any], out: set[int]) -> tuple[set[int], set[int]]:
    """(A slots read by ``mma.group`` in ``nodes``, fragment slots written there); adds to ``out``
    the A slots of every loop among them that the loop reads and does not write."""
    reads: set[int] = set()
    writes: set[int] = set()
    for n in nodes:
        if isinstance(n, tuple) and n[0] == "if":
            for part in n[2:]:
                r, w = _loop_invariant_a(part, out)
                reads |= r
                writes |= w
        elif isinstance(n, tuple):  # a loop
            r, w = _loop_invariant_a(n[1], out)
            out |= r - w
            reads |= r
            writes |= w
        else:
            if n.defn.op == "fgmma":
                reads.add(int(n.operands[1]))
            writes.update(int(v) for kind, v in zip(n.defn.operands, n.operands, strict=True)
                          if kind is Operand.FD)
    return reads, writes


def keep_alive(module: Module, kernel: Kernel, arch: int) -> list[str]:
    """Lines for the kernel's end on sm_90 that keep the registers of every **loop-invariant A
    operand of a wgmma** (an A slot that ``mma.group`` reads inside a loop which does not write it)
    live after the loop. Why: ptxas (CUDA 13.0, sm_90a) was seen giving such registers to another
    fragment of the loop (the P of attention's P·V, whose wgmma then read Q's registers: wrong
    results from the second iteration on, bench/results/gpu_attention_fast.md), treating them as
    dead at the back edge; a use after the loop keeps them live through every iteration. The use
    is a store guarded by a predicate no run makes true (the 64-bit cycle counter equal to -1, which
    would take centuries) and that ptxas cannot fold, so it costs a few instructions and no memory
    traffic."""
    if arch != WGMMA_ARCH:
        return []
    slots: set[int] = set()
    _loop_invariant_a(_tree(list(kernel.code)), slots)
    if not slots:
        return []
    lines = ["// keep the loop-invariant wgmma A operands live through their loops (ptx_mma.keep_alive)",
             "{", ".reg .b64 %ka_t;", ".reg .pred %ka_p;", "mov.u64 %ka_t, %clock64;",
             "setp.eq.s64 %ka_p, %ka_t, -1;"]
    for s in sorted(slots):
        regs = ", ".join(frag_reg(s, i) for i in range(4))
        lines.append(f"@%ka_p st.volatile.global.v4.b32 [%ka_t], {{{regs}}};")
    return lines + ["}"]


def segment_has_fragments(code: Any, start: int) -> bool:
    """Whether the straight-line run of ``code`` from ``start`` (up to the next control
    instruction or barrier) holds an unguarded wave-scope fragment instruction."""
    for ins in code[start:]:
        d = ins.defn
        if d.category is Category.CONTROL or d.op == "barrier":
            return False
        if d.op in EMITTERS and ins.guard is None and _wave(d):
            return True
    return False


def _wave_guard(b: Any) -> tuple[str, int] | None:
    """The instruction runs only when a lane of the warp executes it (the mask-stack walk also
    passes instructions with no active lane). Returns (warp-uniform predicate, first line):
    :func:`_end_guard` predicates every line from there on (no branch, so ptxas can interleave
    neighbouring fragment loads and mma; ``.aligned`` allows a warp-uniform predicate)."""
    if b.pe == "%A" and (b.kx.frag_covered or getattr(b.kx, "flat", False)):
        # the enclosing segment is skipped as a whole when no lane is active, or control flow
        # is warp-uniform (every existing lane runs this line)
        return None
    q = b.t("pred")
    b(f"vote.sync.any.pred {q}, {b.pe}, %exist;")
    return q, len(b.lines)


def _end_guard(b: Any, guard: tuple[str, int] | None) -> None:
    if guard is None:
        return
    q, first = guard
    for i in range(first, len(b.lines)):
        assert not b.lines[i].startswith(("@", "$", "//")), b.lines[i]
        b.lines[i] = f"@{q} {b.lines[i]}"


def _base(b: Any, addr: Any) -> tuple[str, str]:
    """(b64 generic-space base address register, state space) of a tile address."""
    p = b.t("b64")
    if isinstance(addr, LocalAddr):
        b(f"cvt.u64.u32 {p}, %r{addr.reg};")
        b(f"add.s64 {p}, {p}, %lmbase;")
        space = "shared"
    else:
        assert isinstance(addr, DeviceAddr)
        b(f"cvt.u64.u32 {p}, %r{addr.reg};")
        b(f"add.s64 {p}, {p}, %buf{addr.buffer};")
        space = "global"
    if addr.offset:
        b(f"add.s64 {p}, {p}, {addr.offset};")
    return p, space


def _lane_addr(b: Any, base: str, stride_reg: int, row: str, col_bytes: str) -> str:
    """base + row * stride + col_bytes (row, col_bytes: b32 registers)."""
    t = b.t()
    b(f"mad.lo.u32 {t}, {row}, %r{stride_reg}, {col_bytes};")
    w = b.t("b64")
    b(f"cvt.u64.u32 {w}, {t};")
    b(f"add.s64 {w}, {w}, {base};")
    return w


def _gt(b: Any) -> tuple[str, str]:
    g, t = b.t(), b.t()
    b(f"shr.u32 {g}, %sr_lane, 2;")
    b(f"and.b32 {t}, %sr_lane, 3;")
    return g, t


def _e_fload(b: Any, ins: Instruction) -> None:
    kind = fragment_kinds(ins.defn)[0]
    f, addr, rs = ins.operands
    if kind.shape.scope == "thread":
        _thread_load(b, ins)
        return
    guard = _wave_guard(b)
    base, space = _base(b, addr)
    if kind.role == "c":
        _acc_access(b, f, base, space, rs, store=False)
    elif space == "shared":
        # ldmatrix.x4: lane l gives the row address of piece l >> 3: row (l & 7) + 8*((l >> 3) & 1),
        # column block 8*(l >> 4); A pieces land in a0..a3, B pieces (.trans) in b0..b3
        r, c = b.t(), b.t()
        b(f"and.b32 {r}, %sr_lane, 15;")
        b(f"shr.u32 {c}, %sr_lane, 4;")
        b(f"shl.b32 {c}, {c}, 4;")  # 8 elements * 2 bytes
        p = _lane_addr(b, base, rs, r, c)  # a shared-window address (%lmbase is one)
        regs = ", ".join(frag_reg(f, i) for i in range(4))
        trans = ".trans" if kind.role == "b" else ""
        b(f"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{{regs}}}, [{p}];")
    else:
        g, t = _gt(b)
        if kind.role == "a":
            # a{i}: A[g + 8*(i & 1)][2t + 8*(i >> 1) .. +1]: one 4-byte load each
            t4 = b.t()
            b(f"shl.b32 {t4}, {t}, 2;")
            p = _lane_addr(b, base, rs, g, t4)
            st8 = b.t("b64")
            b(f"cvt.u64.u32 {st8}, %r{rs};")
            b(f"shl.b64 {st8}, {st8}, 3;")
            for i in range(4):
                q = b.t("b64")
                b(f"add.s64 {q}, {p}, {16 * (i >> 1)};")
                if i & 1:
                    b(f"add.s64 {q}, {q}, {st8};")
                b(f"ld.global.b32 {frag_reg(f, i)}, [{q}];")
        else:
            # b{2h+j}: B[2t + 8j .. +1][8h + g]: two 2-byte loads, packed low/high
            k0 = b.t()
            b(f"shl.b32 {k0}, {t}, 1;")
            g2 = b.t()
            b(f"shl.b32 {g2}, {g}, 1;")
            p = _lane_addr(b, base, rs, k0, g2)
            st = b.t("b64")
            b(f"cvt.u64.u32 {st}, %r{rs};")
            for h in range(2):
                for j in range(2):
                    q0, q1 = b.t("b64"), b.t("b64")
                    lo, hi = b.t("b16"), b.t("b16")
                    b(f"mad.lo.s64 {q0}, {st}, {8 * j}, {p};")
                    b(f"add.s64 {q0}, {q0}, {16 * h};")
                    b(f"add.s64 {q1}, {q0}, {st};")
                    b(f"ld.global.b16 {lo}, [{q0}];")
                    b(f"ld.global.b16 {hi}, [{q1}];")
                    b(f"mov.b32 {frag_reg(f, 2 * h + j)}, {{{lo}, {hi}}};")
    _end_guard(b, guard)


def _acc_access(b: Any, f: int, base: str, space: str, rs: int, store: bool) -> None:
    """c{4h + 2r + j} <-> C[g + 8r][8h + 2t + j]: 8-byte vector accesses."""
    g, t = _gt(b)
    t8 = b.t()
    b(f"shl.b32 {t8}, {t}, 3;")
    p = _lane_addr(b, base, rs, g, t8)
    st8 = b.t("b64")
    b(f"cvt.u64.u32 {st8}, %r{rs};")
    b(f"shl.b64 {st8}, {st8}, 3;")
    for h in range(2):
        for r in range(2):
            q = b.t("b64")
            b(f"add.s64 {q}, {p}, {32 * h};")
            if r:
                b(f"add.s64 {q}, {q}, {st8};")
            i = 4 * h + 2 * r
            pair = f"{{{frag_reg(f, i)}, {frag_reg(f, i + 1)}}}"
            if store:
                b(f"st.{space}.v2.b32 [{q}], {pair};")
            else:
                b(f"ld.{space}.v2.b32 {pair}, [{q}];")


def _e_fstore(b: Any, ins: Instruction) -> None:
    kind = fragment_kinds(ins.defn)[1]
    addr, f, rs = ins.operands
    if kind.shape.scope == "thread":
        _thread_store(b, ins)
        return
    guard = _wave_guard(b)
    base, space = _base(b, addr)
    _acc_access(b, f, base, space, rs, store=True)
    _end_guard(b, guard)


def _e_fmma(b: Any, ins: Instruction) -> None:
    d, fa, fb, fc = ins.operands
    kind = fragment_kinds(ins.defn)[0]
    et = ins.defn.src_type
    if kind.shape.scope == "thread":
        n = kind.shape.n
        acc = []
        for e in range(16):
            r = b.t()
            b(f"mov.b32 {r}, {frag_reg(fc, e)};")
            acc.append(r)
        for k in range(kind.shape.k):
            for i in range(kind.shape.m):
                for j in range(n):
                    e = i * n + j
                    b(f"fma.rn.f32 {acc[e]}, {frag_reg(fa, i * 4 + k)}, {frag_reg(fb, k * n + j)}, {acc[e]};")
        for e in range(16):
            b(f"mov.b32 {frag_reg(d, e)}, {acc[e]};")
        return
    guard = _wave_guard(b)
    ab = "bf16" if et is T.BF16 else "f16"
    a = ", ".join(frag_reg(fa, i) for i in range(4))
    for h in range(2):
        bb = f"{frag_reg(fb, 2 * h)}, {frag_reg(fb, 2 * h + 1)}"
        c = ", ".join(frag_reg(fc, 4 * h + i) for i in range(4))
        dd = ", ".join(frag_reg(d, 4 * h + i) for i in range(4))
        b(f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 {{{dd}}}, {{{a}}}, {{{bb}}}, {{{c}}};")
    _end_guard(b, guard)


def _e_felementwise(b: Any, ins: Instruction) -> None:
    op = ins.defn.op
    kind = fragment_kinds(ins.defn)[0]
    wave = kind.shape.scope == "wave"
    n = _count(kind)
    d = ins.operands[0]
    guard = _wave_guard(b) if wave else None
    if op == "ffill":
        for i in range(n):
            b(f"mov.b32 {frag_reg(d, i)}, %r{ins.operands[1]};")
    elif op == "fscale":
        s = ins.operands[1]
        for i in range(n):
            b(f"mul.rn.f32 {frag_reg(d, i)}, {frag_reg(s, i)}, %r{ins.operands[2]};")
    else:  # fbias: c{4h + 2r + j} += bias[8h + 2t + j]
        s, addr = ins.operands[1], ins.operands[2]
        base, _ = _base(b, addr)
        _, t = _gt(b)
        t8 = b.t()
        b(f"shl.b32 {t8}, {t}, 3;")
        w = b.t("b64")
        b(f"cvt.u64.u32 {w}, {t8};")
        b(f"add.s64 {w}, {w}, {base};")
        for h in range(2):
            x, y = b.t(), b.t()
            b(f"ld.global.v2.b32 {{{x}, {y}}}, [{w}+{32 * h}];")
            for r in range(2):
                i = 4 * h + 2 * r
                b(f"add.rn.f32 {frag_reg(d, i)}, {frag_reg(s, i)}, {x};")
                b(f"add.rn.f32 {frag_reg(d, i + 1)}, {frag_reg(s, i + 1)}, {y};")
    if op != "ffill":
        # NaN results: the spec's canonical quiet NaN (PTX's differs)
        for i in range(n):
            q = b.t("pred")
            b(f"setp.nan.f32 {q}, {frag_reg(d, i)}, {frag_reg(d, i)};")
            b(f"selp.b32 {frag_reg(d, i)}, 0x7fc00000, {frag_reg(d, i)}, {q};")
    if guard is not None:
        _end_guard(b, guard)


def _thread_tile(b: Any, ins: Instruction, addr: Any, rs: int) -> tuple[str, str, str]:
    base, space = _base(b, addr)
    st = b.t("b64")
    b(f"cvt.u64.u32 {st}, %r{rs};")
    return base, space, st


def _thread_load(b: Any, ins: Instruction) -> None:
    f, addr, rs = ins.operands
    base, space, st = _thread_tile(b, ins, addr, rs)
    row = b.t("b64")
    b(f"mov.b64 {row}, {base};")
    for i in range(4):
        for j in range(4):
            b(f"ld.{space}.b32 {frag_reg(f, 4 * i + j)}, [{row}+{4 * j}];")
        b(f"add.s64 {row}, {row}, {st};")


def _thread_store(b: Any, ins: Instruction) -> None:
    addr, f, rs = ins.operands
    base, space, st = _thread_tile(b, ins, addr, rs)
    row = b.t("b64")
    b(f"mov.b64 {row}, {base};")
    for i in range(4):
        for j in range(4):
            b(f"st.{space}.b32 [{row}+{4 * j}], {frag_reg(f, 4 * i + j)};")
        b(f"add.s64 {row}, {row}, {st};")


def group_use(module: Module, kernel: Kernel) -> tuple[bool, bool]:
    """(uses ``mma.group`` in either form, uses ``mma.group.async``) in a kernel or a function it
    reaches. A user's local memory is then aligned to :data:`~anywave.isa.mma.GROUP_ALIGN` bytes
    (the swizzle atom); on sm_90 the module targets ``sm_90a`` (PTX ISA 8.0) for ``wgmma``."""
    bodies = [kernel.code] + [module.functions[f].code for f in reachable_functions(module.functions, kernel.code)]
    defs = [ins.defn for body in bodies for ins in body if ins.defn.op == "fgmma"]
    return bool(defs), any(group_async(d) for d in defs)


#: categories whose instructions touch only general registers, predicates and device memory
_REG_ONLY = frozenset({Category.INTEGER, Category.FLOAT, Category.BITWISE, Category.COMPARE, Category.CONVERT,
                       Category.MOVE, Category.DEVICE_MEMORY})


def wgmma_keep(ins: Instruction, pending: list[tuple[str, int, int, int]]) -> int | None:
    """How many of the wgmma ``pending`` (oldest first; ``(mnemonic, first accumulator, A slot,
    accumulator count)`` each) may stay in flight while ``ins`` executes: None for all of them (no
    wait), else N for ``wgmma.wait_group N``. All may stay for a ``cp.async.wait`` and for an
    unguarded ``mma.group`` whose accumulators are those of a same-shape chain in flight (PTX orders
    such chains) or that no group in flight uses; for an unguarded fragment load into an A slot,
    those issued after the last group that reads the slot; all for arithmetic, moves, conversions
    and device-memory accesses (they touch neither fragment registers nor local memory, the only
    state a wgmma reads or writes); none for anything else."""
    d = ins.defn
    if d.op == "cp_wait" or d.category in _REG_ONLY:
        return None
    last = -1
    if d.op == "fgmma" and ins.guard is None:
        lo = int(ins.operands[0])
        hi = lo + group_n(d) // 16
        for i, (m, s, _, n) in enumerate(pending):
            same_chain = m == d.mnemonic and s == lo
            if not same_chain and s < hi and lo < s + n:
                last = i
    elif d.op == "fload" and d.variant.startswith("a.") and ins.guard is None:
        slot = int(ins.operands[0])
        for i, (_, _, a, _) in enumerate(pending):
            if a == slot:
                last = i
    else:
        return 0
    return None if last < 0 else len(pending) - last - 1


def _e_fwait(b: Any, ins: Instruction) -> None:
    """``mma.wait N``: on sm_90 ``wgmma.wait_group N`` (each ``mma.group.async`` is one committed
    group); elsewhere ``mma.group.async`` completes when issued, so there is nothing to wait for."""
    if b.kx.arch == WGMMA_ARCH:
        b(f"wgmma.wait_group.sync.aligned {int(ins.operands[0])};")
        if int(ins.operands[0]) == 0:
            b.kx.wgmma_pending = []


def _e_fgmma(b: Any, ins: Instruction) -> None:
    """``mma.group`` (spec §8.14). On sm_90 one ``wgmma.mma_async.m64nNk16`` per warpgroup (the
    four waves of the group: warp w of it owns rows 16w..16w+15, whose registers are exactly the
    m16n8 layouts above), A from registers, B through a shared-memory descriptor: 128-byte
    swizzle, leading byte offset = the panel stride, stride byte offset = 1024 (8 rows of 128 B),
    ``imm-trans-b`` = 1 (B is N-contiguous), then committed (PTX ISA, "Asynchronous Warpgroup
    Level Matrix Multiply-Accumulate"); the wait comes later (see below). Elsewhere: per 16
    columns an ``ldmatrix.trans`` whose lane addresses follow the swizzle, and two ``mma.sync``
    (complete at issue)."""
    d, fa, addr, rp = ins.operands
    n = group_n(ins.defn)
    ab = "bf16" if ins.defn.src_type is T.BF16 else "f16"
    guard = _wave_guard(b)
    a = ", ".join(frag_reg(fa, i) for i in range(4))
    sa = b.t()
    b(f"cvt.u32.u64 {sa}, %lmbase;")
    b(f"add.u32 {sa}, {sa}, %r{addr.reg};")
    if addr.offset:
        b(f"add.u32 {sa}, {sa}, {addr.offset};")
    bt = group_bt(ins.defn)
    if b.kx.arch == WGMMA_ARCH and bt:
        # B transposed = wgmma's K-major B: 128-byte swizzle, stride byte offset 1024 (8 rows of
        # 128 B), leading byte offset unused (1); a step of 16 k is +32 bytes of the start address
        lo, hi, dsc = b.t(), b.t(), b.t("b64")
        b(f"bfe.u32 {lo}, {sa}, 4, 14;")
        b(f"or.b32 {lo}, {lo}, 0x10000;")
        b(f"mov.b32 {hi}, {(GROUP_ALIGN >> 4) | (1 << 30)};")
        b(f"mov.b64 {dsc}, {{{lo}, {hi}}};")
        dd = ", ".join(frag_reg(d + j, i) for j in range(n // 16) for i in range(8))
        b("wgmma.fence.sync.aligned;")
        b(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{dd}}}, {{{a}}}, {dsc}, 1, 1, 1, 0;")
        b("wgmma.commit_group.sync.aligned;")
        if not group_async(ins.defn):
            b.kx.wgmma_pending.append((ins.defn.mnemonic, d, fa, n // 16))
    elif bt:
        # per 16 columns j: ldmatrix (not transposed) of B^T's rows n = 16j + 8(l >> 4) + (l & 7),
        # 16-byte chunk (L mod 1024)/16 + ((l >> 3) & 1) of the row, xor (n mod 8): pieces b0..b3
        lb, nn, ch, x, lo = b.t(), b.t(), b.t(), b.t(), b.t()
        b(f"and.b32 {lo}, {sa}, 1023;")  # (L mod 1024) / 16: the first chunk of the step
        b(f"shr.u32 {lo}, {lo}, 4;")
        b(f"and.b32 {lb}, {sa}, 0xFFFFFC00;")  # the swizzle atom's base
        b(f"shr.u32 {nn}, %sr_lane, 4;")
        b(f"shl.b32 {nn}, {nn}, 3;")
        b(f"and.b32 {x}, %sr_lane, 7;")
        b(f"add.u32 {nn}, {nn}, {x};")  # n within the 16 columns
        b(f"shr.u32 {ch}, %sr_lane, 3;")
        b(f"and.b32 {ch}, {ch}, 1;")
        b(f"add.u32 {ch}, {ch}, {lo};")
        regs = [b.t() for _ in range(4)]
        for j in range(n // 16):
            la, sw = b.t(), b.t()
            b(f"add.u32 {la}, {nn}, {16 * j};")
            b(f"and.b32 {sw}, {la}, 7;")
            b(f"xor.b32 {sw}, {sw}, {ch};")
            b(f"shl.b32 {la}, {la}, 7;")
            b(f"mad.lo.u32 {la}, {sw}, 16, {la};")
            b(f"add.u32 {la}, {la}, {lb};")
            b(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{la}];")
            for h in range(2):
                cc = ", ".join(frag_reg(d + j, 4 * h + i) for i in range(4))
                b(f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 {{{cc}}}, {{{a}}}, "
                  f"{{{regs[2 * h]}, {regs[2 * h + 1]}}}, {{{cc}}};")
    elif b.kx.arch == WGMMA_ARCH:
        lo, lb, hi, dsc = b.t(), b.t(), b.t(), b.t("b64")
        b(f"bfe.u32 {lo}, {sa}, 4, 14;")  # start address >> 4 in bits 0..13
        b(f"shl.b32 {lb}, %r{rp}, 12;")  # leading byte offset >> 4 in bits 16..29
        b(f"and.b32 {lb}, {lb}, 0x3FFF0000;")
        b(f"or.b32 {lo}, {lo}, {lb};")
        b(f"mov.b32 {hi}, {(GROUP_ALIGN >> 4) | (1 << 30)};")  # stride byte offset 1024 >> 4; 128B swizzle
        b(f"mov.b64 {dsc}, {{{lo}, {hi}}};")
        dd = ", ".join(frag_reg(d + j, i) for j in range(n // 16) for i in range(8))
        b("wgmma.fence.sync.aligned;")  # orders this warp's earlier writes of A (and D) before it
        b(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{dd}}}, {{{a}}}, {dsc}, 1, 1, 1, 1;")
        b("wgmma.commit_group.sync.aligned;")
        # mma.group: the wait is the kernel emitter's (wgmma_flush), before the next instruction
        # that may not overlap it, so consecutive mma.group steps (and A loads into other slots)
        # do; mma.group.async: the program's mma.wait
        if not group_async(ins.defn):
            b.kx.wgmma_pending.append((ins.defn.mnemonic, d, fa, n // 16))
    else:
        # lane l names row k = (l & 7) + 8*((l >> 3) & 1) of column block 8*(l >> 4) (+16j)
        k, c, off, x, t8 = b.t(), b.t(), b.t(), b.t(), b.t()
        b(f"and.b32 {k}, %sr_lane, 15;")
        b(f"shr.u32 {c}, %sr_lane, 4;")  # chunk 0 or 1 of the 16 columns
        b(f"shl.b32 {off}, {k}, 7;")  # 128 k
        b(f"and.b32 {t8}, {k}, 7;")
        regs = [b.t() for _ in range(4)]
        for j in range(n // 16):
            p, q = (16 * j) // 64, ((16 * j) % 64) // 8  # panel, first chunk
            b(f"add.u32 {x}, {c}, {q};")
            b(f"xor.b32 {x}, {x}, {t8};")
            la = b.t()
            b(f"mad.lo.u32 {la}, {x}, 16, {off};")
            if p:
                b(f"mad.lo.u32 {la}, %r{rp}, {p}, {la};")
            b(f"add.u32 {la}, {la}, {sa};")
            b(f"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{', '.join(regs)}}}, [{la}];")
            for h in range(2):
                cc = ", ".join(frag_reg(d + j, 4 * h + i) for i in range(4))
                b(f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 {{{cc}}}, {{{a}}}, "
                  f"{{{regs[2 * h]}, {regs[2 * h + 1]}}}, {{{cc}}};")
    _end_guard(b, guard)


def _e_facc(b: Any, ins: Instruction) -> None:
    """The accumulator row and element operations (spec §8.14) on the m16n8 layouts above: a
    lane holds rows ``g`` (c0, c1, c4, c5) and ``g + 8`` (c2, c3, c6, c7) of each accumulator, the
    four lanes of a quad (``t`` = 0..3) the 16 columns of a row, so a row reduction is the lane's
    own values then two butterfly shuffles (xor 1, 2) in the quad. ``exp2`` is ``ex2.approx.ftz``
    of one ``fma.rn`` (within 2 ulp; a subnormal result may be flushed to zero); mul/div are
    ``mul.rn``/``div.rn``; the A fragment of ``cvt`` packs c{2i}, c{2i+1} into a{i} (PTX's A and
    C layouts of m16n8k16 agree pairwise)."""
    op = ins.defn.op
    ops = ins.operands
    guard = _wave_guard(b)
    d = ops[0]
    if op in ("frowmax", "frowsum"):
        nf = row_n(ins.defn) // 16
        red = []
        for r in range(2):
            vals = [frag_reg(ops[1] + j, 4 * h + 2 * r + x) for j in range(nf) for h in range(2) for x in range(2)]
            acc = b.t()
            inst = "max.f32" if op == "frowmax" else "add.rn.f32"
            if op == "frowsum":  # pairwise: the 4 nf values of the lane, then the quad
                while len(vals) > 1:
                    nxt = []
                    for i in range(0, len(vals) - 1, 2):
                        t = b.t()
                        b(f"{inst} {t}, {vals[i]}, {vals[i + 1]};")
                        nxt.append(t)
                    if len(vals) % 2:
                        nxt.append(vals[-1])
                    vals = nxt
                b(f"mov.b32 {acc}, {vals[0]};")
            else:
                b(f"{inst} {acc}, {vals[0]}, {vals[1]};")
                for v in vals[2:]:
                    b(f"{inst} {acc}, {acc}, {v};")
            for m in (1, 2):
                t = b.t()
                b(f"shfl.sync.bfly.b32 {t}, {acc}, {m}, 31, 0xffffffff;")
                b(f"{inst} {acc}, {acc}, {t};")
            red.append(acc)
        for i in range(8):
            inst = "max.f32" if op == "frowmax" else "add.rn.f32"
            b(f"{inst} {frag_reg(d, i)}, {frag_reg(ops[2], i)}, {red[(i >> 1) & 1]};")
    elif op == "fexp2":
        for i in range(8):
            t = b.t()
            b(f"neg.f32 {t}, {frag_reg(ops[2], i)};")
            b(f"fma.rn.f32 {t}, {frag_reg(ops[1], i)}, %r{ops[3]}, {t};")
            b(f"ex2.approx.ftz.f32 {frag_reg(d, i)}, {t};")
    elif op in ("fmul", "fdiv"):
        inst = "mul.rn.f32" if op == "fmul" else "div.rn.f32"
        for i in range(8):
            b(f"{inst} {frag_reg(d, i)}, {frag_reg(ops[1], i)}, {frag_reg(ops[2], i)};")
    elif op == "fmask":
        # element c{4h + 2r + x}: i = g + 8r, j = 8h + 2t + x; keep iff 8h + x - 8r <= diag - (2t - g)
        # and 8h + x < cols - 2t
        g, t = _gt(b)
        dl, cl = b.t(), b.t()
        b(f"shl.b32 {cl}, {t}, 1;")
        b(f"sub.s32 {dl}, {cl}, {g};")
        b(f"sub.s32 {dl}, %r{ops[2]}, {dl};")
        b(f"sub.s32 {cl}, %r{ops[3]}, {cl};")
        for h in range(2):
            for r in range(2):
                for x in range(2):
                    i = 4 * h + 2 * r + x
                    p, q = b.t("pred"), b.t("pred")
                    b(f"setp.le.s32 {p}, {8 * h + x - 8 * r}, {dl};")
                    b(f"setp.lt.s32 {q}, {8 * h + x}, {cl};")
                    b(f"and.pred {p}, {p}, {q};")
                    b(f"selp.b32 {frag_reg(d, i)}, {frag_reg(ops[1], i)}, 0xff800000, {p};")
    else:  # fcvt
        ty = "bf16x2" if ins.defn.type is T.BF16 else "f16x2"
        tmp = [b.t() for _ in range(4)]
        for i in range(4):
            b(f"cvt.rn.{ty}.f32 {tmp[i]}, {frag_reg(ops[1], 2 * i + 1)}, {frag_reg(ops[1], 2 * i)};")
        for i in range(4):
            b(f"mov.b32 {frag_reg(d, i)}, {tmp[i]};")
    _end_guard(b, guard)


EMITTERS = {"fload": _e_fload, "fstore": _e_fstore, "fmma": _e_fmma, "ffill": _e_felementwise,
            "fscale": _e_felementwise, "fbias": _e_felementwise, "fgmma": _e_fgmma, "fwait": _e_fwait,
            **{op: _e_facc for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask", "fcvt")}}


def unsupported_reason(defn: Any, arch: int) -> str | None:
    if defn.category is Category.MMA and defn.op in EMITTERS and arch < MIN_ARCH and _wave(defn):
        return f"{defn.mnemonic} needs sm_{MIN_ARCH} or newer (mma.sync.m16n8k16 with ldmatrix)"
    return None


def _wave(defn: Any) -> bool:
    return defn.op == "fwait" or any(k is not None and k.shape.scope == "wave" for k in fragment_kinds(defn))
