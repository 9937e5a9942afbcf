"""Metal backend: translation of every conformance module (or named refusals), an approximate
syntax/type check of every generated MSL file with ``clang++-15 -fsyntax-only`` against the
stand-in header tests/metal_stub/metal_stdlib, and the Metal runtime's absence path.

The check needs ``clang-15`` (skipped with the reason otherwise). What it cannot catch is listed
in :mod:`anywave.backends.metal`."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from anywave.asm import assemble
from anywave.backends import cfamily
from anywave.backends.cfamily import CFamilyError, Features
from anywave.backends.metal import METAL, METAL_FEATURES, translate
from anywave.conformance import assemble_group, group_names
from anywave.isa.table import INSTRUCTIONS
from anywave.isa.types import ScalarType

CLANG = shutil.which("clang++-15") or shutil.which("clang++")
STUB = Path(__file__).parent / "metal_stub"
needs_clang = pytest.mark.skipif(CLANG is None, reason="clang++-15 not installed (apt-get install clang-15)")


def _examples() -> dict[str, object]:
    files = resources.files("anywave.examples")
    return {p.name[:-5]: assemble(p.read_text(), p.name) for p in files.iterdir() if p.name.endswith(".wave")}


def syntax_check(text: str, tmp_path: Path, name: str = "k") -> subprocess.CompletedProcess[str]:
    """clang++ -fsyntax-only on MSL ``text`` with the stand-in metal_stdlib. The one rewrite: the
    attribute ``[[threadgroup(i)]]`` is renamed, since the stub's ``threadgroup`` is a macro."""
    src = tmp_path / f"{name}.metal.cpp"
    src.write_text(text.replace("[[threadgroup(", "[[aw_stub_threadgroup("))
    return subprocess.run([CLANG, "-fsyntax-only", "-std=c++17", "-Wno-unknown-attributes", "-Wno-unknown-pragmas",
                           "-I", str(STUB), str(src)], capture_output=True, text=True, timeout=600)  # hang guard


def test_every_mnemonic_is_rendered_or_refused_with_a_reason() -> None:
    refused = 0
    for d in INSTRUCTIONS:
        why = cfamily.unsupported_reason(d, METAL_FEATURES)
        assert cfamily.C_DISPATCH.handles(d), d.mnemonic
        if why is not None:
            refused += 1
            assert d.mnemonic in why and "double precision" in why
            # refused only for fp64 use or a conversion/fma that rounds through f64
            assert ScalarType.F64 in (d.type, d.src_type) or d.op in ("cvt", "fma"), d.mnemonic
    assert refused > 0


def test_every_conformance_group_translates_or_names_its_refusals() -> None:
    mods = {g: assemble_group(g) for g in group_names()} | _examples()
    for mod in mods.values():
        prog = translate(mod)
        assert set(prog.kernels) | set(prog.refused) == {k.name for k in mod.kernels}
        for k, why in prog.refused.items():
            assert "Metal has no double precision" in why or "scope .system" in why, (k, why)
            assert re.search(r"instruction \d+: [a-z0-9_.]+ ", why), why
    # groups with neither fp64 nor .system scope translate whole
    for g in ("integer", "float", "wave", "memory", "mma", "control", "sync"):
        assert not translate(assemble_group(g)).refused, g


def test_system_scope_is_refused_per_instruction() -> None:
    src = """
.kernel k
.arg x buffer u32 readwrite
.registers 4
    movi.u32 r0, 0
    movi.u32 r1, 1
    atom.device.add.u32 r2, x[r0], r1, .device, .acq_rel
    red.device.add.u32 x[r0], r1, .system, .relaxed
.end
"""
    prog = translate(assemble(src))
    assert "red.device.add.u32 at scope .system" in prog.refused["k"] and "instruction 3" in prog.refused["k"]


@needs_clang
def test_every_generated_msl_file_passes_the_stub_syntax_check(tmp_path: Path) -> None:
    mods = {g: assemble_group(g) for g in group_names()} | _examples()
    fails = []
    for name, mod in mods.items():
        r = syntax_check(translate(mod).text, tmp_path, name)
        if r.returncode != 0 or "warning" in r.stderr:
            fails.append(f"{name}: {r.stderr[-1500:]}")
    assert not fails, "\n".join(fails[:3])


@needs_clang
def test_the_stub_check_catches_undeclared_names_types_and_address_spaces(tmp_path: Path) -> None:
    text = translate(assemble_group("atomic")).text
    mem = translate(assemble_group("memory")).text
    assert syntax_check(text, tmp_path).returncode == 0
    bad = {
        "undeclared": text.replace("atomic_fetch_add_explicit(", "atomic_fetch_addd_explicit(", 1),
        "argument count": text.replace("memory_order_relaxed)", ")", 1),
        "bit-cast size": text.replace("as_type<u32>((float)(x))", "as_type<u64>((float)(x))", 1),
        # a threadgroup address held in a device pointer: implicit address-space conversion
        "address space": mem.replace("uint4 q = *((threadgroup uint4*)",
                                     "uint4 q; device uint4* qp = ((threadgroup uint4*)", 1),
    }
    for what, t in bad.items():
        assert t != text, what
        r = syntax_check(t, tmp_path, what.replace(" ", "_"))
        assert r.returncode != 0 and "error" in r.stderr, what


def test_buffer_bindings_are_in_abi_order_and_local_memory_is_an_argument() -> None:
    src = """
.kernel k
.arg a buffer u32 read
.arg n scalar u32
.arg b buffer u32 readwrite
.arg m scalar u64
.registers 4
.local_memory 64
    mov.sr r0, sr_lane_id
    ld.device.b32 r1, a[r0]
    st.device.b32 b[r0], r1
.end
"""
    prog = translate(assemble(src))
    sig = prog.text.split(f"kernel void {prog.kernels['k'].c_name}(")[1].split(") {")[0]
    params = [p.strip() for p in sig.split(",")]
    assert params[:7] == ["device u8* awg_b0 [[buffer(0)]]", "constant u32& awg_s1 [[buffer(1)]]",
                          "device u8* awg_b2 [[buffer(2)]]", "constant u64& awg_s3 [[buffer(3)]]",
                          "constant u32& aw_wgx [[buffer(4)]]", "constant u32& aw_wgy [[buffer(5)]]",
                          "constant u32& aw_wgz [[buffer(6)]]"]
    assert "threadgroup u8* aw_lm [[threadgroup(0)]]" in params


def test_wave_ops_use_shuffles_not_vendor_reductions() -> None:
    text = translate(assemble_group("wave")).text
    assert "simd_sum" not in text and "simd_prefix" not in text
    assert "simd_shuffle(" in text and "simd_ballot(" in text
    body = translate(assemble("""
.kernel kw
.arg x buffer u32 readwrite
.registers 4
    mov.sr r0, sr_lane_id
    wred.add.f32 r2, r0
    st.device.b32 x[r0], r2
.end
""")).text.split("WAVE kernel kw")[-1]
    assert body.count("simd_shuffle(") == 5  # log2(32) butterfly steps


def test_atomic_orders_map_to_fences() -> None:
    def body(order: str) -> str:
        src = f"""
.kernel k
.arg x buffer u32 readwrite
.registers 4
    movi.u32 r0, 0
    atom.device.add.u32 r2, x[r0], r0, .device, {order}
    st.device.b32 x[r0], r2
.end
"""
        return translate(assemble(src)).text.split("WAVE kernel k")[-1]

    assert "aw_fence" not in body(".relaxed")
    assert "(aw_fence_device(), atomic_fetch_add_explicit(" in body(".release")
    assert "aw_then_fence_device((u32)(atomic_fetch_add_explicit(" in body(".acquire")
    both = body(".seq_cst")
    assert "aw_then_fence_device((u32)((aw_fence_device(), atomic_fetch_add_explicit(" in both
    assert "memory_order_relaxed" in both and "memory_order_seq_cst" not in both.split("atomic_fetch_add")[1][:80]


def test_bad_widths_and_fp64_features_are_refused() -> None:
    mod = assemble_group("integer")
    with pytest.raises(CFamilyError, match="SIMD-groups are 32"):
        translate(mod, 64)
    with pytest.raises(CFamilyError, match="no double precision"):
        translate(mod, 32, Features(fp64=True, wave_widths=(32,)))
    prog = translate(assemble_group("float.f64"))
    assert not prog.kernels and all("Metal has no double precision" in w for w in prog.refused.values())
    assert METAL.refuse is not None


def test_metal_runtime_absent_is_reported_not_raised() -> None:
    import sys

    from anywave.runtime import metal as metalrt
    from anywave.runtime import targets

    if sys.platform == "darwin":
        pytest.skip("on macOS Metal may be present")
    ok, why = metalrt.status()
    assert not ok and "macOS" in why
    with pytest.raises(metalrt.MetalError, match="macOS"):
        metalrt.MetalTarget()
    targets.target_names()  # load the optional runtimes first, so restoring the registry keeps them
    saved = dict(targets._REGISTRY)
    try:
        metalrt.register()
        st = {s.name: s for s in targets.available_targets()}["metal"]
        assert not st.available and "macOS" in st.reason
    finally:
        targets._REGISTRY.clear()
        targets._REGISTRY.update(saved)
