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

from anywave.backends.cfamily_prelude import gen_name
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
                    local_memory: int, target: str, build: str = "bounds-checked build") -> None:
    """Raise :class:`OutOfBoundsError` when the error record of a checked launch is set.

    Args:
        record: the error record read back after the launch (``uint32[ERR_WORDS]``).
        kernel: the WAVE kernel (for argument names).
        sites: the kernel's site table (``CKernel.sites`` / ``PtxKernel.sites``).
        sizes: byte size of each argument (0 for scalars), in ABI order.
        local_memory: the kernel's local memory bytes.
        target: the target's name, for the message.
        build: what guarded the access, for the message.
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
        f"{target} ({build}): {what} byte offset {off} ({access}; {limit} bytes, valid offsets "
        f"0..{max(limit - size, -1)}) at {where}. The access was skipped (loads gave 0); this launch's "
        f"results are not to be trusted. The first failing access of the launch is reported.")


# ----------------------------------------------------------------------------- C-family lowering

def checked_params(x: object) -> list[str]:
    """The hidden parameters of a checked C-family kernel: ``awg_n<i>`` (u64 bytes) per buffer
    argument ``i``, then the error record ``aw_errb``."""
    from anywave.isa.types import ArgKind

    d, k = x.d, x.k  # type: ignore[attr-defined]
    out = [d.u64_param(gen_name("n", i)) for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
    return out + [d.buffer_param("aw_errb")]


def access_of(ins: Instruction) -> tuple[object, int, bool] | None:
    """(address operand, access size in bytes, writes) of a memory instruction, or None when it
    has no address operand (not guarded)."""
    from anywave.binary.module import DeviceAddr, LocalAddr
    from anywave.isa.table import Flag

    addr = next((v for v in ins.operands if isinstance(v, (DeviceAddr, LocalAddr))), None)
    if addr is None:
        return None
    size = ins.defn.type.nbytes if ins.defn.type is not None else 4
    return addr, size, bool(ins.defn.flags & Flag.STORE)


def accesses_of(ins: Instruction) -> list[tuple[object, int, bool]]:
    """Every (address operand, access size in bytes, writes) of a memory instruction, in operand
    order: one for loads, stores and atomics; two for an asynchronous copy (spec §4.5: it writes
    its local address and reads its device one)."""
    from anywave.binary.module import DeviceAddr, LocalAddr
    from anywave.isa.table import Category

    acc = access_of(ins)
    if acc is None or ins.defn.category is not Category.ASYNC_COPY:
        return [] if acc is None else [acc]
    size = acc[1]
    return [(a, size, isinstance(a, LocalAddr)) for a in ins.operands if isinstance(a, (DeviceAddr, LocalAddr))]


def guard_c(x: object, ins: Instruction, stmts: list[str]) -> list[str]:
    """``stmts`` (one memory instruction's C) run only when its accesses are in bounds; otherwise
    the destination registers get 0 and the first failure is recorded in ``aw_err``."""
    for addr, size, wrote in reversed(accesses_of(ins)):
        stmts = _guard_c_one(x, ins, addr, size, wrote, stmts)
    return stmts


def _guard_c_one(x: object, ins: Instruction, addr: object, size: int, wrote: bool, stmts: list[str]) -> list[str]:
    from anywave.binary.module import DeviceAddr
    from anywave.isa.table import Operand
    from anywave.isa.types import MemoryOrder, Scope

    label, pc = x.cur  # type: ignore[attr-defined]
    site = len(x.sites)  # type: ignore[attr-defined]
    x.sites.append(Site(label, pc, ins))  # type: ignore[attr-defined]
    if isinstance(addr, DeviceAddr):
        wide = Operand.DADDR64 in ins.defn.operands
        base = x.u64(addr.reg) if wide else f"(u64)r{addr.reg}"  # type: ignore[attr-defined]
        n, arg = gen_name("n", addr.buffer), addr.buffer
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


# ----------------------------------------------------------------------------- PTX lowering

def ptx_hidden_params(kx: object) -> list[str]:
    """The hidden ``.param`` lines of a checked PTX kernel (after the WAVE ones)."""
    from anywave.isa.types import ArgKind

    k = kx.k  # type: ignore[attr-defined]
    out = [f"    .param .u64 __wa_n{i}" for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
    return out + ["    .param .u64 .ptr.global.align 16 __wa_err"]


def ptx_prologue(kx: object) -> list[str]:
    """Registers of a checked PTX kernel: ``%bufn<i>`` (buffer bytes), ``%errp`` (error record),
    and the per-access predicates ``%ckbad``/``%ckok``."""
    from anywave.isa.types import ArgKind

    k = kx.k  # type: ignore[attr-defined]
    bufs = [i for i, a in enumerate(k.args) if a.kind is ArgKind.BUFFER]
    out = [".reg .b64 %errp;", ".reg .pred %ckbad, %ckok;"]
    if bufs:
        out.append(".reg .b64 " + ", ".join(f"%bufn{i}" for i in bufs) + ";")
    out += [f"ld.param.u64 %bufn{i}, [__wa_n{i}];" for i in bufs]
    out += ["ld.param.u64 %errp, [__wa_err];", "cvta.to.global.u64 %errp, %errp;"]
    return out


def guard_ptx(kx: object, ins: Instruction, pe: str | None) -> str | None:
    """Emit the bounds test of one memory instruction before it; returns the predicate under
    which the instruction itself then runs (executing and in bounds). Failing executing lanes
    get 0 in the destination registers and the first failure is recorded at ``%errp``."""
    for addr, size, wrote in accesses_of(ins):
        pe = _guard_ptx_one(kx, ins, pe, addr, size, wrote)
    return pe  # type: ignore[return-value]


def _guard_ptx_one(kx: object, ins: Instruction, pe: str | None, addr: object, size: int, wrote: bool) -> str:
    from anywave.binary.module import DeviceAddr
    from anywave.isa.table import Operand

    label, pc = kx.cur  # type: ignore[attr-defined]
    site = len(kx.sites)  # type: ignore[attr-defined]
    kx.sites.append(Site(label, pc, ins))  # type: ignore[attr-defined]
    lines = [".reg .b64 %ck_o, %ck_l;", ".reg .b32 %ck_w, %ck_lo, %ck_hi;", ".reg .pred %ck_t, %ck_s;"]
    if isinstance(addr, DeviceAddr) and Operand.DADDR64 in ins.defn.operands:
        lines.append(f"mov.b64 %ck_o, {{%r{addr.reg}, %r{addr.reg + 1}}};")
    else:
        lines.append(f"cvt.u64.u32 %ck_o, %r{addr.reg};")
    if addr.offset:
        lines.append(f"add.s64 %ck_o, %ck_o, {int(addr.offset)};")
    if isinstance(addr, DeviceAddr):
        n, arg = f"%bufn{addr.buffer}", addr.buffer
        lines += [f"sub.s64 %ck_l, {n}, {size};", "setp.gt.u64 %ckbad, %ck_o, %ck_l;",
                  f"setp.lt.u64 %ck_s, {n}, {size};", "or.pred %ckbad, %ckbad, %ck_s;"]
    else:
        lim = int(kx.k.local_memory) - size  # type: ignore[attr-defined]
        arg = LOCAL_ARG
        if lim < 0:
            lines.append("setp.eq.u32 %ckbad, 0, 0;")
        else:
            lines.append(f"setp.gt.u64 %ckbad, %ck_o, {lim};")
    if pe is None:
        lines.append("not.pred %ckok, %ckbad;")
    else:
        neg = pe[1:] if pe.startswith("!") else "!" + pe
        # pe may be %ckok itself (the second address of an asynchronous copy): read it before writing %ckok
        lines += [f"and.pred %ckbad, %ckbad, {pe};", f"or.pred %ckok, %ckbad, {neg};", "not.pred %ckok, %ckok;"]
    kind0 = ins.defn.operands[0]
    if kind0.is_dest and kind0.reg_count:
        lines += [f"@%ckbad mov.b32 %r{int(ins.operands[0]) + i}, 0;" for i in range(kind0.reg_count)]
    lines += ["mov.b32 %ck_w, 1;", "@%ckbad atom.global.cas.b32 %ck_w, [%errp], 0, 1;",
              "setp.eq.u32 %ck_t, %ck_w, 0;", "and.pred %ck_t, %ck_t, %ckbad;", "mov.b64 {%ck_lo, %ck_hi}, %ck_o;"]
    for word, val in ((1, str(arg & 0xFFFFFFFF)), (2, "%ck_lo"), (3, "%ck_hi"), (4, str(site)), (5, str(size)),
                      (6, str(int(wrote)))):
        lines.append(f"@%ck_t st.global.u32 [%errp+{4 * word}], {val};")
    kx.out("{")  # type: ignore[attr-defined]
    for line in lines:
        kx.out(line, 2)  # type: ignore[attr-defined]
    kx.out("}")  # type: ignore[attr-defined]
    return "%ckok"
