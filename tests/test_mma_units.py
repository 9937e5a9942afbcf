"""Fragment MMA on vendor matrix units in the C family (issue 15 item 3): HIP WMMA on RDNA 3
(gfx11, wave32) and MFMA on CDNA (gfx90a, gfx940; wave64). No AMD GPU here: the HIP source is
checked as text and compiled by the installed hipcc for gfx1100, gfx90a and gfx940 (the v_wmma /
v_mfma instructions must be in the machine code); the W = 32 accumulator
layout it relies on is checked for bits through OpenCL, which runs the same C-family lowering's
loop on the Intel CPU runtime."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from anywave.conformance.suite import assemble_group

HIPCC = shutil.which("hipcc")


def _frag_hip(W: int) -> str:
    from anywave.backends import hip

    return hip.translate(assemble_group("mma_frag"), wave_width=W).text


def test_hip_wave32_uses_wmma_on_gfx11_only() -> None:
    text = _frag_hip(32)
    for t in ("f16", "bf16"):
        assert f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_w32" in text
    # each WMMA block is guarded by the gfx11 targets and keeps the loop for every other device
    blocks = re.findall(r"#if defined\(__gfx1100__\)[^\n]*\n(.*?)#else\n(.*?)#endif", text, re.S)
    assert len(blocks) == 6  # 3 fragment mma per kernel, 2 kernels
    for wmma, loop in blocks:
        assert "__builtin_amdgcn_wmma" in wmma and "fma" in loop and "wmma" not in loop
    assert "wmma" not in _frag_hip(64) and "mfma" not in text


@pytest.mark.skipif(HIPCC is None, reason="hipcc not installed")
def test_hipcc_builds_v_wmma_for_gfx1100(tmp_path: Path) -> None:
    """Device code only (ROCm 5.2's device libraries have no gfx1100 bitcode, so no link).
    At -O1: clang 15 (hipcc 5.2's compiler here) crashes in its AMDGPU assembly printer on these
    kernels at -O2/-O3 for gfx1100, a compiler bug (the same source without WMMA builds)."""
    from anywave.backends.hip import BUILD_OPTIONS

    src = tmp_path / "frag.hip"
    src.write_text(_frag_hip(32))
    out = tmp_path / "frag.s"
    r = subprocess.run([HIPCC, "--offload-arch=gfx1100", "-nogpulib", "--cuda-device-only", "-S", "-O1",
                        *BUILD_OPTIONS, str(src), "-o", str(out)], capture_output=True, text=True,
                       env=dict(os.environ, HIP_PLATFORM="amd"), timeout=600)
    if r.returncode != 0 and "gfx1100" in r.stderr and "unknown" in r.stderr.lower():
        pytest.skip(f"this hipcc cannot target gfx1100: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    asm = out.read_text()
    assert len(re.findall(r"v_wmma_f32_16x16x16_f16\b", asm)) == 3
    assert len(re.findall(r"v_wmma_f32_16x16x16_bf16\b", asm)) == 3


@pytest.mark.skipif(HIPCC is None, reason="hipcc not installed")
@pytest.mark.parametrize("arch,bf16_name", [("gfx90a", "v_mfma_f32_16x16x16bf16_1k"),
                                            ("gfx940", "v_mfma_f32_16x16x16_bf16")])
def test_hipcc_builds_v_mfma_for_cdna(tmp_path: Path, arch: str, bf16_name: str) -> None:
    """The W = 64 kernels' MFMA blocks (``__builtin_amdgcn_mfma_f32_16x16x16{bf16_1k,f16}``), device
    code only, at -O3: one v_mfma per fragment mma, 3 per element type (the loop is the #else)."""
    from anywave.backends.hip import BUILD_OPTIONS

    src = tmp_path / "frag64.hip"
    src.write_text(_frag_hip(64))
    out = tmp_path / "frag64.s"
    r = subprocess.run([HIPCC, f"--offload-arch={arch}", "-nogpulib", "--cuda-device-only", "-S", "-O3",
                        *BUILD_OPTIONS, str(src), "-o", str(out)], capture_output=True, text=True,
                       env=dict(os.environ, HIP_PLATFORM="amd"), timeout=600)
    if r.returncode != 0 and arch in r.stderr and "unknown" in r.stderr.lower():
        pytest.skip(f"this hipcc cannot target {arch}: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    asm = out.read_text()
    assert len(re.findall(rf"{bf16_name}\b", asm)) == 3
    f16_name = bf16_name.replace("bf16_1k", "f16").replace("_bf16", "_f16")
    assert len(re.findall(rf"{f16_name}\b", asm)) == 3


@pytest.mark.opencl
def test_wave32_accumulator_layout_same_bits_on_opencl() -> None:
    """The W = 32 accumulator layout (row 2j + l/16, column l%16: WMMA's) through loads, the K
    loop, scale, bias and stores: the fragment cases' bits on OpenCL at W = 32."""
    from anywave.conformance import suite
    from anywave.runtime import opencl

    ok, why = opencl.status()
    if not ok:
        pytest.skip(f"OpenCL unavailable: {why}")
    r = opencl.OpenCLRunner()
    if 32 not in r.dev.features.wave_widths:
        pytest.skip("no sub-groups of 32")
    rep = suite.run_suite(r, (32,), progress=False, groups=["mma_frag"])
    assert rep.counts() == {"pass": 3}, [(f.case, f.message[:300]) for f in rep.failures()]
