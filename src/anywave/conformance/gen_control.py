"""Control-flow, barrier, special-register and MMA cases. Expected values come from plain
sequential Python (structured control flow per thread is just a sequential program) and, where
wave ops or wave ids are involved, from the per-W wave layout."""

from __future__ import annotations

import numpy as np

from anywave.conformance.build import kernel_text, out_buffer, rng_for
from anywave.conformance.case import Case
from anywave.isa.types import SpecialRegister

M32 = 0xFFFFFFFF


def _prologue() -> list[str]:
    return [
        "mov.sr r0, sr_global_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "ld.device.b32 r10, a[r3]",
        "movi.u32 r20, 0",
        "movi.u32 r21, 0",
        "movi.u32 r5, 1",
        "movi.u32 r6, 0",
    ]


def _nested_divergence() -> Case:
    depth = 32
    name = "cf_nested_if_32"
    body = _prologue()
    for k in range(depth):
        body += [
            f"movi.u32 r1, {k}",
            "shr.u32 r7, r10, r1",
            "and.b32 r7, r7, r5",
            "setp.ne.u32 p0, r7, r6",
            f"movi.u32 r8, {k + 1}",
            "if p0",
            "add.i32 r20, r20, r8",
        ]
        if k % 5 == 4:
            body.append("xor.b32 r21, r21, r8")
    for k in reversed(range(depth)):
        body += [
            "else",
            f"movi.u32 r8, {1000 * (k + 1)}",
            "add.i32 r21, r21, r8",
            "endif",
            "add.i32 r20, r20, r5",
        ]
    body += ["st.device.b32 out[r3], r20", "st.device.b32 out2[r3], r21"]
    n = 128
    rng = rng_for(name)
    a = []
    for i in range(n):
        run = i % 33
        x = ((1 << run) - 1) | (int(rng.integers(0, 1 << 32)) << (run + 1))
        a.append(x & M32)
    e1, e2 = [], []
    for x in a:
        r20 = r21 = 0

        def level(k: int, x: int = x) -> None:
            nonlocal r20, r21
            if k == depth:
                return
            if (x >> k) & 1:
                r20 += k + 1
                if k % 5 == 4:
                    r21 ^= k + 1
                level(k + 1)
            else:
                r21 += 1000 * (k + 1)
            r20 += 1

        level(0)
        e1.append(r20 & M32)
        e2.append(r21 & M32)
    return Case(
        name,
        "control",
        kernel_text(
            name,
            [
                ("a", "buffer", "u32", "read"),
                ("out", "buffer", "u32", "write"),
                ("out2", "buffer", "u32", "write"),
            ],
            body,
        ),
        (2, 1, 1),
        (64, 1, 1),
        {"a": np.array(a, np.uint32), "out": out_buffer(n, 32), "out2": out_buffer(n, 32)},
        {"out": np.array(e1, np.uint32), "out2": np.array(e2, np.uint32)},
        description="ifs nested 32 deep with else branches, per-lane run lengths 0..32",
    )


def _loops() -> list[Case]:
    out = []
    n = 96
    rng = rng_for("cf_loop")
    a = rng.integers(0, 40, n).astype(np.uint32)
    stop = rng.integers(0, 50, n).astype(np.uint32)
    # loop: i counts up; continue on even i; break when i == stop (inside an if); guarded break at a
    body = _prologue() + [
        "ld.device.b32 r11, s[r3]",
        "movi.u32 r12, 0",
        "loop",
        "setp.ge.u32 p0, r12, r10",
        "break p0",
        "add.i32 r12, r12, r5",
        "and.b32 r7, r12, r5",
        "setp.eq.u32 p1, r7, r6",
        "continue p1",
        "setp.eq.u32 p2, r12, r11",
        "if p2",
        "movi.u32 r8, 1000",
        "add.i32 r20, r20, r8",
        "break",
        "endif",
        "add.i32 r20, r20, r12",
        "endloop",
        "add.i32 r20, r20, r5",
        "st.device.b32 out[r3], r20",
    ]
    exp = []
    for lim, st in zip(a.tolist(), stop.tolist(), strict=False):
        i = s = 0
        while True:
            if i >= lim:
                break
            i += 1
            if i % 2 == 0:
                continue
            if i == st:
                s += 1000
                break
            s += i
        exp.append(s + 1)
    out.append(
        Case(
            "cf_loop_break_continue",
            "control",
            kernel_text(
                "cf_loop_break_continue",
                [
                    ("a", "buffer", "u32", "read"),
                    ("s", "buffer", "u32", "read"),
                    ("out", "buffer", "u32", "write"),
                ],
                body,
            ),
            (3, 1, 1),
            (32, 1, 1),
            {"a": a, "s": stop, "out": out_buffer(n, 32)},
            {"out": np.array(exp, np.uint32)},
            description="break inside if inside loop; continue; break p",
        )
    )
    # nested loops with break !p and @p continue
    body = _prologue() + [
        "movi.u32 r12, 0",
        "loop",
        "movi.u32 r13, 0",
        "loop",
        "add.i32 r13, r13, r5",
        "setp.lt.u32 p0, r13, r12",
        "break !p0",
        "add.i32 r20, r20, r13",
        "endloop",
        "add.i32 r12, r12, r5",
        "and.b32 r7, r12, r5",
        "setp.ne.u32 p3, r7, r6",
        "@p3 continue",
        "add.i32 r21, r21, r12",
        "setp.lt.u32 p1, r12, r10",
        "break !p1",
        "endloop",
        "st.device.b32 out[r3], r20",
        "st.device.b32 out2[r3], r21",
    ]
    a2 = (np.arange(n) % 13).astype(np.uint32)
    e1, e2 = [], []
    for lim in a2.tolist():
        r12 = r20 = r21 = 0
        while True:
            r13 = 0
            while True:
                r13 += 1
                if not r13 < r12:
                    break
                r20 += r13
            r12 += 1
            if r12 & 1:
                continue
            r21 += r12
            if not r12 < lim:
                break
        e1.append(r20)
        e2.append(r21)
    out.append(
        Case(
            "cf_nested_loops",
            "control",
            kernel_text(
                "cf_nested_loops",
                [
                    ("a", "buffer", "u32", "read"),
                    ("out", "buffer", "u32", "write"),
                    ("out2", "buffer", "u32", "write"),
                ],
                body,
            ),
            (3, 1, 1),
            (32, 1, 1),
            {"a": a2, "out": out_buffer(n, 32), "out2": out_buffer(n, 32)},
            {"out": np.array(e1, np.uint32), "out2": np.array(e2, np.uint32)},
            description="nested loops, break !p, @p continue",
        )
    )
    return out


def _guarded_write_after_wave_loop() -> Case:
    """A loop whose trip count differs between the lanes of a wave and that holds a wave
    operation (so the mask-stack lowerings of PTX and the C family walk it with every lane), a
    register and a predicate written in it, then written again after it under a guard. The
    guarded write leaves the loop's values in the lanes whose guard is false, so a lane that
    left the loop early must not see the later iterations' writes (CI of stop 38: the need
    analysis took a guarded write for a kill and ran the loop's writes unpredicated)."""
    name = "cf_guarded_write_after_wave_loop"
    n = 160
    rng = rng_for(name)
    trips = rng.integers(0, 4, n).astype(np.uint32)
    vals = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    limit = 3 << 30
    body = _prologue() + [
        "ld.device.b32 r11, b[r3]",
        "mov.b32 r12, r10",
        "movi.u32 r13, 7",
        "setp.eq.u32 p2, r5, r6",
        "loop",
        "setp.eq.u32 p0, r12, r6",
        "break p0",
        "any.pred p1, p0",
        "add.i32 r13, r13, r11",
        "setp.ne.u32 p2, r12, r6",
        "sub.i32 r12, r12, r5",
        "endloop",
        f"movi.u32 r14, {limit}",
        "setp.gt.u32 p3, r11, r14",
        "@p3 movi.u32 r13, 5",
        "@p3 setp.ne.u32 p2, r5, r6",
        "selp.b32 r15, r5, r6, p2",
        "st.device.b32 out[r3], r13",
        "st.device.b32 out2[r3], r15",
    ]
    e1, e2 = [], []
    for t, v in zip(trips.tolist(), vals.tolist(), strict=True):
        big = v > limit
        e1.append(5 if big else (7 + t * v) & M32)
        e2.append(1 if (big or t > 0) else 0)
    return Case(
        name,
        "control",
        kernel_text(
            name,
            [
                ("a", "buffer", "u32", "read"),
                ("b", "buffer", "u32", "read"),
                ("out", "buffer", "u32", "write"),
                ("out2", "buffer", "u32", "write"),
            ],
            body,
        ),
        (2, 1, 1),
        (80, 1, 1),
        {"a": trips, "b": vals, "out": out_buffer(n, 32), "out2": out_buffer(n, 32)},
        {"out": np.array(e1, np.uint32), "out2": np.array(e2, np.uint32)},
        description="divergent loop with a wave op; guarded writes after it keep the loop's values",
    )


def _halt() -> Case:
    name = "cf_halt_divergent"
    n = 100
    body = _prologue() + [
        "st.device.b32 out[r3], r5",
        "and.b32 r7, r10, r5",
        "setp.ne.u32 p0, r7, r6",
        "if p0",
        "movi.u32 r8, 3",
        "and.b32 r7, r10, r8",
        "setp.eq.u32 p1, r7, r8",
        "@p1 halt",
        "endif",
        "movi.u32 r8, 5",
        "and.b32 r7, r10, r8",
        "setp.eq.u32 p2, r7, r8",
        "halt p2",
        "wred.add.u32 r20, r5",
        "st.device.b32 out2[r3], r20",
    ]
    rng = rng_for(name)
    a = rng.integers(0, 16, n).astype(np.uint32)
    alive = [not ((x & 3) == 3 or (x & 5) == 5) for x in a.tolist()]

    def expected(w: int) -> dict[str, np.ndarray]:
        o2 = out_buffer(n, 32)
        for s in range(0, n, w):
            ids = [t for t in range(s, min(s + w, n)) if alive[t]]
            for t in ids:
                o2[t] = len(ids)
        return {"out": np.ones(n, np.uint32), "out2": o2}

    return Case(
        name,
        "control",
        kernel_text(
            name,
            [
                ("a", "buffer", "u32", "read"),
                ("out", "buffer", "u32", "write"),
                ("out2", "buffer", "u32", "write"),
            ],
            body,
        ),
        (1, 1, 1),
        (n, 1, 1),
        {"a": a, "out": out_buffer(n, 32), "out2": out_buffer(n, 32)},
        expected,
        requires=("wave_ops",),
        description="halt under divergence, then a wave op counting survivors",
    )


def _call_ret() -> Case:
    name = "cf_call_ret"
    funcs = """.func cf_helper_inner
    movi.u32 r8, 10000
    add.i32 r20, r20, r8
    movi.u32 r8, 4
    and.b32 r7, r10, r8
    setp.ne.u32 p4, r7, r6
    ret p4
    add.i32 r20, r20, r8
.end
.func cf_helper
    add.i32 r20, r20, r5
    and.b32 r7, r10, r5
    setp.ne.u32 p2, r7, r6
    if p2
      movi.u32 r8, 2
      and.b32 r7, r10, r8
      setp.ne.u32 p3, r7, r6
      if p3
        ret
      endif
    endif
    call cf_helper_inner
    movi.u32 r8, 10
    add.i32 r20, r20, r8
.end
"""
    body = _prologue() + [
        "call cf_helper",
        "movi.u32 r8, 100",
        "add.i32 r20, r20, r8",
        "call cf_helper_inner",
        "st.device.b32 out[r3], r20",
        "ret",
        "st.device.b32 out[r3], r6",
    ]
    n = 64
    a = (np.arange(n) % 8).astype(np.uint32)

    def inner(x: int) -> int:
        return 10000 + (0 if x & 4 else 4)

    exp = []
    for x in a.tolist():
        r = 1
        if not ((x & 1) and (x & 2)):
            r += inner(x) + 10
        r += 100 + inner(x)
        exp.append(r)
    return Case(
        name,
        "control",
        kernel_text(
            name, [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")], body, funcs=funcs
        ),
        (1, 1, 1),
        (n, 1, 1),
        {"a": a, "out": out_buffer(n, 32)},
        {"out": np.array(exp, np.uint32)},
        description="ret inside nested ifs in a function, ret p, nested call, kernel-level ret",
    )


def _barrier_reduce(wg: int, grid: int) -> Case:
    name = f"sync_tree_reduce_{wg}"
    body = [
        "mov.sr r0, sr_global_id_x",
        "mov.sr r9, sr_thread_linear_id",
        "mov.sr r15, sr_workgroup_id_x",
        "movi.u32 r1, 2",
        "shl.b32 r3, r0, r1",
        "shl.b32 r4, r9, r1",
        "ld.device.b32 r10, a[r3]",
        "st.local.b32 [r4], r10",
        "barrier",
        f"movi.u32 r12, {wg // 2}",
        "movi.u32 r6, 0",
        "movi.u32 r5, 1",
        "loop",
        "setp.eq.u32 p0, r12, r6",
        "break p0",
        "setp.lt.u32 p1, r9, r12",
        "if p1",
        "shl.b32 r7, r12, r1",
        "add.i32 r7, r7, r4",
        "ld.local.b32 r13, [r4]",
        "ld.local.b32 r14, [r7]",
        "add.i32 r13, r13, r14",
        "st.local.b32 [r4], r13",
        "endif",
        "barrier",
        "shr.u32 r12, r12, r5",
        "endloop",
        "setp.eq.u32 p2, r9, r6",
        "shl.b32 r8, r15, r1",
        "if p2",
        "ld.local.b32 r13, [r6]",
        "st.device.b32 out[r8], r13",
        "endif",
        "fence .workgroup, .release",
    ]
    rng = rng_for(name)
    a = rng.integers(0, 1 << 32, wg * grid, dtype=np.uint64).astype(np.uint32)
    exp = np.array(
        [int(a[g * wg : (g + 1) * wg].astype(np.uint64).sum()) & M32 for g in range(grid)], np.uint32
    )
    return Case(
        name,
        "sync",
        kernel_text(
            name,
            [("a", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")],
            body,
            local_memory=wg * 4,
        ),
        (grid, 1, 1),
        (wg, 1, 1),
        {"a": a, "out": out_buffer(grid, 32)},
        {"out": exp},
        description=f"local-memory tree reduction, barrier in a loop, workgroup {wg}",
    )


_SREGS = list(SpecialRegister)


def _sregs(grid: tuple[int, int, int], wg: tuple[int, int, int], name: str) -> Case:
    k = len(_SREGS)
    body = [
        "mov.sr r1, sr_thread_linear_id",
        "mov.sr r2, sr_workgroup_id_x",
        "mov.sr r3, sr_workgroup_id_y",
        "mov.sr r4, sr_workgroup_id_z",
        f"movi.u32 r5, {grid[0]}",
        f"movi.u32 r6, {grid[1]}",
        "mad.i32 r7, r4, r6, r3",
        "mad.i32 r7, r7, r5, r2",  # workgroup linear id
        f"movi.u32 r8, {wg[0] * wg[1] * wg[2]}",
        "mad.i32 r7, r7, r8, r1",  # global linear id
        f"movi.u32 r8, {4 * k}",
        "mul.i32 r9, r7, r8",
    ]
    for j, sr in enumerate(_SREGS):
        body += [f"mov.sr r10, {sr.spelling}", f"st.device.b32 out[r9+{4 * j}], r10"]
    sx, sy, sz = wg
    nthreads = sx * sy * sz
    total = nthreads * grid[0] * grid[1] * grid[2]

    def expected(w: int) -> dict[str, np.ndarray]:
        o = np.zeros((total, k), np.uint32)
        for gz in range(grid[2]):
            for gy in range(grid[1]):
                for gx in range(grid[0]):
                    wl = gx + gy * grid[0] + gz * grid[0] * grid[1]
                    for z in range(sz):
                        for y in range(sy):
                            for x in range(sx):
                                t = x + y * sx + z * sx * sy
                                v = {
                                    "THREAD_ID_X": x,
                                    "THREAD_ID_Y": y,
                                    "THREAD_ID_Z": z,
                                    "WAVE_ID": t // w,
                                    "LANE_ID": t % w,
                                    "WORKGROUP_ID_X": gx,
                                    "WORKGROUP_ID_Y": gy,
                                    "WORKGROUP_ID_Z": gz,
                                    "WORKGROUP_SIZE_X": sx,
                                    "WORKGROUP_SIZE_Y": sy,
                                    "WORKGROUP_SIZE_Z": sz,
                                    "GRID_SIZE_X": grid[0],
                                    "GRID_SIZE_Y": grid[1],
                                    "GRID_SIZE_Z": grid[2],
                                    "WAVE_WIDTH": w,
                                    "NUM_WAVES": -(-nthreads // w),
                                    "GLOBAL_ID_X": gx * sx + x,
                                    "GLOBAL_ID_Y": gy * sy + y,
                                    "GLOBAL_ID_Z": gz * sz + z,
                                    "THREAD_LINEAR_ID": t,
                                    "MMA_SUPPORTED": 1, "MMA_M": 4, "MMA_N": 4, "MMA_K": 4,
                                }
                                o[wl * nthreads + t] = [v[sr.name] for sr in _SREGS]
        return {"out": o.reshape(-1)}

    return Case(
        name,
        "control",
        kernel_text(name, [("out", "buffer", "u32", "write")], body),
        grid,
        wg,
        {"out": out_buffer(total * k, 32)},
        expected,
        description="every special register, 3-D launch",
    )


def _mma(t: str) -> Case:
    name = f"mma_{t}"
    rng = rng_for(name)
    import ml_dtypes

    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    # small multiples of 1/2: every product and partial sum is exact in f32, so D is exact under
    # any accumulation order (class "bounded" becomes exact for these inputs)
    A = (rng.integers(-6, 7, (16, 16)) / 2).astype(dt)
    B = (rng.integers(-6, 7, (16, 16)) / 2).astype(dt)
    C = rng.integers(-50, 51, (16, 16)).astype(np.float32)
    D = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
    words = np.concatenate(
        [
            A.reshape(-1).view(np.uint16).view(np.uint32),
            B.reshape(-1).view(np.uint16).view(np.uint32),
            C.reshape(-1).view(np.uint32),
        ]
    )  # 128 + 128 + 256 words
    body = [
        "mov.sr r0, sr_thread_linear_id",
        "mov.sr r15, sr_wave_id",
        "mov.sr r16, sr_num_waves",
        "movi.u32 r1, 2",
        "movi.u32 r5, 1",
        "movi.u32 r6, 0",
        "movi.u32 r17, 64",
        "mov.b32 r7, r0",
        "loop",
        "setp.ge.u32 p0, r7, r17".replace("r17", "r18"),
        "break p0",
        "shl.b32 r8, r7, r1",
        "ld.device.b32 r10, src[r8]",
        "st.local.b32 [r8], r10",
        "add.i32 r7, r7, r17",
        "endloop",
        "barrier",
        "movi.u32 r1, 10",
        "shl.b32 r20, r15, r1",
        "movi.u32 r1, 2048",
        "add.i32 r20, r20, r1",  # D
        "movi.u32 r21, 0",
        "movi.u32 r22, 512",
        "movi.u32 r23, 1024",
        f"mma.m16n16k16.f32.{t} r20, r21, r22, r23",
        "barrier",
        "movi.u32 r1, 2",
        "movi.u32 r12, 0",
        "loop",
        "setp.ge.u32 p0, r12, r16",
        "break p0",
        "mov.b32 r7, r0",
        "loop",
        "movi.u32 r19, 256",
        "setp.ge.u32 p1, r7, r19",
        "break p1",
        "movi.u32 r9, 8",
        "shl.b32 r10, r12, r9",
        "add.i32 r10, r10, r7",
        "shl.b32 r10, r10, r1",  # out word
        "movi.u32 r9, 10",
        "shl.b32 r11, r12, r9",
        "shl.b32 r13, r7, r1",
        "add.i32 r11, r11, r13",
        "movi.u32 r9, 2048",
        "add.i32 r11, r11, r9",
        "ld.local.b32 r14, [r11]",
        "st.device.b32 out[r10], r14",
        "add.i32 r7, r7, r17",
        "endloop",
        "add.i32 r12, r12, r5",
        "endloop",
    ]
    body.insert(0, "movi.u32 r18, 512")
    maxw = 8

    def expected(w: int) -> dict[str, np.ndarray]:
        o = out_buffer(maxw * 256, 32)
        for k in range(64 // w):
            o[k * 256 : (k + 1) * 256] = D.reshape(-1).view(np.uint32)
        return {"out": o}

    return Case(
        name,
        "mma",
        kernel_text(
            name,
            [("src", "buffer", "u32", "read"), ("out", "buffer", "u32", "write")],
            body,
            local_memory=2048 + maxw * 1024,
        ),
        (1, 1, 1),
        (64, 1, 1),
        {"src": words.astype(np.uint32), "out": out_buffer(maxw * 256, 32)},
        expected,
        requires=("mma", "wave_ops", t),
        description=f"mma.m16n16k16.f32.{t}, one tile per wave",
    )


def _mma_loop(t: str, steps: int = 3, groups: int = 3) -> Case:
    """``mma`` accumulating in place (D aliases C) inside a run-time loop whose last trip
    ends with every lane broken out, in several waves of several workgroups (issue 15: the
    PTX lowering ran the ``mma`` once more after the loop's final ``break``)."""
    name = f"mma_loop_{t}"
    rng = rng_for(name)
    import ml_dtypes

    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    maxw = 8  # waves of a 64-thread workgroup at W = 8
    # small multiples of 1/2: every product and partial sum is exact in f32, so the result
    # is exact under any accumulation order (class "bounded" becomes exact for these inputs)
    A = (rng.integers(-6, 7, (steps, 16, 16)) / 2).astype(dt)
    B = (rng.integers(-6, 7, (steps, 16, 16)) / 2).astype(dt)
    C = rng.integers(-50, 51, (groups * maxw, 16, 16)).astype(np.float32)
    prod = sum(A[s].astype(np.float64) @ B[s].astype(np.float64) for s in range(steps))
    body = [
        "ldarg.b32 r30, steps",
        "mov.sr r0, sr_lane_id",
        "mov.sr r1, sr_wave_id",
        "mov.sr r2, sr_wave_width",
        "mov.sr r3, sr_workgroup_id_x",
        "mov.sr r4, sr_num_waves",
        "movi.u32 r5, 11",
        "shl.b32 r6, r1, r5",  # A tile: wave * 2048
        "movi.u32 r7, 512",
        "add.i32 r8, r6, r7",  # B tile
        "movi.u32 r7, 1024",
        "add.i32 r9, r6, r7",  # C = D tile
        "mul.i32 r19, r3, r4",
        "add.i32 r19, r19, r1",  # q = workgroup * waves + wave
        "movi.u32 r13, 8",
        "shl.b32 r20, r19, r13",  # q * 256
        "mov.b32 r12, r0",
        "loop",
        "movi.u32 r13, 256",
        "setp.ge.u32 p1, r12, r13",
        "break p1",
        "add.i32 r14, r20, r12",
        "movi.u32 r13, 2",
        "shl.b32 r14, r14, r13",
        "ld.device.b32 r15, csrc[r14]",
        "shl.b32 r17, r12, r13",
        "add.i32 r18, r17, r9",
        "st.local.b32 [r18], r15",
        "add.i32 r12, r12, r2",
        "endloop",
        "movi.u32 r11, 0",
        "loop",
        "setp.ge.u32 p0, r11, r30",
        "break p0",
        "mov.b32 r12, r0",
        "loop",
        "movi.u32 r13, 128",
        "setp.ge.u32 p1, r12, r13",
        "break p1",
        "movi.u32 r13, 7",
        "shl.b32 r14, r11, r13",
        "add.i32 r14, r14, r12",
        "movi.u32 r13, 2",
        "shl.b32 r14, r14, r13",
        "ld.device.b32 r15, asrc[r14]",
        "ld.device.b32 r16, bsrc[r14]",
        "shl.b32 r17, r12, r13",
        "add.i32 r18, r17, r6",
        "st.local.b32 [r18], r15",
        "add.i32 r18, r17, r8",
        "st.local.b32 [r18], r16",
        "add.i32 r12, r12, r2",
        "endloop",
        "barrier",
        f"mma.m16n16k16.f32.{t} r9, r6, r8, r9",
        "barrier",
        "movi.u32 r13, 1",
        "add.i32 r11, r11, r13",
        "endloop",
        "mov.b32 r12, r0",
        "loop",
        "movi.u32 r13, 256",
        "setp.ge.u32 p1, r12, r13",
        "break p1",
        "add.i32 r14, r20, r12",
        "movi.u32 r13, 2",
        "shl.b32 r14, r14, r13",
        "shl.b32 r17, r12, r13",
        "add.i32 r18, r17, r9",
        "ld.local.b32 r15, [r18]",
        "st.device.b32 out[r14], r15",
        "add.i32 r12, r12, r2",
        "endloop",
    ]

    def expected(w: int) -> dict[str, np.ndarray]:
        o = out_buffer(groups * maxw * 256, 32)
        nq = groups * (64 // w)
        o[: nq * 256] = (prod[None] + C[:nq].astype(np.float64)).astype(np.float32).reshape(-1).view(np.uint32)
        return {"out": o}

    return Case(
        name,
        "mma",
        kernel_text(
            name,
            [("asrc", "buffer", "u32", "read"), ("bsrc", "buffer", "u32", "read"),
             ("csrc", "buffer", "u32", "read"), ("out", "buffer", "u32", "write"),
             ("steps", "scalar", "u32", "read")],
            body,
            local_memory=maxw * 2048,
        ),
        (groups, 1, 1),
        (64, 1, 1),
        {"asrc": A.reshape(-1).view(np.uint32).copy(), "bsrc": B.reshape(-1).view(np.uint32).copy(),
         "csrc": C.reshape(-1).view(np.uint32).copy(), "out": out_buffer(groups * maxw * 256, 32),
         "steps": np.uint32(steps)},
        expected,
        requires=("mma", "wave_ops", t),
        description=f"mma.m16n16k16.f32.{t}: D aliases C, {steps} trips of a run-time loop, "
                    f"{groups} workgroups of several waves",
    )


def cases() -> list[Case]:
    return (
        [_nested_divergence()]
        + _loops()
        + [_guarded_write_after_wave_loop()]
        + [_halt(), _call_ret()]
        + [_barrier_reduce(64, 3), _barrier_reduce(128, 2), _barrier_reduce(256, 1)]
        + [
            _sregs((2, 3, 2), (4, 3, 2), "sreg_3d"),
            _sregs((3, 1, 1), (20, 1, 1), "sreg_partial"),
            _sregs((1, 2, 1), (8, 2, 4), "sreg_3d_64"),
        ]
        + [_mma("f16"), _mma("bf16"), _mma_loop("f16"), _mma_loop("bf16")]
    )
