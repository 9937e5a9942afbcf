"""The wave barrier in the checked emulator (spec §7.10, anywave.emu.wavesync): accesses of lanes of
one wave ordered by ``barrier.wave`` are not reported; accesses of lanes it does not order (another
wave, a lane that did not execute it) still are -- through chains of partial barriers, read-shared
bytes, atomics and device memory. The clocks are checked against a brute-force happens-before."""

from __future__ import annotations

import random

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import EmulationError, emulate
from anywave.emu.wavesync import join, new_clocks

WIDTHS = (8, 16, 32, 64)
WG = 128


def _kernel(body: list[str]) -> str:
    """A kernel of 128-thread workgroups: r0 = thread linear id, r5 = lane, r21 = 0; local memory
    starts written (each thread its word, then a workgroup barrier); ``out`` gets r22 per thread
    (global index); ``dev`` is a scratch buffer for device-memory exchanges."""
    return "\n".join([
        ".kernel k",
        ".arg out buffer u32 write",
        ".arg dev buffer u32 readwrite",
        ".registers 32",
        ".local_memory 512",
        "    mov.sr r0, sr_thread_linear_id",
        "    mov.sr r5, sr_lane_id",
        "    movi.u32 r1, 2",
        "    shl.b32 r2, r0, r1",
        "    movi.u32 r21, 0",
        "    st.local.b32 [r2], r0",
        "    barrier",
        "    movi.u32 r22, 7",
        *("    " + ln for ln in body),
        "    mov.sr r27, sr_workgroup_id_x",
        "    movi.u32 r28, 128",
        "    mul.i32 r27, r27, r28",
        "    add.i32 r27, r27, r0",
        "    shl.b32 r27, r27, r1",
        "    st.device.b32 out[r27], r22",
        ".end",
    ]) + "\n"


def _when(cond: str, c: int, ops: list[str], p: int = 1) -> list[str]:
    """``ops`` in the threads where ``cond`` holds: tid==c, lane==c, lane<c, lane>=c, wave==c."""
    cmp = {"tid": "eq", "lane": "eq", "lane<": "lt", "lane>=": "ge", "wave": "eq"}[cond]
    pre = ["mov.sr r23, sr_wave_id"] if cond == "wave" else []
    reg = "r23" if cond == "wave" else ("r5" if cond.startswith("lane") else "r0")
    return pre + [f"movi.u32 r20, {c}", f"setp.{cmp}.u32 p{p}, {reg}, r20", f"if p{p}", *("  " + o for o in ops),
                  "endif"]


WRITE = ["st.local.b32 [r21], r5"]
READ = ["ld.local.b32 r22, [r21]"]
BAR = ["barrier.wave"]


def _run(body: list[str], W: int, grid: int = 2, check: bool = True) -> np.ndarray:
    out = np.zeros(grid * WG, np.uint32)
    emulate(assemble(_kernel(body)), "k", grid=(grid, 1, 1), workgroup=(WG, 1, 1),
            args={"out": out, "dev": np.zeros(16, np.uint32)}, wave_width=W, check=check)
    return out


def _races(body: list[str], W: int) -> str:
    with pytest.raises(EmulationError, match="data race") as ei:
        _run(body, W)
    return str(ei.value)


@pytest.mark.parametrize("W", WIDTHS)
def test_same_wave_ordered_by_the_barrier(W):
    body = _when("tid", 0, WRITE) + BAR + _when("tid", 1, READ)
    out = _run(body, W)
    assert out[1] == 0  # thread 0's lane number, stored before the barrier
    msg = _races(_when("tid", 0, WRITE) + _when("tid", 1, READ), W)
    assert "thread (0,0,0) wrote" in msg and "thread (1,0,0) read" in msg


@pytest.mark.parametrize("W", WIDTHS)
def test_another_wave_is_not_ordered(W):
    # thread W is lane 0 of wave 1: the wave barrier orders nothing between the waves
    msg = _races(_when("tid", 0, WRITE) + BAR + _when("tid", W, READ), W)
    assert f"thread ({W},0,0) read" in msg and "barrier.wave" in msg


@pytest.mark.parametrize("W", WIDTHS)
def test_only_the_executing_lanes_are_ordered(W):
    part = _when("lane<", 4, BAR, p=2)
    # lane 1 executes the barrier with lane 0; lane 5 does not
    out = _run(_when("tid", 1, WRITE) + part + _when("tid", 0, READ), W)
    assert out[0] == 1
    _races(_when("tid", 5, WRITE) + part + _when("tid", 0, READ), W)
    # a read by a non-executing lane after the barrier is not ordered either
    _races(_when("tid", 1, WRITE) + part + _when("tid", 5, READ), W)


@pytest.mark.parametrize("W", WIDTHS)
def test_chains_of_partial_barriers(W):
    e1 = _when("lane<", 2, BAR, p=2)  # lanes {0, 1}
    e2 = ["movi.u32 r20, 1", "sub.i32 r24, r5, r20", "movi.u32 r20, 2", "setp.lt.u32 p3, r24, r20",
          "if p3", "  barrier.wave", "endif"]  # lanes {1, 2}
    out = _run(_when("tid", 0, WRITE) + e1 + e2 + _when("tid", 2, READ), W)
    assert out[2] == 0  # lane 0 -> (E1) lane 1 -> (E2) lane 2
    # lane 2's write after E1 reaches lane 0 through no barrier
    _races(e1 + _when("tid", 2, WRITE) + e2 + _when("tid", 0, READ), W)
    # the chain runs forward only: E2 before E1 does not order lane 0 before lane 2
    _races(e2 + _when("tid", 0, WRITE) + e1 + _when("tid", 2, READ), W)


@pytest.mark.parametrize("W", WIDTHS)
def test_read_shared_bytes(W):
    reads = _when("wave", 0, READ, p=2)  # every lane of wave 0 reads word 0
    out = _run(reads + BAR + _when("tid", 0, WRITE), W)
    assert (out[:W] == 0).all()
    _races(reads + _when("tid", 0, WRITE), W)
    # half of the readers did not execute the barrier with the writer
    _races(reads + _when("lane<", W // 2, BAR, p=3) + _when("tid", 0, WRITE), W)
    # readers of other waves too: the wave barrier does not order them
    _races(READ + BAR + _when("tid", 0, WRITE), W)


@pytest.mark.parametrize("W", WIDTHS)
def test_atomics(W):
    atom = ["movi.u32 r25, 1", "red.local.add.u32 [r21], r25"]
    out = _run(_when("wave", 0, atom, p=2) + BAR + _when("tid", 0, READ), W)
    assert out[0] == W  # word 0 held 0, then W adds of 1
    _races(_when("wave", 0, atom, p=2) + _when("tid", 0, READ), W)
    _races(atom + BAR + _when("tid", 0, READ), W)  # atomics of other waves


@pytest.mark.parametrize("W", WIDTHS)
def test_device_memory(W):
    wr = ["movi.u32 r26, 4", "st.device.b32 dev[r26], r5"]
    rd = ["movi.u32 r26, 4", "ld.device.b32 r22, dev[r26]"]
    body = _when("tid", 0, wr) + BAR + _when("tid", 1, rd)
    assert _run(body, W, grid=1)[1] == 0
    with pytest.raises(EmulationError, match="data race on device memory"):
        _run(body, W)  # workgroup 1's thread 0 writes what workgroup 0's thread 1 reads
    with pytest.raises(EmulationError, match="data race on device memory"):
        _run(_when("tid", 0, wr) + BAR + _when("tid", W, rd), W, grid=1)
    with pytest.raises(EmulationError, match="data race on device memory"):
        _run(_when("tid", 0, wr) + _when("tid", 1, rd), W, grid=1)


def test_unchecked_and_checked_give_the_same_values():
    body = _when("tid", 0, WRITE) + BAR + _when("wave", 0, READ, p=2)
    for W in WIDTHS:
        assert np.array_equal(_run(body, W), _run(body, W, check=False))


def _hb_brute(W: int, E: list[set[int]], u: int, s: int, t: int, s2: int) -> bool:
    """Happens-before of an access of lane u before barrier s and one of lane t after barrier
    s2 - 1 (slots: barriers 0..s-1 came before the first access), by reachability: a lane knows
    of the access once it executes a barrier with a lane that knows."""
    if u == t:
        return s <= s2
    know = {u}
    for k in range(s, s2):
        if know & E[k]:
            know |= E[k]
    return t in know


def test_clocks_agree_with_brute_force_happens_before():
    rnd = random.Random(28)
    for _ in range(300):
        W = rnd.choice(WIDTHS)
        K = rnd.randint(0, 7)
        E = [{ln for ln in range(W) if rnd.random() < rnd.choice((0.2, 0.5, 0.9))} for _ in range(K)]
        clocks = [new_clocks(W, W).copy()]
        c = clocks[0].copy()
        for k in range(K):
            mask = np.zeros(W, bool)
            mask[list(E[k])] = True
            join(c, mask, W)
            clocks.append(c.copy())
        for _ in range(20):
            u, t = rnd.randrange(W), rnd.randrange(W)
            s = rnd.randint(0, K)
            s2 = rnd.randint(s, K)
            ep = clocks[s][u, u]
            hb = u == t or bool(clocks[s2][t, u] >= ep)
            assert hb == _hb_brute(W, E, u, s, t, s2), (W, E, u, s, t, s2)
