"""The performance constructs of the kernel language (issue 14): vector loads/stores
(``aw.load2/load4/store2/store4``), register arrays, buffer views — semantics at W = 8..64 on
the emulator, clear errors at the user's line, and what the backends emit for them. (Every
target runs the conformance group ``perf`` as well.)"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import anywave as aw
from anywave.compiler import CompileError
from anywave.emu.machine import EmulationError

WS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _line_of(kern, needle: str) -> int:
    lines, first = inspect.getsourcelines(kern.fn if hasattr(kern, "fn") else kern)
    for k, text in enumerate(lines):
        if needle in text:
            return first + k
    raise AssertionError(needle)


def _error(kern, needle: str, *words: str, **consts) -> CompileError:
    with pytest.raises(CompileError) as ei:
        kern.compile(**consts)
    e = ei.value
    assert e.loc is not None and e.loc.line == _line_of(kern, needle), str(e)
    for w in words:
        assert w in str(e), str(e)
    return e


# ----------------------------------------------------------------------------- semantics

@aw.kernel
def _rotate(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    # every thread: quad g of x, rotated by one lane, through local memory of the neighbour
    t = aw.local_id(0)
    g = aw.global_id(0)
    tile = aw.local_array(aw.f32, (64, 4))
    v = aw.load4(x, 4 * g)
    aw.store4(tile, (t, 0), (v[1], v[2], v[3], v[0]))
    aw.barrier()
    u = aw.load4(tile, (63 - t, 0))
    p = aw.load2(x, 4 * g + 2)
    aw.store4(y, 4 * g, u)
    aw.store2(y, 4 * n + 2 * g, (p[0] * 2.0, p[1] - 1.0))


@pytest.mark.parametrize("W", WS)
def test_vector_access_on_device_and_local_memory(W: int) -> None:
    rng = np.random.default_rng(W)
    groups = 2
    n = 64 * groups
    x = rng.standard_normal(4 * n).astype(np.float32)
    y = np.full(6 * n, np.nan, np.float32)
    _rotate(x, y, n, grid=groups, workgroup=64, wave_width=W)
    q = x.reshape(groups, 64, 4)
    rot = np.roll(q, -1, axis=2)[:, ::-1, :].reshape(-1)
    assert np.array_equal(y[:4 * n], rot)
    pairs = x.reshape(n, 4)[:, 2:]
    exp = np.stack([pairs[:, 0] * np.float32(2), pairs[:, 1] - np.float32(1)], axis=1).astype(np.float32)
    assert np.array_equal(y[4 * n:], exp.reshape(-1))


@aw.kernel
def _tile_sum(x: aw.In[aw.f32], out: aw.Out[aw.f32], k: aw.i32, *, rows: int = 3, cols: int = 4):
    g = aw.global_id(0)
    acc = aw.register_array(aw.f32, (rows, cols))
    for kk in range(k):
        for i in aw.static_range(rows):
            for j in aw.static_range(cols):
                acc[i, j] = aw.fma(x[kk * rows * cols + i * cols + j], aw.f32(g), acc[i, j])
    for i in aw.static_range(rows):
        for j in aw.static_range(cols):
            acc[i, j] += 1.0
            out[(g * rows + i) * cols + j] = acc[i, j]


@pytest.mark.parametrize("W", WS)
def test_register_array_accumulates_per_thread(W: int) -> None:
    from anywave.kernels.reference import fma_f32

    rng = np.random.default_rng(10 + W)
    k, nt = 5, 64
    x = rng.standard_normal(12 * k).astype(np.float32)
    out = np.zeros(nt * 12, np.float32)
    _tile_sum(x, out, k, grid=1, workgroup=nt, wave_width=W)
    acc = np.zeros((nt, 12), np.float32)
    g = np.arange(nt, dtype=np.float32)[:, None]
    for kk in range(k):
        acc = fma_f32(x[kk * 12:(kk + 1) * 12][None, :], g, acc)
    assert np.array_equal(out.reshape(nt, 12), (acc + np.float32(1)).astype(np.float32))


@aw.kernel
def _views(a: aw.In[aw.i32], out: aw.Out[aw.i32], d0: aw.i32, d1: aw.i32, d2: aw.i32):
    x = aw.view(a, (d0, d1, d2))
    y = aw.view(out, (d2, d1, d0))
    i = aw.global_id(0)
    if i < d0 * d1 * d2:
        c = i % d2
        b = (i // d2) % d1
        r = i // (d1 * d2)
        y[c, b, r] = x[r, b, c]


@pytest.mark.parametrize("W", WS)
def test_view_indexes_with_run_time_shapes(W: int) -> None:
    d = (3, 5, 7)
    a = np.arange(np.prod(d), dtype=np.int32) * 3 - 50
    out = np.full(np.prod(d), -12345, np.int32)
    _views(a, out, *d, grid=2, workgroup=64, wave_width=W)
    assert np.array_equal(out, a.reshape(d).transpose(2, 1, 0).reshape(-1))


@aw.kernel
def _misaligned(x: aw.In[aw.f32], y: aw.Out[aw.f32], off: aw.i32):
    v = aw.load4(x, off)
    aw.store4(y, 0, v)


def test_run_time_misaligned_vector_load_is_an_emulation_error() -> None:
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(4, np.float32)
    _misaligned(x, y, 4, grid=1, workgroup=1)
    assert np.array_equal(y, x[4:8])
    with pytest.raises(EmulationError, match="misaligned"):
        _misaligned(x, y, 2, grid=1, workgroup=1)


# ----------------------------------------------------------------------------- errors

@aw.kernel
def _runtime_index(out: aw.Out[aw.f32], i: aw.i32):
    acc = aw.register_array(aw.f32, 4)
    out[0] = acc[i]


@aw.kernel
def _out_of_range(out: aw.Out[aw.f32]):
    acc = aw.register_array(aw.f32, (2, 2))
    out[0] = acc[1, 2]


@aw.kernel
def _too_big(out: aw.Out[aw.f32]):
    acc = aw.register_array(aw.f32, (32, 32))
    out[0] = acc[0, 0]


@aw.kernel
def _wrong_type(out: aw.Out[aw.f32]):
    acc = aw.register_array(aw.i32, 2)
    acc[0] = 1.5 * aw.f32(aw.global_id(0))
    out[0] = aw.f32(acc[0])


@aw.kernel
def _misaligned_const(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    v = aw.load4(x, 6)
    aw.store4(out, 0, v)


@aw.kernel
def _misaligned_local(out: aw.Out[aw.f32]):
    t = aw.local_array(aw.f32, 16)
    aw.store2(t, 3, (1.0, 2.0))
    out[0] = t[3]


@aw.kernel
def _f64_vector(x: aw.In[aw.f64], out: aw.Out[aw.f64]):
    v = aw.load2(x, 0)
    out[0] = v[0]


@aw.kernel
def _store_to_input(x: aw.In[aw.f32]):
    aw.store4(x, 0, (1.0, 2.0, 3.0, 4.0))


@aw.kernel
def _load_from_output(x: aw.Out[aw.f32]):
    v = aw.load4(x, 0)
    x[0] = v[0]


@aw.kernel
def _three_values(x: aw.Out[aw.f32]):
    aw.store4(x, 0, (1.0, 2.0, 3.0))


@aw.kernel
def _view_indices(x: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
    v = aw.view(x, (n, n))
    out[0] = v[1]


@aw.kernel
def _view_float_shape(x: aw.In[aw.f32], out: aw.Out[aw.f32]):
    v = aw.view(x, (2.5, 4))
    out[0] = v[0, 0]


@pytest.mark.parametrize("kern, needle, words", [
    (_runtime_index, "out[0] = acc[i]", ("compile-time", "run-time i32", "aw.static_range")),
    (_out_of_range, "acc[1, 2]", ("index 2 is out of range", "size 2")),
    (_too_big, "register_array(aw.f32, (32, 32))", ("1024 elements", "limit is 256")),
    (_wrong_type, "acc[0] = 1.5", ("holds i32", "f32 value")),
    (_misaligned_const, "aw.load4(x, 6)", ("element index 6 is not a multiple of 4", "16 bytes")),
    (_misaligned_local, "aw.store2(t, 3", ("byte offset 12 is not a multiple of 8",)),
    (_f64_vector, "aw.load2(x, 0)", ("32-bit elements", "f64")),
    (_store_to_input, "aw.store4(x, 0", ("aw.In (read only)",)),
    (_load_from_output, "aw.load4(x, 0)", ("aw.Out (write only)",)),
    (_three_values, "aw.store4(x, 0", ("needs 4 values, got 3",)),
    (_view_indices, "out[0] = v[1]", ("needs 2 indices, got 1",)),
    (_view_float_shape, "aw.view(x, (2.5, 4))", ("non-negative integers", "2.5")),
])
def test_errors_point_at_the_line(kern, needle: str, words: tuple[str, ...]) -> None:
    _error(kern, needle, *words)


@aw.kernel
def _const_in_subscript_target(out: aw.Out[aw.f32]):
    k = 2
    out[k] = 1.0
    acc = aw.register_array(aw.f32, k)  # k is still a compile-time constant
    out[0] = acc[1]


def test_names_read_in_a_subscript_target_stay_compile_time_constants() -> None:
    out = np.full(3, 5.0, np.float32)
    _const_in_subscript_target(out, grid=1, workgroup=1)
    assert list(out) == [0.0, 5.0, 1.0]


# ----------------------------------------------------------------------------- backends

def test_ptx_uses_vector_and_non_coherent_loads() -> None:
    from anywave.backends import ptx

    text = ptx.translate(_rotate.compile()).text
    assert "ld.global.nc.v4.b32" in text  # x is aw.In: the read-only path
    assert "ld.global.nc.v2.b32" in text
    assert "st.global.v4.b32" in text and "st.global.v2.b32" in text
    assert "st.shared.v4.b32" in text and "ld.shared.v4.b32" in text


def test_ptx_reads_a_read_write_buffer_coherently() -> None:
    from anywave.backends import ptx
    from anywave.kernels.vec import saxpy4_kernel

    text = ptx.translate(saxpy4_kernel.compile()).text
    assert "ld.global.nc.v4.b32" in text  # x
    assert "ld.global.v4.b32" in text  # y is aw.Buffer: never the non-coherent path


@pytest.mark.parametrize("dialect", ["opencl", "sycl", "hip", "metal"])
def test_c_dialects_use_one_16_byte_access(dialect: str) -> None:
    import importlib

    from anywave.backends import cfamily

    mod = importlib.import_module(f"anywave.backends.{dialect}")
    d = getattr(mod, dialect.upper())
    text = cfamily.render(_rotate.compile(), d, 32).text
    assert f"{d.vec4} q = *(" in text  # one vector load
    assert f"= {d.vec4_make(['r'])[:-2]}" in text  # one vector store
