"""Launch-level behaviour: scalar arguments of every ABI type from Python / NumPy / ml_dtypes
values (exact conversion, clear errors) and the loop-iteration bound."""

from __future__ import annotations

import signal
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import EmulationError, emulate
from anywave.errors import WaveError
from test_emu_support import FORMATS, round_fraction

# one kernel per scalar type: stores ldarg's word(s) into out
_KERNEL = """
.kernel k
.arg v scalar {t}
.arg out buffer u32 write
.registers 4
    movi.b32 r0, 0
    ldarg.{w} r1{pair}, v
    st.device.{w} out[r0], r1{pair}
.end
"""


def word(t: str, value) -> int:
    wide = t in ("u64", "i64", "f64")
    m = assemble(_KERNEL.format(t=t, w="b64" if wide else "b32", pair=":r2" if wide else ""), "s.wave")
    out = np.zeros(2, np.uint32)
    emulate(m, "k", args={"v": value, "out": out})
    return int(out.view(np.uint64)[0]) if wide else int(out[0])


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits_of(x: float) -> int:
    """bf16 bits of a value exactly representable in bf16 (the top half of its f32 bits)."""
    b = f32_bits(x)
    assert b & 0xFFFF == 0
    return b >> 16


@pytest.mark.parametrize("t,value,expected", [
    ("u32", np.uint8(200), 200), ("u32", np.uint32(0xFFFFFFFF), 0xFFFFFFFF),
    ("i32", np.int16(-5), 0xFFFFFFFB), ("i32", ml_dtypes.int4(-3), 0xFFFFFFFD),
    ("u64", np.uint64(2**64 - 1), 2**64 - 1), ("i64", np.int64(-2), 2**64 - 2),
    ("u32", ml_dtypes.uint4(9), 9),
])
def test_integer_scalars_from_numpy_and_ml_dtypes(t, value, expected):
    assert word(t, value) == expected


def test_float_scalars_of_the_same_type_pass_bit_for_bit():
    assert word("bf16", ml_dtypes.bfloat16(1.5)) == 0x3FC0
    assert word("bf16", ml_dtypes.bfloat16(-0.0)) == 0x8000
    assert word("f16", np.float16(-65504.0)) == 0xFBFF
    assert word("f16", np.float16(2.0 ** -24)) == 0x0001
    assert word("f32", np.float32(-0.0)) == 0x80000000
    nan_payload = np.array([0x7FC00123], np.uint32).view(np.float32)[0]
    assert word("f32", nan_payload) == 0x7FC00123
    assert word("f64", np.float64(0.1)) == struct.unpack("<Q", struct.pack("<d", 0.1))[0]
    bf_nan = np.array([0xFFC1], np.uint16).view(ml_dtypes.bfloat16)[0]
    assert word("bf16", bf_nan) == 0xFFC1


def test_narrower_float_scalars_widen_exactly():
    assert word("f32", ml_dtypes.bfloat16(3.140625)) == f32_bits(3.140625)
    assert word("f32", np.float16(2.0 ** -24)) == f32_bits(2.0 ** -24)
    assert word("f64", np.float16(-0.0)) == 1 << 63
    assert word("f16", ml_dtypes.float8_e4m3fn(-1.75)) == f16_bits(-1.75)
    assert word("bf16", np.float16(0.5)) == bf16_bits_of(0.5)


def _rne(x: Fraction, fmt: str, sign: float = 1.0) -> float:
    p, emin, emax = FORMATS[fmt]
    r = round_fraction(x, p, emin, emax)
    return -abs(r) if (x < 0 or (x == 0 and sign < 0)) else abs(r)


def test_wider_values_round_once_to_nearest_even():
    # 2^53 + 2^29 + 1 as a Python int: via float64 it would round twice (to 2^53 + 2^29, then
    # the f32 tie to 2^53); exactly, it is above the f32 midpoint -> 2^53 + 2^30
    big = 2 ** 53 + 2 ** 29 + 1
    assert word("f32", big) == f32_bits(float(2 ** 53 + 2 ** 30))
    # a float64 just above an f16 midpoint: 1 + 2^-11 + 2^-40 -> 1 + 2^-10
    assert word("f16", 1 + 2.0 ** -11 + 2.0 ** -40) == f16_bits(1 + 2.0 ** -10)
    assert word("f16", 1 + 2.0 ** -11) == f16_bits(1.0)  # tie to even
    # bf16 from float64 with a tie and a near-tie (f32 rounding first would lose the sticky bit)
    x = 1 + 2.0 ** -8 + 2.0 ** -30
    assert word("bf16", x) == bf16_bits_of(float(_rne(Fraction(x), "bf16")))
    assert word("bf16", 1 + 2.0 ** -8) == 0x3F80
    # subnormal results and signed zero on underflow
    assert word("f16", 2.0 ** -26) == 0x0000
    assert word("f16", -(2.0 ** -26)) == 0x8000
    assert word("f16", 3 * 2.0 ** -26) == 0x0001
    assert word("f32", np.float64(-1e-50)) == 0x80000000
    # an x87 long double beyond float64 precision (where the platform has one)
    if np.finfo(np.longdouble).nmant > 52:
        ld = np.longdouble(1) + np.longdouble(2.0 ** -24) + np.longdouble(2.0 ** -60)
        assert word("f32", ld) == f32_bits(1 + 2.0 ** -23)  # above the midpoint: rounds up
        assert word("f64", ld) == struct.unpack("<Q", struct.pack("<d", 1 + 2.0 ** -24))[0]


def test_infinities_nan_and_random_values_against_fraction_reference():
    assert word("f16", float("-inf")) == 0xFC00
    assert word("bf16", np.float32("inf")) == 0x7F80
    assert word("f16", float("nan")) == 0x7E00
    assert word("f32", ml_dtypes.bfloat16("nan")) == 0x7FC00000
    rng = np.random.default_rng(3)
    for x in rng.standard_normal(60) * 2.0 ** rng.integers(-28, 12, 60):
        exp = _rne(Fraction(float(x)), "f16")
        assert word("f16", float(x)) == f16_bits(exp), x
        exp = _rne(Fraction(float(x)), "bf16")
        assert word("bf16", float(x)) == f32_bits(exp) >> 16, x


@pytest.mark.parametrize("t,value,exc,msg", [
    ("f16", 70000.0, ValueError, r"overflows f16 \(largest finite 65504.0\)"),
    ("f16", np.float32(65520.0), ValueError, "overflows f16"),
    ("bf16", 2 ** 200, ValueError, "overflows bf16"),
    ("f32", 10 ** 400, ValueError, "overflows f32"),
    ("f32", "1.5", TypeError, "takes a number, got str"),
    ("f32", True, TypeError, "takes a number, got bool"),
    ("u32", 1.0, TypeError, "takes an integer, got float"),
    ("u32", np.float16(1), TypeError, "takes an integer, got float16"),
    ("i32", ml_dtypes.bfloat16(1), TypeError, "takes an integer, got bfloat16"),
    ("u32", -1, ValueError, r"out of range \[0, 4294967295\]"),
    ("i32", np.int64(2 ** 31), ValueError, "out of range"),
])
def test_scalar_errors_name_argument_value_and_valid_range(t, value, exc, msg):
    with pytest.raises(exc, match=msg) as e:
        word(t, value)
    assert "scalar argument 'v' of kernel 'k'" in str(e.value)


def test_f16_just_below_overflow_threshold_rounds_to_max():
    assert word("f16", 65519.99) == 0x7BFF


# ----------------------------------------------------------------------------- loop bound

INFINITE = """
.kernel spin
.arg out buffer u32 write
.registers 4
    movi.b32 r0, 0
    movi.b32 r1, 1
    .loc "spin.py" 7 5
    loop
      add.i32 r0, r0, r1
    endloop
.end
"""


def test_infinite_loop_raises_naming_kernel_loop_and_line():
    m = assemble(INFINITE, "spin.wave")
    with pytest.raises(EmulationError) as e:
        emulate(m, "spin", grid=2, workgroup=8, args={"out": np.zeros(1, np.uint32)},
                max_loop_iterations=1000)
    msg = str(e.value)
    assert "kernel 'spin'" in msg and "instruction 2 (loop)" in msg and "spin.py" in msg and ":7" in msg
    assert "1000" in msg and "max_loop_iterations" in msg


def test_loop_bound_is_not_hit_by_a_finite_loop_and_rejects_bad_values():
    m = assemble(INFINITE.replace("add.i32 r0, r0, r1", "add.i32 r0, r0, r1\n      movi.b32 r2, 50\n"
                                  "      setp.ge.u32 p0, r0, r2\n      break p0"), "spin.wave")
    emulate(m, "spin", args={"out": np.zeros(1, np.uint32)}, max_loop_iterations=50)
    with pytest.raises(EmulationError, match="loop iteration bound"):
        emulate(m, "spin", args={"out": np.zeros(1, np.uint32)}, max_loop_iterations=48)
    with pytest.raises(ValueError, match="max_loop_iterations must be a positive int, got 0"):
        emulate(m, "spin", args={"out": np.zeros(1, np.uint32)}, max_loop_iterations=0)


# ----------------------------------------------------------------------------- batches

def test_special_registers_and_divergent_writes_across_many_batches():
    """More threads than one batch holds (several batches, a partial last one), a 2-D grid:
    global ids / workgroup ids / lane ids, and masked (divergent) shifts and adds, checked
    against NumPy."""
    from anywave.emu.machine import BATCH_LANES
    src = """
.kernel k
.arg out buffer u32 write
.registers 12
    mov.sr r0, sr_global_id_x
    mov.sr r1, sr_global_id_y
    mov.sr r2, sr_grid_size_x
    mov.sr r3, sr_workgroup_size_x
    mul.i32 r4, r2, r3
    mul.i32 r4, r4, r1
    add.i32 r4, r4, r0            ; linear global thread index
    movi.b32 r5, 3
    and.b32 r6, r4, r5
    setp.eq.u32 p0, r6, r5
    mov.sr r7, sr_lane_id
    mov.sr r8, sr_workgroup_id_y
    movi.b32 r9, 40
    if p0
      shl.b32 r7, r7, r9          ; count >= 32 -> 0 in the lanes with (index & 3) == 3
    else
      shl.b32 r7, r7, r6          ; lane << (index & 3)
      add.i32 r7, r7, r8
    endif
    movi.b32 r5, 2
    shl.b32 r10, r4, r5
    st.device.b32 out[r10], r7
.end
"""
    m = assemble(src, "b.wave")
    wg, gx, gy = 96, 37, 23  # 96 * 37 * 23 = 81,696 threads
    assert wg * gx * gy > BATCH_LANES
    n = wg * gx * gy
    out = np.zeros(n, np.uint32)
    emulate(m, "k", grid=(gx, gy), workgroup=wg, args={"out": out}, wave_width=32)
    i = np.arange(n)
    gid_y = i // (gx * wg)
    lane = (i % wg) % 32
    exp = np.where((i & 3) == 3, 0, (lane << (i & 3)) + gid_y).astype(np.uint32)
    assert np.array_equal(out, exp)


# ----------------------------------------------------------------------------- launch limits

_HALT = ".kernel k\n.registers 1\n    halt\n.end\n"
_LOCAL = ".kernel k\n.registers 1\n.local_memory {n}\n    halt\n.end\n"


@pytest.mark.parametrize("grid, wg, msg", [
    ((2**32, 1, 1), 1, "grid dimension x = 4294967296"),
    ((1, 2**32 + 5, 1), 1, "grid dimension y"),
    ((2**31, 1, 1), (3, 1, 1), "6442450944 threads along x: global ids would not fit in 32 bits"),
    ((1, 1, 2**30 + 1), (1, 1, 4), "4294967300 threads along z"),
    ((0, 1, 1), 1, "positive"),
    (1, (1, 0, 1), "positive"),
])
def test_launches_beyond_32_bit_ids_or_below_one_are_refused_before_running(grid, wg, msg):
    m = assemble(_HALT, "g.wave")
    with pytest.raises(ValueError, match=msg):
        emulate(m, "k", grid=grid, workgroup=wg, wave_width=8)


def test_launch_check_accepts_exactly_2_pow_32_threads_per_dimension():
    from anywave.emu.machine import check_launch

    k = assemble(_HALT, "g.wave").kernel("k")
    check_launch(k, (2**30, 1, 1), (4, 1, 1))          # ids 0 .. 2^32 - 1: all fit in u32
    check_launch(k, (2**32 - 1, 1, 1), (1, 1, 1))      # largest u32 grid size
    with pytest.raises(ValueError, match="4294967300 threads along y"):   # (2^30 + 1) * 4 = 2^32 + 4
        check_launch(k, (1, 2**30 + 1, 1), (1, 4, 1))


def test_workgroup_size_limit_is_1024_by_default_and_configurable():
    m = assemble(_HALT, "g.wave")
    stats = emulate(m, "k", grid=1, workgroup=(32, 32, 1), wave_width=64)
    assert stats.threads == 1024
    with pytest.raises(ValueError, match=r"1025 threads; the emulator's max workgroup size is 1024"):
        emulate(m, "k", grid=1, workgroup=(1025, 1, 1))
    stats = emulate(m, "k", grid=1, workgroup=(1025, 1, 1), max_workgroup_size=2048, wave_width=64)
    assert stats.threads == 1025 and stats.waves == 17  # ceil(1025 / 64)
    with pytest.raises(ValueError, match="max_workgroup_size = 100: must be an int of at least 256"):
        emulate(m, "k", grid=1, workgroup=1, max_workgroup_size=100)


def test_local_memory_limit_is_64_kib_by_default_checked_before_allocating():
    from anywave.emu import DEFAULT_LIMITS, EmulatorLimits

    assert DEFAULT_LIMITS == EmulatorLimits(1024, 65536)
    emulate(assemble(_LOCAL.format(n=65536), "l.wave"), "k", grid=3, workgroup=2)
    big = assemble(_LOCAL.format(n=2**32 - 1), "l.wave")   # 4 GiB per workgroup: never allocated
    with pytest.raises(ValueError, match=r"4294967295 bytes of local memory; the emulator provides at "
                                         r"most 65536"):
        emulate(big, "k", grid=2**20, workgroup=1)
    with pytest.raises(ValueError, match="65537 bytes of local memory"):
        emulate(assemble(_LOCAL.format(n=65537), "l.wave"), "k", grid=1, workgroup=1)
    emulate(assemble(_LOCAL.format(n=65537), "l.wave"), "k", grid=2, workgroup=1,
            limits=EmulatorLimits(max_local_memory=1 << 17))
    with pytest.raises(ValueError, match="max_local_memory = 1024: must be an int of at least 32768"):
        EmulatorLimits(max_local_memory=1024)


class _Timeout(Exception):
    pass


# Was a bug (review): spec §3.3 'A target shall refuse a launch whose values of these registers do not fit
# in 32 bits'; emulate(grid=(2**32,1,1)) is not refused and runs (effectively forever); same from the CLI:
# anywave run ... --grid 4294967296 hangs
def test_grid_dimension_beyond_32_bits_is_refused() -> None:
    m = assemble(".kernel k\n.registers 1\n    halt\n.end\n", "g.wave")

    def _alarm(signum, frame):  # noqa: ANN001
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(5)
    try:
        with pytest.raises((WaveError, ValueError)):
            emulate(m, "k", grid=(2**32, 1, 1), workgroup=1, args={}, wave_width=8)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


_IDS = """
.kernel ids
.arg out buffer u32 write
.registers 8
    mov.sr r0, sr_global_id_x
    mov.sr r1, sr_global_id_y
    mov.sr r2, sr_global_id_z
    mov.sr r3, sr_workgroup_id_y
    mov.sr r4, sr_workgroup_id_z
    mov.sr r5, sr_grid_size_x
    mov.sr r6, sr_workgroup_size_x
    mul.i32 r5, r5, r6
    mov.sr r6, sr_grid_size_y
    mov.sr r7, sr_workgroup_size_y
    mul.i32 r6, r6, r7
    mul.i32 r7, r2, r6
    add.i32 r7, r7, r1
    mul.i32 r7, r7, r5
    add.i32 r7, r7, r0
    movi.u32 r6, 12
    mul.i32 r7, r7, r6
    st.device.b32 out[r7], r1
    movi.u32 r6, 4
    add.i32 r7, r7, r6
    st.device.b32 out[r7], r3
    add.i32 r7, r7, r6
    st.device.b32 out[r7], r4
.end
"""


@pytest.mark.parametrize("grid,wg", [((256, 2, 1), (16, 16, 1)), ((1024, 1, 2), (64, 1, 1)),
                                     ((300, 3, 2), (8, 8, 1))])
def test_ids_of_a_grid_whose_first_batch_is_one_row(grid, wg) -> None:  # noqa: ANN001
    """The emulator runs workgroups in batches of BATCH_LANES lanes; with 256 workgroups of 256
    threads a row of the grid fills the first batch, whose workgroup id y (and z) is then 0 in
    every lane -- the later batches' ids must not take that batch's values (they did: a cached
    'the same in every batch' part)."""
    from anywave.emu.machine import BATCH_LANES

    m = assemble(_IDS)
    nx, ny, nz = (g * s for g, s in zip(grid, wg, strict=True))
    out = np.full((nz, ny, nx, 3), 0xFFFFFFFF, np.uint32)
    emulate(m, "ids", grid=grid, workgroup=wg, args=[out.reshape(-1)], wave_width=8)
    z, y, _ = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    assert np.array_equal(out[..., 0], y)  # global id y
    assert np.array_equal(out[..., 1], y // wg[1])  # workgroup id y
    assert np.array_equal(out[..., 2], z // wg[2])  # workgroup id z
    assert grid[0] * wg[0] * wg[1] * wg[2] >= BATCH_LANES or grid[2] > 1  # the case the test is for
