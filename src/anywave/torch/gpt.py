"""The ops of a GPT's training step as PyTorch operators (``torch.ops.anywave.gpt_*``), built with
``torch.library.custom_op`` from the kernels of :mod:`anywave.kernels.gpt_ops` (their fixed
arithmetic order is stated there), each with a fake (meta) implementation and, where
differentiable, ``register_autograd`` formulas that are themselves WAVE ops.
``import anywave.torch.ops`` (or this module) registers them.

==============================================================  ============================================
op                                                              meaning (float32 tensors)
==============================================================  ============================================
``gpt_linear(x, weight, bias, gelu, mode) -> (y, pre)``         ``y = act(x @ weight.T + bias)``; ``pre``
                                                                the pre-activation (shape (0,) w/o GELU)
``gpt_linear_backward(g, x, weight, pre, bias?, gelu, mode)``   ``(dx, dweight, dbias)``
``gpt_norm(x, gamma, beta, eps, rms) -> (y, stats)``            LayerNorm (RMSNorm: ``rms``) over the last dim
``gpt_norm_backward(g, x, gamma, stats, rms)``                  ``(dx, dgamma, dbeta)``
``gpt_rotary(x, offset, base, inverse) -> y``                  rotary embedding of (B, H, T, D), "rotate half"
``gpt_swiglu(a, b) -> y``                                       ``silu(a) * b`` elementwise
``gpt_swiglu_backward(g, a, b) -> (da, db)``                    its gradients
``gpt_embedding(table, idx) -> out``                            ``table[idx]`` (rows)
``gpt_embedding_backward(g, idx, vocab) -> dtable``             per-row gather in token order
``gpt_xent(logits, labels) -> (loss, lse)``                     mean softmax cross-entropy, per-row LSE
``gpt_xent_backward(g, logits, labels, lse) -> dlogits``        ``(softmax - onehot) * g / rows``
``gpt_adamw_(p, g, m, v, lr, b1, b2, eps, wd, step)``           AdamW in place on ``p``, ``m``, ``v``
``gpt_adamw_hyper_(p, g, m, v, hyper, b1, b2, eps, decay)``     the same, the step's scalars in a tensor
``gpt_grad_norm(flat, max_norm) -> (norm, scale)``              global norm, clip scale (shape (2,))
``gpt_scale(x, s) -> x * s[1]``                                  applies a clip scale
==============================================================  ============================================

Modes: ``"exact"`` (every target and W give the same bits; batch-invariant) and ``"fast"``, which
only changes :func:`gpt_linear` and its backward: on CUDA the products run on the fragment GEMM
(``torch.ops.anywave.gemm_mma``: bf16 operands rounded from the f32 tensors, f32 accumulation,
class ``bounded``, identical run to run; no split-K, so batch-invariant too). Elsewhere ``fast``
computes exactly.

CUDA tensors run on their device's ``cuda`` target (PyTorch's current stream), CPU tensors on the
CPU target of :func:`anywave.torch.ops.set_cpu_target` / :func:`anywave.torch.ops.cpu_target`.
Raises :class:`~anywave.torch.placement.OpDtypeError` (dtypes) and
:class:`~anywave.torch.placement.OpInputError` (shapes, devices, values).

Glue that is PyTorch's and not a WAVE kernel: reshapes and copies, the bf16 rounding of the fast
mode's operands, the integer stable sort that orders the tokens of the embedding backward, and
autograd's own accumulation of a tensor's gradients (one IEEE f32 add per extra use: the same
bits on every device).
"""

from __future__ import annotations

import math
import numbers
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from anywave.kernels import gpt_ops as G
from anywave.torch import placement as P
from anywave.torch.custom_ops import _cpu_choice

__all__ = ["MODES", "ROPE_BASE", "adamw_", "adamw_hyper", "clip_grad_norm_",
           "cross_entropy", "embedding", "linear", "norm",
           "rotary", "rotary_tables", "swiglu"]

MODES = ("exact", "fast")


# ----------------------------------------------------------------------------- launching

def _where(dev: torch.device) -> tuple[str, int | None]:
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"cuda:{index}", None
    return _cpu_choice(None, None)


def _run(kfn: Any, threads: int, dev: torch.device, *args: Any, **consts: Any) -> None:
    """One thread per work item, workgroups of :data:`~anywave.kernels.gpt_ops.BLOCK`."""
    if threads <= 0:
        return
    target, w = _where(dev)
    kfn(*args, grid=-(-threads // G.BLOCK), workgroup=G.BLOCK, target=target, wave_width=w, **consts)


def _run_rows(kfn: Any, rows: int, dev: torch.device, *args: Any, **consts: Any) -> None:
    """One workgroup of :data:`~anywave.kernels.gpt_ops.ROW_BLOCK` threads per row (the row kernels)."""
    if rows <= 0:
        return
    target, w = _where(dev)
    kfn(*args, grid=rows, workgroup=G.ROW_BLOCK, target=target, wave_width=w, **consts)


def _t(t: Any, op: str, name: str, ndim: int | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise P.OpDtypeError(f"anywave.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise P.OpDtypeError(f"anywave.{op}: {name} has dtype {t.dtype}; supported: {dtype}")
    if ndim is not None and t.dim() != ndim:
        raise P.OpInputError(f"anywave.{op}: {name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return t


def _idx(t: Any, op: str, name: str) -> None:
    if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int32, torch.int64):
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise P.OpDtypeError(f"anywave.{op}: {name} has dtype {got}; supported: torch.int32, torch.int64")
    if t.dim() != 1:
        raise P.OpInputError(f"anywave.{op}: {name} must be 1-D, got shape {tuple(t.shape)}")


def _mode(mode: str, op: str) -> None:
    if mode not in MODES:
        raise P.OpInputError(f"anywave.{op}: mode {mode!r} is not one of {MODES}")


def _d(t: torch.Tensor) -> torch.Tensor:
    return P._dense(t)


def _real(t: torch.Tensor) -> bool:
    return t.device.type != "meta" and not isinstance(t, torch._subclasses.FakeTensor)


def _fast(dev: torch.device, mode: str) -> bool:
    return mode == "fast" and dev.type == "cuda"


# ----------------------------------------------------------------------------- linear

def _check_linear(x, weight, bias, op="gpt_linear"):
    _t(x, op, "x", 2), _t(weight, op, "weight", 2)
    if x.shape[1] != weight.shape[1]:
        raise P.OpInputError(f"anywave.{op}: x {tuple(x.shape)} and weight {tuple(weight.shape)} must agree in "
                             "the input features (x (M, K), weight (N, K))")
    if bias is not None:
        _t(bias, op, "bias", 1)
        if bias.shape[0] != weight.shape[0]:
            raise P.OpInputError(f"anywave.{op}: bias has shape {tuple(bias.shape)}, expected ({weight.shape[0]},)")
        P._same_device(op, x=x, weight=weight, bias=bias)
    else:
        P._same_device(op, x=x, weight=weight)
    if max(x.numel(), weight.numel(), x.shape[0] * weight.shape[0]) >= 2**31:
        raise P.OpInputError(f"anywave.{op}: tensors of 2^31 or more elements are not supported (32-bit indices)")


def _colsum_finish(part: torch.Tensor, nb: int, cols: int) -> torch.Tensor:
    out = part.new_empty((cols,))
    _run(G.colsum_finish_kernel, cols, part.device, part, out, nb, cols)
    return out


def _colsum(x: torch.Tensor) -> torch.Tensor:
    """Column sums of float32 (rows, cols): blocks of ROWS_PER_PART rows in order, then the blocks."""
    rows, cols = x.shape
    nb = max(1, -(-rows // G.ROWS_PER_PART))
    part = x.new_zeros((nb, cols))
    _run(G.colsum_partial_kernel, nb * cols, x.device, x, part, rows, cols)
    return _colsum_finish(part, nb, cols)


#: bf16 (transposed) copies of weights by (id, layout): (the weight, its version, the copy); the
#: entry holds the weight, so its id cannot be reused while the entry lives, and an in-place update
#: (an optimizer step) bumps the version and makes the copy stale
_BF16: dict[tuple[int, bool], tuple[torch.Tensor, int, torch.Tensor]] = {}


def _bf16_weight(w: torch.Tensor, transpose: bool) -> torch.Tensor:
    key = (id(w), transpose)
    hit = _BF16.get(key)
    if hit is not None and hit[0] is w and hit[1] == w._version:
        return hit[2]
    c = (w.t() if transpose else w).to(torch.bfloat16).contiguous()
    if len(_BF16) >= 512:
        _BF16.clear()
    _BF16[key] = (w, w._version, c)
    return c


def _mma(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False) -> torch.Tensor:
    """``a @ b (+ bias) (GELU)`` on the fragment GEMM, operands rounded to bf16, f32 result."""
    a = a if a.dtype == torch.bfloat16 else a.to(torch.bfloat16)
    b = b if b.dtype == torch.bfloat16 else b.to(torch.bfloat16)
    return torch.ops.anywave.gemm_mma(a.contiguous(), b.contiguous(), bias, gelu)


def _gelu(pre: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(pre)
    _run(G.gelu_kernel, pre.numel(), pre.device, pre, y, pre.numel())
    return y


@torch.library.custom_op("anywave::gpt_linear", mutates_args=())
def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False,
            mode: str = "exact") -> tuple[torch.Tensor, torch.Tensor]:
    _check_linear(x, weight, bias)
    _mode(mode, "gpt_linear")
    m, k = x.shape
    n = weight.shape[0]
    if _fast(x.device, mode):
        pre = _mma(x, _bf16_weight(weight, True), bias.contiguous() if bias is not None else None)
        if gelu:
            return _gelu(pre), pre
        return pre, x.new_empty((0,))
    x, weight = _d(x), _d(weight)
    y = x.new_empty((m, n))
    pre = x.new_empty((m, n) if gelu else (0,))
    b = _d(bias) if bias is not None else weight
    # without GELU the kernel writes no pre-activation: a 16-byte stand-in buffer
    _run(G.linear_kernel, m * n, x.device, x, weight, b, y, pre if gelu else x.new_empty((4,)), m, n, k,
         use_bias=bias is not None, gelu=bool(gelu))
    return y, pre


@_linear.register_fake
def _(x, weight, bias=None, gelu=False, mode="exact"):
    _check_linear(x, weight, bias)
    _mode(mode, "gpt_linear")
    return x.new_empty((x.shape[0], weight.shape[0])), x.new_empty((x.shape[0], weight.shape[0]) if gelu else (0,))


@torch.library.custom_op("anywave::gpt_linear_backward", mutates_args=())
def _linear_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, pre: torch.Tensor,
                     has_bias: bool, gelu: bool, mode: str = "exact"
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_linear(x, weight, None, "gpt_linear_backward")
    _t(grad, "gpt_linear_backward", "grad", 2)
    m, k = x.shape
    n = weight.shape[0]
    if tuple(grad.shape) != (m, n):
        raise P.OpInputError(f"anywave.gpt_linear_backward: grad has shape {tuple(grad.shape)}, expected ({m}, {n})")
    grad = _d(grad)
    if gelu:
        pre = _d(pre)
        g = torch.empty_like(grad)
        _run(G.gelu_backward_kernel, m * n, grad.device, grad, pre, g, m * n)
    else:
        g = grad
    from anywave.torch import kernels as K

    db = _colsum(g) if has_bias else grad.new_zeros((0,))
    if _fast(x.device, mode):
        return _mma(g, _bf16_weight(weight, False)), _mma(g.t(), x), db
    x, weight = _d(x), _d(weight)
    dx = x.new_empty((m, k))
    dw = x.new_empty((n, k))
    dummy = db if has_bias else g
    # dX (M, K) = G (M, N) @ W (N, K); dW (N, K) = Gᵀ (N, M) @ X (M, K): fma chains over N and M in order
    _run(K.mm, m * k, x.device, g, weight, dummy, dx, m, k, n, trans_a=False, trans_b=False, use_bias=False)
    _run(K.mm, n * k, x.device, g, x, dummy, dw, n, k, m, trans_a=True, trans_b=False, use_bias=False)
    return dx, dw, db


@_linear_backward.register_fake
def _(grad, x, weight, pre, has_bias, gelu, mode="exact"):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), x.new_empty((weight.shape[0],) if has_bias else (0,))


def _linear_setup(ctx, inputs, output):
    x, weight, bias, gelu, mode = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.has_bias, ctx.gelu, ctx.mode = bias is not None, gelu, mode


def _linear_grad(ctx, gy, gpre):
    x, weight, pre = ctx.saved_tensors
    if gy is None:
        gy = x.new_zeros((x.shape[0], weight.shape[0]))
    dx, dw, db = torch.ops.anywave.gpt_linear_backward(gy.contiguous(), x, weight, pre, ctx.has_bias, ctx.gelu,
                                                       ctx.mode)
    return dx, dw, (db if ctx.has_bias else None), None, None


_linear.register_autograd(_linear_grad, setup_context=_linear_setup)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False,
           mode: str = "exact") -> torch.Tensor:
    """``act(x @ weight.T + bias)`` (``nn.Linear``'s layout), differentiable.

    Args:
        x: float32 (..., K); weight: float32 (N, K); bias: float32 (N,) or None.
        gelu: apply the tanh-form GELU epilogue (:func:`anywave.kernels.elementwise.gelu_tanh`).
        mode: ``"exact"`` (fma chain over k in order from +0, then ``+ bias``: the same bits on every
            target) or ``"fast"`` (CUDA: bf16 fragment GEMM, f32 accumulation, class ``bounded``).

    Returns:
        float32 (..., N). Gradients: ``dX = G·W``, ``dW = Gᵀ·X`` (fma chains over N and M in order),
        ``db`` the column sums of G (blocks of ROWS_PER_PART rows in order, then the blocks; G through
        the GELU derivative first).

    Raises:
        OpDtypeError: a dtype other than float32. OpInputError: shapes, devices, mode.
    """
    lead = x.shape[:-1]
    y, _ = torch.ops.anywave.gpt_linear(x.reshape(-1, x.shape[-1]), weight, bias, gelu, mode)
    return y.reshape(*lead, weight.shape[0])


# ----------------------------------------------------------------------------- LayerNorm / RMSNorm

def _check_norm(x, gamma, beta, op="gpt_norm"):
    _t(x, op, "x", 2), _t(gamma, op, "gamma", 1), _t(beta, op, "beta", 1)
    c = x.shape[1]
    if c == 0 or tuple(gamma.shape) != (c,) or tuple(beta.shape) != (c,):
        raise P.OpInputError(f"anywave.{op}: x (rows, C) with C >= 1 and gamma, beta (C,) expected; got x "
                             f"{tuple(x.shape)}, gamma {tuple(gamma.shape)}, beta {tuple(beta.shape)}")
    P._same_device(op, x=x, gamma=gamma, beta=beta)


@torch.library.custom_op("anywave::gpt_norm", mutates_args=())
def _norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5,
          rms: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    _check_norm(x, gamma, beta)
    if not (math.isfinite(eps) and eps >= 0):
        raise P.OpInputError(f"anywave.gpt_norm: eps must be finite and >= 0, got {eps!r}")
    x, gamma, beta = _d(x), _d(gamma), _d(beta)
    rows, cols = x.shape
    y = torch.empty_like(x)
    stats = x.new_empty((rows, 2))
    _run_rows(G.layer_norm_kernel, rows, x.device, x, gamma, beta, y, stats, rows, cols, float(eps), rms=bool(rms))
    return y, stats


@_norm.register_fake
def _(x, gamma, beta, eps=1e-5, rms=False):
    _check_norm(x, gamma, beta)
    return x.new_empty(x.shape), x.new_empty((x.shape[0], 2))


@torch.library.custom_op("anywave::gpt_norm_backward", mutates_args=())
def _norm_backward(grad: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor, stats: torch.Tensor,
                   rms: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_norm(x, gamma, gamma, "gpt_norm_backward")
    _t(grad, "gpt_norm_backward", "grad", 2), _t(stats, "gpt_norm_backward", "stats", 2)
    if grad.shape != x.shape or tuple(stats.shape) != (x.shape[0], 2):
        raise P.OpInputError(f"anywave.gpt_norm_backward: grad {tuple(grad.shape)} must be x's shape "
                             f"{tuple(x.shape)} and stats {tuple(stats.shape)} ({x.shape[0]}, 2)")
    grad, x, gamma, stats = _d(grad), _d(x), _d(gamma), _d(stats)
    rows, cols = x.shape
    dx = torch.empty_like(x)
    _run_rows(G.layer_norm_backward_kernel, rows, x.device, grad, x, gamma, stats, dx, rows, cols, rms=bool(rms))
    nb = max(1, -(-rows // G.ROWS_PER_PART))
    part = x.new_zeros((2 * nb, cols))
    _run(G.norm_param_partial_kernel, nb * cols, x.device, grad, x, stats, part, rows, cols)
    both = _colsum_finish(part.view(nb, 2 * cols), nb, 2 * cols)
    return dx, both[:cols].clone(), both[cols:].clone()


@_norm_backward.register_fake
def _(grad, x, gamma, stats, rms=False):
    return x.new_empty(x.shape), gamma.new_empty(gamma.shape), gamma.new_empty(gamma.shape)


def _norm_setup(ctx, inputs, output):
    x, gamma, _beta, _eps, rms = inputs
    ctx.save_for_backward(x, gamma, output[1])
    ctx.rms = rms


def _norm_grad(ctx, gy, gstats):
    x, gamma, stats = ctx.saved_tensors
    if gy is None:
        gy = torch.zeros_like(x)
    dx, dg, db = torch.ops.anywave.gpt_norm_backward(gy.contiguous(), x, gamma, stats, ctx.rms)
    return dx, dg, (None if ctx.rms else db), None, None


_norm.register_autograd(_norm_grad, setup_context=_norm_setup)


def norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor | None = None, eps: float = 1e-5,
         rms: bool = False) -> torch.Tensor:
    """LayerNorm (``rms=False``, Ba et al. 2016) or RMSNorm (``rms=True``, Zhang & Sennrich 2019)
    over the last dim of float32 ``x`` (..., C) with float32 ``gamma`` (and ``beta``, LayerNorm) (C,);
    one workgroup per row, the order of :mod:`anywave.kernels.gpt_ops`. Differentiable (``dx``,
    ``dgamma``, ``dbeta``: column sums in blocks of rows, as :mod:`anywave.kernels.gpt_ops` states).
    Raises OpDtypeError / OpInputError."""
    lead = x.shape
    b = gamma if beta is None else beta
    y, _ = torch.ops.anywave.gpt_norm(x.reshape(-1, x.shape[-1]), gamma, b, eps, rms)
    return y.reshape(lead)


# ----------------------------------------------------------------------------- rotary embedding

#: the rotary base of RoFormer (Su et al. 2021, eq. 15: theta_i = 10000^(-2i/D))
ROPE_BASE = 10000.0


def rotary_tables(positions: int, dim: int, base: float = ROPE_BASE, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(cos, sin)`` tables of shape (positions, dim // 2) for the positions
    ``offset .. offset + positions - 1``: ``angle[p, i] = p * base^(-2i / dim)`` (RoFormer,
    Su et al. 2021, eq. 15), computed by NumPy on the host in float64 (``np.power``, the product,
    ``np.cos``/``np.sin``) and rounded once to float32. Every target reads these same bits (the
    kernel never evaluates a trigonometric function), so the rotation is the same on all of them.
    Float64 first rather than NumPy's float32 ``cos``/``sin``, whose SIMD paths may differ with the
    CPU's instruction set. Raises ValueError for an odd or non-positive ``dim``, a negative
    ``positions``/``offset`` or a base that is not finite and > 1."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2 or dim % 2:
        raise ValueError(f"rotary_tables: dim must be an even int >= 2, got {dim!r}")
    if positions < 0 or offset < 0:
        raise ValueError(f"rotary_tables: positions and offset must be >= 0, got {positions}, {offset}")
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"rotary_tables: base must be finite and > 1, got {base!r}")
    inv = np.power(np.float64(base), -np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(offset, offset + positions, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


#: device tables by (device, dim, base): (cos, sin) float32 (n, dim // 2) for positions 0 .. n-1,
#: grown to the next power of two when a longer range is asked for (rows are positions, so a
#: slice of a longer table has the same bits as a shorter table)
_ROPE: dict[tuple[str, int, float], tuple[torch.Tensor, torch.Tensor]] = {}


def _rope_tables(dev: torch.device, dim: int, base: float, offset: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (str(dev), dim, float(base))
    hit = _ROPE.get(key)
    need = offset + t
    if hit is None or hit[0].shape[0] < need:
        n = max(64, 1 << (need - 1).bit_length())
        c, s = rotary_tables(n, dim, base)
        hit = (torch.from_numpy(c).to(dev), torch.from_numpy(s).to(dev))
        _ROPE[key] = hit
    return hit[0][offset:offset + t].contiguous(), hit[1][offset:offset + t].contiguous()


def _check_rotary(x, offset, base, op="gpt_rotary"):
    _t(x, op, "x", 4)
    d = x.shape[3]
    if d < 2 or d % 2:
        raise P.OpInputError(f"anywave.{op}: x must be (B, H, T, D) with D even and >= 2, got shape "
                             f"{tuple(x.shape)}")
    if offset < 0:
        raise P.OpInputError(f"anywave.{op}: offset must be >= 0 (the position of x's first row), got {offset}")
    if not (math.isfinite(base) and base > 1):
        raise P.OpInputError(f"anywave.{op}: base must be finite and > 1, got {base!r}")
    if x.numel() >= 2**31:
        raise P.OpInputError(f"anywave.{op}: tensors of 2^31 or more elements are not supported (32-bit indices)")


@torch.library.custom_op("anywave::gpt_rotary", mutates_args=())
def _rotary(x: torch.Tensor, offset: int = 0, base: float = ROPE_BASE, inverse: bool = False) -> torch.Tensor:
    _check_rotary(x, offset, base)
    b, h, t, d = x.shape
    x = _d(x)
    y = torch.empty_like(x)
    if not x.numel():
        return y
    cos, sin = _rope_tables(x.device, d, base, offset, t)
    half = d // 2
    _run(G.rotary_kernel, b * h * t * half, x.device, x, cos, sin, y, b * h * t * half, t, half,
         inverse=bool(inverse))
    return y


@_rotary.register_fake
def _(x, offset=0, base=ROPE_BASE, inverse=False):
    _check_rotary(x, offset, base)
    return x.new_empty(x.shape)


def _rotary_setup(ctx, inputs, output):
    _x, ctx.offset, ctx.base, ctx.inverse = inputs


def _rotary_grad(ctx, g):
    # the rotation is orthogonal: its transpose is the rotation by the negated angle
    return torch.ops.anywave.gpt_rotary(g.contiguous(), ctx.offset, ctx.base, not ctx.inverse), None, None, None


_rotary.register_autograd(_rotary_grad, setup_context=_rotary_setup)


def rotary(x: torch.Tensor, offset: int = 0, base: float = ROPE_BASE) -> torch.Tensor:
    """Rotary position embedding (RoPE; J. Su et al., "RoFormer", 2021) of queries or keys.

    Convention: GPT-NeoX / LLaMA "rotate half": element i of a head vector is paired with element
    ``i + D/2`` (not with ``i + 1``) and the pair at position ``p`` is rotated by the angle
    ``p * base^(-2i/D)``: ``y_i = x_i cos - x_{i+D/2} sin``, ``y_{i+D/2} = x_{i+D/2} cos + x_i sin``
    (per element two rounded products and a rounded add; the tables from :func:`rotary_tables`).

    Args:
        x: float32 (B, H, T, D), D even; row t of every (batch, head) is at position ``offset + t``.
        offset: the position of the first row (the cache length when decoding with a KV cache).
        base: the angle base (10000, RoFormer's).

    Returns:
        float32 (B, H, T, D). Differentiable: the gradient is the rotation of ``g`` by the
        negated angle (the same kernel, ``sin`` negated).

    Raises:
        OpDtypeError (a TypeError): not a float32 tensor. OpInputError (a ValueError): not 4-D, D
        odd, a negative offset, a bad base.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise P.OpDtypeError(f"anywave.gpt_rotary: offset must be an int, got {type(offset).__name__}")
    return torch.ops.anywave.gpt_rotary(x, offset, float(base), False)


# ----------------------------------------------------------------------------- SwiGLU

def _check_swiglu(a, b, op="gpt_swiglu"):
    _t(a, op, "a"), _t(b, op, "b")
    if a.shape != b.shape:
        raise P.OpInputError(f"anywave.{op}: a {tuple(a.shape)} and b {tuple(b.shape)} must have one shape")
    P._same_device(op, a=a, b=b)
    if a.numel() >= 2**31:
        raise P.OpInputError(f"anywave.{op}: tensors of 2^31 or more elements are not supported (32-bit indices)")


@torch.library.custom_op("anywave::gpt_swiglu", mutates_args=())
def _swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check_swiglu(a, b)
    a, b = _d(a), _d(b)
    y = torch.empty_like(a)
    _run(G.swiglu_kernel, a.numel(), a.device, a, b, y, a.numel())
    return y


@_swiglu.register_fake
def _(a, b):
    _check_swiglu(a, b)
    return a.new_empty(a.shape)


@torch.library.custom_op("anywave::gpt_swiglu_backward", mutates_args=())
def _swiglu_backward(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check_swiglu(a, b, "gpt_swiglu_backward")
    _t(grad, "gpt_swiglu_backward", "grad")
    if grad.shape != a.shape:
        raise P.OpInputError(f"anywave.gpt_swiglu_backward: grad {tuple(grad.shape)} must be a's shape "
                             f"{tuple(a.shape)}")
    P._same_device("gpt_swiglu_backward", grad=grad, a=a)
    grad, a, b = _d(grad), _d(a), _d(b)
    da, db = torch.empty_like(a), torch.empty_like(a)
    _run(G.swiglu_backward_kernel, a.numel(), a.device, grad, a, b, da, db, a.numel())
    return da, db


@_swiglu_backward.register_fake
def _(grad, a, b):
    return a.new_empty(a.shape), a.new_empty(a.shape)


def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _swiglu_grad(ctx, g):
    a, b = ctx.saved_tensors
    return torch.ops.anywave.gpt_swiglu_backward(g.contiguous(), a, b)


_swiglu.register_autograd(_swiglu_grad, setup_context=_swiglu_setup)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``silu(a) * b`` elementwise (the gate of SwiGLU, N. Shazeer, "GLU Variants Improve
    Transformer", 2020: ``FFN(x) = (silu(x W1) * (x W3)) W2``), float32 tensors of one shape;
    ``silu(a) = a * sigmoid(a)`` with ``sigmoid(a) = 1 / (1 + exp(-a))`` (the order of
    :mod:`anywave.kernels.gpt_ops`). Differentiable: ``db = g * silu(a)``,
    ``da = (g * b) * (sg * (1 + a * (1 - sg)))``. Raises OpDtypeError (a TypeError) for a dtype
    other than float32, OpInputError (a ValueError) for shapes that differ."""
    return torch.ops.anywave.gpt_swiglu(a, b)


# ----------------------------------------------------------------------------- embedding

def _check_emb(table, idx, op="gpt_embedding"):
    _t(table, op, "table", 2)
    _idx(idx, op, "idx")
    P._same_device(op, table=table, idx=idx)
    if max(table.numel(), idx.numel() * table.shape[1]) >= 2**31:
        raise P.OpInputError(f"anywave.{op}: tensors of 2^31 or more elements are not supported (32-bit indices)")


#: id(tensor) -> (weak reference, version, min, max) of index tensors already read: the
#: embedding's backward gets the tensor its forward checked, and reading the range of a CUDA
#: tensor waits for the device (at most 64 entries; a tensor changed in place has a new version)
_ID_RANGES: dict[int, tuple[Any, int, int, int]] = {}


def _check_values(idx: torch.Tensor, vocab: int, op: str) -> None:
    """Token ids in [0, vocab): read once per tensor version (one device round trip on CUDA).
    Not read while a CUDA graph is being captured (the ids of a replay are not known yet, and a
    read would end the capture): then an id outside the table gives a NaN row forward
    (``embedding_kernel``) and adds to no row backward (no segment holds it)."""
    if idx.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    if _real(idx) and idx.numel():
        hit = _ID_RANGES.get(id(idx))
        if hit is not None and hit[0]() is idx and hit[1] == idx._version:
            lo, hi = hit[2], hit[3]
        else:
            lo, hi = (int(v) for v in torch.stack(torch.aminmax(idx)).tolist())
            if len(_ID_RANGES) >= 64:
                _ID_RANGES.clear()
            try:
                _ID_RANGES[id(idx)] = (weakref.ref(idx), idx._version, lo, hi)
            except TypeError:  # no weak references to this tensor type: no cache
                pass
        if lo < 0 or hi >= vocab:
            raise P.OpInputError(f"anywave.{op}: token ids must be in [0, {vocab}), got values in [{lo}, {hi}]")


@torch.library.custom_op("anywave::gpt_embedding", mutates_args=())
def _embedding(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    _check_emb(table, idx)
    vocab, dim = table.shape
    _check_values(idx, vocab, "gpt_embedding")
    table = _d(table)
    ii = _d(idx.to(torch.int32))
    out = table.new_empty((idx.shape[0], dim))
    _run(G.embedding_kernel, idx.shape[0] * dim, table.device, table, ii, out, idx.shape[0], vocab, dim)
    return out


@_embedding.register_fake
def _(table, idx):
    _check_emb(table, idx)
    return table.new_empty((idx.shape[0], table.shape[1]))


@torch.library.custom_op("anywave::gpt_embedding_backward", mutates_args=())
def _embedding_backward(grad: torch.Tensor, idx: torch.Tensor, vocab: int) -> torch.Tensor:
    _t(grad, "gpt_embedding_backward", "grad", 2)
    _idx(idx, "gpt_embedding_backward", "idx")
    if grad.shape[0] != idx.shape[0] or vocab < 1:
        raise P.OpInputError(f"anywave.gpt_embedding_backward: grad {tuple(grad.shape)} needs one row per token "
                             f"of idx {tuple(idx.shape)}, vocab >= 1 (got {vocab})")
    P._same_device("gpt_embedding_backward", grad=grad, idx=idx)
    _check_values(idx, vocab, "gpt_embedding_backward")
    dim = grad.shape[1]
    ii = idx.to(torch.int64)
    # the tokens of each row v in increasing position: a stable sort (integers only) and the
    # segment starts; the kernel sums each segment in that order
    srt, order = torch.sort(ii, stable=True)
    order = _d(order.to(torch.int32))
    # start[v] = the number of tokens below v (bincount would wait for the device to size its output)
    start = _d(torch.searchsorted(srt, torch.arange(vocab + 1, device=grad.device, dtype=torch.int64))
               .to(torch.int32))
    out = grad.new_empty((vocab, dim))
    _run(G.embedding_backward_kernel, vocab * dim, grad.device, _d(grad), order, start, out, vocab, dim)
    return out


@_embedding_backward.register_fake
def _(grad, idx, vocab):
    return grad.new_empty((vocab, grad.shape[1]))


def _emb_setup(ctx, inputs, output):
    table, idx = inputs
    ctx.save_for_backward(idx)
    ctx.vocab = table.shape[0]


def _emb_grad(ctx, g):
    (idx,) = ctx.saved_tensors
    return torch.ops.anywave.gpt_embedding_backward(g.contiguous(), idx, ctx.vocab), None


_embedding.register_autograd(_emb_grad, setup_context=_emb_setup)


def embedding(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows of float32 ``table`` (V, D) at int32/int64 ``idx`` (any shape) → (*idx.shape, D).
    Differentiable: ``dtable[v]`` is the sum of the gradient rows of the tokens equal to v in
    increasing token order (no atomics). Raises OpInputError for an id outside [0, V)."""
    out = torch.ops.anywave.gpt_embedding(table, idx.reshape(-1))
    return out.reshape(*idx.shape, table.shape[1])


# ----------------------------------------------------------------------------- cross-entropy

def _check_xent(logits, labels, op="gpt_xent"):
    _t(logits, op, "logits", 2)
    _idx(labels, op, "labels")
    if logits.shape[0] == 0 or logits.shape[1] == 0 or labels.shape[0] != logits.shape[0]:
        raise P.OpInputError(f"anywave.{op}: logits (rows >= 1, classes >= 1) and labels (rows,) expected; got "
                             f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    P._same_device(op, logits=logits, labels=labels)


@torch.library.custom_op("anywave::gpt_xent", mutates_args=())
def _xent(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check_xent(logits, labels)
    x = _d(logits)
    lab = _d(labels.to(torch.int32))
    rows, cols = x.shape
    per = x.new_empty((rows,))
    lse = x.new_empty((rows,))
    out = x.new_empty((1,))
    _run_rows(G.xent_kernel, rows, x.device, x, lab, per, lse, rows, cols)
    _run(G.mean_kernel, 1, x.device, per, out, rows)
    return out.reshape(()), lse


@_xent.register_fake
def _(logits, labels):
    _check_xent(logits, labels)
    return logits.new_empty(()), logits.new_empty((logits.shape[0],))


@torch.library.custom_op("anywave::gpt_xent_backward", mutates_args=())
def _xent_backward(grad: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    _check_xent(logits, labels, "gpt_xent_backward")
    _t(grad, "gpt_xent_backward", "grad"), _t(lse, "gpt_xent_backward", "lse", 1)
    if grad.numel() != 1:
        raise P.OpInputError(f"anywave.gpt_xent_backward: grad must have one element, got {tuple(grad.shape)}")
    x = _d(logits)
    rows, cols = x.shape
    dx = torch.empty_like(x)
    _run(G.xent_backward_kernel, rows * cols, x.device, _d(grad.reshape(1)), x, _d(labels.to(torch.int32)),
         _d(lse), dx, rows, cols)
    return dx


@_xent_backward.register_fake
def _(grad, logits, labels, lse):
    return logits.new_empty(logits.shape)


def _xent_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1], output[1])


def _xent_grad(ctx, g, glse):
    logits, labels, lse = ctx.saved_tensors
    return torch.ops.anywave.gpt_xent_backward(g, logits, labels, lse), None


_xent.register_autograd(_xent_grad, setup_context=_xent_setup)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy of float32 ``logits`` (rows, C) against int ``labels`` (rows,) →
    float32 scalar (as ``F.cross_entropy``); per row ``lse - x[label]`` with
    ``lse = max + log(sum exp(x - max))``, rows summed in order, divided by rows. A label outside
    [0, C) gives NaN. Differentiable (``(exp(x - lse) - onehot) * (g / rows)``)."""
    return torch.ops.anywave.gpt_xent(logits, labels)[0]


# ----------------------------------------------------------------------------- AdamW

@torch.library.custom_op("anywave::gpt_adamw_", mutates_args=("param", "exp_avg", "exp_avg_sq"))
def _adamw(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, lr: float,
           beta1: float, beta2: float, eps: float, weight_decay: float, step: int) -> None:
    for name, t in (("param", param), ("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        _t(t, "gpt_adamw_", name)
        if t.shape != param.shape:
            raise P.OpInputError(f"anywave.gpt_adamw_: {name} has shape {tuple(t.shape)}, param {tuple(param.shape)}")
        if name != "grad" and (not t.is_contiguous() or (t.is_cuda and t.data_ptr() % 16)):
            raise P.OpInputError(f"anywave.gpt_adamw_: {name} must be contiguous (16-byte aligned on CUDA): it is "
                                 "updated in place")
    P._same_device("gpt_adamw_", param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    if step < 1 or not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise P.OpInputError(f"anywave.gpt_adamw_: step >= 1 and betas in [0, 1) expected, got step={step}, "
                             f"betas=({beta1}, {beta2})")
    c1 = 1.0 - beta1 ** step
    c2 = 1.0 - beta2 ** step
    n = param.numel()
    _run(G.adamw_kernel, n, param.device, param, _d(grad), exp_avg, exp_avg_sq, float(lr), float(beta1),
         1.0 - beta1, float(beta2), 1.0 - beta2, c1, c2, float(eps), float(lr) * float(weight_decay), n)


@_adamw.register_fake
def _(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    return None


def adamw_(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, *,
           lr: float, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8, weight_decay: float = 0.0,
           step: int) -> None:
    """AdamW (decoupled weight decay; Loshchilov & Hutter 2019) in place on float32 ``param`` and its
    moments ``exp_avg``, ``exp_avg_sq`` (all one shape, contiguous), step ``step`` >= 1; the
    scalars rounded to float32 on the host (``1 - beta^step`` from float64)."""
    torch.ops.anywave.gpt_adamw_(param, grad, exp_avg, exp_avg_sq, lr, betas[0], betas[1], eps, weight_decay, step)


def adamw_hyper(lr: float, betas: tuple[float, float], weight_decay: float, step: int) -> np.ndarray:
    """The step's AdamW scalars as :func:`gpt_adamw_hyper_` reads them: float32 ``(lr, 1 - b1^step,
    1 - b2^step, lr * weight_decay)``, each computed in float64 and rounded once (as :func:`adamw_`
    rounds them). Raises OpInputError for step < 1 or betas outside [0, 1)."""
    b1, b2 = betas
    if step < 1 or not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise P.OpInputError(f"anywave.adamw_hyper: step >= 1 and betas in [0, 1) expected, got step={step}, "
                             f"betas=({b1}, {b2})")
    return np.array([lr, 1.0 - b1 ** step, 1.0 - b2 ** step, float(lr) * float(weight_decay)], np.float32)


@torch.library.custom_op("anywave::gpt_adamw_hyper_", mutates_args=("param", "exp_avg", "exp_avg_sq"))
def _adamw_hyper(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                 hyper: torch.Tensor, beta1: float, beta2: float, eps: float, decay: bool) -> None:
    """:func:`adamw_` with the step's scalars in ``hyper`` (float32 (4,) on the param's device,
    :func:`adamw_hyper`'s values; ``decay`` False ignores its weight decay): nothing of the step is
    a host value, so a captured CUDA graph replays later steps (write ``hyper`` before each)."""
    for name, t in (("param", param), ("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        _t(t, "gpt_adamw_hyper_", name)
        if t.shape != param.shape:
            raise P.OpInputError(f"anywave.gpt_adamw_hyper_: {name} has shape {tuple(t.shape)}, param "
                                 f"{tuple(param.shape)}")
        if name != "grad" and (not t.is_contiguous() or (t.is_cuda and t.data_ptr() % 16)):
            raise P.OpInputError(f"anywave.gpt_adamw_hyper_: {name} must be contiguous (16-byte aligned on CUDA): "
                                 "it is updated in place")
    _t(hyper, "gpt_adamw_hyper_", "hyper", 1)
    if hyper.numel() != 4:
        raise P.OpInputError(f"anywave.gpt_adamw_hyper_: hyper must hold (lr, c1, c2, lr wd), got {hyper.numel()} "
                             "values")
    P._same_device("gpt_adamw_hyper_", param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, hyper=hyper)
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise P.OpInputError(f"anywave.gpt_adamw_hyper_: betas in [0, 1) expected, got ({beta1}, {beta2})")
    n = param.numel()
    _run(G.adamw_hyper_kernel, n, param.device, param, _d(grad), exp_avg, exp_avg_sq, _d(hyper), float(beta1),
         1.0 - beta1, float(beta2), 1.0 - beta2, float(eps), n, decay=bool(decay))


@_adamw_hyper.register_fake
def _(param, grad, exp_avg, exp_avg_sq, hyper, beta1, beta2, eps, decay):
    return None


# ----------------------------------------------------------------------------- gradient clipping

@torch.library.custom_op("anywave::gpt_grad_norm", mutates_args=())
def _grad_norm(flat: torch.Tensor, max_norm: float) -> torch.Tensor:
    _t(flat, "gpt_grad_norm", "flat", 1)
    if not (max_norm > 0 and math.isfinite(max_norm)):
        raise P.OpInputError(f"anywave.gpt_grad_norm: max_norm must be finite and > 0, got {max_norm!r}")
    n = flat.numel()
    chunks = max(1, -(-n // G.CHUNK))
    part = flat.new_zeros((chunks,))
    out = flat.new_empty((2,))
    f = _d(flat)
    _run(G.sumsq_partial_kernel, chunks, f.device, f, part, n)
    _run(G.norm_finish_kernel, 1, f.device, part, out, chunks, float(max_norm))
    return out


@_grad_norm.register_fake
def _(flat, max_norm):
    return flat.new_empty((2,))


@torch.library.custom_op("anywave::gpt_scale", mutates_args=())
def _scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    _t(x, "gpt_scale", "x"), _t(s, "gpt_scale", "s", 1)
    if s.numel() != 2:
        raise P.OpInputError(f"anywave.gpt_scale: s must be gpt_grad_norm's (norm, scale), got {tuple(s.shape)}")
    P._same_device("gpt_scale", x=x, s=s)
    x = _d(x)
    y = torch.empty_like(x)
    _run(G.scale_kernel, x.numel(), x.device, x, _d(s), y, x.numel())
    return y


@_scale.register_fake
def _(x, s):
    return x.new_empty(x.shape)


def clip_grad_norm_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Clip float32 gradients in place to a global L2 norm of at most ``max_norm`` (PyTorch's
    ``clip_grad_norm_`` rule: ``scale = max_norm / (norm + 1e-6)`` when the norm exceeds it); the
    squared norm summed in chunks of :data:`~anywave.kernels.gpt_ops.CHUNK` of the gradients laid
    end to end in list order, the chunks in order. Returns the norm (float32 scalar tensor)."""
    if not grads:
        raise P.OpInputError("anywave.clip_grad_norm_: no gradients")
    flat = torch.cat([g.reshape(-1) for g in grads])
    ns = torch.ops.anywave.gpt_grad_norm(flat, float(max_norm))
    scaled = torch.ops.anywave.gpt_scale(flat, ns)
    off = 0
    for g in grads:
        g.copy_(scaled[off:off + g.numel()].view_as(g))
        off += g.numel()
    return ns[0]


# ----------------------------------------------------------------------------- decode attention

def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
                     lengths: Sequence[int] | torch.Tensor | None = None) -> torch.Tensor:
    """The decode form of exact attention (docs/spec.md §8.17 "Decode";
    :func:`anywave.kernels.attention.attention_decode` on tensors): float32 ``q`` (B, H, Sq, D)
    against a KV cache ``k``, ``v`` (B, Hkv, Sk, D), every key visible to every query row (the
    cache holds only the past and the current token); the keys split in chunks of
    :data:`~anywave.kernels.attention.KV_CHUNK` walked in parallel and combined in increasing
    order. A fixed sequence: batch-invariant, the same bits on every target.

    ``lengths`` (B ints, or an int32/int64 tensor of B values on q's device) makes the cache
    ragged: sequence b's keys are rows ``0 .. lengths[b] - 1`` of its cache, the rows past them
    unread (:data:`~anywave.kernels.attention.attn_decode_kernel`). Row b's result is then the
    bits of ``decode_attention(q[b:b+1], k[b:b+1, :, :lengths[b]], v[b:b+1, :, :lengths[b]])``
    whatever the other sequences hold; a length of 0 gives zeros. Tensor values are clamped to
    0..Sk on the device (no host read); a sequence is checked.

    Returns float32 (B, H, Sq, D). Raises OpDtypeError / OpInputError (shapes as the attention
    op; ``lengths`` not B values in 0..Sk)."""
    from anywave.kernels import attention as A
    from anywave.kernels._launch import KernelInputError

    for name, t in (("q", q), ("k", k), ("v", v)):
        _t(t, "decode_attention", name, 4)
    try:
        b, hq, hkv, sq, sk, d = A.check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape),
                                               "anywave.decode_attention")
    except KernelInputError as e:
        raise P.OpInputError(str(e)) from None
    dev = P._same_device("decode_attention", q=q, k=k, v=v)
    lens = None if lengths is None else _decode_lengths(lengths, b, sk, dev)
    sc = A.default_scale(d) if scale is None else float(scale)
    o = q.new_zeros((b, hq, sq, d))
    if not (b and sq and sk):
        return o
    nch = -(-sk // A.KV_CHUNK)
    part = q.new_zeros((b, hq, nch, sq, d))
    st = q.new_zeros((b, hq, nch, sq, 2))
    lse = q.new_empty((b, hq, sq))
    target, w = _where(dev)
    rows = b * hq * sq
    ds = A.slice_width(d)
    if lens is None:
        chunk = min(A.KV_CHUNK, -(-sk // A.BC) * A.BC)
        grid, wg = A.fwd_launch(b, hq, sq, d, nch)
        A.attn_fwd_kernel(_d(q), _d(k), _d(v), part, st, hq, hkv, sq, sk, sc, 0, nch, chunk, D=d, DS=ds,
                          split=True, grid=grid, workgroup=wg, target=target, wave_width=w)
    else:
        A.attn_decode_kernel(_d(q), _d(k), _d(v), part, st, lens, rows, hq, hkv, sq, sk, sc, nch, D=d, DS=ds,
                             grid=(-(-rows // A.WG) * (d // ds), nch), workgroup=A.WG, target=target, wave_width=w)
    A.attn_combine_kernel(part, st, o, lse, rows, sq, nch, D=d, DS=ds,
                          grid=-(-rows // A.WG) * (d // ds), workgroup=A.WG, target=target, wave_width=w)
    return o


def _decode_lengths(lengths: Any, b: int, sk: int, dev: torch.device) -> torch.Tensor:
    if isinstance(lengths, torch.Tensor):
        if lengths.dtype not in (torch.int32, torch.int64) or tuple(lengths.shape) != (b,):
            raise P.OpInputError(f"anywave.decode_attention: lengths must be an int32/int64 tensor of shape ({b},), "
                                 f"got {lengths.dtype} {tuple(lengths.shape)}")
        if lengths.device != dev:
            raise P.OpInputError(f"anywave.decode_attention: lengths is on {lengths.device}, q on {dev}")
        return lengths.to(torch.int32).contiguous()
    vals = list(lengths)
    if len(vals) != b or any(isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x <= sk
                             for x in vals):
        raise P.OpInputError(f"anywave.decode_attention: lengths must be {b} ints in 0..{sk} (the cache's rows), "
                             f"got {vals[:8]!r}{' ...' if len(vals) > 8 else ''}")
    return torch.tensor([int(x) for x in vals], dtype=torch.int32, device=dev)
