"""The status record of a SPIR-V kernel: how a Vulkan launch reports what went wrong inside it.

A kernel gets a hidden storage buffer, the *status record* (the layout of
:mod:`anywave.backends.bounds`' error record: :data:`~anywave.backends.bounds.ERR_WORDS` ``u32``
words, zeroed by the launcher, bound after the WAVE buffers), when

* the build is bounds-checked (every device and local access guarded, issue 31 item 1), or
* the device may cut loops short (:attr:`~anywave.backends.spirv.VulkanFeatures.loop_limit`):
  Mesa's lavapipe (llvmpipe's ``LP_MAX_TGSI_LOOP_ITERATIONS``) ends every shader invocation's
  loops after 65535 turns in all, silently -- a loop that never ends "completes" and a long
  loop gives a wrong count (issue 31, item 8). Each invocation then keeps the driver's count
  (one per pass through any loop's header, the last pass that leaves the loop included: the
  accounting measured on Mesa 22.3; tests/test_vulkan_loops.py checks both sides of the limit;
  the loops that the fragment instructions are lowered to count too, :func:`spirv_mma._for`)
  and a pass through a loop's body that ends with the count at the limit records :data:`LOOP_CUT`
  (the driver ends the loop there). A pass that leaves the loop records nothing; a kernel within
  the limit is never reported (one exactly at it can be: its last body pass ends at the limit). A
  count, not a flag set at the loop's exit, because the driver's optimiser sees only that exit
  and folds any such flag away.

The first failure of the launch is recorded (word 0 set to 1 by a compare-and-swap, whose winner
writes the argument index or :data:`LOOP_CUT` / :data:`~anywave.backends.bounds.LOCAL_ARG`, the
byte offset, the site, the size and whether it wrote); :func:`raise_if_failed` turns it into
:class:`~anywave.errors.OutOfBoundsError` or :class:`~anywave.errors.LaunchError`, naming the kernel,
buffer, offset and source line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from anywave.backends.bounds import LOCAL_ARG, Site
from anywave.backends.bounds import raise_if_failed as raise_oob
from anywave.backends.spirv_asm import SCOPE
from anywave.errors import WaveError

#: argument index recorded for a loop the driver cut short
LOOP_CUT = 0xFFFFFFFE


class LoopCutError(WaveError):
    """The Vulkan driver ended a loop of the kernel before the kernel left it (lavapipe's loop
    limit): the launch's results are wrong, or the kernel never ends."""


def declare(x: Any) -> None:
    """Declare the status record (``x.status``, binding ``len(buffers)``) on lowering ``x``."""
    b = x.b
    v = b.global_var(b.t_ptr("StorageBuffer", x.sbs), "StorageBuffer")
    b.decorate(v, "DescriptorSet", 0)
    b.decorate(v, "Binding", len(x.bufvar))
    b.name(v, "aw_status")
    x.interface.append(v)
    x.status = v
    # the first failing guarded access, kept in registers and written once at the kernel's end
    # (flush): a record block per access made long kernels too big for the driver to compile
    x.fail_have = x.var(x.bool_, b.const_bool(False))
    x.fail_words = [x.var(x.u32, x.c(0)) for _ in range(6)]


def note(x: Any, bad: int, ins: Any, pc: int, arg: int, lo: int, hi: int, size: int, wrote: bool) -> None:
    """Emit: remember this access as the launch's failure when ``bad`` holds and none is kept yet."""
    site = len(x.sites)
    x.sites.append(Site(x.cur_label, pc, ins))
    have = x.load(x.fail_have, x.bool_)
    new = x.and_(bad, x.not_(have))
    for var, val in zip(x.fail_words, (x.c(arg), lo, hi, x.c(site), x.c(size), x.c(int(wrote))), strict=True):
        x.store(var, x.sel(x.u32, new, val, x.load(var)))
    x.store(x.fail_have, x.or_(have, bad))


def flush(x: Any) -> None:
    """Emit (at the kernel's single end): write the kept failure to the record, first one wins."""
    if x.status is None:
        return
    with x.when(x.load(x.fail_have, x.bool_)):
        dev = x.c(SCOPE["Device"])
        old = x.op("AtomicCompareExchange", x.u32, word(x, 0), dev, x.c(0), x.c(0), x.c(1), x.c(0))
        with x.when(x.ieq(old, x.c(0))):
            for i, var in enumerate(x.fail_words, start=1):
                x.store(word(x, i), x.load(var))


def word(x: Any, i: int) -> int:
    """A pointer to word ``i`` of the status record."""
    return x.op("AccessChain", x.sb_ptr, x.status, x.c(0), x.c(i))


def record(x: Any, ins: Any, pc: int, arg: int, off: int | None, size: int, wrote: bool,
           off_hi: int | None = None) -> None:
    """Emit: record a failure at the current point (the first of the launch wins). ``off`` /
    ``off_hi`` are the ids of the u32 halves of the byte offset (None: 0)."""
    site = len(x.sites)
    x.sites.append(Site(x.cur_label, pc, ins))
    dev = x.c(SCOPE["Device"])
    old = x.op("AtomicCompareExchange", x.u32, word(x, 0), dev, x.c(0), x.c(0), x.c(1), x.c(0))
    with x.when(x.ieq(old, x.c(0))):
        vals = (x.c(arg), off if off is not None else x.c(0), off_hi if off_hi is not None else x.c(0), x.c(site),
                x.c(size), x.c(int(wrote)))
        for i, v in enumerate(vals, start=1):
            x.store(word(x, i), v)


def raise_if_failed(rec: np.ndarray, kernel: Any, sites: Sequence[Site], sizes: Sequence[int],
                    local_memory: int, target: str, checked: bool = True) -> None:
    """Raise for a set status record of a launch of ``kernel``.

    Raises:
        LoopCutError: a loop was cut short by the driver (its source line is named).
        OutOfBoundsError: (checked build) an access left its buffer or local memory.
    """
    if int(rec[0]) == 0:
        return
    if int(rec[1]) == LOOP_CUT:
        s = int(rec[4])
        where = sites[s].describe() if 0 <= s < len(sites) else f"site {s}"
        raise LoopCutError(
            f"kernel {kernel.name!r} on {target}: the driver cut the loop at {where} short: an invocation "
            "ran 65535 loop turns in all, where Mesa's lavapipe stops every loop, so this launch's results "
            "are wrong -- or the loop never ends (the spec says such a launch never completes, §7.8). Use a "
            "target without the limit (OpenCL, SYCL, the emulator) for kernels with more loop turns.")
    raise_oob(rec, kernel, sites, sizes, local_memory, target,
              "bounds-checked build" if checked else "local accesses are always guarded on this device")


__all__ = ["LOCAL_ARG", "LOOP_CUT", "LoopCutError", "declare", "raise_if_failed", "record"]


# ----------------------------------------------------------------------------- guarded accesses

def guards(x: Any, ins: Any) -> bool:
    """Whether instruction ``ins`` runs guarded on lowering ``x``: every access of a checked
    build, and local memory accesses on a device whose local memory is unbounded host memory
    (:attr:`~anywave.backends.spirv.VulkanFeatures.guard_local`: lavapipe, where an overrun of
    the workgroup array writes into the process and kills it). Wave-collective fragment accesses
    (mma loads/stores) are not guarded."""
    from anywave.backends.bounds import accesses_of
    from anywave.binary.module import LocalAddr
    from anywave.isa.table import Flag

    if x.status is None or ins.defn.flags & Flag.WAVE_COLLECTIVE:
        return False
    accs = accesses_of(ins)
    return bool(accs) and (x.checked or any(isinstance(a, LocalAddr) for a, _, _ in accs))


def guarded(x: Any, ins: Any, pc: int, emit: Any) -> None:
    """Emit ``emit()`` (the instruction) only when every access of ``ins`` lies inside its buffer
    (``0 .. nbytes``, the size the launcher writes to the record's word ``ERR_WORDS + binding``)
    or inside local memory; otherwise its destination registers get 0 and the first failing
    access is recorded. Offsets are computed in 64 bits where the device has ``int64`` (the
    C family's ``(u64)reg + (i64)imm``), else in 32."""
    from anywave.backends.bounds import ERR_WORDS, accesses_of
    from anywave.binary.module import DeviceAddr
    from anywave.isa.table import Operand

    wide_ok = x.f.int64
    oks = []
    for addr, size, wrote in accesses_of(ins):
        if not x.checked and isinstance(addr, DeviceAddr):
            continue  # the driver bounds storage buffers (guard_local only)
        if isinstance(addr, DeviceAddr):
            n = x.load(word(x, ERR_WORDS + x.binding_of[addr.buffer]))
            arg = addr.buffer
        else:
            n = x.c(int(x.k.local_memory))
            arg = LOCAL_ARG
        if wide_ok:
            u64 = x.u64
            if Operand.DADDR64 in ins.defn.operands and isinstance(addr, DeviceAddr):
                base = x.r64(addr.reg)
            else:
                base = x.op("UConvert", u64, x.r(addr.reg))
            off = x.op("IAdd", u64, base, x.b.const_u64(int(addr.offset) & (2**64 - 1)))
            n64 = x.op("UConvert", u64, n)
            sz = x.b.const_u64(size)
            ok = x.and_(x.op("UGreaterThanEqual", x.bool_, n64, sz),
                        x.op("ULessThanEqual", x.bool_, off, x.op("ISub", u64, n64, sz)))
            vv = x.op("Bitcast", x.v2u, off)
            lo, hi = x.op("CompositeExtract", x.u32, vv, 0), x.op("CompositeExtract", x.u32, vv, 1)
        else:
            lo, hi = x.byte_offset(addr.reg, addr.offset), x.c(0)
            sz = x.c(size)
            ok = x.and_(x.op("UGreaterThanEqual", x.bool_, n, sz),
                        x.op("ULessThanEqual", x.bool_, lo, x.op("ISub", x.u32, n, sz)))
        note(x, x.not_(ok), ins, pc, arg, lo, hi, size, wrote)
        oks.append(ok)
    if not oks:
        emit()
        return
    ok = x.and_(*oks)
    with x.when(ok):
        emit()
    kind0 = ins.defn.operands[0]
    if kind0.is_dest and kind0.reg_count:
        with x.when(x.not_(ok)):
            for i in range(kind0.reg_count):
                x.setr(int(ins.operands[0]) + i, x.c(0))
