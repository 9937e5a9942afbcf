"""The example kernel library (anywave.kernels) on the emulator at every wave width, checked
against independent NumPy references (anywave.kernels.reference) that redo each kernel's
arithmetic in float32 in the kernel's order — bit for bit unless stated otherwise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import anywave.kernels as K
from anywave.kernels import reference as R
from anywave.kernels._launch import KernelInputError
from anywave.kernels.linalg import row_block

WIDTHS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "aw-cache"))


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- the reference's fma

def _round_f32(q: Fraction) -> np.float32:
    """Correct rounding of an exact rational to float32 (nearest, ties to even), by comparing
    the exact distances to the neighbouring float32 values."""
    f = np.float32(float(q))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))
    return np.float32(best)


def test_reference_fma_is_correctly_rounded():
    g = rng(11)
    a = (g.standard_normal(600) * np.exp2(g.integers(-20, 20, 600))).astype(np.float32)
    b = g.standard_normal(600).astype(np.float32)
    c = g.standard_normal(600).astype(np.float32)
    c[:200] = -(a[:200] * b[:200])  # heavy cancellation: the product's rounding error survives
    c[200:300] = np.float32(1.0)
    got = R.fma_f32(a, b, c)
    for i in range(len(a)):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert got[i].view(np.uint32) == _round_f32(exact).view(np.uint32), (a[i], b[i], c[i])


# ----------------------------------------------------------------------------- element-wise

@pytest.mark.parametrize("W", WIDTHS)
def test_vector_add_saxpy_relu(W):
    g = rng(1)
    n = 1000
    x = g.standard_normal(n).astype(np.float32)
    y = g.standard_normal(n).astype(np.float32)
    x[:4] = [0.0, -0.0, np.inf, -3.0]
    assert bits_equal(K.vector_add(x, y, wave_width=W), x + y)
    a = np.float32(-1.75)
    assert bits_equal(K.saxpy(a, x, y, wave_width=W), (a * x) + y)  # product rounded, then the add
    r = K.relu(x, wave_width=W)
    assert bits_equal(r, np.where(x > 0, x, np.float32(0)))
    assert r[1].view(np.uint32) == 0  # relu(-0.0) is +0.0


@pytest.mark.parametrize("W", WIDTHS)
def test_gelu_within_its_bound(W):
    # Not bit-exact against NumPy (the kernel's exp is within 2 ulp of exp); the reference and the
    # bound are those of reference.gelu_f32: x / (1 + exp(-2u)) in float64 from the kernel's f32 u.
    x = np.concatenate([np.linspace(-12, 12, 2401), [0.0, -0.0, 1e-20, -1e-20, 1e-40, 20.0, -20.0, 1e30, -1e30,
                                                     np.inf, -np.inf]]).astype(np.float32)
    got = K.gelu(x, wave_width=W)
    ref, tol = R.gelu_f32(x)
    fin = np.isfinite(x)
    err = np.abs(got[fin].astype(np.float64) - ref[fin])
    assert np.all(err <= tol[fin]), float((err - tol[fin]).max())
    # gelu(+inf) = inf; gelu(-inf) is -inf * 0 in the tanh form (NaN, as torch's tanh GELU gives)
    assert got[x == np.inf][0] == np.inf and np.isnan(got[x == -np.inf][0])
    assert np.isnan(K.gelu(np.array([np.nan], np.float32), wave_width=W)[0])
    # and against the tanh form of the approximation (Hendrycks & Gimpel eq. 2), all in float64
    x64 = x[fin].astype(np.float64)
    exact = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    assert np.all(np.abs(got[fin] - exact) <= 1e-6 * np.maximum(1.0, np.abs(exact)))


def test_gelu_identical_bits_across_widths():
    x = rng(2).standard_normal(500).astype(np.float32) * 4
    outs = [K.gelu(x, wave_width=W) for W in WIDTHS]
    assert all(bits_equal(o, outs[0]) for o in outs)


# ----------------------------------------------------------------------------- reductions and scans

@pytest.mark.parametrize("W", WIDTHS)
def test_sum_reduction_wave_ops(W):
    # W-dependent order by design (butterfly per wave): bit-exact against the simulation at
    # this W, and close to the exact sum.
    x = rng(3).standard_normal(70_000).astype(np.float32)
    got = K.sum_f32(x, wave_width=W)
    assert got.view(np.uint32) == R.sum_f32(x, W).view(np.uint32)
    assert abs(float(got) - float(x.astype(np.float64).sum())) < 1e-2
    assert K.sum_f32(np.ones(3, np.float32), wave_width=W) == 3.0


@pytest.mark.parametrize("W", WIDTHS)
def test_prefix_sum_multi_workgroup(W):
    g = rng(4)
    for n in (1, 255, 256, 257, 70_000):  # 70,000 = 274 workgroups: two levels of block sums
        x = g.integers(0, 2**32, n, dtype=np.uint32)
        assert np.array_equal(K.prefix_sum(x, wave_width=W), R.prefix_sum_u32(x)), n


@pytest.mark.parametrize("W", WIDTHS)
def test_histogram_atomics(W):
    g = rng(5)
    x = g.integers(0, 256, 20_000).astype(np.uint8)
    assert np.array_equal(K.histogram(x, wave_width=W), np.bincount(x, minlength=256).astype(np.uint32))
    y = g.integers(0, 2**32, 5000, dtype=np.uint32)
    assert np.array_equal(K.histogram(y, 10, workgroups=3, wave_width=W),
                          np.bincount(y % 10, minlength=10).astype(np.uint32))


# ----------------------------------------------------------------------------- linear algebra

@pytest.mark.parametrize("W", WIDTHS)
def test_transpose_padded_tiles(W):
    a = rng(6).standard_normal((37, 50)).astype(np.float32)
    assert bits_equal(K.transpose(a, wave_width=W), np.ascontiguousarray(a.T))


@pytest.mark.parametrize("W", WIDTHS)
def test_tiled_matmul_fma_order(W):
    g = rng(7)
    a = g.standard_normal((35, 41)).astype(np.float32)
    b = g.standard_normal((41, 19)).astype(np.float32)
    bias = g.standard_normal(19).astype(np.float32)
    assert bits_equal(K.matmul(a, b, wave_width=W), R.matmul_f32(a, b))
    got = K.matmul(a, b, bias, relu=True, wave_width=W)
    assert bits_equal(got, R.matmul_f32(a, b, bias, relu=True))
    assert 0 < np.count_nonzero(got) < got.size
    assert np.abs(K.matmul(a, b, wave_width=W) - a.astype(np.float64) @ b).max() < 1e-4


@pytest.mark.parametrize("W", WIDTHS)
def test_softmax_rows(W):
    # exp is within 2 ulp (not correctly rounded), so the check against a correctly rounded
    # exp in the same order allows 6 ulp of the result: 2 (exp) + 2 (the sum of
    # same-signed terms inherits at most the terms' relative error) + 1 (division) + slack.
    g = rng(8)
    for shape in ((7, 10), (5, 300)):
        x = (g.standard_normal(shape) * 5).astype(np.float32)
        got = K.softmax_rows(x, wave_width=W)
        ref = R.softmax_f32(x, row_block(shape[1]))
        assert np.all(np.abs(got - ref) <= 6 * np.spacing(ref)), shape
        assert np.allclose(got.sum(axis=1), 1, atol=1e-5)
    assert all(bits_equal(K.softmax_rows(x, wave_width=w), got) for w in (8, 64))  # same bits at every W


@pytest.mark.parametrize("W", WIDTHS)
def test_layer_norm_exact(W):
    g = rng(9)
    for shape in ((6, 10), (3, 333)):
        x = (g.standard_normal(shape) * 3 + 1).astype(np.float32)
        gamma = g.standard_normal(shape[1]).astype(np.float32)
        beta = g.standard_normal(shape[1]).astype(np.float32)
        got = K.layer_norm(x, gamma, beta, 1e-5, wave_width=W)
        assert bits_equal(got, R.layer_norm_f32(x, gamma, beta, 1e-5, row_block(shape[1]))), shape
        xd = x.astype(np.float64)
        exact = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * gamma + beta
        assert np.abs(got - exact).max() < 1e-4


# ----------------------------------------------------------------------------- image stencils

@pytest.mark.parametrize("W", WIDTHS)
def test_gaussian_blur_and_sobel(W):
    img = rng(10).uniform(0, 255, (37, 45)).astype(np.float32)
    w = K.gaussian_kernel5(1.2)
    blurred = K.gaussian_blur5(img, w, wave_width=W)
    assert bits_equal(blurred, R.gaussian5_f32(img, w))
    edges = K.sobel_magnitude(blurred, wave_width=W)
    assert bits_equal(edges, R.sobel_f32(blurred))
    # clamp-to-edge: a constant image blurs to itself (within the weights' rounding) and has no edges
    flat = np.full((20, 20), 7.0, np.float32)
    assert np.allclose(K.gaussian_blur5(flat, wave_width=W), 7.0, rtol=1e-6)
    assert not K.sobel_magnitude(flat, wave_width=W).any()


# ----------------------------------------------------------------------------- sort

@pytest.mark.parametrize("W", WIDTHS)
def test_bitonic_sort(W):
    g = rng(12)
    x = g.standard_normal(1000).astype(np.float32)  # padded to 1024: 4 blocks of 256, device passes
    x[:3] = [np.inf, -np.inf, 0.5]
    assert bits_equal(K.bitonic_sort(x, wave_width=W), np.sort(x))
    y = g.integers(-5, 5, 100).astype(np.float32)  # duplicates; block 16 → 8 blocks
    assert bits_equal(K.bitonic_sort(y, block=16, wave_width=W), np.sort(y))


# ----------------------------------------------------------------------------- errors

def test_bad_inputs_raise_wave_errors():
    with pytest.raises(KernelInputError, match="NaN"):
        K.bitonic_sort(np.array([1.0, np.nan], np.float32))
    with pytest.raises(KernelInputError, match="power of two"):
        K.bitonic_sort(np.ones(4, np.float32), block=24)
    with pytest.raises(KernelInputError, match="b.shape"):
        K.matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(KernelInputError, match="uint32"):
        K.prefix_sum(np.ones(3, np.int64))
    with pytest.raises(KernelInputError, match="bins"):
        K.histogram(np.ones(3, np.uint32), bins=0)
