"""PTX backend tests (no GPU needed; ptxas-based ones skip without ptxas)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from anywave.asm import assemble
from anywave.backends.ptx import (
    PtxError,
    check_supported,
    emitter_for,
    parse_arch,
    table_coverage,
    translate,
    unsupported_reason,
)
from anywave.binary.module import (
    Arg,
    DeviceAddr,
    Function,
    Instruction,
    Kernel,
    LocalAddr,
    Module,
    Pred,
    settle_version,
)
from anywave.conformance import assemble_group, group_names
from anywave.isa.mma import fragment_kinds
from anywave.isa.table import INSTRUCTIONS, Category, Flag, Operand
from anywave.isa.types import Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope, SpecialRegister

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "src" / "anywave" / "examples").glob("*.wave"))
ARCHS = ("sm_75", "sm_80", "sm_90")
PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found on PATH")


def _ptxas(text: str, arch: str, tmp_path: Path) -> None:
    src = tmp_path / f"m_{arch}.ptx"
    src.write_text(text)
    # the PTX names its target: arch, or sm_90a where mma.group is wgmma (then only that target)
    target = re.search(r"^\.target (\S+)", text, re.M).group(1)
    assert target in (arch, f"{arch}a" if arch == "sm_90" else arch), target
    r = subprocess.run([PTXAS, f"-arch={target}", str(src), "-o", str(tmp_path / "m.cubin")],
                       capture_output=True, text=True, timeout=600)  # hang guard
    assert r.returncode == 0, r.stderr[:3000]


# ------------------------------------------------------------------ every table entry

def _operand(kind: Operand, d) -> object:
    return {
        Operand.RD: 0, Operand.RS: 2, Operand.RD64: 4, Operand.RS64: 6, Operand.RD128: 8,
        Operand.RS128: 12, Operand.PD: 1, Operand.PS: Pred(2, True),
        Operand.IMM32: 2 if d.op in ("cp_wait", "fwait") else 0x3C00,  # cp.async.wait N, mma.wait N: N in 0..7
        Operand.IMM64: 0x123456789, Operand.SREG: SpecialRegister.GLOBAL_ID_Y,
        Operand.ARG: 2 if d.type is not None and d.type.bits == 64 else 1,
        Operand.DADDR: DeviceAddr(0, 2, -16), Operand.DADDR64: DeviceAddr(0, 4, 16),  # -16: aligned for b128
        Operand.LADDR: LocalAddr(2, 32), Operand.SCOPE: Scope.DEVICE,
        Operand.ORDER: MemoryOrder.RELEASE if d.op == "red" else MemoryOrder.ACQ_REL,
        Operand.FUNC: 0,
    }[kind]


_FRAG_SLOTS: dict = {}
#: wave-scope MMA fragment instructions: mma.sync.m16n8k16 and ldmatrix need sm_80
_WAVE_FRAGMENTS = {d.mnemonic for d in INSTRUCTIONS if d.category is Category.MMA and d.op.startswith("f")
                   and d.flags & Flag.WAVE_COLLECTIVE}


def _all_entries_module(skip: set[str] = frozenset()) -> Module:
    """One kernel holding every non-structured table entry (plus the control entries in a
    well-nested shape), so one translation exercises every emitter."""
    code = []
    for d in INSTRUCTIONS:
        if d.category is Category.CONTROL or d.mnemonic in skip:
            continue
        fk = fragment_kinds(d)  # fragment operands: one slot per fragment kind
        ops = [_FRAG_SLOTS.setdefault(fk[i], len(_FRAG_SLOTS)) if fk[i] is not None else _operand(k, d)
               for i, k in enumerate(d.operands)]
        if d.op == "fgmma":  # mma.group: its accumulator strip in f16..f31 (16 slots at most), B at 1024
            ops[0], ops[2] = 16, LocalAddr(2, 1024)
        if d.op in ("frowmax", "frowsum"):  # a row reduction's strip (8 slots at most): f16.. as well
            ops[1] = 16
        code.append(Instruction(d, tuple(ops)))
    code.append(Instruction.make("loop"))
    code.append(Instruction.make("if", Pred(3)))
    code.append(Instruction.make("break", guard=Pred(4)))
    code.append(Instruction.make("else"))
    code.append(Instruction.make("continue", guard=Pred(5, True)))
    code.append(Instruction.make("endif"))
    code.append(Instruction.make("call", 0))
    code.append(Instruction.make("break"))
    code.append(Instruction.make("endloop"))
    code.append(Instruction.make("nop"))
    code.append(Instruction.make("halt", guard=Pred(1)))
    code.append(Instruction.make("ret"))
    caps = Capability.NONE
    for c in Capability.names().values():
        caps |= c
    k = Kernel("every", [Arg("x", ArgKind.BUFFER, ScalarType.U32, Access.READWRITE),
                         Arg("s", ArgKind.SCALAR, ScalarType.U32), Arg("w", ArgKind.SCALAR, ScalarType.U64)],
               registers=32, local_memory=8192, capabilities=caps, code=code)
    f = Function("helper", [Instruction.make("add.i32", 0, 0, 2), Instruction.make("ret", guard=Pred(6)),
                            Instruction.make("nop")])
    return settle_version(Module([k], [f]))  # WAVE 1.1: it holds barrier.wave


def test_every_table_entry_has_an_emitter_or_a_reason() -> None:
    for d in INSTRUCTIONS:
        emit = emitter_for(d)  # KeyError here = an entry the backend forgot
        assert emit is not None or d.category is Category.CONTROL, d.mnemonic
        for arch in ARCHS:
            why = unsupported_reason(d, arch)
            assert why is None or (d.mnemonic in why and "sm_" in why), (d.mnemonic, why)


def test_coverage_report_lists_every_entry() -> None:
    cov = table_coverage("sm_90")
    assert set(cov) == {d.mnemonic for d in INSTRUCTIONS}
    assert all(v == "translated" for v in cov.values())
    old = table_coverage("sm_75")
    # wave-scope MMA fragments need mma.sync.m16n8k16 and ldmatrix (sm_80)
    frag = {d.mnemonic for d in INSTRUCTIONS if d.op.startswith("f") and d.category.name == "MMA"
            and d.flags & Flag.WAVE_COLLECTIVE}
    assert frag and {m for m, v in old.items() if v != "translated"} == {"fma.bf16", "fma.bf16x2"} | frag


def test_translate_every_entry_text() -> None:
    prog = translate(_all_entries_module(), "sm_90")
    for d in INSTRUCTIONS:
        if d.category is not Category.CONTROL:
            assert f"// {d.mnemonic}" in prog.text or "// @" in prog.text, d.mnemonic
    assert prog.kernels["every"].uniform  # it holds wave operations


@needs_ptxas
@pytest.mark.parametrize("arch", ARCHS)
def test_ptxas_every_entry(arch: str, tmp_path: Path) -> None:
    skip = {"fma.bf16", "fma.bf16x2"} | _WAVE_FRAGMENTS if arch == "sm_75" else set()
    _ptxas(translate(_all_entries_module(skip), arch).text, arch, tmp_path)


def test_unsupported_reported_before_translation() -> None:
    m = _all_entries_module()
    problems = check_supported(m, "sm_75")
    frag = [p for p in problems if "needs sm_80 or newer (mma.sync" in p]
    assert len(frag) == len(_WAVE_FRAGMENTS)
    problems = [p for p in problems if p not in frag]
    assert len(problems) == 2 and all("fma.bf16" in p and "kernel 'every'" in p for p in problems)
    with pytest.raises(PtxError, match="fma.bf16"):
        translate(m, "sm_75")


def test_bad_arch_and_kernel() -> None:
    with pytest.raises(PtxError, match="sm_75"):
        parse_arch("sm_61")
    assert parse_arch("90") == 90 and parse_arch("sm_90a") == 90
    with pytest.raises(PtxError, match="no kernel 'nope'"):
        translate(_all_entries_module(), "sm_90", kernels=["nope"])


# ------------------------------------------------------------------ conformance + examples with ptxas

def _modules() -> list[tuple[str, object]]:
    out = [(f"group:{g}", g) for g in group_names()]
    out += [(f"example:{p.stem}", p) for p in EXAMPLES]
    return out


def _load(obj: object) -> Module:
    if isinstance(obj, Path):
        return assemble(obj.read_text(), str(obj))
    return assemble_group(obj)


@needs_ptxas
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,obj", _modules(), ids=[n for n, _ in _modules()])
def test_ptxas_conformance_and_examples(name: str, obj: object, arch: str, tmp_path: Path) -> None:
    m = _load(obj)
    problems = check_supported(m, arch)
    if problems:
        pytest.skip(f"{name} needs what {arch} lacks: {problems[0]}")
    _ptxas(translate(m, arch).text, arch, tmp_path)


@needs_ptxas
def test_ptxas_library_kernels(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Every module the library kernels launch (anywave.kernels, run on the emulator at W = 32 to
    obtain them) translates to PTX that ptxas assembles for sm_90."""
    import anywave.jit.launch as launch
    from anywave.conformance.report import library_kernels

    mods: dict[int, Module] = {}
    real = launch.drive

    def record(tgt, module, k, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        mods[id(module)] = module
        return real(tgt, module, k, *a, **kw)

    monkeypatch.setattr(launch, "drive", record)
    for _, fn in library_kernels():
        fn("emulator", 32)
    assert len(mods) >= 10
    for m in mods.values():
        _ptxas(translate(m, "sm_90").text, "sm_90", tmp_path)


def test_only_fma_bf16_is_unsupported_on_sm75() -> None:
    for name, obj in _modules():
        for p in check_supported(_load(obj), "sm_75"):
            assert "fma.bf16" in p or "needs sm_80 or newer (mma.sync" in p, (name, p)


# ------------------------------------------------------------------ structure of the output

_ARITH = re.compile(r"^\s*(?:@!?%\w+\s+)?(add|sub|mul|fma|div|sqrt)\.([a-z0-9.]*)(f32|f64|f16|bf16)\b", re.M)


@pytest.mark.parametrize("group", ["float", "float.f64", "float.f16", "float.bf16", "wave", "mma"])
def test_no_ftz_and_explicit_rounding(group: str) -> None:
    text = translate(assemble_group(group), "sm_90", comments=False).text
    assert ".ftz" not in text
    found = _ARITH.findall(text)
    assert found, "expected float arithmetic in the output"
    for op, mods, t in found:
        assert ".rn." in f".{mods}" or mods.startswith("rn."), f"{op}.{mods}{t} lacks .rn"
    assert "mad.f32" not in text and "mad.rn" not in text  # no contraction forms


def _one(mnemonic: str, *ops: object, arch: str = "sm_90", guard: Pred | None = None) -> str:
    k = Kernel("k", [Arg("x", ArgKind.BUFFER, ScalarType.U32, Access.READWRITE)], registers=16,
               capabilities=Capability.WAVE_OPS | Capability.F64 | Capability.INT64,
               code=[Instruction.make(mnemonic, *ops, guard=guard)])
    return translate(Module([k]), arch).text


def test_integer_division_edge_checks() -> None:
    text = _one("div.i32", 0, 1, 2)
    assert "div.s32" in text
    # MIN / -1 and b == 0 handled (the body of anywave.isa.bodies: a safe divisor, then b = 0 -> -1)
    assert re.search(r"setp\.eq\.u32 %q\d+, %r1, 0x80000000;", text)
    assert re.search(r"setp\.eq\.u32 %q\d+, %r2, 0xffffffff;", text)
    assert re.search(r"selp\.b32 %t\d+, 0x1, %r2, %q\d+;", text)
    assert re.search(r"selp\.b32 %t\d+, 0xffffffff, ", text)
    rem = _one("rem.u32", 0, 1, 2)
    assert re.search(r"selp\.b32 %t\d+, %r1, %t\d+, %q\d+", rem)  # b = 0 -> a


def test_float_to_int_maps_nan_to_zero() -> None:
    text = _one("cvt.i32.f64", 0, 2)
    assert "cvt.rzi.s32.f64" in text and "setp.nan.f64" in text and "selp.b32 %t0, 0," in text


def test_minmax_canonical_nan_and_signed_zero() -> None:
    text = _one("min.f32", 0, 1, 2)
    assert "0x7fc00000" in text  # the spec's canonical NaN, not PTX's 0x7fffffff
    assert "or.b32" in text  # -0 < +0 on equal operands
    assert not re.search(r"^\s*min\.f32", text, re.M)  # PTX min's NaN/zero rules are not used


def test_wave_ops_use_the_existing_lane_mask() -> None:
    for m, ops in (("shfl.xor.b32", (0, 1, 2)), ("ballot.b64", (0, Pred(1))), ("wred.add.f32", (0, 1)),
                   ("wscan.excl.add.f32", (0, 1)), ("any.pred", (1, Pred(2))), ("bcast.b32", (0, 1, 2))):
        text = _one(m, *ops, guard=Pred(3))
        syncs = re.findall(r"\b(?:shfl|vote)\.sync[^\n;]*;", text)
        assert syncs, m
        for s in syncs:
            assert s.rstrip(";").endswith("%exist"), (m, s)
        assert "activemask" not in text


def test_shifts_and_ballot_high_word() -> None:
    text = _one("ballot.b64", 4, Pred(1))
    assert "mov.b32 %r5, 0;" in text  # bits >= 32 are 0
    assert "shl.b64" in _one("shl.b64", 0, 2, 4)


def test_comments_carry_source_locations() -> None:
    m = assemble(".kernel k\n.arg x buffer u32 readwrite\n.registers 4\n.loc \"src.py\" 7 3\n"
                 "  add.i32 r0, r1, r2\n.end\n", "t.wave")
    text = translate(m, "sm_90").text
    assert re.search(r"// add\.i32\s+r0, r1, r2\s+\(src\.py:7:3\)", text)


def test_cli_translate_writes_file(tmp_path: Path) -> None:
    import argparse

    from anywave.backends import cli_translate

    ap = argparse.ArgumentParser()
    cli_translate.add_parser(ap.add_subparsers())
    out = tmp_path / "saxpy.ptx"
    args = ap.parse_args(["translate", str(EXAMPLES[0]), "--arch", "sm_80", "-o", str(out)])
    assert cli_translate.run(args) == 0
    text = out.read_text()
    assert ".target sm_80" in text and ".visible .entry" in text
