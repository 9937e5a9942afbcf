"""2-D stencils on float32 images (row-major, height x width), clamp-to-edge borders,
16 x 16 workgroups, one thread per output pixel.

Order (reproduced by :mod:`anywave.kernels.reference`; independent of W):

* Gaussian 5x5: ``acc = fma(w[dy, dx], img[clamp(y+dy-2), clamp(x+dx-2)], acc)`` for dy, then dx,
  in row-major order from ``acc = +0.0``;
* Sobel: ``gx = (r0[x+1] - r0[x-1]) + 2 (r1[x+1] - r1[x-1]) + (r2[x+1] - r2[x-1])`` (rows y-1, y,
  y+1), ``gy`` likewise with columns and rows exchanged, ``mag = sqrt(gx*gx + gy*gy)`` — every
  op rounded to f32 (sqrt correctly rounded).
"""

from __future__ import annotations

import numpy as np

import anywave as aw
from anywave.kernels._launch import KernelInputError, as_f32, ceil_div, launch_kw

TILE = 16


@aw.kernel(workgroup=(TILE, TILE, 1))
def gaussian5_kernel(img: aw.In[aw.f32], w: aw.In[aw.f32], out: aw.Out[aw.f32], height: aw.i32, width: aw.i32):
    x = aw.global_id(0)
    y = aw.global_id(1)
    if x < width and y < height:
        acc = 0.0
        for dy in aw.static_range(5):
            yy = min(max(y + (dy - 2), 0), height - 1)
            for dx in aw.static_range(5):
                xx = min(max(x + (dx - 2), 0), width - 1)
                acc = aw.fma(w[dy * 5 + dx], img[yy * width + xx], acc)
        out[y * width + x] = acc


@aw.kernel(workgroup=(TILE, TILE, 1))
def sobel_kernel(img: aw.In[aw.f32], out: aw.Out[aw.f32], height: aw.i32, width: aw.i32):
    x = aw.global_id(0)
    y = aw.global_id(1)
    if x < width and y < height:
        xm = max(x - 1, 0)
        xp = min(x + 1, width - 1)
        r0 = max(y - 1, 0) * width
        r1 = y * width
        r2 = min(y + 1, height - 1) * width
        gx = (img[r0 + xp] - img[r0 + xm]) + 2.0 * (img[r1 + xp] - img[r1 + xm]) + (img[r2 + xp] - img[r2 + xm])
        gy = (img[r2 + xm] - img[r0 + xm]) + 2.0 * (img[r2 + x] - img[r0 + x]) + (img[r2 + xp] - img[r0 + xp])
        out[r1 + x] = aw.sqrt(gx * gx + gy * gy)


def gaussian_kernel5(sigma: float = 1.0) -> np.ndarray:
    """Normalised 5x5 Gaussian weights (float32, shape (5, 5)) for standard deviation ``sigma`` > 0."""
    if not sigma > 0:
        raise KernelInputError(f"gaussian_kernel5: sigma must be > 0, got {sigma!r}")
    t = np.arange(-2, 3, dtype=np.float64)
    g = np.exp(-(t * t) / (2.0 * sigma * sigma))
    w = np.outer(g, g)
    return (w / w.sum()).astype(np.float32)


def _image(img: np.ndarray) -> np.ndarray:
    a = as_f32(img, "img", 2)
    if a.size == 0:
        raise KernelInputError(f"image must be non-empty, got shape {a.shape}")
    return a


def gaussian_blur5(img: np.ndarray, weights: np.ndarray | None = None, *, wave_width: int | None = None,
                   target: str | None = None) -> np.ndarray:
    """5x5 convolution (default: :func:`gaussian_kernel5` with sigma 1) of a 2-D float32 image,
    clamp-to-edge; returns float32 of the same shape."""
    a = _image(img)
    w = gaussian_kernel5() if weights is None else as_f32(weights, "weights", 2)
    if w.shape != (5, 5):
        raise KernelInputError(f"gaussian_blur5: weights must be (5, 5), got {w.shape}")
    h, wd = a.shape
    out = np.empty_like(a)
    gaussian5_kernel(a, np.ascontiguousarray(w.ravel()), out, h, wd, grid=(ceil_div(wd, TILE), ceil_div(h, TILE)),
                     workgroup=(TILE, TILE), **launch_kw(wave_width, target))
    return out


def sobel_magnitude(img: np.ndarray, *, wave_width: int | None = None, target: str | None = None) -> np.ndarray:
    """Sobel gradient magnitude ``sqrt(gx^2 + gy^2)`` of a 2-D float32 image, clamp-to-edge."""
    a = _image(img)
    h, wd = a.shape
    out = np.empty_like(a)
    sobel_kernel(a, out, h, wd, grid=(ceil_div(wd, TILE), ceil_div(h, TILE)), workgroup=(TILE, TILE),
                 **launch_kw(wave_width, target))
    return out
