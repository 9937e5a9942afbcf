"""Dense linear algebra and row-wise kernels: transpose, tiled matmul, row softmax, layer norm.

Arithmetic order (reproduced by :mod:`anywave.kernels.reference`; none depends on W):

* matmul: ``acc = fma(a[i, k], b[k, j], acc)`` for k = 0, 1, ... in order from ``acc = +0.0``,
  then ``acc + bias[j]`` and ``acc if acc > 0 else +0.0`` when the epilogue asks;
* row softmax / layer norm: one workgroup of ``block`` threads per row; thread t folds
  columns t, t + block, ... sequentially (from +0.0, or -inf for the max), then a
  local-memory tree halves the ``block`` partials (``p[t] += p[t + s]``, s = block/2 ... 1).
  Softmax: ``m = max``, ``e = exp(x - m)`` (precise stdlib exp, <= 2 ulp), ``y = e / sum(e)``.
  Layer norm: ``mean = sum(x) / n``, ``var = sum((x - mean)^2) / n``,
  ``y = (x - mean) * (1 / sqrt(var + eps)) * gamma + beta`` (each op rounded to f32).
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, as_f32, ceil_div, launch_kw

TILE = 16  #: default tile edge of transpose and matmul (workgroup = TILE x TILE threads)
NEG_INF_BITS = 0xFF800000


@aw.kernel
def transpose_kernel(a: aw.In[aw.f32], b: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32, *, tile: int = TILE):
    # the +1 column of padding puts tile[k, tx] of consecutive tx in different local banks
    buf = aw.local_array(aw.f32, (tile, tile + 1))
    tx = aw.local_id(0)
    ty = aw.local_id(1)
    c = aw.workgroup_id(0) * tile + tx
    r = aw.workgroup_id(1) * tile + ty
    if r < rows and c < cols:
        buf[ty, tx] = a[r * cols + c]
    aw.barrier()
    c2 = aw.workgroup_id(1) * tile + tx
    r2 = aw.workgroup_id(0) * tile + ty
    if r2 < cols and c2 < rows:
        b[r2 * rows + c2] = buf[tx, ty]


@aw.kernel
def matmul_kernel(a: aw.In[aw.f32], b: aw.In[aw.f32], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
                  m: aw.i32, n: aw.i32, k: aw.i32, *, tile: int = TILE, epilogue: str = "none"):
    assert epilogue == "none" or epilogue == "bias" or epilogue == "bias_relu", "epilogue: none|bias|bias_relu"
    at = aw.local_array(aw.f32, (tile, tile))
    bt = aw.local_array(aw.f32, (tile, tile + 1))
    tx = aw.local_id(0)
    ty = aw.local_id(1)
    row = aw.workgroup_id(1) * tile + ty
    col = aw.workgroup_id(0) * tile + tx
    acc = 0.0
    for k0 in range(0, k, tile):
        ka = k0 + tx
        va = 0.0
        if row < m and ka < k:
            va = a[row * k + ka]
        at[ty, tx] = va
        kb = k0 + ty
        vb = 0.0
        if kb < k and col < n:
            vb = b[kb * n + col]
        bt[ty, tx] = vb
        aw.barrier()
        # only the real k: padding with fma(0, 0, acc) would turn an acc of -0.0 into +0.0
        for kk in range(min(tile, k - k0)):
            acc = aw.fma(at[ty, kk], bt[kk, tx], acc)
        aw.barrier()
    if row < m and col < n:
        if epilogue == "bias" or epilogue == "bias_relu":
            acc = acc + bias[col]
        if epilogue == "bias_relu":
            acc = acc if acc > 0.0 else 0.0
        c[row * n + col] = acc


@aw.func
def _tree(v, op, block):
    # local-memory tree over the workgroup's `block` partials; every thread gets the result
    buf = aw.local_array(aw.f32, block)
    t = aw.local_id(0)
    buf[t] = v
    aw.barrier()
    for lv in aw.static_range(13):
        s = block >> (lv + 1)
        if s > 0:
            if t < s:
                if op == "sum":
                    buf[t] = buf[t] + buf[t + s]
                else:
                    buf[t] = max(buf[t], buf[t + s])
            aw.barrier()
    r = buf[0]
    aw.barrier()
    return r


@aw.kernel
def softmax_kernel(x: aw.In[aw.f32], out: aw.Buffer[aw.f32], rows: aw.i32, cols: aw.i32, *, block: int = 128):
    r = aw.workgroup_id(0)
    t = aw.local_id(0)
    base = r * cols
    mx = aw.bitcast(aw.u32(NEG_INF_BITS), aw.f32)
    for j in range(t, cols, block):
        mx = max(mx, x[base + j])
    mx = _tree(mx, "max", block)
    s = 0.0
    for j in range(t, cols, block):
        e = aw.exp(x[base + j] - mx)
        out[base + j] = e
        s = s + e
    s = _tree(s, "sum", block)
    for j in range(t, cols, block):
        out[base + j] = out[base + j] / s


@aw.kernel
def layer_norm_kernel(x: aw.In[aw.f32], gamma: aw.In[aw.f32], beta: aw.In[aw.f32], out: aw.Out[aw.f32],
                      rows: aw.i32, cols: aw.i32, eps: aw.f32, *, block: int = 128):
    r = aw.workgroup_id(0)
    t = aw.local_id(0)
    base = r * cols
    nf = aw.f32(cols)
    s = 0.0
    for j in range(t, cols, block):
        s = s + x[base + j]
    mean = _tree(s, "sum", block) / nf
    q = 0.0
    for j in range(t, cols, block):
        d = x[base + j] - mean
        q = q + d * d
    var = _tree(q, "sum", block) / nf
    rstd = 1.0 / aw.sqrt(var + eps)
    for j in range(t, cols, block):
        out[base + j] = (x[base + j] - mean) * rstd * gamma[j] + beta[j]


def row_block(cols: int) -> int:
    """Threads per row used by softmax/layer norm: the power of two >= cols, clamped to 8..128."""
    b = 8
    while b < cols and b < 128:
        b *= 2
    return b


def transpose(a: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """``a.T`` of a 2-D float32 array, through padded local-memory tiles (16 x 16 workgroups)."""
    x = as_f32(a, "a", 2)
    rows, cols = x.shape
    out = np.empty((cols, rows), np.float32)
    if x.size:
        transpose_kernel(x, out, rows, cols, grid=(ceil_div(cols, TILE), ceil_div(rows, TILE)),
                         workgroup=(TILE, TILE), **launch_kw(wave_width, target))
    return out


def matmul_operands(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, *,
                    relu: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The checked operands of ``matmul``: (a, b as float32 2-D arrays, the bias (a 1-element
    zero array when there is none), the epilogue: ``"none"``, ``"bias"`` or ``"bias_relu"``).

    Raises KernelInputError on mismatched shapes, or ``relu`` without ``bias``."""
    x, w = as_f32(a, "a", 2), as_f32(b, "b", 2)
    k = x.shape[1]
    if w.shape[0] != k:
        raise KernelInputError(f"matmul: a is {x.shape} but b is {w.shape}; need b.shape[0] == {k}")
    n = w.shape[1]
    if bias is None:
        if relu:
            raise KernelInputError("matmul: relu=True needs a bias (the epilogue is bias + ReLU)")
        return x, w, np.zeros(1, np.float32), "none"
    bv = as_f32(bias, "bias", 1)
    if bv.shape != (n,):
        raise KernelInputError(f"matmul: bias has shape {bv.shape}, expected ({n},)")
    return x, w, bv, "bias_relu" if relu else "bias"


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, *, relu: bool = False,
           wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """``a @ b`` (+ ``bias`` per column, then ReLU if ``relu``) for float32 a: (M, K), b: (K, N),
    bias: (N,) with the 16 x 16 tiled kernel, any shape; returns float32 (M, N). Exact order: see
    the module docstring. The library's front door, :func:`anywave.kernels.matmul`
    (:func:`anywave.kernels.gemm.matmul`), takes the register-tiled GEMM where it fits: the same
    order, the same bits.

    Raises KernelInputError on mismatched shapes, or ``relu`` without ``bias``."""
    x, w, bv, epilogue = matmul_operands(a, b, bias, relu=relu)
    (m, k), n = x.shape, w.shape[1]
    out = np.empty((m, n), np.float32)
    if out.size:
        matmul_kernel(x, w, bv, out, m, n, k, epilogue=epilogue, grid=(ceil_div(n, TILE), ceil_div(m, TILE)),
                      workgroup=(TILE, TILE), **launch_kw(wave_width, target))
    return out


def softmax_rows(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Softmax of each row of a 2-D float32 array (one workgroup per row). Within a few ulp of
    the exact softmax (precise exp <= 2 ulp); the same bits at every W and on every target."""
    a = as_f32(x, "x", 2)
    rows, cols = a.shape
    out = np.empty_like(a)
    if a.size:
        block = row_block(cols)
        softmax_kernel(a, out, rows, cols, block=block, grid=rows, workgroup=block, **launch_kw(wave_width, target))
    return out


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5, *,
               wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Layer norm over the last axis of a 2-D float32 array (biased variance), scaled by
    ``gamma`` and shifted by ``beta`` (both (cols,)). Bit-exact order: module docstring."""
    a = as_f32(x, "x", 2)
    rows, cols = a.shape
    g, b = as_f32(gamma, "gamma", 1), as_f32(beta, "beta", 1)
    if g.shape != (cols,) or b.shape != (cols,):
        raise KernelInputError(f"layer_norm: gamma {g.shape} and beta {b.shape} must both be ({cols},)")
    out = np.empty_like(a)
    if a.size:
        block = row_block(cols)
        layer_norm_kernel(a, g, b, out, rows, cols, np.float32(eps), block=block, grid=rows, workgroup=block,
                          **launch_kw(wave_width, target))
    return out
