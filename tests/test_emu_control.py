"""Structured divergence, barriers and errors of the emulator, at every wave width."""

from __future__ import annotations

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import EmulationError, emulate
from test_emu_support import WIDTHS, kernel

OUT = ".arg out buffer u32 readwrite"
PROLOGUE = """
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
"""


def run(body: str, n: int, W: int, wg: int | None = None, local: int = 0, check: bool = False,
        regs: int = 32) -> np.ndarray:
    extra = f".local_memory {local}" if local else ""
    m = assemble(kernel(PROLOGUE + body, OUT, regs, extra), "t.wave")
    out = np.zeros(n, np.uint32)
    wg = wg or n
    emulate(m, "k", grid=n // wg, workgroup=wg, args={"out": out}, wave_width=W, check=check)
    return out


@pytest.mark.parametrize("W", WIDTHS)
def test_break_inside_if_inside_loop(W):
    # thread i counts iterations until it breaks at i % 5, with the break inside an if
    body = """
    movi.b32 r3, 5
    rem.u32 r4, r0, r3
    movi.b32 r5, 0
    movi.b32 r6, 1
    loop
      setp.ge.u32 p0, r5, r4
      if p0
        movi.b32 r7, 100
        break
      endif
      add.i32 r5, r5, r6
    endloop
    add.i32 r5, r5, r7
    st.device.b32 out[r2], r5
    """
    out = run(body, 70, W)
    assert out.tolist() == [i % 5 + 100 for i in range(70)]


@pytest.mark.parametrize("W", WIDTHS)
def test_continue_skips_rest_of_iteration(W):
    # sum of j in [0, 10) with j % 3 != i % 3
    body = """
    movi.b32 r3, 3
    rem.u32 r4, r0, r3
    movi.b32 r5, 0
    movi.b32 r6, 0
    movi.b32 r8, 1
    movi.b32 r9, 10
    loop
      setp.ge.u32 p0, r5, r9
      break p0
      rem.u32 r7, r5, r3
      add.i32 r5, r5, r8
      setp.eq.u32 p1, r7, r4
      continue p1
      sub.i32 r10, r5, r8
      add.i32 r6, r6, r10
    endloop
    st.device.b32 out[r2], r6
    """
    out = run(body, 40, W)
    assert out.tolist() == [sum(j for j in range(10) if j % 3 != i % 3) for i in range(40)]


@pytest.mark.parametrize("W", WIDTHS)
def test_halt_under_divergence(W):
    body = """
    movi.b32 r3, 1
    and.b32 r4, r0, r3
    movi.b32 r5, 7
    st.device.b32 out[r2], r5
    setp.eq.u32 p0, r4, r3
    loop
      if p0
        halt
      endif
      break
    endloop
    movi.b32 r5, 9
    st.device.b32 out[r2], r5
    """
    out = run(body, 36, W)
    assert out.tolist() == [7 if i % 2 else 9 for i in range(36)]


@pytest.mark.parametrize("W", [8, 64])
def test_nesting_32_deep(W):
    # 32 nested ifs on bits of the thread id; innermost reached only by id with all tested bits set.
    depth = 32
    lines = ["movi.b32 r9, 0", "movi.b32 r10, 1"]
    for k in range(depth):
        bit = k % 6
        lines += [f"movi.b32 r3, {1 << bit}", "and.b32 r4, r0, r3", f"setp.ne.u32 p{k % 8}, r4, 0",
                  "movi.b32 r11, 0", f"setp.ne.u32 p{k % 8}, r4, r11", f"if p{k % 8}",
                  "add.i32 r9, r9, r10"]
    lines += ["endif"] * depth
    lines += ["st.device.b32 out[r2], r9"]
    body = "\n".join(x for x in lines if "r4, 0" not in x)
    out = run(body, 64, W)
    exp = []
    for i in range(64):
        c = 0
        for k in range(depth):
            if i & (1 << (k % 6)):
                c += 1
            else:
                break
        exp.append(c)
    assert out.tolist() == exp


@pytest.mark.parametrize("W", WIDTHS)
def test_if_else_with_partial_last_wave(W):
    # 37 threads per workgroup: the last wave is partial at every W
    body = """
    movi.b32 r3, 3
    rem.u32 r4, r0, r3
    movi.b32 r5, 0
    setp.eq.u32 p0, r4, r5
    if p0
      movi.b32 r6, 11
    else
      movi.b32 r6, 22
    endif
    st.device.b32 out[r2], r6
    """
    out = run(body, 74, W, wg=37)
    assert out.tolist() == [11 if i % 3 == 0 else 22 for i in range(74)]


def test_function_call_and_ret():
    src = kernel(PROLOGUE + """
    movi.b32 r5, 1
    call f
    st.device.b32 out[r2], r5
    """, OUT) + """
.func f
    movi.b32 r3, 1
    and.b32 r4, r0, r3
    setp.eq.u32 p0, r4, r3
    ret p0
    movi.b32 r5, 2
    ret
.end
"""
    m = assemble(src, "t.wave")
    out = np.zeros(16, np.uint32)
    emulate(m, "k", grid=1, workgroup=16, args={"out": out}, wave_width=8)
    assert out.tolist() == [1 if i % 2 else 2 for i in range(16)]


BARRIER_LOOP = """
    mov.sr r3, sr_thread_id_x
    movi.b32 r4, 2
    shl.b32 r5, r3, r4
    st.local.b32 [r5], r3
    movi.b32 r6, 0
    movi.b32 r7, 1
    movi.b32 r8, 4
    mov.sr r9, sr_workgroup_size_x
    loop
      setp.ge.u32 p0, r6, r8
      break p0
      barrier
      add.i32 r10, r3, r7
      rem.u32 r10, r10, r9
      shl.b32 r10, r10, r4
      ld.local.b32 r11, [r10]
      barrier
      st.local.b32 [r5], r11
      add.i32 r6, r6, r7
    endloop
    st.device.b32 out[r2], r11
"""


@pytest.mark.parametrize("W", WIDTHS)
def test_barrier_in_loop_rotates_local_data(W):
    # 4 rounds of "read right neighbour" over 64 threads (2..8 waves)
    out = run(BARRIER_LOOP, 128, W, wg=64, local=256, check=True)
    assert out.tolist() == [(i % 64 + 4) % 64 for i in range(128)]


def test_divergent_barrier_names_threads_and_instruction():
    body = """
    mov.sr r3, sr_thread_id_x
    movi.b32 r4, 5
    setp.lt.u32 p0, r3, r4
    if p0
      barrier
    endif
    """
    with pytest.raises(EmulationError) as e:
        run(body, 16, 8, wg=16)
    msg = str(e.value)
    assert "divergent barrier" in msg and "(barrier)" in msg and "workgroup (0,0,0)" in msg
    assert "5 of 16 threads arrived" in msg and "11 did not" in msg and "(5,0,0)" in msg


def test_barrier_after_halt_is_an_error():
    body = """
    mov.sr r3, sr_thread_id_x
    movi.b32 r4, 0
    setp.eq.u32 p0, r3, r4
    halt p0
    barrier
    """
    with pytest.raises(EmulationError, match="1 of them had halted"):
        run(body, 8, 8, wg=8)


def test_stats_count_active_lanes():
    body = """
    movi.b32 r3, 1
    setp.eq.u32 p0, r0, r3
    if p0
      movi.b32 r4, 0
    endif
    """
    m = assemble(kernel(PROLOGUE + body, OUT), "t.wave")
    s = emulate(m, "k", grid=1, workgroup=16, args={"out": np.zeros(16, np.uint32)}, wave_width=8)
    # prologue (3), movi, setp, if: 2 waves x 8 lanes; the movi inside the if and the endif
    # (counted with the lanes that reach it) run in 1 lane of 1 wave
    assert s.instructions == 6 * 2 + 2
    assert s.thread_instructions == 6 * 16 + 2
    assert s.waves == 2 and s.threads == 16


def test_trace_lane_records_register_changes():
    m = assemble(kernel(PROLOGUE, OUT), "t.wave")
    s = emulate(m, "k", grid=2, workgroup=4, args={"out": np.zeros(8, np.uint32)}, trace_lane=5)
    assert len(s.trace) == 3
    assert "r0=0x00000005" in s.trace[0] and "r2=0x00000014" in s.trace[2]
