"""``torch.ops.anywave.attention``: attention (docs/spec.md §8.17) as a PyTorch operator, with
autograd, fake tensors and ``torch.compile`` support. ``import anywave.torch.ops`` registers it.

``attention(q, k, v, causal=False, scale=None, mode="fast") -> Tensor`` (SDPA's layout: q
(B, Hq, Sq, D), k and v (B, Hkv, Sk, D), Hq a multiple of Hkv, D a multiple of 4 up to 256; all
float32, or all bfloat16, or all float16; one device). It is ``attention_forward(...)[0]``:

* ``attention_forward(q, k, v, causal, scale, mode) -> (O, LSE)``: O shaped and typed as q, LSE
  float32 (B, Hq, Sq) (natural log; the backward reads it);
* ``attention_backward(grad_o, grad_lse, q, k, v, o, lse, causal, scale, mode="exact") -> (dq, dk, dv)``
  typed as q, k, v: the §8.17 backward (two passes, no atomics: the same bits run to run); the
  autograd formula passes the forward's ``mode``, and ``"fast"`` runs the fragment-MMA backward
  (:mod:`anywave.kernels.attention_fast_bwd`, class ``bounded``) where it covers the tensors.

``mode``: ``"exact"`` — the exact variant (§8.17: the same bits on every target and W, batch-
invariant); ``"fast"`` — the fragment-MMA kernel (:mod:`anywave.kernels.attention_fast`, class
``bounded``) for bf16/f16 CUDA tensors of the shapes it covers, and otherwise (f32 inputs always,
CPU tensors, devices or shapes without a fast kernel) the exact variant. bf16/f16 inputs are
converted to f32 exactly, the exact result is rounded to the input type once (§8.17); gradients
likewise.

CUDA tensors run on the ``cuda`` target of their device, CPU tensors on the CPU target chosen
with :func:`anywave.torch.ops.set_cpu_target` / :func:`anywave.torch.ops.cpu_target` (default:
the best target on the host CPU for each kernel), zero-copy, as the other ops. Raises
:class:`~anywave.torch.ops.OpDtypeError` (dtypes) and :class:`~anywave.torch.ops.OpInputError`
(shapes, devices, mode, scale).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from anywave.kernels import attention as A
from anywave.kernels._launch import KernelInputError
from anywave.torch import placement as O

__all__ = ["attention", "attention_backward", "attention_forward"]

MODES = ("exact", "fast")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _devices(op: str, fake: bool, **tensors: torch.Tensor) -> None:
    # the fake kernels also serve meta tensors (shape inference): one device, cpu, cuda or meta
    if fake and all(t.device.type == "meta" for t in tensors.values()):
        return
    O._same_device(op, **tensors)


def _check(q: Any, k: Any, v: Any, scale: float | None, mode: str, op: str, fake: bool = False) -> tuple[int, ...]:
    """Metadata checks only (they also run on fake tensors): dtypes, shapes, devices, mode."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise O.OpDtypeError(f"anywave.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _DTYPES:
            raise O.OpDtypeError(f"anywave.{op}: {name} has dtype {t.dtype}; supported: torch.float32, "
                                 "torch.bfloat16, torch.float16")
    if not (q.dtype == k.dtype == v.dtype):
        raise O.OpDtypeError(f"anywave.{op}: q, k, v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if mode not in MODES:
        raise O.OpInputError(f"anywave.{op}: mode {mode!r} is not one of {MODES}")
    try:
        A.check_scale(scale, f"anywave.{op}")
    except KernelInputError as e:
        raise O.OpInputError(str(e)) from None
    try:
        shapes = A.check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), f"anywave.{op}")
    except KernelInputError as e:
        raise O.OpInputError(str(e)) from None
    _devices(op, fake, q=q, k=k, v=v)
    return shapes


def _where(t: torch.Tensor) -> tuple[str, int | None]:
    """(target, wave width) that runs kernels on ``t``'s device."""
    if t.device.type == "cuda":
        index = t.device.index if t.device.index is not None else torch.cuda.current_device()
        return f"cuda:{index}", None
    from anywave.torch.custom_ops import _cpu_choice

    return _cpu_choice(None, None)


def _f32(t: torch.Tensor) -> torch.Tensor:
    # exact for bf16/f16; the kernels index row-major memory, 16-byte aligned on CUDA
    return O._dense(t.to(torch.float32).contiguous())


def _fast_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The ``fast`` kernel's (O, LSE) where one covers these tensors, else None (exact runs).
    The fast module is optional: ``anywave.kernels.attention_fast.forward(q, k, v, causal, scale)``
    on CUDA tensors; a shape it does not cover (KernelInputError) falls back to exact."""
    if not q.is_cuda or q.dtype not in (torch.bfloat16, torch.float16):
        return None
    try:
        from anywave.kernels import attention_fast as F
    except ImportError:
        return None
    fwd = getattr(F, "forward", None)
    if fwd is None:
        return None
    try:
        o, lse = fwd(q, k, v, causal, scale)
    except KernelInputError:
        return None
    return o.to(q.dtype), lse.to(torch.float32)


@torch.library.custom_op("anywave::attention_forward", mutates_args=())
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      scale: float | None = None, mode: str = "fast") -> tuple[torch.Tensor, torch.Tensor]:
    """Attention and its log-sum-exp: ``(O, LSE)``; see the module docstring."""
    b, hq, hkv, sq, sk, d = _check(q, k, v, scale, mode, "attention_forward")
    sc = A.default_scale(d) if scale is None else float(scale)
    if mode == "fast":
        res = _fast_forward(q, k, v, causal, sc)
        if res is not None:
            return res
    o = torch.zeros((b, hq, sq, d), dtype=torch.float32, device=q.device)
    lse = torch.full((b, hq, sq), -math.inf, dtype=torch.float32, device=q.device)
    if b and sq and sk:
        target, w = _where(q)
        grid, wg = A.fwd_launch(b, hq, sq, d)
        A.attn_fwd_kernel(_f32(q), _f32(k), _f32(v), o, lse, hq, hkv, sq, sk, sc, int(bool(causal)), 1, sk,
                          D=d, DS=A.slice_width(d), split=False, grid=grid, workgroup=wg, target=target,
                          wave_width=w)
    return (o if q.dtype == torch.float32 else o.to(q.dtype)), lse


@attention_forward.register_fake
def _(q, k, v, causal=False, scale=None, mode="fast"):
    b, hq, _, sq, _, _ = _check(q, k, v, scale, mode, "attention_forward", fake=True)
    return q.new_empty(q.shape), q.new_empty((b, hq, sq), dtype=torch.float32)


@torch.library.custom_op("anywave::attention_backward", mutates_args=())
def attention_backward(grad_o: torch.Tensor, grad_lse: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, causal: bool = False,
                       scale: float | None = None, mode: str = "exact"
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dq, dk, dv)`` of :func:`attention_forward` (§8.17 "Backward"), typed as q, k, v,
    from the forward's ``o`` and ``lse`` and the incoming ``grad_o`` (as o) and ``grad_lse`` (as lse).
    ``mode="fast"``: the fragment-MMA backward (§8.17 "``fast`` backward",
    :mod:`anywave.kernels.attention_fast_bwd`) where it covers the tensors (bf16/f16 on CUDA, D up to
    128: 64 and 128 natively, the others zero-padded to them; Sq = Sk, a positive scale), else the
    exact two passes."""
    b, hq, hkv, sq, sk, d = _check_backward(grad_o, grad_lse, q, k, v, o, lse, scale)
    if mode not in MODES:
        raise O.OpInputError(f"anywave.attention_backward: mode {mode!r} is not one of {MODES}")
    sc = A.default_scale(d) if scale is None else float(scale)
    if mode == "fast":
        res = _fast_backward(grad_o, grad_lse, q, k, v, o, lse, causal, sc)
        if res is not None:
            return res
    # an empty chain is +0, times scale (-0 for a negative scale), as the kernels write it (§8.17)
    dq = torch.zeros((b, hq, sq, d), dtype=torch.float32, device=q.device) * sc
    dk = torch.zeros((b, hkv, sk, d), dtype=torch.float32, device=q.device) * sc
    dv = torch.zeros((b, hkv, sk, d), dtype=torch.float32, device=q.device)
    if b and sq and sk:
        target, w = _where(q)
        qf, kf, vf, of, gf = _f32(q), _f32(k), _f32(v), _f32(o), _f32(grad_o)
        lf, glf = _f32(lse), _f32(grad_lse)
        delta = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
        nsl = d // A.slice_width(d)
        consts = {"D": d, "DS": A.slice_width(d), "target": target, "wave_width": w, "workgroup": A.WG}
        cz = int(bool(causal))
        A.attn_bwd_dq_kernel(qf, kf, vf, of, gf, lf, glf, dq, delta, hq, hkv, sq, sk, sc, cz,
                             grid=(-(-sq // A.WG) * nsl, hq, b), **consts)
        A.attn_bwd_dkdv_kernel(qf, kf, vf, gf, lf, delta, dk, dv, hq, hkv, sq, sk, sc, cz,
                               grid=(-(-sk // A.WG) * nsl, hkv, b), **consts)
    if q.dtype != torch.float32:
        dq, dk, dv = dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)
    return dq, dk, dv


def _check_backward(grad_o, grad_lse, q, k, v, o, lse, scale, fake: bool = False) -> tuple[int, ...]:
    b, hq, hkv, sq, sk, d = _check(q, k, v, scale, "exact", "attention_backward", fake)
    for name, t, shape, dt in (("grad_o", grad_o, q.shape, q.dtype), ("o", o, q.shape, q.dtype),
                               ("grad_lse", grad_lse, (b, hq, sq), torch.float32),
                               ("lse", lse, (b, hq, sq), torch.float32)):
        if not isinstance(t, torch.Tensor) or t.dtype != dt:
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise O.OpDtypeError(f"anywave.attention_backward: {name} has dtype {got}, expected {dt}")
        if tuple(t.shape) != tuple(shape):
            raise O.OpInputError(f"anywave.attention_backward: {name} has shape {tuple(t.shape)}, expected "
                                 f"{tuple(shape)}")
    _devices("attention_backward", fake, grad_o=grad_o, grad_lse=grad_lse, q=q, k=k, v=v, o=o, lse=lse)
    return b, hq, hkv, sq, sk, d


def _fast_backward(grad_o: torch.Tensor, grad_lse: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   o: torch.Tensor, lse: torch.Tensor, causal: bool,
                   scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The ``fast`` backward's (dq, dk, dv) where it covers these tensors, else None (exact runs)."""
    if not q.is_cuda or q.dtype not in (torch.bfloat16, torch.float16) or q.shape[2] != k.shape[2] or not q.numel():
        return None
    try:
        from anywave.kernels import attention_fast_bwd as FB
    except ImportError:
        return None
    try:
        return FB.backward(q.contiguous(), k.contiguous(), v.contiguous(), o.contiguous(), lse, grad_o.contiguous(),
                           grad_lse, causal, scale)
    except KernelInputError:
        return None


@attention_backward.register_fake
def _(grad_o, grad_lse, q, k, v, o, lse, causal=False, scale=None, mode="exact"):
    _check_backward(grad_o, grad_lse, q, k, v, o, lse, scale, fake=True)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k, v, causal, scale, mode = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale, ctx.mode = causal, scale, mode


def _backward(ctx: Any, grad_o: torch.Tensor | None, grad_lse: torch.Tensor | None) -> tuple[Any, ...]:
    q, k, v, o, lse = ctx.saved_tensors
    if grad_o is None:
        grad_o = torch.zeros_like(o)
    if grad_lse is None:
        grad_lse = torch.zeros_like(lse)
    dq, dk, dv = torch.ops.anywave.attention_backward(grad_o.contiguous(), grad_lse.contiguous(), q, k, v, o, lse,
                                                      ctx.causal, ctx.scale, ctx.mode)
    return dq, dk, dv, None, None, None


attention_forward.register_autograd(_backward, setup_context=_setup)

# the public op: O alone, as SDPA returns it; a composite of attention_forward (so autograd, fake
# tensors and torch.compile go through that op, and the LSE is kept for the backward)
_LIB = torch.library.Library("anywave", "FRAGMENT")
_LIB.define("attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, str mode=\"fast\") "
            "-> Tensor")


def _attention_composite(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                         scale: float | None = None, mode: str = "fast") -> torch.Tensor:
    return torch.ops.anywave.attention_forward(q, k, v, causal, scale, mode)[0]


_LIB.impl("attention", _attention_composite, "CompositeImplicitAutograd")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
              mode: str = "fast") -> torch.Tensor:
    """``torch.ops.anywave.attention``: ``softmax(q kᵀ · scale + mask) v`` per (batch, head, query row).

    Args:
        q: (B, Hq, Sq, D); k, v: (B, Hkv, Sk, D); one dtype of float32, bfloat16, float16; Hq a
            multiple of Hkv (GQA); D a multiple of 4 up to 256.
        causal: key j visible to query i iff ``j <= i + (Sk - Sq)`` (SDPA's ``is_causal`` for Sq = Sk).
        scale: default ``1/sqrt(D)`` rounded to float32.
        mode: ``"exact"`` or ``"fast"``; float32 inputs always compute exactly, and ``"fast"``
            falls back to exact where no fast kernel exists (CPU, devices other than the fast
            kernel's, shapes it does not cover).

    Returns:
        O, shaped and typed as q (the exact sequence of docs/spec.md §8.17, rounded to q's dtype).

    Raises:
        OpDtypeError: a dtype other than float32, bfloat16, float16, or mixed dtypes.
        OpInputError: shapes, devices, scale, causal or mode not as above.
    """
    return torch.ops.anywave.attention(q, k, v, causal, scale, mode)
