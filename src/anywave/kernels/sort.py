"""Bitonic sort of float32 keys (ascending), any length (padded with +inf to a power of two).

Stages with a compare distance ``j`` < ``block`` run in local memory with barriers (one
workgroup of ``block`` threads per block of keys); longer distances run as one device pass
per (k, j). The network is data-independent, so the result is exact — ``np.sort`` for
NaN-free keys (equal keys are interchangeable; -0.0 and +0.0 compare equal and may come out
in either order) — at every W.
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, launch_kw

BLOCK = 256  #: keys per workgroup (one per thread)
_MAX_LOG = 12  #: largest block is 2^12 (compile-time unrolling bound)


@aw.func
def _compare_swap(s, t, i, k, j):
    p = t ^ j
    if p > t:
        a = s[t]
        b = s[p]
        # (compiler bug worked around: `if (a > b) == up:` (bool == bool) crashes copy_propagate)
        if (i & k) == 0:
            if a > b:
                s[t] = b
                s[p] = a
        elif a < b:
            s[t] = b
            s[p] = a
    aw.barrier()


@aw.kernel
def bitonic_block_kernel(keys: aw.Buffer[aw.f32], *, block: int = BLOCK):
    # all stages k = 2 .. block inside one block; direction from the global index, so that
    # neighbouring blocks come out ascending / descending, ready for the next merge
    s = aw.local_array(aw.f32, block)
    t = aw.local_id(0)
    i = aw.global_id(0)
    s[t] = keys[i]
    aw.barrier()
    for lk in aw.static_range(1, _MAX_LOG + 1):
        k = 1 << lk
        if k <= block:
            for lj in aw.static_range(lk):
                _compare_swap(s, t, i, k, k >> (lj + 1))
    keys[i] = s[t]


@aw.kernel
def bitonic_merge_block_kernel(keys: aw.Buffer[aw.f32], k: aw.i32, *, block: int = BLOCK):
    # the tail of stage k: distances j = block/2 .. 1, in local memory
    s = aw.local_array(aw.f32, block)
    t = aw.local_id(0)
    i = aw.global_id(0)
    s[t] = keys[i]
    aw.barrier()
    for lj in aw.static_range(1, _MAX_LOG + 1):
        j = block >> lj
        if j > 0:
            _compare_swap(s, t, i, k, j)
    keys[i] = s[t]


@aw.kernel
def bitonic_global_kernel(keys: aw.Buffer[aw.f32], k: aw.i32, j: aw.i32):
    i = aw.global_id(0)
    p = i ^ j
    if p > i:
        a = keys[i]
        b = keys[p]
        if (i & k) == 0:
            if a > b:
                keys[i] = b
                keys[p] = a
        elif a < b:
            keys[i] = b
            keys[p] = a


def bitonic_sort(keys: np.ndarray, *, block: int = BLOCK, wave_width: int | None = None,
                 target: str | None = None) -> np.ndarray:
    """Sorted copy (ascending) of a 1-D float32 array without NaNs. ``block``: keys per
    workgroup, a power of two in 2..4096 (the workgroup size).

    Raises KernelInputError for NaN keys, a non-1-D input or a bad ``block``."""
    a = np.asarray(keys, dtype=np.float32)
    if a.ndim != 1:
        raise KernelInputError(f"bitonic_sort: expected a 1-D array, got shape {a.shape}")
    if not isinstance(block, int) or block < 2 or block > 1 << _MAX_LOG or block & (block - 1):
        raise KernelInputError(f"bitonic_sort: block must be a power of two in 2..{1 << _MAX_LOG}, got {block!r}")
    if np.isnan(a).any():
        raise KernelInputError("bitonic_sort: keys contain NaN (no total order)")
    n = a.size
    if n == 0:
        return a.copy()
    size = block
    while size < n:
        size *= 2
    buf = np.full(size, np.inf, np.float32)
    buf[:n] = a
    kw = launch_kw(wave_width, target)
    g = size // block
    bitonic_block_kernel(buf, block=block, grid=g, workgroup=block, **kw)
    k = 2 * block
    while k <= size:
        j = k // 2
        while j >= block:
            bitonic_global_kernel(buf, k, j, grid=g, workgroup=block, **kw)
            j //= 2
        bitonic_merge_block_kernel(buf, k, block=block, grid=g, workgroup=block, **kw)
        k *= 2
    return buf[:n].copy()
