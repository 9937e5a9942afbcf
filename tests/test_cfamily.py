"""The shared C-family renderer: coverage of the instruction table, refusals, dialect tables.

These tests need no OpenCL/SYCL runtime (they inspect rendered text); execution is in
tests/test_opencl.py, tests/test_sycl.py and tests/test_cfamily_diff.py."""

from __future__ import annotations

import dataclasses

import pytest

from anywave.asm import assemble
from anywave.backends import cfamily
from anywave.backends.cfamily import CFamilyError, Dialect, Features, render, unsupported_reason
from anywave.backends.opencl import OPENCL
from anywave.backends.sycl import SYCL
from anywave.conformance.suite import assemble_group, group_names
from anywave.isa.table import INSTRUCTIONS


def test_every_mnemonic_is_rendered_or_refused_with_a_reason() -> None:
    handled = 0
    for d in INSTRUCTIONS:
        why = unsupported_reason(d, Features())
        if why is None:
            assert cfamily.C_DISPATCH.handles(d), d.mnemonic
            handled += 1
        else:
            assert d.mnemonic in why and len(why) > len(d.mnemonic) + 5
    # on a full-featured device nothing is refused
    assert handled == len(INSTRUCTIONS)


def test_refusals_without_fp64_or_subgroups_name_the_instruction() -> None:
    weak = Features(fp64=False, wave_widths=())
    refused = {d.mnemonic: unsupported_reason(d, weak) for d in INSTRUCTIONS}
    assert "double precision" in refused["add.f64"]
    assert "double precision" in refused["cvt.f16.i32"]  # int -> f16 rounds through f64
    assert "sub-groups" in refused["shfl.idx.b32"]
    assert refused["add.f32"] is None and refused["cvt.f16.f32"] is None


@pytest.mark.parametrize("dialect", [OPENCL, SYCL], ids=lambda d: d.name)
@pytest.mark.parametrize("W", [8, 64])
def test_every_conformance_group_renders(dialect: Dialect, W: int) -> None:
    for g in group_names():
        mod = assemble_group(g)
        prog = render(mod, dialect, W)
        assert not prog.refused, (g, prog.refused)
        assert set(prog.kernels) == {k.name for k in mod.kernels}
        for info in prog.kernels.values():
            assert info.c_name in prog.text


def test_weak_device_refuses_kernels_not_modules() -> None:
    mod = assemble_group("float.f64")
    prog = render(mod, OPENCL, 16, Features(fp64=False))
    assert prog.refused and not prog.kernels
    assert all("double precision" in why for why in prog.refused.values())
    wave = render(assemble_group("wave"), OPENCL, 32, Features(wave_widths=(8, 16)))
    assert all("sub-groups of 32" in why for why in wave.refused.values())


def test_bad_wave_width_and_unknown_kernel() -> None:
    mod = assemble_group("integer")
    with pytest.raises(CFamilyError, match="wave width 12"):
        render(mod, OPENCL, 12)
    with pytest.raises(CFamilyError, match="no kernel 'nope'"):
        render(mod, OPENCL, 16, kernels=["nope"])


_SRC = """
.kernel k
.arg x buffer u32 readwrite
.registers 4
    mov.sr r0, sr_lane_id
    shl.b32 r1, r0, r0
    st.device.b32 x[r1], r0
.end
.kernel kw
.arg x buffer u32 readwrite
.registers 4
    mov.sr r0, sr_lane_id
    shfl.xor.b32 r1, r0, r0
    wred.add.f32 r2, r1
    st.device.b32 x[r0], r2
.end
"""


def test_wave_width_is_a_parameter_and_sub_group_size_is_forced() -> None:
    mod = assemble(_SRC)
    for W in (8, 16, 32, 64):
        ocl = render(mod, OPENCL, W)
        assert f"intel_reqd_sub_group_size({W})" in ocl.text
        assert not ocl.kernels["k"].wave_mode and ocl.kernels["kw"].wave_mode
        syc = render(mod, SYCL, W)
        assert f"[[sycl::reqd_sub_group_size({W})]]" in syc.text
        # the f32 butterfly has log2(W) shuffle steps, written out (never a built-in reduce)
        body = ocl.text.split("WAVE kernel kw")[-1]
        assert body.count("aw_lane ^ ") == 1 + (W.bit_length() - 1)  # shfl.xor + log2(W) steps
        assert "sub_group_reduce_add(" not in body and "reduce_over_group(aw_sg, (float" not in syc.text


def test_padded_workgroup() -> None:
    mod = assemble(_SRC)
    prog = render(mod, OPENCL, 16)
    assert cfamily.padded_workgroup(prog.kernels["kw"], (5, 3, 1), 16) == 16
    assert cfamily.padded_workgroup(prog.kernels["k"], (5, 3, 1), 16) == 15


def test_dialects_are_small_tables() -> None:
    # a dialect is data: every field of the table is a string, a dict, a flag or a small lambda (or
    # None for an optional native override the dialect lacks, e.g. rotate_left)
    for d in (OPENCL, SYCL):
        for f in dataclasses.fields(Dialect):
            v = getattr(d, f.name)
            assert isinstance(v, (str, dict, bool)) or callable(v) or (v is None and f.default is None), f.name
    differing = [f.name for f in dataclasses.fields(Dialect) if getattr(OPENCL, f.name) != getattr(SYCL, f.name)]
    assert "barrier" in differing and "shuffle" in differing
    # and a dialect module stays a screenful or two (the sketch that used to stand in for one more
    # dialect is gone: hip.py and metal.py are real ones, issue 13)
    import inspect

    from anywave.backends import hip, metal, opencl, sycl

    for mod in (opencl, sycl, hip, metal):
        assert len(inspect.getsource(mod).splitlines()) < 200, mod.__name__
    assert "EXAMPLE_CUDA_C_SKETCH" not in dir(cfamily)
