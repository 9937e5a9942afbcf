"""The inlined-size bound of spec §7.2 rule 4 (issue 11, item 16): a small, acyclic, shallow
call graph whose calls multiply (16 functions each calling the next 8 times: 8^15 calls) is an
invalid module, refused by the verifier before any reader, emulator or translator sees it."""

from __future__ import annotations

import pytest

from anywave.binary.module import Function, Instruction, Kernel, Module
from anywave.binary.verify import check, verify
from anywave.binary.wbin import read_wbin, write_wbin
from anywave.errors import VerifyError, WaveError
from anywave.isa.types import LIMITS

I = Instruction.make  # noqa: E741


def fan(levels: int, calls: int, body: int = 1) -> Module:
    """Kernel -> f0; f_i calls f_{i+1} ``calls`` times; the last has ``body`` nops."""
    fs = []
    for i in range(levels):
        code = [I("call", i + 1)] * calls if i + 1 < levels else [I("nop")] * body
        fs.append(Function(f"f{i}", code))
    return Module([Kernel("k", [], 4, 0, code=[I("call", 0)])], fs)


def inlined_by_hand(m: Module) -> int:
    def size(code):
        return sum(1 + (size(m.functions[ins.operands[0]].code) if ins.defn.op == "call" else 0) for ins in code)
    return size(m.kernels[0].code)


#: Python calls within which the 8^15-call module is refused: it takes ~1.5k today; walking the
#: inlined tree would take billions (a count of work, not a time: issue 30 item 4)
QUICK = 100_000


def test_issue_binary_is_refused_quickly(work_bound):
    m = fan(16, 8)
    with pytest.raises(VerifyError) as ei, work_bound(QUICK):
        verify(m)
    msg = str(ei.value)
    assert "inlined size" in msg and str(LIMITS.max_inlined_instructions) in msg and "'k'" in msg


def test_limit_is_exact():
    # 2 calls per level: f0..f(L-1); sizes computed by the brute-force recursion on small graphs
    for levels, calls in ((3, 2), (4, 3), (5, 2)):
        m = fan(levels, calls)
        assert inlined_by_hand(m) < LIMITS.max_inlined_instructions
        assert check(m) == []
    # just at and just over the bound, with few instructions to verify: kernel = m calls of f0 and
    # e nops; f0 = 1024 calls of f1; f1 = one nop -> 1 + 2048 per f0 call... counted by hand below
    lim = LIMITS.max_inlined_instructions
    m = lim // 2049 - 1
    base = m + m * (1024 + 1024)
    for e, valid in ((lim - base, True), (lim - base + 1, False)):
        fs = [Function("f0", [I("call", 1)] * 1024), Function("f1", [I("nop")])]
        mod = Module([Kernel("k", [], 4, 0, code=[I("call", 0)] * m + [I("nop")] * e)], fs)
        assert (inlined_by_hand(mod) <= lim) == valid
        problems = check(mod)
        assert (problems == []) == valid, problems


def test_wbin_reader_refuses_it():
    blob = write_wbin(fan(16, 8), verify=False)
    assert len(blob) < 4096
    with pytest.raises(VerifyError):
        read_wbin(blob)


@pytest.mark.parametrize("translate", ["ptx", "opencl", "sycl", "hip", "metal"])
def test_translators_refuse_it(translate, work_bound):
    import importlib

    mod = importlib.import_module(f"anywave.backends.{translate}")
    m = fan(16, 8)
    with pytest.raises(WaveError), work_bound(QUICK):
        mod.translate(m, 32) if translate in ("opencl", "sycl") else mod.translate(m)


def test_emulator_refuses_it(work_bound):
    from anywave.emu import emulate

    m = fan(16, 8)
    with pytest.raises(VerifyError), work_bound(QUICK):
        emulate(m, "k", grid=1, workgroup=8, wave_width=8)
