"""Names assigned inside ``aw.static_range`` bodies are compile-time ints (typed like literals)
wherever the loop sits -- in a run-time ``if``, nested ifs, a run-time ``for``/``while``, nested
static loops, an ``@aw.func`` (issue 28: warp-synchronous tails such as ``if v < off`` with a
``u32`` v). The rule (docs/guide/types.md, ``astscan.unrolled_names``): every binding of the
name is a plain or augmented assignment directly in a static body; while it is assigned ints it
is a compile-time int; read after a run-time if or loop it is the paths' common int, refused
where a path leaves it unbound, and a variable (as before) where the paths leave different ints
or a run-time value follows an int.

Each kernel runs on the emulator at W = 8, 16, 32, 64; expected values are computed here with
Python ints (u32 wrap-around by masking), never taken from the emulator."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

import anywave as aw
from anywave.compiler.astscan import unrolled_names

WS = (8, 16, 32, 64)
N_THREADS = 128
M32 = 0xFFFFFFFF


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(28)
    x = rng.integers(0, 1 << 32, N_THREADS, dtype=np.uint64).astype(np.uint32)
    x[:16] = np.arange(16)  # small values: the `v < off` branches are taken
    x[16:20] = [M32, 1 << 31, (1 << 31) - 1, 3000000001]  # where signed and unsigned order differ
    return x


def _run(kernel, *args, W: int):
    kernel(*args, grid=N_THREADS // 64, workgroup=64, target="emulator", wave_width=W)


# ------------------------------------------------------------------ the warp tail of the issue

@aw.kernel
def warp_tail(x: aw.In[aw.u32], out: aw.Out[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    v = x[i]
    if i < n:
        for k in aw.static_range(4):
            off = 1 << k
            if v < off:  # a u32 comparison: off is a compile-time int, like the literal 1 << k
                v = v + off
            v = v + (off << 28)  # 2^28 .. 2^31: fits u32 (not i32), wraps in u32
            d = v >> k  # a run-time value first: d is a variable, as before
            v = v + (d & 1)
    out[i] = v


def _warp_tail_ref(x: np.ndarray, n: int) -> np.ndarray:
    out = []
    for i, v in enumerate(int(a) for a in x):
        if i < n:
            for k in range(4):
                off = 1 << k
                if v < off:
                    v = (v + off) & M32
                v = (v + (off << 28)) & M32
                d = v >> k
                v = (v + (d & 1)) & M32
        out.append(v)
    return np.array(out, np.uint32)


@pytest.mark.parametrize("W", WS)
def test_warp_tail_inside_a_runtime_if(W):
    x = _inputs()
    out = np.zeros(N_THREADS, np.uint32)
    _run(warp_tail, x, out, 100, W=W)
    assert np.array_equal(out, _warp_tail_ref(x, 100))


# ------------------------------------------------------------------ nested ifs, run-time for, nested static loops

@aw.kernel
def nested(x: aw.In[aw.u32], out: aw.Out[aw.u32], n: aw.i32, reps: aw.i32):
    i = aw.global_id(0)
    v = x[i]
    for _r in range(reps):
        if i < n:
            if (i & 1) == 0:
                for a in aw.static_range(2):
                    for b in aw.static_range(3):
                        sh = a * 3 + b + 1  # 1 .. 6
                        v = v ^ (v >> sh)
                        m = 0x9E3779B9 + sh  # past i32's range: a u32 literal here
                        v = v * m
            else:
                for k in aw.static_range(3):
                    c = 3000000000 - k
                    if v > c:
                        v = v - c
                    v = v + 1
    out[i] = v


def _nested_ref(x: np.ndarray, n: int, reps: int) -> np.ndarray:
    out = []
    for i, v in enumerate(int(a) for a in x):
        for _ in range(reps):
            if i < n:
                if i % 2 == 0:
                    for a in range(2):
                        for b in range(3):
                            sh = a * 3 + b + 1
                            v ^= v >> sh
                            v = (v * (0x9E3779B9 + sh)) & M32
                else:
                    for k in range(3):
                        c = 3000000000 - k
                        if v > c:
                            v -= c
                        v = (v + 1) & M32
        out.append(v)
    return np.array(out, np.uint32)


@pytest.mark.parametrize("W", WS)
def test_nested_ifs_in_a_runtime_for_with_nested_static_loops(W):
    x = _inputs()
    out = np.zeros(N_THREADS, np.uint32)
    _run(nested, x, out, 90, 3, W=W)
    assert np.array_equal(out, _nested_ref(x, 90, 3))


@aw.kernel
def in_while(x: aw.In[aw.u32], out: aw.Out[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    v = x[i]
    j = 0
    while j < n:
        for k in aw.static_range(4):
            bit = 1 << (31 - k)  # 2^31 .. 2^28
            if (v & bit) != 0:
                v = v ^ (bit >> 1)
            v = v + bit
        j += 1
    out[i] = v


@pytest.mark.parametrize("W", WS)
def test_inside_a_runtime_while(W):
    x = _inputs()
    out = np.zeros(N_THREADS, np.uint32)
    _run(in_while, x, out, 2, W=W)
    exp = []
    for v in (int(a) for a in x):
        for _ in range(2):
            for k in range(4):
                bit = 1 << (31 - k)
                if v & bit:
                    v ^= bit >> 1
                v = (v + bit) & M32
        exp.append(v)
    assert np.array_equal(out, np.array(exp, np.uint32))


# ------------------------------------------------------------------ @aw.func

@aw.func
def clamp_tail(v, t):
    if t < 100:
        for k in aw.static_range(5):
            off = 16 >> k  # 16, 8, 4, 2, 1
            if v >= off:  # v: u32
                v = v - off
    return v


@aw.kernel
def func_tail(x: aw.In[aw.u32], out: aw.Out[aw.u32]):
    i = aw.global_id(0)
    out[i] = clamp_tail(x[i], aw.u32(i))


@pytest.mark.parametrize("W", WS)
def test_inside_an_aw_func(W):
    x = _inputs()
    out = np.zeros(N_THREADS, np.uint32)
    _run(func_tail, x, out, W=W)
    exp = []
    for t, v in enumerate(int(a) for a in x):
        if t < 100:
            for k in range(5):
                off = 16 >> k
                if v >= off:
                    v -= off
        exp.append(v)
    assert np.array_equal(out, np.array(exp, np.uint32))


# ------------------------------------------------------------------ read after the if or loop

@aw.kernel
def after_same(x: aw.In[aw.u32], out: aw.Out[aw.u32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        for k in aw.static_range(4):
            last = k * 2  # 6 after the loop
    else:
        for k in aw.static_range(2):
            last = 6 + k * 0
    out[i] = x[i] + (last << 29)  # 6 << 29 = 3221225472: a compile-time int on both paths


@pytest.mark.parametrize("W", WS)
def test_read_after_an_if_whose_paths_agree_is_a_compile_time_int(W):
    x = _inputs()
    out = np.zeros(N_THREADS, np.uint32)
    _run(after_same, x, out, 70, W=W)
    exp = np.array([(int(a) + (6 << 29)) & M32 for a in x], np.uint32)
    assert np.array_equal(out, exp)


@aw.kernel
def after_differs(out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        for k in aw.static_range(4):
            off = 1 << k
    else:
        for k in aw.static_range(2):
            off = 1 << k
    out[i] = i * off  # the paths leave 8 and 2: an i32 variable, as before


@aw.kernel
def loop_reads_before_rebinding(out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    v = i
    for k in aw.static_range(2):
        step = k + 1  # 2 before the loop
    for _j in range(n):
        v = v + step  # 2 in the first iteration, 5 in the others: a variable
        for k in aw.static_range(3):
            step = k + 3
    out[i] = v


@aw.kernel
def int_then_runtime(out: aw.Out[aw.i32], n: aw.i32):
    i = aw.global_id(0)
    acc = 0
    if i < n:
        for k in aw.static_range(3):
            w = k * 2
            w = w + i  # a run-time value after an int: w is a variable
            acc = acc + w
    out[i] = acc


@pytest.mark.parametrize("W", WS)
def test_where_a_compile_time_int_cannot_be_one_it_is_a_variable_as_before(W):
    i = np.arange(N_THREADS, dtype=np.int64)
    out = np.zeros(N_THREADS, np.int32)
    _run(after_differs, out, 50, W=W)
    assert np.array_equal(out, np.where(i < 50, i * 8, i * 2).astype(np.int32))
    _run(loop_reads_before_rebinding, out, 4, W=W)
    assert np.array_equal(out, (i + 2 + 5 * 3).astype(np.int32))
    _run(int_then_runtime, out, 77, W=W)
    assert np.array_equal(out, np.where(i < 77, sum(2 * k + i for k in range(3)), 0).astype(np.int32))


# ------------------------------------------------------------------ refusals

def test_read_after_an_if_that_binds_it_on_one_path_is_refused():
    @aw.kernel
    def one_path(out: aw.Out[aw.u32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            for k in aw.static_range(4):
                off = 1 << k
        out[i] = off

    with pytest.raises(aw.CompileError, match=r"'off' is a compile-time int \(a name assigned only inside "
                       r"aw.static_range loops\) and is unbound on some paths through the run-time if at line "
                       r"\d+ \(8 / unbound\), so it cannot be read after it"):
        one_path.compile()


def test_read_after_a_runtime_loop_that_binds_it_is_refused():
    @aw.kernel
    def after_loop(out: aw.Out[aw.u32], n: aw.i32):
        i = aw.global_id(0)
        for _j in range(n):
            for k in aw.static_range(4):
                off = 1 << k
        out[i] = off

    with pytest.raises(aw.CompileError, match=r"'off' is a compile-time int .* unbound on some paths through "
                       r"the run-time loop at line \d+ \(unbound / 8\)"):
        after_loop.compile()


def test_a_variable_read_as_u32_in_the_body_says_why_it_is_a_variable():
    @aw.kernel
    def differs_u32(out: aw.Out[aw.u32], n: aw.i32):
        i = aw.global_id(0)
        t = aw.u32(i)
        if i < n:
            for k in aw.static_range(4):
                off = 1 << k
                if t < off:
                    t = t + 1
        else:
            for k in aw.static_range(2):
                off = 1 << k
        out[i] = t + aw.u32(off)

    with pytest.raises(aw.CompileError, match=r"different types u32 and i32.*note: 'off' is a variable of the "
                       r"type of its first value, not a compile-time int, because it is read at line \d+ after "
                       r"the run-time if at line \d+, whose paths leave it different compile-time ints \(8 / 2\)"):
        differs_u32.compile()


# ------------------------------------------------------------------ the rule on the syntax

def test_unrolled_names_sets():
    src = textwrap.dedent('''
        def f(x, n):
            top = 1
            for k in aw.static_range(4):
                s = k            # straight: static body at the top level
                for j in aw.static_range(2):
                    s2 = j       # straight: nested static body
            if n:
                for k in aw.static_range(4):
                    off = 1 << k  # nested: a static body in a run-time if
                    if off:
                        inner = 1  # no: in an if inside the body
                while n:
                    for k in aw.static_range(2):
                        w = k     # nested: a static body in a while
                        top = k   # no: also assigned at the top
                for q in range(3):
                    for k in aw.static_range(2):
                        x = k     # no: a parameter
                        y: int = 0  # no: annotated
        ''')
    fd = ast.parse(src).body[0]

    def is_static(it):
        return isinstance(it, ast.Call) and ast.unparse(it.func) == "aw.static_range"

    straight, nested_ = unrolled_names(fd, is_static)
    assert straight == {"s", "s2"}
    assert nested_ == {"off", "w"}


def test_the_module_kernels_use_static_range_inside_runtime_code():
    """The kernels above do put their static loops inside run-time code (what the test is about)."""
    for k in (warp_tail, nested, in_while, after_same):
        tree = ast.parse(textwrap.dedent(inspect.getsource(k.fn)))
        fd = tree.body[0]
        _, nested_ = unrolled_names(fd, lambda it: isinstance(it, ast.Call)
                                    and ast.unparse(it.func) == "aw.static_range")
        assert nested_, k.fn.__name__
