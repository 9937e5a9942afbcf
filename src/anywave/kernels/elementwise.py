"""Element-wise kernels: vector add, saxpy, ReLU, GELU (one thread per element).

All are exact per element (no reductions), so the bits do not depend on the wave width.

GELU (:func:`gelu_tanh`) is the tanh approximation of Hendrycks & Gimpel, "Gaussian Error Linear
Units (GELUs)", 2016, eq. 2 — the one ``torch.nn.functional.gelu(x, approximate="tanh")``
computes — written in its sigmoid form, an identity of the hyperbolic tangent
(``1 + tanh(u) = 2 / (1 + exp(-2u))``)::

    gelu(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)),    u = sqrt(2/pi) (x + 0.044715 x^3)

(:func:`gelu_tanh` gives the steps and their roundings.)

The sigmoid form needs one exponential, one division and no branch (the tanh form needs both a
small-argument polynomial and an exponential), and it has no cancellation in ``1 + tanh(u)``
for negative u. Every operation is of the exact class (add/mul/fma/div/rint/cvt/bit operations,
docs/spec.md §9), so every conformant target returns the same bits. Error (checked by
tests/test_examples.py against ``x / (1 + exp(-2u))`` evaluated in float64 from the same f32
``-2u``): at most 4 ulp of the result, plus an absolute 2^-124 where the exact result is below the
f32 normal range (for x < -10.6 the denominator overflows and the result is ±0, as torch's).
gelu(+inf) = inf; gelu(-inf) = NaN (-inf * 0 in the tanh form, as torch's tanh GELU).
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, as_f32, ceil_div, launch_kw

WG = 256  #: threads per workgroup
SQRT_2_OVER_PI = 0.7978845608028654  #: rounded to f32 where it is used
GELU_C = 0.044715


@aw.kernel
def vector_add_kernel(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] + y[i]


@aw.kernel
def saxpy_kernel(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]  # two roundings: the compiler never contracts to fma


@aw.kernel
def relu_kernel(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        out[i] = v if v > 0.0 else 0.0  # -0.0 and NaN map to +0.0


#: exp(r) ~ sum_k EXP_POLY[k] r^k on |r| <= ln(2)/2: a degree-6 near-minimax fit of the relative
#: error (iteratively reweighted least squares on Chebyshev nodes, float64, rounded to f32);
#: max relative error 1.9e-9 in exact arithmetic, 7.1e-8 (0.6 ulp) with f32 Horner fma steps
EXP_POLY = (1.0, 1.0, 0.49999991059303284, 0.16666419804096222, 0.04166822507977486,
            0.008374815806746483, 0.0013836842263117433)


@aw.func
def gelu_tanh(v):
    """GELU, tanh approximation in its sigmoid form (see the module docstring), f32 -> f32.

    Steps (each rounded to f32): ``s = fma(0.044715 v, v v, v)``; ``t = -2 sqrt(2/pi) s``;
    t clamped to [-20, 89] (below -20, ``1 + exp(t)`` rounds to 1 anyway; above 89 the
    exponent n below is 128 and ``e = inf``); ``n = rint(t / ln 2)``; ``r = t - n ln 2`` (ln 2 in
    two parts, Cody & Waite); ``e = P(r) * 2^n`` (P: :data:`EXP_POLY`, Horner with fma; 2^n
    built from its exponent bits, n in [-29, 128]); result ``v / (1 + e)``.
    """
    s = aw.fma(GELU_C * v, v * v, v)
    t = s * (-2.0 * SQRT_2_OVER_PI)
    # a NaN t becomes 89 here (e = inf); the NaN comes back through v / (1 + e)
    t = t if t < 89.0 else 89.0
    t = t if t > -20.0 else -20.0
    n = aw.rint(t * 1.4426950408889634)
    r = aw.fma(-n, 0.693145751953125, t)
    r = aw.fma(-n, 1.4286067653301870e-06, r)
    p = aw.fma(r, EXP_POLY[6], EXP_POLY[5])
    p = aw.fma(r, p, EXP_POLY[4])
    p = aw.fma(r, p, EXP_POLY[3])
    p = aw.fma(r, p, EXP_POLY[2])
    p = aw.fma(r, p, EXP_POLY[1])
    p = aw.fma(r, p, EXP_POLY[0])
    e = p * aw.bitcast((aw.i32(n) + 127) << 23, aw.f32)
    return v / (1.0 + e)


@aw.kernel
def gelu_kernel(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = gelu_tanh(x[i])


def vector_add(x: np.ndarray, y: np.ndarray, *, wave_width: int | None = None,
               target: str | None = None) -> np.ndarray:
    """``x + y`` element-wise. x, y: float32 arrays of one shape (any shape); returns float32."""
    xa, ya = as_f32(x, "x"), as_f32(y, "y")
    if xa.shape != ya.shape:
        raise KernelInputError(f"vector_add: x has shape {xa.shape} but y has shape {ya.shape}")
    out = np.empty_like(xa)
    n = xa.size
    vector_add_kernel(xa, ya, out, n, grid=max(1, ceil_div(n, WG)), workgroup=WG, **launch_kw(wave_width, target))
    return out


def saxpy(a: float, x: np.ndarray, y: np.ndarray, *, wave_width: int | None = None,
          target: str | None = None) -> np.ndarray:
    """``a * x + y`` (f32, the product rounded before the add). Returns a new float32 array."""
    xa = as_f32(x, "x")
    ya = as_f32(y, "y").copy()
    if xa.shape != ya.shape:
        raise KernelInputError(f"saxpy: x has shape {xa.shape} but y has shape {ya.shape}")
    n = xa.size
    saxpy_kernel(np.float32(a), xa, ya, n, grid=max(1, ceil_div(n, WG)), workgroup=WG,
                 **launch_kw(wave_width, target))
    return ya


def _unary(kernel, x: np.ndarray, wave_width: int | None, target: str | None) -> np.ndarray:
    xa = as_f32(x, "x")
    out = np.empty_like(xa)
    n = xa.size
    kernel(xa, out, n, grid=max(1, ceil_div(n, WG)), workgroup=WG, **launch_kw(wave_width, target))
    return out


def relu(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """``x if x > 0 else +0.0`` element-wise (float32, any shape)."""
    return _unary(relu_kernel, x, wave_width, target)


def gelu(x: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """GELU, tanh approximation: ``0.5x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` in float32,
    computed as :func:`gelu_tanh` (sigmoid form, <= 4 ulp; identical bits on every target).
    x: float32 array of any shape; returns a new float32 array of that shape."""
    return _unary(gelu_kernel, x, wave_width, target)
