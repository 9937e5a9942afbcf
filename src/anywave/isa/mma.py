"""Fragment kinds of the MMA instructions (docs/spec.md §8.13–§8.14).

A *fragment* is an opaque matrix value held in a thread's **fragment file** ``f0``..``f31``
(separate from the registers and predicates, like predicates are separate from registers).
Every fragment slot of a kernel has one static :class:`FragKind` (shape, role, element type):
the verifier checks that every instruction naming the slot agrees, so a target can give the
slot native registers of the right size and type, and no ordinary instruction can name a
fragment, so the lane layout inside it is never observable.

Shapes:

* ``m16n16k16`` — **wave scope**: one 16x16 tile per wave, distributed over the wave's lanes in
  a target-defined layout. A/B elements are f16 or bf16, C/D f32. Per lane a target needs
  ``256 * element_bytes / (4 * W)`` 32-bit registers for it (f32 accumulator: 8 at W = 32, 32
  at W = 8; a bf16 A or B fragment: 4 at W = 32); these live outside the kernel's
  ``.registers`` count, so the count stays static and independent of W.
* ``m4n4k4`` — **thread scope** (the reference toolchain's shape): each thread holds its own
  4x4 f32 A, B and C/D tiles (16 values each).
"""

from __future__ import annotations

from dataclasses import dataclass

from anywave.isa.types import ScalarType

T = ScalarType

#: fragment slots per thread (f0..f31)
MAX_FRAGMENTS = 32

#: N of the wave-group MMA ``mma.group.m16n{N}k16`` (spec §8.14): the accumulator strip 16 x N
GROUP_N = (64, 128, 256)
#: N of the accumulator row operations ``mma.rowmax/rowsum.n{N}`` (a strip of N/16 accumulators)
ROW_N = (16, 64, 128)
#: waves that execute one ``mma.group`` together (consecutive wave ids 4g .. 4g + 3)
GROUP_WAVES = 4
#: alignment (bytes) of the B tile's offset and panel stride of ``mma.group`` (one swizzle atom:
#: 8 rows of 128 bytes)
GROUP_ALIGN = 1024
#: bytes of one 16-deep panel of B (16 rows of 128 bytes): the least panel stride
GROUP_PANEL = 2048


def group_b_offset(k, n, panel_stride):  # noqa: ANN001, ANN201 - ints or NumPy arrays
    """Byte offset of element (k, n) of the B tile of ``mma.group`` from its base (spec §8.14,
    the *swizzled panel layout*): panels of 64 columns ``panel_stride`` bytes apart; row k of a
    panel at ``128 k``; its 16-byte chunk ``c = (n mod 64) div 8`` stored at chunk
    ``c xor (k mod 8)``; element ``n mod 8`` of the chunk at ``2 (n mod 8)``. This is PTX's
    128-byte swizzle of an MN-major wgmma operand (descriptor: leading byte offset =
    ``panel_stride``, stride byte offset = 1024), so a target can read it with no copy."""
    return (n // 64) * panel_stride + 128 * k + 16 * (((n % 64) // 8) ^ (k % 8)) + 2 * (n % 8)


def group_bt_offset(k, n, base_mod):  # noqa: ANN001, ANN201 - ints or NumPy arrays
    """Byte offset of element (k, n) of the B tile of ``mma.group.bt`` from the 1024-byte aligned
    base below its address L, with ``base_mod = L mod 1024`` (0, 32, 64 or 96; spec §8.14, the
    *swizzled row layout*): B's transpose is stored as rows of 128 bytes, row n at ``128 n``; the
    16 k of the tile are elements ``c = base_mod / 2 + k`` of the row, its 16-byte chunk
    ``c div 8`` stored at chunk ``(c div 8) xor (n mod 8)``. This is PTX's 128-byte swizzle of a
    K-major wgmma operand (stride byte offset 1024; a step of 16 k adds 32 bytes to L)."""
    c = base_mod // 2 + k
    return 128 * n + 16 * ((c // 8) ^ (n % 8)) + 2 * (c % 8)


def group_bt(defn) -> bool:  # noqa: ANN001 - an InstrDef
    """Whether an ``mma.group`` record reads B transposed (``mma.group.bt``)."""
    return defn.op == "fgmma" and "bt" in defn.variant.split(".")


def row_n(defn) -> int:  # noqa: ANN001 - an InstrDef
    """N of an ``mma.rowmax``/``mma.rowsum`` record (its variant is ``n{N}.m16n16k16``)."""
    return int(defn.variant.split(".")[0][1:])


def group_async(defn) -> bool:  # noqa: ANN001 - an InstrDef
    """Whether an ``mma.group`` record is the asynchronous form (``mma.group.async``)."""
    return defn.op == "fgmma" and "async" in defn.variant.split(".")


def group_n(defn) -> int:  # noqa: ANN001 - an InstrDef
    """N of an ``mma.group`` record (its variant is ``n{N}.m16n16k16``)."""
    return int(defn.variant.split(".")[0][1:])


def operand_slots(defn, operands) -> list[tuple[int, int, FragKind]]:  # noqa: ANN001
    """(operand index, slot, kind) of every fragment slot an instruction names, the accumulator
    strip of ``mma.group`` (``fD .. fD + N/16 - 1``) expanded; operands that are not slot
    numbers (unchecked input) are skipped."""
    out = []
    for n, (k, v) in enumerate(zip(fragment_kinds(defn), operands, strict=True)):
        if k is None or not isinstance(v, int) or isinstance(v, bool):
            continue
        count = (group_n(defn) // 16 if defn.op == "fgmma" and n == 0
                 else row_n(defn) // 16 if defn.op in ("frowmax", "frowsum") and n == 1 else 1)
        out.extend((n, v + i, k) for i in range(count))
    return out


#: values of the MMA query special registers on every target (spec §3.3)
MMA_SREG_VALUES = {"MMA_SUPPORTED": 1, "MMA_M": 4, "MMA_N": 4, "MMA_K": 4}


@dataclass(frozen=True)
class Shape:
    """An MMA shape: D (m x n) = A (m x k) · B (k x n) + C (m x n)."""

    name: str
    m: int
    n: int
    k: int
    scope: str  # "wave" or "thread"

    def dims(self, role: str) -> tuple[int, int]:
        """(rows, cols) of a fragment of this role."""
        return {"a": (self.m, self.k), "b": (self.k, self.n), "c": (self.m, self.n)}[role]


SHAPES: dict[str, Shape] = {
    "m16n16k16": Shape("m16n16k16", 16, 16, 16, "wave"),
    "m4n4k4": Shape("m4n4k4", 4, 4, 4, "thread"),
}

#: A/B element types per shape (C/D are always f32)
INPUT_TYPES: dict[str, tuple[ScalarType, ...]] = {"m16n16k16": (T.F16, T.BF16), "m4n4k4": (T.F32,)}


@dataclass(frozen=True)
class FragKind:
    """The static type of a fragment slot."""

    shape: Shape
    role: str  # "a", "b" or "c" (C and D share a kind: the accumulator)
    elem: ScalarType

    @property
    def rows(self) -> int:
        return self.shape.dims(self.role)[0]

    @property
    def cols(self) -> int:
        return self.shape.dims(self.role)[1]

    @property
    def elems(self) -> int:
        return self.rows * self.cols

    @property
    def spelling(self) -> str:
        name = {"a": "A", "b": "B", "c": "accumulator"}[self.role]
        return f"{self.shape.name} {name} of {self.elem.spelling}"

    def lane_registers(self, W: int) -> int:
        """32-bit registers per lane a target needs for it (wave scope: spread over W lanes)."""
        nbytes = self.elems * self.elem.nbytes
        return -(-nbytes // (4 * W)) if self.shape.scope == "wave" else -(-nbytes // 4)


def fragment_kinds(defn) -> tuple[FragKind | None, ...]:  # noqa: ANN001 - an InstrDef
    """Per operand of an MMA fragment instruction, the fragment kind it names (None for
    operands that are not fragments). Driven by the record's ``op`` and ``variant``."""

    op = defn.op
    parts = defn.variant.split(".")
    shape = SHAPES[parts[-1]] if parts and parts[-1] in SHAPES else None
    if shape is None:
        return tuple(None for _ in defn.operands)
    acc = FragKind(shape, "c", T.F32)
    if op == "fload":
        role = parts[0]
        kinds: list[FragKind | None] = [FragKind(shape, role, defn.type) if role != "c" else acc]
    elif op == "fmma":
        kinds = [acc, FragKind(shape, "a", defn.src_type), FragKind(shape, "b", defn.src_type), acc]
    elif op == "fgmma":  # the accumulator strip's first slot (see operand_slots), then A
        kinds = [acc, FragKind(shape, "a", defn.src_type)]
    elif op == "fstore":
        kinds = [None, acc]
    elif op == "fcvt":
        kinds = [FragKind(shape, "a", defn.type), acc]
    elif op in ("frowmax", "frowsum", "fexp2", "fmul", "fdiv"):
        kinds = [acc, acc, acc]
    else:  # ffill, fscale, fbias, fmask: accumulator element-wise operations
        kinds = [acc, acc]
    kinds += [None] * (len(defn.operands) - len(kinds))
    return tuple(k if o.spelling in ("fd", "fs") else None
                 for k, o in zip(kinds, defn.operands, strict=True))
