"""PTX spelling of WAVE loads and stores (kept apart from :mod:`anywave.backends.ptx`).

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

from anywave.binary.module import DeviceAddr
from anywave.isa.types import Access


def load_space(b, ins) -> str:  # noqa: ANN001 - ptx._Block, binary Instruction
    """``global.nc`` for a device load from a read-only buffer, else ``global``/``shared``."""
    sp = b.space()
    if sp != "global":
        return sp
    addr = ins.operands[1]
    args = b.kx.k.args
    if isinstance(addr, DeviceAddr) and 0 <= addr.buffer < len(args) and args[addr.buffer].access is Access.READ:
        return "global.nc"
    return sp



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


#: emitters of the ASYNC_COPY category, registered in ptx.EMITTERS
ASYNC_EMITTERS = {"cp_async": _e_cp_async, "cp_commit": _e_cp_commit, "cp_wait": _e_cp_wait}
