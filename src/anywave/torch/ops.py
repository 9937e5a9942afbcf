"""WAVE kernels as PyTorch operators (``torch.ops.anywave.*``), built with ``torch.library``.

``mm``, ``linear``, ``sum_dim0``, ``relu``, ``relu_backward`` and ``sgd_`` are built with
:func:`anywave.torch.custom_op` from their kernels, the wrapper users have for their own
kernels; ``cross_entropy`` (two kernels per call) and its backward are ``torch.library``
ops that launch through the same kernel-language launch path. Each has a fake (meta)
implementation, so it runs in eager mode, traces under ``torch.compile`` without graph
breaks and passes ``torch.library.opcheck``; the differentiable ones carry
``register_autograd`` formulas that are themselves WAVE ops. The kernels and their fixed
arithmetic order are in :mod:`anywave.torch.kernels`.

=====================================  ===============================================  =========
op                                     meaning (float32 tensors)                        autograd
=====================================  ===============================================  =========
``mm(a, b, trans_a, trans_b)``         ``op(a) @ op(b)``, op = transpose when the flag   yes
``linear(x, weight, bias)``            ``x @ weight.T + bias`` (weight: (out, in))      yes
``sum_dim0(x)``                        column sums of a 2-D tensor, shape (cols,)       yes
``relu(x)``                            ``max(x, 0)`` (NaN → 0)                          yes
``relu_backward(grad, y)``             ``grad * (y > 0)``                               no
``cross_entropy(logits, labels)``      mean softmax cross-entropy, shape ()             yes
``cross_entropy_backward(g, x, lab)``  ``(softmax(x) - onehot(lab)) * g / B``           no
``sgd_(param, grad, lr)``              in place: ``param = param - lr * grad``          (mutates)
=====================================  ===============================================  =========

Where the work runs:

* CUDA tensors → the ``cuda`` target on PyTorch's current stream of the tensors' device,
  zero-copy (the kernel reads and writes the tensors' memory; launches are asynchronous
  like any PyTorch kernel).
* CPU tensors → the CPU target chosen with :func:`set_cpu_target` / :func:`cpu_target`
  (default ``"host"``: for each kernel the best target on the host CPU at W = 32 -- the native
  ``cpu`` target where a C compiler is present, the next one for kernels it refuses, the
  emulator when nothing else is usable; or a name: ``cpu``, ``emulator``, ``opencl``,
  ``sycl``, ``vulkan``), zero-copy (the tensors' memory is the kernel's buffers; SYCL copies
  host memory into USM). ``ANYWAVE_TARGET`` does not apply here: it picks where a kernel
  launch without ``target=`` runs, which may be a GPU; CPU tensors stay on the host.

Inputs must be float32 (labels: int32 or int64, values in [0, classes)); non-contiguous
inputs are made contiguous (a copy); all tensors of one call must be on one device.
Violations raise :class:`OpDtypeError` (a TypeError) or :class:`OpInputError` (a
ValueError), both :class:`~anywave.errors.WaveError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from anywave.torch import kernels as K
from anywave.torch.custom_ops import custom_op
from anywave.torch.placement import (  # noqa: F401 - re-exported (they moved below the ops)
    OpDtypeError,
    OpInputError,
    _cuda_target,
    _dense,
    _get_target,
    _same_device,
    cpu_target,
    cpu_target_names,
    current_cpu_target,
    set_cpu_target,
)

__all__ = [
    "OpDtypeError", "OpInputError", "cpu_target", "cross_entropy", "cross_entropy_backward", "current_cpu_target",
    "linear", "mm", "relu", "relu_backward", "set_cpu_target", "sgd_", "sum_dim0",
]


# ----------------------------------------------------------------------------- launching

def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _launch(kfn: Any, threads: int, args: Mapping[str, Any], device: torch.device, **consts: Any) -> None:
    """Launch ``kfn`` with one thread per work item (``threads`` of them, in workgroups of
    :data:`~anywave.torch.kernels.BLOCK`) through the kernel language's own launch path (the
    one users call): CUDA tensors on their device's ``cuda`` target and PyTorch's current
    stream, CPU tensors on the chosen CPU target, zero-copy both."""
    if threads <= 0:
        return
    grid = (_ceil_div(threads, K.BLOCK), 1, 1)
    wg = (K.BLOCK, 1, 1)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        target, w = f"cuda:{index}", None
    elif device.type == "cpu":
        from anywave.torch.custom_ops import _cpu_choice

        target, w = _cpu_choice(None, None)
    else:
        raise OpInputError(f"anywave ops run on CPU or CUDA tensors, got device {device}")
    full = dict(args)
    full.update(consts)
    kfn(*[full[p.name] for p in kfn.params if p.name in full], grid=grid, workgroup=wg, target=target, wave_width=w)


def _f32(t: torch.Tensor, op: str, name: str, ndim: int | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise OpDtypeError(f"anywave.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise OpDtypeError(f"anywave.{op}: {name} has dtype {t.dtype}; supported: torch.float32 "
                           "(convert with .float())")
    if ndim is not None and t.dim() != ndim:
        raise OpInputError(f"anywave.{op}: {name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return _dense(t)


def _check_f32(t: torch.Tensor, op: str, name: str, ndim: int | None = None) -> None:
    """The dtype/rank checks of :func:`_f32` without touching memory: the ``validate`` hooks
    of the custom ops also run on fake tensors while tracing (no ``data_ptr`` there)."""
    if not isinstance(t, torch.Tensor):
        raise OpDtypeError(f"anywave.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise OpDtypeError(f"anywave.{op}: {name} has dtype {t.dtype}; supported: torch.float32 "
                           "(convert with .float())")
    if ndim is not None and t.dim() != ndim:
        raise OpInputError(f"anywave.{op}: {name} must be {ndim}-D, got shape {tuple(t.shape)}")


def _labels(t: torch.Tensor, op: str, rows: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int32, torch.int64):
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise OpDtypeError(f"anywave.{op}: labels has dtype {got}; supported: torch.int32, torch.int64")
    if tuple(t.shape) != (rows,):
        raise OpInputError(f"anywave.{op}: labels has shape {tuple(t.shape)}, expected ({rows},) "
                           "(one class index per row of logits)")
    if t.dtype == torch.int64:  # a label past int32 is out of range (NaN loss), not wrapped onto a class
        t = torch.where((t < -(1 << 31)) | (t >= (1 << 31)), torch.full_like(t, -1), t)
    return _dense(t.to(torch.int32))


_EMPTY_BIAS: dict[torch.device, torch.Tensor] = {}


def _dummy(device: torch.device) -> torch.Tensor:
    # a never-read bias buffer for the no-bias matmul (16 bytes, the smallest aligned buffer)
    t = _EMPTY_BIAS.get(device)
    if t is None:
        t = torch.zeros(4, dtype=torch.float32, device=device)
        _EMPTY_BIAS[device] = t
    return t


def _mm_shapes(a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool, op: str) -> tuple[int, int, int]:
    m, ka = (a.shape[1], a.shape[0]) if trans_a else (a.shape[0], a.shape[1])
    kb, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    if ka != kb:
        raise OpInputError(f"anywave.{op}: op(a) is ({m}, {ka}) but op(b) is ({kb}, {n}); the inner sizes must "
                           f"match (trans_a={trans_a}, trans_b={trans_b}, a {tuple(a.shape)}, b {tuple(b.shape)})")
    return m, n, ka


_SM_COUNT: dict[str, int] = {}
#: (config, grid, workgroup) of the fast path by (m, n, k, target); None: no config fits
_GEMM_LAUNCH: dict[tuple[int, int, int, str], tuple[Any, ...] | None] = {}


def _compute_units(target: str) -> int | None:
    """Streaming multiprocessors of CUDA target ``target`` (``"cuda:N"``), else None."""
    if not target.startswith("cuda"):
        return None
    units = _SM_COUNT.get(target)
    if units is None:
        from anywave.runtime import cuda

        _, _, d = target.partition(":")
        units = _SM_COUNT[target] = int(cuda.device_properties(int(d or 0)).multiprocessors)
    return units


def _gemm_config(m: int, n: int, k: int, target: str) -> dict[str, int] | None:
    """The tile config of :mod:`anywave.kernels.gemm` the fast path runs for an (m, k) @ (k, n)
    product on ``target``, or None when none fits (M, N, K multiples of its tile sizes). Every
    config gives the same bits (the kernel's docstring), so this choice is about speed only.

    On CPU targets: :data:`~anywave.kernels.gemm.FAST` when it fits, else the first fitting one
    of ``DEFAULT``, then :data:`~anywave.kernels.gemm.CONFIGS` in order. On CUDA (``units`` =
    the device's SMs): the fitting config of least *wave-quantised work*,
    ``ceil(workgroups / units) * bm * bn`` (outputs the busiest SM computes when the workgroups
    are spread over the SMs in waves: NVIDIA, "Matrix Multiplication Background User's Guide",
    section "Wave Quantization"); ties go to the larger tile (fewer, more efficient
    workgroups), then to the order above. At 4096^3 and 2048^3 on 132 SMs that is FAST; at
    1024^3 FAST makes only 64 workgroups (64 of 132 SMs busy) and the 64x128 tiles make 128."""
    from anywave.kernels import gemm as G

    order = (G.FAST, G.DEFAULT) + tuple(c for c in G.CONFIGS if c not in (G.FAST, G.DEFAULT))
    fitting = [c for c in order if G.fits(m, n, k, c)]
    units = _compute_units(target) if len(fitting) > 1 else None
    if not units:
        return fitting[0] if fitting else None

    def cost(i: int) -> tuple[int, int, int]:
        c = fitting[i]
        area = c["bm"] * c["bn"]
        blocks = (m // c["bm"]) * (n // c["bn"])
        return _ceil_div(blocks, units) * area, -area, i

    return fitting[min(range(len(fitting)), key=cost)]


def _gemm_fast_path(args: dict[str, Any], target: str, wave_width: int | None) -> bool:
    """The ``fast_path`` of ``mm`` and ``linear``: when the product fits a tile config of the
    library's tiled GEMM (:mod:`anywave.kernels.gemm`: M, N, K multiples of its tile sizes), run
    that kernel instead of :func:`anywave.torch.kernels.mm` — the same fma chain over k in order
    from +0.0, then ``+ bias[j]``, so the same bits (both kernels' docstrings). The config is
    :func:`_gemm_config`'s, chosen once per shape and target. A transposed operand is first
    copied to row-major (the GEMM reads ``a`` (M, K) and ``b`` (K, N)); returns False (the
    sequential kernel runs) for shapes no config covers. A repeated call launches from the
    kernel's launch plan (:mod:`anywave.jit.launch`)."""
    from anywave.kernels import gemm as G

    m, n, k = int(args["m"]), int(args["n"]), int(args["k"])
    key = (m, n, k, target)
    launch = _GEMM_LAUNCH.get(key, False)
    if launch is False:
        cfg = _gemm_config(m, n, k, target)
        launch = None if cfg is None else (cfg, *G.launch_shape(m, n, cfg))
        if len(_GEMM_LAUNCH) < 1024:
            _GEMM_LAUNCH[key] = launch
    if launch is None:
        return False
    cfg, grid, wg = launch
    a = args["a"].t().contiguous() if args["trans_a"] else args["a"]
    b = args["b"].t().contiguous() if args["trans_b"] else args["b"]
    G.gemm_f32_kernel(a, b, args["bias"], args["c"], m, n, k, epilogue="bias" if args["use_bias"] else "none",
                      **cfg, grid=grid, workgroup=wg, target=target, wave_width=wave_width)
    return True


# The ops below are user kernels turned into torch ops by anywave.torch.custom_op, the same
# wrapper users have: schema from the kernel's ABI, fake implementation from the shape rule,
# zero-copy launches on CPU targets and on CUDA (current stream), autograd from the formulas.

def _check_mm(a: torch.Tensor, b: torch.Tensor, trans_a: bool = False, trans_b: bool = False, **_: Any) -> None:
    _check_f32(a, "mm", "a", 2), _check_f32(b, "mm", "b", 2)
    _mm_shapes(a, b, trans_a, trans_b, "mm")
    _same_device("mm", a=a, b=b)


mm = custom_op(
    "anywave::mm", K.mm, validate=_check_mm,
    out_shape=lambda a, b, trans_a, trans_b, **_: (a.shape[1] if trans_a else a.shape[0],
                                                   b.shape[0] if trans_b else b.shape[1]),
    scalars={"m": lambda c, **_: c.shape[0], "n": lambda c, **_: c.shape[1],
             "k": lambda a, trans_a, **_: a.shape[0] if trans_a else a.shape[1]},
    buffers={"bias": lambda a, **_: _dummy(a.device)}, constants={"use_bias": False}, workgroup=K.BLOCK,
    fast_path=_gemm_fast_path)
mm.__doc__ = """``op(a) @ op(b)`` in a WAVE kernel; ``op`` transposes when its flag is set.

    Args:
        a: float32, (M, K) — or (K, M) when ``trans_a``.
        b: float32, (K, N) — or (N, K) when ``trans_b``.

    Returns:
        float32 (M, N); element (i, j) = ``fma`` chain over k = 0..K-1 in order from +0.0.
        Shapes that fit a tile config of :mod:`anywave.kernels.gemm` (M, N multiples of 64 and
        K of 8, at least) run the tiled GEMM; others the one-thread-per-output kernel; same bits.

    Raises:
        OpDtypeError, OpInputError (shapes, devices).
    """


def _mm_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    a, b, trans_a, trans_b = inputs
    ctx.save_for_backward(a, b)
    ctx.trans_a, ctx.trans_b = trans_a, trans_b


def _mm_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    # C = A'B' with A' = op(A), B' = op(B): dA' = G B'^T, dB' = A'^T G (then transposed back)
    a, b = ctx.saved_tensors
    ta, tb = ctx.trans_a, ctx.trans_b
    da = db = None
    if ctx.needs_input_grad[0]:
        da = torch.ops.anywave.mm(b, grad, tb, True) if ta else torch.ops.anywave.mm(grad, b, False, not tb)
    if ctx.needs_input_grad[1]:
        db = torch.ops.anywave.mm(grad, a, True, ta) if tb else torch.ops.anywave.mm(a, grad, not ta, False)
    return da, db, None, None


mm.register_autograd(_mm_backward, setup_context=_mm_setup)


# ----------------------------------------------------------------------------- sum over rows

def _check_sum_dim0(x: torch.Tensor, **_: Any) -> None:
    _check_f32(x, "sum_dim0", "x", 2)


def _sum_dim0_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.rows = inputs[0].shape[0]


def _sum_dim0_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    return grad.unsqueeze(0).expand(ctx.rows, grad.shape[0])


sum_dim0 = custom_op(
    "anywave::sum_dim0", K.sum_dim0, validate=_check_sum_dim0, out_shape=lambda x, **_: (x.shape[1],),
    scalars={"rows": lambda x, **_: x.shape[0], "cols": lambda x, **_: x.shape[1]}, workgroup=K.BLOCK,
    backward=_sum_dim0_backward, setup_context=_sum_dim0_setup)
sum_dim0.__doc__ = """Column sums of a float32 (R, C) tensor → (C,); each a left-to-right sum over rows
    from +0.0 (the bias gradient of a linear layer)."""


# ----------------------------------------------------------------------------- linear

def _check_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, **_: Any) -> None:
    _check_f32(x, "linear", "x", 2), _check_f32(weight, "linear", "weight", 2), _check_f32(bias, "linear", "bias", 1)
    _, n, _ = _mm_shapes(x, weight, False, True, "linear")
    if tuple(bias.shape) != (n,):
        raise OpInputError(f"anywave.linear: bias has shape {tuple(bias.shape)}, expected ({n},)")
    _same_device("linear", x=x, weight=weight, bias=bias)


def _linear_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w, _ = inputs
    ctx.save_for_backward(x, w)


def _linear_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dx = torch.ops.anywave.mm(grad, w, False, False) if ctx.needs_input_grad[0] else None
    dw = torch.ops.anywave.mm(grad, x, True, False) if ctx.needs_input_grad[1] else None
    db = torch.ops.anywave.sum_dim0(grad) if ctx.needs_input_grad[2] else None
    return dx, dw, db


linear = custom_op(
    "anywave::linear", K.mm, validate=_check_linear, arg_names={"a": "x", "b": "weight"},
    out_shape=lambda x, weight, **_: (x.shape[0], weight.shape[0]),
    scalars={"m": lambda x, **_: x.shape[0], "n": lambda weight, **_: weight.shape[0],
             "k": lambda x, **_: x.shape[1]},
    constants={"trans_a": False, "trans_b": True, "use_bias": True}, workgroup=K.BLOCK,
    backward=_linear_backward, setup_context=_linear_setup, fast_path=_gemm_fast_path)
linear.__doc__ = """``x @ weight.T + bias`` (PyTorch's ``nn.Linear`` layout) in one WAVE kernel.

    Args:
        x: float32 (B, IN); weight: float32 (OUT, IN); bias: float32 (OUT,).

    Returns:
        float32 (B, OUT): the ``mm`` fma chain, then ``+ bias[j]`` (one rounding each); the
        tiled GEMM (bias epilogue) where the shape fits, as ``mm``.
    """


# ----------------------------------------------------------------------------- relu

def _relu_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _relu_grad(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return torch.ops.anywave.relu_backward(grad, y)


def _check_relu(x: torch.Tensor, **_: Any) -> None:
    _check_f32(x, "relu", "x")


relu = custom_op(
    "anywave::relu", K.relu, validate=_check_relu,
    out_shape=lambda x, **_: x.shape, scalars={"n": lambda x, **_: x.numel()}, workgroup=K.BLOCK,
    backward=_relu_grad, setup_context=_relu_setup)
relu.__doc__ = """``x if x > 0 else +0.0`` elementwise (float32, any shape; NaN → +0.0)."""


def _check_relu_backward(grad: torch.Tensor, y: torch.Tensor, **_: Any) -> None:
    _check_f32(grad, "relu_backward", "grad"), _check_f32(y, "relu_backward", "y")
    g = grad
    if g.shape != y.shape:
        raise OpInputError(f"anywave.relu_backward: grad {tuple(g.shape)} and y {tuple(y.shape)} differ in shape")
    _same_device("relu_backward", grad=g, y=y)


relu_backward = custom_op(
    "anywave::relu_backward", K.relu_backward, validate=_check_relu_backward, arg_names={"g": "grad"},
    out_shape=lambda grad, **_: grad.shape, scalars={"n": lambda grad, **_: grad.numel()}, workgroup=K.BLOCK)
relu_backward.__doc__ = """Gradient of :func:`relu`: ``grad if y > 0 else +0.0`` (``y`` the ReLU output; float32,
    same shape as ``grad``)."""


# ----------------------------------------------------------------------------- cross-entropy

def _ce_inputs(logits: torch.Tensor, labels: torch.Tensor, op: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _f32(logits, op, "logits", 2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise OpInputError(f"anywave.{op}: logits must have at least one row and one class, got "
                           f"{tuple(x.shape)}")
    lab = _labels(labels, op, int(x.shape[0]))
    _same_device(op, logits=x, labels=lab)
    return x, lab


@torch.library.custom_op("anywave::cross_entropy", mutates_args=())
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy, as ``torch.nn.functional.cross_entropy(logits, labels)``.

    Args:
        logits: float32 (B, C), B, C >= 1.
        labels: int32/int64 (B,), class indices in [0, C); a row with a label outside that
            range gives a NaN loss (on every target alike).

    Returns:
        float32 scalar tensor (shape ()). Per row ``(max + log(sum exp(x - max))) - x[label]``,
        then the rows summed in order and divided by B (see :mod:`anywave.torch.kernels`).
    """
    x, lab = _ce_inputs(logits, labels, "cross_entropy")
    rows, cols = int(x.shape[0]), int(x.shape[1])
    per_row = torch.empty(rows, dtype=torch.float32, device=x.device)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    _launch(K.ce_rows, rows, {"x": x, "labels": lab, "out": per_row, "rows": rows, "cols": cols}, x.device)
    _launch(K.mean, 1, {"v": per_row, "out": out, "n": rows}, x.device)
    return out.reshape(())


@cross_entropy.register_fake
def _(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return logits.new_empty(())


@torch.library.custom_op("anywave::cross_entropy_backward", mutates_args=())
def cross_entropy_backward(grad: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Gradient of :func:`cross_entropy` w.r.t. the logits: ``(softmax(x) - onehot) * (grad / B)``.

    Args:
        grad: float32 with one element (the loss's gradient); logits, labels: as
            :func:`cross_entropy`.

    Returns:
        float32 (B, C).
    """
    x, lab = _ce_inputs(logits, labels, "cross_entropy_backward")
    g = _f32(grad, "cross_entropy_backward", "grad")
    if g.numel() != 1:
        raise OpInputError(f"anywave.cross_entropy_backward: grad must have one element, got shape {tuple(g.shape)}")
    dev = _same_device("cross_entropy_backward", grad=g, logits=x)
    rows, cols = int(x.shape[0]), int(x.shape[1])
    dx = torch.empty((rows, cols), dtype=torch.float32, device=dev)
    _launch(K.ce_backward, rows * cols, {"grad": g.reshape(1), "x": x, "labels": lab, "dx": dx,
                                         "rows": rows, "cols": cols}, dev)
    return dx


@cross_entropy_backward.register_fake
def _(grad: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return logits.new_empty(logits.shape)


def _ce_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])


def _ce_grad(ctx: Any, grad: torch.Tensor) -> tuple[Any, None]:
    logits, labels = ctx.saved_tensors
    return torch.ops.anywave.cross_entropy_backward(grad, logits, labels), None


cross_entropy.register_autograd(_ce_grad, setup_context=_ce_setup)


# ----------------------------------------------------------------------------- SGD

def _check_sgd(param: torch.Tensor, grad: torch.Tensor, lr: float, **_: Any) -> None:
    if not isinstance(param, torch.Tensor) or param.dtype != torch.float32:
        got = param.dtype if isinstance(param, torch.Tensor) else type(param).__name__
        raise OpDtypeError(f"anywave.sgd_: param has dtype {got}; supported: torch.float32")
    if not param.is_contiguous():  # (custom_op refuses a misaligned CUDA param; no data_ptr on fake tensors)
        raise OpInputError("anywave.sgd_: param must be contiguous (and 16-byte aligned on CUDA): it is updated "
                           "in place")
    _check_f32(grad, "sgd_", "grad")
    g = grad
    if g.shape != param.shape:
        raise OpInputError(f"anywave.sgd_: grad {tuple(g.shape)} and param {tuple(param.shape)} differ in shape")
    _same_device("sgd_", param=param, grad=g)


sgd_ = custom_op(
    "anywave::sgd_", K.sgd, validate=_check_sgd, arg_names={"p": "param", "g": "grad"},
    scalars={"n": lambda param, **_: param.numel()}, workgroup=K.BLOCK,
    grid=lambda param, **_: _ceil_div(param.numel(), K.BLOCK))
sgd_.__doc__ = """In place: ``param = param - lr * grad`` (float32, same shape; the product rounded, then
    the difference — no fused multiply-add). ``param`` must be contiguous (it is written)."""

# the fragment GEMM (torch.ops.anywave.gemm_mma) and attention (torch.ops.anywave.attention,
# attention_forward, attention_backward) register with the others: importing this module is all a
# user needs (both read this module's helpers, so they are imported last)
from anywave.torch import attention as _attention_ops  # noqa: E402,F401
from anywave.torch import gpt as _gpt_ops  # noqa: E402,F401  (issue 26: torch.ops.anywave.gpt_*)
from anywave.torch import mma_ops as _mma_ops  # noqa: E402,F401
