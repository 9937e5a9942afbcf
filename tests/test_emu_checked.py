"""MMA values at every W and checked-mode behaviour of MMA and atomics (races, initialisation).

MMA expectations come from NumPy matmul on inputs chosen so every product and partial sum is
exact in f32 (small multiples of 1/4 and small integers): then D is exact under any
accumulation order, so it does not matter that the emulator accumulates k = 0..15 in order.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import EmulationError, emulate
from test_emu_support import WIDTHS

TILE_IN = 512    # 16x16 16-bit elements
TILE_OUT = 1024  # 16x16 f32

# Threads copy A|B|C (src, 2048 bytes) into local memory at 0, then (barrier) each wave
# multiplies into its own D tile at 2048 + wave*1024, then (barrier) threads copy all D tiles
# out. r30 = 1 plants a race: the MMA reads C with no barrier after the copy.
MMA_KERNEL = """
.kernel k
.arg src buffer u32 read
.arg out buffer u32 write
.arg dshift scalar u32
.registers 32
.local_memory {local}
    mov.sr r0, sr_thread_linear_id
    mov.sr r15, sr_wave_id
    mov.sr r16, sr_num_waves
    mov.sr r17, sr_workgroup_size_x
    movi.u32 r1, 2
    movi.u32 r18, 512
    mov.b32 r7, r0
    loop
      setp.ge.u32 p0, r7, r18
      break p0
      shl.b32 r8, r7, r1
      ld.device.b32 r10, src[r8]
      st.local.b32 [r8], r10
      add.i32 r7, r7, r17
    endloop
    {first_barrier}
    ldarg.b32 r9, dshift
    shl.b32 r20, r15, r9
    movi.u32 r1, 2048
    add.i32 r20, r20, r1
    movi.u32 r21, 0
    movi.u32 r22, 512
    movi.u32 r23, 1024
    mma.m16n16k16.f32.{t} r20, r21, r22, r23
    barrier
    movi.u32 r1, 8
    shl.b32 r19, r16, r1        ; words of D in all: waves * 256
    movi.u32 r1, 2
    mov.b32 r7, r0
    loop
      setp.ge.u32 p0, r7, r19
      break p0
      shl.b32 r8, r7, r1
      movi.u32 r9, 2048
      add.i32 r10, r8, r9
      ld.local.b32 r11, [r10]
      st.device.b32 out[r8], r11
      add.i32 r7, r7, r17
    endloop
.end
"""


def _inputs(t: str, seed: int):
    rng = np.random.default_rng(seed)
    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    A = (rng.integers(-8, 9, (16, 16)) / 4).astype(dt)
    B = (rng.integers(-8, 9, (16, 16)) / 4).astype(dt)
    C = rng.integers(-100, 101, (16, 16)).astype(np.float32)
    C[0, 0] = -0.0
    D = (A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)).astype(np.float32)
    src = np.concatenate([A.reshape(-1).view(np.uint16).view(np.uint32),
                          B.reshape(-1).view(np.uint16).view(np.uint32),
                          C.reshape(-1).view(np.uint32)])
    return src, D


def _run(t: str, W: int, wg: int, check: bool, first_barrier: bool = True, dshift: int = 10):
    src, D = _inputs(t, 5 + W)
    waves = -(-wg // W)
    m = assemble(MMA_KERNEL.format(local=2048 + waves * TILE_OUT, t=t,
                                   first_barrier="barrier" if first_barrier else "nop"), "mma.wave")
    out = np.full(waves * 256, 0xDEADBEEF, np.uint32)
    emulate(m, "k", grid=1, workgroup=wg, args={"src": src, "out": out, "dshift": dshift},
            wave_width=W, check=check)
    return out, D, waves


@pytest.mark.parametrize("t", ["f16", "bf16"])
@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("check", [False, True])
def test_mma_values_every_wave_width(t, W, check):
    wg = 128  # 128 / W complete waves, each with its own D tile
    out, D, waves = _run(t, W, wg, check)
    exp = np.tile(D.reshape(-1).view(np.uint32), waves)
    assert np.array_equal(out, exp)
    assert out.view(np.float32)[0] == D[0, 0]


def test_mma_checked_reports_missing_barrier_before_reading_tiles():
    # without the barrier, the MMA (by the wave's lowest lane) reads bytes other threads wrote
    with pytest.raises(EmulationError, match=r"data race on local memory.*mma\.m16n16k16") as e:
        _run("f16", 8, 64, check=True, first_barrier=False)
    assert "wrote it at" in str(e.value) and "read it at" in str(e.value)
    _run("f16", 8, 64, check=False, first_barrier=False)  # unchecked: runs


def test_mma_checked_reports_overlapping_d_tiles():
    # dshift 5: wave w's D tile is at 2048 + 32*w -> the tiles overlap (two waves write)
    with pytest.raises(EmulationError, match=r"data race on local memory.*wrote it at.*wrote it at"):
        _run("bf16", 16, 32, check=True, dshift=5)


def test_mma_checked_reads_of_unwritten_tile_are_reported():
    m = assemble(MMA_KERNEL.format(local=2048 + 4 * TILE_OUT, t="f16", first_barrier="barrier")
                 .replace("st.local.b32 [r8], r10", "nop"), "mma.wave")
    src, _ = _inputs("f16", 1)
    with pytest.raises(EmulationError, match=r"uninitialised local memory.*mma\.m16n16k16"):
        emulate(m, "k", grid=1, workgroup=32, args={"src": src, "out": np.zeros(1024, np.uint32),
                                                    "dshift": 10}, wave_width=8, check=True)


# ----------------------------------------------------------------------------- atomics vs plain

def _k(body: str, args: str, local: int = 0) -> object:
    extra = f".local_memory {local}\n" if local else ""
    return assemble(f".kernel k\n{args}\n.registers 16\n{extra}"
                    "    mov.sr r0, sr_thread_linear_id\n    movi.b32 r3, 0\n    movi.b32 r5, 1\n"
                    f"{body}\n.end\n", "atom.wave")


LOCAL_INIT = """
    setp.eq.u32 p1, r0, r3
    @p1 st.local.b32 [r3], r3
    barrier
"""


def test_local_atomic_vs_plain_store_is_a_race():
    m = _k(LOCAL_INIT + """
    movi.b32 r6, 2
    setp.eq.u32 p0, r0, r6
    @p0 st.local.b32 [r3], r0
    @!p0 atom.local.add.u32 r4, [r3], r5
    """, ".arg out buffer u32 readwrite", local=16)
    args = {"out": np.zeros(4, np.uint32)}
    with pytest.raises(EmulationError, match=r"data race on local memory.*(atomically updated|wrote) it"):
        emulate(m, "k", grid=1, workgroup=8, args=args, wave_width=8, check=True)
    emulate(m, "k", grid=1, workgroup=8, args=args, wave_width=8)  # unchecked: runs


def test_local_plain_read_after_atomic_without_barrier_is_a_race():
    m = _k(LOCAL_INIT + """
    red.local.add.u32 [r3], r5
    ld.local.b32 r4, [r3]
    """, ".arg out buffer u32 readwrite", local=16)
    with pytest.raises(EmulationError, match=r"atomically updated it at .*red\.local.*read it at"):
        emulate(m, "k", grid=1, workgroup=4, args={"out": np.zeros(4, np.uint32)}, wave_width=8,
                check=True)


def test_local_atomics_only_and_barrier_separated_plain_access_are_not_races():
    m = _k(LOCAL_INIT + """
    atom.local.add.u32 r4, [r3], r5
    red.local.add.u32 [r3], r5
    barrier
    ld.local.b32 r6, [r3]
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    st.device.b32 out[r2], r6
    """, ".arg out buffer u32 readwrite", local=16)
    out = np.zeros(8, np.uint32)
    emulate(m, "k", grid=1, workgroup=8, args={"out": out}, wave_width=8, check=True)
    assert out.tolist() == [16] * 8


def test_device_atomic_vs_plain_load_in_one_launch_is_a_race():
    # workgroup 1 thread 0 loads word 0 that every thread of workgroup 0 adds to atomically
    m = _k("""
    mov.sr r7, sr_workgroup_id_x
    setp.eq.u32 p0, r7, r3
    @p0 atom.device.add.u32 r4, out[r3], r5, .device, .relaxed
    setp.eq.u32 p1, r0, r3
    @!p0 ld.device.b32 r4, out[r3]
    """, ".arg out buffer u32 readwrite")
    with pytest.raises(EmulationError, match=r"data race on device memory.*argument 'out' byte offset 0"):
        emulate(m, "k", grid=2, workgroup=4, args={"out": np.zeros(4, np.uint32)}, wave_width=8,
                check=True)


def test_device_atomics_from_every_thread_are_not_a_race():
    m = _k("""
    atom.device.add.u32 r4, out[r3], r5, .device, .relaxed
    red.device.add.u32 out[r3], r5, .device, .relaxed
    """, ".arg out buffer u32 readwrite")
    out = np.zeros(1, np.uint32)
    emulate(m, "k", grid=3, workgroup=8, args={"out": out}, wave_width=8, check=True)
    assert int(out[0]) == 48


def test_local_atomic_on_uninitialised_memory_is_reported():
    m = _k("    atom.local.add.u32 r4, [r3], r5", ".arg out buffer u32 readwrite", local=16)
    with pytest.raises(EmulationError, match="uninitialised local memory"):
        emulate(m, "k", grid=1, workgroup=4, args={"out": np.zeros(1, np.uint32)}, wave_width=8,
                check=True)


def test_mma_tiles_need_32_byte_alignment():
    # D at 2048 + 32*w: aligned (the tiles overlap, so only one wave is used)
    out, D, waves = _run("f16", 64, 64, check=True, dshift=5)
    assert waves == 1 and np.array_equal(out, D.reshape(-1).view(np.uint32))
    # D at 2048 + 16*w: wave 1's tile is 16-byte aligned only
    with pytest.raises(EmulationError,
                       match=r"MMA tile byte offset 2064 is not a multiple of 32 \(the required alignment\)"):
        _run("f16", 8, 16, check=False, dshift=4)


@pytest.mark.parametrize("W", WIDTHS)
def test_mma_in_a_partial_wave_is_an_error(W):
    with pytest.raises(EmulationError, match=rf"all {W} lanes of a complete wave.*{(W // 2)} of {W} lanes"):
        _run("f16", W, W + W // 2, check=False)


def test_mma_under_divergence_is_an_error():
    m = assemble(MMA_KERNEL.format(local=2048 + 2 * TILE_OUT, t="f16", first_barrier="barrier")
                 .replace("    mma.m16n16k16", "    setp.ne.u32 p3, r0, r21\n    @p3 mma.m16n16k16"), "mma.wave")
    src, _ = _inputs("f16", 1)
    with pytest.raises(EmulationError, match=r"with 7 of 8 lanes"):
        emulate(m, "k", grid=1, workgroup=16, args={"src": src, "out": np.zeros(512, np.uint32), "dshift": 10},
                wave_width=8)
