"""Idioms of the Python kernel language from issue 28 item 2: ``aw.bool_`` buffers, ``aw.finfo`` /
``aw.iinfo``, dtype-generic kernels (a dtype as a compile-time parameter), and compile-time ints
that take the type of the operand they meet, like literals. Expected values come from NumPy (and
ml_dtypes for bfloat16), never from the emulator; each kernel runs on the emulator at every W and
on the compiled CPU targets at their default-tier W (every W in the sweep tier)."""

from __future__ import annotations

import importlib.util
import sys
import typing

import ml_dtypes
import numpy as np
import pytest

import anywave as aw
from anywave.errors import WaveError
from tiers import cases

WS = (8, 16, 32, 64)
RUNTIMES = [("emulator", w) for w in WS] + cases([(t, w) for t in ("opencl", "cpu") for w in WS])
RUNTIMES = [pytest.param(*(p.values if hasattr(p, "values") else p), marks=getattr(p, "marks", ()),
                         id="{}-W{}".format(*(p.values if hasattr(p, "values") else p))) for p in RUNTIMES]


def _skip_unavailable(target: str) -> None:
    if target != "emulator" and target not in aw.available_targets():
        pytest.skip(f"target {target} is not available here")


# ------------------------------------------------------------------ bool buffers

@aw.kernel
def bool_kernel(x: aw.In[aw.f32], m: aw.In[aw.bool_], big: aw.Out[bool], y: aw.Buffer[aw.f32]):
    i = aw.global_id(0)
    big[i] = x[i] > 0.5
    if m[i]:
        y[i] = x[i]
    if i == 3:
        big[i] = True


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_bool_buffers(target, W):
    _skip_unavailable(target)
    rng = np.random.default_rng(1)
    x = rng.random(96).astype(np.float32)
    m = rng.random(96) < 0.4
    m.view(np.uint8)[5] = 7  # a byte that is not 0 is true (NumPy's and C's reading)
    big = np.zeros(96, bool)
    y = np.full(96, -1.0, np.float32)
    bool_kernel(x, m, big, y, grid=3, workgroup=32, target=target, wave_width=W)
    exp = x > 0.5
    exp[3] = True
    assert np.array_equal(big, exp)
    assert set(np.unique(big.view(np.uint8))) <= {0, 1}  # stores write 0 or 1
    assert np.array_equal(y, np.where(m.view(np.uint8) != 0, x, -1.0).astype(np.float32))


def test_bool_buffer_abi_and_errors():
    k = bool_kernel.compile().kernels[0]
    assert [a.type.spelling for a in k.args] == ["f32", "u8", "u8", "f32"]  # one byte per bool
    assert repr(bool_kernel.params[1].ann) == "aw.In[aw.bool_]"
    with pytest.raises(aw.LaunchError, match="expected dtype bool, got uint8"):
        bool_kernel(np.zeros(32, np.float32), np.zeros(32, np.uint8), np.zeros(32, bool), np.zeros(32, np.float32),
                    grid=1, workgroup=32, target="emulator")

    @aw.kernel
    def store_int(out: aw.Out[aw.bool_]):
        out[aw.global_id(0)] = 2

    with pytest.raises(aw.CompileError, match="cannot store int 2 into bool elements"):
        store_int.compile()


# ------------------------------------------------------------------ finfo / iinfo

_FLOATS = [(aw.f16, np.finfo(np.float16)), (aw.bf16, ml_dtypes.finfo(ml_dtypes.bfloat16)),
           (aw.f32, np.finfo(np.float32)), (aw.f64, np.finfo(np.float64))]


@pytest.mark.parametrize(("t", "ref"), _FLOATS, ids=lambda v: getattr(v, "name", ""))
def test_finfo_agrees_with_numpy(t, ref):
    f = aw.finfo(t)
    for name in ("eps", "epsneg", "max", "min", "tiny", "smallest_normal", "smallest_subnormal", "resolution",
                 "precision", "nmant", "nexp", "maxexp", "minexp", "bits"):
        assert getattr(f, name) == getattr(ref, name), name
    assert f.max.dtype == np.dtype(t.np_dtype)  # NumPy scalars of the type itself
    assert aw.finfo(np.dtype(t.np_dtype)) == f


@pytest.mark.parametrize("t", [aw.i8, aw.u8, aw.i16, aw.u16, aw.i32, aw.u32, aw.i64, aw.u64], ids=lambda t: t.name)
def test_iinfo_agrees_with_numpy(t):
    i, ref = aw.iinfo(t), np.iinfo(t.np_dtype)
    assert (int(i.min), int(i.max), i.bits) == (ref.min, ref.max, ref.bits)


def test_info_errors():
    with pytest.raises(aw.CompileError, match="takes a float type"):
        aw.finfo(aw.i32)
    with pytest.raises(aw.CompileError, match="takes an integer type"):
        aw.iinfo(aw.f32)
    with pytest.raises(aw.CompileError, match="takes a dtype"):
        aw.finfo("no such type")


# ------------------------------------------------------------------ dtype-generic kernels

#: the type parameter of the kernels below, for linters (the frontend matches it to the
#: compile-time parameter of the same name); without it, string annotations work as well
#: (test_type_parameter_spellings)
T = typing.TypeVar("T")


@aw.kernel
def amax_kernel(x: aw.In[T], out: aw.Out[T], n: aw.i32, T: aw.constexpr):
    """The largest of x[0..n): a loop from -finfo(T).max (or iinfo(T).min), one lane writes."""
    if T.is_float:
        best = -aw.finfo(T).max
    else:
        best = aw.iinfo(T).min
    for j in range(n):
        best = max(best, x[j])
    if aw.global_id(0) == 0:
        out[0] = best


@aw.kernel
def axpy_kernel(a: T, x: aw.In[T], y: aw.Buffer[T], *, T: aw.constexpr = aw.f32):
    i = aw.global_id(0)
    y[i] = a * x[i] + y[i]


_GENERIC = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32, np.uint32, np.int64]


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_generic_kernel_takes_the_dtype_from_its_buffer(target, W):
    _skip_unavailable(target)
    rng = np.random.default_rng(2)
    for dt in _GENERIC:
        x = (rng.standard_normal(50) * 100).astype(dt)
        out = np.zeros(1, dt)
        amax_kernel(x, out, 50, grid=1, workgroup=32, target=target, wave_width=W)
        assert out[0] == x.max(), dt


def test_generic_kernel_specialisations():
    # one module per dtype, each with the buffers of its type
    for t, s in ((aw.f16, "f16"), (aw.f64, "f64"), (aw.u32, "u32")):
        k = amax_kernel.compile(T=t).kernels[0]
        assert [a.type.spelling for a in k.args] == [s, s, "i32"]
    assert amax_kernel.compile(T=np.float32).kernels[0].args[0].type.spelling == "f32"  # a NumPy type too
    # a scalar of type T and a default T
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    axpy_kernel(2.0, x, y, grid=1, workgroup=8, target="emulator")
    assert np.array_equal(y, (np.float32(2) * x + 1).astype(np.float32))
    x64, y64 = np.arange(8, dtype=np.float64) / 3, np.ones(8)
    axpy_kernel(0.1, x64, y64, T=aw.f64, grid=1, workgroup=8, target="emulator")
    assert np.array_equal(y64, 0.1 * (np.arange(8) / 3) + 1)


def test_generic_kernel_errors():
    with pytest.raises(aw.LaunchError, match="expected dtype float32, got float64"):
        axpy_kernel(2.0, np.zeros(8), np.zeros(8), grid=1, workgroup=8, target="emulator")  # the default T is f32
    with pytest.raises(aw.LaunchError, match="type parameter 'T' must be a dtype"):
        amax_kernel.compile(T=3)
    with pytest.raises(aw.LaunchError, match="compile-time constant 'T' was not given"):
        amax_kernel.compile()
    with pytest.raises(aw.LaunchError, match="expected dtype float16, got float32"):  # both buffers are T
        amax_kernel(np.zeros(4, np.float16), np.zeros(1, np.float32), 4, grid=1, workgroup=4, target="emulator")

    @aw.kernel
    def undefined(x: aw.In[V], out: aw.Out[aw.f32]):  # noqa: F821 - V is the point
        out[0] = 1.0

    with pytest.raises(aw.CompileError, match="annotation of 'x' in undefined.*name 'V' is not defined"):
        _ = undefined.params

    @aw.kernel
    def no_param(x: aw.In[U], out: aw.Out[aw.f32]):
        out[0] = 1.0

    with pytest.raises(aw.CompileError, match="'U' is not a compile-time parameter of the kernel"):
        _ = no_param.params


U = typing.TypeVar("U")


_SPELLINGS = {
    # annotations evaluated when the function is defined: T is a module-level TypeVar
    "typevar_kernels": "import typing\nimport anywave as aw\n\nT = typing.TypeVar('T')\n",
    # string annotations: T needs no definition, the parameter T: aw.constexpr names it
    "string_kernels": "from __future__ import annotations\nimport anywave as aw\n",
}
_NEG = """

@aw.kernel
def neg(x: aw.Buffer[T], T: aw.constexpr):
    i = aw.global_id(0)
    x[i] = -x[i]
"""


@pytest.mark.parametrize("name", sorted(_SPELLINGS))
def test_type_parameter_spellings(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(_SPELLINGS[name] + _NEG)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        x = np.arange(6, dtype=np.int64) - 2
        mod.neg(x, grid=1, workgroup=6, target="emulator")
        assert np.array_equal(x, -(np.arange(6) - 2))
    finally:
        del sys.modules[name]


# ------------------------------------------------------------------ compile-time ints like literals

@aw.kernel
def tree_marks(out: aw.Buffer[aw.u32]):
    """Counts, per thread, the steps of a halving tree it takes part in: ``t < off`` with a u32
    ``t`` and ``off = 1 << k`` from an unrolled loop (a compile-time int, typed like a literal)."""
    t = aw.u32(aw.local_id(0))
    for k in aw.static_range(5):
        off = 1 << k
        if t < off:
            out[t] += 1
        if t >= 2 * off:
            out[t] += 100


@pytest.mark.parametrize("W", WS)
def test_compile_time_ints_take_the_operands_type(W):
    out = np.zeros(64, np.uint32)
    tree_marks(out, grid=1, workgroup=64, target="emulator", wave_width=W)
    t = np.arange(64)
    exp = sum(((t < (1 << k)).astype(np.uint32) + 100 * (t >= 2 * (1 << k))) for k in range(5))
    assert np.array_equal(out, exp.astype(np.uint32))


def test_compile_time_ints_keep_the_literal_range_checks():
    @aw.kernel
    def neg_off(out: aw.Buffer[aw.u32]):
        t = aw.u32(aw.local_id(0))
        for k in aw.static_range(2):
            off = k - 1
            if t < off:
                out[t] = 1

    with pytest.raises(aw.CompileError, match="-1 does not fit in u32"):
        neg_off.compile()

    @aw.kernel
    def runtime_var(out: aw.Buffer[aw.u32]):
        t = aw.u32(aw.local_id(0))
        off = 16  # a variable (reassigned in a run-time loop): i32 unless annotated
        while off > 0:
            if t < off:
                out[t] += 1
            off //= 2

    with pytest.raises(aw.CompileError, match="different types u32 and i32"):
        runtime_var.compile()


# ------------------------------------------------------------------ local memory sized at launch

@aw.kernel
def reverse_blocks(x: aw.Buffer[aw.f32], bits: aw.Out[aw.u32]):
    """Each workgroup reverses its block of x through local memory sized at launch; a second
    aw.dynamic array views the same bytes as u32 (as every extern __shared__ array does)."""
    s = aw.local_array(aw.f32, aw.dynamic)
    u = aw.local_array(aw.u32, aw.dynamic)
    flag = aw.local_array(aw.i32, 4)  # a static array: after the dynamic bytes
    t = aw.local_id(0)
    n = s.shape[0]
    base = aw.workgroup_id(0) * n
    if t == 0:
        flag[0] = 7
    s[t] = x[base + t]
    aw.barrier()
    v = s[n - 1 - t]
    b = u[n - 1 - t]
    aw.barrier()
    x[base + t] = v + aw.f32(flag[0] - 7)
    bits[base + t] = b


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_local_memory_sized_at_launch(target, W):
    _skip_unavailable(target)
    for block in (32, 64):
        x = np.random.default_rng(block).standard_normal(4 * block).astype(np.float32)
        x0 = x.copy()
        bits = np.zeros(4 * block, np.uint32)
        reverse_blocks(x, bits, grid=4, workgroup=block, target=target, wave_width=W, local_bytes=4 * block,
                       **({"check": True} if target == "emulator" else {}))
        exp = x0.reshape(4, block)[:, ::-1].ravel()
        assert np.array_equal(x, exp)
        assert np.array_equal(bits, exp.view(np.uint32))


def test_local_memory_sized_at_launch_compiles_per_size_and_errors():
    assert [p.name for p in reverse_blocks.params] == ["x", "bits", "local_bytes"]
    m1, m2 = reverse_blocks.compile(local_bytes=128), reverse_blocks.compile(local_bytes=256)
    assert (m1.kernels[0].local_memory, m2.kernels[0].local_memory) == (128 + 16, 256 + 16)
    with pytest.raises(aw.CompileError, match="give the bytes with local_bytes=N"):
        reverse_blocks(np.zeros(32, np.float32), np.zeros(32, np.uint32), grid=1, workgroup=32, target="emulator")

    @aw.func
    def helper():
        return aw.local_array(aw.f32, aw.dynamic)

    @aw.kernel
    def via_func(x: aw.Out[aw.f32]):
        s = helper()
        x[0] = s[0]

    with pytest.raises(aw.CompileError, match="declared in the kernel's own body"):
        via_func.compile()


# ------------------------------------------------------------------ constant buffers

@aw.kernel
def nearest_centre(x: aw.In[aw.f32], centres: aw.Constant[aw.f32], label: aw.Out[aw.i32], k: aw.i32):
    """k-means' assignment step: every thread reads every centre (the uniform access constant
    memory serves well)."""
    i = aw.global_id(0)
    best = aw.finfo(aw.f32).max
    arg = 0
    for c in range(k):
        d = abs(x[i] - centres[c])
        if d < best:
            best = d
            arg = c
    label[i] = arg


@pytest.mark.parametrize(("target", "W"), RUNTIMES)
def test_constant_buffers(target, W):
    _skip_unavailable(target)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(128).astype(np.float32)
    centres = np.sort(rng.standard_normal(7)).astype(np.float32)
    label = np.zeros(128, np.int32)
    nearest_centre(x, centres, label, 7, grid=4, workgroup=32, target=target, wave_width=W)
    exp = np.argmin(np.abs(x[:, None] - centres[None, :]), axis=1)  # first index on ties, as the kernel
    assert np.array_equal(label, exp)


def test_constant_buffer_abi_limit_and_errors():
    m = nearest_centre.compile()
    a = m.kernels[0].args[1]
    assert (a.name, a.access.spelling, a.constant) == ("centres", "read", True)
    assert m.version == (1, 1)  # the constant hint is WAVE 1.1 (spec §1.4, §12)
    assert repr(nearest_centre.params[1].ann) == "aw.Constant[aw.f32]"
    x = np.zeros(32, np.float32)
    for target in ["emulator"] + [t for t in ("cpu",) if t in aw.available_targets()]:
        with pytest.raises(WaveError, match="constant buffers .* hold 65540 bytes; .* at most 65536"):
            nearest_centre(x, np.zeros(16385, np.float32), np.zeros(32, np.int32), 1, grid=1, workgroup=32,
                           target=target)

    @aw.kernel
    def writes(c: aw.Constant[aw.f32]):
        c[0] = 1.0

    with pytest.raises(aw.CompileError, match=r"declared aw.Constant\[f32\] \(read only\)"):
        writes.compile()


def test_an_int_float_mix_names_the_operand_to_cast():
    @aw.kernel
    def scale(x: aw.Buffer[aw.f32], k: aw.i32):
        i = aw.global_id(0)
        x[i] = x[i] * k

    with pytest.raises(aw.CompileError, match=r"different types f32 and i32; cast the i32 operand, e\.g\. aw\.f32"):
        scale.compile()


def test_a_device_function_called_on_the_host_names_itself():
    # aw.exp is an @aw.func of the standard library that uses intrinsics (aw.rint ...): the error
    # must name aw.exp, not the intrinsic inside it
    with pytest.raises(aw.CompileError, match=r"aw\.exp\(\) was called outside a kernel"):
        aw.exp(1.0)


def test_an_ellipsis_body_is_a_placeholder_like_pass():
    @aw.kernel
    def later(out: aw.Out[aw.f32], n: aw.i32):
        ...

    later.compile()  # compiles to a kernel that does nothing
