"""CUDA's warp-level built-ins lowered to WAVE's wave operations (spec §8.8), with a meaning at
every wave width W (the CUDA front end, :mod:`anywave.compiler.cuda_frontend`).

**The CUDA warp is ``Wc = min(W, 32)`` lanes**: the wave itself at W = 8, 16 and 32, each
half of the wave at W = 64. A CUDA kernel therefore sees warps of 32 lanes wherever the
hardware's waves hold 32 lanes, so a kernel written for NVIDIA's warps (32-bit lane masks,
``lane % 32``, shuffle offsets 16, 8, 4, 2, 1) computes at W = 64 exactly what it computes at
W = 32; at W = 8 and 16 the warp is the wave, ``warpSize`` says so, and only kernels written
against ``warpSize`` (not a literal 32) keep their meaning. Definitions, for a lane with wave
lane id ``L`` (``sr_lane_id``):

* ``warpSize`` = ``Wc``; the lane in the warp ``l = L & (Wc - 1)``; the warp's first wave
  lane ``base = L - l``.
* **Participating lanes** are the lanes of the warp that execute the call together (WAVE's
  executing lanes). The ``mask`` argument is evaluated but names nothing more: CUDA defines
  the result only when the mask names exactly those lanes, and then the two agree. A
  hard-coded full mask ``0xffffffff`` thus means "every lane of the warp" at every W.
* ``__shfl*_sync(mask, v, b[, width])`` follow PTX's ``shfl.sync`` (PTX ISA, "shfl.sync"),
  with the warp's ``Wc`` lanes in place of 32: ``seg = min(width, Wc)`` (``width`` defaults
  to ``warpSize``; a power of two), ``b' = b & (Wc - 1)``, the segment ``lo = l & ~(seg-1)``,
  ``hi = lo + seg - 1``; source lane ``j``: ``idx``: ``lo | (b & (seg - 1))``; ``up``:
  ``l - b'`` if ``l - lo >= b'``; ``down``: ``l + b'`` if ``<= hi``; ``xor``: ``l ^ b'`` if
  ``<= hi``; otherwise (and for a source lane that does not take part: spec §8.8) the lane's
  own ``v``. Lowered to ``shfl.idx.b32`` with the source lane ``base + j`` computed per lane;
  64-bit values move as two 32-bit halves.
* ``__ballot_sync(mask, p)`` = bits ``base .. base + Wc - 1`` of WAVE's ``ballot.b64`` (bit
  ``i`` = lane ``i`` of the warp); ``__activemask()`` = ``__ballot_sync(~0, 1)``;
  ``__any_sync``/``__all_sync`` = the participating lanes' ``p``, any / all, as ``int`` 0/1.

* ``__syncwarp()`` / ``__syncwarp(mask)`` = ``barrier.wave`` (spec §7.10): the lanes of the
  wave that execute it together are synchronised, and their memory accesses before it happen
  before their accesses after it. The mask is evaluated, not consulted (as above). Where CUDA's
  warp is the wave (W <= 32) this is exactly CUDA's rule; at W = 64, when both 32-lane warps of
  a wave execute the call together, it orders the lanes of both -- more than CUDA orders, never
  less, so code race free under CUDA's rule stays race free.
"""

from __future__ import annotations

from typing import Any

from anywave.isa.types import SpecialRegister

from . import types as ty
from .ir import PredUse, Value

#: the warp built-ins this module lowers
WARP_BUILTINS = frozenset({
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
    "__any_sync", "__all_sync", "__activemask",
})

#: declarations for the front end's prelude (our own text)
PRELUDE = r"""
extern const __device__ int warpSize;
__device__ unsigned __activemask(void);
__device__ unsigned __ballot_sync(unsigned, int);
__device__ int __any_sync(unsigned, int);
__device__ int __all_sync(unsigned, int);
__device__ void __syncwarp(void); __device__ void __syncwarp(unsigned);
""" + "".join(
    f"__device__ {t} __shfl_sync(unsigned, {t}, int); __device__ {t} __shfl_sync(unsigned, {t}, int, int);\n"
    f"__device__ {t} __shfl_up_sync(unsigned, {t}, unsigned); "
    f"__device__ {t} __shfl_up_sync(unsigned, {t}, unsigned, int);\n"
    f"__device__ {t} __shfl_down_sync(unsigned, {t}, unsigned); "
    f"__device__ {t} __shfl_down_sync(unsigned, {t}, unsigned, int);\n"
    f"__device__ {t} __shfl_xor_sync(unsigned, {t}, int); __device__ {t} __shfl_xor_sync(unsigned, {t}, int, int);\n"
    for t in ("int", "unsigned", "long", "unsigned long", "long long", "unsigned long long", "float", "double"))


def _sr(low: Any, r: SpecialRegister) -> Value:
    v = Value(ty.u32)
    low.emit("mov.sr", v, r)
    return v


def warp_geometry(low: Any) -> tuple[Value, Value, Value]:
    """(Wc, l, base) as u32: the warp's lanes ``min(W, 32)``, the lane in the warp, the warp's
    first wave lane. Where the lowering knows that W = 32 (``low.warp_const``: the kernel's body
    for W = 32, see :func:`anywave.compiler.cuda_frontend.CudaLowering.build`) the warp is the
    wave: (32, the wave lane, 0)."""
    if low.warp_const is not None:
        return low.const(low.warp_const, ty.u32), _sr(low, SpecialRegister.LANE_ID), low.const(0, ty.u32)
    wc = low.alu("min", ty.u32, _sr(low, SpecialRegister.WAVE_WIDTH), low.const(32, ty.u32))
    lane = _sr(low, SpecialRegister.LANE_ID)
    l_ = low.alu("and", ty.u32, lane, low.alu("sub", ty.u32, wc, low.const(1, ty.u32)))
    return wc, l_, low.alu("sub", ty.u32, lane, l_)


def warp_size(low: Any) -> Value:
    """``warpSize`` as the i32 value ``min(W, 32)`` (a constant where the lowering knows W)."""
    if low.warp_const is not None:
        return low.const(low.warp_const, ty.i32)
    wc = low.alu("min", ty.u32, _sr(low, SpecialRegister.WAVE_WIDTH), low.const(32, ty.u32))
    r = Value(ty.i32)
    low.mov(r, wc)
    return r


def _u32(low: Any, v: Value, t: Any, c: Any) -> Value:
    return low.convert(v, t, ty.u32, c)


def _ballot32(low: Any, p: PredUse) -> Value:
    """The warp's 32-bit ballot of ``p`` (bits of the warp's lanes, lane ``l`` at bit ``l``)."""
    _, _, base = warp_geometry(low)
    b = Value(ty.u64)
    low.emit("ballot.b64", b, p)
    shifted = low.alu("shr", ty.u64, b, base)
    return low.convert(shifted, ty.u64, ty.u32, None)


def syncwarp(low: Any, args: list[Any]) -> tuple[Value, Any]:
    """``__syncwarp([mask])``: ``barrier.wave`` (see the module's note); the value is void."""
    low.wave_dependent = True
    low.syncwarps += 1
    for a in args:  # C evaluates every argument
        low.rvalue(a)
    low.emit("barrier.wave")
    return low.const(0, ty.i32), ty.i32


def lower(low: Any, c: Any, name: str, args: list[Any]) -> tuple[Value, Any]:
    """The call ``name(args)`` (clang cursors) at cursor ``c``: (value, C type)."""
    low.wave_dependent = True
    if name == "__activemask":
        return _ballot32(low, PredUse(low.const(True, ty.pred))), ty.u32
    # the mask: evaluated (C evaluates every argument), not consulted (see the module's note)
    low.rvalue(args[0])
    if name in ("__ballot_sync", "__any_sync", "__all_sync"):
        p = low.cond(args[1])
        if name == "__all_sync":
            p = PredUse(p.value, not p.negated)
        bits = _ballot32(low, p)
        if name == "__ballot_sync":
            return bits, ty.u32
        q = Value(ty.pred)
        low.emit("setp.ne.u32" if name == "__any_sync" else "setp.eq.u32", q, bits, low.const(0, ty.u32))
        r = Value(ty.i32)
        low.emit("selp.b32", r, low.const(1, ty.i32), low.const(0, ty.i32), PredUse(q))
        return r, ty.i32
    mode = {"__shfl_sync": "idx", "__shfl_up_sync": "up", "__shfl_down_sync": "down", "__shfl_xor_sync": "xor"}[name]
    t = low.ctype_of(c)
    v, vt = low.rvalue(args[1])
    v = low.convert(v, vt, t, args[1])
    b, bt = low.rvalue(args[2])
    b = _u32(low, b, bt, args[2])
    if low.warp_const is not None and len(args) == 3:
        # the warp is the wave (W = 32, the whole width): WAVE's own shuffle of the same mode has
        # the same source lane, l + b' / l - b' / l ^ b' / b', valid in the same cases (spec §8.8)
        return _native(low, mode, v, low.alu("and", ty.u32, b, low.const(low.warp_const - 1, ty.u32)), t, c), t
    wc, l_, base = warp_geometry(low)
    one = low.const(1, ty.u32)
    if len(args) > 3:
        w, wt = low.rvalue(args[3])
        seg = low.alu("min", ty.u32, _u32(low, w, wt, args[3]), wc)
    else:
        seg = wc
    segm1 = low.alu("sub", ty.u32, seg, one)
    lo = low.alu("and", ty.u32, l_, low.alu("not", ty.u32, segm1))
    ok: Value | None = None
    if mode == "idx":
        j = low.alu("or", ty.u32, lo, low.alu("and", ty.u32, b, segm1))
    else:
        b5 = low.alu("and", ty.u32, b, low.alu("sub", ty.u32, wc, one))
        ok = Value(ty.pred)
        if mode == "up":
            j = low.alu("sub", ty.u32, l_, b5)
            low.emit("setp.ge.u32", ok, low.alu("sub", ty.u32, l_, lo), b5)
        else:
            j = low.alu("add" if mode == "down" else "xor", ty.u32, l_, b5)
            low.emit("setp.le.u32", ok, j, low.alu("add", ty.u32, lo, segm1))
    src = low.alu("add", ty.u32, base, j)
    if ok is not None:  # an invalid source: the lane's own value (spec §8.8: an out-of-range lane)
        sel = Value(ty.u32)
        low.emit("selp.b32", sel, src, low.const(0xFFFFFFFF, ty.u32), PredUse(ok))
        src = sel
    vt_reg = v.type
    if vt_reg.bits == 32:
        r = Value(vt_reg)
        low.emit("shfl.idx.b32", r, v, src)
        return r, t
    # 64 bits: the two halves, each shuffled from the same lane
    bits = v if vt_reg is ty.u64 else Value(ty.u64)
    if bits is not v:
        low.emit("mov.b64", bits, v)
    lo32 = low.convert(bits, ty.u64, ty.u32, c)
    hi32 = low.convert(low.alu("shr", ty.u64, bits, low.const(32, ty.u32)), ty.u64, ty.u32, c)
    rl, rh = Value(ty.u32), Value(ty.u32)
    low.emit("shfl.idx.b32", rl, lo32, src)
    low.emit("shfl.idx.b32", rh, hi32, src)
    out = low.alu("or", ty.u64, low.alu("shl", ty.u64, low.convert(rh, ty.u32, ty.u64, c), low.const(32, ty.u32)),
                  low.convert(rl, ty.u32, ty.u64, c))
    if vt_reg is ty.u64:
        return out, t
    r = Value(vt_reg)
    low.emit("mov.b64", r, out)
    return r, t


def _native(low: Any, mode: str, v: Value, b: Value, t: Any, c: Any) -> Value:
    """WAVE's ``shfl.<mode>.b32`` of ``v`` (32 or 64 bits: two halves) with lane operand ``b``."""
    vt_reg = v.type
    if vt_reg.bits == 32:
        r = Value(vt_reg)
        low.emit(f"shfl.{mode}.b32", r, v, b)
        return r
    bits = v if vt_reg is ty.u64 else Value(ty.u64)
    if bits is not v:
        low.emit("mov.b64", bits, v)
    lo32 = low.convert(bits, ty.u64, ty.u32, c)
    hi32 = low.convert(low.alu("shr", ty.u64, bits, low.const(32, ty.u32)), ty.u64, ty.u32, c)
    rl, rh = Value(ty.u32), Value(ty.u32)
    low.emit(f"shfl.{mode}.b32", rl, lo32, b)
    low.emit(f"shfl.{mode}.b32", rh, hi32, b)
    out = low.alu("or", ty.u64, low.alu("shl", ty.u64, low.convert(rh, ty.u32, ty.u64, c), low.const(32, ty.u32)),
                  low.convert(rl, ty.u32, ty.u64, c))
    if vt_reg is ty.u64:
        return out
    r = Value(vt_reg)
    low.emit("mov.b64", r, out)
    return r
