"""WAVE kernels for training a small network: matmul (with transposed operands and a bias
epilogue), column sums, ReLU and its gradient, softmax cross-entropy and its gradient, SGD.

Every kernel gives each thread one output element and computes it with a plain sequential
loop, so the arithmetic order is fixed and independent of the wave width W and of the
target (no wave operations, no atomics, no workgroup trees):

* ``mm``: ``acc = +0.0; acc = fma(A'[i, k], B'[k, j], acc)`` for k = 0, 1, ... in order,
  then ``acc + bias[j]`` when the bias epilogue is on (A' = A or Aᵀ, B' = B or Bᵀ);
* ``sum_dim0``: ``s = +0.0; s = s + x[i, j]`` for i = 0, 1, ... in order;
* ``relu``: ``x if x > 0 else +0.0``; ``relu_backward``: ``g if y > 0 else +0.0``;
* ``ce_rows``: per row, ``m = max_j x`` (left to right, minimumNumber/maximumNumber rules),
  ``s = sum_j exp(x_j - m)`` (left to right, precise stdlib exp, <= 2 ulp),
  ``loss = (m + log(s)) - x[label]`` (precise stdlib log); a label outside [0, C) gives NaN;
* ``mean``: ``s = sum_i v[i]`` in order from +0.0, then ``s / n``;
* ``ce_backward``: ``(exp(x_j - m) / s - [j == label]) * (grad / B)``, the row terms as in
  ``ce_rows``;
* ``sgd``: ``p = p - lr * g`` (a multiply, then a subtract: WAVE never contracts).

Each op is an IEEE-754 f32 operation rounded to nearest even, so any conformant target gives
the same bits (docs/spec.md, deterministic class).
"""

from __future__ import annotations

import anywave as aw

#: threads per workgroup of every kernel here (a multiple of every W in {8, 16, 32, 64})
BLOCK = 64
#: loop unrolling of the sequential k loops (fewer loop-control instructions; same order)
UNROLL = 4
NEG_INF_BITS = 0xFF800000
QNAN_BITS = 0x7FC00000


@aw.kernel
def mm(a: aw.In[aw.f32], b: aw.In[aw.f32], bias: aw.In[aw.f32], c: aw.Out[aw.f32],
       m: aw.i32, n: aw.i32, k: aw.i32, *, trans_a: bool = False, trans_b: bool = False,
       use_bias: bool = False):
    # C (m, n) = op(A) @ op(B) [+ bias]: A is (m, k), or (k, m) when trans_a; B is (k, n), or (n, k)
    i = aw.global_id(0)
    if i < m * n:
        row = i // n
        col = i - row * n
        # element indices of A'[row, 0] and B'[0, col] and their steps along k
        ia = row
        sa = m
        if not trans_a:
            ia = row * k
            sa = 1
        ib = col * k
        sb = 1
        if not trans_b:
            ib = col
            sb = n
        acc = 0.0
        for _ in aw.range(0, k, 1, unroll=UNROLL):
            acc = aw.fma(a[ia], b[ib], acc)
            ia += sa
            ib += sb
        if use_bias:
            acc = acc + bias[col]
        c[i] = acc


@aw.kernel
def sum_dim0(x: aw.In[aw.f32], out: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    j = aw.global_id(0)
    if j < cols:
        s = 0.0
        for r in aw.range(rows, unroll=UNROLL):
            s = s + x[r * cols + j]
        out[j] = s


@aw.kernel
def relu(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        y[i] = v if v > 0.0 else 0.0


@aw.kernel
def relu_backward(g: aw.In[aw.f32], y: aw.In[aw.f32], dx: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        dx[i] = g[i] if y[i] > 0.0 else 0.0


@aw.func
def _row_max_sum(x, base, cols):
    # max (left to right), then sum of exp(x - max) (left to right)
    mx = aw.bitcast(aw.u32(NEG_INF_BITS), aw.f32)
    for j in aw.range(cols, unroll=2):
        mx = max(mx, x[base + j])
    s = 0.0
    for j in aw.range(cols, unroll=2):
        s = s + aw.exp(x[base + j] - mx)
    return mx, s


@aw.kernel
def ce_rows(x: aw.In[aw.f32], labels: aw.In[aw.i32], out: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    r = aw.global_id(0)
    if r < rows:
        base = r * cols
        mx, s = _row_max_sum(x, base, cols)
        lab = labels[r]
        loss = aw.bitcast(aw.u32(QNAN_BITS), aw.f32)
        if lab >= 0 and lab < cols:
            loss = (mx + aw.log(s)) - x[base + lab]
        out[r] = loss


@aw.kernel
def mean(v: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    if aw.global_id(0) == 0:
        s = 0.0
        for i in aw.range(n, unroll=UNROLL):
            s = s + v[i]
        out[0] = s / aw.f32(n)


@aw.kernel
def ce_backward(grad: aw.In[aw.f32], x: aw.In[aw.f32], labels: aw.In[aw.i32], dx: aw.Out[aw.f32],
                rows: aw.i32, cols: aw.i32):
    i = aw.global_id(0)
    if i < rows * cols:
        r = i // cols
        j = i - r * cols
        base = r * cols
        mx, s = _row_max_sum(x, base, cols)
        p = aw.exp(x[base + j] - mx) / s
        lab = labels[r]
        if lab == j:
            p = p - 1.0
        if lab < 0 or lab >= cols:
            p = aw.bitcast(aw.u32(QNAN_BITS), aw.f32)
        dx[i] = p * (grad[0] / aw.f32(rows))


@aw.kernel
def sgd(p: aw.Buffer[aw.f32], g: aw.In[aw.f32], lr: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        p[i] = p[i] - lr * g[i]
