"""Round trips text -> Module -> text -> Module, through the instruction encoding and the
.wbin container: every instruction-table record by hand, and random valid programs with
hypothesis (set ANYWAVE_FUZZ_EXAMPLES for a longer run)."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anywave.asm import assemble, disassemble
from anywave.binary.encoding import decode_code, encode_code
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
from anywave.errors import SourceLoc
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, Flag, InstrDef, Operand
from anywave.isa.types import (
    BUFFER_TYPES,
    SCALAR_ARG_TYPES,
    Access,
    ArgKind,
    Capability,
    MemoryOrder,
    ScalarType,
    Scope,
    SpecialRegister,
)

try:
    from anywave.binary.wbin import read_wbin, write_wbin
except ImportError:  # pragma: no cover - the container is another helper's module
    write_wbin = read_wbin = None  # type: ignore[assignment]

FUZZ_EXAMPLES = int(os.environ.get("ANYWAVE_FUZZ_EXAMPLES", "60"))
T = ScalarType


def _locs(m: Module) -> list[list[SourceLoc | None]]:
    return [[i.loc for i in k.code] for k in m.kernels] + [[i.loc for i in f.code] for f in m.functions]


def _words(m: Module) -> list[list[int]]:
    return [encode_code(k.code) for k in m.kernels] + [encode_code(f.code) for f in m.functions]


def _assert_roundtrip(m: Module) -> str:
    text = disassemble(m)
    m2 = assemble(text, "roundtrip.wave")
    assert m2 == m, text
    assert _locs(m2) == _locs(m)
    assert _words(m2) == _words(m)
    assert disassemble(m2) == text  # canonical: a fixed point
    for k in m2.kernels:
        assert decode_code(encode_code(k.code)) == k.code
    return text


# ---------------------------------------------------------------- every table record by hand

# (text, value) per operand kind; immediates are handled by type below
_SAMPLES: dict[Operand, tuple[str, object]] = {
    Operand.RD: ("r3", 3), Operand.RS: ("r254", 254),
    Operand.RD64: ("r4:r5", 4), Operand.RS64: ("r253:r254", 253),
    Operand.RD128: ("r8:r11", 8), Operand.RS128: ("r0:r3", 0),
    Operand.PD: ("p7", 7), Operand.PS: ("!p3", Pred(3, True)),
    Operand.SREG: ("sr_wave_width", SpecialRegister.WAVE_WIDTH),
    Operand.ARG: ("s", 1),
    Operand.DADDR: ("buf[r1+8]", DeviceAddr(0, 1, 8)),
    Operand.DADDR64: ("buf[r2:r3-4]", DeviceAddr(0, 2, -4)),
    Operand.LADDR: ("[r5+0x10]", LocalAddr(5, 16)),
    Operand.SCOPE: (".workgroup", Scope.WORKGROUP),
    Operand.ORDER: (".acq_rel", MemoryOrder.ACQ_REL),
    Operand.FUNC: ("f", 0),
    Operand.FD: ("f5", 5), Operand.FS: ("f31", 31),
}


def _imm_sample(t: ScalarType) -> tuple[str, int]:
    """A literal and its expected stored bits, computed with struct/by hand."""
    if t is T.F32:
        return "1.5", struct.unpack("<I", struct.pack("<f", 1.5))[0]
    if t is T.F64:
        return "-2.25", struct.unpack("<Q", struct.pack("<d", -2.25))[0]
    if t is T.F16:
        return "1.5", struct.unpack("<H", struct.pack("<e", 1.5))[0]
    if t is T.BF16:
        return "1.5", 0x3FC0  # top half of f32 1.5 = 0x3fc00000
    if t.is_signed:
        return "-7", (1 << t.bits) - 7
    if t.spelling.startswith("u"):
        return "42", 42
    return "0x2a", 42


def _record_case(d: InstrDef) -> tuple[list[str], list[Instruction]]:
    """Source lines and expected instructions exercising record ``d`` once."""
    if Flag.GUARD_OPERAND in d.flags:
        ins_text, ins = f"{d.mnemonic} !p2", Instruction(d, (), Pred(2, True))
    else:
        texts, values = [], []
        for kind in d.operands:
            if kind in (Operand.IMM32, Operand.IMM64):
                assert d.type is not None
                text, value = _imm_sample(d.type)
            elif kind is Operand.ORDER and d.op == "red":  # red takes .relaxed/.release only (spec §6.1)
                text, value = ".release", MemoryOrder.RELEASE
            else:
                text, value = _SAMPLES[kind]
            texts.append(text)
            values.append(value)
        guard = None if Flag.NO_GUARD in d.flags else Pred(6, False)
        prefix = "@p6 " if guard else ""
        ins_text = f"{prefix}{d.mnemonic} {', '.join(texts)}".rstrip()
        ins = Instruction(d, tuple(values), guard)  # type: ignore[arg-type]
    if d.op == "if":
        ins_text, ins = "if !p3", Instruction(d, (Pred(3, True),))
    wrap = {"if": ([], ["endif"]), "else": (["if p0"], ["endif"]), "endif": (["if p0"], []),
            "loop": ([], ["endloop"]), "endloop": (["loop"], []), "break": (["loop"], ["endloop"]),
            "continue": (["loop"], ["endloop"])}
    before, after = wrap.get(d.op, ([], []))
    expected = [_wrapper(x) for x in before] + [ins] + [_wrapper(x) for x in after]
    return before + [ins_text] + after, expected


def _wrapper(text: str) -> Instruction:
    """The structural wrappers (if p0, loop ...) as expected instructions, built directly."""
    word, *rest = text.split()
    ops = (Pred(0),) if rest else ()
    return Instruction(BY_MNEMONIC[word], ops)


_HEADER = """.kernel k
.arg buf buffer u32 readwrite
.arg s scalar u32
.registers 255
"""


@pytest.mark.parametrize("d", INSTRUCTIONS, ids=lambda d: d.mnemonic)
def test_every_record_roundtrips(d: InstrDef) -> None:
    lines, expected = _record_case(d)
    text = _HEADER + "\n".join("    " + x for x in lines) + "\n.end\n.func f\n    ret\n.end\n"
    m = assemble(text, "record.wave")
    assert m.kernels[0].code == expected
    assert encode_code(m.kernels[0].code) == encode_code(expected)
    _assert_roundtrip(m)
    if write_wbin is not None:
        blob = write_wbin(m, verify=False)
        back = read_wbin(blob, verify=False)
        assert back == m
        assert write_wbin(back, verify=False) == blob


# ---------------------------------------------------------------- random programs

_IDENTS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_PLAIN = [d for d in INSTRUCTIONS if Flag.STRUCTURED not in d.flags and d.op != "call"]
# any text a .wbin debug table can hold: no NUL, no lone surrogates
_FILE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_FLOAT_BITS = {T.F16: 16, T.BF16: 16, T.F32: 32, T.F64: 64}


@st.composite
def _float_bits(draw: st.DrawFn, t: ScalarType, width: int) -> int:
    n = _FLOAT_BITS[t]
    sign = draw(st.integers(0, 1)) << (n - 1)
    ebits = {16: 5, 32: 8, 64: 11}[n] if t is not T.BF16 else 8
    mbits = n - 1 - ebits
    special = draw(st.sampled_from(["any", "nan", "inf", "zero", "denormal", "canonical"]))
    if special == "nan":
        return sign | (((1 << ebits) - 1) << mbits) | draw(st.integers(1, (1 << mbits) - 1))
    if special == "canonical":
        return {T.F16: 0x7E00, T.BF16: 0x7FC0, T.F32: 0x7FC00000, T.F64: 0x7FF8000000000000}[t]
    if special == "inf":
        return sign | (((1 << ebits) - 1) << mbits)
    if special == "zero":
        return sign
    if special == "denormal":
        return sign | draw(st.integers(1, (1 << mbits) - 1))
    return draw(st.integers(0, (1 << n) - 1))


@st.composite
def _instruction(draw: st.DrawFn, d: InstrDef, ctx: dict) -> Instruction:  # type: ignore[type-arg]
    values: list[object] = []
    for kind in d.operands:
        if kind.reg_count:
            values.append(draw(st.integers(0, 255 - kind.reg_count)))
        elif kind is Operand.PD:
            values.append(draw(st.integers(0, 7)))
        elif kind is Operand.PS:
            values.append(Pred(draw(st.integers(0, 7)), draw(st.booleans())))
        elif kind in (Operand.IMM32, Operand.IMM64):
            width = 32 * kind.words
            assert d.type is not None
            if d.type.is_float:
                values.append(draw(_float_bits(d.type, width)))
            else:
                values.append(draw(st.integers(0, (1 << width) - 1)))
        elif kind is Operand.SREG:
            values.append(draw(st.sampled_from(list(SpecialRegister))))
        elif kind is Operand.SCOPE:
            values.append(draw(st.sampled_from(list(Scope))))
        elif kind is Operand.ORDER:  # red takes .relaxed/.release only (spec §6.1)
            orders = [MemoryOrder.RELAXED, MemoryOrder.RELEASE] if d.op == "red" else list(MemoryOrder)
            values.append(draw(st.sampled_from(orders)))
        elif kind is Operand.ARG:
            values.append(draw(st.sampled_from(ctx["scalars"])))
        elif kind in (Operand.DADDR, Operand.DADDR64):
            reg = draw(st.integers(0, 254 if kind is Operand.DADDR else 253))
            values.append(DeviceAddr(draw(st.sampled_from(ctx["buffers"])), reg,
                                     draw(st.integers(-(1 << 31), (1 << 31) - 1))))
        elif kind is Operand.LADDR:
            values.append(LocalAddr(draw(st.integers(0, 254)), draw(st.integers(-(1 << 31), (1 << 31) - 1))))
        elif kind in (Operand.FD, Operand.FS):
            values.append(draw(st.integers(0, 31)))
        else:  # pragma: no cover
            raise AssertionError(kind)
    guard = None
    if Flag.NO_GUARD not in d.flags and draw(st.booleans()):
        guard = Pred(draw(st.integers(0, 7)), draw(st.booleans()))
    loc = None
    if draw(st.integers(0, 3)) == 0:
        file = draw(st.text(_FILE_CHARS, max_size=12))
        loc = SourceLoc(file, draw(st.integers(0, 1 << 20)), draw(st.integers(0, 300)))
    return Instruction(d, tuple(values), guard, loc)  # type: ignore[arg-type]


@st.composite
def _body(draw: st.DrawFn, ctx: dict, depth: int, in_loop: bool) -> list[Instruction]:  # type: ignore[type-arg]
    out: list[Instruction] = []
    for _ in range(draw(st.integers(0, 6 if depth == 0 else 3))):
        choice = draw(st.sampled_from(["plain", "plain", "plain", "if", "loop", "jump", "call"]))
        if choice == "if" and depth < 3:
            out.append(Instruction(BY_MNEMONIC["if"], (Pred(draw(st.integers(0, 7)), draw(st.booleans())),)))
            out += draw(_body(ctx, depth + 1, in_loop))
            if draw(st.booleans()):
                out.append(Instruction(BY_MNEMONIC["else"]))
                out += draw(_body(ctx, depth + 1, in_loop))
            out.append(Instruction(BY_MNEMONIC["endif"]))
        elif choice == "loop" and depth < 3:
            out.append(Instruction(BY_MNEMONIC["loop"]))
            out += draw(_body(ctx, depth + 1, True))
            out.append(Instruction(BY_MNEMONIC["endloop"]))
        elif choice == "jump" and in_loop:
            guard = Pred(draw(st.integers(0, 7)), draw(st.booleans())) if draw(st.booleans()) else None
            out.append(Instruction(BY_MNEMONIC[draw(st.sampled_from(["break", "continue"]))], (), guard))
        elif choice == "call" and ctx["callable"]:
            out.append(Instruction(BY_MNEMONIC["call"], (draw(st.sampled_from(ctx["callable"])),)))
        else:
            out.append(draw(_instruction(draw(st.sampled_from(_PLAIN)), ctx)))
    return out


@st.composite
def _module(draw: st.DrawFn) -> Module:
    nfuncs = draw(st.integers(0, 3))
    fnames = draw(st.lists(_IDENTS, min_size=nfuncs, max_size=nfuncs, unique=True))
    knames = draw(st.lists(_IDENTS, min_size=1, max_size=3, unique=True))
    m = Module()
    for name in knames:
        argnames = draw(st.lists(_IDENTS, min_size=2, max_size=5, unique=True))
        args = [Arg(argnames[0], ArgKind.BUFFER, draw(st.sampled_from(BUFFER_TYPES)),
                    draw(st.sampled_from(list(Access)))),
                Arg(argnames[1], ArgKind.SCALAR, draw(st.sampled_from(SCALAR_ARG_TYPES)))]
        for extra in argnames[2:]:
            if draw(st.booleans()):
                args.append(Arg(extra, ArgKind.BUFFER, draw(st.sampled_from(BUFFER_TYPES)),
                                draw(st.sampled_from(list(Access)))))
            else:
                args.append(Arg(extra, ArgKind.SCALAR, draw(st.sampled_from(SCALAR_ARG_TYPES))))
        ctx = {"buffers": [i for i, a in enumerate(args) if a.is_buffer],
               "scalars": [i for i, a in enumerate(args) if not a.is_buffer],
               "callable": list(range(nfuncs))}
        k = Kernel(name, args, registers=draw(st.integers(1, 255)),
                   local_memory=draw(st.integers(0, (1 << 32) - 1)),
                   workgroup_size=draw(st.none() | st.tuples(*[st.integers(1, 1024)] * 3)),
                   max_workgroup_size=draw(st.none() | st.integers(1, 1 << 20)),
                   capabilities=Capability(draw(st.integers(0, 255))),
                   code=draw(_body(ctx, 0, False)), flags=draw(st.integers(0, 1)))
        m.kernels.append(k)
    for fi, name in enumerate(fnames):
        # functions call only later functions (no recursion); their argument operands name
        # indices valid in the first kernel (the disassembler prints $N where names differ)
        first = m.kernels[0]
        ctx = {"buffers": [i for i, a in enumerate(first.args) if a.is_buffer],
               "scalars": [i for i, a in enumerate(first.args) if not a.is_buffer],
               "callable": list(range(fi + 1, nfuncs))}
        m.functions.append(Function(name, draw(_body(ctx, 0, False))))
    return settle_version(m)  # the lowest WAVE version that has its instructions (spec §1.4)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_module())
def test_random_programs_roundtrip(m: Module) -> None:
    _assert_roundtrip(m)
    if write_wbin is not None:
        blob = write_wbin(m, verify=False)
        assert assemble(disassemble(read_wbin(blob, verify=False))) == m


def test_examples_roundtrip_through_wbin() -> None:
    from importlib.resources import files

    found = 0
    for entry in files("anywave").joinpath("examples").iterdir():
        if not entry.name.endswith(".wave"):
            continue
        found += 1
        m = assemble(entry.read_text(), entry.name)
        text = _assert_roundtrip(m)
        if write_wbin is not None:
            blob = write_wbin(m)  # the examples must also pass the verifier
            back = read_wbin(blob)
            assert back == m and _locs(back) == _locs(m)
            assert write_wbin(assemble(disassemble(back))) == blob
            assert disassemble(back) == text
    assert found >= 7
