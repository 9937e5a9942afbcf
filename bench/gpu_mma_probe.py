"""Probes that place the time of the tiled fragment GEMM (bench/gpu_mma.py) on the H200, by
leaving stages out (METHOD.md: time variants that leave one stage out):

* ``hmma_loop``: only fragment mma on registers (16 accumulators per wave, the GEMM's 64 x 64
  wave tile), fragments loaded once: the mma.sync issue ceiling at the GEMM's occupancy;
* ``smem_loop``: the GEMM's K loop without the device copies: fragment loads from local memory
  (ldmatrix), mma and one barrier per 64-deep slice, 8 waves of 64 x 64 (a 128 x 256 block).

Their results are meaningless numbers (timing only); FLOP counts are the mma work they do."""

from __future__ import annotations

import anywave as aw
from anywave.kernels.gemm_mma import _async_slice


@aw.kernel
def hmma_loop(x: aw.In[aw.u32], c: aw.Out[aw.f32], iters: aw.i32):
    t = aw.local_id(0)
    ta = aw.local_array(aw.u32, (64, 12))
    for e0 in range(0, 64 * 12, aw.workgroup_size(0)):  # the workgroup size divides 768
        ta[(e0 + t) // 12, (e0 + t) % 12] = x[e0 + t]
    aw.barrier()
    acc = aw.fragments(16, "acc")
    fa = aw.fragments(4, "a", aw.bf16)
    fb = aw.fragments(4, "b", aw.bf16)
    for i in aw.static_range(4):
        aw.mma_load(fa[i], ta, 16 * i, 0)
        aw.mma_load(fb[i], ta, 16 * i, 0)
    for _it in range(0, iters):
        for i in aw.static_range(4):
            for j in aw.static_range(4):
                aw.mma_sync(acc[i * 4 + j], fa[i], fb[j], acc[i * 4 + j])
    wv = aw.wave_id()
    base = (aw.workgroup_id(0) * aw.num_waves() + wv) * 16 * 256
    for i in aw.static_range(16):
        aw.mma_store(c, acc[i], base + 256 * i, 16)


@aw.kernel
def smem_loop(x: aw.In[aw.u32], c: aw.Out[aw.f32], k: aw.i32):
    # 8 waves (2 x 4) of 64 x 64 on a 128 x 256 block, BK = 64, two local buffers as in gemm_tiled_kernel
    t = aw.local_id(0)
    ta = aw.local_array(aw.u32, (256, 36))
    tb = aw.local_array(aw.u32, (128, 132))
    for e0 in range(0, 256 * 36, aw.workgroup_size(0)):
        ta[(e0 + t) // 36, (e0 + t) % 36] = x[(e0 + t) % 4096]
    for e0 in range(0, 128 * 132, aw.workgroup_size(0)):
        tb[(e0 + t) // 132, (e0 + t) % 132] = x[(e0 + t) % 4096]
    aw.barrier()
    acc = aw.fragments(16, "acc")
    fa = aw.fragments(4, "a", aw.bf16)
    fb = aw.fragments(4, "b", aw.bf16)
    wv = aw.wave_id()
    wr = (wv // 4) * 64
    wc = (wv % 4) * 64
    for _k0 in range(0, k, 128):
        for s in aw.static_range(2):
            for kk in aw.static_range(4):
                for i in aw.static_range(4):
                    aw.mma_load(fa[i], ta, s * 128 + wr + 16 * i, 16 * kk)
                for j in aw.static_range(4):
                    aw.mma_load(fb[j], tb, s * 64 + 16 * kk, wc + 16 * j)
                for i in aw.static_range(4):
                    for j in aw.static_range(4):
                        aw.mma_sync(acc[i * 4 + j], fa[i], fb[j], acc[i * 4 + j])
            aw.barrier()
    base = (aw.workgroup_id(0) * 8 + wv) * 16 * 256
    for i in aw.static_range(16):
        aw.mma_store(c, acc[i], base + 256 * i, 16)


@aw.kernel
def copy_ring(a: aw.In[aw.u32], b: aw.In[aw.u32], c: aw.Out[aw.f32], m: aw.i32, n: aw.i32, k: aw.i32, *,
              TM: int = 4, TN: int = 4, WM: int = 2, WN: int = 4, W: int = 32, BK: int = 32, GM: int = 8,
              STAGES: int = 4):
    # ``copy_ring``: gemm_tiled_kernel's STAGES >= 2 path (block order, the cp.async ring of local
    # buffers, waits and one barrier per slice) with the fragment loads and mma left out: the time
    # of the device -> local copies alone, to compare with the GEMM's (the same index arithmetic
    # through the kernel's own _async_slice). One word per thread is read back at the end.
    BM = 16 * TM * WM
    BN = 16 * TN * WN
    NT = W * WM * WN
    CB = BN // 8
    PA = BM * 4 // NT
    PB = 32 * CB // NT
    ta = aw.local_array(aw.u32, (STAGES * BM, BK // 2 + 4))
    tb = aw.local_array(aw.u32, (STAGES * BK, BN // 2 + 4))
    t = aw.local_id(0)
    by = aw.workgroup_id(1)
    bx = aw.workgroup_id(0)
    gx = aw.num_workgroups(0)
    pid = by * gx + bx
    first = (pid // (GM * gx)) * GM
    rows = min(aw.num_workgroups(1) - first, GM)
    by = first + (pid % (GM * gx)) % rows
    bx = (pid % (GM * gx)) // rows
    kw = k // 2
    nw = n // 2
    ar = t // 4
    ac = (t % 4) * 4
    br = t // CB
    bc = (t % CB) * 4
    ga = (by * BM + ar) * kw + ac
    gb = br * nw + bx * BN // 2 + bc
    for st in aw.static_range(STAGES - 1):
        _async_slice(a, b, ta, tb, ga, gb, ar, ac, br, bc, kw, nw, st * BK, st, BM, BK, PA, PB, NT // 4, NT // CB)
        aw.async_commit()
    for k0 in range(0, k, STAGES * BK):
        for s in aw.static_range(STAGES):
            aw.async_wait(STAGES - 2)
            aw.barrier()
            kn = min(k0 + (s + STAGES - 1) * BK, k - BK)
            _async_slice(a, b, ta, tb, ga, gb, ar, ac, br, bc, kw, nw, kn, (s + STAGES - 1) % STAGES, BM, BK,
                         PA, PB, NT // 4, NT // CB)
            aw.async_commit()
    aw.async_wait(0)
    aw.barrier()
    c[(by * gx + bx) * NT + t] = aw.bitcast(ta[t % BM, 0] ^ tb[t % BK, 1], aw.f32)
