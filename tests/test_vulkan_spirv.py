"""SPIR-V backend (no Vulkan device needed): every conformance kernel translates to a module
that ``spirv-val`` accepts for Vulkan 1.2 at every W; every instruction of the table is lowered
or refused with a reason; capabilities a device lacks are refused per instruction."""

from __future__ import annotations

import shutil
import struct

import pytest

from anywave.asm import assemble
from anywave.backends import spirv
from anywave.backends.spirv_asm import MAGIC, Builder, encode, string_words
from anywave.binary.module import Instruction
from anywave.conformance import suite
from anywave.isa.table import INSTRUCTIONS

needs_val = pytest.mark.skipif(not spirv.have_validator(), reason="spirv-val not installed (Debian spirv-tools)")


def test_encoding_follows_the_physical_layout() -> None:
    # SPIR-V spec §2.3: word count in the high half, opcode in the low half; strings nul-padded
    assert string_words("main") == [int.from_bytes(b"main", "little"), 0]
    assert string_words("abc") == [int.from_bytes(b"abc\0", "little")]
    assert encode(17, [1]) == [(2 << 16) | 17, 1]
    b = Builder()
    b.capability("Shader")
    w = b.words()
    assert w[0] == MAGIC and w[1] == 0x00010500 and w[5:] == [(2 << 16) | 17, 1]


@needs_val
@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_conformance_kernels_validate(W: int) -> None:
    groups = suite.group_names() if W == 32 else ["wave", "mma", "mma_frag"]
    from concurrent.futures import ThreadPoolExecutor

    mods = []
    for g in groups:
        prog = spirv.translate(suite.assemble_group(g), W)
        assert not prog.refused, prog.refused
        mods += [(f"{g}/{k.name}", k.binary) for k in prog.kernels.values()]
    with ThreadPoolExecutor(4) as pool:  # spirv-val runs as a subprocess: overlap them
        errs = list(pool.map(lambda m: spirv.validate(m[1], "vulkan1.2"), mods))
    bad = [f"{name}: {e[:300]}" for (name, _), e in zip(mods, errs, strict=True) if e]
    assert not bad, "\n".join(bad[:5])


def test_every_instruction_is_lowered_or_refused_with_a_reason() -> None:
    lacking = spirv.VulkanFeatures(fp64=False, int64=False, wave_widths=())
    refused = set()
    for d in INSTRUCTIONS:
        full = spirv.unsupported_reason(d)
        if full is not None:
            assert d.mnemonic in full, full
            refused.add(d.op)
        why = spirv.unsupported_reason(d, lacking)
        assert why is None or d.mnemonic in why
    assert not refused, refused  # every instruction is lowered for a device with every feature


_F64 = """
.kernel k
.arg out buffer f64 readwrite
.registers 4
    movi.f64 r0:r1, 1.5
    movi.f64 r2:r3, 2.5
    add.f64 r0:r1, r0:r1, r2:r3
    movi.b32 r2, 0
    st.device.b64 out[r2], r0:r1
.end
.kernel w
.arg out buffer u32 readwrite
.registers 2
    movi.b32 r0, 1
    wred.add.u32 r1, r0
    movi.b32 r0, 0
    st.device.b32 out[r0], r1
.end
.kernel plain
.arg out buffer u32 readwrite
.registers 2
    movi.b32 r0, 0
    movi.b32 r1, 7
    st.device.b32 out[r0], r1
.end
"""


def test_missing_capabilities_are_refused_with_reasons() -> None:
    mod = assemble(_F64)
    prog = spirv.translate(mod, 16, spirv.VulkanFeatures(fp64=False, wave_widths=(32,)))
    assert set(prog.kernels) == {"plain"}
    assert "shaderFloat64" in prog.refused["k"] and "add.f64" in prog.refused["k"]
    assert "subgroups of 16" in prog.refused["w"] and "[32]" in prog.refused["w"]
    none = spirv.translate(mod, 16, spirv.VulkanFeatures(wave_widths=()))
    assert "needs subgroup operations" in none.refused["w"]


def test_bad_arguments_name_the_problem() -> None:
    mod = assemble(_F64)
    with pytest.raises(spirv.SpirvError, match="wave width 12"):
        spirv.translate(mod, 12)
    with pytest.raises(spirv.SpirvError, match="no kernel 'nope'"):
        spirv.translate(mod, 32, kernels=["nope"])


@pytest.mark.skipif(shutil.which("spirv-dis") is None, reason="needs spirv-dis (Debian spirv-tools) to read the modes")
def test_float_controls_follow_the_device() -> None:
    mod = assemble(_F64)

    def modes(feats: spirv.VulkanFeatures) -> str:
        return spirv.disassemble(spirv.translate(mod, 32, feats).kernels["k"].binary)

    full = modes(spirv.FULL_FEATURES)
    assert "DenormPreserve 32" in full and "DenormPreserve 64" in full and "RoundingModeRTE 64" in full
    lava = modes(spirv.VulkanFeatures(denorm_preserve=()))
    assert "DenormPreserve" not in lava and "SignedZeroInfNanPreserve 32" in lava
    # every float arithmetic result is kept from being fused or reassociated
    assert "NoContraction" in full


@needs_val
def test_translate_cli_writes_a_valid_module(tmp_path, capsys) -> None:  # noqa: ANN001
    from anywave.cli import main

    src = tmp_path / "m.wave"
    src.write_text(_F64)
    out = tmp_path / "k.spv"
    assert main(["translate", str(src), "--target", "spirv", "--kernel", "w", "--wave-width", "8", "-o", str(out)]) == 0
    data = out.read_bytes()
    assert struct.unpack("<I", data[:4])[0] == MAGIC
    assert spirv.validate(data) is None
    assert main(["translate", str(src), "--target", "spirv"]) == 0
    text = capsys.readouterr().out
    assert "WAVE kernel k" in text and "WAVE kernel plain" in text
    assert main(["translate", str(src), "--target", "spirv", "-o", str(out)]) == 1  # three kernels, one file
    assert "--kernel" in capsys.readouterr().err


def test_instruction_helpers_cover_the_table() -> None:
    # a guard on a non-control instruction and a 64-bit move translate (smoke of rarely used paths)
    from anywave.binary.module import Kernel, Module, Pred

    code = [Instruction.make("setp.true", 0), Instruction.make("movi.b64", 0, 5, guard=Pred(0, True)),
            Instruction.make("mov.b64", 2, 0)]
    prog = spirv.translate(Module([Kernel("g", registers=4, code=code)]), 8)
    assert "g" in prog.kernels


def test_absent_vulkan_is_listed_with_its_reason(monkeypatch, capsys) -> None:  # noqa: ANN001
    import sys

    from anywave.cli import main
    from anywave.runtime import targets, vulkan

    monkeypatch.setitem(sys.modules, "vulkan", None)  # the binding is not installed
    with pytest.raises(vulkan.VulkanError, match=r"pip install 'anywave\[vulkan\]'"):
        vulkan.VulkanDevice()
    monkeypatch.setattr(vulkan, "_DEVICE", targets.ProcessDevice(vulkan.VulkanDevice, vulkan.VulkanError, "Vulkan"))
    st = {s.name: s for s in targets.available_targets()}["vulkan"]
    assert not st.available and "anywave[vulkan]" in st.reason
    assert main(["devices"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("vulkan"))
    assert "unavailable" in line and "anywave[vulkan]" in line
