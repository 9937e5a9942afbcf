"""Where a launch that names no target runs (issue 29, item 2): a GPU, then the native cpu
target, then the runtimes whose device is the host CPU, then the emulator; a target that refuses
a kernel (the cpu target and matrix fragments) is passed by for that kernel; ``target="host"``
asks for the best target on the host CPU."""

from __future__ import annotations

import numpy as np
import pytest

import anywave as aw
from anywave.isa.types import Capability
from anywave.runtime import targets as rt
from anywave.runtime.targets import TargetInfo, TargetStatus


def _status(name: str, host: bool) -> TargetStatus:
    info = TargetInfo(name, "dev", 32, Capability(0), 0, 1, (1, 1, 1), (1, 1, 1), host_memory=host)
    return TargetStatus(name, True, "", (info,))


def test_the_order_is_gpu_cpu_host_runtimes_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    sts = [_status("emulator", True), _status("opencl", True), _status("mine", False), _status("cpu", True),
           _status("vulkan", False), _status("sycl", True), _status("cuda", False),
           TargetStatus("hip", False, "no driver")]
    monkeypatch.setattr(rt, "available_targets", lambda: sts)
    # vulkan on a device of its own ranks with the GPUs; opencl and sycl on the host CPU after cpu;
    # an unavailable target nowhere; one PREFERENCE does not name, last
    assert rt.preferred_names() == ["cuda", "vulkan", "cpu", "opencl", "sycl", "emulator", "mine"]
    assert rt.host_names() == ["cpu", "opencl", "sycl", "emulator"]


@aw.kernel
def _plus_one(x: aw.Buffer[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        x[i] = x[i] + 1.0


def _cpu_or_skip() -> None:
    from anywave.runtime import cpu

    ok, why = cpu.status()
    if not ok:
        pytest.skip(f"cpu target unavailable: {why}")


def test_a_refused_kernel_goes_to_the_next_target(monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_or_skip()
    monkeypatch.delenv("ANYWAVE_TARGET", raising=False)
    from anywave.kernels import gemm_mma
    from anywave.runtime.cpu import CpuTarget

    mod = gemm_mma.gemm_frag_kernel.compile()
    k = mod.kernel(gemm_mma.gemm_frag_kernel.name)
    why = CpuTarget.refuses(mod, k)
    assert why is not None and "mma" in why
    plain = _plus_one.compile()
    assert CpuTarget.refuses(plain, plain.kernel(_plus_one.name)) is None
    names = rt.preferred_names()
    if names[0] != "cpu":
        pytest.skip(f"a target ranks before cpu here ({names[0]})")
    assert rt.serving_name(plain, plain.kernel(_plus_one.name)) == "cpu"
    assert rt.serving_name(mod, k) == names[1]
    assert rt.serving_name(mod, k, host=True) == rt.host_names()[1]


def test_a_launch_without_target_runs_on_the_cpu_target(monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_or_skip()
    monkeypatch.delenv("ANYWAVE_TARGET", raising=False)
    if rt.preferred_names()[0] != "cpu":
        pytest.skip(f"a target ranks before cpu here ({rt.preferred_names()[0]})")
    x = np.arange(300, dtype=np.float32)
    r = _plus_one(x, x.size, grid=2, workgroup=256)
    assert r.target == "cpu" and r.wave_width == 32
    assert np.array_equal(x, np.arange(300, dtype=np.float32) + 1)
    r = _plus_one(x, x.size, grid=2, workgroup=256, target="host")
    assert r.target == "cpu"
    assert np.array_equal(x, np.arange(300, dtype=np.float32) + 2)
    # the environment still wins
    monkeypatch.setenv("ANYWAVE_TARGET", "emulator")
    x2 = np.zeros(8, np.float32)
    r = _plus_one(x2, 8, grid=1, workgroup=8)
    # (the emulator returns its EmulationStats, which name no target)
    assert getattr(r, "target", "emulator") == "emulator" and type(r).__name__ == "EmulationStats"
    assert np.array_equal(x2, np.ones(8, np.float32))


def test_an_mma_kernel_without_target_runs_on_the_next_target(monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_or_skip()
    monkeypatch.delenv("ANYWAVE_TARGET", raising=False)
    import ml_dtypes

    from anywave.kernels import gemm_mma

    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((32, 128)).astype(ml_dtypes.bfloat16)
    # no target: the cpu target refuses the fragments, the next one runs them; class bounded
    # (gemm_mma's docstring, spec 8.13): |C - A@B| <= 2^-18 (K/16) (|A|@|B|) (1 + 2^-18)^(K/16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = 2.0**-18 * 2 * (np.abs(a64) @ np.abs(b64)) * (1 + 2.0**-18) ** 2
    for target in (None, "host"):
        got = gemm_mma.gemm(a, b, target=target)
        assert got.shape == (64, 128) and np.all(np.abs(got - a64 @ b64) <= bound)


def test_host_in_the_environment_and_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_or_skip()
    from anywave.jit.targets import get_target

    assert get_target("host").name == rt.host_names()[0]
    monkeypatch.setenv("ANYWAVE_TARGET", "host")
    x = np.zeros(16, np.float32)
    r = _plus_one(x, 16, grid=1, workgroup=16)
    assert getattr(r, "target", "emulator") == rt.host_names()[0]
    assert np.array_equal(x, np.ones(16, np.float32))
    assert get_target(None).name == rt.host_names()[0]


def test_host_does_not_take_a_device_array_of_another_target() -> None:
    _cpu_or_skip()
    from anywave.runtime import opencl

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    if rt.host_names()[0] == "opencl":
        pytest.skip("OpenCL is the best host target here")
    x = aw.array(np.zeros(16, np.float32), target="opencl")
    with pytest.raises(aw.LaunchError, match="lives on opencl"):
        _plus_one(x, 16, grid=1, workgroup=16, target="host")


def test_devices_says_the_default_order(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from anywave.cli import main

    monkeypatch.delenv("ANYWAVE_TARGET", raising=False)
    assert main(["devices"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    names = last.split("first of ", 1)[1].split(" that runs", 1)[0].split(", ")
    avail = [st.name for st in rt.available_targets() if st.available]
    assert sorted(names) == sorted(avail) and names[-1] in ("emulator", *[n for n in avail if n not in rt.PREFERENCE])
    if "cpu" in avail:
        assert names.index("cpu") < names.index("emulator")
    assert main(["devices", "--json"]) == 0
    ranks = {d["target"]: d["default_rank"] for d in json.loads(capsys.readouterr().out)}
    assert sorted((r, n) for n, r in ranks.items() if r is not None) == list(enumerate(names))


@aw.kernel
def _big_local(x: aw.Buffer[aw.f32], n: aw.i32):
    t = aw.local_array(aw.f32, 32768)  # 128 KiB: over the cpu target's 64 KiB
    i = aw.global_id(0)
    t[aw.local_id(0)] = 2.0
    aw.barrier()
    if i < n:
        x[i] = x[i] + t[aw.local_id(0)]


def test_limits_of_the_cpu_target_pass_it_by(monkeypatch: pytest.MonkeyPatch) -> None:
    # a workgroup over the cpu target's 1024 threads, or local memory over its 64 KiB: a launch
    # without target goes to the next target that can run it (a hostile test: they used to run on
    # OpenCL, the old default, and failed on cpu), a launch naming cpu says why
    _cpu_or_skip()
    monkeypatch.delenv("ANYWAVE_TARGET", raising=False)
    from anywave.runtime import opencl
    from anywave.runtime.cpu import CpuError

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    if rt.preferred_names()[0] != "cpu":
        pytest.skip(f"a target ranks before cpu here ({rt.preferred_names()[0]})")
    x = np.zeros(2048, np.float32)
    r = _plus_one(x, 2048, grid=1, workgroup=2048)
    assert r.target != "cpu" and np.array_equal(x, np.ones(2048, np.float32))
    with pytest.raises(CpuError, match="exceeds the device's maximum 1024"):
        _plus_one(x, 2048, grid=1, workgroup=2048, target="cpu")
    y = np.zeros(64, np.float32)
    r = _big_local(y, 64, grid=1, workgroup=64, target="host")
    assert r.target != "cpu" and np.array_equal(y, np.full(64, 2.0, np.float32))
    with pytest.raises(CpuError, match="local memory"):
        _big_local(y, 64, grid=1, workgroup=64, target="cpu")


def test_messages_name_host_devices_and_a_bad_environment(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from anywave.cli import main
    from anywave.jit.targets import TargetError, get_target

    with pytest.raises(TargetError, match="'host': the best of them on this machine's CPU"):
        get_target("nope")
    with pytest.raises(TargetError, match="target 'emulator' has no device 1; it has one device here"):
        get_target("emulator").instance(None, 1)
    x = np.zeros(8, np.float32)
    with pytest.raises(TargetError, match="has no device 3"):
        _plus_one(x, 8, grid=1, workgroup=8, target="emulator:3")
    monkeypatch.setenv("ANYWAVE_TARGET", "junk")
    assert main(["devices"]) == 0
    assert "ANYWAVE_TARGET=junk names no target: a launch without target= will fail" in capsys.readouterr().out
