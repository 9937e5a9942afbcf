"""Issue 11, items 9, 14, 18, 23 and the caret xfail: language semantics and messages.

Expectations come from Python itself (``x and y``, ``x or y``) or from the documented choice
(integer ``//`` and ``%`` by zero: ``-1`` / all ones and ``x``, spec §8.1 and
docs/decisions.md "Kernel language"), never from the compiler's output.
"""



import numpy as np
import pytest

import anywave as aw

WIDTHS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------- item 9: // and % by zero

def _divmod_kernel(dt):
    @aw.kernel
    def divmod_k(a: aw.In[dt], b: aw.In[dt], q: aw.Out[dt], r: aw.Out[dt], n: aw.i32):  # noqa: ANN202
        i = aw.global_id(0)
        if i < n:
            q[i] = a[i] // b[i]
            r[i] = a[i] % b[i]

    return divmod_k


_INT_TYPES = [(aw.i32, np.int32), (aw.u32, np.uint32), (aw.i64, np.int64), (aw.u64, np.uint64)]


def _expected_divmod(x: int, y: int, bits: int, signed: bool) -> tuple[int, int]:
    """Python's floor division and modulo; by zero the documented choice: -1 (all ones)
    and x; wrapped to the type (MIN // -1 wraps to MIN)."""
    if y == 0:
        q, r = -1, x
    else:
        q, r = x // y, x % y
    mask = (1 << bits) - 1
    q, r = q & mask, r & mask
    if signed:
        q = q - (1 << bits) if q >> (bits - 1) else q
        r = r - (1 << bits) if r >> (bits - 1) else r
    return q, r


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("dt,npt", _INT_TYPES)
def test_integer_division_by_zero_is_consistent(W: int, dt, npt) -> None:
    info = np.iinfo(npt)
    signed = info.min < 0
    xs = [0, 1, 7, info.max, info.max - 5] + ([-1, -7, info.min, info.min + 3] if signed else [])
    ys = [0, 1, 3] + ([-1, -3] if signed else [2])
    rows = [(x, y) for x in xs for y in ys]
    a = np.array([r[0] for r in rows], npt)
    b = np.array([r[1] for r in rows], npt)
    q, r = np.zeros_like(a), np.zeros_like(a)
    n = len(rows)
    _divmod_kernel(dt)(a, b, q, r, n, grid=(n + 63) // 64, workgroup=64, target="emulator", wave_width=W)
    for k, (x, y) in enumerate(rows):
        assert (int(q[k]), int(r[k])) == _expected_divmod(x, y, info.bits, signed), (x, y)
        if y == 0:  # the identity x == (x // y) * y + x % y holds for y == 0 too
            assert int(r[k]) == x


# ----------------------------------------------------------------------------- item 14: and / or values

@aw.kernel
def _andor_i(x: aw.In[aw.i32], y: aw.In[aw.i32], o: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        o[4 * i] = x[i] and 3
        o[4 * i + 1] = x[i] or 3
        o[4 * i + 2] = x[i] and y[i]
        o[4 * i + 3] = x[i] or y[i] or 5


@aw.kernel
def _andor_f(x: aw.In[aw.f32], y: aw.In[aw.f32], o: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        o[3 * i] = x[i] and 2.5
        o[3 * i + 1] = x[i] or y[i]
        o[3 * i + 2] = x[i] and y[i]


@pytest.mark.parametrize("W", WIDTHS)
def test_and_or_give_python_values(W: int) -> None:
    xi = np.array([0, 1, -4, 7, 0, 2**31 - 1], np.int32)
    yi = np.array([5, 0, 9, -2, 0, 1], np.int32)
    o = np.zeros(4 * len(xi), np.int32)
    _andor_i(xi, yi, o, len(xi), grid=1, workgroup=len(xi), target="emulator", wave_width=W)
    want = []
    for a, b in zip(xi.tolist(), yi.tolist(), strict=True):
        want += [a and 3, a or 3, a and b, a or b or 5]
    assert o.tolist() == want

    xf = np.array([0.0, -0.0, 1.5, float("nan"), -2.0], np.float32)
    yf = np.array([3.0, 0.0, -1.0, 4.0, 0.0], np.float32)
    of = np.zeros(3 * len(xf), np.float32)
    _andor_f(xf, yf, of, len(xf), grid=1, workgroup=len(xf), target="emulator", wave_width=W)
    wantf = []
    for a, b in zip(xf.tolist(), yf.tolist(), strict=True):
        wantf += [a and 2.5, a or b, a and b]
    got = of.tolist()
    for g, w in zip(got, wantf, strict=True):
        assert (g == w and np.signbit(g) == np.signbit(w)) or (g != g and w != w), (got, wantf)


def test_and_with_effects_short_circuits() -> None:
    """The right operand's load runs only where the left one is true (out of bounds otherwise)."""
    @aw.kernel
    def sc(x: aw.In[aw.i32], y: aw.In[aw.i32], o: aw.Out[aw.i32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            o[i] = x[i] and y[x[i] - 1]

    x = np.array([0, 1, 2, 0], np.int32)
    y = np.array([10, 20], np.int32)
    o = np.full(4, -1, np.int32)
    sc(x, y, o, 4, grid=1, workgroup=4, target="emulator", wave_width=8)
    assert o.tolist() == [0, 10, 20, 0]


def test_bool_mixed_with_number_is_refused() -> None:
    @aw.kernel
    def mixed(x: aw.Buffer[aw.i32]):
        x[0] = (x[0] > 0) and 3

    with pytest.raises(aw.CompileError, match="operands of 'and' are a bool and int 3") as ei:
        mixed.compile()
    assert ei.value.loc is not None and ei.value.loc.col > 0


# ----------------------------------------------------------------------------- item 18: unroll cap

def test_unroll_is_capped_quickly(work_bound) -> None:  # noqa: ANN001
    @aw.kernel
    def big(x: aw.Buffer[aw.i32], n: aw.i32):
        for j in aw.range(n, unroll=100000):
            x[j] = 1

    # refused before any body is built: a bound on the work (Python calls; building 100000
    # copies would take millions), not on the time
    with pytest.raises(aw.CompileError, match=r"unroll=100000\) makes 100000 copies.*limit is 4096"), \
            work_bound(200_000) as w:
        big.compile()
    assert w.calls > 0


def test_nested_unroll_counts_all_copies() -> None:
    @aw.kernel
    def nested(x: aw.Buffer[aw.i32], n: aw.i32):
        for a in aw.static_range(64):
            for j in aw.range(n, unroll=128):
                x[j] = a

    with pytest.raises(aw.CompileError, match="8192 copies"):
        nested.compile()


def test_unroll_within_the_cap_still_works() -> None:
    @aw.kernel
    def ok(x: aw.Buffer[aw.i32], n: aw.i32):
        for j in aw.range(n, unroll=4):
            x[j] = j * 2

    x = np.zeros(10, np.int32)
    ok(x, 10, grid=1, workgroup=1, target="emulator")
    assert x.tolist() == [2 * j for j in range(10)]


# ----------------------------------------------------------------------------- item 23: messages

def test_yield_is_reported_as_unsupported() -> None:
    @aw.kernel
    def gen(x: aw.Buffer[aw.i32]):
        yield x[0]

    with pytest.raises(aw.CompileError, match="yield is not supported in a kernel"):
        gen.compile()


@pytest.mark.parametrize("body", ["buffer_plus", "buffer_store", "runtime_range", "runtime_shape", "lane_buffer"])
def test_messages_speak_the_users_terms(body: str) -> None:
    @aw.kernel
    def k(x: aw.Buffer[aw.i32], y: aw.Buffer[aw.i32], *, which: str = ""):
        i = aw.global_id(0)
        if which == "buffer_plus":
            x[0] = y + 1
        elif which == "buffer_store":
            x[0] = y
        elif which == "runtime_range":
            for j in aw.static_range((i, 0)):
                x[j] = 1
        elif which == "runtime_shape":
            t = aw.local_array(aw.i32, (i, 2))
            t[0, 0] = 1
        else:
            x[0] = aw.wave_shfl(x[0], y)

    with pytest.raises(aw.CompileError) as ei:
        k.compile(which=body)
    msg = str(ei.value)
    for leak in ("BufferArg", "LocalArray", "%i", "%v", "Access.", "index="):
        assert leak not in msg, msg
    assert "buffer 'y'" in msg or "an i32 value" in msg, msg


def test_caret_points_at_the_overflowing_literal_inside_an_expression() -> None:
    @aw.kernel
    def lit(x: aw.Buffer[aw.i32]):
        x[0] = x[1] + 5000000000

    with pytest.raises(aw.CompileError) as ei:
        lit.compile()
    lines = str(ei.value).splitlines()
    src = next(i for i, ln in enumerate(lines) if "5000000000" in ln and "x[1]" in ln)
    assert lines[src + 1].index("^") == lines[src].index("5000000000")


# ----------------------------------------------------------------------------- item 23: launch geometry

@aw.kernel
def _touch(x: aw.Buffer[aw.i32]):
    x[aw.global_id(0)] = 1


@pytest.mark.parametrize("grid", [(2.7,), 2.7, (2, 1.0), (True,), ("2",)])
def test_non_integer_grid_is_refused_not_truncated(grid) -> None:
    x = np.zeros(64, np.int32)
    with pytest.raises(aw.LaunchError) as ei:
        _touch(x, grid=grid, workgroup=1, target="emulator")
    shown = grid[-1] if isinstance(grid, tuple) else grid
    assert repr(shown) in str(ei.value)
    assert not x.any()


# ----------------------------------------------------------------------------- item 10: documented

@aw.kernel
def _shfl_cond(x: aw.In[aw.i32], y: aw.Out[aw.i32], z: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        v = x[i]
        y[i] = aw.wave_shfl(v, 0) if i % 2 == 1 else -1
        z[i] = aw.where(i % 2 == 1, aw.wave_shfl(v, 0), -1)


@pytest.mark.parametrize("W", WIDTHS)
def test_conditional_wave_op_is_a_branch_as_documented(W: int) -> None:
    """Spec §8.8 rule: a shuffle from a lane that is not executing gives the lane's own value.
    Under the branch (odd lanes only) lane 0 does not execute; under aw.where every lane does."""
    n = 2 * W
    x = np.arange(100, 100 + n, dtype=np.int32)
    y, z = np.zeros(n, np.int32), np.zeros(n, np.int32)
    _shfl_cond(x, y, z, n, grid=1, workgroup=n, target="emulator", wave_width=W)
    lanes = np.arange(n)
    odd = lanes % 2 == 1
    wave_lane0 = x[(lanes // W) * W]
    np.testing.assert_array_equal(y, np.where(odd, x, -1))
    np.testing.assert_array_equal(z, np.where(odd, wave_lane0, -1))
    from anywave.compiler import language

    assert "aw.where" in language.__doc__ and "branch" in language.__doc__


@aw.kernel
def _cond_mixed(x: aw.In[aw.i32], o: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        a = x[i]
        r = 0
        if a > 0 and a:
            r += 1
        if (a < 5 and a) or a == 9:
            r += 10
        if not (a and (a > 2)):
            r += 100
        k = 0
        while k < 3 and a:
            k += 1
        o[i] = r + 1000 * k + (7 if a > 1 and a else 8)


def test_mixed_bool_and_number_as_a_condition_is_truthiness() -> None:
    """In an if/while test, ``not`` operand or conditional-expression test only truthiness is
    used, so a bool may meet a number there, as in Python."""
    xs = [-3, 0, 1, 3, 9]
    x = np.array(xs, np.int32)
    o = np.zeros(len(xs), np.int32)
    _cond_mixed(x, o, len(xs), grid=1, workgroup=len(xs), target="emulator", wave_width=8)
    want = []
    for a in xs:
        r = 0
        if a > 0 and a:
            r += 1
        if (a < 5 and a) or a == 9:
            r += 10
        if not (a and (a > 2)):
            r += 100
        k = 0
        while k < 3 and a:
            k += 1
        want.append(r + 1000 * k + (7 if a > 1 and a else 8))
    assert o.tolist() == want
