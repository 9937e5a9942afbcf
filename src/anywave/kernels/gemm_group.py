"""bf16/f16 GEMM on the wave-group MMA (docs/spec.md §8.14, ``mma.group``): ``C = A @ B (+ bias)
(GELU)``, the fast path on the CUDA target's sm_90 (``wgmma``).

A workgroup of ``4 GR`` waves (``GR`` groups of four) owns a ``64 GR x BN`` block of C (``BN`` 256
by default, or 128 or 64: more workgroups for a narrow C): wave ``w`` the 16 rows
``16 w .. 16 w + 15`` of it, all BN columns, in BN / 16 accumulator fragments (one 16 x BN strip)
for the whole K loop. K advances ``BK`` (32 or 64) at a time through a ring of ``STAGES`` local
buffers filled by ``aw.async_copy`` (cp.async) ``STAGES - 1`` slices ahead; per 16-deep step a
wave loads its 16 x 16 A fragment from the A slice (rows padded by 16 bytes: conflict-free
``ldmatrix``) and issues ``aw.mma_group`` on the B slice, which is kept in the swizzled panel
layout: BN / 64 panels of 64 columns, each ``BK`` rows of 128 bytes whose 16-byte chunks are
permuted by ``xor (row mod 8)`` (the copies write it that way: a warp's 32 chunks of one B row are
4 panels x 8 chunks, conflict-free, from 512 contiguous device bytes). Blocks are visited in
groups of ``GM`` block rows (``GM = 0``: launch order). With ``ASYNC`` the products are
``aw.mma_group_async``: a slice's products run on while the next slice's barrier and copies
are issued (the ring then copies ``STAGES - 2`` slices ahead, so the buffer they read is not
refilled until an ``aw.mma_group_wait`` has completed them, and alternate slices use two sets of A
slots).

Accuracy: class ``bounded`` per 16-deep step (spec §8.13), so ``|C - A@B| <= 2^-18 * (K/16) *
(|A| @ |B|) * (1 + 2^-18)^(K/16)`` elementwise (plus the bias/GELU roundings), as
:mod:`anywave.kernels.gemm_mma`.

Shapes: A (M, K), B (K, N) row-major, bf16 (f16 with ``f16=True``) in pairs (one u32 = two row
neighbours); M a multiple of 16 (rows past M in the last block row are read as row M - 1 and
never stored), N a multiple of BN, K of ``STAGES * BK``; output f32 (M, N). Launch:
``grid = (N / BN, ceil(M / (64 GR)))``, ``workgroup = (4 GR W,)`` with ``W`` the target's wave
width (the copies are unrolled for ``4 GR W`` threads, so ``W`` is a compile-time constant).
The kernel trusts these (a mismatch gives wrong results, not an error); :func:`gemm_group`
keeps them for NumPy arrays, ``torch.ops.anywave.gemm_mma`` for tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError
from anywave.kernels.gemm_mma import _as16

#: the columns of C of one workgroup by default (each wave's strip is 16 x BN; the ``BN``
#: constant of the kernel picks 64, 128 or 256)
BN = 256
#: the strip widths ``mma.group`` offers (spec §8.14)
BNS = (64, 128, 256)


@aw.kernel
def gemm_group_kernel(a: aw.In[aw.u32], b: aw.In[aw.u32], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                      m: aw.i32, n: aw.i32, k: aw.i32, *, W: int = 32, GR: int = 2, GM: int = 8, STAGES: int = 4,
                      BK: int = 32, ASYNC: bool = False, use_bias: bool = False, gelu: bool = False,
                      f16: bool = False, BN: int = 256):
    elt = aw.f16 if f16 else aw.bf16
    assert BN == 64 or BN == 128 or BN == 256, "gemm_group: BN must be 64, 128 or 256"
    CB = BN * 2 // 16  # 16-byte chunks in a row of a B slice (BN elements)
    BM = 64 * GR  # GR groups of 4 waves, 64 rows each
    NT = W * 4 * GR  # threads
    P = BK * 128  # panel stride (bytes): BK rows of 128 bytes
    B_STAGE = BK * 2 * BN  # bytes of one slice of B: BN / 64 panels
    CA = BK // 8  # 16-byte chunks per row of the A slice
    PA = BM * CA // NT  # A copy passes: BM rows x CA chunks
    SA = NT // CA  # rows between a thread's A copies
    SB = NT // CB  # rows between a thread's B copies
    PB = -(-BK // SB)  # B copy passes: BK rows x CB chunks (the last pass partial where SB does not divide BK)
    assert BK == 32 or BK == 64, "gemm_group: BK must be 32 or 64"
    assert not ASYNC or (STAGES >= 4 and STAGES % 2 == 0), "gemm_group: ASYNC needs an even STAGES >= 4"
    NKK = BK // 16  # 16-deep steps per slice
    D = STAGES - 2 if ASYNC else STAGES - 1  # slices copied ahead (ASYNC: a slice's products run into the next)
    assert PA * NT == BM * CA and NT % CA == 0 and NT % CB == 0, \
        "gemm_group: the workgroup's threads must divide the slices' chunks"
    ta = aw.local_array(aw.u32, (STAGES * BM, BK // 2 + 4))
    tb = aw.local_array(aw.u32, (STAGES * B_STAGE // 4,), align=1024)
    stage = aw.local_array(aw.f32, (16 * 4 * GR if gelu else 1, 16))  # the GELU epilogue's staging
    acc = aw.fragments(BN // 16, "acc")
    # one A slot per 16-deep step (the next loads while the product runs); ASYNC: two sets, for
    # alternate slices (the previous slice's products still read theirs)
    fa = aw.fragments(NKK * (2 if ASYNC else 1), "a", elt)
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
    kw = k // 2
    nw = n // 2
    # A: thread t copies chunk t % CA of rows t // CA + p * SA (u32 words; rows past m read row
    # m - 1, whose products are never stored); B: chunk t % CB (panel (t % CB) // 8, chunk
    # (t % CB) % 8) of rows t // CB + p * SB
    ar = t // CA
    ac = (t % CA) * 4
    br = t // CB
    bch = t % CB
    gb = br * nw + cb0 // 2 + bch * 4
    for st in aw.static_range(D):
        _slice(a, b, ta, tb, rb0 + ar, m - 1, gb, ar, ac, br, bch, kw, nw, st * BK, st, BM, PA, PB, SA, SB, P, BK,
               CB)
        aw.async_commit()
    for k0 in range(0, k, STAGES * BK):
        for s in aw.static_range(STAGES):
            aw.async_wait(D - 1)  # this thread's copies of slice k0 + s*BK have landed
            if ASYNC:
                aw.mma_group_wait(NKK)  # this wave's products of two slices back are done (the last slice's run on)
            aw.barrier()  # everyone's, and everyone is done with the buffer refilled next
            kn = min(k0 + (s + D) * BK, k - BK)  # the last ones reload the last slice
            _slice(a, b, ta, tb, rb0 + ar, m - 1, gb, ar, ac, br, bch, kw, nw, kn, (s + D) % STAGES, BM,
                   PA, PB, SA, SB, P, BK, CB)
            aw.async_commit()
            for kk in aw.static_range(NKK):
                f = fa[(s % 2) * NKK + kk] if ASYNC else fa[kk]
                aw.mma_load(f, ta, s * BM + 16 * wv, 16 * kk)
                if ASYNC:
                    aw.mma_group_async(acc, f, tb, s * B_STAGE + 2048 * kk, P)
                else:
                    aw.mma_group(acc, f, tb, s * B_STAGE + 2048 * kk, P)
    aw.async_wait(0)
    if ASYNC:
        aw.mma_group_wait(0)
    r0 = rb0 + 16 * wv
    for j in aw.static_range(BN // 16):
        if use_bias:
            aw.mma_bias(acc[j], bias, cb0 + 16 * j)
        if gelu:
            _gelu_rows(c, stage, acc[j], r0, cb0 + 16 * j, m, n)
        elif r0 < m:  # a wave's 16 rows are all in C or all past it (m is a multiple of 16)
            aw.mma_store(c, acc[j], r0 * n + cb0 + 16 * j, n)


@aw.func
def _slice(a, b, ta, tb, ra, m1, gb, ar, ac, br, bch, kw, nw, k0, buf, BM, PA, PB, SA, SB, P, BK, CB):
    # start the 16-byte copies of the BK-deep slice at k0 into ring buffer buf
    for p in aw.static_range(PA):
        aw.async_copy(ta, (buf * BM + ar + p * SA, ac), a, min(ra + p * SA, m1) * kw + ac + k0 // 2, 4)
    # a wave's lanes copy one row of B (two at W = 64: an even row and the next), so on a partial
    # last pass the test of its first row, from the wave id, is the same in all its lanes
    wrow = (aw.wave_id() * aw.wave_width()) // CB
    for p in aw.static_range(PB):
        r = br + p * SB
        if p * SB + SB <= BK or wrow + p * SB < BK:  # compile-time true but on a partial last pass
            word = (buf * (BK * 16 * CB) + (bch // 8) * P + r * 128 + (((bch % 8) ^ (r % 8)) * 16)) // 4
            aw.async_copy(tb, word, b, gb + (p * SB + k0) * nw, 4)


@aw.func
def _gelu_rows(c, t, frag, row, col, m, n):
    # as gemm_mma._gelu_store, storing only the rows below m (every wave takes the barriers)
    wv = aw.wave_id()
    aw.barrier()
    aw.mma_store(t, frag, 16 * wv, 0)
    aw.barrier()
    if row < m:
        for e0 in range(0, 256, aw.wave_width()):  # a uniform loop (W divides 256)
            e = e0 + aw.lane_id()
            x = t[16 * wv + e // 16, e % 16]
            y = 0.5 * x * (1.0 + aw.fast_tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
            c[(row + e // 16) * n + col + e % 16] = y


def gemm_group(a: Any, b: Any, bias: Any = None, *, gelu: bool = False, target: str | None = None,
               wave_width: int | None = None, GR: int = 2, BK: int = 32, STAGES: int = 2,
               BN: int = BN) -> np.ndarray:
    """``a @ b (+ bias) (then GELU)`` through :func:`gemm_group_kernel`, with its launch contract
    kept: bf16 inputs (f16 when ``a`` is float16), f32 output.

    Args:
        a: (M, K), b: (K, N) arrays (converted to bf16 unless ``a`` is float16).
        bias: optional (N,) f32.
        target, wave_width: where to run (default target; W default 32, and the launch asks for
            exactly that W: the kernel's copies are unrolled for it, so a target that cannot run it
            refuses the launch instead of computing with another W).
        GR, BK, STAGES, BN: the tiling (``64 GR x BN`` blocks of ``4 GR`` waves, BN 64, 128 or
            256; K slices of BK in a ring of STAGES; the defaults fit the emulator's 64 KiB of
            local memory).
    Returns: (M, N) float32. K is padded with zeros to a multiple of ``STAGES * BK``, N to BN and
    M to 16 (the padding adds nothing to the products).
    Raises: KernelInputError on arrays that are not 2-D or whose inner sizes differ, or a BN
    other than 64, 128 or 256.
    """
    if BN not in BNS:
        raise KernelInputError(f"gemm_group: BN must be one of {BNS}, got {BN!r}")
    f16 = np.asarray(a).dtype == np.float16
    A, B = _as16(a, "a", f16), _as16(b, "b", f16)
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise KernelInputError(f"gemm_group: a is {A.shape} but b is {B.shape} (inner dimensions differ)")
    kb = STAGES * BK
    Mp, Np, Kp = max(16, -(-M // 16) * 16), max(BN, -(-N // BN) * BN), max(kb, -(-K // kb) * kb)
    if (Mp, Kp) != (M, K):
        A = np.pad(A, ((0, Mp - M), (0, Kp - K)))
    if (Kp, Np) != (K, N):
        B = np.pad(B, ((0, Kp - K), (0, Np - N)))
    bvec = np.zeros(Np, np.float32)
    if bias is not None:
        bb = np.asarray(bias, np.float32).reshape(-1)
        if bb.shape != (N,):
            raise KernelInputError(f"gemm_group: bias must have shape ({N},), got {bb.shape}")
        bvec[:N] = bb
    out = np.zeros((Mp, Np), np.float32)
    W = wave_width or 32
    gemm_group_kernel(np.ascontiguousarray(A).reshape(-1).view(np.uint32), np.ascontiguousarray(B).reshape(-1).view(
        np.uint32), bvec, out.reshape(-1), Mp, Np, Kp, grid=(Np // BN, -(-Mp // (64 * GR))),
        workgroup=(4 * GR * W, 1, 1), target=target, wave_width=W, W=W, GR=GR, BK=BK, STAGES=STAGES,
        GM=0, use_bias=bias is not None, gelu=gelu, f16=f16, BN=BN)
    return out[:M, :N]
