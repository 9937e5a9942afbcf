"""The kernel of issue 15 (one wave per 16x16 output tile, ``aw.mma`` in a K loop, tiles in
local memory), launched with grid=(n//16, n//16) and workgroup=32: a single wave at W = 32."""

import anywave as aw


@aw.kernel
def mma_gemm(a: aw.In[aw.bf16], b: aw.In[aw.bf16], c: aw.Out[aw.f32], n: aw.i32):
    ta = aw.local_array(aw.bf16, (16, 16))
    tb = aw.local_array(aw.bf16, (16, 16))
    tc = aw.local_array(aw.f32, (16, 16))
    t = aw.local_id(0)
    r0 = aw.workgroup_id(1) * 16
    c0 = aw.workgroup_id(0) * 16
    for e in range(t, 256, aw.workgroup_size(0)):
        tc[e // 16, e % 16] = 0.0
    for k0 in range(0, n, 16):
        for e in range(t, 256, aw.workgroup_size(0)):
            ta[e // 16, e % 16] = a[(r0 + e // 16) * n + k0 + e % 16]
            tb[e // 16, e % 16] = b[(k0 + e // 16) * n + c0 + e % 16]
        aw.barrier()
        aw.mma(tc, ta, tb, tc)
        aw.barrier()
    for e in range(t, 256, aw.workgroup_size(0)):
        c[(r0 + e // 16) * n + c0 + e % 16] = tc[e // 16, e % 16]
