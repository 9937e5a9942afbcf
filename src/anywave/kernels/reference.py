"""Independent NumPy references for :mod:`anywave.kernels`, computed in float32 in each
kernel's own arithmetic order (see the kernel modules' docstrings), so that the kernels can be
checked bit for bit. Nothing here calls anywave.

:func:`fma_f32` is a correctly rounded float32 fused multiply-add built from float64
arithmetic with round-to-odd (exact product, TwoSum, then one rounding to float32).
"""

from __future__ import annotations

import numpy as np


def fma_f32(a, b, c) -> np.ndarray:
    """Correctly rounded ``a * b + c`` for float32 inputs (broadcasting), as float32.

    The float32 product is exact in float64; the float64 sum is rounded to odd (its error,
    from TwoSum, forces the last bit to 1 when the sum is inexact), which makes the final
    float64 → float32 rounding correct (53 >= 24 + 2). Finite inputs without overflow."""
    a64 = np.asarray(a, np.float32).astype(np.float64)
    b64 = np.asarray(b, np.float32).astype(np.float64)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    p = a64 * b64
    s = np.asarray(p + c64)
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    even = (s.view(np.int64) & 1) == 0
    fix = (e != 0) & even
    s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def butterfly_sum(x: np.ndarray, w: int) -> np.ndarray:
    """The spec's ``wave_sum`` (wred.add.f32) over the last axis, which has W lanes."""
    s = x.astype(np.float32)
    lanes = np.arange(w)
    k = 1
    while k < w:
        s = (s + s[..., lanes ^ k]).astype(np.float32)
        k *= 2
    return s[..., 0]


def sum_f32(x: np.ndarray, wave_width: int | None = None, wg: int = 256) -> np.float32:
    """:func:`anywave.kernels.sum_f32`: :func:`tree_sum_f32` over each block of ``wg``
    elements (the last block short), repeated over the block sums until one value is left.
    ``wave_width`` is accepted for old callers and ignored: the order does not depend on W.
    Vectorised: blocks padded with -0.0 (``x + (-0.0) = x`` exactly, so a padded right half
    leaves its left half unchanged, as an absent one does), then pairs added level by level;
    ``wg`` a power of two."""
    a = np.asarray(x, np.float32).ravel()
    if a.size == 0:
        return np.float32(0.0)
    while a.size > 1:
        g = -(-a.size // wg)
        s = np.full(g * wg, -0.0, np.float32)
        s[:a.size] = a
        s = s.reshape(g, wg)
        with np.errstate(all="ignore"):
            while s.shape[1] > 1:
                s = (s[:, 0::2] + s[:, 1::2]).astype(np.float32)
        a = s[:, 0]
    return np.float32(a[0])


def prefix_sum_u32(x: np.ndarray) -> np.ndarray:
    """Inclusive prefix sum mod 2^32."""
    return (np.cumsum(x.astype(np.uint64)) & 0xFFFFFFFF).astype(np.uint32)


def gelu_f32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(GELU reference in float64, allowed error) for :func:`anywave.kernels.elementwise.gelu_tanh`.

    The reference repeats the kernel's float32 ``t = -2 sqrt(2/pi) * fma(0.044715 x, x*x, x)`` and
    then evaluates ``x / (1 + exp(t))`` in float64. The bound: the kernel's exp is within 2 ulp,
    ``1 + e`` and the division round once each, so the relative error is at most ~3 * 2^-23; the
    tolerance is 4 ulp of the result (``np.spacing`` of the float32 reference) plus an absolute
    2^-124 for results below the normal range (there the kernel's denominator may overflow to inf
    and the result is ±0). Shapes: x any shape; both outputs have x's shape, float64.
    """
    x = np.asarray(x, np.float32)
    k, c = np.float32(-2.0 * 0.7978845608028654), np.float32(0.044715)
    with np.errstate(over="ignore", invalid="ignore"):
        s = fma_f32((c * x).astype(np.float32), (x * x).astype(np.float32), x)
        t = (k * s).astype(np.float32)
        ref = x.astype(np.float64) / (1.0 + np.exp(t.astype(np.float64)))
    tol = 4 * np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64) + 2.0 ** -124
    return ref, tol


def matmul_f32(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, relu: bool = False) -> np.ndarray:
    """``acc = fma(a[:, k], b[k, :], acc)`` for k in order from +0.0, then + bias, then ReLU."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = fma_f32(a[:, k:k + 1], b[k:k + 1, :], acc)
    if bias is not None:
        acc = (acc + np.asarray(bias, np.float32)[None, :]).astype(np.float32)
    if relu:
        acc = np.where(acc > 0, acc, np.float32(0)).astype(np.float32)
    return acc


def row_fold(x: np.ndarray, block: int, op: str) -> np.ndarray:
    """The row kernels' reduction: thread t folds columns t, t + block, ... sequentially (from
    +0.0 for "sum", -inf for "max"), then a tree halves the partials. Returns (rows,)."""
    rows, cols = x.shape
    init = np.float32(0) if op == "sum" else np.float32(-np.inf)
    acc = np.full((rows, block), init, np.float32)
    f = (lambda p, q: (p + q).astype(np.float32)) if op == "sum" else np.maximum
    for c0 in range(0, cols, block):
        chunk = x[:, c0:c0 + block]
        acc[:, :chunk.shape[1]] = f(acc[:, :chunk.shape[1]], chunk)
    s = block // 2
    while s:
        acc[:, :s] = f(acc[:, :s], acc[:, s:2 * s])
        s //= 2
    return acc[:, 0]


def softmax_f32(x: np.ndarray, block: int) -> np.ndarray:
    """Row softmax in the kernel's order with a correctly rounded exp (the kernel's exp is
    within 2 ulp of it, so results agree within a few ulp, not bit for bit)."""
    x = np.asarray(x, np.float32)
    m = row_fold(x, block, "max")
    e = np.exp((x - m[:, None]).astype(np.float64)).astype(np.float32)
    s = row_fold(e, block, "sum")
    return (e / s[:, None]).astype(np.float32)


def layer_norm_f32(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, block: int) -> np.ndarray:
    """Layer norm in the kernel's float32 order (bit-exact)."""
    x = np.asarray(x, np.float32)
    n = np.float32(x.shape[1])
    mean = (row_fold(x, block, "sum") / n).astype(np.float32)
    d = (x - mean[:, None]).astype(np.float32)
    var = (row_fold((d * d).astype(np.float32), block, "sum") / n).astype(np.float32)
    rstd = (np.float32(1) / np.sqrt((var + np.float32(eps)).astype(np.float32))).astype(np.float32)
    return ((d * rstd[:, None]) * np.asarray(gamma, np.float32) + np.asarray(beta, np.float32)).astype(np.float32)


def gaussian5_f32(img: np.ndarray, w: np.ndarray) -> np.ndarray:
    """5x5 correlation with clamp-to-edge, ``acc = fma(w[dy, dx], pixel, acc)`` row-major."""
    img = np.asarray(img, np.float32)
    h, wd = img.shape
    p = np.pad(img, 2, mode="edge")
    acc = np.zeros_like(img)
    for dy in range(5):
        for dx in range(5):
            acc = fma_f32(w[dy, dx], p[dy:dy + h, dx:dx + wd], acc)
    return acc


def sobel_f32(img: np.ndarray) -> np.ndarray:
    """Sobel magnitude in the kernel's float32 order, clamp-to-edge."""
    img = np.asarray(img, np.float32)
    h, wd = img.shape
    p = np.pad(img, 1, mode="edge")

    def at(dy: int, dx: int) -> np.ndarray:
        return p[1 + dy:1 + dy + h, 1 + dx:1 + dx + wd]

    two = np.float32(2)
    gx = (at(-1, 1) - at(-1, -1)) + two * (at(0, 1) - at(0, -1)) + (at(1, 1) - at(1, -1))
    gy = (at(1, -1) - at(-1, -1)) + two * (at(1, 0) - at(-1, 0)) + (at(1, 1) - at(-1, 1))
    return np.sqrt(gx * gx + gy * gy).astype(np.float32)


def _tree_nodes(a: np.ndarray):
    """``node(s, size)``: the pairwise-tree value of the aligned block ``[s, s + size)`` of ``a``
    (right halves past the end are empty: the node is its left half), memoised."""
    memo: dict[tuple[int, int], np.float32] = {}

    def node(s: int, size: int) -> np.float32:
        key = (s, size)
        if key not in memo:
            if size == 1:
                memo[key] = a[s]
            else:
                h = size // 2
                left = node(s, h)
                memo[key] = left if s + h >= a.size else np.float32(left + node(s + h, h))
        return memo[key]

    return node


def tree_sum_f32(x: np.ndarray) -> np.float32:
    """The workgroup collectives' f32 sum (docs/spec.md §8.15): the pairwise tree over the
    positions of ``x`` (1-D), each node ``[s, s + 2d)`` the float32 sum of its halves, a node
    whose right half is empty being its left half. Recursive on the definition."""
    a = np.asarray(x, np.float32).ravel()
    if a.size == 0:
        return np.float32(0.0)
    size = 1
    while size < a.size:
        size *= 2
    return _tree_nodes(a)(0, size)


def tree_scan_f32(x: np.ndarray, exclusive: bool = False) -> np.ndarray:
    """The workgroup collectives' f32 prefix sum (docs/spec.md §8.15): the exclusive prefix
    of position t is the left fold, largest block first, of :func:`tree_sum_f32` over the
    aligned power-of-two blocks of the binary decomposition of ``[0, t)``; exclusive of
    position 0 is +0.0; inclusive is ``exclusive + x[t]`` (``x[0]`` for t = 0)."""
    a = np.asarray(x, np.float32).ravel()
    node = _tree_nodes(a)
    out = np.empty_like(a)
    for t in range(a.size):
        acc = None
        start = 0
        for bit in range(31, -1, -1):
            size = 1 << bit
            if t & size:
                b = node(start, size)
                acc = b if acc is None else np.float32(acc + b)
                start += size
        if exclusive:
            out[t] = np.float32(0.0) if acc is None else acc
        else:
            out[t] = a[t] if acc is None else np.float32(acc + a[t])
    return out


# ----------------------------------------------------------------------------- kernels.vec

def row_fold4(x: np.ndarray, block: int, op: str) -> np.ndarray:
    """:mod:`anywave.kernels.vec`'s row reduction: thread t folds the quads t, t + block, ... of
    the row (each quad's 4 lanes in order) sequentially, then the tree of :func:`row_fold`."""
    rows, cols = x.shape
    v = np.asarray(x, np.float32).reshape(rows, cols // (4 * block), block, 4)
    init = np.float32(0) if op == "sum" else np.float32(-np.inf)
    acc = np.full((rows, block), init, np.float32)
    f = (lambda p, q: (p + q).astype(np.float32)) if op == "sum" else np.maximum
    for c in range(v.shape[1]):
        for j in range(4):
            acc = f(acc, v[:, c, :, j])
    s = block // 2
    while s:
        acc[:, :s] = f(acc[:, :s], acc[:, s:2 * s])
        s //= 2
    return acc[:, 0]


def softmax4_f32(x: np.ndarray, block: int) -> np.ndarray:
    """:func:`anywave.kernels.vec.softmax4` with a correctly rounded exp (the kernel's exp is
    within 2 ulp, so agreement is within a few ulp, not bit for bit)."""
    x = np.asarray(x, np.float32)
    m = row_fold4(x, block, "max")
    e = np.exp((x - m[:, None]).astype(np.float64)).astype(np.float32)
    return (e / row_fold4(e, block, "sum")[:, None]).astype(np.float32)


def layer_norm4_f32(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, block: int) -> np.ndarray:
    """:func:`anywave.kernels.vec.layer_norm4` in its float32 order (bit-exact)."""
    x = np.asarray(x, np.float32)
    n = np.float32(x.shape[1])
    mean = (row_fold4(x, block, "sum") / n).astype(np.float32)
    d = (x - mean[:, None]).astype(np.float32)
    var = (row_fold4((d * d).astype(np.float32), block, "sum") / n).astype(np.float32)
    rstd = (np.float32(1) / np.sqrt((var + np.float32(eps)).astype(np.float32))).astype(np.float32)
    return ((d * rstd[:, None]) * np.asarray(gamma, np.float32) + np.asarray(beta, np.float32)).astype(np.float32)


def _sum4_stage(a: np.ndarray, groups: int, wg: int) -> np.ndarray:
    n = a.size
    t = groups * wg
    quads = n // 4
    q = a[:4 * quads].reshape(quads, 4)
    acc = np.zeros((t, 4), np.float32)
    for it in range(0, quads, t):
        chunk = q[it:it + t]
        acc[:len(chunk)] = (acc[:len(chunk)] + chunk).astype(np.float32)
    s = ((acc[:, 0] + acc[:, 1]).astype(np.float32) + (acc[:, 2] + acc[:, 3]).astype(np.float32)).astype(np.float32)
    tail = n % 4
    s[:tail] = (s[:tail] + a[4 * quads:]).astype(np.float32)
    return np.array([tree_sum_f32(row) for row in s.reshape(groups, wg)], np.float32)


def sum4_f32(x: np.ndarray, workgroups: int, wg: int = 256) -> np.float32:
    """:func:`anywave.kernels.vec.sum4` with ``workgroups`` workgroups in the first launch
    (order: the module docstring of kernels.vec; W-invariant)."""
    a = np.asarray(x, np.float32).ravel()
    part = _sum4_stage(a, workgroups, wg)
    return np.float32(_sum4_stage(part, 1, wg)[0])
