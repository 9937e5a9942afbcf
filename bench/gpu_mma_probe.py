"""Probes that place the time of the tiled fragment GEMM (bench/gpu_mma.py) on the H200, by
leaving stages out (METHOD.md: time variants that leave one stage out):

* ``hmma_loop``: only fragment mma on registers (16 accumulators per wave, the GEMM's 64 x 64
  wave tile), fragments loaded once: the mma.sync issue ceiling at the GEMM's occupancy;
* ``smem_loop``: the GEMM's K loop without the device copies: fragment loads from local memory
  (ldmatrix), mma and one barrier per 64-deep slice, 8 waves of 64 x 64 (a 128 x 256 block).

Their results are meaningless numbers (timing only); FLOP counts are the mma work they do."""

from __future__ import annotations

import anywave as aw


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
