"""SYCL target: the conformance suite compiled by the SYCL runtime compiler (intel-sycl-rt's
kernel_compiler) and run on the Intel OpenCL CPU device at W = 8, 16, 32, 64."""

from __future__ import annotations

import numpy as np
import pytest

import tiers
from anywave.asm import assemble
from anywave.conformance import suite

pytestmark = pytest.mark.sycl


@pytest.fixture(scope="module")
def runner():  # noqa: ANN201
    from anywave.runtime import sycl

    ok, why = sycl.status()
    if not ok:
        pytest.skip(f"SYCL unavailable: {why}")
    return sycl.SyclRunner()


@pytest.mark.parametrize("W", tiers.widths("sycl"))
def test_conformance(runner, W: int) -> None:  # noqa: ANN001
    if W not in runner.dev.features.wave_widths:
        pytest.skip(f"{runner.dev.name} cannot form sub-groups of {W}")
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
    test_conformance(runner, tiers.DEFAULT_W["sycl"])


_SRC = """
.kernel scale
.arg x buffer f32 readwrite
.arg a scalar f32
.registers 4
    mov.sr r0, sr_global_id_x
    movi.b32 r1, 2
    shl.b32 r1, r0, r1
    ld.device.b32 r2, x[r1]
    ldarg.b32 r3, a
    mul.f32 r2, r2, r3
    st.device.b32 x[r1], r2
.end
"""


def test_scalar_args_and_in_place_buffers(runner) -> None:  # noqa: ANN001
    mod = assemble(_SRC)
    x = np.arange(40, dtype=np.float32) / 3
    want = x * np.float32(1.5)
    runner(mod, "scale", (5, 1, 1), (8, 1, 1), {"x": x, "a": np.float32(1.5)}, 16)
    assert np.array_equal(x.view(np.uint32), want.view(np.uint32))


def test_a_build_the_few_headers_cannot_take_is_built_with_the_whole_sycl_header(runner, monkeypatch) -> None:
    # the backend includes the parts of <sycl/sycl.hpp> it uses (anywave.backends.sycl.INCLUDES);
    # where they are not enough (here: made too few on purpose), the runtime builds the module
    # again with the whole header and keeps doing so; the results are the same
    import anywave.backends.sycl as backend

    dev = runner.dev
    monkeypatch.setattr(dev, "_full_header", False)
    monkeypatch.setattr(backend, "INCLUDE_LINES", "#include <sycl/detail/core.hpp>")  # no sycl::rint etc.
    mod = assemble(_SRC)
    x = np.arange(64, dtype=np.float32)
    runner(mod, "scale", (1, 1, 1), (64, 1, 1), {"x": x, "a": np.float32(1.5)}, tiers.DEFAULT_W["sycl"])
    assert dev._full_header
    np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32) * np.float32(1.5))
