"""bf16/f16 GEMM on MMA fragments (docs/spec.md §8.14): ``C = A @ B (+ bias) (GELU)``.

Each workgroup has ``WAVES`` waves (``WAVES * W`` threads, W the target's wave width); each
wave owns a ``16*TM x 16*TN`` block of C kept in ``TM*TN`` accumulator fragments across the
whole K loop, loading its A and B fragments straight from device memory (``mma.load.*.device``)
16 columns of K at a time. The epilogue adds ``bias[j]`` on the fragments (``mma_bias``)
and, with ``gelu=True``, stores through a local tile and applies
``0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 x^3)))`` (the tanh form; ``fast_tanh``,
class ``approx``).

Two kernels: ``gemm_frag_kernel`` (above; any wave width, used by :func:`gemm`) and
``gemm_tiled_kernel`` (the CUDA fast path behind ``torch.ops.anywave.gemm_mma``: local-memory
slices in two buffers, 128-bit copies, one barrier per slice, 64 x 64 per wave; ``STAGES``
>= 2 copies with ``aw.async_copy`` into a ring of buffers instead; its comments give the
layout). On an H200 the tiled kernel at 128 x 256 x 64 reaches 340 TFLOP/s at 8192³,
0.44 of cuBLAS bf16 in the same run (bench/results/gpu_mma.md says what limits it).

Accuracy: class ``bounded`` per fragment ``mma`` (spec §8.13's bound per 16-deep step), so
``|C - A@B| <= 2^-18 * (K/16) * (|A| @ |B|) * (1 + 2^-18)^(K/16)`` elementwise (plus the
bias/GELU roundings); the tests check exactly that bound against a float64 reference.

Shapes: A (M, K), B (K, N) row-major, M, N multiples of ``16*TM*WM`` / ``16*TN*WN`` and K of
16 (the wrapper pads otherwise); the output is f32 (M, N).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError

#: default tiling: a workgroup of WM x WN waves, each 16*TM x 16*TN of C
DEFAULT_TILE = {"TM": 4, "TN": 2, "WM": 2, "WN": 4}


@aw.kernel
def gemm_frag_kernel(a: aw.In[aw.u16], b: aw.In[aw.u16], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                     m: aw.i32, n: aw.i32, k: aw.i32, *, TM: int = 4, TN: int = 2, WM: int = 2, WN: int = 4,
                     use_bias: bool = False, gelu: bool = False, f16: bool = False):
    elt = aw.f16 if f16 else aw.bf16
    acc = aw.fragments(TM * TN, "acc")
    fa = aw.fragments(TM, "a", elt)
    fb = aw.fragments(TN, "b", elt)
    wv = aw.wave_id()
    r0 = aw.workgroup_id(1) * (16 * TM * WM) + (wv // WN) * (16 * TM)
    c0 = aw.workgroup_id(0) * (16 * TN * WN) + (wv % WN) * (16 * TN)
    for k0 in range(0, k, 16):
        for i in aw.static_range(TM):
            aw.mma_load(fa[i], a, (r0 + 16 * i) * k + k0, k)
        for j in aw.static_range(TN):
            aw.mma_load(fb[j], b, k0 * n + c0 + 16 * j, n)
        for i in aw.static_range(TM):
            for j in aw.static_range(TN):
                aw.mma_sync(acc[i * TN + j], fa[i], fb[j], acc[i * TN + j])
    if use_bias:
        for i in aw.static_range(TM):
            for j in aw.static_range(TN):
                aw.mma_bias(acc[i * TN + j], bias, c0 + 16 * j)
    if gelu:
        t = aw.local_array(aw.f32, (16 * WM * WN, 16))
        lane = aw.lane_id()
        for i in aw.static_range(TM):
            for j in aw.static_range(TN):
                aw.mma_store(t, acc[i * TN + j], 16 * wv, 0)
                for e in range(lane, 256, aw.wave_width()):
                    x = t[16 * wv + e // 16, e % 16]
                    y = 0.5 * x * (1.0 + aw.fast_tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
                    c[(r0 + 16 * i + e // 16) * n + c0 + 16 * j + e % 16] = y
    else:
        for i in aw.static_range(TM):
            for j in aw.static_range(TN):
                aw.mma_store(c, acc[i * TN + j], (r0 + 16 * i) * n + c0 + 16 * j, n)


@aw.kernel
def gemm_tiled_kernel(a: aw.In[aw.u32], b: aw.In[aw.u32], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                      m: aw.i32, n: aw.i32, k: aw.i32, *, TM: int = 4, TN: int = 4, WM: int = 2, WN: int = 4,
                      W: int = 32, BK: int = 32, GM: int = 0, STAGES: int = 0, use_bias: bool = False,
                      gelu: bool = False, f16: bool = False):
    # The tiled GEMM (the CUDA fast path). A (m, k) and B (k, n) hold bf16 (f16 with f16=True)
    # elements in pairs (one u32 = two row neighbours). A workgroup of WM x WN waves of W lanes
    # owns a BM x BN block of C (BM = 16*TM*WM, BN = 16*TN*WN); each wave 16*TM x 16*TN in TM*TN
    # accumulator fragments. K advances BK (32 or 64) at a time through two local buffers, one
    # barrier per slice; the next slice is copied 32 deep at a time: its 128-bit device loads
    # are issued into registers before the fragment loads (ldmatrix on CUDA) and mma of the
    # matching part of the current slice, then stored to the idle buffer. Rows are padded by 16
    # bytes (conflict-free 8-row fragment loads). Needs k a multiple of 2*BK and W the launch's
    # wave width (the copies are unrolled for W*WM*WN threads); every branch is uniform (plain
    # branches on PTX). GM > 0 visits the blocks of C in groups of GM block rows (column by
    # column inside a group: the group's A rows and B columns stay in L2); GM = 0 in launch order.
    # STAGES >= 2 instead copies with aw.async_copy (cp.async on CUDA, no staging registers) into
    # a ring of STAGES buffers, STAGES - 1 slices ahead (then k must be a multiple of STAGES*BK).
    elt = aw.f16 if f16 else aw.bf16
    BM = 16 * TM * WM
    BN = 16 * TN * WN
    NT = W * WM * WN
    CB = BN // 8  # 16-byte chunks per row of B (a row of the 32-deep A part has 4)
    PA = BM * 4 // NT  # copy passes per 32-deep part
    PB = 32 * CB // NT
    assert BK == 32 or BK == 64, "gemm_tiled: BK must be 32 or 64"
    assert PA * NT == BM * 4 and PB * NT == 32 * CB and NT % CB == 0, "gemm_tiled: tile and wave width mismatch"
    NB = max(STAGES, 2)  # local buffers
    ta = aw.local_array(aw.u32, (NB * BM, BK // 2 + 4))
    tb = aw.local_array(aw.u32, (NB * BK, BN // 2 + 4))
    stage = aw.local_array(aw.f32, (16 * WM * WN if gelu else 1, 16))  # the GELU epilogue's staging
    acc = aw.fragments(TM * TN, "acc")
    fa = aw.fragments(TM, "a", elt)
    fb = aw.fragments(TN, "b", elt)
    ra = aw.register_array(aw.u32, (PA, 4))
    rb = aw.register_array(aw.u32, (PB, 4))
    t = aw.local_id(0)
    wv = aw.wave_id()
    by = aw.workgroup_id(1)
    bx = aw.workgroup_id(0)
    if GM > 0:
        gx = aw.num_workgroups(0)
        pid = by * gx + bx
        first = (pid // (GM * gx)) * GM
        rows = min(aw.num_workgroups(1) - first, GM)
        by = first + (pid % (GM * gx)) % rows
        bx = (pid % (GM * gx)) // rows
    rb0 = by * BM
    cb0 = bx * BN
    wr = (wv // WN) * (16 * TM)
    wc = (wv % WN) * (16 * TN)
    kw = k // 2
    nw = n // 2
    # thread t copies 16-byte chunk t % 4 of rows t // 4 + p * (NT // 4) of a 32-deep A part, and
    # chunk t % CB of rows t // CB + p * (NT // CB) of a 32-deep B part (all in u32 words)
    ar = t // 4
    ac = (t % 4) * 4
    br = t // CB
    bc = (t % CB) * 4
    ga = (rb0 + ar) * kw + ac
    gb = br * nw + cb0 // 2 + bc
    if STAGES >= 2:
        for st in aw.static_range(STAGES - 1):
            _async_slice(a, b, ta, tb, ga, gb, ar, ac, br, bc, kw, nw, st * BK, st, BM, BK, PA, PB, NT // 4,
                         NT // CB)
            aw.async_commit()
        for k0 in range(0, k, STAGES * BK):
            for s in aw.static_range(STAGES):
                aw.async_wait(STAGES - 2)  # this thread's copies of slice k0 + s*BK have landed
                aw.barrier()  # everyone's, and everyone is done with the buffer refilled next
                # STAGES - 1 slices ahead (the last ones reload the last slice into a free buffer)
                kn = min(k0 + (s + STAGES - 1) * BK, k - BK)
                _async_slice(a, b, ta, tb, ga, gb, ar, ac, br, bc, kw, nw, kn, (s + STAGES - 1) % STAGES, BM, BK,
                             PA, PB, NT // 4, NT // CB)
                aw.async_commit()
                for kk in aw.static_range(BK // 16):
                    for i in aw.static_range(TM):
                        aw.mma_load(fa[i], ta, s * BM + wr + 16 * i, 16 * kk)
                    for j in aw.static_range(TN):
                        aw.mma_load(fb[j], tb, s * BK + 16 * kk, wc + 16 * j)
                    for i in aw.static_range(TM):
                        for j in aw.static_range(TN):
                            aw.mma_sync(acc[i * TN + j], fa[i], fb[j], acc[i * TN + j])
        aw.async_wait(0)
    else:
        for h in aw.static_range(BK // 32):
            _copy_part(a, b, ta, tb, ra, rb, ga + 16 * h, gb + 32 * h * nw, ar, ac + 16 * h, br + 32 * h, bc, kw, nw,
                       PA, PB, NT // 4, NT // CB)
        aw.barrier()
        for k0 in range(0, k, 2 * BK):
            for s in aw.static_range(2):
                # the next slice (the last one reloads itself into the idle buffer: no branch)
                kn = min(k0 + (s + 1) * BK, k - BK)
                for h in aw.static_range(BK // 32):
                    kh = kn + 32 * h
                    for p in aw.static_range(PA):
                        v = aw.load4(a, ga + p * (NT // 4) * kw + kh // 2)
                        for q in aw.static_range(4):
                            ra[p, q] = v[q]
                    for p in aw.static_range(PB):
                        v = aw.load4(b, gb + (p * (NT // CB) + kh) * nw)
                        for q in aw.static_range(4):
                            rb[p, q] = v[q]
                    for kk in aw.static_range(2 * h, 2 * h + 2):
                        for i in aw.static_range(TM):
                            aw.mma_load(fa[i], ta, s * BM + wr + 16 * i, 16 * kk)
                        for j in aw.static_range(TN):
                            aw.mma_load(fb[j], tb, s * BK + 16 * kk, wc + 16 * j)
                        for i in aw.static_range(TM):
                            for j in aw.static_range(TN):
                                aw.mma_sync(acc[i * TN + j], fa[i], fb[j], acc[i * TN + j])
                    for p in aw.static_range(PA):
                        aw.store4(ta, ((1 - s) * BM + ar + p * (NT // 4), ac + 16 * h),
                                  (ra[p, 0], ra[p, 1], ra[p, 2], ra[p, 3]))
                    for p in aw.static_range(PB):
                        aw.store4(tb, ((1 - s) * BK + 32 * h + br + p * (NT // CB), bc),
                                  (rb[p, 0], rb[p, 1], rb[p, 2], rb[p, 3]))
                aw.barrier()
    for i in aw.static_range(TM):
        for j in aw.static_range(TN):
            if use_bias:
                aw.mma_bias(acc[i * TN + j], bias, cb0 + wc + 16 * j)
            if gelu:
                _gelu_store(c, stage, acc[i * TN + j], rb0 + wr + 16 * i, cb0 + wc + 16 * j, n)
            else:
                aw.mma_store(c, acc[i * TN + j], (rb0 + wr + 16 * i) * n + cb0 + wc + 16 * j, n)


@aw.func
def _copy_part(a, b, ta, tb, ra, rb, ga, gb, ar, ac, br, bc, kw, nw, PA, PB, SA, SB):
    # the first slice's 32-deep part into buffer 0: device -> registers -> local
    for p in aw.static_range(PA):
        v = aw.load4(a, ga + p * SA * kw)
        for q in aw.static_range(4):
            ra[p, q] = v[q]
    for p in aw.static_range(PB):
        v = aw.load4(b, gb + p * SB * nw)
        for q in aw.static_range(4):
            rb[p, q] = v[q]
    for p in aw.static_range(PA):
        aw.store4(ta, (ar + p * SA, ac), (ra[p, 0], ra[p, 1], ra[p, 2], ra[p, 3]))
    for p in aw.static_range(PB):
        aw.store4(tb, (br + p * SB, bc), (rb[p, 0], rb[p, 1], rb[p, 2], rb[p, 3]))


@aw.func
def _async_slice(a, b, ta, tb, ga, gb, ar, ac, br, bc, kw, nw, k0, buf, BM, BK, PA, PB, SA, SB):
    # start the copies of the BK-deep slice at k0 into local buffer buf (16 bytes each)
    for h in aw.static_range(BK // 32):
        for p in aw.static_range(PA):
            aw.async_copy(ta, (buf * BM + ar + p * SA, ac + 16 * h), a, ga + p * SA * kw + (k0 + 32 * h) // 2, 4)
        for p in aw.static_range(PB):
            aw.async_copy(tb, (buf * BK + 32 * h + br + p * SB, bc), b, gb + (p * SB + k0 + 32 * h) * nw, 4)


@aw.func
def _gelu_store(c, t, frag, row, col, n):
    # through the wave's 16x16 f32 staging rows of t: GELU (tanh form) per element, then to c
    wv = aw.wave_id()
    aw.barrier()
    aw.mma_store(t, frag, 16 * wv, 0)
    aw.barrier()
    for e0 in range(0, 256, aw.wave_width()):  # a uniform loop (W divides 256)
        e = e0 + aw.lane_id()
        x = t[16 * wv + e // 16, e % 16]
        y = 0.5 * x * (1.0 + aw.fast_tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
        c[(row + e // 16) * n + col + e % 16] = y


def _as16(x: Any, name: str, f16: bool) -> np.ndarray:
    import ml_dtypes

    dt = np.float16 if f16 else ml_dtypes.bfloat16
    a = np.ascontiguousarray(np.asarray(x).astype(dt, copy=False))
    if a.ndim != 2:
        raise KernelInputError(f"{name}: expected a 2-D array, got shape {a.shape}")
    return a


def gemm(a: Any, b: Any, bias: Any = None, *, gelu: bool = False, target: str | None = None,
         wave_width: int | None = None, tile: dict[str, int] | None = None) -> np.ndarray:
    """``a @ b (+ bias) (then GELU)`` with bf16 (or f16, by a's dtype) inputs, f32 output.

    Args:
        a: (M, K), b: (K, N) arrays (converted to bf16 unless ``a`` is float16).
        bias: optional (N,) f32.
        target, wave_width: where to run (default target; W default 32).
        tile: overrides of ``DEFAULT_TILE`` (TM, TN, WM, WN).
    Returns: (M, N) float32. Raises KernelInputError on mismatched shapes.
    """
    f16 = np.asarray(a).dtype == np.float16
    A, B = _as16(a, "a", f16), _as16(b, "b", f16)
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise KernelInputError(f"gemm: a is {A.shape} but b is {B.shape} (inner dimensions differ)")
    p = {**DEFAULT_TILE, **(tile or {})}
    bm, bn = 16 * p["TM"] * p["WM"], 16 * p["TN"] * p["WN"]
    Mp, Np, Kp = -(-M // bm) * bm, -(-N // bn) * bn, -(-K // 16) * 16
    if (Mp, Kp) != (M, K):
        A = np.pad(A, ((0, Mp - M), (0, Kp - K)))
    if (Kp, Np) != (K, N):
        B = np.pad(B, ((0, Kp - K), (0, Np - N)))
    bvec = np.zeros(Np, np.float32)
    if bias is not None:
        bb = np.asarray(bias, np.float32).reshape(-1)
        if bb.shape != (N,):
            raise KernelInputError(f"gemm: bias must have shape ({N},), got {bb.shape}")
        bvec[:N] = bb
    out = np.zeros((Mp, Np), np.float32)
    W = wave_width or 32
    waves = p["WM"] * p["WN"]
    gemm_frag_kernel(A.reshape(-1).view(np.uint16), B.reshape(-1).view(np.uint16), bvec, out.reshape(-1), Mp, Np, Kp,
                     grid=(Np // bn, Mp // bm), workgroup=(waves * W, 1, 1), target=target, wave_width=wave_width,
                     use_bias=bias is not None, gelu=gelu, f16=f16, **p)
    return out[:M, :N]
