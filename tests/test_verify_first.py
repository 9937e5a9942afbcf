"""Every reader verifies first (issue 11, item 21): the public translators and target launches
refuse an invalid module with a VerifyError naming the problem, instead of emitting code for it
or failing with KeyError/IndexError; the verification is done once per unchanged module object."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from anywave.binary import verify as verify_mod
from anywave.binary.module import Arg, DeviceAddr, Function, Instruction, Kernel, Module, Pred
from anywave.errors import VerifyError
from anywave.isa.types import Access, ArgKind, ScalarType, SpecialRegister

I = Instruction.make  # noqa: E741
B = ArgKind.BUFFER


def _mod(code, args=(), registers=4, functions=()) -> Module:
    return Module([Kernel("k", list(args), registers, 0, code=list(code))], list(functions))


BAD = {
    "register past .registers": (_mod([I("add.i32", 200, 0, 0)]), "r200"),
    "unclosed if": (_mod([I("setp.true", 0), I("if", Pred(0))]), "never closed"),
    "store to a read buffer": (_mod([I("st.device.b32", DeviceAddr(0, 0, 0), 1)],
                                    [Arg("x", B, ScalarType.U32, Access.READ)]), "store to buffer"),
    "bad buffer index": (_mod([I("ld.device.b32", 1, DeviceAddr(3, 0, 0))],
                              [Arg("x", B, ScalarType.U32, Access.READ)]), "buffer argument index 3"),
    "bad call target": (_mod([I("call", 5)], functions=[Function("f", [I("nop")])]), "function index 5"),
}


def _translate(name: str, m: Module):
    mod = importlib.import_module(f"anywave.backends.{name}")
    return mod.translate(m, 16) if name in ("opencl", "sycl", "spirv") else mod.translate(m)


@pytest.mark.parametrize("backend", ["ptx", "opencl", "sycl", "hip", "metal", "spirv"])
@pytest.mark.parametrize("what", sorted(BAD))
def test_translators_verify_first(backend: str, what: str) -> None:
    m, words = BAD[what]
    with pytest.raises(VerifyError) as ei:
        _translate(backend, m)
    assert words in str(ei.value)


@pytest.mark.parametrize("what", sorted(BAD))
def test_emulator_target_launch_verifies(what: str) -> None:
    from anywave.runtime.targets import get_target

    m, words = BAD[what]
    args = {a.name: np.zeros(4, np.uint32) for a in m.kernels[0].args}
    with pytest.raises(VerifyError, match=words.split()[0]):
        get_target("emulator", wave_width=8).launch(m, "k", (1,), (8,), args)


@pytest.mark.parametrize("target", ["opencl", "sycl", "vulkan"])
def test_cpu_target_launch_verifies(target: str) -> None:
    from anywave.runtime.targets import TargetUnavailable, get_target

    try:
        t = get_target(target, wave_width=8)
    except TargetUnavailable as e:
        pytest.skip(str(e))
    m, words = BAD["store to a read buffer"]
    x = np.zeros(4, np.uint32)
    with pytest.raises(VerifyError, match="store to buffer"):
        t.launch(m, "k", (1,), (8,), {"x": x})


def _valid() -> Module:
    return _mod([I("mov.sr", 0, SpecialRegister.THREAD_LINEAR_ID), I("nop")], registers=4)


def test_verification_is_cached_per_module(monkeypatch) -> None:
    from anywave.emu import emulate

    calls = []
    real = verify_mod.verify
    monkeypatch.setattr(verify_mod, "verify", lambda m: (calls.append(1), real(m))[1])
    m = _valid()
    for _ in range(5):
        emulate(m, "k", grid=1, workgroup=8, wave_width=8)
    assert len(calls) == 1
    # a changed module is verified again (and refused)
    m.kernels[0].code.append(I("add.i32", 200, 0, 0))
    with pytest.raises(VerifyError, match="r200"):
        emulate(m, "k", grid=1, workgroup=8, wave_width=8)
    assert len(calls) == 2
    m.kernels[0].code.pop()
    m.kernels[0].registers = 1  # header change: mov.sr r0 still fits
    emulate(m, "k", grid=1, workgroup=8, wave_width=8)
    assert len(calls) == 3
