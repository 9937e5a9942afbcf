"""Reductions and scans: float sum (workgroup collectives), multi-workgroup prefix sum,
histogram (local-memory atomics, then device atomics).

Order: :func:`sum_f32` sums each workgroup's 256 elements with ``aw.workgroup_reduce``
(the W-invariant pairwise tree over thread ids, docs/spec.md §8.15; elements past the end
are absent), then the workgroup partials by the same kernel again until one value is left.
The result is the same bits at every W and on every target
(:func:`anywave.kernels.reference.sum_f32` reproduces it). The prefix sum and histogram are
integer computations (mod 2^32): identical at every W. Every kernel here is W-invariant.
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, ceil_div, launch_kw

WG = 256  #: threads per workgroup of the 1-D kernels here


@aw.kernel
def reduce_sum_kernel(x: aw.In[aw.f32], partial: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    v = aw.bitcast(aw.u32(0x80000000), aw.f32)  # -0.0: x + (-0.0) = x, so absent elements add nothing
    if i < n:
        v = x[i]
    total = aw.workgroup_reduce(v)  # the W-invariant pairwise tree over thread ids
    if aw.local_id(0) == 0:
        partial[aw.workgroup_id(0)] = total


@aw.kernel
def scan_blocks_kernel(x: aw.In[aw.u32], y: aw.Out[aw.u32], block_sums: aw.Out[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    v = aw.u32(0)
    if i < n:
        v = x[i]
    s = aw.workgroup_scan(v)  # inclusive, thread order (wave scans + wave partials)
    if i < n:
        y[i] = s
    if aw.local_id(0) == aw.workgroup_size(0) - 1:
        block_sums[aw.workgroup_id(0)] = s


@aw.kernel
def add_offsets_kernel(y: aw.Buffer[aw.u32], scanned_sums: aw.In[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    g = aw.workgroup_id(0)
    if i < n and g > 0:
        y[i] = y[i] + scanned_sums[g - 1]


@aw.kernel
def histogram_kernel(data: aw.In[aw.u32], hist: aw.Buffer[aw.u32], n: aw.i32, *, bins: int = 256):
    counts = aw.local_array(aw.u32, bins)
    t = aw.local_id(0)
    wg = aw.workgroup_size(0)
    for b in range(t, bins, wg):
        counts[b] = 0
    aw.barrier()
    i = aw.global_id(0)
    stride = wg * aw.num_workgroups(0)
    while i < n:  # grid-stride loop: few workgroups, many elements each
        aw.atomic_add(counts, data[i] % bins, 1, scope="workgroup")
        i += stride
    aw.barrier()
    for b in range(t, bins, wg):
        c = counts[b]
        if c != 0:
            aw.atomic_add(hist, b, c)


def sum_f32(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.float32:
    """Sum of a float32 array (flattened) by repeated workgroup reductions; see the module
    docstring for the order (the same bits at every W and on every target). Empty input
    sums to 0.0.

    Returns:
        np.float32."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).ravel()
    if a.size == 0:
        return np.float32(0.0)
    while a.size > 1:
        g = ceil_div(a.size, WG)
        partial = np.empty(g, np.float32)
        reduce_sum_kernel(a, partial, a.size, grid=g, workgroup=WG, **launch_kw(wave_width, target))
        a = partial
    return np.float32(a[0])


def prefix_sum(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Inclusive prefix sum of a 1-D uint32 array, mod 2^32, across workgroups: each workgroup
    scans its block, the block totals are scanned recursively, then added back."""
    a = np.asarray(x)
    if a.ndim != 1 or a.dtype != np.uint32:
        raise KernelInputError(f"prefix_sum: expected a 1-D uint32 array, got {a.dtype} of shape {a.shape}")
    a = np.ascontiguousarray(a)
    n = a.size
    if n == 0:
        return a.copy()
    g = ceil_div(n, WG)
    y = np.empty(n, np.uint32)
    sums = np.empty(g, np.uint32)
    kw = launch_kw(wave_width, target)
    scan_blocks_kernel(a, y, sums, n, grid=g, workgroup=WG, **kw)
    if g > 1:
        scanned = prefix_sum(sums, **kw)
        add_offsets_kernel(y, scanned, n, grid=g, workgroup=WG, **kw)
    return y


def histogram(data: np.ndarray, bins: int = 256, *, workgroups: int = 16, wave_width: int | None = None,
              target: str | None = None) -> np.ndarray:
    """Counts of ``data % bins`` for a uint32 (or uint8/uint16) array; returns uint32[bins].
    ``bins`` is a compile-time constant (1..4096); ``workgroups`` caps the grid (grid-stride loop)."""
    a = np.asarray(data)
    if a.dtype not in (np.uint8, np.uint16, np.uint32):
        raise KernelInputError(f"histogram: expected unsigned integer data, got {a.dtype}")
    if not isinstance(bins, int) or not 1 <= bins <= 4096:
        raise KernelInputError(f"histogram: bins must be an int in 1..4096, got {bins!r}")
    a = np.ascontiguousarray(a.ravel().astype(np.uint32))
    hist = np.zeros(bins, np.uint32)
    g = max(1, min(workgroups, ceil_div(a.size, WG)))
    histogram_kernel(a, hist, a.size, bins=bins, grid=g, workgroup=WG, **launch_kw(wave_width, target))
    return hist
