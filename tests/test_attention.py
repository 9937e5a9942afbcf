"""Exact attention (src/anywave/kernels/attention.py, docs/spec.md §8.17): forward, decode and
backward against a float64 NumPy reference within the spec's error bound, the same bits at every
W and on OpenCL, SYCL and Vulkan (lavapipe) as on the emulator, and batch invariance (a row's bits
do not depend on the other rows of the batch).

Shapes are small (the emulator runs every thread): sequence lengths that are not multiples of the
64-key block, GQA, causal with Sq < Sk and Sq > Sk (fully masked rows), head dims 32, 64, 128, 256.
"""

from __future__ import annotations

import numpy as np
import pytest

import tiers
from anywave.kernels import attention as A
from anywave.kernels._launch import KernelInputError

U = 2.0**-24
WS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _no_wall_clock_budget(monkeypatch):
    # the emulator's loop budget is wall-clock time; these walks are long on a loaded machine, and a
    # test must not depend on the machine's speed (an endless loop would still hang visibly)
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "none")


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x, np.float32).tobytes()


def data(b, hq, hkv, sq, sk, d, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, hq, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    return q, k, v


def visible(sq: int, sk: int, causal: bool) -> np.ndarray:
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    return (j <= i + (sk - sq)) if causal else np.ones((sq, sk), bool)


def ref_forward(q, k, v, causal, scale):
    """float64 attention (SDPA's formula with the §8.17 mask) and the forward error bound of
    §8.17: per element u (4 (D + 2) S + 2 n + 12 nb + 16) max|v| and per row
    u (3 (D + 2) S + n + 12 nb + 16 + 2 |LSE|), S the largest scale * sum_d |q_d k_d| over the
    row's n visible keys, nb = ceil(n / 64) blocks."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    d = q.shape[-1]
    vis = visible(q.shape[2], k.shape[2], causal)
    s = np.where(vis, np.einsum("bhid,bhjd->bhij", q, k) * scale, -np.inf)
    n = vis.sum(-1)  # (Sq,)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = s.max(-1, keepdims=True)
        p = np.where(vis, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
        lsum = p.sum(-1, keepdims=True)
        o = np.where(lsum > 0, np.einsum("bhij,bhjd->bhid", p, v) / np.where(lsum > 0, lsum, 1), 0.0)
        lse = np.where(lsum[..., 0] > 0, m[..., 0] + np.log(lsum[..., 0]), -np.inf)
    smag = np.where(vis, np.einsum("bhid,bhjd->bhij", np.abs(q), np.abs(k)) * scale, 0).max(-1)
    vmax = np.where(vis[None, None, :, :, None], np.abs(v)[:, :, None], 0).max(3)  # (B, H, Sq, D)
    nb = np.ceil(n / A.BC)
    bo = U * (4 * (d + 2) * smag + 2 * n + 12 * nb + 16)[..., None] * vmax
    with np.errstate(invalid="ignore"):
        bl = U * (3 * (d + 2) * smag + n + 12 * nb + 16 + 2 * np.where(np.isfinite(lse), np.abs(lse), 0))
    return o, lse, bo, bl


def ref_backward(q, k, v, do, causal, scale, bound_o):
    """float64 gradients of attention and the componentwise bound of §8.17 "Backward" (each
    error term of P, dP, Delta, dS carried through the sums; ``bound_o`` the forward bound of
    the stored O)."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    rep = hq // hkv
    kr, vr = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    vis = visible(sq, sk, causal)
    n = vis.sum(-1)
    s = np.where(vis, np.einsum("bhid,bhjd->bhij", q, kr) * scale, -np.inf)
    with np.errstate(invalid="ignore"):
        m = s.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
    p = np.where(vis, np.exp(s - m), 0.0)
    ls = p.sum(-1, keepdims=True)
    p = np.where(ls > 0, p / np.where(ls > 0, ls, 1), 0.0)
    o = np.einsum("bhij,bhjd->bhid", p, vr)
    dp = np.einsum("bhid,bhjd->bhij", do, vr)
    delta = (do * o).sum(-1, keepdims=True)
    ds = p * (dp - delta)
    dq = np.einsum("bhij,bhjd->bhid", ds, kr) * scale
    dk = (np.einsum("bhij,bhid->bhjd", ds, q) * scale).reshape(b, hkv, rep, sk, d).sum(2)
    dv = np.einsum("bhij,bhid->bhjd", p, do).reshape(b, hkv, rep, sk, d).sum(2)
    # bounds
    smag = np.where(vis, np.einsum("bhid,bhjd->bhij", np.abs(q), np.abs(kr)) * scale, 0).max(-1)
    nb = np.ceil(n / A.BC)
    eps_p = (U * (3 * (d + 2) * smag + n + 12 * nb + 24))[..., None]  # relative, plus u absolute
    dp_abs = np.einsum("bhid,bhjd->bhij", np.abs(do), np.abs(vr))
    e_p = np.where(vis, eps_p * p + U, 0)
    e_delta = (d + 1) * U * (np.abs(do) * np.abs(o)).sum(-1, keepdims=True) + (np.abs(do) * bound_o).sum(
        -1, keepdims=True)
    e_ds = np.where(vis, e_p * np.abs(dp - delta) + p * (d * U * dp_abs + e_delta) + U * np.abs(ds), 0)
    nq = rep * sq
    b_dq = scale * (np.einsum("bhij,bhjd->bhid", e_ds, np.abs(kr))
                    + (n + 1)[:, None] * U * np.einsum("bhij,bhjd->bhid", np.abs(ds), np.abs(kr)))
    b_dk = scale * (np.einsum("bhij,bhid->bhjd", e_ds, np.abs(q))
                    + (nq + 1) * U * np.einsum("bhij,bhid->bhjd", np.abs(ds), np.abs(q)))
    b_dk = b_dk.reshape(b, hkv, rep, sk, d).sum(2) + U * np.abs(dk)
    b_dv = (np.einsum("bhij,bhid->bhjd", e_p, np.abs(do))
            + (nq + 1) * U * np.einsum("bhij,bhid->bhjd", p, np.abs(do))).reshape(b, hkv, rep, sk, d).sum(2)
    return (dq, dk, dv), (b_dq + U * np.abs(dq), b_dk, b_dv)


def assert_within(got, want, bound, what):
    err = np.abs(got.astype(np.float64) - want)
    same_inf = np.isinf(want) & (got == want)
    bad = ~((err <= bound) | same_inf)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} outside the bound; worst excess "
                           f"{np.max(np.where(bad, err - bound, 0)):.3g}")


# ----------------------------------------------------------------------------- forward accuracy

FWD_CASES = [  # (B, Hq, Hkv, Sq, Sk, D, causal)
    (1, 2, 2, 70, 130, 64, False),
    (1, 2, 1, 70, 130, 64, True),   # GQA, Sq < Sk (the causal diagonal offset by Sk - Sq)
    (2, 1, 1, 65, 65, 32, True),
    (1, 2, 1, 33, 100, 128, False),
    (1, 1, 1, 20, 70, 256, True),
    (1, 2, 1, 17, 80, 96, True),    # D = 96: column slices of 48
]


@pytest.mark.parametrize("case", FWD_CASES, ids=lambda c: "B{}Hq{}Hkv{}Sq{}Sk{}D{}{}".format(*c[:6], "c" * c[6]))
def test_forward_is_within_the_bound_of_float64(case):
    b, hq, hkv, sq, sk, d, causal = case
    q, k, v = data(b, hq, hkv, sq, sk, d, seed=sq + sk + d)
    o, lse = A.attention(q, k, v, causal)
    ro, rl, bo, bl = ref_forward(q, k, v, causal, A.default_scale(d))
    assert o.shape == q.shape and lse.shape == q.shape[:3] and o.dtype == lse.dtype == np.float32
    assert_within(o, ro, bo, "O")
    assert_within(lse, rl, bl, "LSE")


def test_fully_masked_rows_are_zero_with_lse_minus_inf():
    # causal with Sq > Sk: rows i < Sq - Sk see no key
    q, k, v = data(1, 1, 1, 50, 20, 32, seed=3)
    o, lse = A.attention(q, k, v, True)
    assert (o[0, 0, :30] == 0).all() and np.isneginf(lse[0, 0, :30]).all()
    ro, rl, bo, bl = ref_forward(q, k, v, True, A.default_scale(32))
    assert_within(o[0, 0, 30:], ro[0, 0, 30:], bo[0, 0, 30:], "O")
    dq, dk, dv = A.attention_backward(q, k, v, o, lse, np.ones_like(o), None, True)
    assert (dq[0, 0, :30] == 0).all() and np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()


def test_a_large_score_spread_stays_within_the_bound():
    # scores of very different sizes across blocks: the running max grows block by block and the
    # rescale alpha is far from 1
    q, k, v = data(1, 1, 1, 9, 200, 32, seed=4)
    k = (k * np.linspace(0.1, 6.0, 200, dtype=np.float32)[None, None, :, None]).astype(np.float32)
    o, lse = A.attention(q, k, v, False, scale=0.7)
    ro, rl, bo, bl = ref_forward(q, k, v, False, np.float32(0.7))
    assert_within(o, ro, bo, "O")
    assert_within(lse, rl, bl, "LSE")


def test_half_inputs_are_converted_exactly():
    ml = pytest.importorskip("ml_dtypes")
    q, k, v = data(1, 1, 1, 10, 70, 32, seed=5)
    qb, kb, vb = (x.astype(ml.bfloat16) for x in (q, k, v))
    o16, l16 = A.attention(qb, kb, vb, True)
    o32, l32 = A.attention(*(x.astype(np.float32) for x in (qb, kb, vb)), True)
    assert bits(o16) == bits(o32) and bits(l16) == bits(l32)


# ----------------------------------------------------------------------------- W and targets

def test_forward_decode_and_backward_at_w_16_and_64_are_the_w_8_bits():
    # the fast tier's W check (tests/test_attention_bits.py compares W = 8 and 32 with the reference)
    q, k, v = data(1, 2, 1, 9, 70, 8, seed=6)
    do = data(1, 2, 1, 9, 1, 8, seed=7)[0]
    want = None
    for W in (8, 16, 64):
        o, lse = A.attention(q, k, v, True, wave_width=W)
        od, ld = A.attention_decode(q, k, v, True, chunk=64, wave_width=W)
        grads = A.attention_backward(q, k, v, o, lse, do, None, True, wave_width=W)
        got = [bits(x) for x in (o, lse, od, ld, *grads)]
        if want is None:
            want = got
        assert got == want, f"W={W} differs from W=8"


@pytest.mark.slow
def test_forward_decode_and_backward_are_the_same_bits_at_every_w():
    q, k, v = data(1, 2, 1, 40, 140, 32, seed=6)
    do = data(1, 2, 1, 40, 1, 32, seed=7)[0]
    want = None
    for W in WS:
        o, lse = A.attention(q, k, v, True, wave_width=W)
        od, ld = A.attention_decode(q, k, v, True, chunk=64, wave_width=W)
        grads = A.attention_backward(q, k, v, o, lse, do, None, True, wave_width=W)
        got = [bits(x) for x in (o, lse, od, ld, *grads)]
        if want is None:
            want = got
        assert got == want, f"W={W} differs from W={WS[0]}"


def _need(target: str) -> None:
    from anywave.runtime.targets import available_targets

    st = next(s for s in available_targets() if s.name == target)
    if not st.available:
        pytest.skip(f"{target} unavailable: {st.reason}")


_EMU: dict = {}


def _emulator_results():
    if not _EMU:
        q, k, v = data(2, 2, 1, 40, 140, 32, seed=8)
        do = data(2, 2, 1, 40, 1, 32, seed=9)[0]
        o, lse = A.attention(q, k, v, True, wave_width=16)
        od, ld = A.attention_decode(q[:, :, :3], k, v, False, chunk=64, wave_width=64)
        grads = A.attention_backward(q, k, v, o, lse, do, None, True, wave_width=8)
        _EMU.update(inputs=(q, k, v, do), out=[bits(x) for x in (o, lse, od, ld, *grads)])
    return _EMU


def _target_case(target: str, W: int | None) -> None:
    _need(target)
    emu = _emulator_results()
    q, k, v, do = emu["inputs"]
    o, lse = A.attention(q, k, v, True, target=target, wave_width=W)
    od, ld = A.attention_decode(q[:, :, :3], k, v, False, chunk=64, target=target, wave_width=W)
    grads = A.attention_backward(q, k, v, o, lse, do, None, True, target=target, wave_width=W)
    names = ("O", "LSE", "decode O", "decode LSE", "dQ", "dK", "dV")
    for name, got, want in zip(names, [bits(x) for x in (o, lse, od, ld, *grads)], emu["out"], strict=True):
        assert got == want, f"{target} W={W}: {name} differs from the emulator"


@pytest.mark.opencl
@pytest.mark.parametrize("W", tiers.widths("opencl", (8, 16, 64)))
def test_opencl_is_the_emulator_bits(W):
    _target_case("opencl", W)


# slow tier: 23 s of the SYCL runtime compiler (2-core host, cold cache); the same C-family
# translation of these kernels runs on OpenCL (the same Intel CPU compiler) in the default tier,
# and SYCL's own spellings of the fragment instructions in test_mma_fragments and conformance
@pytest.mark.sycl
@pytest.mark.slow
def test_sycl_is_the_emulator_bits():
    _target_case("sycl", 32)


@pytest.mark.vulkan
def test_vulkan_is_the_emulator_bits():
    _target_case("vulkan", None)


@pytest.mark.cuda
def test_cuda_is_the_emulator_bits():
    _target_case("cuda", None)


@pytest.mark.opencl
@pytest.mark.parametrize("d", [64, 128])
def test_opencl_head_dims_are_the_emulator_bits(d):
    _need("opencl")
    q, k, v = data(1, 2, 1, 33, 90, d, seed=d)
    want = A.attention(q, k, v, True, wave_width=32)
    got = A.attention(q, k, v, True, target="opencl")
    assert [bits(x) for x in got] == [bits(x) for x in want]


# ----------------------------------------------------------------------------- batch invariance

TARGETS = ["emulator", pytest.param("opencl", marks=pytest.mark.opencl),
               pytest.param("sycl", marks=pytest.mark.sycl), pytest.param("vulkan", marks=pytest.mark.vulkan),
               pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.mark.parametrize("target", TARGETS)
def test_a_row_has_the_same_bits_alone_and_in_a_batch_of_8(target):
    if target != "emulator":
        _need(target)
    q, k, v = data(8, 2, 1, 24, 90, 32, seed=10)  # the other 7 sequences random
    o8, l8 = A.attention(q, k, v, True, target=target)
    for bi in (0, 5):
        o1, l1 = A.attention(q[bi:bi + 1], k[bi:bi + 1], v[bi:bi + 1], True, target=target)
        assert bits(o1) == bits(o8[bi:bi + 1]) and bits(l1) == bits(l8[bi:bi + 1]), f"{target} sequence {bi}"


@pytest.mark.parametrize("target", TARGETS)
def test_decode_rows_have_the_same_bits_for_1_and_16_sequences(target):
    if target != "emulator":
        _need(target)
    q, k, v = data(16, 2, 2, 1, 150, 32, seed=11)
    o16, l16 = A.attention_decode(q, k, v, chunk=64, target=target)
    for bi in (0, 11):
        o1, l1 = A.attention_decode(q[bi:bi + 1], k[bi:bi + 1], v[bi:bi + 1], chunk=64, target=target)
        assert bits(o1) == bits(o16[bi:bi + 1]) and bits(l1) == bits(l16[bi:bi + 1]), f"{target} sequence {bi}"


# ----------------------------------------------------------------------------- decode

def test_decode_is_the_forward_bits_when_one_chunk_holds_every_key():
    q, k, v = data(1, 2, 1, 3, 120, 64, seed=12)
    assert [bits(x) for x in A.attention_decode(q, k, v, True, chunk=128)] == \
        [bits(x) for x in A.attention(q, k, v, True)]


def test_decode_with_several_chunks_is_within_the_bound_of_float64():
    # its own sequence (a different rounding from the forward); the forward's bound holds for it
    # with the chunk combine's few extra roundings (here: with one more block per chunk)
    q, k, v = data(1, 2, 1, 4, 300, 64, seed=13)
    od, ld = A.attention_decode(q, k, v, True, chunk=64)
    ro, rl, bo, bl = ref_forward(q, k, v, True, A.default_scale(64))
    assert_within(od, ro, 2 * bo, "decode O")
    assert_within(ld, rl, 2 * bl, "decode LSE")


# ----------------------------------------------------------------------------- backward

BWD_CASES = [  # (B, Hq, Hkv, Sq, Sk, D, causal)
    (1, 2, 1, 33, 70, 32, True),
    (1, 1, 1, 40, 40, 64, False),
    pytest.param((1, 2, 2, 20, 66, 128, True), marks=pytest.mark.slow),  # D > 64: also the D = 256 case
    (1, 1, 1, 9, 70, 256, True),
]


@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: "B{}Hq{}Hkv{}Sq{}Sk{}D{}{}".format(*c[:6], "c" * c[6]))
def test_backward_is_within_the_bound_of_float64(case):
    b, hq, hkv, sq, sk, d, causal = case
    q, k, v = data(b, hq, hkv, sq, sk, d, seed=20 + d)
    do = data(b, hq, hkv, sq, 1, d, seed=21 + d)[0]
    o, lse = A.attention(q, k, v, causal)
    _, _, bo, _ = ref_forward(q, k, v, causal, A.default_scale(d))
    grads = A.attention_backward(q, k, v, o, lse, do, None, causal)
    want, bound = ref_backward(q, k, v, do, causal, A.default_scale(d), bo)
    for name, g, w, bd in zip(("dQ", "dK", "dV"), grads, want, bound, strict=True):
        assert g.shape == w.shape
        assert_within(g, w, bd, name)


def test_dlse_enters_as_delta_minus_dlse():
    # dL/dLSE = g adds P * g to dS (d LSE / d s_j = P_j): compare with float64
    q, k, v = data(1, 1, 1, 12, 30, 32, seed=30)
    g = np.random.default_rng(31).standard_normal((1, 1, 12)).astype(np.float32)
    o, lse = A.attention(q, k, v)
    dq, dk, dv = A.attention_backward(q, k, v, o, lse, np.zeros_like(o), g)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    sc = A.default_scale(32)
    s = np.einsum("bhid,bhjd->bhij", q64, k64) * sc
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ds = p * g[..., None]
    assert np.allclose(dq, np.einsum("bhij,bhjd->bhid", ds, k64) * sc, rtol=0, atol=1e-5)
    assert np.allclose(dk, np.einsum("bhij,bhid->bhjd", ds, q64) * sc, rtol=0, atol=1e-5)
    assert (dv == 0).all()


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("shapes,match", [
    (((1, 3, 4, 32), (1, 2, 8, 32), (1, 2, 8, 32)), "multiple of the key/value heads"),
    (((1, 2, 4, 32), (1, 2, 8, 32), (1, 2, 9, 32)), "v has shape"),
    (((1, 2, 4, 30), (1, 2, 8, 30), (1, 2, 8, 30)), "head dim 30"),
    (((1, 2, 4, 320), (1, 2, 8, 320), (1, 2, 8, 320)), "head dim 320"),
    (((2, 4, 32), (2, 8, 32), (2, 8, 32)), "4-D"),
    (((1, 2, 4, 32), (2, 2, 8, 32), (2, 2, 8, 32)), "agree in batch"),
])
def test_bad_shapes_are_refused_with_the_reason(shapes, match):
    q, k, v = (np.zeros(s, np.float32) for s in shapes)
    with pytest.raises(KernelInputError, match=match):
        A.attention(q, k, v)


def test_bad_dtype_scale_and_chunk_are_refused():
    q = np.zeros((1, 1, 4, 32), np.float32)
    with pytest.raises(KernelInputError, match="float64"):
        A.attention(q.astype(np.float64), q, q)
    with pytest.raises(KernelInputError, match="scale"):
        A.attention(q, q, q, scale=float("nan"))
    with pytest.raises(KernelInputError, match="chunk"):
        A.attention_decode(q, q, q, chunk=100)


def test_empty_key_sequence_gives_zero_and_minus_inf():
    q = np.ones((1, 1, 3, 32), np.float32)
    kv = np.zeros((1, 1, 0, 32), np.float32)
    o, lse = A.attention(q, kv, kv)
    assert (o == 0).all() and np.isneginf(lse).all()


def test_decode_skips_chunks_and_rows_with_no_visible_key():
    # causal, Sq = 80 > Sk = 70: rows 0..9 see no key (O = 0, LSE = -inf); row 10 sees key 0 only, so
    # its chunk 1 (keys 64..69) has no visible key and is left out of the combine
    q, k, v = data(1, 1, 1, 80, 70, 32, seed=14)
    od, ld = A.attention_decode(q, k, v, True, chunk=64)
    assert (od[0, 0, :10] == 0).all() and np.isneginf(ld[0, 0, :10]).all()
    ro, rl, bo, bl = ref_forward(q, k, v, True, A.default_scale(32))
    assert_within(od[0, 0, 10:], ro[0, 0, 10:], 2 * bo[0, 0, 10:], "decode O")
    assert_within(ld[0, 0, 10:], rl[0, 0, 10:], 2 * bl[0, 0, 10:], "decode LSE")
    # a row whose keys all lie in chunk 0 has w = 1 and one term: the forward's bits
    o, lse = A.attention(q, k, v, True)
    assert bits(od[0, 0, 10:74]) == bits(o[0, 0, 10:74]) and bits(ld[0, 0, 10:74]) == bits(lse[0, 0, 10:74])


# ----------------------------------------------------------------------------- review regressions

@pytest.mark.parametrize("scale", [1e39, -1e39, float("inf"), "0.5", 1j, True])
def test_a_scale_that_is_not_a_finite_f32_real_is_refused(scale):
    # 1e39 is a finite float but rounds to inf in float32: it used to run, giving NaN everywhere
    q = np.ones((1, 1, 2, 8), np.float32)
    for fn in (A.attention, A.attention_decode):
        with pytest.raises(KernelInputError, match="scale"):
            fn(q, q, q, False, scale)
    with pytest.raises(KernelInputError, match="scale"):
        A.attention_backward(q, q, q, q, q[..., 0], q, None, False, scale)


def test_causal_must_be_a_bool_and_chunk_may_be_a_numpy_integer():
    q, k, v = data(1, 1, 1, 2, 70, 8, seed=40)
    with pytest.raises(KernelInputError, match="causal"):
        A.attention(q, k, v, np.array([True, False]))
    got = A.attention_decode(q, k, v, chunk=np.int64(64))
    assert [bits(x) for x in got] == [bits(x) for x in A.attention_decode(q, k, v, chunk=64)]


def test_an_empty_batch_gives_empty_results():
    q = np.zeros((0, 2, 3, 8), np.float32)
    kv = np.zeros((0, 1, 5, 8), np.float32)
    for fn in (A.attention, A.attention_decode):
        o, lse = fn(q, kv, kv)
        assert o.shape == (0, 2, 3, 8) and lse.shape == (0, 2, 3)
    dq, dk, dv = A.attention_backward(q, kv, kv, q, q[..., 0], q)
    assert dq.shape == q.shape and dk.shape == dv.shape == kv.shape


def test_rows_without_keys_get_the_empty_chain_times_scale_on_every_path():
    # dQ = (+0) * scale: -0 for a negative scale, whether the kernels run (causal, Sq > Sk) or the
    # host fills it (Sk = 0)
    q, k, v = data(1, 1, 1, 6, 2, 8, seed=41)
    o, lse = A.attention(q, k, v, True, -0.5)
    dq, dk, _ = A.attention_backward(q, k, v, o, lse, np.ones_like(o), None, True, -0.5)
    assert (dq[0, 0, :4] == 0).all() and np.signbit(dq[0, 0, :4]).all()
    kz = np.zeros((1, 1, 0, 8), np.float32)
    dq0, _, _ = A.attention_backward(q, kz, kz, o, lse, np.ones_like(o), None, True, -0.5)
    assert (dq0 == 0).all() and np.signbit(dq0).all()


def test_a_chunk_larger_than_the_cache_is_one_chunk():
    # chunks past 2^31 keys used to reach the kernel's i32 argument and fail at launch
    q, k, v = data(1, 1, 1, 2, 70, 8, seed=42)
    want = [bits(x) for x in A.attention_decode(q, k, v, chunk=128)]
    assert [bits(x) for x in A.attention_decode(q, k, v, chunk=2**40 * 64)] == want
