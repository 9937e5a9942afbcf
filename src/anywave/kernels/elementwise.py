"""Element-wise kernels: vector add, saxpy, ReLU, GELU (one thread per element).

All are exact per element (no reductions), so the bits do not depend on the wave width.
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


@aw.kernel
def gelu_kernel(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        inner = SQRT_2_OVER_PI * (v + GELU_C * (v * v * v))
        out[i] = (0.5 * v) * (1.0 + aw.tanh(inner))  # precise stdlib tanh: <= 4 ulp, same bits everywhere


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
    """GELU, tanh form: ``0.5x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` in float32, with the
    stdlib's precise tanh (<= 4 ulp, deterministic class: identical bits on every target)."""
    return _unary(gelu_kernel, x, wave_width, target)
