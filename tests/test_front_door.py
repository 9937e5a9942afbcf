"""Issue 24, one front door: every launch above the runtimes reaches a driver through
:func:`anywave.jit.targets.drive` -- the kernel call, the module-level door
(:meth:`anywave.jit.targets.Target.launch`), the CLI's ``run`` (the emulator too), the
conformance report's runners -- with the geometry parsed once (:class:`anywave.abi.Dims3`); and
CUDA is a :class:`~anywave.runtime.driver.Driver` like the other runtimes, its conformance runner
the driver itself. Expected outputs are NumPy arithmetic on the inputs (small integers: exact in
f32); expected CUDA words are struct packing of the values passed."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

import anywave as aw
from anywave.abi import Dims3, dims3
from anywave.jit import launch as L
from anywave.jit import targets as T


@aw.kernel
def axpb(x: aw.In[aw.f32], y: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * a + 1.0


@aw.kernel
def tell(n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        aw.print("lane {} of {}", i, n)


def _expect(x: np.ndarray, a: float, n: int, size: int) -> np.ndarray:
    y = np.zeros(size, np.float32)
    y[:n] = x[:n] * np.float32(a) + np.float32(1.0)
    return y


@pytest.fixture
def drives(monkeypatch):
    """Every call into a driver from the launch layer: (target class, kernel, grid, workgroup)."""
    calls = []
    real = T.drive

    def counting(inst, module, k, grid, workgroup, values, options, bound=None):
        calls.append((type(inst).__name__, k.name, grid, workgroup))
        return real(inst, module, k, grid, workgroup, values, options, bound)

    monkeypatch.setattr(T, "drive", counting)
    monkeypatch.setattr(L, "drive", counting)  # the kernel call's full path took it by name
    return calls


def test_the_kernel_call_and_the_module_door_end_in_one_call_into_the_driver(drives):
    x = np.arange(40, dtype=np.float32)
    y = np.zeros(40, np.float32)
    axpb._calls.clear()
    axpb(x, y, 3.0, 37, grid=3, workgroup=16, target="emulator", wave_width=16)
    np.testing.assert_array_equal(y, _expect(x, 3.0, 37, 40))
    assert drives == [("EmulatorTarget", "axpb", (3, 1, 1), (16, 1, 1))]
    assert type(drives[0][2]) is Dims3 and type(drives[0][3]) is Dims3  # parsed once, by the kernel call
    y2 = np.zeros(40, np.float32)
    res = T.get_target("emulator").launch(axpb.compile(), "axpb", grid=3, workgroup=16, args=[x, y2, 2.0, 33],
                                          wave_width=8)
    np.testing.assert_array_equal(y2, _expect(x, 2.0, 33, 40))
    assert res.wave_width == 8 and len(drives) == 2
    y3 = np.zeros(40, np.float32)
    T.get_target("emulator").launch(axpb.compile(), "axpb", grid=(3,), workgroup=(16,),
                                    args={"n": 20, "a": -1.0, "y": y3, "x": x}, wave_width=32)
    np.testing.assert_array_equal(y3, _expect(x, -1.0, 20, 40))
    with pytest.raises(aw.LaunchError, match=r"takes 4 arguments \['x', 'y', 'a', 'n'\], got 3"):
        T.get_target("emulator").launch(axpb.compile(), "axpb", grid=1, workgroup=8, args=[x, y, 1.0])
    with pytest.raises(aw.LaunchError, match="stream= is for the cuda target, not 'emulator'"):
        T.get_target("emulator").launch(axpb.compile(), "axpb", grid=1, workgroup=8, args=[x, y, 1.0, 8], stream=3)


def test_the_module_door_gives_a_printing_kernel_its_print_buffer(capsys):
    T.get_target("emulator").launch(tell.compile(), "tell", grid=1, workgroup=8, args=[5], wave_width=8)
    assert capsys.readouterr().out.splitlines() == [f"lane {i} of 5" for i in range(5)]


@pytest.mark.parametrize("target", ["emulator", "opencl"])
def test_the_cli_run_goes_through_the_door(target, drives, tmp_path):
    from anywave import cli
    from anywave.binary.wbin import save

    if target not in T.available_targets():
        pytest.skip(f"target {target!r} is not available here")
    p = tmp_path / "axpb.wbin"
    save(axpb.compile(), p)
    x = np.arange(24, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    w = ["--wave-width", "16"] if target == "emulator" or 16 in T.get_target(target).wave_widths else []
    assert cli.main(["run", str(p), "--target", target, "--grid", "2", "--workgroup", "16", *w,
                     "--arg", f"x={tmp_path / 'x.npy'}", "--arg", "y=zeros:24:f32", "--arg", "a=2.0",
                     "--arg", "n=21", "--out", f"y={out}"]) == 0
    np.testing.assert_array_equal(np.load(out), _expect(x, 2.0, 21, 24))
    assert [d[:2] for d in drives] == [(type(T.get_target(target).instance(16 if w else None)).__name__, "axpb")]


def test_the_conformance_reports_runner_goes_through_the_door(drives):
    from anywave.conformance import run_suite
    from anywave.conformance.report import runner_for

    name = next((t for t in ("opencl", "cpu", "vulkan") if t in T.available_targets()), None)
    if name is None:
        pytest.skip("no compiled CPU target here")
    w = T.get_target(name).wave_widths[0]
    rep = run_suite(runner_for(name, w), [w], progress=False, groups=["bitwise"])
    assert rep.results and not rep.failures()
    assert len(drives) == len(rep.results)


# ----------------------------------------------------------------------------- CUDA, no GPU

@pytest.fixture
def fake_cuda(monkeypatch):
    from anywave.runtime import arrays as A
    from anywave.runtime import cuda

    drv = cuda.FakeDriver()
    monkeypatch.setattr(cuda, "_DRV", drv)
    monkeypatch.setattr(cuda, "_init_state", None)
    monkeypatch.setattr(cuda, "_MEMORY", {})
    monkeypatch.setattr(A, "_SPACES", {})
    monkeypatch.setattr(A, "_USED", {})
    monkeypatch.setattr(T, "_CACHE", {})
    seen = []

    def record(f, grid, block, shared, stream, kp):
        ptrs = (ctypes.c_void_p * 4).from_address(kp)
        seen.append((grid, block, stream, [ctypes.c_uint64.from_address(ptrs[i]).value for i in range(4)]))

    drv.on_launch = record
    return seen


def test_cuda_is_a_driver_and_its_conformance_runner_is_the_driver(fake_cuda):
    from anywave.errors import LaunchConfigError
    from anywave.runtime import cuda
    from anywave.runtime.driver import Driver

    tgt = cuda.CudaTarget(0, use_cache=False)
    assert isinstance(tgt, Driver) and tgt.streams and cuda.cuda_runner(tgt) is tgt
    m = axpb.compile()
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    run = cuda.cuda_runner(tgt)
    run(m, "axpb", (2, 1, 1), (32, 1, 1), {"x": dx, "y": dy, "a": 0.5, "n": 50}, 32)
    tgt.launch(m, "axpb", 2, 32, [dx, dy, 0.5, 50], stream=7, sync=False)
    f32 = struct.unpack("<I", struct.pack("<f", 0.5))[0]
    assert [(g, b, s, w[:2], w[2] & 0xFFFFFFFF, w[3] & 0xFFFFFFFF) for g, b, s, w in fake_cuda] == \
        [((2, 1, 1), (32, 1, 1), st, [dx.ptr, dy.ptr], f32, 50) for st in (0, 7)]
    assert tgt.load(m) is tgt.load(m) and tgt.load(m, checked=True) is not tgt.load(m)  # the base's program cache
    with pytest.raises(LaunchConfigError, match="the CUDA target has W = 32, asked for W = 16"):
        run(m, "axpb", (1, 1, 1), (32, 1, 1), {"x": dx, "y": dy, "a": 0.5, "n": 50}, 16)
    with pytest.raises(cuda.CudaError, match=r"module has no kernel 'nope'; it has \['axpb'\]"):
        tgt.launch(m, "nope", 1, 32, [dx, dy, 0.5, 50])
    assert tgt.stream_handle(type("S", (), {"cuda_stream": 0x50})()) == 0x50


def test_a_kernel_call_on_cuda_gets_its_plan_launcher_from_the_driver(fake_cuda, monkeypatch):
    from anywave.runtime import cuda

    asked = []
    real = cuda.CudaTarget.plan_launcher

    def spy(self, module, kernel, grid, workgroup, layout):
        asked.append((kernel, grid, workgroup, layout.nargs, layout.stream))
        return real(self, module, kernel, grid, workgroup, layout)

    monkeypatch.setattr(cuda.CudaTarget, "plan_launcher", spy)
    axpb._calls.clear()
    axpb._fast = None
    dx, dy = aw.empty(64, aw.f32, target="cuda"), aw.empty(64, aw.f32, target="cuda")
    for _ in range(3):
        axpb(dx, dy, 0.5, 50, grid=2, workgroup=32, stream=9)
    assert asked == [("axpb", (2, 1, 1), (32, 1, 1), 4, 9)]
    assert [s for _, _, s, _ in fake_cuda] == [9, 9, 9]


def test_dims3_is_the_one_parser_and_a_checked_value_passes_unchanged():
    g = dims3(4, "grid")
    assert type(g) is Dims3 and g == (4, 1, 1) and dims3(g, "grid") is g
    assert dims3([2, np.int64(3)], "grid") == (2, 3, 1)
    empty = dims3((0, 2), "grid", empty_ok=True)
    assert dims3(empty, "grid", empty_ok=True) is empty
    with pytest.raises(ValueError, match=r"grid must be 1-3 positive ints, got \(0, 2, 1\)"):
        dims3(empty, "grid")  # checked as empty-ok: not taken unchanged by a parser that refuses 0
    with pytest.raises(TypeError, match="got float 2.5 in dimension 0"):
        dims3((2.5,), "grid")
    from anywave.emu import emulate

    # the emulator's parser is this one (it took int() of each dimension: (2.7,) ran 2 workgroups)
    with pytest.raises(TypeError, match="got float 2.7 in dimension 0"):
        emulate(axpb.compile(), "axpb", grid=(2.7,), workgroup=8,
                args={"x": np.zeros(8, np.float32), "y": np.zeros(8, np.float32), "a": 1.0, "n": 8})
