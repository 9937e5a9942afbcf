"""SPIR-V lowering of the MMA fragment instructions (docs/spec.md §8.14) for
:mod:`anywave.backends.spirv`: loops with the emulator's fragment semantics, bit for bit.

Layout of this backend (not observable, spec §8.14). Every fragment slot of a kernel is one
``Function`` array of 32-bit words (the f32 bits of its elements, so no driver float handling
touches a stored value), zero-initialised (+0.0):

* wave scope (``m16n16k16``): A, B and accumulator fragments alike are spread over the wave,
  ``256 / W`` words per lane: lane l holds tile element ``l + W*j`` (row-major index) in word j.
  ``mma`` reads the A and B elements a lane needs from the lanes holding them with
  ``OpGroupNonUniformShuffle``; the word index is the same in every lane (for D element
  ``e = l + W*j``, row i, column c: A's element ``16i + k`` is word ``(16i + k) / W`` of lane
  ``(16i + k) % W``, B's ``16k + c`` word ``(16k + c) / W`` of lane ``(16k + c) % W``, both word
  indices wave-uniform for W = 8..64). Spreading keeps each array small: lavapipe turns every
  dynamically indexed ``Function`` array into an if-ladder over its words;
* thread scope (``m4n4k4``): 16 words per lane, the thread's own tiles.

``mma`` computes each accumulator element as
``s = C[i][j]; for k in 0..K-1: s = fma_f32(A[i][k], B[k][j], s)`` with the exactly rounded fma
of :meth:`~anywave.backends.spirv_float.FloatOps.fma_exact` (through f64: needs
``shaderFloat64``), then the NaN canonical (``0x7FC00000``), as :mod:`anywave.emu.fragments`.
``scale`` / ``bias`` are one f32 multiply / add (``NoContraction``) with the NaN canonical; loads
convert f16/bf16 exactly; C loads, fills and stores move the bits. Wave-scope instructions run in
converged control flow (the lowering's wave-collective path) with the work under a selection on
the executing condition; local-memory wave-scope loads and stores sit between subgroup barriers
(as the C family's), so the tile is read or written whole before any lane goes on. The loops
are marked ``DontUnroll`` (unrolled fma chains take lavapipe's LLVM minutes to compile).

``mma.group`` (the wave-group MMA): each wave computes its own 16 x N strip as N/16 ``mma``
steps in order (slot D+j from columns 16j..16j+15), A's elements fetched by shuffle as for
``mma``, B's read from local memory at the swizzled panel layout's offsets
(:func:`anywave.isa.mma.group_b_offset`) between subgroup barriers, converted as ``mma.load``
does: the emulator's order, bit for bit. No unit is shared between the four waves of a group.
``mma.group.async`` is the same (complete at its issue; ``mma.wait`` emits nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anywave.backends import spirv_coop, spirv_status
from anywave.backends.lowering.fragments import fragment_slots
from anywave.backends.spirv_asm import SCOPE
from anywave.backends.spirv_coop import _canon, _scoped  # shared with the cooperative-matrix lowering
from anywave.binary.module import Instruction
from anywave.isa.mma import FragKind, fragment_kinds, group_bt, group_n, row_n
from anywave.isa.types import ScalarType as T

_Lowering = Any  # anywave.backends.spirv._Lowering (no import cycle)
DONT_UNROLL = 2  # SPIR-V LoopControl mask


def words_per_lane(k: FragKind, W: int) -> int:
    """32-bit words a lane holds for a slot of kind ``k`` at wave width W (see the module doc)."""
    return k.elems // W if k.shape.scope == "wave" else k.elems


def declare(x: _Lowering) -> dict[int, tuple[int, FragKind]]:
    """Function variables of every fragment slot the kernel (or a function it calls) uses:
    slot -> (variable id, kind), zero-initialised."""
    out: dict[int, tuple[int, FragKind]] = {}
    for s, k in sorted(fragment_slots(x.m, x.k.code).items()):
        if spirv_coop.is_coop(x, k):  # a cooperative matrix (spirv_coop)
            out[s] = (spirv_coop.declare_slot(x, k), k)
            continue
        arr = x.b.t_array(x.u32, words_per_lane(k, x.W))
        out[s] = (x.var(arr, x.b.const_null(arr)), k)
    return out


def _word(x: _Lowering, slot: int, j: int) -> int:
    """Pointer to word j (a u32 id) of fragment slot ``slot``."""
    return x.op("AccessChain", x.b.t_ptr("Function", x.u32), x.frags[slot][0], j)


def _for(x: _Lowering, n: int, body: Callable[[int], None]) -> None:
    """``for (j = 0; j < n; ++j) body(j)`` as a structured loop (j a u32 id).

    On a device with a loop limit (lavapipe, :mod:`anywave.backends.spirv_status`) the driver
    counts this loop's turns with the WAVE loops', so they enter the status record's count: the
    end of a pass of an enclosing WAVE loop, or else the end of the instruction, with the count
    at the limit records :data:`~anywave.backends.spirv_status.LOOP_CUT` (a cut is reported,
    never a silently short loop)."""
    jv = x.var(x.u32)
    x.store(jv, x.c(0))
    depth = getattr(x, "mma_loops", 0)
    x.mma_loops = depth + 1
    if x.f.loop_limit:  # its n + 1 passes through the header, counted at once (none is cut short here)
        x.store(x.all_turns, x.add(x.load(x.all_turns), x.c(n + 1)))
    merge, cont = x.loop_open(DONT_UNROLL)
    j = x.load(jv)
    x.loop_exit_unless(x.op("ULessThan", x.bool_, j, x.c(n)), merge)
    body(j)
    x.store(jv, x.add(j, x.c(1)))
    x.loop_close(merge, cont)
    x.mma_loops = depth
    site = getattr(x, "site", None)
    # once, after the instruction's loops; inside a WAVE loop the end of its pass records it (spirv_control)
    if x.f.loop_limit and site is not None and depth == 0 and not site[2]:
        cut = x.op("UGreaterThanEqual", x.bool_, x.load(x.all_turns), x.c(x.f.loop_limit))
        with x.when(cut):
            spirv_status.record(x, site[0], site[1], spirv_status.LOOP_CUT, None, 0, False)


def _elem(x: _Lowering, k: FragKind, j: int) -> int:
    """Row-major tile index of this lane's word j of a slot of kind k."""
    if k.shape.scope == "wave":
        return x.add(x.lane, x.op("IMul", x.u32, j, x.c(x.W)))
    return j


def _log2(v: int) -> int:
    assert v & (v - 1) == 0, v
    return v.bit_length() - 1


def _tile_off(x: _Lowering, k: FragKind, base: int, stride: int, e: int, esz: int) -> int:
    """Byte offset of element e of a tile at ``base`` with row stride ``stride`` (u32 ids)."""
    row = x.shr(e, _log2(k.cols))
    col = x.iand(e, x.c(k.cols - 1))
    return x.add(x.add(base, x.op("IMul", x.u32, row, stride)), x.shl(col, _log2(esz)))


def _fload(x: _Lowering, ins: Instruction) -> None:
    f, addr, rs = ins.operands
    k = fragment_kinds(ins.defn)[0]
    t = ins.defn.type
    esz = t.nbytes

    def body() -> None:
        base = x.byte_offset(addr.reg, addr.offset)
        stride = x.r(rs)

        def one(j: int) -> int:
            off = _tile_off(x, k, base, stride, _elem(x, k, j), esz)
            w = x.load(x.word_ptr(addr, off))
            if esz == 4:
                v = w
            else:
                h = x.op("BitFieldUExtract", x.u32, w, x.shl(x.iand(off, x.c(3)), 3), x.c(16))
                v = x.f32_bits(x.h2f(h)) if t is T.F16 else x.shl(h, 16)
            x.store(_word(x, f, j), v)

        _for(x, words_per_lane(k, x.W), one)

    _scoped(x, k, addr, body)


def _fstore(x: _Lowering, ins: Instruction) -> None:
    addr, f, rs = ins.operands
    k = fragment_kinds(ins.defn)[1]

    def body() -> None:
        base = x.byte_offset(addr.reg, addr.offset)
        stride = x.r(rs)

        def one(j: int) -> None:
            off = _tile_off(x, k, base, stride, _elem(x, k, j), 4)
            x.store(x.word_ptr(addr, off), x.load(_word(x, f, j)))

        _for(x, words_per_lane(k, x.W), one)

    _scoped(x, k, addr, body)


def _fetch(x: _Lowering, k: FragKind, slot: int, e: int) -> int:
    """Tile element e (a u32 id) of fragment ``slot`` of kind ``k``: this lane's word, or for
    wave scope word e / W of lane e % W (e / W is wave-uniform, see the module doc)."""
    if k.shape.scope != "wave":
        return x.load(_word(x, slot, e))
    v = x.load(_word(x, slot, x.shr(e, _log2(x.W))))
    return x.op("GroupNonUniformShuffle", x.u32, x.c(SCOPE["Subgroup"]), v, x.iand(e, x.c(x.W - 1)))


def _fmma(x: _Lowering, ins: Instruction) -> None:
    d, a, b, c = ins.operands
    k = fragment_kinds(ins.defn)[0]
    sh = k.shape

    def fetch(slot: int, e: int) -> int:
        return _fetch(x, k, slot, e)

    def body() -> None:
        def one(j: int) -> None:
            e = _elem(x, k, j)
            i, col = x.shr(e, _log2(sh.n)), x.iand(e, x.c(sh.n - 1))
            s = x.var(x.u32)
            x.store(s, x.load(_word(x, c, j)))

            def step(kk: int) -> None:
                av = fetch(a, x.add(x.shl(i, _log2(sh.k)), kk))
                bv = fetch(b, x.add(x.shl(kk, _log2(sh.n)), col))
                x.store(s, x.fma_exact(x.bits_f32(av), x.bits_f32(bv), x.bits_f32(x.load(s)), T.F32))

            _for(x, sh.k, step)
            x.store(_word(x, d, j), _canon(x, x.load(s)))  # d may be c: word j read above

        _for(x, words_per_lane(k, x.W), one)

    _scoped(x, k, None, body)


def _fgmma(x: _Lowering, ins: Instruction) -> None:
    """``mma.group`` (spec §8.14): slot D+jj += A x B[:, 16jj:16jj+16], B element (k, n) at
    local byte ``L + (n/64)*P + 128k + 16*(((n%64)/8) ^ (k%8)) + 2*(n%8)`` (group_b_offset)."""
    d, a, addr, rp = ins.operands
    k = fragment_kinds(ins.defn)[0]
    bf = ins.defn.src_type is T.BF16

    bt = group_bt(ins.defn)

    def body() -> None:
        base = x.byte_offset(addr.reg, addr.offset)
        pstride = x.r(rp)
        if bt:  # the swizzled row layout: (L mod 1024) / 2 is the first k of the step
            bmod = x.iand(base, x.c(1023))
            base = x.op("ISub", x.u32, base, bmod)
            k0 = x.shr(bmod, 1)
        nj = group_n(ins.defn) // 16

        # one loop over this lane's words, each running its 16 k-steps once for all nj accumulators
        # (the A element is fetched once per step): every loop turn counts toward a driver's loop
        # limit (lavapipe: 65535 turns in all per invocation, spirv_status), and a loop per
        # accumulator took nj times the turns (the fast attention backward's dK/dV walk passed
        # the limit in its second query block, and the driver cut the loops short silently)
        def one(j: int) -> None:
            e = _elem(x, k, j)
            i = x.shr(e, 4)
            ns, ss, cols, chunks = [], [], [], []
            for jj in range(nj):
                n = x.add(x.iand(e, x.c(15)), x.c(16 * jj))
                sv = x.var(x.u32)
                x.store(sv, x.load(_word(x, d + jj, j)))
                ns.append(n)
                ss.append(sv)
                cols.append(x.add(base, x.add(x.op("IMul", x.u32, x.shr(n, 6), pstride), x.shl(x.iand(n, x.c(7)), 1))))
                chunks.append(x.shr(x.iand(n, x.c(63)), 3))

            def step(kk: int) -> None:
                av = x.bits_f32(_fetch(x, k, a, x.add(x.shl(i, 4), kk)))
                for jj in range(nj):
                    n = ns[jj]
                    if bt:
                        cc = x.add(k0, kk)
                        swz = x.shl(x.op("BitwiseXor", x.u32, x.shr(cc, 3), x.iand(n, x.c(7))), 4)
                        off = x.add(base, x.add(x.shl(n, 7), x.add(swz, x.shl(x.iand(cc, x.c(7)), 1))))
                    else:
                        swz = x.shl(x.op("BitwiseXor", x.u32, chunks[jj], x.iand(kk, x.c(7))), 4)
                        off = x.add(cols[jj], x.add(x.shl(kk, 7), swz))
                    w = x.load(x.word_ptr(addr, off))
                    h = x.op("BitFieldUExtract", x.u32, w, x.shl(x.iand(off, x.c(3)), 3), x.c(16))
                    bv = x.shl(h, 16) if bf else x.f32_bits(x.h2f(h))
                    x.store(ss[jj], x.fma_exact(av, x.bits_f32(bv), x.bits_f32(x.load(ss[jj])), T.F32))

            _for(x, 16, step)
            for jj in range(nj):
                x.store(_word(x, d + jj, j), _canon(x, x.load(ss[jj])))

        _for(x, words_per_lane(k, x.W), one)

    _scoped(x, k, addr, body)


def _felementwise(x: _Lowering, ins: Instruction) -> None:
    op = ins.defn.op
    k = fragment_kinds(ins.defn)[0]
    d = ins.operands[0]

    def body() -> None:
        if op == "ffill":
            v = x.r(ins.operands[1])
            _for(x, words_per_lane(k, x.W), lambda j: x.store(_word(x, d, j), v))
            return
        src = ins.operands[1]
        if op == "fscale":
            sv = x.bits_f32(x.r(ins.operands[2]))

            def one(j: int) -> None:
                p = x.fop("FMul", x.f32, x.bits_f32(x.load(_word(x, src, j))), sv)
                x.store(_word(x, d, j), _canon(x, x.f32_bits(p)))
        else:  # fbias: d[i][j] = s[i][j] + bias[j]
            addr = ins.operands[2]
            base = x.byte_offset(addr.reg, addr.offset)

            def one(j: int) -> None:
                col = x.iand(_elem(x, k, j), x.c(k.cols - 1))
                bias = x.load(x.word_ptr(addr, x.add(base, x.shl(col, 2))))
                p = x.fop("FAdd", x.f32, x.bits_f32(x.load(_word(x, src, j))), x.bits_f32(bias))
                x.store(_word(x, d, j), _canon(x, x.f32_bits(p)))

        _for(x, words_per_lane(k, x.W), one)

    _scoped(x, k, None, body)


def _facc(x: _Lowering, ins: Instruction) -> None:
    """The accumulator operations (spec §8.14) on this backend's layout (element ``l + W*j`` in
    word j of lane l, A fragments alike, so ``cvt.a`` is word by word): a row reduction combines
    the strip's words of the row (W = 8: words 2r and 2r + 1 hold row r), then the lanes holding it
    (16; W = 8: 8) by shuffles; exp2 of one exact fma, mul (NoContraction), the exact division."""
    op = ins.defn.op
    ops = ins.operands
    k = fragment_kinds(ins.defn)[1]
    W = x.W
    n = words_per_lane(k, W)
    d = ops[0]

    def f(w: int) -> int:
        return x.bits_f32(x.load(w))

    def body() -> None:
        if op in ("frowmax", "frowsum"):
            nf = row_n(ins.defn) // 16
            step = 2 if W < 16 else 1

            def comb(a: int, b: int) -> int:
                return (x.bits_f32(x.minmax("max", T.F32, a, b)) if op == "frowmax"
                        else x.fop("FAdd", x.f32, a, b))

            def one(g: int) -> None:
                js = [x.add(x.op("IMul", x.u32, g, x.c(step)), x.c(t)) for t in range(step)] if step > 1 else [g]
                vals = [f(_word(x, ops[1] + q, j)) for j in js for q in range(nf)]
                p = vals[0]
                for v in vals[1:]:
                    p = comb(p, v)
                for m in ((1, 2, 4) if W < 16 else (1, 2, 4, 8)):
                    o = x.bits_f32(x.op("GroupNonUniformShuffle", x.u32, x.c(SCOPE["Subgroup"]), x.f32_bits(p),
                                          x.op("BitwiseXor", x.u32, x.lane, x.c(m))))
                    p = comb(p, o)
                res = [comb(f(_word(x, ops[2], j)), p) for j in js]
                for j, r in zip(js, res, strict=True):
                    x.store(_word(x, d, j), _canon(x, x.f32_bits(r)))

            _for(x, n // step, one)
            return

        def one(j: int) -> None:
            a = f(_word(x, ops[1], j))
            if op == "fexp2":
                nb = x.bits_f32(x.op("BitwiseXor", x.u32, x.load(_word(x, ops[2], j)), x.c(0x80000000)))
                e = x.bits_f32(x.fma_exact(a, x.bits_f32(x.r(ops[3])), nb, T.F32))
                bits = _canon(x, x.f32_bits(x.ext(x.f32, "Exp2", e)))
            elif op == "fmul":
                bits = _canon(x, x.f32_bits(x.fop("FMul", x.f32, a, f(_word(x, ops[2], j)))))
            elif op == "fdiv":
                bits = _canon(x, x.div_exact(a, f(_word(x, ops[2], j))))
            elif op == "fmask":
                e = _elem(x, k, j)
                dj = x.op("ISub", x.u32, x.iand(e, x.c(15)), x.shr(e, 4))
                keep = x.and_(x.op("SLessThanEqual", x.bool_, dj, x.r(ops[2])),
                              x.op("SLessThan", x.bool_, x.iand(e, x.c(15)), x.r(ops[3])))
                bits = x.sel(x.u32, keep, x.load(_word(x, ops[1], j)), x.c(0xFF800000))
            else:  # fcvt: word j of the A fragment = element j's value rounded to its type
                h = x.fbits(a, ins.defn.type)
                bits = x.shl(h, 16) if ins.defn.type is T.BF16 else x.f32_bits(x.h2f(h))
            x.store(_word(x, d, j), bits)

        _for(x, n, one)

    _scoped(x, k, None, body)


HANDLERS = {"fload": _fload, "fstore": _fstore, "fmma": _fmma, "ffill": _felementwise,
            "fscale": _felementwise, "fbias": _felementwise, "fgmma": _fgmma,
            **{op: _facc for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask", "fcvt")}}


def _fwait(x: _Lowering, ins: Instruction) -> None:
    """``mma.wait N`` (spec §8.14): this backend completes an ``mma.group.async`` when it is
    issued, so there is nothing left to wait for."""


HANDLERS["fwait"] = _fwait


def _dispatch(op: str, words: Callable[[_Lowering, Instruction], None]) -> Callable[[_Lowering, Instruction], None]:
    """The handler of ``op``: :mod:`anywave.backends.spirv_coop`'s for a wave-scope instruction of a
    kernel whose wave-scope slots are cooperative matrices (where it has one), else the per-lane
    one above."""
    coop = spirv_coop.HANDLERS.get(op)
    if coop is None:
        return words

    def handler(x: _Lowering, ins: Instruction) -> None:
        wave = any(k is not None and k.shape.scope == "wave" for k in fragment_kinds(ins.defn))
        (coop if wave and getattr(x, "coop", False) else words)(x, ins)

    return handler


HANDLERS = {op: _dispatch(op, h) for op, h in HANDLERS.items()}
