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

