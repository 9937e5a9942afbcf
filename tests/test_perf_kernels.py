"""The register-tiled GEMM and the 128-bit memory-bound kernels (issue 14): bit for bit against
their sequential-order NumPy references at W = 8..64, every tile config with the same bits, and
on the OpenCL CPU runtime (and SYCL in the slow tier). Speed is measured in bench/bench_speed.py."""

from __future__ import annotations

import numpy as np
import pytest

from anywave.kernels import elementwise as E
from anywave.kernels import gemm as G
from anywave.kernels import reference as R
from anywave.kernels import vec as V

WS = (8, 16, 32, 64)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _mats(seed: int, m: int, n: int, k: int):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32),
            rng.standard_normal(n, dtype=np.float32))


@pytest.mark.parametrize("W", WS)
def test_gemm_is_the_sequential_fma_order(W: int) -> None:
    ep = G.EPILOGUES[WS.index(W) % 3]  # none, bias, bias_relu (gelu below)
    a, b, bias = _mats(W, 128, 128, 24)
    c = G.gemm(a, b, None if ep == "none" else bias, epilogue=ep, wave_width=W)
    ref = R.matmul_f32(a, b, None if ep == "none" else bias, relu=ep == "bias_relu")
    assert _same(c, ref)


def test_every_tile_config_gives_the_same_bits() -> None:
    a, b, bias = _mats(1, 128, 128, 32)
    outs = [G.gemm(a, b, bias, epilogue="bias_relu", config=cfg, wave_width=16) for cfg in G.CONFIGS]
    ref = R.matmul_f32(a, b, bias, relu=True)
    for cfg, c in zip(G.CONFIGS, outs, strict=True):
        assert _same(c, ref), cfg


def test_the_library_matmul_takes_the_tiled_gemm_where_it_fits(monkeypatch) -> None:
    # anywave.kernels.matmul (gemm.matmul): the FAST register-tiled kernel on a shape it fits,
    # the 16 x 16 kernel of linalg otherwise; the reference's bits either way
    import anywave.kernels as K
    from anywave.kernels import linalg

    calls = []
    real = G.gemm
    monkeypatch.setattr(G, "gemm", lambda *a, **kw: calls.append(kw.get("config")) or real(*a, **kw))
    for (m, n, k), tiled in (((128, 128, 16), True), ((5, 7, 3), False)):
        a, b, bias = _mats(m + n + k, m, n, k)
        calls.clear()
        c = K.matmul(a, b, bias, relu=True, wave_width=16)
        assert calls == ([G.FAST] if tiled else [])
        assert _same(c, R.matmul_f32(a, b, bias, relu=True))
        assert _same(linalg.matmul(a, b, bias, relu=True, wave_width=16), c)


def test_gemm_gelu_epilogue_is_gelu_of_the_biased_product() -> None:
    a, b, bias = _mats(2, 128, 128, 8)
    c = G.gemm(a, b, bias, epilogue="bias_gelu", wave_width=32)
    assert _same(c, E.gelu(R.matmul_f32(a, b, bias), wave_width=32))
    g_ref, tol = R.gelu_f32(R.matmul_f32(a, b, bias))
    assert np.all(np.abs(c.astype(np.float64) - g_ref) <= tol)


def test_gemm_keeps_negative_zero_sums() -> None:
    # every product rounds to -0.0: padding K with fma(0, 0, acc) would turn them into +0.0
    a = np.full((128, 8), -1e-30, np.float32)
    b = np.full((8, 128), 1e-30, np.float32)
    c = G.gemm(a, b, wave_width=8)
    assert _same(c, R.matmul_f32(a, b)) and np.all(np.signbit(c))


def test_gemm_falls_back_for_shapes_off_the_tile_grid() -> None:
    a, b, bias = _mats(3, 40, 24, 12)
    assert not G.fits(40, 24, 12)
    assert _same(G.gemm(a, b, bias, epilogue="bias_relu", wave_width=16), R.matmul_f32(a, b, bias, relu=True))


def test_gemm_input_errors() -> None:
    from anywave.kernels._launch import KernelInputError

    a, b, bias = _mats(4, 128, 128, 8)
    with pytest.raises(KernelInputError, match="need b.shape"):
        G.gemm(a, b[:4])
    with pytest.raises(KernelInputError, match="epilogue 'swish'"):
        G.gemm(a, b, bias, epilogue="swish")
    with pytest.raises(KernelInputError, match="needs a bias"):
        G.gemm(a, b, epilogue="bias_gelu")


@pytest.mark.parametrize("W", WS)
def test_vector_elementwise_kernels(W: int) -> None:
    rng = np.random.default_rng(20 + W)
    n = 4 * 256 * 2 + 5  # a tail past the last quad
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    assert _same(V.add4(x, y, per=1 + W % 3, wave_width=W), x + y)
    assert _same(V.saxpy4(0.7, x, y, wave_width=W), (np.float32(0.7) * x + y).astype(np.float32))
    assert _same(V.gelu4(x[:1029], wave_width=W), E.gelu(x[:1029], wave_width=W))


@pytest.mark.parametrize("W", WS)
def test_sum4_order(W: int) -> None:
    x = np.random.default_rng(30 + W).standard_normal(4 * 256 * 5 + 3, dtype=np.float32)
    s = V.sum4(x, workgroups=3, wave_width=W)
    assert _same(s, R.sum4_f32(x, 3))
    assert abs(float(s) - float(x.astype(np.float64).sum())) < 1e-3


@pytest.mark.parametrize("W", WS)
def test_row_kernels(W: int) -> None:
    rng = np.random.default_rng(40 + W)
    x = rng.standard_normal((3, 2048), dtype=np.float32) * 3
    gm = rng.standard_normal(2048, dtype=np.float32)
    bt = rng.standard_normal(2048, dtype=np.float32)
    block, vecs = V.row_shape(2048)
    assert (block, vecs) == (256, 2)
    assert _same(V.layer_norm4(x, gm, bt, wave_width=W), R.layer_norm4_f32(x, gm, bt, 1e-5, block))
    sm = V.softmax4(x, wave_width=W)
    ref = R.softmax4_f32(x, block)
    assert np.abs(sm.view(np.int32) - ref.view(np.int32)).max() <= 4  # exp within 2 ulp
    assert _same(sm, V.softmax4(x, wave_width=8))  # the same bits at every W


def test_row_kernels_refuse_other_widths() -> None:
    from anywave.kernels._launch import KernelInputError

    with pytest.raises(KernelInputError, match="1000 columns"):
        V.softmax4(np.zeros((2, 1000), np.float32))


@pytest.mark.parametrize("target", ["opencl", pytest.param("sycl", marks=pytest.mark.slow)])  # SYCL JIT: slow tier
def test_kernels_on_cpu_runtimes(target: str) -> None:
    import anywave as aw

    if target not in aw.available_targets():
        pytest.skip(f"target {target} is not available here")
    a, b, bias = _mats(5, 128, 128, 16)
    assert _same(G.gemm(a, b, bias, epilogue="bias_relu", target=target), R.matmul_f32(a, b, bias, relu=True))
    rng = np.random.default_rng(6)
    x = rng.standard_normal(4 * 256 + 3, dtype=np.float32)
    y = rng.standard_normal(4 * 256 + 3, dtype=np.float32)
    assert _same(V.add4(x, y, target=target), x + y)
    xr = rng.standard_normal((2, 1024), dtype=np.float32)
    gm, bt = np.ones(1024, np.float32), np.zeros(1024, np.float32)
    assert _same(V.layer_norm4(xr, gm, bt, target=target), R.layer_norm4_f32(xr, gm, bt, 1e-5, 256))
    assert _same(V.softmax4(xr, target=target), V.softmax4(xr))

