"""Run every example kernel of :mod:`anywave.kernels` once and check it against NumPy.

Usage: python examples/tour.py [--wave-width W] [--target NAME]
"""

from __future__ import annotations

import argparse

import numpy as np

import anywave.kernels as K
from anywave.kernels import reference as R
from anywave.kernels.linalg import row_block


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wave-width", type=int, default=32, choices=(8, 16, 32, 64))
    ap.add_argument("--target", default=None)
    a = ap.parse_args()
    kw = {"wave_width": a.wave_width, "target": a.target}
    g = np.random.default_rng(0)
    x = g.standard_normal(5000).astype(np.float32)
    y = g.standard_normal(5000).astype(np.float32)
    m = g.standard_normal((40, 70)).astype(np.float32)
    b = g.standard_normal((70, 24)).astype(np.float32)
    img = g.uniform(0, 255, (60, 80)).astype(np.float32)
    u = g.integers(0, 2**32, 5000, dtype=np.uint32)
    ones, zeros = np.ones(70, np.float32), np.zeros(70, np.float32)
    checks = {
        "vector_add": np.array_equal(K.vector_add(x, y, **kw), x + y),
        "saxpy": np.array_equal(K.saxpy(2.5, x, y, **kw), np.float32(2.5) * x + y),
        "relu": np.array_equal(K.relu(x, **kw), np.where(x > 0, x, np.float32(0))),
        "gelu": np.allclose(K.gelu(x, **kw), R.gelu_f32(x)[0], rtol=1e-6, atol=1e-7),
        "sum_f32": K.sum_f32(x, **kw) == R.sum_f32(x, a.wave_width),
        "prefix_sum": np.array_equal(K.prefix_sum(u, **kw), R.prefix_sum_u32(u)),
        "histogram": np.array_equal(K.histogram(u, 32, **kw), np.bincount(u % 32, minlength=32)),
        "transpose": np.array_equal(K.transpose(m, **kw), m.T),
        "matmul": np.array_equal(K.matmul(m, b, **kw), R.matmul_f32(m, b)),
        "softmax_rows": np.allclose(K.softmax_rows(m, **kw), R.softmax_f32(m, row_block(70)), rtol=1e-6),
        "layer_norm": np.array_equal(K.layer_norm(m, ones, zeros, **kw),
                                     R.layer_norm_f32(m, ones, zeros, 1e-5, row_block(70))),
        "gaussian_blur5": np.array_equal(K.gaussian_blur5(img, **kw), R.gaussian5_f32(img, K.gaussian_kernel5())),
        "sobel_magnitude": np.array_equal(K.sobel_magnitude(img, **kw), R.sobel_f32(img)),
        "bitonic_sort": np.array_equal(K.bitonic_sort(x, **kw), np.sort(x)),
    }
    for name, ok in checks.items():
        print(f"{name:<16} {'ok' if ok else 'MISMATCH'}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
