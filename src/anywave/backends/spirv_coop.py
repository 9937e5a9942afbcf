"""Wave-scope MMA fragments (docs/spec.md §8.14) as cooperative matrices
(``SPV_KHR_cooperative_matrix``) for :mod:`anywave.backends.spirv`, on a device that offers
``VK_KHR_cooperative_matrix`` 16 x 16 x 16 subgroup matrices of the fragment's element type
accumulating in f32 (NVIDIA's driver: f16 and bf16 at subgroup size 32), so that ``mma.mma`` and
``mma.group`` run on the device's matrix unit instead of :mod:`anywave.backends.spirv_mma`'s
per-lane fma loops.

The fragment layout is not observable (spec §8.14), so a slot is simply one ``Function`` variable
of a cooperative-matrix type (use A, B or accumulator; component f16, bf16 or f32), zero at start,
and the driver picks the distribution over the lanes. Instruction by instruction:

* ``mma.load`` / ``mma.store``: ``OpCooperativeMatrixLoadKHR`` / ``StoreKHR``, row-major, from
  the 32-bit word arrays that hold device and local memory (spec: tile addresses and row strides
  are multiples of 16 bytes, so the start is a word and the stride ``rS / 4`` words);
* ``mma.mma``: ``OpCooperativeMatrixMulAddKHR`` -- class ``bounded`` (§8.13's bound: the
  unit's order and rounding are the driver's, as on the CUDA target);
* ``mma.fill``: a splat (``OpCompositeConstruct`` of one scalar);
* element-wise operations that do not depend on an element's position (``scale``, ``exp2``,
  ``mul``, ``div``): a loop over the invocation's own components (``OpCooperativeMatrixLengthKHR``;
  matrices of one type share their distribution), with the arithmetic of the per-lane lowering
  (the exact fma and division, NaN canonical);
* operations that need an element's row or column (``bias``, ``mask``, ``rowmax``, ``rowsum``,
  ``cvt.a``): the matrix is stored to the wave's **staging area** (:data:`SCRATCH_BYTES` of
  local memory per wave, after the kernel's own; ``SubgroupId`` picks the wave's), the lanes work
  on it element by element (element ``l + W*t`` by lane l) between subgroup barriers, and the
  result is loaded back;
* ``mma.group`` (and ``.bt``): per 16-column step, the 16 x 16 B tile is copied out of the
  swizzled layout into the staging area, 16 bytes (one swizzle chunk) per lane, then loaded as a
  B matrix (row-major; for ``.bt`` column-major, the tile being stored transposed) and multiplied
  in. The four waves of a group each do their own copy (no workgroup barrier is allowed there).
  ``mma.group.async`` completes at its issue.

Results are the spec's ``bounded`` class for ``mma``/``mma.group`` and the emulator's bits for
every other instruction (the same arithmetic as :mod:`anywave.backends.spirv_mma`; ``rowsum`` sums
in its own order, within its bound). A checked build, or a device whose local memory is
unguarded, keeps the per-lane lowering (its accesses are each guarded).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from anywave.backends.lowering.fragments import fragment_slots
from anywave.backends.spirv_asm import COOP_LAYOUT, SCOPE, SEM
from anywave.binary.module import Instruction, LocalAddr
from anywave.isa import semantics
from anywave.isa.mma import FragKind, fragment_kinds, group_bt, group_n, row_n
from anywave.isa.types import ScalarType as T

_Lowering = Any  # anywave.backends.spirv._Lowering (no import cycle)
#: words of a wave's staging area: one 16 x 16 f32 tile
SCRATCH_WORDS = 256
SCRATCH_BYTES = 4 * SCRATCH_WORDS
ROW_MAJOR, COL_MAJOR = COOP_LAYOUT["RowMajorKHR"], COOP_LAYOUT["ColumnMajorKHR"]
F32_NAN = semantics.CANONICAL_NAN[T.F32]


# helpers of both fragment lowerings (this one and anywave.backends.spirv_mma's per-lane one)

def _canon(x: _Lowering, bits: int) -> int:
    return x.sel(x.u32, x._bits_nan(bits, False), x.c(F32_NAN), bits)


def _sync(x: _Lowering) -> None:
    sg = x.c(SCOPE["Subgroup"])
    x.b.emit("ControlBarrier", sg, sg, x.sem(SEM["AcquireRelease"] | SEM["WorkgroupMemory"]))


def _scoped(x: _Lowering, k: FragKind, addr: Any, body: Callable[[], None]) -> None:
    """Run ``body``: for wave scope under a selection on ``x.ex`` (between subgroup barriers when
    it touches local memory); thread-scope instructions are already under their condition."""
    wave = k.shape.scope == "wave"
    sync = wave and isinstance(addr, LocalAddr)
    if sync:
        _sync(x)
    with x.when(x.ex) if wave else nullcontext():
        body()
    if sync:
        _sync(x)



def usable(x: _Lowering) -> bool:
    """Whether the kernel's wave-scope fragments are lowered to cooperative matrices: the device
    offers them at this W for every wave-scope element type the kernel uses, the build is not
    checked, and local memory needs no guards."""
    f = x.f
    if not f.cooperative_matrix or x.W != f.coop_wave_width or x.W < 16 or x.checked or f.guard_local:
        return False
    wave = [k for k in fragment_slots(x.m, x.k.code).values() if k.shape.scope == "wave"]
    return bool(wave) and all(k.role == "c" or k.elem.spelling in f.cooperative_matrix for k in wave)


def is_coop(x: _Lowering, k: FragKind | None) -> bool:
    return bool(getattr(x, "coop", False)) and k is not None and k.shape.scope == "wave"


def comp_type(x: _Lowering, elem: T) -> int:
    if elem is T.F32:
        return x.f32
    return x.b.t_bfloat16() if elem is T.BF16 else x.b.t_float(16)


def coop_type(x: _Lowering, k: FragKind) -> int:
    use = {"a": "MatrixAKHR", "b": "MatrixBKHR", "c": "MatrixAccumulatorKHR"}[k.role]
    return x.b.t_coop(comp_type(x, k.elem), use, k.rows, k.cols)


def declare_slot(x: _Lowering, k: FragKind) -> int:
    """The Function variable of a wave-scope slot, all elements +0.0."""
    t = coop_type(x, k)
    return x.var(t, x.b.const_null(t))


def _acc(shape: Any) -> FragKind:
    return FragKind(shape, "c", T.F32)


def _get(x: _Lowering, slot: int) -> int:
    var, k = x.frags[slot]
    return x.load(var, coop_type(x, k))


def _set(x: _Lowering, slot: int, v: int) -> None:
    x.store(x.frags[slot][0], v)


def _scratch_base(x: _Lowering) -> int:
    """Index of this wave's first staging word (declares the area on first use: one
    ``Workgroup`` array of ``ceil(threads / W) * SCRATCH_WORDS`` words, sized by the
    workgroup-size specialization constant)."""
    b = x.b
    if x.scratch is None:
        nw = b.id()  # (x + W - 1) / W
        plus = b.id()
        b.put("global", "SpecConstantOp", x.u32, plus, 128, x.spec_wgx, x.c(x.W - 1))  # IAdd
        b.put("global", "SpecConstantOp", x.u32, nw, 134, plus, x.c(x.W))  # UDiv
        words = b.id()
        b.put("global", "SpecConstantOp", x.u32, words, 132, nw, x.c(SCRATCH_WORDS))  # IMul
        arr = b.id()
        b.put("global", "TypeArray", arr, x.u32, words)
        x.scratch = b.global_var(b.t_ptr("Workgroup", arr), "Workgroup")
        x.interface.append(x.scratch)
    return x.op("IMul", x.u32, x.sid, x.c(SCRATCH_WORDS))


def _sword(x: _Lowering, idx: int) -> int:
    """Pointer to staging word ``idx`` (a u32 id)."""
    return x.op("AccessChain", x.b.t_ptr("Workgroup", x.u32), x.scratch, idx)


def _for_ids(x: _Lowering, n: int, body: Callable[[int], None]) -> None:
    """``for (j = 0; j < n; ++j) body(j)`` with ``n`` a u32 id, marked ``Unroll``: n is the
    driver's constant (``OpCooperativeMatrixLengthKHR``), and unrolled, each component index is a
    constant, so the matrix stays in registers (a dynamic index would put it in memory)."""
    jv = x.var(x.u32)
    x.store(jv, x.c(0))
    merge, cont = x.loop_open(1)
    j = x.load(jv)
    x.loop_exit_unless(x.op("ULessThan", x.bool_, j, n), merge)
    body(j)
    x.store(jv, x.add(j, x.c(1)))
    x.loop_close(merge, cont)


def _components(x: _Lowering, k: FragKind, body: Callable[[Callable[[int], int]], None]) -> None:
    """Run ``body(ptr)`` for each component this invocation holds of matrices of kind k, ``ptr(slot)``
    giving a pointer to that component of slot ``slot``."""
    t = coop_type(x, k)
    n = x.op("CooperativeMatrixLengthKHR", x.u32, t)
    pt = x.b.t_ptr("Function", comp_type(x, k.elem))

    def one(j: int) -> None:
        body(lambda slot: x.op("AccessChain", pt, x.frags[slot][0], j))

    _for_ids(x, n, one)


def _lane_elems(x: _Lowering, n: int, body: Callable[[int], None]) -> None:
    """``body(e)`` for the tile elements ``e = lane + W*t < n`` this lane handles (unrolled)."""
    for t in range(-(-n // x.W)):
        e = x.add(x.lane, x.c(x.W * t))
        if x.W * (t + 1) > n:
            with x.when(x.op("ULessThan", x.bool_, e, x.c(n))):
                body(e)
        else:
            body(e)


def _spill(x: _Lowering, slot: int) -> int:
    """Store accumulator ``slot`` to the wave's staging area (row-major, 16 words a row) and make
    it visible to the wave; returns the area's base word index."""
    base = _scratch_base(x)
    _sync(x)
    x.b.emit("CooperativeMatrixStoreKHR", _sword(x, base), _get(x, slot), x.c(ROW_MAJOR), x.c(16),
             *x.memory_operands())
    _sync(x)
    return base


def _fill_from_scratch(x: _Lowering, slot: int, base: int, stride_words: int, layout: int = ROW_MAJOR) -> None:
    _sync(x)
    k = x.frags[slot][1]
    _set(x, slot, x.op("CooperativeMatrixLoadKHR", coop_type(x, k), _sword(x, base), x.c(layout),
                       x.c(stride_words), *x.memory_operands()))


def _on_elements(x: _Lowering, src: int, dst: int, fn: Callable[[int, int, int], int]) -> None:
    """``dst[i][j] = fn(bits, i, j)`` over accumulator ``src`` through the staging area."""
    base = _spill(x, src)

    def one(e: int) -> None:
        p = _sword(x, x.add(base, e))
        x.store(p, fn(x.load(p), x.shr(e, 4), x.iand(e, x.c(15))))

    _lane_elems(x, 256, one)
    _fill_from_scratch(x, dst, base, 16)


# --------------------------------------------------------------------------- the instructions

def fload(x: _Lowering, ins: Instruction) -> None:
    f, addr, rs = ins.operands
    k = fragment_kinds(ins.defn)[0]

    def body() -> None:
        ptr = x.word_ptr(addr, x.byte_offset(addr.reg, addr.offset))
        _set(x, f, x.op("CooperativeMatrixLoadKHR", coop_type(x, k), ptr, x.c(ROW_MAJOR), x.shr(x.r(rs), 2),
                        *x.memory_operands()))

    _scoped(x, k, addr, body)


def fstore(x: _Lowering, ins: Instruction) -> None:
    addr, f, rs = ins.operands
    k = fragment_kinds(ins.defn)[1]

    def body() -> None:
        ptr = x.word_ptr(addr, x.byte_offset(addr.reg, addr.offset))
        x.b.emit("CooperativeMatrixStoreKHR", ptr, _get(x, f), x.c(ROW_MAJOR), x.shr(x.r(rs), 2),
                 *x.memory_operands())

    _scoped(x, k, addr, body)


def fmma(x: _Lowering, ins: Instruction) -> None:
    d, a, b, c = ins.operands
    k = fragment_kinds(ins.defn)[0]

    def body() -> None:
        _set(x, d, x.op("CooperativeMatrixMulAddKHR", coop_type(x, k), _get(x, a), _get(x, b), _get(x, c)))

    _scoped(x, k, None, body)


def fgmma(x: _Lowering, ins: Instruction) -> None:
    """``mma.group[.bt]``: per 16 columns jj, the B tile copied from the swizzled layout into the
    staging area (one 16-byte chunk per lane: chunk c is row c / 2, half c % 2), loaded, multiplied
    into slot D + jj."""
    d, a, addr, rp = ins.operands
    ka = fragment_kinds(ins.defn)[1]
    kb = FragKind(ka.shape, "b", ka.elem)
    bt = group_bt(ins.defn)
    nj = group_n(ins.defn) // 16

    def body() -> None:
        base = x.byte_offset(addr.reg, addr.offset)
        pstride = x.r(rp)
        if bt:  # the swizzled row layout: (L mod 1024) / 2 is the first k of the step
            bmod = x.iand(base, x.c(1023))
            base = x.op("ISub", x.u32, base, bmod)
            ch0 = x.shr(bmod, 4)  # its chunk: k0 / 8
        sbase = _scratch_base(x)
        av = _get(x, a)
        tb = coop_type(x, kb)
        tacc = coop_type(x, _acc(ka.shape))
        for jj in range(nj):
            _sync(x)

            def chunk(c: int, jj: int = jj) -> None:
                r, h = x.shr(c, 1), x.iand(c, x.c(1))
                if bt:  # row n = 16jj + r of B's transpose, k chunk ch0 + h
                    n = x.add(r, x.c(16 * jj))
                    swz = x.op("BitwiseXor", x.u32, x.add(ch0, h), x.iand(n, x.c(7)))
                    src = x.add(base, x.add(x.shl(n, 7), x.shl(swz, 4)))
                else:  # row k = r, columns n0 = 16jj + 8h ... + 7
                    n0 = x.add(x.c(16 * jj), x.shl(h, 3))
                    swz = x.op("BitwiseXor", x.u32, x.shr(x.iand(n0, x.c(63)), 3), x.iand(r, x.c(7)))
                    src = x.add(base, x.add(x.op("IMul", x.u32, x.shr(n0, 6), pstride),
                                            x.add(x.shl(r, 7), x.shl(swz, 4))))
                dst = x.add(sbase, x.add(x.shl(r, 3), x.shl(h, 2)))
                for w in range(4):
                    x.store(_sword(x, x.add(dst, x.c(w))), x.load(x.word_ptr(addr, src, w)))

            _lane_elems(x, 32, chunk)
            _sync(x)
            bv = x.op("CooperativeMatrixLoadKHR", tb, _sword(x, sbase), x.c(COL_MAJOR if bt else ROW_MAJOR), x.c(8),
                      *x.memory_operands())
            _set(x, d + jj, x.op("CooperativeMatrixMulAddKHR", tacc, av, bv, _get(x, d + jj)))

    _scoped(x, ka, addr, body)


def felementwise(x: _Lowering, ins: Instruction) -> None:
    """``mma.fill``, ``mma.scale``, ``mma.bias``."""
    op = ins.defn.op
    k = fragment_kinds(ins.defn)[0]
    d = ins.operands[0]

    def body() -> None:
        if op == "ffill":
            v = x.bits_f32(x.r(ins.operands[1]))
            _set(x, d, x.op("CompositeConstruct", coop_type(x, k), v))
            return
        src = ins.operands[1]
        if op == "fscale":
            sv = x.bits_f32(x.r(ins.operands[2]))

            def one(ptr: Callable[[int], int]) -> None:
                p = x.fop("FMul", x.f32, x.load(ptr(src), x.f32), sv)
                x.store(ptr(d), x.bits_f32(_canon(x, x.f32_bits(p))))

            _components(x, k, one)
            return
        addr = ins.operands[2]  # fbias: d[i][j] = s[i][j] + bias[j]
        bbase = x.byte_offset(addr.reg, addr.offset)

        def add_bias(bits: int, i: int, j: int) -> int:
            bias = x.load(x.word_ptr(addr, x.add(bbase, x.shl(j, 2))))
            return _canon(x, x.f32_bits(x.fop("FAdd", x.f32, x.bits_f32(bits), x.bits_f32(bias))))

        _on_elements(x, src, d, add_bias)

    _scoped(x, k, None, body)


def facc(x: _Lowering, ins: Instruction) -> None:
    """The accumulator operations (spec §8.14)."""
    op = ins.defn.op
    ops = ins.operands
    k = _acc(fragment_kinds(ins.defn)[1].shape)
    d = ops[0]

    def f(p: int) -> int:
        return x.load(p, x.f32)

    def body() -> None:
        if op in ("fexp2", "fmul", "fdiv"):
            def one(ptr: Callable[[int], int]) -> None:
                a = f(ptr(ops[1]))
                if op == "fexp2":
                    nb = x.bits_f32(x.op("BitwiseXor", x.u32, x.f32_bits(f(ptr(ops[2]))), x.c(0x80000000)))
                    e = x.bits_f32(x.fma_exact(a, x.bits_f32(x.r(ops[3])), nb, T.F32))
                    bits = _canon(x, x.f32_bits(x.ext(x.f32, "Exp2", e)))
                elif op == "fmul":
                    bits = _canon(x, x.f32_bits(x.fop("FMul", x.f32, a, f(ptr(ops[2])))))
                else:
                    bits = _canon(x, x.div_exact(a, f(ptr(ops[2]))))
                x.store(ptr(d), x.bits_f32(bits))

            _components(x, k, one)
        elif op == "fmask":
            def keep(bits: int, i: int, j: int) -> int:
                ok = x.and_(x.op("SLessThanEqual", x.bool_, x.op("ISub", x.u32, j, i), x.r(ops[2])),
                            x.op("SLessThan", x.bool_, j, x.r(ops[3])))
                return x.sel(x.u32, ok, bits, x.c(0xFF800000))

            _on_elements(x, ops[1], d, keep)
        elif op == "fcvt":
            _cvt_a(x, d, ops[1], ins.defn.type)
        else:
            _row_reduce(x, ins)

    _scoped(x, k, None, body)


def _cvt_a(x: _Lowering, d: int, src: int, t: T) -> None:
    """A fragment ``d`` = accumulator ``src`` rounded to t: each lane rounds element pairs (2p,
    2p + 1) of a row, packs them in one word, and the packed tile (8 words a row) is loaded as A."""
    base = _spill(x, src)
    packed: list[tuple[int, int]] = []

    def one(p: int) -> None:
        lo = x.load(_sword(x, x.add(base, x.shl(p, 1))))
        hi = x.load(_sword(x, x.add(base, x.add(x.shl(p, 1), x.c(1)))))
        w = x.ior(x.fbits(x.bits_f32(lo), t), x.shl(x.fbits(x.bits_f32(hi), t), 16))
        v = x.var(x.u32)
        x.store(v, w)
        packed.append((p, v))

    _lane_elems(x, 128, one)
    _sync(x)  # every lane has read its pairs before any packed word is written over them
    for p, v in packed:
        if x.W * (len(packed)) > 128:
            with x.when(x.op("ULessThan", x.bool_, p, x.c(128))):
                x.store(_sword(x, x.add(base, p)), x.load(v))
        else:
            x.store(_sword(x, x.add(base, p)), x.load(v))
    _fill_from_scratch(x, d, base, 8)


def _row_reduce(x: _Lowering, ins: Instruction) -> None:
    """``rowmax``/``rowsum``: lane i < 16 folds row i of each strip tile in turn (column order),
    then every element of C takes its row's value by a shuffle from lane i."""
    op = ins.defn.op
    ops = ins.operands
    nf = row_n(ins.defn) // 16

    def comb(a: int, b: int) -> int:
        return (x.bits_f32(x.minmax("max", T.F32, a, b)) if op == "frowmax" else x.fop("FAdd", x.f32, a, b))

    acc = x.var(x.u32)
    row_lane = x.op("ULessThan", x.bool_, x.lane, x.c(16))
    for q in range(nf):
        base = _spill(x, ops[1] + q)
        with x.when(row_lane):
            row = x.add(base, x.shl(x.lane, 4))
            vals = [x.bits_f32(x.load(_sword(x, x.add(row, x.c(j))))) for j in range(16)]
            p = vals[0] if q == 0 else comb(x.bits_f32(x.load(acc)), vals[0])
            for v in vals[1:]:
                p = comb(p, v)
            x.store(acc, x.f32_bits(p))
    total = x.load(acc)
    base = _spill(x, ops[2])

    def one(e: int) -> None:
        pr = x.op("GroupNonUniformShuffle", x.u32, x.c(SCOPE["Subgroup"]), total, x.shr(e, 4))
        ptr = _sword(x, x.add(base, e))
        x.store(ptr, _canon(x, x.f32_bits(comb(x.bits_f32(x.load(ptr)), x.bits_f32(pr)))))

    _lane_elems(x, 256, one)
    _fill_from_scratch(x, ops[0], base, 16)


HANDLERS = {"fload": fload, "fstore": fstore, "fmma": fmma, "ffill": felementwise, "fscale": felementwise,
            "fbias": felementwise, "fgmma": fgmma,
            **{op: facc for op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv", "fmask", "fcvt")}}
