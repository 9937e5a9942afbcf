"""The exact attention kernels (src/anywave/kernels/attention.py) against an independent bit-level
reference of docs/spec.md §8.17 (tests/attention_ref.py: float32 arithmetic in the spec's order,
written from the spec's text, no kernel code): forward, decode and backward, bit for bit, on the
emulator at W = 8 and 32. The reference's own pieces are checked first (its fma against exact
rational arithmetic, its exp/log against the standard library's on the emulator)."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import anywave as aw
from anywave.kernels import attention as A

sys.path.insert(0, str(Path(__file__).parent))
import attention_ref as R  # noqa: E402

WS = (8, 32)


@pytest.fixture(autouse=True)
def _no_wall_clock_budget(monkeypatch):
    # the emulator's loop budget is wall-clock time; a test must not depend on the machine's load
    monkeypatch.setenv("ANYWAVE_EMU_BUDGET", "none")


def same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Bit-equal, or both NaN (class exact-nan: a NaN's payload is not compared)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


def assert_bits(got, want, what):
    ok = same(got, want)
    if not ok.all():
        idx = np.argwhere(~ok)[0]
        raise AssertionError(f"{what}: {(~ok).sum()} of {ok.size} values differ from the reference; first at "
                             f"{tuple(idx)}: {np.asarray(got)[tuple(idx)]!r} vs {np.asarray(want)[tuple(idx)]!r}")


# ----------------------------------------------------------------------------- the reference's parts

def _round_exact(x: Fraction) -> np.float32:
    """The float32 nearest to the rational x (ties to even), by exact comparison."""
    c = np.float32(float(x))
    cands = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
    cands = [v for v in cands if np.isfinite(v)]
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - x), int(v.view(np.uint32)) & 1))


def test_reference_fma_is_correctly_rounded():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    c = rng.standard_normal(3000).astype(np.float32)
    # halfway cases of the float64 sum: c = -(a*b) rounded, plus tiny a*b residues
    c[:1000] = (-(a[:1000].astype(np.float64) * b[:1000])).astype(np.float32)
    a[1000:1500] = np.float32(1.0) + np.float32(2.0**-23)
    b[1000:1500] = np.float32(1.0) + np.float32(2.0**-23) * rng.integers(1, 8, 500).astype(np.float32)
    c[1000:1500] = np.float32(2.0**-49)
    # exact ties: a*b exactly halfway between two float32 values (x.5 ulp) plus tiny c of both signs
    a[1500:2000] = np.float32(1.0) + np.float32(2.0**-23) * rng.integers(0, 2**10, 500).astype(np.float32)
    b[1500:2000] = np.float32(1.5)
    c[1500:2000] = np.where(rng.random(500) < 0.5, 1, -1).astype(np.float32) * np.float32(2.0**-70)
    got = R.fma32(a, b, c)
    for i in range(a.size):
        want = _round_exact(Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i])))
        assert got[i].view(np.uint32) == want.view(np.uint32) or (got[i] == 0 and want == 0 and
                                                                   np.signbit(got[i]) == np.signbit(want)), i
    assert np.signbit(R.fma32(np.float32(-0.0), np.float32(1.0), np.float32(-0.0)))
    assert not np.signbit(R.fma32(np.float32(-0.0), np.float32(1.0), np.float32(0.0)))


@aw.kernel
def _math_kernel(x: aw.In[aw.f32], o: aw.Out[aw.f32], n: aw.i32, *, fn: str = "exp"):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        if fn == "exp":
            o[i] = aw.exp(v)
        else:
            o[i] = aw.log(v)


@pytest.mark.parametrize("fn", ["exp", "log"])
def test_reference_exp_and_log_are_the_standard_librarys_bits(fn):
    rng = np.random.default_rng(1)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38]
    if fn == "exp":
        x = np.concatenate([rng.uniform(-120, 100, 6000), rng.standard_normal(6000) * 4,
                            -rng.exponential(1e-3, 2000), [-110, 90, 88.72, 89, -103.9, -87.3], specials])
        ref = R.exp32
    else:
        x = np.concatenate([np.exp(rng.uniform(-103, 88.7, 6000)), rng.uniform(0.5, 2, 6000),
                            rng.uniform(-1, 1, 100), [0.70710677, 1.4142135, 1.4142137, 1, 2, 1e-40], specials])
        ref = R.log32
    x = x.astype(np.float32)
    o = np.zeros_like(x)
    _math_kernel(x, o, x.size, fn=fn, grid=-(-x.size // 256), workgroup=256)
    assert_bits(o, ref(x), f"aw.{fn} vs the reference's {fn}32")


# ----------------------------------------------------------------------------- kernels vs reference

def data(b, hq, hkv, sq, sk, d, seed, kind="normal"):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, hq, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    if kind == "ties":  # few distinct values: equal scores, exact zeros and -0 (signed-zero rules)
        q, k, v = (np.round(x).astype(np.float32) * np.float32(0.5) for x in (q, k, v))
        v[..., ::3] = np.float32(-0.0)
        q[..., 0, :] = np.float32(-0.0)
    elif kind == "spread":  # scores growing along the keys: alpha far from 1 at every block
        k = (k * np.linspace(0.1, 9.0, sk, dtype=np.float32)[:, None]).astype(np.float32)
    elif kind == "special":  # an infinity and a NaN in K and V (the sequence gives NaN or inf)
        k[0, 0, 3, 1] = np.inf
        v[0, 0, 70, 2] = np.nan
        v[0, 0, 5, 0] = -np.inf
    return q, k, v


CASES = [  # (B, Hq, Hkv, Sq, Sk, D, causal, scale, kind)
    (1, 2, 1, 9, 130, 12, True, None, "normal"),     # GQA, Sq < Sk, three blocks, the last partial
    (1, 3, 1, 70, 20, 8, True, None, "normal"),      # causal Sq > Sk: rows 0..49 see no key; group of 3
    (2, 2, 2, 5, 64, 4, False, 0.75, "ties"),        # Sk = one full block; ties, zeros, -0
    (1, 1, 1, 6, 200, 16, False, 0.3, "spread"),
    (1, 1, 1, 4, 100, 68, True, None, "normal"),     # D > 64, not a multiple of 16: 4-column chain loop
    (1, 1, 1, 3, 80, 80, False, -0.2, "normal"),     # D > 64, multiple of 16; two column slices; scale < 0
    (1, 1, 1, 3, 75, 8, False, 0.0, "normal"),       # scale 0: every score +-0, uniform weights
    (1, 1, 1, 4, 90, 8, False, None, "special"),
]


def _id(c):
    return "B{}Hq{}Hkv{}Sq{}Sk{}D{}{}-s{}-{}".format(*c[:6], "c" * c[6], c[7], c[8])


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_forward_is_the_reference_bits(case):
    b, hq, hkv, sq, sk, d, causal, scale, kind = case
    q, k, v = data(b, hq, hkv, sq, sk, d, seed=sq * sk + d, kind=kind)
    sc = A.default_scale(d) if scale is None else scale
    want = R.forward(q, k, v, causal, np.float32(sc))
    for W in WS:
        got = A.attention(q, k, v, causal, scale, wave_width=W)
        for name, g, w in zip(("O", "LSE"), got, want, strict=True):
            assert_bits(g, w, f"W={W} {name}")


DECODE_CASES = [  # (B, Hq, Hkv, Sq, Sk, D, causal, chunk)
    (2, 2, 1, 2, 200, 8, False, 64),   # four chunks, the last partial
    (1, 2, 2, 40, 150, 12, True, 128),  # causal: rows whose later chunks see no key
    (1, 1, 1, 3, 130, 80, False, 64),   # two column slices
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: "B{}Hq{}Hkv{}Sq{}Sk{}D{}{}-C{}".format(
    *c[:6], "c" * c[6], c[7]))
def test_decode_is_the_reference_bits(case):
    b, hq, hkv, sq, sk, d, causal, chunk = case
    q, k, v = data(b, hq, hkv, sq, sk, d, seed=100 + sk)
    want = R.decode(q, k, v, causal, np.float32(A.default_scale(d)), chunk)
    for W in WS:
        got = A.attention_decode(q, k, v, causal, chunk=chunk, wave_width=W)
        for name, g, w in zip(("O", "LSE"), got, want, strict=True):
            assert_bits(g, w, f"W={W} decode {name}")


BWD_CASES = [  # (B, Hq, Hkv, Sq, Sk, D, causal, scale, with dLSE)
    (1, 2, 1, 12, 70, 8, True, None, False),
    (1, 2, 2, 30, 10, 12, True, 0.4, True),   # Sq > Sk: rows without keys; keys seen by many rows
    (1, 3, 1, 5, 66, 4, False, -0.6, True),   # a group of 3 query heads; negative scale
    (1, 1, 1, 4, 20, 80, False, None, False),  # D > 64, two slices
]


@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: "B{}Hq{}Hkv{}Sq{}Sk{}D{}{}-s{}-{}".format(
    *c[:6], "c" * c[6], c[7], "dlse" if c[8] else "nodlse"))
def test_backward_is_the_reference_bits(case):
    b, hq, hkv, sq, sk, d, causal, scale, with_dlse = case
    q, k, v = data(b, hq, hkv, sq, sk, d, seed=200 + sq + sk)
    rng = np.random.default_rng(300 + d)
    do = rng.standard_normal(q.shape).astype(np.float32)
    dlse = rng.standard_normal(q.shape[:3]).astype(np.float32) if with_dlse else None
    sc = np.float32(A.default_scale(d) if scale is None else scale)
    o, lse = R.forward(q, k, v, causal, sc)  # the stored forward results (their bits: the forward test)
    want = R.backward(q, k, v, o, lse, do, dlse, causal, sc)
    for W in WS:
        got = A.attention_backward(q, k, v, o, lse, do, dlse, causal, scale, wave_width=W)
        for name, g, w in zip(("dQ", "dK", "dV"), got, want, strict=True):
            assert_bits(g, w, f"W={W} {name}")


def test_torch_half_outputs_are_the_reference_rounded_once():
    torch = pytest.importorskip("torch")
    import anywave.torch.ops  # noqa: F401  (registers the ops)

    q, k, v = data(1, 2, 1, 5, 70, 8, seed=400)
    want_o, want_lse = R.forward(*(R.round_bf16(x) for x in (q, k, v)), True, np.float32(A.default_scale(8)))
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    o, lse = torch.ops.anywave.attention_forward(tq, tk, tv, True, None, "exact")
    assert o.dtype == torch.bfloat16
    assert_bits(o.float().numpy(), R.round_bf16(want_o), "bf16 O")
    assert_bits(lse.numpy(), want_lse, "bf16 LSE")
    o16, _ = torch.ops.anywave.attention_forward(tq.half(), tk.half(), tv.half(), True, None, "exact")
    want16 = R.forward(*(x.float().numpy() for x in (tq.half(), tk.half(), tv.half())), True,
                       np.float32(A.default_scale(8)))[0]
    assert_bits(o16.float().numpy(), want16.astype(np.float16).astype(np.float32), "f16 O")


def test_decode_with_one_chunk_differs_from_the_forward_only_as_the_spec_says():
    # §8.17 "Decode": one chunk is the forward's bits, except an acc of -0 (after an alpha that
    # underflows) becomes +0, and a row of -inf scores gives O = +0, LSE = -inf (the forward: NaN)
    q = np.zeros((1, 1, 1, 4), np.float32)
    q[..., 0] = 1
    k = np.zeros((1, 1, 128, 4), np.float32)
    k[0, 0, 64, 0] = 200  # block 2's max: alpha = exp(-200) = 0, acc[0] = (negative) * 0 = -0
    v = np.ones((1, 1, 128, 4), np.float32)
    v[0, 0, :64, 0] = -1
    v[0, 0, 64:, 0] = -0.0
    fo, fl = A.attention(q, k, v, False, 1.0)
    do, dl = A.attention_decode(q, k, v, False, 1.0, chunk=128)
    assert_bits(fo, R.forward(q, k, v, False, np.float32(1.0))[0], "forward O")
    assert_bits(do, R.decode(q, k, v, False, np.float32(1.0), 128)[0], "decode O")
    assert np.signbit(fo[..., 0]).all() and not np.signbit(do[..., 0]).any()
    assert_bits(fo[..., 1:], do[..., 1:], "other columns")
    assert_bits(fl, dl, "LSE")
    q2 = np.full((1, 1, 1, 4), -np.inf, np.float32)
    k2 = np.ones((1, 1, 10, 4), np.float32)
    fo2, fl2 = A.attention(q2, k2, k2, False, 1.0)
    do2, dl2 = A.attention_decode(q2, k2, k2, False, 1.0, chunk=64)
    assert np.isnan(fo2).all() and np.isnan(fl2).all()
    assert (do2 == 0).all() and np.isneginf(dl2).all()
