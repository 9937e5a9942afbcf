"""bf16/f16 GEMM on MMA fragments (docs/spec.md §8.14): ``C = A @ B (+ bias) (GELU)``.

Each workgroup has ``WAVES`` waves (``WAVES * W`` threads, W the target's wave width); each
wave owns a ``16*TM x 16*TN`` block of C kept in ``TM*TN`` accumulator fragments across the
whole K loop, loading its A and B fragments straight from device memory (``mma.load.*.device``)
16 columns of K at a time. The epilogue adds ``bias[j]`` on the fragments (``mma_bias``)
and, with ``gelu=True``, stores through a local tile and applies
``0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 x^3)))`` (the tanh form; ``fast_tanh``,
class ``approx``).

Accuracy: class ``bounded`` per fragment ``mma`` (spec §8.13's bound per 16-deep step), so
``|C - A@B| <= 2^-18 * (K/16) * (|A| @ |B|) * (1 + 2^-18)^(K/16)`` elementwise (plus the
bias/GELU roundings); the tests check exactly that bound against a float64 reference.

Shapes: A (M, K), B (K, N) row-major, M, N multiples of ``16*TM*WM`` / ``16*TN*WN`` and K of
16 (the wrapper pads otherwise); the output is f32 (M, N).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
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
def gemm_smem_kernel(a: aw.In[aw.u32], b: aw.In[aw.u32], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                     m: aw.i32, n: aw.i32, k: aw.i32, *, TM: int = 4, TN: int = 2, WM: int = 2, WN: int = 4,
                     BK: int = 32, use_bias: bool = False, gelu: bool = False, f16: bool = False):
    # A (m, k) and B (k, n) hold bf16 (f16 with f16=True) elements in pairs (one u32 = two neighbours of a row):
    # the workgroup stages a (16*TM*WM) x BK block of A and a BK x (16*TN*WN) block of B in
    # local memory (rows padded by 16 bytes: conflict-free 8-row fragment loads), then each wave
    # loads its fragments from there (ldmatrix on CUDA)
    elt = aw.f16 if f16 else aw.bf16
    ta = aw.local_array(aw.u32, (16 * TM * WM, BK // 2 + 4))
    tb = aw.local_array(aw.u32, (BK, 8 * TN * WN + 4))
    stage = aw.local_array(aw.f32, (16 * WM * WN if gelu else 1, 16))  # the GELU epilogue's staging
    acc = aw.fragments(TM * TN, "acc")
    fa = aw.fragments(TM, "a", elt)
    fb = aw.fragments(TN, "b", elt)
    t = aw.local_id(0)
    nt = aw.workgroup_size(0)
    wv = aw.wave_id()
    rb = aw.workgroup_id(1) * (16 * TM * WM)
    cb = aw.workgroup_id(0) * (16 * TN * WN)
    wr = (wv // WN) * (16 * TM)
    wc = (wv % WN) * (16 * TN)
    kw = k // 2
    nw = n // 2
    # copy rows: each thread a fixed 32-bit column of the tiles, rows strided by the workgroup
    # (the workgroup size is a multiple of the 8 * TN * WN words of a B row: the wrapper launches
    # WM * WN waves of >= 8 lanes)
    wa = t % (BK // 2)
    wb = t % (8 * TN * WN)
    for k0 in range(0, k, BK):
        for r in range(t // (BK // 2), 16 * TM * WM, nt // (BK // 2)):
            ta[r, wa] = a[(rb + r) * kw + k0 // 2 + wa]
        for r in range(t // (8 * TN * WN), BK, nt // (8 * TN * WN)):
            tb[r, wb] = b[(k0 + r) * nw + cb // 2 + wb]
        aw.barrier()
        for kk in aw.static_range(BK // 16):
            for i in aw.static_range(TM):
                aw.mma_load(fa[i], ta, wr + 16 * i, 16 * kk)
            for j in aw.static_range(TN):
                aw.mma_load(fb[j], tb, 16 * kk, wc + 16 * j)
            for i in aw.static_range(TM):
                for j in aw.static_range(TN):
                    aw.mma_sync(acc[i * TN + j], fa[i], fb[j], acc[i * TN + j])
        aw.barrier()
    for i in aw.static_range(TM):
        for j in aw.static_range(TN):
            if use_bias:
                aw.mma_bias(acc[i * TN + j], bias, cb + wc + 16 * j)
            if gelu:
                _gelu_store(c, stage, acc[i * TN + j], rb + wr + 16 * i, cb + wc + 16 * j, n)
            else:
                aw.mma_store(c, acc[i * TN + j], (rb + wr + 16 * i) * n + cb + wc + 16 * j, n)


@aw.kernel
def gemm_smem64_kernel(a: aw.In[aw.u64], b: aw.In[aw.u64], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                     m: aw.i32, n: aw.i32, k: aw.i32, *, TM: int = 4, TN: int = 2, WM: int = 2, WN: int = 4,
                     BK: int = 32, use_bias: bool = False, gelu: bool = False, f16: bool = False):
    # gemm_smem_kernel with 8-byte copies: A and B hold four 16-bit elements per u64.
    # the workgroup stages a (16*TM*WM) x BK block of A and a BK x (16*TN*WN) block of B in
    # local memory (rows padded by 16 bytes: conflict-free 8-row fragment loads), then each wave
    # loads its fragments from there (ldmatrix on CUDA)
    elt = aw.f16 if f16 else aw.bf16
    ta = aw.local_array(aw.u64, (16 * TM * WM, BK // 4 + 2))
    tb = aw.local_array(aw.u64, (BK, 4 * TN * WN + 2))
    stage = aw.local_array(aw.f32, (16 * WM * WN if gelu else 1, 16))  # the GELU epilogue's staging
    acc = aw.fragments(TM * TN, "acc")
    fa = aw.fragments(TM, "a", elt)
    fb = aw.fragments(TN, "b", elt)
    t = aw.local_id(0)
    nt = aw.workgroup_size(0)
    wv = aw.wave_id()
    rb = aw.workgroup_id(1) * (16 * TM * WM)
    cb = aw.workgroup_id(0) * (16 * TN * WN)
    wr = (wv // WN) * (16 * TM)
    wc = (wv % WN) * (16 * TN)
    kw = k // 4
    nw = n // 4
    # copy rows: each thread a fixed 32-bit column of the tiles, rows strided by the workgroup
    # (the workgroup size is a multiple of the 4 * TN * WN words of a B row: the wrapper launches
    # WM * WN waves of >= 8 lanes)
    wa = t % (BK // 4)
    wb = t % (4 * TN * WN)
    for k0 in range(0, k, BK):
        for r in range(t // (BK // 4), 16 * TM * WM, nt // (BK // 4)):
            ta[r, wa] = a[(rb + r) * kw + k0 // 4 + wa]
        for r in range(t // (4 * TN * WN), BK, nt // (4 * TN * WN)):
            tb[r, wb] = b[(k0 + r) * nw + cb // 4 + wb]
        aw.barrier()
        for kk in aw.static_range(BK // 16):
            for i in aw.static_range(TM):
                aw.mma_load(fa[i], ta, wr + 16 * i, 16 * kk)
            for j in aw.static_range(TN):
                aw.mma_load(fb[j], tb, 16 * kk, wc + 16 * j)
            for i in aw.static_range(TM):
                for j in aw.static_range(TN):
                    aw.mma_sync(acc[i * TN + j], fa[i], fb[j], acc[i * TN + j])
        aw.barrier()
    for i in aw.static_range(TM):
        for j in aw.static_range(TN):
            if use_bias:
                aw.mma_bias(acc[i * TN + j], bias, cb + wc + 16 * j)
            if gelu:
                _gelu_store(c, stage, acc[i * TN + j], rb + wr + 16 * i, cb + wc + 16 * j, n)
            else:
                aw.mma_store(c, acc[i * TN + j], (rb + wr + 16 * i) * n + cb + wc + 16 * j, n)


@aw.kernel
def gemm_pipe_kernel(a: aw.In[aw.u64], b: aw.In[aw.u64], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                     m: aw.i32, n: aw.i32, k: aw.i32, *, use_bias: bool = False, gelu: bool = False,
                     f16: bool = False):
    # The CUDA fast path: 128 x 128 x 32 tiles, 8 waves of 32 lanes (256 threads), each wave
    # 64 x 32 of C in 8 accumulators. A and B hold four 16-bit elements per u64. The next K step's
    # tile is loaded into registers (8 x 8 bytes per thread) while the current one is multiplied
    # out of local memory (register prefetch; two barriers per step).
    elt = aw.f16 if f16 else aw.bf16
    ta = aw.local_array(aw.u64, (128, 10))  # 32 columns + 16 bytes of padding per row
    tb = aw.local_array(aw.u64, (32, 34))  # 128 columns + 16 bytes
    stage = aw.local_array(aw.f32, (128 if gelu else 1, 16))
    acc = aw.fragments(8, "acc")
    fa = aw.fragments(4, "a", elt)
    fb = aw.fragments(2, "b", elt)
    t = aw.local_id(0)
    wv = aw.wave_id()
    rb = aw.workgroup_id(1) * 128
    cb = aw.workgroup_id(0) * 128
    wr = (wv // 4) * 64
    wc = (wv % 4) * 32
    kw = k // 4
    nw = n // 4
    ar = t // 8
    ac = t % 8
    br = t // 32
    bc = t % 32
    ga = (rb + ar) * kw + ac
    gb = br * nw + cb // 4 + bc
    a0 = a[ga]
    a1 = a[ga + 32 * kw]
    a2 = a[ga + 64 * kw]
    a3 = a[ga + 96 * kw]
    b0 = b[gb]
    b1 = b[gb + 8 * nw]
    b2 = b[gb + 16 * nw]
    b3 = b[gb + 24 * nw]
    for k0 in range(0, k, 32):
        aw.barrier()
        ta[ar, ac] = a0
        ta[ar + 32, ac] = a1
        ta[ar + 64, ac] = a2
        ta[ar + 96, ac] = a3
        tb[br, bc] = b0
        tb[br + 8, bc] = b1
        tb[br + 16, bc] = b2
        tb[br + 24, bc] = b3
        aw.barrier()
        if k0 + 32 < k:
            ga2 = ga + (k0 + 32) // 4
            gb2 = gb + (k0 + 32) * nw
            a0 = a[ga2]
            a1 = a[ga2 + 32 * kw]
            a2 = a[ga2 + 64 * kw]
            a3 = a[ga2 + 96 * kw]
            b0 = b[gb2]
            b1 = b[gb2 + 8 * nw]
            b2 = b[gb2 + 16 * nw]
            b3 = b[gb2 + 24 * nw]
        for kk in aw.static_range(2):
            for i in aw.static_range(4):
                aw.mma_load(fa[i], ta, wr + 16 * i, 16 * kk)
            for j in aw.static_range(2):
                aw.mma_load(fb[j], tb, 16 * kk, wc + 16 * j)
            for i in aw.static_range(4):
                for j in aw.static_range(2):
                    aw.mma_sync(acc[i * 2 + j], fa[i], fb[j], acc[i * 2 + j])
    for i in aw.static_range(4):
        for j in aw.static_range(2):
            if use_bias:
                aw.mma_bias(acc[i * 2 + j], bias, cb + wc + 16 * j)
            if gelu:
                _gelu_store(c, stage, acc[i * 2 + j], rb + wr + 16 * i, cb + wc + 16 * j, n)
            else:
                aw.mma_store(c, acc[i * 2 + j], (rb + wr + 16 * i) * n + cb + wc + 16 * j, n)


@aw.func
def _gelu_store(c, t, frag, row, col, n):
    # through the wave's 16x16 f32 staging rows of t: GELU (tanh form) per element, then to c
    wv = aw.wave_id()
    aw.barrier()
    aw.mma_store(t, frag, 16 * wv, 0)
    aw.barrier()
    for e in range(aw.lane_id(), 256, aw.wave_width()):
        x = t[16 * wv + e // 16, e % 16]
        y = 0.5 * x * (1.0 + aw.fast_tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
        c[(row + e // 16) * n + col + e % 16] = y


def _as16(x: Any, name: str, f16: bool) -> np.ndarray:
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
