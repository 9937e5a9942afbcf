"""MMA fragment cases (docs/spec.md §8.14), groups ``mma_frag``, ``mma_group`` (the wave-group
MMA: its own group, so that a target lacking it fails only those cases) and ``mma_acc`` (the
accumulator operations and ``mma.group.bt``, capability ``mma_acc``). Expected values come from
NumPy in float64 on inputs whose products and sums are exact in f32 (wave scope: class
``bounded`` is exact for them) and from :mod:`anywave.conformance.refsem`'s exact ``fma``
chain (thread scope: the order is defined)."""

from __future__ import annotations

import numpy as np

from anywave.conformance import refsem
from anywave.conformance.build import kernel_text, out_buffer, rng_for
from anywave.conformance.case import Case

MAXW = 8  # waves of a 64-thread workgroup at W = 8


def _wave_gemm(t: str, steps: int = 2, groups: int = 2) -> Case:
    """A K loop over fragments: A from device memory, B through local memory (padded row
    stride 48 bytes), a second product with A through local memory and B from device memory,
    the accumulator loaded from a wider device matrix (row stride 128 bytes), kept in place
    (d = c) across a run-time loop, then scaled, biased and stored to device and local memory."""
    name = f"frag_gemm_{t}"
    rng = rng_for(name)
    import ml_dtypes

    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    nq = groups * MAXW
    A = (rng.integers(-6, 7, (16, 16 * steps)) / 2).astype(dt)
    A2 = (rng.integers(-6, 7, (16, 16 * steps)) / 2).astype(dt)
    B = (rng.integers(-6, 7, (16 * steps, 16)) / 2).astype(dt)
    B2 = (rng.integers(-6, 7, (16 * steps, 16)) / 2).astype(dt)
    C0 = rng.integers(-50, 51, (16 * nq, 32)).astype(np.float32)
    bias = (rng.integers(-20, 21, 32) / 4).astype(np.float32)
    f64 = np.float64
    prod = A.astype(f64) @ B.astype(f64) + A2.astype(f64) @ B2.astype(f64)
    T = f"{t}"
    body = [
        "ldarg.b32 r30, steps",
        "mov.sr r0, sr_lane_id", "mov.sr r1, sr_wave_id", "mov.sr r2, sr_wave_width",
        "mov.sr r3, sr_workgroup_id_x", "mov.sr r4, sr_num_waves",
        "mul.i32 r5, r3, r4", "add.i32 r5, r5, r1",  # q
        "movi.u32 r6, 2816", "mul.i32 r7, r1, r6",  # B tile in local memory
        "movi.u32 r6, 768", "add.i32 r8, r7, r6",  # A2 tile
        "add.i32 r9, r8, r6",  # output tile, row stride 80
        "movi.u32 r6, 11", "shl.b32 r10, r5, r6",
        "movi.u32 r6, 1", "and.b32 r11, r5, r6", "movi.u32 r6, 6", "shl.b32 r11, r11, r6",
        "add.i32 r10, r10, r11",  # byte offset of the wave's tile in C0 / out2
        "movi.u32 r12, 128",
        "mma.load.c.device.m16n16k16.f32 f2, c0[r10], r12",
        "movi.u32 r6, 5", "shl.b32 r13, r30, r6",  # A row stride: 32 * steps bytes
        "movi.u32 r14, 48", "movi.u32 r15, 32", "movi.u32 r16, 0",
        "loop",
        "setp.ge.u32 p0, r16, r30", "break p0",
        "mov.b32 r17, r0",
        "loop",
        "movi.u32 r6, 128", "setp.ge.u32 p1, r17, r6", "break p1",
        "movi.u32 r6, 3", "shr.u32 r18, r17, r6",  # row
        "movi.u32 r6, 7", "and.b32 r19, r17, r6", "movi.u32 r6, 2", "shl.b32 r19, r19, r6",  # byte in row
        "movi.u32 r6, 4", "shl.b32 r20, r16, r6", "add.i32 r20, r20, r18",
        "movi.u32 r6, 5", "shl.b32 r20, r20, r6", "add.i32 r20, r20, r19",
        "ld.device.b32 r21, b[r20]",
        "mul.i32 r22, r18, r14", "add.i32 r22, r22, r19",
        "add.i32 r23, r22, r7", "st.local.b32 [r23], r21",
        "mul.i32 r20, r18, r13", "movi.u32 r6, 5", "shl.b32 r24, r16, r6",
        "add.i32 r20, r20, r24", "add.i32 r20, r20, r19",
        "ld.device.b32 r21, a2[r20]",
        "add.i32 r23, r22, r8", "st.local.b32 [r23], r21",
        "add.i32 r17, r17, r2",
        "endloop",
        "barrier",  # other lanes' stores before the fragment loads (spec §5.3)
        "movi.u32 r6, 5", "shl.b32 r24, r16, r6",
        f"mma.load.a.device.m16n16k16.{T} f0, a[r24], r13",
        f"mma.load.b.local.m16n16k16.{T} f1, [r7], r14",
        f"mma.mma.m16n16k16.f32.{T} f2, f0, f1, f2",
        f"mma.load.a.local.m16n16k16.{T} f3, [r8], r14",
        "movi.u32 r6, 9", "shl.b32 r25, r16, r6",
        f"mma.load.b.device.m16n16k16.{T} f4, b2[r25], r15",
        f"mma.mma.m16n16k16.f32.{T} f2, f3, f4, f2",
        "barrier",  # the loads before the next trip's stores
        "movi.u32 r6, 1", "add.i32 r16, r16, r6",
        "endloop",
        "ldarg.b32 r26, half",
        "mma.scale.m16n16k16.f32 f2, f2, r26",
        "mma.bias.device.m16n16k16.f32 f2, f2, bias[r11]",
        "movi.u32 r27, 80",
        "mma.store.local.m16n16k16.f32 [r9], f2, r27",
        "barrier",
        "mma.load.c.local.m16n16k16.f32 f6, [r9], r27",
        "mma.store.device.m16n16k16.f32 out2[r10], f6, r12",
        # a filled accumulator: out3 = A_last B_last + 0.5 (f0, f1 hold the last step's tiles)
        "mma.fill.m16n16k16.f32 f5, r26",
        f"mma.mma.m16n16k16.f32.{T} f5, f0, f1, f5",
        "movi.u32 r6, 10", "shl.b32 r28, r5, r6", "movi.u32 r29, 64",
        "mma.store.device.m16n16k16.f32 out3[r28], f5, r29",
        "mov.b32 r17, r0",
        "loop",
        "movi.u32 r6, 256", "setp.ge.u32 p1, r17, r6", "break p1",
        "movi.u32 r6, 4", "shr.u32 r18, r17, r6",
        "movi.u32 r6, 15", "and.b32 r19, r17, r6",
        "mul.i32 r22, r18, r27", "movi.u32 r6, 2", "shl.b32 r19, r19, r6",
        "add.i32 r22, r22, r19", "add.i32 r22, r22, r9",
        "ld.local.b32 r21, [r22]",
        "movi.u32 r6, 8", "shl.b32 r20, r5, r6", "add.i32 r20, r20, r17",
        "movi.u32 r6, 2", "shl.b32 r20, r20, r6",
        "st.device.b32 out1[r20], r21",
        "add.i32 r17, r17, r2",
        "endloop",
    ]

    last = (A[:, 16 * (steps - 1):].astype(f64) @ B[16 * (steps - 1):].astype(f64) + 0.5).astype(np.float32)

    def expected(w: int) -> dict[str, np.ndarray]:
        o1 = out_buffer(nq * 256, 32)
        o3 = out_buffer(nq * 256, 32)
        o2 = out_buffer(16 * nq * 32, 32).reshape(16 * nq, 32)
        for q in range(groups * (64 // w)):
            h = 16 * (q & 1)
            d = ((C0[16 * q:16 * q + 16, h:h + 16].astype(f64) + prod) * 0.5 + bias[h:h + 16]).astype(np.float32)
            o1[256 * q:256 * (q + 1)] = d.reshape(-1).view(np.uint32)
            o2[16 * q:16 * q + 16, h:h + 16] = d.view(np.uint32)
            o3[256 * q:256 * (q + 1)] = last.reshape(-1).view(np.uint32)
        return {"out1": o1, "out2": o2.reshape(-1), "out3": o3}

    u32 = np.uint32
    return Case(
        name, "mma_frag",
        kernel_text(name, [("a", "buffer", "u16", "read"), ("a2", "buffer", "u16", "read"),
                           ("b", "buffer", "u16", "read"), ("b2", "buffer", "u16", "read"),
                           ("c0", "buffer", "f32", "read"), ("bias", "buffer", "f32", "read"),
                           ("out1", "buffer", "u32", "write"), ("out2", "buffer", "u32", "write"),
                           ("out3", "buffer", "u32", "write"), ("steps", "scalar", "u32", "read"),
                           ("half", "scalar", "f32", "read")],
                    body, local_memory=MAXW * 2816),
        (groups, 1, 1), (64, 1, 1),
        {"a": A.reshape(-1).view(np.uint16).copy(), "a2": A2.reshape(-1).view(np.uint16).copy(),
         "b": B.reshape(-1).view(np.uint16).copy(), "b2": B2.reshape(-1).view(np.uint16).copy(),
         "c0": C0.reshape(-1).copy(), "bias": bias, "out1": out_buffer(nq * 256, 32),
         "out2": out_buffer(16 * nq * 32, 32), "out3": out_buffer(nq * 256, 32), "steps": u32(steps),
         "half": np.float32(0.5)},
        expected,
        requires=("mma", "wave_ops", t),
        description=f"m16n16k16 {t} fragments: device and local loads, accumulator in place over a "
                    "run-time loop, scale, bias, stores",
    )


def _thread_m4n4k4(groups: int = 2, size: int = 48) -> Case:
    """Thread-scope 4x4 f32 fragments (the reference toolchain's shape) under divergence:
    odd threads accumulate twice; the order of the fma chain is defined (exact results)."""
    name = "frag_m4n4k4"
    rng = rng_for(name)
    nthr = groups * size
    data = rng.standard_normal((nthr, 48)).astype(np.float32)
    scale = np.float32(1.5)
    F = refsem.F32
    sb = int(scale.view(np.uint32))

    def chain(a: list[int], b: list[int], c: list[int]) -> list[int]:
        out = []
        for i in range(4):
            for j in range(4):
                s = c[4 * i + j]
                for k in range(4):
                    s = refsem.f_fma(F, a[4 * i + k], b[4 * k + j], s)
                out.append(s)
        return out

    o1 = np.zeros((nthr, 16), np.uint32)
    o2 = np.zeros((nthr, 16), np.uint32)
    bits = data.view(np.uint32)
    for g in range(nthr):
        a, b, c = ([int(v) for v in bits[g, 16 * r:16 * r + 16]] for r in range(3))
        s = chain(a, b, c)
        if (g % size) & 1:
            s = chain(a, b, s)
        o1[g] = [refsem.f_mul(F, v, sb) for v in s]
        o2[g] = chain(a, b, [sb] * 16)

    copy_in = [
        "movi.u32 r6, 0", "loop", "movi.u32 r7, 48", "setp.ge.u32 p0, r6, r7", "break p0",
        "mul.i32 r8, r3, r7", "add.i32 r8, r8, r6", "movi.u32 r7, 2", "shl.b32 r8, r8, r7",
        "ld.device.b32 r9, src[r8]", "shl.b32 r10, r6, r7", "add.i32 r10, r10, r5",
        "st.local.b32 [r10], r9", "movi.u32 r7, 1", "add.i32 r6, r6, r7", "endloop",
    ]

    def copy_out(buf: str, base: str) -> list[str]:
        return ["movi.u32 r6, 0", "loop", "movi.u32 r7, 16", "setp.ge.u32 p0, r6, r7", "break p0",
                "mul.i32 r8, r3, r7", "add.i32 r8, r8, r6", "movi.u32 r7, 2", "shl.b32 r8, r8, r7",
                "shl.b32 r10, r6, r7", f"add.i32 r10, r10, {base}", "ld.local.b32 r9, [r10]",
                f"st.device.b32 {buf}[r8], r9", "movi.u32 r7, 1", "add.i32 r6, r6, r7", "endloop"]

    body = [
        "mov.sr r0, sr_thread_linear_id", "mov.sr r1, sr_workgroup_id_x", "mov.sr r2, sr_workgroup_size_x",
        "mul.i32 r3, r1, r2", "add.i32 r3, r3, r0",
        "movi.u32 r4, 192", "mul.i32 r5, r0, r4",
        *copy_in,
        "movi.u32 r11, 16",
        "mma.load.a.local.m4n4k4.f32 f0, [r5], r11",
        "movi.u32 r7, 64", "add.i32 r12, r5, r7",
        "mma.load.b.local.m4n4k4.f32 f1, [r12], r11",
        "add.i32 r13, r12, r7",
        "mma.load.c.local.m4n4k4.f32 f2, [r13], r11",
        "mma.mma.m4n4k4.f32.f32 f2, f0, f1, f2",
        "movi.u32 r7, 1", "and.b32 r14, r0, r7", "setp.eq.u32 p1, r14, r7",
        "@p1 mma.mma.m4n4k4.f32.f32 f2, f0, f1, f2",
        "ldarg.b32 r15, scale",
        "mma.scale.m4n4k4.f32 f2, f2, r15",
        "mma.store.local.m4n4k4.f32 [r13], f2, r11",
        *copy_out("out1", "r13"),
        "mma.fill.m4n4k4.f32 f3, r15",
        "mma.mma.m4n4k4.f32.f32 f3, f0, f1, f3",
        "mma.store.local.m4n4k4.f32 [r5], f3, r11",
        *copy_out("out2", "r5"),
    ]
    return Case(
        name, "mma_frag",
        kernel_text(name, [("src", "buffer", "u32", "read"), ("out1", "buffer", "u32", "write"),
                           ("out2", "buffer", "u32", "write"), ("scale", "scalar", "f32", "read")],
                    body, local_memory=size * 192),
        (groups, 1, 1), (size, 1, 1),
        {"src": bits.reshape(-1).copy(), "out1": np.zeros(nthr * 16, np.uint32),
         "out2": np.zeros(nthr * 16, np.uint32), "scale": scale},
        {"out1": o1.reshape(-1), "out2": o2.reshape(-1)},
        requires=("mma",),
        description="m4n4k4 f32 thread-scope fragments: loads, an fma chain under divergence, scale, fill, stores",
    )


#: threads per workgroup of the ``mma.group`` cases: 8 waves (two groups) at W = 64, 64 at W = 8;
#: a multiple of 4 waves at every W (spec §8.14). N = 256 takes half (its strip is 128 registers
#: a lane on the CUDA target: 512 such threads do not fit an SM's 64K registers, which the runtime
#: refuses; 256 are 8 waves, two groups, at W = 32)
GROUP_THREADS = 512


def _group_threads(n: int) -> int:
    return GROUP_THREADS // 2 if n == 256 else GROUP_THREADS
#: (panel stride, immediate offset of the tiles) in bytes of the ``mma.group`` cases by N: at
#: N = 64 one panel (P unused: the least valid multiple of 1024); at N = 128 a 1 KiB gap after
#: each 32-row panel; at N = 256 panels packed and no pad (two 16 KiB tiles fill lavapipe's 32 KiB
#: of local memory)
_GROUP_P = {64: (1024, 3072), 128: (5120, 1024), 256: (4096, 0)}


def _swizzled(k: np.ndarray, n: np.ndarray, p: int) -> np.ndarray:
    """Byte offset of B element (k, n) in the swizzled panel layout, written from the text of
    docs/spec.md §8.14 (panels of 64 columns p bytes apart, row k at 128 k, 16-byte chunk
    ``(n mod 64) div 8`` stored at chunk ``that xor (k mod 8)``)."""
    return (n // 64) * p + 128 * k + 16 * (((n % 64) // 8) ^ (k % 8)) + 2 * (n % 8)


def _bt_offset(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Byte offset of B element (k, n), k < 64, in the swizzled row layout of ``mma.group.bt``,
    written from the text of docs/spec.md §8.14 (row n of Bᵀ at 128 n, 16-byte chunk ``k div 8``
    stored at chunk ``that xor (n mod 8)``); a 16-deep step at ``L + 32 s`` reads k = 16 s ..."""
    return 128 * n + 16 * ((k // 8) ^ (n % 8)) + 2 * (k % 8)


def _group_mma(t: str, n: int, groups: int = 2, bt: bool = False) -> Case:
    """``mma.group.m16n{n}k16`` and its asynchronous form: each wave of a 512-thread (N = 256:
    256-thread) workgroup
    fills the first and last slots of its accumulator strip f3..f(3+n/16-1), then twice loads its
    own 16 x 16 A tile (rows 16q of A, q the global wave index; columns 16s) and adds the product
    with rows 16s.. of one of two B tiles in local memory ([rT + pad + 2048 s]; the second step
    ``mma.group.async`` completed by ``mma.wait 0``): tile ``((wave_id div 4) + workgroup)
    mod 2``, so neighbouring groups and the two workgroups read different tiles. Expected:
    fill + A B in float64 (exact: halves of small integers)."""
    import ml_dtypes

    name = f"group_mma_{'bt_' if bt else ''}{t}_n{n}"
    rng = rng_for(name)
    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    f64 = np.float64
    p, pad = _GROUP_P[n]
    tile = (n // 64 - 1) * p + 32 * 128  # bytes of one 32-deep tile (its last panel holds 32 rows)
    local = pad + 2 * tile
    if bt:  # Bᵀ: n rows of 128 bytes, tile t in the k = 32 t .. 32 t + 31 of each (64 bytes in)
        p, pad, tile = 0, (0 if n == 256 else 1024), 64
        local = pad + 128 * n
    assert (bt or tile % 1024 == 0) and pad % 1024 == 0
    threads = _group_threads(n)
    rows = 16 * groups * (threads // 8)  # A / C rows at the widest case, W = 8
    A = (rng.integers(-6, 7, (rows, 32)) / 2).astype(dt)
    Bt = (rng.integers(-6, 7, (2, 32, n)) / 2).astype(dt)
    nf = n // 16
    # the strip's first and last slots filled (distinct values), the others left at their +0.0
    # (16 fills took half the Intel OpenCL CPU compiler's time for this kernel at N = 256)
    fill = np.zeros(nf, np.float32)
    fill[0], fill[-1] = -5.25, 2.75
    image = np.zeros(local // 2, np.uint16)
    kk, nn = np.meshgrid(np.arange(32), np.arange(n), indexing="ij")
    for ti in range(2):
        where = _bt_offset(kk + 32 * ti, nn) if bt else ti * tile + _swizzled(kk, nn, p)
        assert len(np.unique(where)) == kk.size  # the layout is one-to-one
        image[(pad + where) // 2] = Bt[ti].view(np.uint16)
    D, FA = 3, 31  # the strip f3.. (not at f0) and A in the last slot
    mm = f"m16n{n}k16.f32.{t}"
    body = [
        "mov.sr r0, sr_thread_linear_id", "mov.sr r1, sr_wave_id", "mov.sr r2, sr_workgroup_size_x",
        "mov.sr r3, sr_workgroup_id_x", "mov.sr r4, sr_num_waves",
        # the B image into local memory, one word per thread per trip
        "mov.b32 r5, r0",
        "loop",
        f"movi.u32 r6, {image.size // 2}", "setp.ge.u32 p0, r5, r6", "break p0",
        "movi.u32 r6, 2", "shl.b32 r7, r5, r6",
        "ld.device.b32 r8, bimg[r7]", "st.local.b32 [r7], r8",
        "add.i32 r5, r5, r2",
        "endloop",
        "barrier",
        "mul.i32 r9, r3, r4", "add.i32 r9, r9, r1",  # q: global wave index
        "movi.u32 r6, 2", "shr.u32 r10, r1, r6", "add.i32 r10, r10, r3",
        "movi.u32 r6, 1", "and.b32 r10, r10, r6",
        f"movi.u32 r6, {tile}", "mul.i32 r10, r10, r6",  # rT: the group's tile (after the pad)
        "movi.u32 r6, 10", "shl.b32 r11, r9, r6", "movi.u32 r12, 64",  # A: rows 16q (64-byte rows)
        *(ln for j in (0, nf - 1) for ln in (f"movi.u32 r6, {int(fill[j].view(np.uint32))}",
                                             f"mma.fill.m16n16k16.f32 f{D + j}, r6")),
        f"movi.u32 r16, {p}",
        f"mma.load.a.device.m16n16k16.{t} f{FA}, a[r11], r12",
        f"mma.group.{'bt.' if bt else ''}{mm} f{D}, f{FA}, [r10+{pad}], r16",
        f"mma.load.a.device.m16n16k16.{t} f{FA}, a[r11+32], r12",  # A: the next 16 columns
        # B: 16 rows deeper (transposed: 16 elements further along each row)
        f"mma.group.{'bt.' if bt else ''}async.{mm} f{D}, f{FA}, [r10+{pad + (32 if bt else 2048)}], r16",
        "mma.wait 0",
        f"movi.u32 r6, {64 * n}", "mul.i32 r13, r9, r6", f"movi.u32 r14, {4 * n}",  # the strip in out
        *(f"mma.store.device.m16n16k16.f32 out[r13+{64 * j}], f{D + j}, r14" for j in range(nf)),
    ]

    def expected(w: int) -> dict[str, np.ndarray]:
        nw = threads // w
        o = out_buffer(rows * n, 32).reshape(rows, n)
        start = np.repeat(fill.astype(f64), 16)[None, :]
        for q in range(groups * nw):
            ti = ((q % nw) // 4 + q // nw) % 2
            r = slice(16 * q, 16 * q + 16)
            o[r] = (start + A[r].astype(f64) @ Bt[ti].astype(f64)).astype(np.float32).view(np.uint32)
        return {"out": o.reshape(-1)}

    return Case(
        name, "mma_acc" if bt else "mma_group",
        kernel_text(name, [("a", "buffer", "u16", "read"), ("bimg", "buffer", "u32", "read"),
                           ("out", "buffer", "u32", "write")],
                    body, local_memory=local),
        (groups, 1, 1), (threads, 1, 1),
        {"a": A.reshape(-1).view(np.uint16).copy(), "bimg": image.view(np.uint32).copy(),
         "out": out_buffer(rows * n, 32)},
        expected,
        requires=("mma", "wave_ops", t) + (("mma_acc",) if bt else ()),
        description=(f"mma.group.bt m16n{n}k16 {t}: two groups per workgroup on different Bᵀ tiles in the "
                     f"swizzled row layout (tile t at byte {pad} + 64 t, steps 32 bytes apart), two 16-deep steps "
                     if bt else
                     f"mma.group m16n{n}k16 {t}: two groups per workgroup on different B tiles in the "
                     f"swizzled panel layout (P = {p}, immediates {pad} and {pad + 2048}), two 16-deep steps ")
                    + "(the second asynchronous, then mma.wait 0) accumulating onto a strip f3.. (ends filled)",
    )


def _acc_ops(t: str, groups: int = 2) -> Case:
    """The accumulator operations (spec §8.14) per wave q of a 64-thread workgroup: an integer
    16 x 128 strip X (f0..f7), a tile C (f8), divisors (f18, powers of two) and a tile Y of
    arbitrary f32 (f21) from device memory; rowmax and rowsum over N = 16, 64, 128 onto C,
    ``exp2(fma(X0, 1, -X1))`` (integer exponents), ``X0 * X1``, ``X0 / Dv``, ``mask(X0, q - 8,
    q + 3)`` and ``cvt.a`` of Y observed through ``mma.mma`` with an identity B, all stored.
    Expected: NumPy in float64 (every result exact in f32; cvt: ml_dtypes' round to nearest even)."""
    import ml_dtypes

    name = f"acc_ops_{t}"
    rng = rng_for(name)
    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    nq = groups * MAXW
    X = rng.integers(-6, 7, (nq, 16, 128)).astype(np.float32)
    C = rng.integers(-8, 9, (nq, 16, 16)).astype(np.float32)
    Dv = (2.0 ** rng.integers(-3, 4, (nq, 16, 16)) * rng.choice([-1, 1], (nq, 16, 16))).astype(np.float32)
    Y = (rng.standard_normal((nq, 16, 16)) * 3).astype(np.float32)
    eye = np.eye(16).astype(dt)
    one = int(np.float32(1.0).view(np.uint32))
    T = 12  # output tiles per wave
    body = [
        "mov.sr r1, sr_wave_id", "mov.sr r3, sr_workgroup_id_x", "mov.sr r4, sr_num_waves",
        "mul.i32 r5, r3, r4", "add.i32 r5, r5, r1",  # q
        "movi.u32 r6, 13", "shl.b32 r7, r5, r6",  # X: 16 rows of 512 bytes per wave
        "movi.u32 r6, 10", "shl.b32 r8, r5, r6",  # C, Dv, Y: 16 x 16 f32 per wave
        "movi.u32 r9, 512", "movi.u32 r10, 64", "movi.u32 r11, 32",
        *(f"mma.load.c.device.m16n16k16.f32 f{j}, x[r7+{64 * j}], r9" for j in range(8)),
        "mma.load.c.device.m16n16k16.f32 f8, c[r8], r10",
        "mma.load.c.device.m16n16k16.f32 f18, dv[r8], r10",
        "mma.load.c.device.m16n16k16.f32 f21, y[r8], r10",
        "movi.u32 r12, 0",
        f"mma.load.b.device.m16n16k16.{t} f23, eye[r12], r11",
        "mma.rowmax.n16.m16n16k16.f32 f9, f0, f8",
        "mma.rowmax.n64.m16n16k16.f32 f10, f0, f8",
        "mma.rowmax.n128.m16n16k16.f32 f11, f0, f8",
        "mma.rowsum.n16.m16n16k16.f32 f12, f0, f8",
        "mma.rowsum.n64.m16n16k16.f32 f13, f0, f8",
        "mma.rowsum.n128.m16n16k16.f32 f14, f0, f8",
        f"movi.u32 r13, {one}",
        "mma.exp2.m16n16k16.f32 f15, f0, f1, r13",
        "mma.mul.m16n16k16.f32 f16, f0, f1",
        "mma.div.m16n16k16.f32 f17, f0, f18",
        "movi.u32 r6, 8", "sub.i32 r14, r5, r6", "movi.u32 r6, 3", "add.i32 r15, r5, r6",
        "mma.mask.m16n16k16.f32 f19, f0, r14, r15",
        f"mma.cvt.a.m16n16k16.{t} f20, f21",
        "movi.u32 r6, 0", "mma.fill.m16n16k16.f32 f22, r6",
        f"mma.mma.m16n16k16.f32.{t} f22, f20, f23, f22",
        f"movi.u32 r6, {1024 * T}", "mul.i32 r16, r5, r6",
        *(f"mma.store.device.m16n16k16.f32 out[r16+{1024 * i}], f{f}, r10"
          for i, f in enumerate((9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 22, 0))),
    ]
    f64 = np.float64

    def expected(w: int) -> dict[str, np.ndarray]:
        waves = groups * (64 // w)
        o = out_buffer(nq * T * 256, 32).reshape(nq, T, 16, 16)
        for q in range(waves):
            x, c = X[q].astype(f64), C[q].astype(f64)
            tiles = []
            for n in (16, 64, 128):
                tiles.append(np.maximum(c, x[:, :n].max(axis=1, keepdims=True)))
            for n in (16, 64, 128):
                tiles.append(c + x[:, :n].sum(axis=1, keepdims=True))
            x0, x1 = x[:, :16], x[:, 16:32]
            tiles += [np.exp2(x0 - x1), x0 * x1, x0 / Dv[q].astype(f64)]
            i, j = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
            tiles.append(np.where(((j - i) <= q - 8) & (j < q + 3), x0, -np.inf))
            tiles.append(Y[q].astype(dt).astype(f64))
            tiles.append(x0)
            o[q] = np.stack(tiles).astype(np.float32).view(np.uint32)
        return {"out": o.reshape(-1)}

    return Case(
        name, "mma_acc",
        kernel_text(name, [("x", "buffer", "f32", "read"), ("c", "buffer", "f32", "read"),
                           ("dv", "buffer", "f32", "read"), ("y", "buffer", "f32", "read"),
                           ("eye", "buffer", "u16", "read"), ("out", "buffer", "u32", "write")], body),
        (groups, 1, 1), (64, 1, 1),
        {"x": X.reshape(-1).copy(), "c": C.reshape(-1).copy(), "dv": Dv.reshape(-1).copy(),
         "y": Y.reshape(-1).copy(), "eye": eye.reshape(-1).view(np.uint16).copy(),
         "out": out_buffer(nq * T * 256, 32)},
        expected,
        requires=("mma", "wave_ops", t, "mma_acc"),
        description=f"accumulator operations ({t}): rowmax/rowsum over N = 16, 64, 128, exp2, mul, div, mask, "
                    "cvt.a (seen through mma.mma with an identity B)",
    )


def cases() -> list[Case]:
    return ([_wave_gemm("f16"), _wave_gemm("bf16"), _thread_m4n4k4()]
            + [_group_mma(t, n) for t in ("f16", "bf16") for n in (64, 128, 256)]
            + [_group_mma(t, n, bt=True) for t in ("f16", "bf16") for n in (64, 128, 256)]
            + [_acc_ops(t) for t in ("f16", "bf16")])
