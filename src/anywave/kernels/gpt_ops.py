"""Kernels of a GPT's training step in the kernel language, ``exact`` variant: every reduction has
an order fixed by the definition below — a sequential loop in one thread, or (the row kernels) a
fixed split of a row over :data:`ROW_BLOCK` threads and a fixed tree in local memory — so the bits
depend neither on the wave width W, nor on the target, nor on the batch (no wave operations, no
float atomics, no split across rows or the grid: a row's result is the same alone or inside any
batch).

Arithmetic order (each step an IEEE-754 f32 operation rounded to nearest even; WAVE never
contracts a multiply and an add into an fma unless ``aw.fma`` is written):

* ``linear_kernel``: ``y[i, j] = act(fma-chain_k(x[i, k], w[j, k]) from +0, + b[j])`` for k = 0..K-1
  (the order of :func:`anywave.torch.kernels.mm` with ``trans_b``); ``act`` the tanh-form GELU of
  :func:`anywave.kernels.elementwise.gelu_tanh` (``pre`` keeps the pre-activation);
* ``gelu_backward_kernel``: ``dx = g * (sg + (v * k(v)) * (sg * (1 - sg)))`` with
  ``sg = 1 / (1 + exp(t))``, ``t = -2 sqrt(2/pi) (v + 0.044715 v^3)`` clamped to [-88, 88] and
  ``k(v) = 2 sqrt(2/pi) (1 + 3 * 0.044715 v^2)`` — the derivative of ``v * sigmoid(-t)``;
* **row sums** of the row kernels (a row of C; one workgroup of :data:`ROW_BLOCK` = B threads
  per row): ``rowsum_j f_j`` is ``tree(p_0, ..., p_{B-1})`` where ``p_t`` is the sum (or fma-chain)
  of ``f_t, f_{t+B}, f_{t+2B}, ...`` in that order from +0 and ``tree`` adds pairwise in a fixed
  shape: ``p_t += p_{t+B/2}`` for t < B/2, then ``p_t += p_{t+B/4}`` for t < B/4, ..., down to
  ``p_0`` (:func:`anywave.kernels.linalg._tree`, in local memory: no wave operation, so the same
  for every W); ``rowmax`` likewise with ``max`` (its value does not depend on the order);
* ``layer_norm_kernel``: ``mean = (rowsum_j x_j) / C``, ``var = (rowsum-fma_j (x_j - mean)^2) / C``,
  ``rstd = 1 / sqrt(var + eps)``, ``y_j = fma((x_j - mean) * rstd, gamma_j, beta_j)``; RMSNorm
  (``rms``): ``rstd = 1 / sqrt((rowsum-fma_j x_j^2) / C + eps)``, ``y_j = (x_j * rstd) * gamma_j``;
* ``layer_norm_backward_kernel``: ``xh_j = (x_j - mean) * rstd``, ``gh_j = dy_j * gamma_j``, ``a = (rowsum_j gh_j)
  / C``, ``b = (rowsum-fma_j gh_j xh_j) / C``, ``dx_j = ((gh_j - a) - xh_j * b) * rstd`` (RMS: ``a`` absent,
  ``xh_j = x_j * rstd``); ``norm_param_partial_kernel`` + ``colsum_finish_kernel``:
  ``dgamma_j = fma-chain_r dy[r, j] xh[r, j]`` and ``dbeta_j = sum_r dy[r, j]`` over each block of
  :data:`ROWS_PER_PART` rows in order from +0, then the blocks' partials added in block order from +0
  (the bias gradient of a linear layer, ``colsum_partial_kernel`` + ``colsum_finish_kernel``, likewise);
* ``embedding_kernel``: a copy ``out[i, :] = table[idx[i], :]`` (NaN for an index outside the
  table); ``embedding_backward_kernel``: ``dtable[v, d] = sum over the tokens i with idx[i] = v, in
  increasing i, of grad[i, d]`` from +0 (the host passes those tokens as a stable sort: one
  thread per (v, d) walks its segment — a gather in a defined order, no atomics);
* ``xent_kernel``: ``m = rowmax_j x_j``, ``s = rowsum_j exp(x_j - m)``, ``lse = m + log(s)``,
  ``loss = lse - x[label]``; ``xent_backward_kernel``:
  ``dx = (exp(x_j - lse) - [j == label]) * scale`` with ``scale = g / rows`` rounded once;
* ``rotary_kernel`` (one thread per pair (i, i + D/2) of a row of D): the "rotate half" rotary
  embedding (J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021,
  in the GPT-NeoX / LLaMA layout that pairs element i with element i + D/2, not 2i with 2i + 1):
  ``y_i = x_i * c - x_{i+D/2} * s``, ``y_{i+D/2} = x_{i+D/2} * c + x_i * s`` (two rounded products,
  then one rounded add) with ``c = cos[t, i]``, ``s = sin[t, i]`` read from host tables;
  ``inverse`` rotates by the negated angle (``s`` negated, an exact operation): the backward;
* ``swiglu_kernel``: ``sg = 1 / (1 + exp(-a))``, ``y = (a * sg) * b`` (silu(a) * b; N. Shazeer,
  "GLU Variants Improve Transformer", 2020); ``swiglu_backward_kernel``:
  ``db = g * (a * sg)``, ``da = (g * b) * (sg * (1 + a * (1 - sg)))`` (the derivative of
  ``a * sigmoid(a)``);
* ``adamw_kernel``: ``m' = b1 m + (1 - b1) g``, ``v' = b2 v + ((1 - b2) g) g``, ``p' = p - (lr wd) p``,
  ``p'' = p' - lr ((m' / c1) / (sqrt(v' / c2) + eps))`` with ``c1 = 1 - b1^t``, ``c2 = 1 - b2^t``
  (I. Loshchilov, F. Hutter, "Decoupled Weight Decay Regularization", ICLR 2019, Algorithm 2;
  the scalars are rounded to f32 on the host); ``adamw_hyper_kernel`` the same with ``lr``, ``c1``,
  ``c2`` and ``lr wd`` read from a device buffer (the same f32 values: the same bits);
* ``sumsq_partial_kernel`` + ``norm_finish_kernel``: the squared global norm as fma chains over
  consecutive chunks of :data:`CHUNK` elements of the gradients laid end to end (parameter
  order), then the chunk sums added in order by one thread; ``norm = sqrt(total)``,
  ``scale = max_norm / (norm + 1e-6)`` when ``norm > max_norm`` else 1 (PyTorch's
  ``clip_grad_norm_`` rule); ``scale_kernel``: ``g * scale``.

The math functions are the standard library's precise ``aw.exp``/``aw.log``/``aw.sqrt``
(docs/spec.md: built from exact operations), so every conformant target returns the same bits.
"""

from __future__ import annotations

import anywave as aw
from anywave.kernels.elementwise import SQRT_2_OVER_PI, gelu_tanh
from anywave.kernels.linalg import _tree

#: threads per workgroup (a multiple of every W in {8, 16, 32, 64})
BLOCK = 64
#: threads per row of the row kernels (norms, cross-entropy), a constant of their definition: thread
#: t takes the columns t, t + ROW_BLOCK, t + 2 ROW_BLOCK, ... (a power of two, a multiple of every W)
ROW_BLOCK = 128
#: elements per partial sum of the global gradient norm (a constant of the definition)
CHUNK = 4096
#: rows per partial sum of a column sum (bias, LayerNorm gain and bias gradients; a constant of the
#: definition: the rows are summed in blocks of this many, in order, then the blocks in order)
ROWS_PER_PART = 256
NEG_INF_BITS = 0xFF800000
QNAN_BITS = 0x7FC00000
GELU_A = 0.044715


@aw.kernel
def linear_kernel(x: aw.In[aw.f32], w: aw.In[aw.f32], bias: aw.In[aw.f32], y: aw.Out[aw.f32],
                  pre: aw.Out[aw.f32], m: aw.i32, n: aw.i32, k: aw.i32, *, use_bias: bool = True,
                  gelu: bool = False):
    i = aw.global_id(0)
    if i < m * n:
        row = i // n
        col = i - row * n
        ia = row * k
        ib = col * k
        acc = 0.0
        for _ in aw.range(0, k, 1, unroll=4):
            acc = aw.fma(x[ia], w[ib], acc)
            ia += 1
            ib += 1
        if use_bias:
            acc = acc + bias[col]
        if gelu:
            pre[i] = acc
            y[i] = gelu_tanh(acc)
        else:
            y[i] = acc


@aw.kernel
def gelu_kernel(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = gelu_tanh(x[i])


@aw.kernel
def gelu_backward_kernel(g: aw.In[aw.f32], x: aw.In[aw.f32], dx: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        t = (v + (GELU_A * v) * (v * v)) * (-2.0 * SQRT_2_OVER_PI)
        t = t if t < 88.0 else 88.0
        t = t if t > -88.0 else -88.0
        sg = 1.0 / (1.0 + aw.exp(t))
        kv = (2.0 * SQRT_2_OVER_PI) * (1.0 + (3.0 * GELU_A) * (v * v))
        dx[i] = g[i] * (sg + (v * kv) * (sg * (1.0 - sg)))


@aw.kernel
def layer_norm_kernel(x: aw.In[aw.f32], gamma: aw.In[aw.f32], beta: aw.In[aw.f32], y: aw.Out[aw.f32],
                      stats: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32, eps: aw.f32, *, rms: bool = False):
    # one workgroup of ROW_BLOCK threads per row; stats[2 r] = mean (0 for RMSNorm), stats[2 r + 1] = rstd
    r = aw.workgroup_id(0)
    t = aw.local_id(0)
    base = r * cols
    nf = aw.f32(cols)
    mean = 0.0
    if not rms:
        s = 0.0
        for j in range(t, cols, ROW_BLOCK):
            s = s + x[base + j]
        mean = _tree(s, "sum", ROW_BLOCK) / nf
    q = 0.0
    for j in range(t, cols, ROW_BLOCK):
        d = x[base + j] - mean
        q = aw.fma(d, d, q)
    rstd = 1.0 / aw.sqrt(_tree(q, "sum", ROW_BLOCK) / nf + eps)
    for j in range(t, cols, ROW_BLOCK):
        if rms:
            y[base + j] = (x[base + j] * rstd) * gamma[j]
        else:
            y[base + j] = aw.fma((x[base + j] - mean) * rstd, gamma[j], beta[j])
    if t == 0:
        stats[2 * r] = mean
        stats[2 * r + 1] = rstd


@aw.kernel
def layer_norm_backward_kernel(dy: aw.In[aw.f32], x: aw.In[aw.f32], gamma: aw.In[aw.f32], stats: aw.In[aw.f32],
                               dx: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32, *, rms: bool = False):
    # one workgroup of ROW_BLOCK threads per row
    r = aw.workgroup_id(0)
    t = aw.local_id(0)
    base = r * cols
    nf = aw.f32(cols)
    mean = stats[2 * r]
    rstd = stats[2 * r + 1]
    sa = 0.0
    sb = 0.0
    for j in range(t, cols, ROW_BLOCK):
        gh = dy[base + j] * gamma[j]
        sa = sa + gh
        sb = aw.fma(gh, (x[base + j] - mean) * rstd, sb)
    a = _tree(sa, "sum", ROW_BLOCK) / nf
    b = _tree(sb, "sum", ROW_BLOCK) / nf
    for j in range(t, cols, ROW_BLOCK):
        gh = dy[base + j] * gamma[j]
        xh = (x[base + j] - mean) * rstd
        if rms:
            dx[base + j] = (gh - xh * b) * rstd
        else:
            dx[base + j] = ((gh - a) - xh * b) * rstd


@aw.kernel
def norm_param_partial_kernel(dy: aw.In[aw.f32], x: aw.In[aw.f32], stats: aw.In[aw.f32], part: aw.Out[aw.f32],
                              rows: aw.i32, cols: aw.i32):
    # thread (block b, column j): rows b*ROWS_PER_PART .. in order; part[(2 b) * cols + j] the
    # dgamma partial, part[(2 b + 1) * cols + j] the dbeta partial
    i = aw.global_id(0)
    nb = (rows + ROWS_PER_PART - 1) // ROWS_PER_PART
    if i < nb * cols:
        b = i // cols
        j = i - b * cols
        sg = 0.0
        sb = 0.0
        for r in range(b * ROWS_PER_PART, min(rows, (b + 1) * ROWS_PER_PART)):
            g = dy[r * cols + j]
            sg = aw.fma(g, (x[r * cols + j] - stats[2 * r]) * stats[2 * r + 1], sg)
            sb = sb + g
        part[2 * b * cols + j] = sg
        part[(2 * b + 1) * cols + j] = sb


@aw.kernel
def colsum_partial_kernel(x: aw.In[aw.f32], part: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    # thread (block b, column j): s = x[r, j] summed over the rows of block b in order, from +0
    i = aw.global_id(0)
    nb = (rows + ROWS_PER_PART - 1) // ROWS_PER_PART
    if i < nb * cols:
        b = i // cols
        j = i - b * cols
        s = 0.0
        for r in range(b * ROWS_PER_PART, min(rows, (b + 1) * ROWS_PER_PART)):
            s = s + x[r * cols + j]
        part[i] = s


@aw.kernel
def colsum_finish_kernel(part: aw.In[aw.f32], out: aw.Out[aw.f32], nb: aw.i32, cols: aw.i32):
    # out[j] = the block partials of column j added in block order, from +0
    j = aw.global_id(0)
    if j < cols:
        s = 0.0
        for b in range(nb):
            s = s + part[b * cols + j]
        out[j] = s


@aw.kernel
def embedding_kernel(table: aw.In[aw.f32], idx: aw.In[aw.i32], out: aw.Out[aw.f32], n: aw.i32, vocab: aw.i32,
                     dim: aw.i32):
    i = aw.global_id(0)
    if i < n * dim:
        t = i // dim
        d = i - t * dim
        v = idx[t]
        if v >= 0 and v < vocab:
            out[i] = table[v * dim + d]
        else:
            out[i] = aw.bitcast(aw.u32(QNAN_BITS), aw.f32)


@aw.kernel
def embedding_backward_kernel(grad: aw.In[aw.f32], order: aw.In[aw.i32], start: aw.In[aw.i32],
                              dtable: aw.Out[aw.f32], vocab: aw.i32, dim: aw.i32):
    i = aw.global_id(0)
    if i < vocab * dim:
        v = i // dim
        d = i - v * dim
        acc = 0.0
        for p in range(start[v], start[v + 1]):
            acc = acc + grad[order[p] * dim + d]
        dtable[i] = acc


@aw.kernel
def xent_kernel(x: aw.In[aw.f32], labels: aw.In[aw.i32], loss: aw.Out[aw.f32], lse: aw.Out[aw.f32],
                rows: aw.i32, cols: aw.i32):
    # one workgroup of ROW_BLOCK threads per row
    r = aw.workgroup_id(0)
    t = aw.local_id(0)
    base = r * cols
    mx = aw.bitcast(aw.u32(NEG_INF_BITS), aw.f32)
    for j in range(t, cols, ROW_BLOCK):
        mx = max(mx, x[base + j])
    mx = _tree(mx, "max", ROW_BLOCK)
    s = 0.0
    for j in range(t, cols, ROW_BLOCK):
        s = s + aw.exp(x[base + j] - mx)
    ls = mx + aw.log(_tree(s, "sum", ROW_BLOCK))
    if t == 0:
        lab = labels[r]
        val = aw.bitcast(aw.u32(QNAN_BITS), aw.f32)
        if lab >= 0 and lab < cols:
            val = ls - x[base + lab]
        loss[r] = val
        lse[r] = ls


@aw.kernel
def mean_kernel(v: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    if aw.global_id(0) == 0:
        s = 0.0
        for i in aw.range(n, unroll=4):
            s = s + v[i]
        out[0] = s / aw.f32(n)


@aw.kernel
def xent_backward_kernel(grad: aw.In[aw.f32], x: aw.In[aw.f32], labels: aw.In[aw.i32], lse: aw.In[aw.f32],
                         dx: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    i = aw.global_id(0)
    if i < rows * cols:
        r = i // cols
        j = i - r * cols
        p = aw.exp(x[i] - lse[r])
        lab = labels[r]
        if lab == j:
            p = p - 1.0
        if lab < 0 or lab >= cols:
            p = aw.bitcast(aw.u32(QNAN_BITS), aw.f32)
        dx[i] = p * (grad[0] / aw.f32(rows))


@aw.kernel
def rotary_kernel(x: aw.In[aw.f32], cos: aw.In[aw.f32], sin: aw.In[aw.f32], y: aw.Out[aw.f32], pairs: aw.i32,
                  t: aw.i32, half: aw.i32, *, inverse: bool = False):
    # x, y (rows, 2 half) with rows = B H T (row r at position r mod t); cos, sin (t, half)
    i = aw.global_id(0)
    if i < pairs:
        r = i // half
        j = i - r * half
        p = r - (r // t) * t
        c = cos[p * half + j]
        s = sin[p * half + j]
        if inverse:
            s = -s
        lo = r * (2 * half) + j
        x1 = x[lo]
        x2 = x[lo + half]
        y[lo] = x1 * c - x2 * s
        y[lo + half] = x2 * c + x1 * s


@aw.kernel
def swiglu_kernel(a: aw.In[aw.f32], b: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = a[i]
        sg = 1.0 / (1.0 + aw.exp(-v))
        y[i] = (v * sg) * b[i]


@aw.kernel
def swiglu_backward_kernel(g: aw.In[aw.f32], a: aw.In[aw.f32], b: aw.In[aw.f32], da: aw.Out[aw.f32],
                           db: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = a[i]
        gi = g[i]
        sg = 1.0 / (1.0 + aw.exp(-v))
        db[i] = gi * (v * sg)
        da[i] = (gi * b[i]) * (sg * (1.0 + v * (1.0 - sg)))


@aw.func
def _adamw_at(i, p, g, m, v, lr, b1, omb1, b2, omb2, c1, c2, eps, lrwd):
    gi = g[i]
    mi = b1 * m[i] + omb1 * gi
    vi = b2 * v[i] + (omb2 * gi) * gi
    m[i] = mi
    v[i] = vi
    pi = p[i]
    pi = pi - lrwd * pi
    p[i] = pi - lr * ((mi / c1) / (aw.sqrt(vi / c2) + eps))


@aw.kernel
def adamw_kernel(p: aw.Buffer[aw.f32], g: aw.In[aw.f32], m: aw.Buffer[aw.f32], v: aw.Buffer[aw.f32],
                 lr: aw.f32, b1: aw.f32, omb1: aw.f32, b2: aw.f32, omb2: aw.f32, c1: aw.f32, c2: aw.f32,
                 eps: aw.f32, lrwd: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        _adamw_at(i, p, g, m, v, lr, b1, omb1, b2, omb2, c1, c2, eps, lrwd)


@aw.kernel
def adamw_hyper_kernel(p: aw.Buffer[aw.f32], g: aw.In[aw.f32], m: aw.Buffer[aw.f32], v: aw.Buffer[aw.f32],
                       hyper: aw.In[aw.f32], b1: aw.f32, omb1: aw.f32, b2: aw.f32, omb2: aw.f32, eps: aw.f32,
                       n: aw.i32, *, decay: bool = True):
    # adamw_kernel with the step's scalars read from device memory: hyper = (lr, c1, c2, lr wd), so
    # that a captured CUDA graph replays with the values written there before each replay
    i = aw.global_id(0)
    if i < n:
        lrwd = 0.0
        if decay:
            lrwd = hyper[3]
        _adamw_at(i, p, g, m, v, hyper[0], b1, omb1, b2, omb2, hyper[1], hyper[2], eps, lrwd)


@aw.kernel
def sumsq_partial_kernel(g: aw.In[aw.f32], partial: aw.Out[aw.f32], n: aw.i32):
    c = aw.global_id(0)
    if c * CHUNK < n:
        s = 0.0
        end = min(n, (c + 1) * CHUNK)
        for i in range(c * CHUNK, end):
            s = aw.fma(g[i], g[i], s)
        partial[c] = s


@aw.kernel
def norm_finish_kernel(partial: aw.In[aw.f32], out: aw.Out[aw.f32], chunks: aw.i32, max_norm: aw.f32):
    # out[0] = the global norm, out[1] = the clip scale
    if aw.global_id(0) == 0:
        s = 0.0
        for c in range(chunks):
            s = s + partial[c]
        nrm = aw.sqrt(s)
        sc = aw.f32(1.0)
        if nrm > max_norm:
            sc = max_norm / (nrm + 1e-6)
        out[0] = nrm
        out[1] = sc


@aw.kernel
def scale_kernel(x: aw.In[aw.f32], s: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * s[1]
