"""Compiler: precise math (error bounds vs float64 NumPy), fast math, stdlib block helpers,
device functions, wave ops, MMA."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import anywave as aw

WIDTHS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


@aw.kernel
def math_all(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, *, fn: str = "exp"):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        if fn == "exp":
            r = aw.exp(v)
        elif fn == "exp2":
            r = aw.exp2(v)
        elif fn == "log":
            r = aw.log(v)
        elif fn == "log2":
            r = aw.log2(v)
        elif fn == "sin":
            r = aw.sin(v)
        elif fn == "cos":
            r = aw.cos(v)
        elif fn == "tanh":
            r = aw.tanh(v)
        elif fn == "erf":
            r = aw.erf(v)
        else:
            r = aw.fast_exp2(v)
        out[i] = r


def _ulp_err(got: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    ref32 = ref64.astype(np.float32)
    spacing = np.spacing(np.abs(ref32)).astype(np.float64)
    spacing = np.where(spacing == 0, np.float64(2.0**-149), spacing)
    return np.abs(got.astype(np.float64) - ref64) / spacing


def _run(fn: str, x: np.ndarray, W: int = 16) -> np.ndarray:
    out = np.zeros_like(x)
    math_all(x, out, len(x), fn=fn, grid=(len(x) + 255) // 256, workgroup=256, wave_width=W)
    return out


def _erf64(x: np.ndarray) -> np.ndarray:
    import math

    return np.array([math.erf(float(v)) for v in x])


@pytest.mark.parametrize("fn,lo,hi,ref,bound", [
    ("exp", -100.0, 88.0, np.exp, 2.0),
    ("exp2", -149.0, 127.0, np.exp2, 2.0),
    ("log", 1e-30, 1e30, np.log, 2.0),
    ("log2", 1e-30, 1e30, np.log2, 2.0),
    ("tanh", -10.0, 10.0, np.tanh, 4.0),
])
def test_precise_math_ulp_bounds(fn, lo, hi, ref, bound):
    rng = np.random.default_rng(7)
    if fn in ("log", "log2"):
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 3000)).astype(np.float32)
        x = np.concatenate([x, np.float32([1.0, 2.0, 0.5, 1.0000001, 0.99999994, 1e-40, 3e-45])])
    else:
        x = rng.uniform(lo, hi, 3000).astype(np.float32)
        x = np.concatenate([x, np.float32([0.0, -0.0, 1e-8, -1e-8, 0.3, -0.3, 0.56, -0.56])])
    got = _run(fn, x)
    err = _ulp_err(got, ref(x.astype(np.float64)))
    assert err.max() <= bound, (fn, x[err.argmax()], got[err.argmax()], err.max())


def test_sin_cos_erf_absolute_bounds():
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(-1e4, 1e4, 2000), rng.uniform(-4, 4, 2000)]).astype(np.float32)
    for fn, ref, bound in (("sin", np.sin, 2.0**-22), ("cos", np.cos, 2.0**-22), ("erf", _erf64, 4e-7)):
        got = _run(fn, x).astype(np.float64)
        err = np.abs(got - ref(x.astype(np.float64)))
        assert err.max() <= bound, (fn, x[err.argmax()], err.max())


def test_math_special_values():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    x = np.float32([inf, -inf, nan, 0.0, -1.0, 200.0, -200.0])
    e = _run("exp", x)
    assert e[0] == inf and e[1] == 0 and np.isnan(e[2]) and e[3] == 1 and e[5] == inf and e[6] == 0
    lg = _run("log", x)
    assert lg[0] == inf and np.isnan(lg[1]) and np.isnan(lg[2]) and lg[3] == -inf and np.isnan(lg[4])
    s = _run("sin", x)
    assert np.isnan(s[0]) and np.isnan(s[1]) and np.isnan(s[2]) and s[3] == 0
    t = _run("tanh", x)
    assert t[0] == 1 and t[1] == -1 and np.isnan(t[2])


@pytest.mark.parametrize("W", WIDTHS)
def test_precise_math_is_independent_of_wave_width(W):
    x = np.linspace(-20, 20, 333).astype(np.float32)
    assert np.array_equal(_run("exp", x, W), _run("exp", x, 8))
    assert np.array_equal(_run("sin", x, W), _run("sin", x, 8))


def test_precise_math_uses_only_exact_instructions_and_fast_math_approx():
    from anywave.isa.table import Determinism

    for fn in ("exp", "exp2", "log", "log2", "sin", "cos", "tanh", "erf"):
        k = math_all.compile(fn=fn).kernel("math_all")
        assert all(i.defn.determinism is not Determinism.APPROX for i in k.code), fn
    k = math_all.compile(fn="fast").kernel("math_all")
    assert any(i.mnemonic == "ex2.approx.f32" for i in k.code)


@aw.kernel
def fast_logs(x: aw.In[aw.f32], ln: aw.Out[aw.f32], l2: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        ln[i] = aw.fast_log(x[i])
        l2[i] = aw.fast_log2(x[i])


@pytest.mark.parametrize("W", WIDTHS)
def test_fast_log_within_its_bound(W: int) -> None:
    """aw.fast_log is lg2.approx.f32(x) * ln 2 (it did not compile before the frontend asked
    the table for the mnemonic). Bound: lg2.approx is <= 2 ulp (docs/spec.md §8.2), i.e. a
    relative error <= 2^-22; ln 2 rounded to f32 and the product add 2^-24 each: <= 3 * 2^-23
    relative, <= 6 ulp of the result. fast_log2 is lg2.approx itself: <= 2 ulp."""
    rng = np.random.default_rng(7)
    x = np.concatenate([np.float32([1.0, 2.0, 0.5, 10.0, 3.4e38, 1.2e-38]),
                        np.exp(rng.uniform(-80, 80, 250)).astype(np.float32)])
    ln, l2 = np.zeros_like(x), np.zeros_like(x)
    fast_logs(x, ln, l2, len(x), grid=(len(x) + 63) // 64, workgroup=64, wave_width=W)
    x64 = x.astype(np.float64)
    assert _ulp_err(ln, np.log(x64)).max() <= 6
    assert _ulp_err(l2, np.log2(x64)).max() <= 2


# ----------------------------------------------------------------------------- stdlib

@aw.kernel
def block_ops(x: aw.In[aw.f32], xi: aw.In[aw.i32], s: aw.Out[aw.f32], mn: aw.Out[aw.i32], mx: aw.Out[aw.i32],
              scan: aw.Out[aw.i32], escan: aw.Out[aw.i32]):
    i = aw.global_id(0)
    t = aw.local_id(0)
    total = aw.workgroup_reduce(x[i])
    lo = aw.workgroup_reduce(xi[i], op="min")
    hi = aw.workgroup_reduce(xi[i], op="max")
    inc = aw.workgroup_scan(xi[i])
    exc = aw.workgroup_scan(xi[i], exclusive=True)
    scan[i] = inc
    escan[i] = exc
    if t == 0:
        g = aw.workgroup_id(0)
        s[g] = total
        mn[g] = lo
        mx[g] = hi


@pytest.mark.parametrize("W", WIDTHS)
def test_workgroup_reduce_and_scan(W):
    rng = np.random.default_rng(9)
    G, T = 3, 96
    x = rng.integers(-50, 50, G * T).astype(np.float32)  # integers: every order sums exactly
    xi = rng.integers(-1000, 1000, G * T).astype(np.int32)
    s = np.zeros(G, np.float32)
    mn, mx = np.zeros(G, np.int32), np.zeros(G, np.int32)
    sc, es = np.zeros(G * T, np.int32), np.zeros(G * T, np.int32)
    block_ops(x, xi, s, mn, mx, sc, es, grid=G, workgroup=T, wave_width=W)
    xr, xir = x.reshape(G, T), xi.reshape(G, T)
    assert np.array_equal(s, xr.sum(1))
    assert np.array_equal(mn, xir.min(1)) and np.array_equal(mx, xir.max(1))
    inc = np.cumsum(xir, 1).astype(np.int32)
    assert np.array_equal(sc.reshape(G, T), inc)
    assert np.array_equal(es.reshape(G, T), inc - xir)


# ----------------------------------------------------------------------------- device functions

@aw.func
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@aw.func
def poly(v: aw.f32, *, degree: int = 3):
    acc = 0.0
    for k in aw.static_range(degree + 1):
        acc = acc * v + float(k + 1)
    return acc


@aw.kernel
def funcs(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = clamp(x[i], -1.0, 1.0) + poly(x[i], degree=2)


@pytest.mark.parametrize("W", WIDTHS)
def test_device_functions_inlined(W):
    x = np.linspace(-3, 3, 61).astype(np.float32)
    out = np.zeros_like(x)
    funcs(x, out, len(x), grid=1, workgroup=64, wave_width=W)
    p = (np.float32(0) * x + np.float32(1)) * x + np.float32(2)
    p = p * x + np.float32(3)
    assert np.array_equal(out, np.clip(x, -1, 1) + p)


# ----------------------------------------------------------------------------- wave ops

@aw.kernel
def waves(x: aw.In[aw.i32], o: aw.Out[aw.i32], ob: aw.Out[aw.u64], n: aw.i32):
    i = aw.global_id(0)
    v = x[i]
    a = aw.wave_shfl_xor(v, 1)
    b = aw.wave_shfl_down(v, 2)
    c = aw.wave_broadcast(v, 3)
    any_neg = aw.wave_any(v < 0)
    all_small = aw.wave_all(v < 1000)
    o[i] = a * 1000000 + b * 1000 + c + (100000000 if any_neg else 0) + (200000000 if all_small else 0) \
        + aw.wave_max(v) * 0 + aw.wave_prefix_sum(v) * 0
    ob[i] = aw.wave_ballot(v % 2 == 0)


@pytest.mark.parametrize("W", WIDTHS)
def test_wave_ops(W):
    n = 64
    x = (np.arange(n, dtype=np.int32) * 7) % 100
    o = np.zeros(n, np.int32)
    ob = np.zeros(n, np.uint64)
    waves(x, o, ob, n, grid=1, workgroup=n, wave_width=W)
    lane = np.arange(n) % W
    base = np.arange(n) - lane
    a = x[base + (lane ^ 1)]
    b = np.where(lane + 2 < W, x[np.minimum(np.arange(n) + 2, n - 1)], x)
    c = x[base + 3]
    exp = a * 1000000 + b * 1000 + c + 200000000
    assert np.array_equal(o, exp.astype(np.int32))
    even = (x % 2 == 0)
    masks = [sum(1 << j for j in range(W) if even[w * W + j]) for w in range(n // W)]
    assert np.array_equal(ob, np.repeat(np.array(masks, np.uint64), W))


@aw.kernel
def mma_kernel(a: aw.In[aw.f16], b: aw.In[aw.f16], c: aw.Buffer[aw.f32]):
    ta = aw.local_array(aw.f16, (16, 16))
    tb = aw.local_array(aw.f16, (16, 16))
    tc = aw.local_array(aw.f32, (16, 16))
    t = aw.local_id(0)
    for k in range(t, 256, aw.workgroup_size(0)):
        ta[k // 16, k % 16] = a[k]
        tb[k // 16, k % 16] = b[k]
        tc[k // 16, k % 16] = c[k]
    aw.barrier()
    aw.mma(tc, ta, tb, tc)
    aw.barrier()
    for k in range(t, 256, aw.workgroup_size(0)):
        c[k] = tc[k // 16, k % 16]


@pytest.mark.parametrize("W", (8, 32))
def test_mma(W):
    rng = np.random.default_rng(10)
    a = rng.integers(-4, 4, 256).astype(np.float16)
    b = rng.integers(-4, 4, 256).astype(np.float16)
    c = rng.integers(-4, 4, 256).astype(np.float32)
    exp = a.astype(np.float32).reshape(16, 16) @ b.astype(np.float32).reshape(16, 16) + c.reshape(16, 16)
    mma_kernel(a, b, c, grid=1, workgroup=W, wave_width=W)
    assert np.array_equal(c.reshape(16, 16), exp)


_ = ml_dtypes
