"""Bounds-checked builds, shared by the C-family renderer and the PTX emitter (issue 11, item 6).

Out of bounds is undefined on targets (spec §5), but it must never cost the user's process. A
*checked* build guards every device and local memory access of a kernel:

* each buffer argument ``i`` gets a hidden ``u64`` parameter with its size in bytes, and the
  kernel one more hidden buffer, the *error record* (:data:`ERR_WORDS` ``u32`` words, zeroed by
  the launcher);
* an access ``[off, off + size)`` runs only when it lies inside the buffer (``0 .. nbytes``, or
  the kernel's ``local_memory`` for local memory); otherwise it is skipped -- a load or a
  returning atomic gives 0 -- and the first failing access of the launch is recorded: word 0
  is set to 1 by a compare-and-swap, and its winner writes the argument index (``0xFFFFFFFF``
  for local memory), the byte offset (low, high), the *site* (an index into the kernel's site
  table: kernel or function, instruction index, source line from the module's debug table),
  the access size and whether it wrote;
* the runtime reads the record after the launch and raises :class:`OutOfBoundsError` naming
  the kernel, the argument, the offset, the size and the source line (:func:`raise_if_failed`).

Unchecked builds are unchanged (a separate build, cached apart), so they cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anywave.binary.module import Instruction, Kernel
from anywave.errors import OutOfBoundsError

#: u32 words of the error record: flag, argument, offset lo, offset hi, site, size, wrote, spare
ERR_WORDS = 8
#: argument index recorded for a local memory access
LOCAL_ARG = 0xFFFFFFFF


@dataclass(frozen=True)
class Site:
    """One guarded access of a rendered kernel: ``label`` (``kernel 'k'`` or ``function 'f'``),
    its instruction index ``pc`` in that body, and the instruction (whose ``loc`` is the source
    line, when the debug table has one)."""

    label: str
    pc: int
    ins: Instruction

    def describe(self) -> str:
        loc = f" at {self.ins.loc}" if self.ins.loc is not None else ""
        return f"instruction {self.pc} ({self.ins.mnemonic}) of {self.label}{loc}"


def new_error_record() -> np.ndarray:
    """A zeroed error record (``uint32[ERR_WORDS]``)."""
    return np.zeros(ERR_WORDS, np.uint32)


def raise_if_failed(record: np.ndarray, kernel: Kernel, sites: Sequence[Site], sizes: Sequence[int],
                    local_memory: int, target: str) -> None:
    """Raise :class:`OutOfBoundsError` when the error record of a checked launch is set.

    Args:
        record: the error record read back after the launch (``uint32[ERR_WORDS]``).
        kernel: the WAVE kernel (for argument names).
        sites: the kernel's site table (``CKernel.sites`` / ``PtxKernel.sites``).
        sizes: byte size of each argument (0 for scalars), in ABI order.
        local_memory: the kernel's local memory bytes.
        target: the target's name, for the message.
    """
    if int(record[0]) == 0:
        return
    arg, lo, hi, site, size, wrote = (int(v) for v in record[1:7])
    off = lo | (hi << 32)
    if off >= 1 << 63:
        off -= 1 << 64
    if arg == LOCAL_ARG:
        what, limit = "local memory", local_memory
    elif arg < len(kernel.args):
        what, limit = f"argument {kernel.args[arg].name!r}", int(sizes[arg])
    else:  # pragma: no cover - the renderer only records real arguments
        what, limit = f"argument {arg}", 0
    where = sites[site].describe() if 0 <= site < len(sites) else f"site {site}"
    access = f"{size}-byte {'store' if wrote else 'load'}"
    raise OutOfBoundsError(
        f"out-of-bounds {'local' if arg == LOCAL_ARG else 'device'} memory access in kernel {kernel.name!r} on "
        f"{target} (bounds-checked build): {what} byte offset {off} ({access}; {limit} bytes, valid offsets "
        f"0..{max(limit - size, -1)}) at {where}. The access was skipped (loads gave 0); this launch's "
        f"results are not to be trusted. The first failing access of the launch is reported.")


# ----------------------------------------------------------------------------- C-family lowering

def checked_params(x: object) -> list[str]:
    """The hidden parameters of a checked C-family kernel: ``aw_n<i>`` (u64 bytes) per buffer
    argument ``i``, then the error record ``aw_errb``."""
    from anywave.isa.types import ArgKind

    d, k = x.d, x.k  # type: ignore[attr-defined]
    out = [d.u64_param(f"aw_n{i}") for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
    return out + [d.buffer_param("aw_errb")]


def access_of(ins: Instruction) -> tuple[object, int, bool]:
    """(address operand, access size in bytes, writes) of a memory instruction."""
    from anywave.binary.module import DeviceAddr, LocalAddr
    from anywave.isa.table import Flag

    addr = next(v for v in ins.operands if isinstance(v, (DeviceAddr, LocalAddr)))
    size = ins.defn.type.nbytes if ins.defn.type is not None else 4
    return addr, size, bool(ins.defn.flags & Flag.STORE)


def guard_c(x: object, ins: Instruction, stmts: list[str]) -> list[str]:
    """``stmts`` (one memory instruction's C) run only when its access is in bounds; otherwise
    the destination registers get 0 and the first failure is recorded in ``aw_err``."""
    from anywave.binary.module import DeviceAddr
    from anywave.isa.table import Operand
    from anywave.isa.types import MemoryOrder, Scope

    addr, size, wrote = access_of(ins)
    label, pc = x.cur  # type: ignore[attr-defined]
    site = len(x.sites)  # type: ignore[attr-defined]
    x.sites.append(Site(label, pc, ins))  # type: ignore[attr-defined]
    if isinstance(addr, DeviceAddr):
        wide = Operand.DADDR64 in ins.defn.operands
        base = x.u64(addr.reg) if wide else f"(u64)r{addr.reg}"  # type: ignore[attr-defined]
        n, arg = f"aw_n{addr.buffer}", addr.buffer
    else:
        base = f"(u64)r{addr.reg}"
        n, arg = f"{int(x.k.local_memory)}ul", LOCAL_ARG  # type: ignore[attr-defined]
    zero = []
    kind0 = ins.defn.operands[0]
    if kind0.is_dest and kind0.reg_count:
        zero = [f"r{int(ins.operands[0]) + i} = 0u;" for i in range(kind0.reg_count)]
    cas = x.d.atomic_cas("device", "(aw_err)", "aw_e0", "1u", Scope.DEVICE, MemoryOrder.RELAXED)  # type: ignore
    return [f"const u64 aw_o = {base} + (u64)(i64){int(addr.offset)};",
            f"if ({n} >= {size}ul && aw_o <= {n} - {size}ul) {{",
            *["  " + s for s in stmts],
            "} else {",
            *["  " + s for s in zero],
            f"  u32 aw_e0 = 0u; {cas}",
            f"  if (aw_e0 == 0u) {{ aw_err[1] = {arg & 0xFFFFFFFF}u; aw_err[2] = (u32)aw_o; "
            f"aw_err[3] = (u32)(aw_o >> 32); aw_err[4] = {site}u; aw_err[5] = {size}u; aw_err[6] = {int(wrote)}u; }}",
            "}"]
