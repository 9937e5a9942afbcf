"""The PTX backend's warp-uniform control analysis (ptx_mma.warp_uniform_control): kernels with
wave operations whose branches provably agree in every lane are lowered with plain branches;
any branch that may differ between lanes keeps the mask-stack lowering."""

from __future__ import annotations

import anywave as aw
from anywave.backends import ptx
from anywave.backends.ptx_mma import warp_uniform_control


@aw.kernel
def uniform_loop(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    s = 0.0
    for i in range(0, n):  # bound from an argument: every lane agrees
        s = s + aw.wave_sum(x[t + i])
    if aw.workgroup_id(0) < n:  # wave-uniform special register
        s = s + 1.0
    y[t] = s


@aw.kernel
def lane_loop(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    s = 0.0
    for i in range(aw.lane_id(), n):  # the start differs per lane
        s = s + aw.wave_sum(x[i])
    y[t] = s


@aw.kernel
def loaded_bound(x: aw.In[aw.f32], m: aw.In[aw.i32], y: aw.Out[aw.f32]):
    t = aw.global_id(0)
    s = 0.0
    for i in range(0, m[0]):  # a loaded value: treated as per-lane
        s = s + aw.wave_sum(x[i])
    y[t] = s


@aw.kernel
def lane_if_then_uniform(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    v = x[t]
    w = v if t < n else 0.0  # a per-lane select (no branch)
    s = 0.0
    for _i in range(0, n):
        s = s + aw.wave_sum(w)
    y[t] = s


@aw.kernel
def lane_branch(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    s = 0.0
    if t < n:  # a per-lane branch
        s = aw.wave_sum(x[t])
    y[t] = s


@aw.func
def _early(v, n):
    if n > 3:  # uniform inside the function
        return v + 1.0
    return v


@aw.func
def _early_lane(v):
    if aw.lane_id() > 3:
        return v + 1.0
    return v


@aw.kernel
def call_uniform(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    y[t] = aw.wave_sum(_early(x[t], n))


@aw.kernel
def call_lane(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    t = aw.global_id(0)
    y[t] = aw.wave_sum(_early_lane(x[t]))


def _flat(k) -> bool:  # noqa: ANN001 - a compiled kernel
    m = k.compile()
    return warp_uniform_control(m, m.kernels[0])


def test_uniform_control_is_found() -> None:
    for k in (uniform_loop, lane_if_then_uniform, call_uniform):
        assert _flat(k), k.name
        info = ptx.translate(k.compile()).kernels[k.name]
        assert not info.uniform, k.name  # plain branches, no mask stack


def test_per_lane_control_keeps_the_mask_stack() -> None:
    for k in (lane_loop, loaded_bound, lane_branch, call_lane):
        assert not _flat(k), k.name
        assert ptx.translate(k.compile()).kernels[k.name].uniform, k.name


def test_flat_lowering_has_no_mask_votes() -> None:
    text = str(ptx.translate(uniform_loop.compile()))
    assert "per-thread control flow" in text and "%fo0" not in text
    # the wave reduction still uses the warp's existing lanes
    assert "%exist" in text


def test_issue_kernel_keeps_the_mask_stack() -> None:
    """The issue-15 kernel's copy loops start at the thread id: per-lane trip counts."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from mma_issue_kernel import mma_gemm

    m = mma_gemm.compile()
    assert not warp_uniform_control(m, m.kernels[0])
