"""The kernels of the workgroup-collective conformance cases, in the kernel language
(compiled into ``data/collectives.wave`` by :func:`anywave.conformance.gen_collectives.regenerate`)."""

from __future__ import annotations

import anywave as aw


@aw.kernel
def coll_f32(x: aw.In[aw.f32], red: aw.Out[aw.f32], inc: aw.Out[aw.f32], exc: aw.Out[aw.f32],
             mx: aw.Out[aw.f32], bc: aw.Out[aw.f32], src: aw.i32):
    i = aw.thread_linear_id()
    v = x[i]
    red[i] = aw.workgroup_reduce(v)
    inc[i] = aw.workgroup_scan(v)
    exc[i] = aw.workgroup_scan(v, exclusive=True)
    mx[i] = aw.workgroup_reduce(v, "max")
    bc[i] = aw.workgroup_broadcast(v, src)


@aw.kernel
def coll_u32(u: aw.In[aw.u32], s: aw.Out[aw.u32], inc: aw.Out[aw.u32], mn: aw.Out[aw.u32], xr: aw.Out[aw.u32]):
    i = aw.thread_linear_id()
    v = u[i]
    s[i] = aw.workgroup_reduce(v)
    inc[i] = aw.workgroup_scan(v)
    mn[i] = aw.workgroup_reduce(v, "min")
    xr[i] = aw.workgroup_reduce(v, "xor")
