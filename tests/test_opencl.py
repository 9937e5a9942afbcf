"""OpenCL target: the conformance suite on a real OpenCL runtime (Intel CPU runtime from PyPI)
at W = 8, 16, 32, 64 -- every deterministic case bit-identical to the suite's expectations."""

from __future__ import annotations

import numpy as np
import pytest

import tiers
from anywave.asm import assemble
from anywave.conformance import suite

pytestmark = pytest.mark.opencl


@pytest.fixture(scope="module")
def runner():  # noqa: ANN201
    from anywave.runtime import opencl

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    return opencl.OpenCLRunner()


@pytest.mark.parametrize("W", tiers.widths("opencl"))
def test_conformance(runner, W: int) -> None:  # noqa: ANN001
    if W not in runner.dev.features.wave_widths:
        pytest.skip(f"{runner.dev.name} cannot form sub-groups of {W} ({runner.dev.subgroup_note})")
    groups = suite.group_names()  # every group (docs/internals.md, "Running the tests")
    rep = suite.run_suite(runner, (W,), progress=False, groups=groups)
    bad = rep.failures()
    assert not bad, "\n".join(f"{r.case} W={r.wave_width}: {r.status}: {r.message[:400]}" for r in bad[:10])
    assert rep.counts().get("pass", 0) == len(suite.load_cases(groups))


@pytest.mark.sweep
def test_conformance_optimised_at_the_default_w(runner, monkeypatch) -> None:  # noqa: ANN001
    """The default tier builds without the runtime compiler's optimiser (tests/conftest.py): the
    sweep tier runs the default W's conformance with it too (the other widths run both ways)."""
    monkeypatch.setenv("ANYWAVE_TARGET_OPT", "1")
    test_conformance(runner, tiers.DEFAULT_W["opencl"])


_PARTIAL = """
.kernel lanes
.arg out buffer u32 readwrite
.registers 8
    mov.sr r0, sr_thread_linear_id
    mov.sr r1, sr_lane_id
    movi.b32 r2, 1
    setp.ne.u32 p0, r1, r1
    ballot.b64 r4:r5, !p0
    wred.add.u32 r3, r2
    shl.b32 r6, r0, r2
    shl.b32 r6, r6, r2
    shl.b32 r6, r6, r2
    shl.b32 r6, r6, r2
    st.device.b32 out[r6], r1
    st.device.b32 out[r6+4], r3
    st.device.b64 out[r6+8], r4:r5
.end
"""


def test_partial_last_wave_follows_the_linear_lane_order(runner) -> None:  # noqa: ANN001
    # a 5x3 workgroup: 15 threads, not a multiple of W; lanes are linear ids (x fastest), the
    # last wave has 15 % W lanes, its ballot has exactly those bits set
    src = _PARTIAL
    mod = assemble(src)
    for W in runner.dev.features.wave_widths:
        out = np.zeros(15 * 4, np.uint32)
        runner(mod, "lanes", (1, 1, 1), (5, 3, 1), {"out": out}, W)
        out = out.reshape(15, 4)
        t = np.arange(15)
        sizes = np.minimum(W, 15 - (t // W) * W)
        assert np.array_equal(out[:, 0], t % W)
        assert np.array_equal(out[:, 1], sizes)
        mask = (1 << sizes.astype(object)) - 1
        got = out[:, 2].astype(object) | (out[:, 3].astype(object) << 32)
        assert list(got) == list(mask)


def test_errors_name_the_problem(runner) -> None:  # noqa: ANN001
    from anywave.runtime.opencl import OpenCLError

    mod = assemble(_PARTIAL)
    with pytest.raises(OpenCLError, match="missing \\['out'\\]"):
        runner(mod, "lanes", (1, 1, 1), (4, 1, 1), {}, 16)
    with pytest.raises(OpenCLError, match="no kernel 'nope'"):
        runner(mod, "nope", (1, 1, 1), (4, 1, 1), {"out": np.zeros(4, np.uint32)}, 16)
    with pytest.raises(OpenCLError, match="exceeds the device's maximum"):
        runner(mod, "lanes", (1, 1, 1), (1 << 20, 1, 1), {"out": np.zeros(4, np.uint32)}, 16)


_ESCAPES = """
.kernel escapes
.arg a buffer u32 read
.arg out buffer u32 write
.registers 32
    mov.sr r0, sr_global_id_x
    movi.u32 r1, 2
    shl.b32 r3, r0, r1
    ld.device.b32 r10, a[r3]
    movi.u32 r20, 0
    movi.u32 r5, 1
    movi.u32 r6, 0
    movi.u32 r9, 15
    call walk
    movi.u32 r8, 1000000
    add.i32 r20, r20, r8
    call walk
    st.device.b32 out[r3], r20
.end
.func walk
    setp.eq.u32 p5, r10, r9
    ret p5
    movi.u32 r22, 0
    movi.u32 r23, 0
    loop
      add.i32 r20, r20, r5
      loop
        add.i32 r22, r22, r5
        movi.u32 r8, 100
        add.i32 r20, r20, r8
        setp.eq.u32 p1, r22, r10
        ret p1
        movi.u32 r8, 3
        and.b32 r7, r22, r8
        setp.eq.u32 p2, r7, r6
        break p2
      endloop
      add.i32 r23, r23, r5
      movi.u32 r8, 3
      setp.ge.u32 p3, r23, r8
      break p3
    endloop
    movi.u32 r8, 10000
    add.i32 r20, r20, r8
.end
"""


def _walk_oracle(x: int, r20: int) -> int:
    if x == 15:
        return r20
    inner = outer = 0
    while True:
        r20 += 1
        while True:
            inner += 1
            r20 += 100
            if inner == x:
                return r20
            if inner % 4 == 0:
                break
        outer += 1
        if outer >= 3:
            break
    return r20 + 10000


def test_goto_free_ret_runs_like_the_goto_form(runner, monkeypatch) -> None:  # noqa: ANN001
    # the control walk's goto-free ret (the form Metal and WGSL need: a one-trip loop and a
    # returned flag) rendered in OpenCL C and run: ret inside two loops of an inlined call,
    # a ret at the call's top, the call twice
    import dataclasses

    from anywave.backends import opencl as ocl

    monkeypatch.setattr(ocl, "OPENCL", dataclasses.replace(ocl.OPENCL, goto_free=True))
    m = assemble(_ESCAPES)
    text = ocl.translate(m, 16).text
    assert "goto " not in text and "while (0);" in text
    a = np.arange(64, dtype=np.uint32) % 16
    out = np.zeros(64, np.uint32)
    W = 16 if 16 in runner.dev.features.wave_widths else runner.dev.features.wave_widths[0]
    runner(m, "escapes", (1, 1, 1), (64, 1, 1), {"a": a, "out": out}, W)
    want = [_walk_oracle(x, _walk_oracle(x, 0) + 1000000) for x in a.tolist()]
    assert out.tolist() == want
