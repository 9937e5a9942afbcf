"""Memory, atomics, argument binding, checked mode and wave operations of the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from anywave.asm import assemble
from anywave.emu import EmulationError, emulate, emulate_flat
from test_emu_support import WIDTHS, kernel

PRO = """
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
"""


def mod(body: str, args: str, local: int = 0):
    return assemble(kernel(PRO + body, args, 32, f".local_memory {local}" if local else ""), "t.wave")


def test_zero_copy_and_narrow_loads():
    m = mod("""
    ld.device.i8 r3, x[r0]
    ld.device.u16 r4, x[r0+0]
    st.device.b32 out[r2], r3
    """, ".arg x buffer u8 read\n.arg out buffer i32 readwrite")
    x = np.array([0x80, 0x7F, 0xFF, 0x01, 0, 0, 0, 0], np.uint8)
    out = np.zeros(4, np.int32)
    with pytest.raises(EmulationError, match="misaligned"):
        emulate(m, "k", grid=1, workgroup=4, args={"x": x, "out": out})
    m = mod("""
    ld.device.i8 r3, x[r0]
    st.device.b32 out[r2], r3
    """, ".arg x buffer u8 read\n.arg out buffer i32 readwrite")
    emulate(m, "k", grid=1, workgroup=4, args={"x": x, "out": out})
    assert out.tolist() == [-128, 127, -1, 1]  # written into the caller's array


def test_out_of_bounds_names_argument_offset_thread_instruction():
    m = mod("""
    ld.device.b32 r3, x[r2+4]
    """, ".arg x buffer f32 read")
    with pytest.raises(EmulationError) as e:
        emulate(m, "k", grid=2, workgroup=4, args={"x": np.zeros(7, np.float32)})
    msg = str(e.value)
    assert "argument 'x'" in msg and "byte offset 28" in msg and "workgroup (1,0,0) thread (2,0,0)" in msg
    assert "ld.device.b32" in msg and "instruction 3" in msg


def test_local_oob_and_store_last_lane_wins():
    m = mod("""
    movi.b32 r3, 0
    st.local.b32 [r3], r0
    barrier
    ld.local.b32 r4, [r3]
    st.device.b32 out[r2], r4
    """, ".arg out buffer u32 readwrite", local=4)
    out = np.zeros(16, np.uint32)
    emulate(m, "k", grid=2, workgroup=8, args={"out": out}, wave_width=8)
    assert out.tolist() == [7] * 8 + [15] * 8  # last thread of each workgroup wins
    with pytest.raises(EmulationError, match="data race on local memory"):
        emulate(m, "k", grid=1, workgroup=8, args={"out": out}, check=True)
    m = mod("ld.local.b32 r4, [r2]", ".arg out buffer u32 readwrite", local=16)
    with pytest.raises(EmulationError, match=r"local memory.*byte offset 16"):
        emulate(m, "k", grid=1, workgroup=5, args={"out": out})


def test_planted_race_on_device_memory_names_both_threads():
    m = mod("""
    movi.b32 r3, 0
    ld.device.b32 r4, out[r3]
    movi.b32 r5, 3
    setp.eq.u32 p0, r0, r5
    @p0 st.device.b32 out[r3], r0
    """, ".arg out buffer u32 readwrite")
    with pytest.raises(EmulationError) as e:
        emulate(m, "k", grid=1, workgroup=8, args={"out": np.zeros(8, np.uint32)}, check=True)
    msg = str(e.value)
    assert "data race on device memory" in msg and "argument 'out' byte offset 0" in msg
    assert "thread (3,0,0) wrote" in msg and "read it at instruction 4 (ld.device.b32)" in msg
    # without check mode it runs
    emulate(m, "k", grid=1, workgroup=8, args={"out": np.zeros(8, np.uint32)})


def test_uninitialised_local_read_in_checked_mode():
    m = mod("ld.local.b32 r4, [r2]", ".arg out buffer u32 readwrite", local=64)
    with pytest.raises(EmulationError, match="uninitialised local memory"):
        emulate(m, "k", grid=1, workgroup=4, args={"out": np.zeros(1, np.uint32)}, check=True)


@pytest.mark.parametrize("op,ref", [
    ("add.u32", lambda old, v: (old + v) & 0xFFFFFFFF), ("sub.u32", lambda old, v: (old - v) & 0xFFFFFFFF),
    ("max.i32", lambda old, v: max(old - (old >> 31 << 32), v - (v >> 31 << 32)) & 0xFFFFFFFF),
    ("min.u32", min), ("or.b32", lambda o, v: o | v), ("and.b32", lambda o, v: o & v),
    ("xor.b32", lambda o, v: o ^ v), ("exch.b32", lambda o, v: v),
])
def test_device_atomics_serialise_in_thread_order(op, ref):
    # 3 addresses hit by many lanes each; old values must match a sequential replay
    m = mod(f"""
    ld.device.b32 r3, vals[r2]
    movi.b32 r4, 3
    rem.u32 r5, r0, r4
    shl.b32 r5, r5, r1
    atom.device.{op} r6, mem[r5], r3, .device, .relaxed
    st.device.b32 olds[r2], r6
    """, ".arg vals buffer u32 read\n.arg mem buffer u32 readwrite\n.arg olds buffer u32 readwrite")
    n = 96
    rng = np.random.default_rng(5)
    vals = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    mem = np.array([5, 0xFFFFFFFF, 0x80000000], np.uint32)
    olds = np.zeros(n, np.uint32)
    exp_mem = [int(x) for x in mem]
    exp_old = []
    for i in range(n):  # workgroups of 32 in order, threads in order
        a = i % 3
        exp_old.append(exp_mem[a])
        exp_mem[a] = ref(exp_mem[a], int(vals[i]))
    emulate(m, "k", grid=3, workgroup=32, args={"vals": vals, "mem": mem, "olds": olds})
    assert olds.tolist() == exp_old and mem.tolist() == exp_mem


def test_cas_and_f32_atomic_add_sequential():
    m = mod("""
    movi.b32 r4, 0
    atom.device.cas.b32 r6, mem[r4], r0, r0, .device, .relaxed
    st.device.b32 olds[r2], r6
    movi.f32 r7, 0.1
    atom.local.add.f32 r8, [r4], r7
    movi.b32 r9, 4
    atom.device.add.f32 r8, mem[r9], r7, .device, .relaxed
    """, ".arg mem buffer u32 readwrite\n.arg olds buffer u32 readwrite", local=4)
    mem = np.array([0, 0], np.uint32)
    olds = np.zeros(8, np.uint32)
    emulate(m, "k", grid=1, workgroup=8, args={"mem": mem, "olds": olds})
    # CAS(mem, cmp=i, v=i): thread 0 sees 0 == 0 and stores 0; every later thread sees 0
    assert olds.tolist() == [0] * 8 and mem[0] == 0
    acc = np.float32(0)
    for _ in range(8):
        acc = np.float32(acc + np.float32(0.1))
    assert mem[1:].view(np.float32)[0] == acc


@pytest.mark.parametrize("W", WIDTHS)
def test_wave_ops_shuffle_ballot_reduce_scan(W):
    # 40 threads: a partial last wave; odd lanes inactive inside an if
    m = mod("""
    mov.sr r3, sr_lane_id
    movi.b32 r4, 1
    and.b32 r5, r0, r4
    setp.eq.u32 p0, r5, 0
    movi.b32 r20, 0
    setp.eq.u32 p0, r5, r20
    movi.b32 r6, 0xFFFFFFFF
    movi.b32 r7, 0xFFFFFFFF
    movi.b32 r8, 0xFFFFFFFF
    movi.b32 r9, 0xFFFFFFFF
    if p0
      shfl.down.b32 r6, r0, r4
      movi.b32 r10, 2
      shfl.xor.b32 r7, r0, r10
      wred.add.u32 r8, r0
      wscan.excl.add.u32 r9, r0
    endif
    ballot.b64 r12:r13, p0
    st.device.b32 o1[r2], r6
    st.device.b32 o2[r2], r7
    st.device.b32 o3[r2], r8
    st.device.b32 o4[r2], r9
    st.device.b32 o5[r2], r12
    st.device.b32 o6[r2], r13
    """.replace("setp.eq.u32 p0, r5, 0\n", ""),
        "\n".join(f".arg o{i} buffer u32 readwrite" for i in range(1, 7)))
    n = 40
    outs = {f"o{i}": np.zeros(n, np.uint32) for i in range(1, 7)}
    emulate(m, "k", grid=1, workgroup=n, args=outs, wave_width=W)
    exp = {k: [] for k in outs}
    for t in range(n):
        lane, base = t % W, t - t % W
        wave = [u for u in range(base, min(base + W, n))]
        active = [u for u in wave if u % 2 == 0]
        if t % 2 == 0:
            src = lane + 1  # shfl.down by 1: odd source lane is inactive -> own value
            exp["o1"].append(t if (src >= W or base + src not in active) else base + src)
            s2 = lane ^ 2
            exp["o2"].append(base + s2 if (s2 < W and base + s2 in active) else t)
            exp["o3"].append(sum(active) & 0xFFFFFFFF)
            exp["o4"].append(sum(u for u in active if u < t))
        else:
            for k in ("o1", "o2", "o3", "o4"):
                exp[k].append(0xFFFFFFFF)
        mask = sum(1 << (u - base) for u in active)
        exp["o5"].append(mask & 0xFFFFFFFF)
        exp["o6"].append(mask >> 32)
    for k in exp:
        assert outs[k].tolist() == exp[k], (k, W)


@pytest.mark.parametrize("W", WIDTHS)
def test_wred_f32_butterfly_order(W):
    m = mod("""
    ld.device.b32 r3, x[r2]
    wred.add.f32 r4, r3
    st.device.b32 out[r2], r4
    """, ".arg x buffer f32 read\n.arg out buffer f32 readwrite")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(64) * 10.0 ** rng.integers(-8, 8, 64)).astype(np.float32)
    out = np.zeros(64, np.float32)
    emulate(m, "k", grid=1, workgroup=64, args={"x": x, "out": out}, wave_width=W)
    for w in range(64 // W):
        s = x[w * W:(w + 1) * W].copy()
        k = 1
        while k < W:
            s = (s + s[np.arange(W) ^ k]).astype(np.float32)
            k *= 2
        assert np.array_equal(out[w * W:(w + 1) * W].view(np.uint32), s.view(np.uint32))


def test_argument_errors_list_the_abi():
    m = mod("ldarg.b32 r3, n", ".arg n scalar u32\n.arg y buffer f32 readwrite")
    y = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"missing \['n'\].*n: u32, y: buffer f32 readwrite"):
        emulate(m, "k", args={"y": y})
    with pytest.raises(ValueError, match="out of range"):
        emulate(m, "k", args={"n": -1, "y": y})
    with pytest.raises(TypeError, match="takes an integer"):
        emulate(m, "k", args={"n": 1.5, "y": y})
    with pytest.raises(ValueError, match="C-contiguous"):
        emulate(m, "k", args={"n": 1, "y": np.zeros(8, np.float32)[::2]})
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        emulate(m, "k", args=[1, ro])
    with pytest.raises(ValueError, match="wave_width"):
        emulate(m, "k", args=[1, y], wave_width=4)


def test_flat_dialect_kernel():
    from anywave.isa.types import ArgKind
    src = open("src/anywave/examples/ref_vector_add.wave").read()
    m = assemble(src, "ref_vector_add.wave")
    k = m.kernels[0]
    assert k.args[0].name == "memory" and k.args[0].kind is ArgKind.BUFFER
    assert all(a.name.startswith("init_r") for a in k.args[1:])
    mem = np.zeros(768, np.uint8)
    w = mem.view(np.uint32)
    w[:64] = np.arange(64)
    w[64:128] = np.arange(64) * 1000
    emulate_flat(m, k.name, mem, {0: 0}, grid=1, workgroup=64, wave_width=16)
    assert w[128:].tolist() == [i * 1001 for i in range(64)]
    with pytest.raises(ValueError, match="r99"):
        emulate_flat(m, k.name, mem, {99: 1}, grid=1, workgroup=64)
