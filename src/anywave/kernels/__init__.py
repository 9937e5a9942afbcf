"""A library of example kernels written in the anywave kernel language, with host wrappers.

Every kernel is an ordinary ``@aw.kernel``; the wrappers (plain Python functions taking and
returning NumPy arrays) pick the launch geometry, chain multi-pass algorithms and accept
``wave_width=`` and ``target=``. The modules:

* :mod:`~anywave.kernels.elementwise` — vector add, saxpy, ReLU, GELU;
* :mod:`~anywave.kernels.scan` — sum reduction (wave ops + local memory), prefix sum
  (multi-workgroup), histogram (local + device atomics);
* :mod:`~anywave.kernels.linalg` — matrix transpose (padded local tiles), tiled matmul
  (with bias/ReLU epilogue), row softmax, layer norm; ``matmul`` is
  :func:`anywave.kernels.gemm.matmul`, which takes the register-tiled GEMM where it fits;
* :mod:`~anywave.kernels.image` — 5x5 Gaussian blur and Sobel edge magnitude
  (clamp-to-edge borders);
* :mod:`~anywave.kernels.sort` — bitonic sort (local memory within a workgroup, device
  passes across workgroups);
* :mod:`~anywave.kernels.attention` — exact attention forward, decode and backward
  (docs/spec.md §8.17: batch-invariant, the same bits on every target);
* :mod:`~anywave.kernels.reference` — independent NumPy references that reproduce each
  kernel's arithmetic order in float32 (used by the tests and ``anywave demo``).

Determinism: every kernel here gives the same bits at every wave width and on every target
(each is recorded W-invariant in its kernel table; :func:`~anywave.kernels.scan.sum_f32` uses
the W-invariant ``aw.workgroup_reduce`` tree, docs/spec.md §8.15).
"""

from __future__ import annotations

from .elementwise import gelu, relu, saxpy, vector_add
from .gemm import matmul
from .image import gaussian_blur5, gaussian_kernel5, sobel_magnitude
from .linalg import layer_norm, softmax_rows, transpose
from .scan import histogram, prefix_sum, sum_f32
from .sort import bitonic_sort

__all__ = [
    "bitonic_sort", "gaussian_blur5", "gaussian_kernel5", "gelu", "histogram", "layer_norm", "matmul",
    "prefix_sum", "relu", "saxpy", "sobel_magnitude", "softmax_rows", "sum_f32", "transpose", "vector_add",
]
