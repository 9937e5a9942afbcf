"""Flash attention forward on the wave-group MMA (docs/spec.md §8.14), the ``fast`` variant:
``O = softmax(Q Kᵀ · scale + mask) V`` and the log-sum-exp, bf16/f16 inputs through the fragment
MMAs with f32 accumulation (on the CUDA target's sm_90: ``wgmma``).

The definition followed (the attention section of the spec): per (batch, head, query row) the keys
are walked in blocks of ``BC = 64`` in increasing order, with the online-softmax recurrence

    s = q·kᵀ (one row of S = Q Kᵀ, unscaled),  m_new = max(m, max_j s_j),
    alpha = exp(m − m_new),  p_j = exp((s_j − m_new) · scale),  l = l·alpha + Σ_j p_j,
    acc = acc·alpha + P·V,  and at the end O = acc / l,  LSE = m·scale + ln l,

with ``m = −inf, l = 0, acc = 0`` at the start; masked keys (``j > i`` when causal, ``j >= S``)
score ``−inf``. Nothing depends on the batch, the head count or the grid, so a row's result is
batch-invariant by construction.

How this kernel computes it (class ``bounded``): exp is ``exp2`` with ``c = scale · log2(e)``
folded in, ``p = 2^(fma(s, c, −m_new·c))`` and ``alpha = 2^(m·c − m_new·c)`` (the running max is
kept scaled as well, so alpha is exactly 1 where the max did not move); P is rounded to the input
type (bf16/f16) before P·V; S = Q Kᵀ and P·V are the fragment MMAs (spec §8.13's bound per
16-deep step); ``O = acc / l`` correctly rounded, ``LSE = (m·c + log2 l) · ln 2`` with an
approximate ``log2`` (2 ulp). Against the float64 reference on the same rounded inputs:
``|o − o_ref| ≤ u · (softmax · |V|) + 2^-12 · max|V|`` elementwise (u = 2^-8 for bf16, 2^-11 for
f16: the rounding of P dominates; the second term covers the f32 products and sums, exp2 and the
division), ``|lse − lse_ref| ≤ 2^-16 · (1 + |lse_ref|)`` (tests/test_attention_fast.py holds both
at W = 8..64). Identical run to run and for every GR on one target.

Layout: a workgroup of ``4 GR`` waves owns ``64 GR`` query rows of one (batch, head): wave group
``g`` the 64 rows ``64 g ..``, wave ``w`` of it 16 of them, held as ``D/16`` A fragments of Q for
the whole walk; per KV block a 16 x 64 strip of scores ``S`` (``aw.mma_group_bt``: K is B
transposed, as stored), the softmax on the accumulators (``aw.mma_rowmax``, ``aw.mma_exp2``,
``aw.mma_rowsum``, ``aw.mma_mul``), P converted to A fragments (``aw.mma_cvt``) and
``acc += P V`` (``aw.mma_group``, a 16 x D strip). K and V blocks are double-buffered in local
memory by ``aw.async_copy``: both in one layout, rows of keys, D split into panels of 64 columns
(8192 bytes: 64 rows of 128 bytes) whose 16-byte chunks are permuted by ``xor (key mod 8)``,
which is the swizzled row layout of ``mma.group.bt`` for K and the swizzled panel layout of
``mma.group`` for V.

Shapes (the kernel trusts them; :func:`forward` and :func:`attention_numpy` keep them): q
(B, Hq, Sp, D) of 16-bit elements as u16, k and v (B, Hkv, Sp, D) as 32-bit words (element pairs,
typed f32 only so the copies move them into the f32 ring), ``Sp`` = S rounded up to 64 (rows past
S zero), D = 64 or 128; o (B, Hq, Sp, D) f32, lse (B, Hq, Sp, 16) f32 (16 copies of a row's
value: every lane stores, so no branch depends on the lane). Launch: ``grid = (Sp / (64 GR),
Hq, B)``, ``workgroup = (4 GR W,)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError

#: keys per block of the walk (a constant of the definition)
BC = 64
#: bytes of one panel of a K or V block: 64 keys x 64 columns of 16-bit elements
PANEL = BC * 128
#: the head dims the kernel is built for; a head dim d <= 128 that is not one of them runs at the
#: next one (:func:`kernel_head_dim`), its Q, K, V padded with zero columns
HEAD_DIMS = (64, 128)
#: ln 2 (LSE from log2)
LN2 = math.log(2.0)


@aw.kernel
def attention_fast_kernel(q: aw.In[aw.u16], k: aw.In[aw.f32], v: aw.In[aw.f32], o: aw.Out[aw.f32],
                          lse: aw.Out[aw.f32], s_len: aw.i32, s_pad: aw.i32, hq: aw.i32, hkv: aw.i32, c: aw.f32,
                          *, D: int = 128, GR: int = 2, W: int = 32, causal: bool = False, f16: bool = False):
    elt = aw.f16 if f16 else aw.bf16
    NT = 4 * GR * W  # threads
    TILE = BC * D * 2  # bytes of a K or V block
    STAGE = 2 * TILE  # K then V
    CR = D // 8  # 16-byte chunks of a key row
    PASSES = BC * CR // NT  # copy passes per block
    assert D == 64 or D == 128, "attention_fast: D must be 64 or 128"
    assert NT % CR == 0 and PASSES * NT == BC * CR, "attention_fast: the threads must divide a block's chunks"
    ring = aw.local_array(aw.f32, (2 * STAGE // 64, 16), align=1024)  # rows of 64 bytes
    qf = aw.fragments(D // 16, "a", elt)
    sf = aw.fragments(BC // 16, "acc")
    of = aw.fragments(D // 16, "acc")
    pf = aw.fragments(BC // 16, "a", elt)
    m = aw.fragment("acc")  # running max (raw scores), row-broadcast
    mco = aw.fragment("acc")  # the old running max times c
    mcn = aw.fragment("acc")  # the new one times c
    lf = aw.fragment("acc")  # running sum
    al = aw.fragment("acc")  # alpha
    t = aw.local_id(0)
    wv = aw.wave_id()
    grp = wv // 4
    nqb = aw.num_workgroups(0)
    bx = aw.workgroup_id(0)
    if causal:
        bx = nqb - 1 - bx  # the longest walks first
    h = aw.workgroup_id(1)
    b = aw.workgroup_id(2)
    hk = h // (hq // hkv)
    q0 = bx * (64 * GR) + 16 * wv  # this wave's first query row
    diag = bx * GR + grp  # causal: the group's 64 rows are block diag's keys
    qrow0 = (b * hq + h) * s_pad + q0
    kv0 = (b * hkv + hk) * s_pad  # first key row of the head
    aw.mma_fill(m, -math.inf)
    for kk in aw.static_range(D // 16):
        aw.mma_load(qf[kk], q, qrow0 * D + 16 * kk, D)
    nb = (s_len + BC - 1) // BC
    if causal:
        nb = min(nb, bx * GR + GR)
    cr = t % CR
    rr = t // CR
    _copy_block(k, v, ring, kv0, 0, rr, cr, D, NT, PASSES, CR, TILE)
    aw.async_commit()
    for blk in range(nb):
        aw.async_wait(0)
        aw.barrier()  # block blk landed for every thread; every wave is done with block blk - 1
        if blk + 1 < nb:
            _copy_block(k, v, ring, kv0 + (blk + 1) * BC, ((blk + 1) % 2) * STAGE, rr, cr, D, NT, PASSES, CR,
                        TILE)
        aw.async_commit()
        if not causal or blk <= diag:
            st = (blk % 2) * STAGE
            for j in aw.static_range(BC // 16):
                aw.mma_fill(sf[j], 0.0)
            for kk in aw.static_range(D // 16):
                aw.mma_group_bt(sf, qf[kk], ring, st + PANEL * (kk // 4) + 32 * (kk % 4))
            k0 = blk * BC
            if causal:
                if blk == diag or k0 + BC > s_len:
                    for j in aw.static_range(BC // 16):
                        aw.mma_mask(sf[j], sf[j], q0 - (k0 + 16 * j), s_len - (k0 + 16 * j))
            elif k0 + BC > s_len:
                for j in aw.static_range(BC // 16):
                    aw.mma_mask(sf[j], sf[j], 1 << 30, s_len - (k0 + 16 * j))
            aw.mma_scale(mco, m, c)  # the same value as last block's mcn: alpha is 1 where m stays
            aw.mma_rowmax(m, sf, m)
            aw.mma_scale(mcn, m, c)
            aw.mma_exp2(al, mco, mcn, 1.0)
            for j in aw.static_range(BC // 16):
                aw.mma_exp2(sf[j], sf[j], mcn, c)
            aw.mma_mul(lf, lf, al)
            aw.mma_rowsum(lf, sf, lf)
            for j in aw.static_range(D // 16):
                aw.mma_mul(of[j], of[j], al)
            for j in aw.static_range(BC // 16):
                aw.mma_cvt(pf[j], sf[j])
            for kk in aw.static_range(BC // 16):
                aw.mma_group(of, pf[kk], ring, st + TILE + 2048 * kk, PANEL)
    aw.async_wait(0)
    for j in aw.static_range(D // 16):
        aw.mma_div(of[j], of[j], lf)
        aw.mma_store(o, of[j], qrow0 * D + 16 * j, D)
    aw.barrier()  # every wave is done with the ring: it stages the per-row m*c and l
    aw.mma_scale(mcn, m, c)
    aw.mma_store(ring, mcn, 32 * wv, 0)
    aw.mma_store(ring, lf, 32 * wv + 16, 0)
    aw.barrier()
    # every lane stores (no lane-dependent branch, so the kernel's control flow stays warp-uniform):
    # lse holds 16 copies of a row's value, row-major (rows, 16)
    for e0 in range(0, 256, aw.wave_width()):  # a uniform loop (W divides 256)
        e = e0 + aw.lane_id()
        x = (ring[32 * wv + e // 16, e % 16] + aw.fast_log2(ring[32 * wv + 16 + e // 16, e % 16])) * LN2
        lse[qrow0 * 16 + e] = x


#: The Q fragments are loop-invariant A operands of the walk's wgmma: ptxas (CUDA 13.0, sm_90a) once
#: gave their registers to P (D = 64, wrong results from the second block on); the PTX backend keeps
#: such operands live after their loops for every kernel (anywave.backends.ptx_mma.keep_alive), so the
#: kernel needs no workaround of its own.


@aw.func
def _copy_block(k, v, ring, key0, stage, rr, cr, D, NT, PASSES, CR, TILE):
    # start the 16-byte copies of the K and V rows key0 .. key0 + 63 into the ring at byte stage:
    # row r, chunk c at panel c // 8, byte 128 r + 16 ((c % 8) xor (r % 8)) of it
    for p in aw.static_range(PASSES):
        r = rr + p * (NT // CR)
        byte = stage + (cr // 8) * PANEL + r * 128 + ((cr % 8) ^ (r % 8)) * 16
        src = (key0 + r) * (D // 2) + cr * 4
        aw.async_copy(ring, (byte // 64, (byte % 64) // 4), k, src, 4)
        aw.async_copy(ring, ((byte + TILE) // 64, (byte % 64) // 4), v, src, 4)


def _bits16(x: Any, f16: bool) -> np.ndarray:
    """float array -> its bf16 (f16) bit patterns as uint16, rounded to nearest even."""
    from anywave.emu import floats as fl

    a = np.asarray(x)
    if a.dtype == np.uint16:
        return a
    a32 = np.asarray(a, np.float32)
    bits = fl.f32_to_f16_bits(a32) if f16 else fl.f32_to_bf16_bits(a32)
    return bits.astype(np.uint16)


def launch_wave_width(target: str, wave_width: int | None) -> int:
    """The W the fast kernels are built and launched at: ``wave_width`` when given, else the
    project's one default rule for ``target`` (:func:`anywave.runtime.targets.default_wave_width`
    over the widths the target offers; ``"cuda:1"`` is looked up as ``"cuda"``). A target that is
    not available raises the launch's own TargetError."""
    if wave_width is not None:
        return int(wave_width)
    from anywave.jit.targets import get_target
    from anywave.runtime.targets import default_wave_width

    return default_wave_width(get_target(target.split(":", 1)[0]).wave_widths)


def kernel_head_dim(d: int) -> int | None:
    """The head dim of the kernel that runs head dim ``d``: the smallest of :data:`HEAD_DIMS` at
    least ``d``, None above the largest (or for d < 1).

    Why zero columns change nothing: a zero column of Q and K adds exact zero products to every
    score (``x + 0 = x`` in f32; only the sign of a zero score could change, and exp of it is 1
    either way), a zero column of V (and of dO in the backward) gives a zero output column that is
    cut off; the scale stays ``1/sqrt(d)`` of the real ``d``. So the results keep the bound of
    :func:`forward` and are the same run to run and batch-invariant; they cost the padded dim's
    time (d = 32 runs as 64)."""
    d = int(d)
    return next((h for h in HEAD_DIMS if 1 <= d <= h), None)


def pad_head_dim(x: Any, dk: int, rows: int | None = None) -> Any:
    """``x`` (..., s, d) NumPy array or torch tensor with zero columns appended to ``dk`` and
    zero rows to ``rows`` (default: s), in one copy (``x`` itself when nothing is appended)."""
    s, d = x.shape[-2:]
    rows = s if rows is None else rows
    if d == dk and s == rows:
        return x
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(np.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, rows - s), (0, dk - d)]))
    import torch

    return torch.nn.functional.pad(x, (0, dk - d, 0, rows - s)).contiguous()


def check_shapes(qs: tuple[int, ...], ks: tuple[int, ...], vs: tuple[int, ...], what: str = "attention_fast") -> None:
    """Raise KernelInputError unless q (B, Hq, S, D), k and v (B, Hkv, S, D) fit the kernel:
    1 <= D <= max(:data:`HEAD_DIMS`) (run at :func:`kernel_head_dim`), Hkv dividing Hq, one
    sequence length."""
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        raise KernelInputError(f"{what}: q, k, v must be 4-D (batch, heads, sequence, head dim), got shapes "
                               f"{qs}, {ks}, {vs}")
    if ks != vs:
        raise KernelInputError(f"{what}: k and v must have one shape, got {ks} and {vs}")
    B, Hq, S, D = qs
    if ks[0] != B or ks[2] != S or ks[3] != D:
        raise KernelInputError(f"{what}: k/v {ks} must match q {qs} in batch, sequence length and head dim "
                               "(Sq == Sk)")
    if kernel_head_dim(D) is None:
        raise KernelInputError(f"{what}: head dim {D} is not supported; the fast kernels take 1 to {max(HEAD_DIMS)} "
                               f"(run at {' or '.join(map(str, HEAD_DIMS))}, zero-padded)")
    if ks[1] < 1 or Hq % ks[1]:
        raise KernelInputError(f"{what}: the KV heads ({ks[1]}) must divide the query heads ({Hq})")
    if min(B, Hq, S) < 1:
        raise KernelInputError(f"{what}: empty input (shape {qs})")


def attention_numpy(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *,
                    f16: bool = False, target: str = "emulator", wave_width: int | None = None,
                    GR: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The kernel on NumPy arrays (the emulator by default; any target offering ``mma_acc`` runs it:
    OpenCL, SYCL, Vulkan, CUDA): ``(o, lse)``.

    Args:
        q: (B, Hq, S, D), k, v: (B, Hkv, S, D) float arrays (rounded to bf16, or f16 with
            ``f16=True``; uint16 arrays are taken as the bit patterns), D 1 to 128 (run at 64 or
            128: :func:`kernel_head_dim`), Hkv dividing Hq.
        causal: key j visible to query i iff j <= i. scale: default 1/sqrt(D).
        target, wave_width: where to run (default the emulator; W: the target's default rule). GR: wave groups per
            workgroup (1 fits the emulator's local memory at D = 128 too).
    Returns: o (B, Hq, S, D) float32 (the f32 result before the cast to the input type) and lse
        (B, Hq, S) float32 (natural log).
    Raises: KernelInputError for shapes outside the above.
    """
    qb, kb, vb = (_bits16(x, f16) for x in (q, k, v))
    check_shapes(qb.shape, kb.shape, vb.shape, "attention_numpy")
    B, Hq, S, D0 = qb.shape
    Hkv = kb.shape[1]
    sc = 1.0 / math.sqrt(D0) if scale is None else float(scale)
    D = kernel_head_dim(D0)
    blk = 64 * GR
    Sp = -(-S // blk) * blk

    qp, kp, vp = (pad_head_dim(x, D, Sp) for x in (qb, kb, vb))
    o = np.zeros((B, Hq, Sp, D), np.float32)
    lse = np.zeros((B, Hq, Sp, 16), np.float32)
    W = launch_wave_width(target, wave_width)
    c = np.float32(np.float32(sc) * np.float32(math.log2(math.e)))
    attention_fast_kernel(qp.reshape(-1), kp.reshape(-1).view(np.float32), vp.reshape(-1).view(np.float32),
                          o.reshape(-1), lse.reshape(-1), S, Sp, Hq, Hkv, c, grid=(Sp // blk, Hq, B),
                          workgroup=(4 * GR * W, 1, 1), target=target, wave_width=W, D=D, GR=GR, W=W,
                          causal=causal, f16=f16)
    return np.ascontiguousarray(o[:, :, :S, :D0]), np.ascontiguousarray(lse[:, :, :S, 0])


def forward(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *,
            GR: int = 1) -> tuple[Any, Any]:
    """Flash attention forward (the ``fast`` variant) on CUDA tensors: ``(o, lse)``.

    Args:
        q: (B, Hq, S, D), k, v: (B, Hkv, S, D) torch tensors on one CUDA device, all bf16 or all
            f16, contiguous (SDPA's layout); D 1 to 128 (run at 64 or 128, zero-padded:
            :func:`kernel_head_dim`); Hkv dividing Hq (query head h reads KV head h // (Hq / Hkv)).
        causal: key j visible to query i iff j <= i. scale: default 1/sqrt(D).
        GR: wave groups (64 query rows each) per workgroup (1 or 2: the same bits; 1 measured faster
            on the H200 at D = 128, bench/results/gpu_attention_fast.md).
    Returns: o (B, Hq, S, D) in the input dtype (the kernel's f32 result rounded once) and lse
        (B, Hq, S) float32 (natural log).
    Accuracy (class ``bounded``, :mod:`anywave.kernels.attention_fast`): against the float64
    reference on the same (rounded) inputs, ``|o - o_ref| <= u · (softmax · |V|) + 2^-12 · max|V|``
    elementwise before the cast to the input type (u = 2^-8 for bf16, 2^-11 for f16: P's
    rounding), and ``|lse - lse_ref| <= 2^-16 · (1 + |lse_ref|)``.
    Raises: KernelInputError for tensors off CUDA, of another dtype, not contiguous, or of shapes
        outside the above.
    """
    import torch

    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise KernelInputError(f"attention_fast.forward: {name} must be a torch tensor, got {type(x).__name__}")
        if x.device.type != "cuda":
            raise KernelInputError(f"attention_fast.forward: {name} is on {x.device}; this kernel runs on CUDA "
                                   "devices (the emulator path is attention_numpy)")
        if x.dtype not in (torch.bfloat16, torch.float16) or x.dtype != q.dtype:
            raise KernelInputError(f"attention_fast.forward: q, k, v must all be bfloat16 or all float16, got "
                                   f"{q.dtype}, {k.dtype}, {v.dtype}")
        if not x.is_contiguous():
            raise KernelInputError(f"attention_fast.forward: {name} must be contiguous (B, H, S, D)")
        if x.device != q.device:
            raise KernelInputError(f"attention_fast.forward: q is on {q.device} but {name} on {x.device}")
    check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), "attention_fast.forward")
    B, Hq, S, D0 = q.shape
    Hkv = k.shape[1]
    sc = 1.0 / math.sqrt(D0) if scale is None else float(scale)
    D = kernel_head_dim(D0)
    blk = 64 * GR
    Sp = -(-S // blk) * blk
    q, k, v = (pad_head_dim(x, D, Sp) for x in (q, k, v))
    o = torch.empty((B, Hq, Sp, D), dtype=torch.float32, device=q.device)
    lse = torch.empty((B, Hq, Sp, 16), dtype=torch.float32, device=q.device)
    c = float(np.float32(np.float32(sc) * np.float32(math.log2(math.e))))
    with torch.cuda.device(q.device):
        attention_fast_kernel(q.view(torch.uint16), k.view(torch.float32), v.view(torch.float32), o, lse, S, Sp, Hq,
                              Hkv, c, grid=(Sp // blk, Hq, B), workgroup=(4 * GR * 32, 1, 1), target="cuda", D=D,
                              GR=GR, W=32, causal=bool(causal), f16=q.dtype == torch.float16)
    out = o[:, :, :S, :D0].to(q.dtype)
    # contiguous, as the op's fake (meta) implementation declares it (a strided view would not be)
    return out, lse[:, :, :S, 0].contiguous()
