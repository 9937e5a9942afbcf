"""Small helpers that write `.wave` kernel text and pick input values for the case generators."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import numpy as np

from anywave.conformance import refsem

#: NumPy dtype of a buffer holding raw bits of the given width
BITS_DTYPE = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
#: buffer element type spelled in `.arg` for a raw-bits buffer of the given width
BITS_ARG = {8: "u8", 16: "u16", 32: "u32", 64: "u64"}
#: fill value of output buffers, so elements a kernel must not write are checked too
SENTINEL = {8: 0xCD, 16: 0xCDCD, 32: 0xCDCDCDCD, 64: 0xCDCDCDCDCDCDCDCD}


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded from the case name: inputs never change between runs."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def kernel_text(
    name: str,
    args: Sequence[tuple[str, str, str, str]],
    body: Iterable[str],
    *,
    registers: int = 32,
    local_memory: int = 0,
    workgroup_size: tuple[int, int, int] | None = None,
    capabilities: Sequence[str] = (),
    funcs: str = "",
) -> str:
    """`.wave` text of one kernel.

    Args:
        args: (name, "buffer"|"scalar", type, access) in ABI order; access is ignored for
            scalars.
        body: instruction lines (indentation added here).
        funcs: `.func` blocks appended after the kernel.
    """
    lines = [f".kernel {name}"]
    for aname, kind, t, access in args:
        lines.append(f".arg {aname} {kind} {t}" + (f" {access}" if kind == "buffer" else ""))
    lines.append(f".registers {registers}")
    if local_memory:
        lines.append(f".local_memory {local_memory}")
    if workgroup_size is not None:
        lines.append(".workgroup_size {}, {}, {}".format(*workgroup_size))
    if capabilities:
        lines.append(".capabilities " + ", ".join(capabilities))
    for ins in body:
        ins = ins.strip()
        if ins:
            lines.append("    " + ins)
    lines.append(".end")
    text = "\n".join(lines) + "\n"
    if funcs:
        text += funcs.strip("\n") + "\n"
    return text


def guard_prologue(n: int) -> list[str]:
    """r0 = global id x; threads with r0 >= n halt; r2/r3/r4 = r0 * 2/4/8 (byte offsets)."""
    return [
        "mov.sr r0, sr_global_id_x",
        f"movi.u32 r1, {n}",
        "setp.ge.u32 p7, r0, r1",
        "@p7 halt",
        "movi.u32 r1, 1",
        "shl.b32 r2, r0, r1",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "movi.u32 r1, 3",
        "shl.b32 r4, r0, r1",
    ]


#: byte-offset register for an element width, as set up by guard_prologue
OFFSET_REG = {8: "r0", 16: "r2", 32: "r3", 64: "r4"}


def reg(n: int, bits: int) -> str:
    """Register operand text holding a value of the given width starting at rN."""
    return f"r{n}:r{n + 1}" if bits == 64 else f"r{n}"


def load_line(dst: int, buf: str, bits: int) -> str:
    off = OFFSET_REG[bits]
    if bits == 16:
        return f"ld.device.u16 r{dst}, {buf}[{off}]"
    return f"ld.device.b{bits} {reg(dst, bits)}, {buf}[{off}]"


def store_line(buf: str, src: int, bits: int) -> str:
    return f"st.device.b{bits} {buf}[{OFFSET_REG[bits]}], {reg(src, bits)}"


def launch_1d(n: int, wg: int = 64) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, workgroup) covering n threads with workgroups of wg threads."""
    return ((n + wg - 1) // wg, 1, 1), (wg, 1, 1)


def out_buffer(n: int, bits: int) -> np.ndarray:
    return np.full(n, SENTINEL[bits], dtype=BITS_DTYPE[bits])


# ----------------------------------------------------------------------------- edge values


def int_edges(bits: int) -> list[int]:
    m = (1 << bits) - 1
    h = 1 << (bits - 1)
    vals = [
        0,
        1,
        2,
        3,
        7,
        m,
        m - 1,
        m - 6,
        h - 1,
        h,
        h + 1,
        31,
        32,
        33,
        63,
        64,
        65,
        0xFFFF,
        0x10000,
        0x12345678,
        0x9ABCDEF0,
    ]
    if bits == 64:
        vals += [0xFFFFFFFF, 0x100000000, 0x123456789ABCDEF0, 0xFEDCBA9876543210, 0x80000000]
    return sorted({v & m for v in vals})


SHIFT_COUNTS = [0, 1, 5, 15, 16, 31, 32, 33, 48, 63, 64, 65, 100, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def float_edges(fmt: refsem.FloatFormat) -> list[int]:
    """Zeros, ±1, ties, denormal and normal extremes, infinities, quiet and signalling NaNs."""
    sb = fmt.sign_bit
    one = fmt.from_float(1.0)
    maxn = fmt.inf - 1
    vals = [
        0,
        sb,
        one,
        one | sb,
        fmt.from_float(1.5),
        fmt.from_float(2.5),
        fmt.from_float(-0.75),
        fmt.from_float(3.0),
        fmt.from_float(0.1),
        one + 1,
        1,
        sb | 1,
        (1 << fmt.mbits) - 1,
        1 << fmt.mbits,
        sb | (1 << fmt.mbits),
        maxn,
        sb | maxn,
        fmt.inf,
        sb | fmt.inf,
        fmt.canonical_nan,
        fmt.inf | 1,
        sb | fmt.canonical_nan | 3,
    ]
    return vals


def float_crafted_pairs(fmt: refsem.FloatFormat) -> list[tuple[int, int]]:
    """Pairs whose sums/products land exactly on or next to rounding ties and range limits."""
    one = fmt.from_float(1.0)
    half_ulp = fmt.round(0, refsem.Fraction(1, 2 ** (fmt.mbits + 1)))
    three_half = fmt.round(0, refsem.Fraction(3, 2 ** (fmt.mbits + 1)))
    maxn = fmt.inf - 1
    max_half_ulp = fmt.round(0, refsem.Fraction(2) ** (fmt.emax - fmt.mbits - 1))
    half = fmt.from_float(0.5)
    return [
        (one, half_ulp),
        (one, three_half),
        (one + 1, half_ulp),
        (one | fmt.sign_bit, half_ulp),
        (maxn, max_half_ulp),
        (maxn, maxn),
        (1 << fmt.mbits, half),
        (1, half),
        (3, half),
        (1 << fmt.mbits, (1 << fmt.mbits) | fmt.sign_bit),
        (fmt.from_float(3.0), fmt.from_float(7.0)),
        (1 << fmt.mbits, 1 | fmt.sign_bit),
    ]


def random_float_bits(rng: np.random.Generator, fmt: refsem.FloatFormat, n: int) -> list[int]:
    """Random finite values of moderate magnitude, mixed with raw random bit patterns."""
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append(int(rng.integers(0, 1 << fmt.bits, dtype=np.uint64)))
        else:
            x = float(rng.standard_normal() * 2.0 ** int(rng.integers(-8, 9)))
            out.append(fmt.from_float(x))
    return out
