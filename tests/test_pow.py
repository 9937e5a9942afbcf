"""``aw.pow`` (docs/spec.md §8.18; CUDA's ``powf``): the error against float64 NumPy (< 1 ulp),
C99 Annex F's special values against NumPy's float32 ``power`` bit for bit, an independent
reference written from the spec's text (tests/attention_ref.py's fma32 and scale) matched bit
for bit, the same bits at every W and on the compiled CPU targets, exact-class instructions only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import anywave as aw
from attention_ref import F32, _scale2, fma32, max32, min32
from tiers import cases

WS = (8, 16, 32, 64)


@aw.kernel
def pow_kernel(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = aw.pow(x[i], y[i])


def _run(x: np.ndarray, y: np.ndarray, target: str = "emulator", W: int = 32) -> np.ndarray:
    out = np.zeros(x.size, np.float32)
    pow_kernel(x, y, out, x.size, grid=(x.size + 255) // 256, workgroup=256, target=target, wave_width=W)
    return out


def _arguments(seed: int, n: int = 6000) -> tuple[np.ndarray, np.ndarray]:
    """x over the whole positive range (subnormals too) with y such that y·log2 x spans the
    finite results (subnormal ones and those near overflow included); a quarter with small y,
    some with x near 1 and large y, some with negative x and integer y."""
    rng = np.random.default_rng(seed)
    x = np.exp(rng.uniform(np.log(1e-44), np.log(3e38), n))
    lx = np.log2(x)
    t = rng.uniform(-152, 128.5, n)
    y = t / np.where(np.abs(lx) < 1e-3, 1e-3, lx)
    q = n // 4
    y[:q] = rng.uniform(-8, 8, q)
    x[q:2 * q] = 1 + rng.uniform(-1e-3, 1e-3, q)
    y[q:2 * q] = rng.uniform(-8e4, 8e4, q)
    x[2 * q:2 * q + q // 2] *= -1
    y[2 * q:2 * q + q // 2] = np.rint(rng.uniform(-40, 40, q // 2))
    x[2 * q:2 * q + q // 2] = np.clip(x[2 * q:2 * q + q // 2], -1e3, -1e-3)
    return x.astype(np.float32), y.astype(np.float32)


def _ulp_errors(got: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
        finite = np.abs(ref) < np.float64(np.finfo(np.float32).max)
        spacing = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
        spacing = np.where(np.abs(ref) < 2.0 ** -126, 2.0 ** -149, spacing)  # the subnormal spacing
        return np.where(finite, np.abs(got.astype(np.float64) - ref) / spacing, 0.0)


def test_error_below_one_ulp():
    for seed in (1, 2):
        x, y = _arguments(seed)
        err = _ulp_errors(_run(x, y), x, y)
        i = int(err.argmax())
        assert err.max() < 1.0, (x[i], y[i], err.max())


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38,
            -3e38, 0.25, 16777216.0, 16777217.0, -16777216.0, 2.5, -2.5, 1.0000001, 0.99999994, 7.0, -7.0]


def test_special_values_are_c99s():
    pairs = np.array(list(itertools.product(_SPECIAL, _SPECIAL)), np.float32)
    x, y = pairs[:, 0].copy(), pairs[:, 1].copy()
    got = _run(x, y)
    with np.errstate(all="ignore"):
        ref = np.power(x, y)  # the C library's powf (C99 Annex F)
    exact = ~np.isfinite(ref) | (ref == 0) | np.isin(ref, np.float32([1.0, -1.0]))
    same = (got == ref) & (np.signbit(got) == np.signbit(ref)) | (np.isnan(got) & np.isnan(ref))
    bad = exact & ~same
    assert not bad.any(), list(zip(x[bad][:8], y[bad][:8], got[bad][:8], ref[bad][:8], strict=True))
    assert (_ulp_errors(got, x, y)[~exact] < 1.0).all()
    nan = np.isnan(got)
    assert (got.view(np.uint32)[nan] == 0x7FC00000).all()  # the canonical NaN


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = F32(a + b)
    bb = F32(s - a)
    return s, F32(F32(a - F32(s - bb)) + F32(b - bb))


def pow_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """docs/spec.md §8.18, transcribed from the text: every step one float32 operation."""
    x, y = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        a = min32(max32(np.abs(x), F32(2.0 ** -149)), F32(3.4028235e38))
        yc = min32(max32(y, F32(-3.4028235e38)), F32(3.4028235e38))
        small = a < F32(2.0 ** -126)
        a2 = np.where(small, F32(a * F32(2.0 ** 23)), a).astype(np.float32)
        bits = a2.view(np.int32)
        e = ((bits >> 23) & 255) - 127 + np.where(small, -23, 0)
        m = ((bits & 0x7FFFFF) | 0x3F800000).view(np.float32)
        big = m > F32(1.4142135)
        m = np.where(big, F32(m * F32(0.5)), m).astype(np.float32)
        e = e + big
        u = F32(m - F32(1))
        vh, vl = _two_sum(m, F32(1))
        sh = F32(u / vh)
        sl = F32(fma32(-sh, vl, fma32(-sh, vh, u)) / vh)
        zh = F32(sh * sh)
        zl = F32(fma32(sh, sh, -zh) + F32(F32(sh + sh) * sl))
        w = fma32(zh, F32(2 / 17), F32(2 / 15))
        for c in (2 / 13, 2 / 11, 2 / 9, 2 / 7, 2 / 5):
            w = fma32(zh, w, F32(c))
        w = F32(w * zh)
        th, tl = F32(0.6666666865348816), F32(-1.9868215517249155e-8)
        ah = F32(th + w)
        al = F32(F32(F32(th - ah) + w) + tl)
        bh = F32(zh * ah)
        bl = F32(fma32(zh, ah, -bh) + F32(F32(zh * al) + F32(zl * ah)))
        ch = F32(sh * bh)
        cl = F32(fma32(sh, bh, -ch) + F32(F32(sh * bl) + F32(sl * bh)))
        s2 = F32(sh + sh)
        dh = F32(s2 + ch)
        dl = F32(F32(F32(s2 - dh) + ch) + F32(F32(sl + sl) + cl))
        kh, kl = F32(1.4426950216293335), F32(1.925963033500011e-8)
        eh = F32(dh * kh)
        el = F32(fma32(dh, kh, -eh) + F32(F32(dh * kl) + F32(dl * kh)))
        lh, lam = _two_sum(e.astype(np.float32), eh)
        ll = F32(lam + el)
        h = F32(lh + ll)
        lo = F32(ll - F32(h - lh))
        ph = F32(yc * h)
        pl = F32(fma32(yc, h, -ph) + F32(yc * lo))
        pc = min32(max32(ph, F32(-160)), F32(130))
        n = np.rint(pc).astype(np.float32)
        f = np.where(pc == ph, F32(F32(pc - n) + pl), F32(pc - n)).astype(np.float32)
        q = fma32(f, F32(1.5252733804059841e-5), F32(1.5403530393381606e-4))
        for c in (1.3333558146428443e-3, 9.6181291076284772e-3, 5.5504108664821580e-2, 2.4022650695910071e-1,
                  6.9314718055994531e-1, 1.0):
            q = fma32(f, q, F32(c))
        r = _scale2(q, n.astype(np.int64))
    # the special cases (§8.18), lowest precedence first so that each later one wins
    yint = np.trunc(y) == y
    yodd = yint & (np.abs(y) < 2.0 ** 24) & (np.where(np.abs(y) < 2.0 ** 24, y, 0).astype(np.int64) % 2 == 1)
    r = np.where((x < 0) & ~yint, F32(np.nan), np.where((x < 0) & yodd, -r, r))
    zero = np.where(y < 0, F32(np.inf), F32(0.0))
    r = np.where(x == 0, np.where(yodd, np.copysign(zero, x), zero), r)
    inf = np.where(y < 0, F32(0.0), F32(np.inf))
    r = np.where(np.isinf(x), np.where(yodd & (x < 0), -inf, inf), r)
    ax = np.abs(x)
    yinf = np.where(ax == 1, F32(1), np.where(ax < 1, np.where(y > 0, F32(0), F32(np.inf)),
                                               np.where(y > 0, F32(np.inf), F32(0))))
    r = np.where(np.isinf(y), yinf, r)
    r = np.where(np.isnan(x) | np.isnan(y), np.uint32(0x7FC00000).view(np.float32), r)
    r = np.where((y == 0) | (x == 1), F32(1), r)
    return r.astype(np.float32)


def test_matches_the_spec_text_bit_for_bit():
    x, y = _arguments(3, 3000)
    pairs = np.array(list(itertools.product(_SPECIAL, _SPECIAL)), np.float32)
    x = np.concatenate([x, pairs[:, 0]])
    y = np.concatenate([y, pairs[:, 1]])
    got, ref = _run(x, y), pow_ref(x, y)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_two_transcriptions_of_the_spec_agree():
    """refsem.f32_pow (the conformance group ``language``'s expectation: the same text on exact
    rational arithmetic, one scalar at a time) and pow_ref above (NumPy float32) agree bit for bit."""
    from anywave.conformance import refsem as R

    x, y = _arguments(6, 200)
    pairs = np.array(list(itertools.product(_SPECIAL[::2], _SPECIAL[1::2])), np.float32)
    x = np.concatenate([x, pairs[:, 0]])
    y = np.concatenate([y, pairs[:, 1]])
    got = np.array([R.f32_pow(int(a), int(b)) for a, b in zip(x.view(np.uint32), y.view(np.uint32), strict=True)],
                   np.uint32)
    assert np.array_equal(got, pow_ref(x, y).view(np.uint32))


RUNTIMES = [("emulator", w) for w in WS] + cases([(t, w) for t in ("opencl", "cpu") for w in WS])
RUNTIMES = [pytest.param(*(p.values if hasattr(p, "values") else p), marks=getattr(p, "marks", ()),
                         id="{}-W{}".format(*(p.values if hasattr(p, "values") else p))) for p in RUNTIMES]


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_same_bits_everywhere(target, W):
    if target != "emulator" and target not in aw.available_targets():
        pytest.skip(f"target {target} is not available here")
    x, y = _arguments(4, 1500)
    ref = pow_ref(x, y)
    assert np.array_equal(_run(x, y, target, W).view(np.uint32), ref.view(np.uint32))


def test_exact_instructions_only_and_cuda_powf():
    from anywave.isa.table import Determinism

    k = pow_kernel.compile().kernels[0]
    assert all(i.defn.determinism is not Determinism.APPROX for i in k.code)
    pytest.importorskip("clang.cindex", reason="libclang is not installed (pip install 'anywave[cuda-frontend]')")
    cu = aw.cuda_kernel("__global__ void p(const float* x, const float* y, float* o, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i < n) o[i] = powf(x[i], y[i]);\n}", "p")
    x, y = _arguments(5, 512)
    out = np.zeros(x.size, np.float32)
    cu(x, y, out, x.size, grid=2, workgroup=256, target="emulator")
    assert np.array_equal(out.view(np.uint32), _run(x, y).view(np.uint32))
