"""Cases for the asynchronous copies (docs/spec.md §4.5): ``cp.async.b32/b64/b128``,
``cp.async.commit`` and ``cp.async.wait N``.

Every kernel follows the rules of §4.5 (destination read only after the completing wait, by
other threads only after a barrier that follows it), so its output is defined; expectations are
computed here with NumPy from the inputs (which bytes land where), not by running anything.
"""

from __future__ import annotations

import numpy as np

from anywave.conformance.build import kernel_text, rng_for
from anywave.conformance.case import Case

GROUP = "async_copy"
WG = 64
_REG = {4: "r10", 8: "r10:r11", 16: "r10:r13"}


def _basic_cases() -> list[Case]:
    """Thread t of workgroup g copies its k-byte slot to local slot t; after the wait and a
    barrier it reads slot 63 - t (another thread's copy)."""
    out = []
    grid = 3
    for k in (4, 8, 16):
        name = f"async_copy_b{8 * k}"
        shift = k.bit_length() - 1
        body = [
            "mov.sr r0, sr_thread_linear_id",
            "mov.sr r1, sr_global_id_x",
            f"movi.u32 r2, {shift}",
            "shl.b32 r3, r0, r2",
            "shl.b32 r4, r1, r2",
            f"cp.async.b{8 * k} [r3], a[r4]",
            "cp.async.commit",
            "cp.async.wait 0",
            "barrier",
            f"movi.u32 r5, {WG - 1}",
            "sub.i32 r6, r5, r0",
            "shl.b32 r6, r6, r2",
            f"ld.local.b{8 * k} {_REG[k]}, [r6]",
            f"st.device.b{8 * k} out[r4], {_REG[k]}",
        ]
        n = grid * WG
        raw = rng_for(name).integers(0, 256, n * k, dtype=np.uint64).astype(np.uint8)
        slots = raw.reshape(grid, WG, k)
        exp = slots[:, ::-1, :].reshape(-1).copy()
        out.append(Case(
            name, GROUP,
            kernel_text(name, [("a", "buffer", "u8", "read"), ("out", "buffer", "u8", "write")], body,
                        local_memory=WG * k),
            (grid, 1, 1), (WG, 1, 1), {"a": raw, "out": np.full(n * k, 0xCD, np.uint8)}, {"out": exp},
            description=f"cp.async.b{8 * k}: every thread's slot, read back by another thread after wait + barrier"))
    return out


def _offset_case() -> Case:
    """Immediate offsets, negative on the local address and positive on the device one; a
    readwrite source buffer."""
    name = "async_copy_offsets"
    grid = 2
    n = grid * WG
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "mov.sr r1, sr_global_id_x",
        "movi.u32 r2, 3",
        "movi.u32 r7, 16",
        "shl.b32 r3, r0, r2",
        "add.i32 r3, r3, r7",  # 8t + 16
        "shl.b32 r4, r1, r2",  # 8 gid
        "cp.async.b64 [r3-16], a[r4+24]",  # local slot t <- device element gid + 3
        "cp.async.commit",
        "cp.async.wait 0",
        "barrier",
        f"movi.u32 r5, {WG - 1}",
        "sub.i32 r6, r5, r0",
        "shl.b32 r6, r6, r2",
        "add.i32 r6, r6, r7",
        "ld.local.b64 r10:r11, [r6-16]",
        "st.device.b64 out[r4], r10:r11",
    ]
    a = rng_for(name).integers(0, 1 << 63, n + 3, dtype=np.uint64)
    exp = a[3:].reshape(grid, WG)[:, ::-1].reshape(-1).copy()
    return Case(
        name, GROUP,
        kernel_text(name, [("a", "buffer", "u64", "readwrite"), ("out", "buffer", "u64", "write")], body,
                    local_memory=WG * 8),
        (grid, 1, 1), (WG, 1, 1), {"a": a.copy(), "out": np.full(n, 0xCDCDCDCDCDCDCDCD, np.uint64)},
        {"out": exp, "a": a}, description="cp.async with +/- immediates; the source buffer is unchanged")


def _groups_case() -> Case:
    """Four groups (one empty) completed one by one: wait 2, wait 1, wait 0, each followed by a
    read of the group it completed; then a barrier and a read of a neighbour's last copy."""
    name = "async_copy_groups"
    grid = 2
    n = grid * WG
    region = 4 * n
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "mov.sr r1, sr_global_id_x",
        "movi.u32 r2, 2",
        "shl.b32 r3, r0, r2",  # 4t
        "shl.b32 r4, r1, r2",  # 4 gid
        "cp.async.b32 [r3], a[r4]",
        "cp.async.commit",  # group 0
        "cp.async.commit",  # group 1: empty
        f"cp.async.b32 [r3+{4 * WG}], a[r4+{region}]",
        "cp.async.commit",  # group 2
        f"cp.async.b32 [r3+{8 * WG}], a[r4+{2 * region}]",
        "cp.async.commit",  # group 3
        "cp.async.wait 2",  # groups 0 and 1 complete
        "ld.local.b32 r10, [r3]",
        "cp.async.wait 1",  # group 2
        f"ld.local.b32 r11, [r3+{4 * WG}]",
        "cp.async.wait 0",  # group 3
        f"ld.local.b32 r12, [r3+{8 * WG}]",
        "cp.async.wait 3",  # nothing left: a no-op
        "barrier",
        "movi.u32 r5, 1",
        "add.i32 r6, r0, r5",
        f"movi.u32 r5, {WG - 1}",
        "and.b32 r6, r6, r5",
        "shl.b32 r6, r6, r2",  # 4 ((t + 1) mod 64)
        f"ld.local.b32 r13, [r6+{8 * WG}]",
        "movi.u32 r5, 4",
        "shl.b32 r7, r1, r5",  # 16 gid
        "st.device.b128 out[r7], r10:r13",
    ]
    a = rng_for(name).integers(0, 1 << 32, 3 * n, dtype=np.uint64).astype(np.uint32)
    regions = a.reshape(3, grid, WG)
    exp = np.stack([regions[0], regions[1], regions[2], np.roll(regions[2], -1, axis=1)], axis=-1).reshape(-1)
    return Case(
        name, GROUP,
        kernel_text(name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")], body,
                    local_memory=3 * 4 * WG),
        (grid, 1, 1), (WG, 1, 1), {"a": a, "out": np.full(4 * n, 0xCDCDCDCD, np.uint32)}, {"out": exp},
        description="commit groups (one empty) completed by wait 2 / 1 / 0 in turn")


def _pipeline_case() -> Case:
    """Double buffering: tile i + 1 is copied (b128, one 16-byte chunk per thread) while tile i
    is read; each iteration commits one group (empty at the end) and waits with N = 1."""
    name = "async_copy_pipeline"
    grid, tiles = 2, 5
    tile_words = 4 * WG
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "mov.sr r1, sr_workgroup_id_x",
        f"movi.u32 r2, {tiles}",
        "mul.i32 r3, r1, r2",
        "movi.u32 r5, 10",
        "shl.b32 r3, r3, r5",  # device byte offset of the workgroup's tile 0
        "movi.u32 r5, 4",
        "shl.b32 r6, r0, r5",  # 16 t
        "add.i32 r7, r3, r6",
        "cp.async.b128 [r6], a[r7]",  # tile 0 -> buffer 0
        "cp.async.commit",
        "movi.u32 r8, 0",  # i
        "movi.u32 r9, 0",  # acc
        "movi.u32 r20, 1024",
        "movi.u32 r21, 1",
        "loop",
        "setp.ge.u32 p0, r8, r2",
        "break p0",
        "add.i32 r10, r8, r21",
        "setp.lt.u32 p1, r10, r2",  # a tile i + 1 exists
        "and.b32 r11, r10, r21",
        "mul.i32 r11, r11, r20",
        "add.i32 r11, r11, r6",  # buffer (i + 1) mod 2
        "add.i32 r7, r7, r20",
        "@p1 cp.async.b128 [r11], a[r7]",
        "cp.async.commit",  # empty in the last iteration
        "cp.async.wait 1",  # tile i is complete
        "barrier",
        "movi.u32 r12, 7",
        "mul.i32 r13, r0, r12",
        "add.i32 r13, r13, r8",
        f"movi.u32 r12, {tile_words - 1}",
        "and.b32 r13, r13, r12",  # j = (7 t + i) mod 256
        "movi.u32 r12, 2",
        "shl.b32 r13, r13, r12",
        "and.b32 r14, r8, r21",
        "mul.i32 r14, r14, r20",
        "add.i32 r13, r13, r14",
        "ld.local.b32 r15, [r13]",
        "movi.u32 r12, 31",
        "mul.i32 r9, r9, r12",
        "add.i32 r9, r9, r15",  # acc = 31 acc + tile_i[j]
        "barrier",  # every read of buffer i mod 2 happens before the next copy into it
        "add.i32 r8, r8, r21",
        "endloop",
        "cp.async.wait 0",
        "mov.sr r16, sr_global_id_x",
        "movi.u32 r12, 2",
        "shl.b32 r16, r16, r12",
        "st.device.b32 out[r16], r9",
    ]
    a = rng_for(name).integers(0, 1 << 32, grid * tiles * tile_words, dtype=np.uint64).astype(np.uint32)
    tl = a.reshape(grid, tiles, tile_words)
    exp = np.zeros((grid, WG), np.uint32)
    for g in range(grid):
        for t in range(WG):
            acc = 0
            for i in range(tiles):
                acc = (acc * 31 + int(tl[g, i, (7 * t + i) % tile_words])) & 0xFFFFFFFF
            exp[g, t] = acc
    return Case(
        name, GROUP,
        kernel_text(name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")], body,
                    local_memory=2 * 1024),
        (grid, 1, 1), (WG, 1, 1), {"a": a, "out": np.full(grid * WG, 0xCDCDCDCD, np.uint32)},
        {"out": exp.reshape(-1)}, description="double-buffered pipeline: copy tile i+1 while reading tile i")


def _divergent_case() -> Case:
    """Odd threads copy inside an if (commit and wait there too), even threads store the
    complement with st.local; then a guarded copy by threads t < 32 into a second slot, the others
    storing; every thread reads its neighbour's (t ^ 1) and mirror's (63 - t) slots."""
    name = "async_copy_divergent"
    grid = 2
    n = grid * WG
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "mov.sr r1, sr_global_id_x",
        "movi.u32 r2, 3",
        "shl.b32 r3, r0, r2",  # 8t
        "shl.b32 r4, r1, r2",  # 8 gid
        "movi.u32 r5, 1",
        "and.b32 r6, r0, r5",
        "movi.u32 r5, 0",
        "setp.ne.u32 p0, r6, r5",
        "if p0",
        "cp.async.b64 [r3], a[r4]",
        "cp.async.commit",
        "cp.async.wait 0",
        "else",
        "ld.device.b64 r10:r11, a[r4]",
        "not.b32 r10, r10",
        "not.b32 r11, r11",
        "st.local.b64 [r3], r10:r11",
        "endif",
        f"movi.u32 r5, {WG // 2}",
        "setp.lt.u32 p1, r0, r5",
        "movi.u32 r2, 2",
        "shl.b32 r7, r0, r2",  # 4t
        "shl.b32 r8, r1, r2",  # 4 gid
        f"@p1 cp.async.b32 [r7+{8 * WG}], b[r8]",
        "cp.async.commit",
        "movi.u32 r12, 0x5a5a5a5a",
        f"@!p1 st.local.b32 [r7+{8 * WG}], r12",
        "cp.async.wait 0",
        "barrier",
        "movi.u32 r5, 1",
        "xor.b32 r9, r0, r5",
        "movi.u32 r2, 3",
        "shl.b32 r9, r9, r2",
        "ld.local.b64 r10:r11, [r9]",  # slot of t ^ 1
        f"movi.u32 r5, {WG - 1}",
        "sub.i32 r9, r5, r0",
        "movi.u32 r2, 2",
        "shl.b32 r9, r9, r2",
        f"ld.local.b32 r12, [r9+{8 * WG}]",  # second slot of 63 - t
        "movi.u32 r13, 0",
        "movi.u32 r2, 4",
        "shl.b32 r14, r1, r2",
        "st.device.b128 out[r14], r10:r13",
    ]
    rng = rng_for(name)
    a = rng.integers(0, 1 << 63, n, dtype=np.uint64)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    exp = np.zeros((grid, WG, 4), np.uint32)
    for g in range(grid):
        for t in range(WG):
            s = t ^ 1
            v = int(a[g * WG + s]) if s & 1 else (~int(a[g * WG + s])) & ((1 << 64) - 1)
            m = WG - 1 - t
            w = int(b[g * WG + m]) if m < WG // 2 else 0x5A5A5A5A
            exp[g, t] = [v & 0xFFFFFFFF, v >> 32, w, 0]
    return Case(
        name, GROUP,
        kernel_text(name, [("a", "buffer", "u64", "read"), ("b", "buffer", "u32", "read"),
                           ("out", "buffer", "u32", "write")], body, local_memory=12 * WG),
        (grid, 1, 1), (WG, 1, 1), {"a": a, "b": b, "out": np.full(4 * n, 0xCDCDCDCD, np.uint32)},
        {"out": exp.reshape(-1)}, description="cp.async under divergent if/else and under a guard")


def cases() -> list[Case]:
    return _basic_cases() + [_offset_case(), _groups_case(), _pipeline_case(), _divergent_case()]
