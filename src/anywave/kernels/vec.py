"""Memory-bound kernels written with 128-bit accesses (``aw.load4``/``aw.store4``) and register
arrays, the way a user of the language would write them for speed.

Orders (reproduced by :mod:`anywave.kernels.reference`):

* ``add4``/``saxpy4``/``gelu4``: element-wise, the same per-element arithmetic as
  :mod:`anywave.kernels.elementwise` (so the same bits); thread g of T handles the quads
  (4 consecutive elements) g, g + T, ... (``per`` of them: coalesced 128-bit accesses), and
  elements past the last full quad one by one.
* ``sum4``: thread g of T keeps 4 accumulators ``acc[j] += x[4q + j]`` (from +0.0) over its
  quads q = g, g + T, ... in order; then ``s = (acc[0] + acc[1]) + (acc[2] + acc[3])``; the
  thread with g < n % 4 then adds ``x[4 (n // 4) + g]``; then the workgroup's ``s`` values are
  summed by :func:`anywave.compiler.stdlib.workgroup_reduce` (its fixed pairwise tree over the
  thread ids: W-invariant). A second launch with one workgroup reduces the per-workgroup
  partials the same way.
* ``softmax4``/``layer_norm4`` (rows of ``cols = 4 * block * vecs`` f32): one workgroup of
  ``block`` threads per row; thread t holds the quads t, t + block, ... of the row in registers
  (the row is read once), folds its 4 * vecs values in order (quad by quad, lanes 0..3), then
  the local-memory tree of :mod:`anywave.kernels.linalg` halves the ``block`` partials.
  Softmax: ``m = max``, ``e = exp(x - m)``, ``y = e / sum(e)``; layer norm as
  :func:`anywave.kernels.linalg.layer_norm_kernel`.
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, as_f32, ceil_div, launch_kw
from anywave.kernels.elementwise import gelu_tanh
from anywave.kernels.linalg import NEG_INF_BITS, _tree

WG = 256  #: threads per workgroup of the element-wise kernels and the sum
SUM_WG = 256


@aw.kernel
def add4_kernel(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *, per: int = 2):
    g = aw.global_id(0)
    nt = aw.num_workgroups(0) * aw.workgroup_size(0)
    quads = n // 4
    for p in aw.static_range(per):
        q = g + p * nt
        if q < quads:
            a = aw.load4(x, 4 * q)
            b = aw.load4(y, 4 * q)
            aw.store4(out, 4 * q, (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]))
    if g < n % 4:
        i = 4 * quads + g
        out[i] = x[i] + y[i]


@aw.kernel
def saxpy4_kernel(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32, *, per: int = 2):
    g = aw.global_id(0)
    nt = aw.num_workgroups(0) * aw.workgroup_size(0)
    quads = n // 4
    for p in aw.static_range(per):
        q = g + p * nt
        if q < quads:
            u = aw.load4(x, 4 * q)
            v = aw.load4(y, 4 * q)
            aw.store4(y, 4 * q, (a * u[0] + v[0], a * u[1] + v[1], a * u[2] + v[2], a * u[3] + v[3]))
    if g < n % 4:
        i = 4 * quads + g
        y[i] = a * x[i] + y[i]  # two roundings, as saxpy_kernel


@aw.kernel
def saxpy4_into_kernel(a: aw.f32, x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *,
                       per: int = 2):
    """``out = a * x + y`` out of place: :func:`saxpy4_kernel`'s arithmetic and quads. The
    host wrapper's kernel: a copy of ``y`` first and the in-place kernel after it moved every byte
    twice (2^24 floats on the 2-core CPU target: a 11 ms single-threaded copy beside a 7 ms kernel)."""
    g = aw.global_id(0)
    nt = aw.num_workgroups(0) * aw.workgroup_size(0)
    quads = n // 4
    for p in aw.static_range(per):
        q = g + p * nt
        if q < quads:
            u = aw.load4(x, 4 * q)
            v = aw.load4(y, 4 * q)
            aw.store4(out, 4 * q, (a * u[0] + v[0], a * u[1] + v[1], a * u[2] + v[2], a * u[3] + v[3]))
    if g < n % 4:
        i = 4 * quads + g
        out[i] = a * x[i] + y[i]


@aw.kernel
def gelu4_kernel(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *, per: int = 1):
    g = aw.global_id(0)
    nt = aw.num_workgroups(0) * aw.workgroup_size(0)
    quads = n // 4
    for p in aw.static_range(per):
        q = g + p * nt
        if q < quads:
            u = aw.load4(x, 4 * q)
            aw.store4(out, 4 * q, (gelu_tanh(u[0]), gelu_tanh(u[1]), gelu_tanh(u[2]), gelu_tanh(u[3])))
    if g < n % 4:
        i = 4 * quads + g
        out[i] = gelu_tanh(x[i])


@aw.kernel
def sum4_kernel(x: aw.In[aw.f32], partial: aw.Out[aw.f32], n: aw.i32):
    g = aw.global_id(0)
    nt = aw.num_workgroups(0) * aw.workgroup_size(0)
    quads = n // 4
    acc = aw.register_array(aw.f32, 4)
    for q in range(g, quads, nt):
        v = aw.load4(x, 4 * q)
        for j in aw.static_range(4):
            acc[j] = acc[j] + v[j]
    s = (acc[0] + acc[1]) + (acc[2] + acc[3])
    if g < n % 4:
        s = s + x[4 * quads + g]
    total = aw.workgroup_reduce(s)
    if aw.local_id(0) == 0:
        partial[aw.workgroup_id(0)] = total


@aw.kernel
def softmax4_kernel(x: aw.In[aw.f32], out: aw.Out[aw.f32], cols: aw.i32, *, block: int = 256, vecs: int = 4):
    base = aw.workgroup_id(0) * cols
    t = aw.local_id(0)
    v = aw.register_array(aw.f32, (vecs, 4))
    for p in aw.static_range(vecs):
        u = aw.load4(x, base + 4 * (t + p * block))
        for j in aw.static_range(4):
            v[p, j] = u[j]
    mx = aw.bitcast(aw.u32(NEG_INF_BITS), aw.f32)
    for p in aw.static_range(vecs):
        for j in aw.static_range(4):
            mx = max(mx, v[p, j])
    mx = _tree(mx, "max", block)
    s = 0.0
    for p in aw.static_range(vecs):
        for j in aw.static_range(4):
            v[p, j] = aw.exp(v[p, j] - mx)
            s = s + v[p, j]
    s = _tree(s, "sum", block)
    for p in aw.static_range(vecs):
        aw.store4(out, base + 4 * (t + p * block), (v[p, 0] / s, v[p, 1] / s, v[p, 2] / s, v[p, 3] / s))


@aw.kernel
def layer_norm4_kernel(x: aw.In[aw.f32], gamma: aw.In[aw.f32], beta: aw.In[aw.f32], out: aw.Out[aw.f32],
                       cols: aw.i32, eps: aw.f32, *, block: int = 256, vecs: int = 4):
    base = aw.workgroup_id(0) * cols
    t = aw.local_id(0)
    nf = aw.f32(cols)
    v = aw.register_array(aw.f32, (vecs, 4))
    for p in aw.static_range(vecs):
        u = aw.load4(x, base + 4 * (t + p * block))
        for j in aw.static_range(4):
            v[p, j] = u[j]
    s = 0.0
    for p in aw.static_range(vecs):
        for j in aw.static_range(4):
            s = s + v[p, j]
    mean = _tree(s, "sum", block) / nf
    q = 0.0
    for p in aw.static_range(vecs):
        for j in aw.static_range(4):
            v[p, j] = v[p, j] - mean
            q = q + v[p, j] * v[p, j]
    var = _tree(q, "sum", block) / nf
    rstd = 1.0 / aw.sqrt(var + eps)
    for p in aw.static_range(vecs):
        c = 4 * (t + p * block)
        gm = aw.load4(gamma, c)
        bt = aw.load4(beta, c)
        aw.store4(out, base + c, (v[p, 0] * rstd * gm[0] + bt[0], v[p, 1] * rstd * gm[1] + bt[1],
                                  v[p, 2] * rstd * gm[2] + bt[2], v[p, 3] * rstd * gm[3] + bt[3]))


# ----------------------------------------------------------------------------- host wrappers

def elementwise_grid(n: int, per: int, wg: int = WG) -> int:
    """Workgroups for ``n`` elements at ``per`` quads per thread (at least 1)."""
    return max(1, ceil_div(max(n // 4, 1), per * wg))


def add4(x: np.ndarray, y: np.ndarray, *, per: int = 2, wave_width: int | None = None,
         target: str | None = None) -> np.ndarray:
    """``x + y`` (float32, one shape) with 128-bit accesses; the bits of ``x + y``."""
    xa, ya = as_f32(x, "x"), as_f32(y, "y")
    if xa.shape != ya.shape:
        raise KernelInputError(f"add4: x has shape {xa.shape} but y has shape {ya.shape}")
    out = np.empty_like(xa)
    add4_kernel(xa, ya, out, xa.size, per=per, grid=elementwise_grid(xa.size, per), workgroup=WG,
                **launch_kw(wave_width, target))
    return out


def saxpy4(a: float, x: np.ndarray, y: np.ndarray, *, per: int = 2, wave_width: int | None = None,
           target: str | None = None) -> np.ndarray:
    """``a * x + y`` (two roundings, float32) with 128-bit accesses; returns a new array."""
    xa, ya = as_f32(x, "x"), as_f32(y, "y")
    if xa.shape != ya.shape:
        raise KernelInputError(f"saxpy4: x has shape {xa.shape} but y has shape {ya.shape}")
    out = np.empty_like(xa)
    saxpy4_into_kernel(np.float32(a), xa, ya, out, xa.size, per=per, grid=elementwise_grid(xa.size, per),
                       workgroup=WG, **launch_kw(wave_width, target))
    return out


def gelu4(x: np.ndarray, *, per: int = 1, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """GELU (tanh form; the bits of :func:`anywave.kernels.elementwise.gelu`) with 128-bit accesses."""
    xa = as_f32(x, "x")
    out = np.empty_like(xa)
    gelu4_kernel(xa, out, xa.size, per=per, grid=elementwise_grid(xa.size, per), workgroup=WG,
                 **launch_kw(wave_width, target))
    return out


def sum4(x: np.ndarray, *, workgroups: int = 64, wave_width: int | None = None,
         target: str | None = None) -> np.float32:
    """Sum of a float32 array (flattened): ``workgroups`` workgroups of 256 threads, then one
    workgroup over their partials (order: module docstring; the same bits at every W)."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).ravel()
    if a.size == 0:
        return np.float32(0.0)
    g = max(1, min(workgroups, ceil_div(a.size, 4 * SUM_WG)))
    part = np.empty(g, np.float32)
    sum4_kernel(a, part, a.size, grid=g, workgroup=SUM_WG, **launch_kw(wave_width, target))
    tot = np.empty(1, np.float32)
    sum4_kernel(part, tot, g, grid=1, workgroup=SUM_WG, **launch_kw(wave_width, target))
    return np.float32(tot[0])


def row_shape(cols: int) -> tuple[int, int] | None:
    """(block, vecs) of the register-resident row kernels for ``cols`` columns, or None when
    ``cols`` is not 4 * block * vecs for block in 32..1024 (a power of two) and vecs <= 8."""
    for block in (256, 512, 1024, 128, 64, 32):
        if cols % (4 * block) == 0 and 1 <= cols // (4 * block) <= 8:
            return block, cols // (4 * block)
    return None


def softmax4(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Row softmax of a 2-D float32 array whose column count fits :func:`row_shape` (the row
    stays in registers: one read, one write). Raises KernelInputError otherwise."""
    a = as_f32(x, "x", 2)
    rows, cols = a.shape
    shape = row_shape(cols)
    if shape is None:
        raise KernelInputError(f"softmax4: {cols} columns is not 4 * block * vecs (block 32..1024, vecs <= 8); "
                               "use kernels.softmax_rows")
    block, vecs = shape
    out = np.empty_like(a)
    if rows:
        softmax4_kernel(a, out, cols, block=block, vecs=vecs, grid=rows, workgroup=block,
                        **launch_kw(wave_width, target))
    return out


def layer_norm4(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5, *,
                wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Layer norm of each row (as :func:`anywave.kernels.layer_norm`, register-resident rows;
    the column count must fit :func:`row_shape`)."""
    a = as_f32(x, "x", 2)
    rows, cols = a.shape
    g, b = as_f32(gamma, "gamma", 1), as_f32(beta, "beta", 1)
    if g.shape != (cols,) or b.shape != (cols,):
        raise KernelInputError(f"layer_norm4: gamma {g.shape} and beta {b.shape} must both be ({cols},)")
    shape = row_shape(cols)
    if shape is None:
        raise KernelInputError(f"layer_norm4: {cols} columns is not 4 * block * vecs (block 32..1024, vecs <= 8)")
    block, vecs = shape
    out = np.empty_like(a)
    if rows:
        layer_norm4_kernel(a, g, b, out, cols, np.float32(eps), block=block, vecs=vecs, grid=rows,
                           workgroup=block, **launch_kw(wave_width, target))
    return out
