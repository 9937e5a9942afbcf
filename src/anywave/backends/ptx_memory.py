"""PTX emitters of WAVE loads, stores, atomics, barriers and fences.

* A device load from a buffer whose ABI access is ``read`` (``aw.In``) uses the
  non-coherent path, ``ld.global.nc`` (PTX ISA §9.7.9.8): the kernel never writes such a
  buffer and the ABI says buffers do not alias (design.md §3.3), so the read-only data
  cache may serve it. The result bits are the same as ``ld.global``'s.
* 64- and 128-bit accesses (``ld/st.*.b64``/``.b128``) are one ``ld/st.*.v2/.v4.b32`` on the
  consecutive registers ``rN..rN+k-1`` (WAVE's register-pair/quad layout, spec §3.1: the
  datum's bytes 0-3 in ``rN``). Their alignment is the WAVE rule (spec §4.4: the offset is a
  multiple of the access size, buffers 16-byte aligned), which is what PTX requires of vector
  accesses.
"""

from __future__ import annotations

from anywave.backends.ptx_block import SCOPE, Block
from anywave.binary.module import DeviceAddr, Instruction
from anywave.isa.types import Access, MemoryOrder, ScalarType, Scope

T = ScalarType


def load_space(b, ins) -> str:  # noqa: ANN001 - ptx._Block, binary Instruction
    """``const`` for a load from the buffer read from the constant bank (``ptx.PTX_CONST_BANK``),
    ``global.nc`` for a device load from a read-only buffer, else ``global``/``shared``."""
    sp = b.space()
    if sp != "global":
        return sp
    addr = ins.operands[1]
    if isinstance(addr, DeviceAddr) and addr.buffer == b.kx.cbank:
        return "const"
    args = b.kx.k.args
    if isinstance(addr, DeviceAddr) and 0 <= addr.buffer < len(args) and args[addr.buffer].access is Access.READ:
        return "global.nc"
    return sp


# --- memory
_LD = {T.U8: "u8", T.I8: "s8", T.U16: "u16", T.I16: "s16", T.B32: "b32"}
_ST = {T.B8: "b8", T.B16: "b16", T.B32: "b32"}


def _regs_list(first: int, count: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(count)) + "}"


def _e_ld(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    kind = d.operands[1]
    a = b.addr(kind, ins.operands[1])
    sp = load_space(b, ins)
    dst = ins.operands[0]
    if t.bits <= 32:
        b(f"ld.{sp}.{_LD[t]} %r{dst}, {a};")
    else:
        n = t.bits // 32
        b(f"ld.{sp}.v{n}.b32 {_regs_list(dst, n)}, {a};")


def _e_st(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    kind = d.operands[0]
    a = b.addr(kind, ins.operands[0])
    sp = b.space()
    src = ins.operands[1]
    if t.bits <= 32:
        b(f"st.{sp}.{_ST[t]} {a}, %r{src};")
    else:
        n = t.bits // 32
        b(f"st.{sp}.v{n}.b32 {a}, {_regs_list(src, n)};")


# --- atomics
_ATOM_TYPE = {T.U32: "u32", T.I32: "s32", T.B32: "b32", T.F32: "f32"}


def _sem(order: MemoryOrder, scope: Scope, returning: bool) -> tuple[str, str]:
    """(prefix fence line or '', qualifier string) for a device atomic."""
    sc = SCOPE[scope]
    if order is MemoryOrder.SEQ_CST:
        return f"fence.sc.{sc};", f".acq_rel.{sc}" if returning else f".release.{sc}"
    name = {MemoryOrder.RELAXED: "relaxed", MemoryOrder.ACQUIRE: "acquire", MemoryOrder.RELEASE: "release",
            MemoryOrder.ACQ_REL: "acq_rel"}[order]
    return "", f".{name}.{sc}"


def _e_atom(b: Block, ins: Instruction) -> None:
    d = ins.defn
    t = d.type
    assert t is not None
    returning = d.op == "atom"
    space, op = d.variant.split(".")
    ops = list(ins.operands)
    dst: int | None = None
    if returning:
        dst = ops.pop(0)
    addr_v = ops.pop(0)
    a = b.addr(d.operands[1 if returning else 0], addr_v)
    if space == "device":
        scope, order = ops[-2], ops[-1]
        ops = ops[:-2]
        if not returning and order not in (MemoryOrder.RELAXED, MemoryOrder.RELEASE):
            # PTX red has no acquire forms (the spec makes them invalid, but be total):
            # a returning atomic with the result discarded has the same effect
            returning = True
            dst = None
        pre, qual = _sem(order, scope, returning)
        if pre:
            b(pre)
        sp = "global"
    else:
        qual, sp = "", "shared"
    vals = [b.r(x) for x in ops]
    res = b.t()
    if t is T.F32:
        # f32 add as a CAS loop: PTX's atom/red.add.f32 may flush subnormals; the spec keeps them
        old, new, prev = b.t(), b.t(), b.t()
        q = b.t("pred")
        loop = b.label("cas")
        if sp == "global":
            b(f"ld.relaxed.gpu.global.b32 {old}, {a};")
        else:
            b(f"ld.volatile.shared.b32 {old}, {a};")
        b(f"{loop}:")
        b(f"add.rn.f32 {new}, {old}, {vals[0]};")
        b(f"atom{qual}.{sp}.cas.b32 {prev}, {a}, {old}, {new};")
        b(f"setp.ne.b32 {q}, {prev}, {old};")
        b(f"mov.b32 {old}, {prev};")
        b(f"@{q} bra {loop};")
        if returning and dst is not None:
            b(f"mov.b32 %r{dst}, {old};")
        return
    ptype = _ATOM_TYPE[t]
    if op == "sub":  # PTX has no atomic sub: add the two's complement negation
        n = b.t()
        b(f"neg.s32 {n}, {vals[0]};")
        vals = [n]
        op, ptype = "add", "u32"
    if returning:
        b(f"atom{qual}.{sp}.{op}.{ptype} {res}, {a}, {', '.join(vals)};")
        if dst is not None:
            b(f"mov.b32 %r{dst}, {res};")
    else:
        b(f"red{qual}.{sp}.{op}.{ptype} {a}, {vals[0]};")


# --- sync
def _e_barrier(b: Block, ins: Instruction) -> None:
    b("bar.sync 0;")


def _e_wave_barrier(b: Block, ins: Instruction) -> None:
    """``barrier.wave`` (spec §7.10). The kernel is lowered with every existing lane of a warp
    walking the same program (the mask-stack machine, or control proven warp-uniform), so every
    existing lane executes this line: ``bar.warp.sync`` over them. PTX ISA §9.7.13.2 (bar.warp.sync):
    it "guarantees memory ordering among threads participating in barrier" -- the wave-scope
    acq_rel fence among the executing lanes, on shared and global memory."""
    b("bar.warp.sync %exist;")


def _e_fence(b: Block, ins: Instruction) -> None:
    scope, order = ins.operands
    if order is MemoryOrder.RELAXED:
        b("// fence .relaxed: no effect")
    elif order is MemoryOrder.SEQ_CST:
        b(f"fence.sc.{SCOPE[scope]};")
    else:
        b(f"fence.acq_rel.{SCOPE[scope]};")


# ------------------------------------------------------------------------ asynchronous copies (spec §4.5)

#: first architecture with cp.async (PTX ISA §9.7.9.25: sm_80)
ASYNC_MIN_ARCH = 80


def _e_cp_async(b, ins) -> None:  # noqa: ANN001
    """``cp.async.bK [l], buf[o]``: on sm_80+ one ``cp.async`` (``.cg``, L2 only, for 16 bytes,
    the only size ``.cg`` takes; ``.ca`` for 4 and 8); before sm_80 a load and a store at the
    issue (one schedule spec §4.5 allows)."""
    from anywave.isa.table import Operand

    laddr, daddr = ins.operands
    size = ins.defn.type.nbytes
    src = b.addr(Operand.DADDR, daddr)
    dst = b.addr(Operand.LADDR, laddr)
    if b.kx.arch >= ASYNC_MIN_ARCH:
        b(f"cp.async.{'cg' if size == 16 else 'ca'}.shared.global {dst}, {src}, {size};")
        return
    n = size // 4
    regs = [b.t() for _ in range(n)]
    if n == 1:
        b(f"ld.global.b32 {regs[0]}, {src};")
        b(f"st.shared.b32 {dst}, {regs[0]};")
    else:
        vec = "{" + ", ".join(regs) + "}"
        b(f"ld.global.v{n}.b32 {vec}, {src};")
        b(f"st.shared.v{n}.b32 {dst}, {vec};")


def _e_cp_commit(b, ins) -> None:  # noqa: ANN001
    b("cp.async.commit_group;" if b.kx.arch >= ASYNC_MIN_ARCH else "// cp.async.commit: copies are synchronous")


def _e_cp_wait(b, ins) -> None:  # noqa: ANN001
    n = int(ins.operands[0])
    b(f"cp.async.wait_group {n};" if b.kx.arch >= ASYNC_MIN_ARCH else "// cp.async.wait: copies are synchronous")


#: emitters of the ASYNC_COPY category, registered in ptx.PTX_DISPATCH
ASYNC_EMITTERS = {"cp_async": _e_cp_async, "cp_commit": _e_cp_commit, "cp_wait": _e_cp_wait}
