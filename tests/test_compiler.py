"""Compiler: language features compiled and run on the emulator at every wave width,
checked against independent NumPy references."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import anywave as aw
from anywave.binary.verify import verify
from anywave.binary.wbin import read_wbin, write_wbin

WIDTHS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------- kernels

@aw.kernel
def vadd(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out[i] = x[i] + y[i]


@aw.kernel
def saxpy(a: aw.f32, x: aw.In[aw.f32], y: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]


@aw.kernel
def relu(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i >= n:
        return
    v = x[i]
    out[i] = v if v > 0.0 else 0.0


@aw.kernel
def control(x: aw.In[aw.i32], out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i >= n:
        return
    acc = 0
    for k in range(x[i]):
        if k % 3 == 1:
            continue
        acc += k * k
        if acc > 100:
            break
    j = 10
    while j > 0:
        j -= 3
    for k in range(20, x[i], -4):
        acc ^= k
    v = x[i]
    if v < -10:
        r = 1
    elif v < 0:
        if v % 2 == 0:
            r = 2
        else:
            r = 3
    elif v == 0 or v > 50:
        r = 4
    else:
        r = 5
    out[i] = acc + (-7) // 2 + j + (v % 4) - (-v // 3) + r * 1000 + (v // -5) * 7 + (v % -3)


def control_ref(v: int) -> int:
    acc = 0
    for k in range(v):
        if k % 3 == 1:
            continue
        acc += k * k
        if acc > 100:
            break
    j = 10
    while j > 0:
        j -= 3
    for k in range(20, v, -4):
        acc ^= k
    if v < -10:
        r = 1
    elif v < 0:
        r = 2 if v % 2 == 0 else 3
    elif v == 0 or v > 50:
        r = 4
    else:
        r = 5
    return acc + (-7) // 2 + j + (v % 4) - (-v // 3) + r * 1000 + (v // -5) * 7 + (v % -3)


@aw.kernel
def reduce_sum(x: aw.In[aw.i32], out: aw.Buffer[aw.i32], n: aw.i32):
    partial = aw.local_array(aw.i32, 128)
    i = aw.global_id(0)
    v = x[i] if i < n else 0
    s = aw.wave_sum(v)
    if aw.lane_id() == 0:
        partial[aw.wave_id()] = s
    aw.barrier()
    if aw.local_id(0) == 0:
        total = 0
        for w in range(aw.num_waves()):
            total += partial[w]
        aw.atomic_add(out, 0, total)


@aw.kernel
def histogram(x: aw.In[aw.u32], hist: aw.Buffer[aw.u32], n: aw.i32, *, bins: int = 16):
    i = aw.global_id(0)
    if i < n:
        aw.atomic_add(hist, x[i] % bins, 1)


@aw.kernel(workgroup=(16, 16, 1))
def transpose(a: aw.In[aw.f32], b: aw.Out[aw.f32], rows: aw.i32, cols: aw.i32):
    tile = aw.local_array(aw.f32, (16, 17))
    tx = aw.local_id(0)
    ty = aw.local_id(1)
    c = aw.workgroup_id(0) * 16 + tx
    r = aw.workgroup_id(1) * 16 + ty
    if r < rows and c < cols:
        tile[ty, tx] = a[r * cols + c]
    aw.barrier()
    c2 = aw.workgroup_id(1) * 16 + tx
    r2 = aw.workgroup_id(0) * 16 + ty
    if r2 < cols and c2 < rows:
        b[r2 * rows + c2] = tile[tx, ty]


@aw.kernel
def wide(x: aw.In[aw.i64], y: aw.In[aw.f64], out_i: aw.Out[aw.i64], out_f: aw.Out[aw.f64], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        a = x[i]
        out_i[i] = a * 3 - (a >> 2) + aw.i64(i)
        out_f[i] = y[i] * 0.5 + aw.f64(a) / 3.0


@aw.kernel
def halves(x: aw.In[aw.f16], y: aw.In[aw.bf16], out16: aw.Out[aw.f16], outb: aw.Out[aw.bf16],
           out32: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        out16[i] = x[i] * x[i] + 1.0
        outb[i] = y[i] + y[i]
        out32[i] = aw.f32(x[i]) + aw.f32(y[i])


@aw.kernel
def casts(x: aw.In[aw.f32], oi: aw.Out[aw.i32], ou: aw.Out[aw.u32], of: aw.Out[aw.f32], obits: aw.Out[aw.u32],
          n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        oi[i] = aw.i32(v)
        ou[i] = aw.u32(v)
        of[i] = aw.f32(aw.i32(v)) + aw.floor(v) - aw.ceil(v) + aw.sqrt(abs(v)) + min(v, 1.0) + max(v, -2.0, 0.5)
        obits[i] = aw.bitcast(v, aw.u32) >> 16


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("W", WIDTHS)
def test_vector_add_and_saxpy(W):
    rng = np.random.default_rng(1)
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    vadd(x, y, out, n, grid=(n + 63) // 64, workgroup=64, wave_width=W)
    assert np.array_equal(out, x + y)
    yy = y.copy()
    saxpy[(n + 127) // 128, 128](np.float32(2.5), x, yy, n, wave_width=W)
    assert np.array_equal(yy, np.float32(2.5) * x + y)


@pytest.mark.parametrize("W", WIDTHS)
def test_relu(W):
    x = np.linspace(-3, 3, 97).astype(np.float32)
    out = np.full(97, -1, np.float32)
    relu(x, out, 97, grid=4, workgroup=32, wave_width=W)
    assert np.array_equal(out, np.maximum(x, 0))


@pytest.mark.parametrize("W", WIDTHS)
def test_control_flow(W):
    x = np.arange(-40, 90, dtype=np.int32)
    out = np.zeros_like(x)
    control(x, out, len(x), grid=3, workgroup=48, wave_width=W)
    expected = np.array([control_ref(int(v)) for v in x], dtype=np.int64).astype(np.int32)
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("W", WIDTHS)
def test_reduction_wave_ops_local_memory(W):
    rng = np.random.default_rng(2)
    n = 1000
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = np.zeros(1, np.int32)
    reduce_sum(x, out, n, grid=(n + 255) // 256, workgroup=256, wave_width=W)
    assert out[0] == x.sum()


@pytest.mark.parametrize("W", WIDTHS)
def test_histogram_atomics_and_constants(W):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << 20, 777).astype(np.uint32)
    for bins in (16, 10):
        h = np.zeros(bins, np.uint32)
        histogram(x, h, len(x), bins=bins, grid=13, workgroup=64, wave_width=W)
        assert np.array_equal(h, np.bincount(x % bins, minlength=bins).astype(np.uint32))


@pytest.mark.parametrize("W", WIDTHS)
def test_transpose_2d_local_tiles(W):
    rows, cols = 37, 50
    a = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    b = np.zeros((cols, rows), np.float32)
    transpose(a, b, rows, cols, grid=((cols + 15) // 16, (rows + 15) // 16), workgroup=(16, 16), wave_width=W)
    assert np.array_equal(b, a.T)


@pytest.mark.parametrize("W", WIDTHS)
def test_i64_f64(W):
    rng = np.random.default_rng(4)
    n = 70
    x = rng.integers(-(1 << 62), 1 << 62, n).astype(np.int64)
    y = rng.standard_normal(n)
    oi = np.zeros(n, np.int64)
    of = np.zeros(n, np.float64)
    wide(x, y, oi, of, n, grid=3, workgroup=32, wave_width=W)
    with np.errstate(over="ignore"):
        ei = x * np.int64(3) - (x >> 2) + np.arange(n, dtype=np.int64)
    assert np.array_equal(oi, ei)
    assert np.array_equal(of, y * 0.5 + x.astype(np.float64) / 3.0)


@pytest.mark.parametrize("W", WIDTHS)
def test_f16_bf16(W):
    rng = np.random.default_rng(5)
    n = 50
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    o16 = np.zeros(n, np.float16)
    ob = np.zeros(n, ml_dtypes.bfloat16)
    o32 = np.zeros(n, np.float32)
    halves(x, y, o16, ob, o32, n, grid=2, workgroup=32, wave_width=W)
    # f16 ops are correctly rounded per operation (computed exactly in f32, rounded once)
    e16 = ((x.astype(np.float32) * x.astype(np.float32)).astype(np.float16).astype(np.float32) + 1).astype(np.float16)
    assert np.array_equal(o16, e16)
    eb = (y.astype(np.float32) * 2).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(ob.astype(np.float32), eb)
    assert np.array_equal(o32, x.astype(np.float32) + y.astype(np.float32))


@pytest.mark.parametrize("W", WIDTHS)
def test_casts_and_math(W):
    x = np.array([-3.7, -0.5, 0.0, 0.4, 1.5, 2.5, 7.9, 3e9, -3e9, np.nan], np.float32)
    n = len(x)
    oi, ou = np.zeros(n, np.int32), np.zeros(n, np.uint32)
    of, ob = np.zeros(n, np.float32), np.zeros(n, np.uint32)
    casts(x, oi, ou, of, ob, n, grid=1, workgroup=16, wave_width=W)
    with np.errstate(invalid="ignore"):
        x64 = np.nan_to_num(x.astype(np.float64), nan=0.0)
        ti = np.clip(np.trunc(x64), -2**31, 2**31 - 1).astype(np.int64)
        tu = np.clip(np.trunc(x64), 0, 2**32 - 1).astype(np.int64)
    assert np.array_equal(oi, ti.astype(np.int32))
    assert np.array_equal(ou, tu.astype(np.uint32))
    assert np.array_equal(ob, x.view(np.uint32) >> 16)
    fin = ~np.isnan(x)
    e = (ti.astype(np.int32).astype(np.float32) + np.floor(x) - np.ceil(x) + np.sqrt(np.abs(x))
         + np.minimum(x, np.float32(1)) + np.maximum(np.maximum(x, np.float32(-2)), np.float32(0.5)))
    assert np.array_equal(of[fin], e[fin])


def test_module_verifies_roundtrips_and_has_debug_locations():
    m = control.compile()
    verify(m)
    k = m.kernel("control")
    assert all(ins.loc is not None and ins.loc.file.endswith("test_compiler.py") for ins in k.code)
    m2 = read_wbin(write_wbin(m))
    assert m2.kernel("control").code == k.code
    assert transpose.compile().kernel("transpose").workgroup_size == (16, 16, 1)


def test_constants_specialise_and_cache():
    m10 = histogram.compile(bins=10)
    m16 = histogram.compile(bins=16)
    assert m10 is not m16
    assert histogram.compile(bins=10) is m10
    # power-of-two modulo is strength-reduced to an and: no rem.u32 in the 16-bin version
    assert not any(i.mnemonic.startswith("rem") for i in m16.kernel("histogram").code)
    assert any(i.mnemonic.startswith("rem") for i in m10.kernel("histogram").code)
