"""Register pressure (compiler/spill.py, docs/spec.md §4.3 "Spilling"): a kernel that keeps more
than 255 values alive compiles by keeping some in local memory, reports its registers and
spills, and gives the same bits as the same computation written without the pressure and as the
NumPy reference, at W = 8..64."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.emu import emulate
from anywave.errors import LaunchConfigError
from anywave.isa.types import LIMITS
from anywave.kernels.reference import fma_f32

WS = (8, 16, 32, 64)
R = 160  # two register arrays of R values, all alive at once: 2 R + a few > 255


@aw.kernel
def _pressure(x: aw.In[aw.f32], out: aw.Out[aw.f32], *, r: int = R):
    g = aw.global_id(0)
    a = aw.register_array(aw.f32, r)
    b = aw.register_array(aw.f32, r)
    for i in aw.static_range(r):
        a[i] = x[g * 4 + i % 4] * aw.f32(i + 1)
        b[i] = x[g * 4 + (i + 1) % 4] + aw.f32(i)
    s = aw.f32(0.0)
    for i in aw.static_range(r):
        s = aw.fma(a[i], b[(7 * i) % r], s)
    for i in aw.static_range(r):
        s = s - b[i]
    if g % 3 == 0:  # a spilled value updated in a branch (masked lanes keep theirs)
        a[5] = a[5] * 2.0
    out[g] = s + a[5]


@aw.kernel
def _no_pressure(x: aw.In[aw.f32], out: aw.Out[aw.f32], *, r: int = R):
    # the same arithmetic, every operand recomputed where it is used: few values alive
    g = aw.global_id(0)
    s = aw.f32(0.0)
    for i in aw.static_range(r):
        j = (7 * i) % r
        s = aw.fma(x[g * 4 + i % 4] * aw.f32(i + 1), x[g * 4 + (j + 1) % 4] + aw.f32(j), s)
    for i in aw.static_range(r):
        s = s - (x[g * 4 + (i + 1) % 4] + aw.f32(i))
    a5 = x[g * 4 + 1] * aw.f32(6)
    if g % 3 == 0:
        a5 = a5 * 2.0
    out[g] = s + a5


def _reference(x: np.ndarray, n: int, r: int = R) -> np.ndarray:
    q = x.reshape(n, 4)
    f = np.float32
    a = [(q[:, i % 4] * f(i + 1)).astype(f) for i in range(r)]
    b = [(q[:, (i + 1) % 4] + f(i)).astype(f) for i in range(r)]
    s = np.zeros(n, f)
    for i in range(r):
        s = fma_f32(a[i], b[(7 * i) % r], s)
    for i in range(r):
        s = (s - b[i]).astype(f)
    a5 = np.where(np.arange(n) % 3 == 0, (a[5] * f(2)).astype(f), a[5])
    return (s + a5).astype(f)


def _run(kern, x: np.ndarray, n: int, W: int, wg: int = 64) -> np.ndarray:
    m = kern.compile()
    out = np.full(n, np.nan, np.float32)
    emulate(m, m.kernels[0].name, grid=n // wg, workgroup=wg, args={"x": x, "out": out}, wave_width=W,
            check=True)
    return out


def test_the_kernel_spills_and_reports_it() -> None:
    k = _pressure.compile().kernels[0]
    info = _pressure.resources()
    assert k.registers <= LIMITS.max_registers and info["registers"] == k.registers
    assert info["spilled"] > 0 and info["bytes_per_thread"] >= 4 * info["spilled"]
    assert k.local_memory == info["local_memory"] >= 64 * info["bytes_per_thread"]
    assert k.max_workgroup_size == info["max_workgroup_size"] >= 64
    assert k.local_memory <= LIMITS.min_local_memory
    low = _no_pressure.resources()
    assert low["spilled"] == 0 and low["bytes_per_thread"] == 0 and low["max_workgroup_size"] is None


@pytest.mark.parametrize("W", WS)
def test_spilled_kernel_gives_the_bits_of_the_unpressured_one(W: int) -> None:
    n = 128
    x = np.random.default_rng(W).standard_normal(4 * n).astype(np.float32)
    got = _run(_pressure, x, n, W)
    np.testing.assert_array_equal(got.view(np.uint32), _run(_no_pressure, x, n, W).view(np.uint32))
    np.testing.assert_array_equal(got.view(np.uint32), _reference(x, n).view(np.uint32))


def test_spills_that_do_not_fit_local_memory_are_a_clear_error() -> None:
    from anywave.compiler import CompileError

    big = aw.kernel(workgroup=1024)(_pressure.fn)
    with pytest.raises(CompileError, match=r"values spilled to \d+ bytes of local memory per thread do not fit: "
                                           r"1024 threads"):
        big.compile()


def test_a_workgroup_beyond_the_spill_area_is_refused() -> None:
    m = _pressure.compile()
    k = m.kernels[0]
    n = 2 * k.max_workgroup_size
    with pytest.raises(LaunchConfigError, match=f"allows at most {k.max_workgroup_size}"):
        emulate(m, k.name, grid=1, workgroup=n, args={"x": np.zeros(4 * n, np.float32),
                                                      "out": np.zeros(n, np.float32)}, wave_width=32)


def test_compile_command_reports_spills(tmp_path, capsys) -> None:
    from anywave import cli

    src = tmp_path / "k.py"
    src.write_text(
        "import anywave as aw\n\n@aw.kernel\ndef hot(x: aw.In[aw.f32], out: aw.Out[aw.f32]):\n"
        "    g = aw.global_id(0)\n    a = aw.register_array(aw.f32, 200)\n    b = aw.register_array(aw.f32, 200)\n"
        "    for i in aw.static_range(200):\n        a[i] = x[g + i]\n        b[i] = x[g + 2 * i]\n"
        "    s = aw.f32(0.0)\n    for i in aw.static_range(200):\n        s = s + a[i] * b[199 - i]\n"
        "    out[g] = s\n")
    assert cli.main(["compile", str(src), "-o", str(tmp_path / "k.wbin")]) == 0
    text = capsys.readouterr().out
    assert "hot (" in text and "registers, " in text and "values spilled to" in text, text


# slow tier: the Intel OpenCL compiler takes ~80 s over this one kernel (320 values, unrolled). The
# default tier covers its path: the spilled .wbin's bits on the emulator at every W (above), and
# the local-memory loads and stores spills compile to on OpenCL (conformance groups memory, perf)
@pytest.mark.slow
@pytest.mark.opencl
def test_spilled_kernel_on_opencl() -> None:
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        t = get_target("opencl", wave_width=16)
    except (TargetUnavailable, ValueError) as e:
        pytest.skip(str(e))
    n = 64
    x = np.random.default_rng(5).standard_normal(4 * n).astype(np.float32)
    out = np.zeros(n, np.float32)
    t.launch(_pressure.compile(), _pressure.compile().kernels[0].name, (1,), (64,), {"x": x, "out": out})
    np.testing.assert_array_equal(out.view(np.uint32), _reference(x, n).view(np.uint32))
