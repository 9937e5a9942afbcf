"""The assembler: native syntax, float literal rounding against independent methods, and
every diagnostic with its message and caret column."""

from __future__ import annotations

import struct
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anywave.asm import AsmError, assemble
from anywave.asm.floats import decimal_to_bits, format_float_bits
from anywave.binary.module import DeviceAddr, Instruction, LocalAddr, Pred
from anywave.errors import SourceLoc
from anywave.isa.types import Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def k(body: str, header: str = "") -> str:
    return f".kernel k\n{header}" + body + ".end\n"


# ---------------------------------------------------------------- native syntax

SAXPY = """\
; comment
# comment too
.version 1.0
.kernel saxpy
.arg a scalar f32
.arg x buffer f32 read
.arg y buffer f32 readwrite
.arg n scalar u32
.registers 8
.local_memory 64
.workgroup_size 256
.max_workgroup_size 1024
    mov.sr      r0, sr_global_id_x
    ldarg.b32   r1, n
    setp.ge.u32 p0, r0, r1
    @p0 halt
    movi.f32    r2, 1.5
    ld.device.b32 r5, x[r3+16]
    ld.device.b32.o64 r5, x[r6:r7-8]
    st.local.b32 [r3+4], r5   ; local
    atom.device.add.u32 r6, y[r3], r5, .device, .relaxed
    loop
      break !p1
      @p2 continue
    endloop
    .loc "saxpy.py" 12 5
    call helper
    halt
.end
.func helper
    ret p3
.end
"""


def test_native_program_values() -> None:
    m = assemble(SAXPY, "saxpy.wave")
    kern = m.kernel("saxpy")
    assert [(a.name, a.kind, a.type, a.access) for a in kern.args] == [
        ("a", ArgKind.SCALAR, T.F32, Access.READ), ("x", ArgKind.BUFFER, T.F32, Access.READ),
        ("y", ArgKind.BUFFER, T.F32, Access.READWRITE), ("n", ArgKind.SCALAR, T.U32, Access.READ)]
    assert (kern.registers, kern.local_memory, kern.workgroup_size, kern.max_workgroup_size) == (
        8, 64, (256, 1, 1), 1024)
    assert kern.capabilities == Capability.OFFSET64  # inferred from ld.device.b32.o64
    c = kern.code
    assert c[0] == Instruction.make("mov.sr", 0, SpecialRegister.GLOBAL_ID_X)
    assert c[1] == Instruction.make("ldarg.b32", 1, 3)
    assert c[3] == Instruction.make("halt", guard=Pred(0))
    assert c[4] == Instruction.make("movi.f32", 2, 0x3FC00000)
    assert c[5] == Instruction.make("ld.device.b32", 5, DeviceAddr(1, 3, 16))
    assert c[6] == Instruction.make("ld.device.b32.o64", 5, DeviceAddr(1, 6, -8))
    assert c[7] == Instruction.make("st.local.b32", LocalAddr(3, 4), 5)
    assert c[8] == Instruction.make("atom.device.add.u32", 6, DeviceAddr(2, 3, 0), 5, Scope.DEVICE,
                                    MemoryOrder.RELAXED)
    assert c[10] == Instruction.make("break", guard=Pred(1, True))
    assert c[11] == Instruction.make("continue", guard=Pred(2))
    assert c[13] == Instruction.make("call", 0) and c[13].loc == SourceLoc("saxpy.py", 12, 5)
    assert all(i.loc is None for i in c if i is not c[13])
    assert m.functions[0].name == "helper"
    assert m.functions[0].code == [Instruction.make("ret", guard=Pred(3))]


def test_integer_immediates_stored_modulo_width() -> None:
    m = assemble(k("    movi.i32 r0, -1\n    movi.u32 r1, 0xffffffff\n    movi.b32 r2, -2147483648\n"
                   "    movi.i64 r2:r3, -1\n    movi.b64 r4:r5, 0x0123456789abcdef\n    movi.u32 r6, 0b101\n"))
    vals = [i.operands[1] for i in m.kernels[0].code]
    assert vals == [0xFFFFFFFF, 0xFFFFFFFF, 0x80000000, (1 << 64) - 1, 0x0123456789ABCDEF, 5]


def test_capabilities_inferred_through_called_functions_and_declared() -> None:
    src = (".kernel a\n    call f\n.end\n.kernel b\n.capabilities f16, mma\n    call f\n.end\n"
           ".func f\n    call g\n.end\n.func g\n    add.f64 r0:r1, r2:r3, r4:r5\n"
           "    wred.add.u32 r0, r1\n.end\n")
    m = assemble(src)
    assert m.kernel("a").capabilities == Capability.F64 | Capability.WAVE_OPS
    assert m.kernel("b").capabilities == Capability.F16 | Capability.MMA  # as declared
    assert m.kernel("a").registers == 6  # inferred: r0..r5 used in g


def test_function_argument_names_resolve_in_callers() -> None:
    src = (".kernel a\n.arg s scalar u32\n.arg buf buffer u32 readwrite\n    call f\n.end\n"
           ".func f\n    ldarg.b32 r0, s\n    st.device.b32 buf[r0], r0\n    ldarg.b32 r1, $0\n.end\n")
    code = assemble(src).functions[0].code
    assert code[0].operands == (0, 0) and code[1].operands[0] == DeviceAddr(1, 0, 0)
    assert code[2].operands == (1, 0)


def test_crlf_and_tabs() -> None:
    m = assemble(".kernel k\r\n\tadd.i32\tr1, r2,r3\r\n.end\r\n")
    assert m.kernels[0].code == [Instruction.make("add.i32", 1, 2, 3)]


# ---------------------------------------------------------------- float literals

def _exact_decimal(x: Fraction) -> str:
    """An exact decimal string for a dyadic rational."""
    d = Decimal(x.numerator) / Decimal(x.denominator) if x.denominator == 1 else None
    if d is not None:
        return str(d)
    # denominator is a power of two: multiply by 5^k / 10^k
    k2 = x.denominator.bit_length() - 1
    assert x.denominator == 1 << k2
    digits = x.numerator * 5 ** k2
    sign = "-" if digits < 0 else ""
    return f"{sign}{abs(digits)}e-{k2}"


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFFFFFF))
def test_f32_exact_values_parse_to_their_bits(bits: int) -> None:
    value = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    if not np.isfinite(value):
        return
    text = _exact_decimal(Fraction(float(value)))
    assert decimal_to_bits(text, T.F32) == bits or (bits == 0x80000000 and text == "0")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFE))
def test_f32_halfway_cases_round_to_even(bits: int) -> None:
    # midpoint between two adjacent positive f32 values, exactly, and a hair either side
    lo = np.array([bits << 8], dtype=np.uint32).view(np.float32)[0]
    hi = np.nextafter(lo, np.float32(np.inf), dtype=np.float32)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    lo_bits = int(np.array([lo]).view(np.uint32)[0])
    even = lo_bits if lo_bits % 2 == 0 else lo_bits + 1
    assert decimal_to_bits(_exact_decimal(mid), T.F32) == even
    tiny = Fraction(1, 1 << 200)
    assert decimal_to_bits(_exact_decimal(mid + tiny), T.F32) == lo_bits + 1
    assert decimal_to_bits(_exact_decimal(mid - tiny), T.F32) == lo_bits


def test_f32_no_double_rounding() -> None:
    # 1 + 2^-24 + 2^-60: float() rounds to 1 + 2^-24 (a tie at f32), then a cast ties to
    # even giving 1.0; the exact value is above the tie, so the right answer is 1 + 2^-23.
    text = _exact_decimal(1 + Fraction(1, 1 << 24) + Fraction(1, 1 << 60))
    assert np.float32(float(text)) == np.float32(1.0)  # the double-rounding trap is real
    assert decimal_to_bits(text, T.F32) == 0x3F800001


@pytest.mark.parametrize("t, dtype", [(T.F16, np.float16), (T.BF16, ml_dtypes.bfloat16)])
def test_16bit_exact_values(t: ScalarType, dtype: type) -> None:
    for bits in range(0, 0x10000, 7):
        value = np.array([bits], dtype=np.uint16).view(dtype)[0]
        if not np.isfinite(float(value)):
            continue
        text = _exact_decimal(Fraction(float(value)))
        got = decimal_to_bits(text, t)
        assert got == bits or (bits == 0x8000 and got == 0), (hex(bits), text)
        # and the printer reads back to the same bits
        assert decimal_to_bits(format_float_bits(bits, t), t) == bits


@pytest.mark.parametrize("text, t, bits", [
    ("0.1", T.F32, 0x3DCCCCCD), ("-0.0", T.F32, 0x80000000), ("inf", T.F32, 0x7F800000),
    ("-inf", T.F16, 0xFC00), ("nan", T.F16, 0x7E00), ("nan", T.BF16, 0x7FC0), ("nan", T.F64, 0x7FF8000000000000),
    ("1e-46", T.F32, 0), ("-1e-46", T.F32, 0x80000000), ("1.401298464324817e-45", T.F32, 1),
    ("65504", T.F16, 0x7BFF), ("65519.99", T.F16, 0x7BFF), ("5.960464477539063e-08", T.F16, 1),
    ("1.00048828125", T.F16, 0x3C00),  # 1 + 2^-11: halfway, ties to even -> 1.0
    ("1.00146484375", T.F16, 0x3C02),  # 1 + 3*2^-11: halfway, ties to even -> 1 + 2^-9
    ("3.4028235e38", T.F32, 0x7F7FFFFF), ("0.1", T.F64, 0x3FB999999999999A),
    ("1.00390625", T.BF16, 0x3F80),  # 1 + 2^-8: halfway, ties to even
])
def test_literal_table(text: str, t: ScalarType, bits: int) -> None:
    assert decimal_to_bits(text, t) == bits


@pytest.mark.parametrize("text, t", [("1e39", T.F32), ("65520", T.F16), ("-1e309", T.F64),
                                     ("3.5e38", T.F32), ("1e400", T.F64), ("3.4e38", T.BF16)])
def test_overflowing_literal_is_an_error(text: str, t: ScalarType) -> None:
    with pytest.raises(AsmError, match="overflows"):
        assemble(k(f"    movi.{t.spelling} {'r0:r1' if t is T.F64 else 'r0'}, {text}\n"))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFFFFFF))
def test_f32_printer_is_shortest_and_exact(bits: int) -> None:
    text = format_float_bits(bits, T.F32)
    value = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    if np.isnan(value):
        assert text == ("nan" if bits == 0x7FC00000 else f"0x{bits:08x}")
        return
    assert decimal_to_bits(text, T.F32) == bits
    if np.isfinite(value):
        ref = np.format_float_scientific(value, unique=True)  # numpy's Dragon4: shortest
        ref_digits = len(ref.split("e")[0].replace("-", "").replace(".", "").rstrip("0") or "0")
        mine = text.lstrip("-").split("e")[0].replace(".", "").strip("0") or "0"
        assert len(mine) <= ref_digits


def test_f64_printer_matches_repr() -> None:
    for x in (0.1, -2.5e-300, 1e300, 5e-324, 123456.789, -0.0):
        bits = struct.unpack("<Q", struct.pack("<d", x))[0]
        assert float(format_float_bits(bits, T.F64)) == x
        assert format_float_bits(bits, T.F64) == repr(x)


def test_float_immediates_in_text() -> None:
    m = assemble(k("    movi.f32 r0, 0x7fc00001\n    movi.f16 r1, 1.5\n    movi.bf16 r2, -2\n"
                   "    movi.f64 r4:r5, 0.1\n    movi.f32 r3, 0.1\n"))
    vals = [i.operands[1] for i in m.kernels[0].code]
    assert vals == [0x7FC00001, struct.unpack("<H", struct.pack("<e", 1.5))[0], 0xC000,
                    struct.unpack("<Q", struct.pack("<d", 0.1))[0], f32_bits(0.1)]


# ---------------------------------------------------------------- diagnostics

DIAGNOSTICS = [
    # (source, message fragment, line, column)
    (k("    add.i32 r1, r2, r300\n"), "expected a register r0-r254, got 'r300'", 2, 21),
    (k("    addd.i32 r1, r2, r3\n"), "unknown mnemonic 'addd.i32' (did you mean 'add.i32'", 2, 5),
    (k("    add.i32 r1, r2\n"), "wrong operand count: add.i32 takes 3 operands (rd, rs, rs), got 2", 2, 5),
    (k("    add.i32 r1, r2, r3, r4\n"), "takes 3 operands", 2, 25),
    (k("    ld.device.b32 r1, y[r2]\n", ".arg x buffer f32 read\n"),
     "unknown argument 'y' in kernel 'k'; its arguments are: x", 3, 23),
    (k("    ldarg.b32 r1, xx\n", ".arg x scalar u32\n"), "unknown argument 'xx'", 3, 19),
    (k("    ldarg.b32 r1, x\n", ".arg x buffer u32 read\n"), "ldarg needs a scalar argument", 3, 19),
    (k("    ld.device.b32 r1, n[r2]\n", ".arg n scalar u32\n"), "needs a buffer argument", 3, 23),
    (k("    if p0\n"), "if is never closed by endif", 2, 5),
    (k("    loop\n    endif\n"), "endif closes the loop opened at line 2; expected endloop", 3, 5),
    (k("    endif\n"), "endif without a matching if", 2, 5),
    (k("    else\n"), "else without a matching if", 2, 5),
    (k("    if p0\n    else\n    else\n    endif\n"), "second else", 4, 5),
    (k("    endloop\n"), "endloop without a matching loop", 2, 5),
    (k("    break p0\n"), "break outside a loop", 2, 5),
    (".kernel k\n    halt\n", "missing .end", 1, 9),
    (".kernel k\n.kernel j\n.end\n", "missing .end", 2, 1),
    (".kernel k\n.end\n.kernel k\n.end\n", "duplicate kernel 'k' (first defined at line 1)", 3, 9),
    (".func f\n.end\n.func f\n.end\n", "duplicate function 'f'", 3, 7),
    (k("    call nothere\n"), "call to undefined function 'nothere'", 2, 10),
    (k("    call hepler\n") + ".func helper\n.end\n", "did you mean 'helper'", 2, 10),
    (k("", ".foo 1\n"), "unknown directive '.foo'", 2, 1),
    (".bogus\n", "unknown directive '.bogus'", 1, 1),
    (k("", ".registers 300\n"), "a register count must be in [1, 255], got 300", 2, 12),
    (k("", ".registers\n"), "expected .registers followed by a register count", 2, 1),
    (k("", ".registers 4\n.registers 5\n"), "duplicate .registers directive (first at line 2)", 3, 1),
    (k("", ".arg x buffer f32\n"), "needs its access", 2, 19),
    (k("", ".arg x buffer f33 read\n"), "type must be one of", 2, 15),
    (k("", ".arg x pointer f32 read\n"), "expected argument kind buffer or scalar", 2, 8),
    (k("", ".arg x scalar u8\n"), "type must be one of", 2, 15),
    (k("", ".arg x scalar u32\n.arg x scalar u32\n"), "duplicate argument 'x'", 3, 6),
    (k("", ".capabilities f16, warp_ops\n"), "unknown capability 'warp_ops' (did you mean 'wave_ops'", 2, 20),
    (k("", ".workgroup_size 0\n"), "a workgroup dimension must be in", 2, 17),
    (k("", ".flags fast\n"), "unknown kernel flag 'fast'", 2, 8),
    (".func f\n.registers 3\n.end\n", "not allowed in a .func block", 2, 1),
    (".end\n", "directive .end outside a .kernel or .func block", 1, 1),
    ("add.i32 r1, r2, r3\n", "outside a .kernel or .func block", 1, 1),
    (k("    movi.f32 r1, 1e39\n"), "1e39 overflows f32 (largest finite value 3.4028235e+38)", 2, 18),
    (k("    movi.f32 r1, abc\n"), "expected a f32 literal", 2, 18),
    (k("    movi.u32 r1, 1.5\n"), "expected an integer immediate for type u32", 2, 18),
    (k("    movi.i32 r0, 0x1ffffffff\n"), "a 32-bit immediate must be in", 2, 18),
    (k("    @p0 if p1\n    endif\n"), "if cannot carry a guard predicate", 2, 5),
    (k("    @p0 barrier\n"), "barrier cannot carry a guard", 2, 5),
    (k("    loop\n    @p0 break p1\n    endloop\n"), "has a guard twice", 3, 15),
    (k("    halt r0, r1\n"), "halt takes at most one operand", 2, 14),
    (k("    halt r0\n"), "expected a predicate p0-p7 or !p0-!p7, got 'r0'", 2, 10),
    (k("    setp.lt.u32 p8, r0, r1\n"), "expected a destination predicate p0-p7, got 'p8'", 2, 17),
    (k("    add.i64 r1, r2:r3, r4:r5\n"), "expected a register pair rN:rN+1", 2, 13),
    (k("    add.i64 r1:r2, r2:r4, r4:r5\n"), "after r2 comes r3, got 'r2:r4'", 2, 20),
    (k("    add.i64 r254:r255, r2:r3, r4:r5\n"), "runs past r254", 2, 13),
    (k("    st.local.b32 [r3+x], r1\n"), "expected an integer byte offset after '+', got 'x'", 2, 18),
    (k("    st.local.b32 r3, r1\n"), "expected a local address [rN+OFFSET]", 2, 18),
    (k("    ld.device.b32 r1, x[r1+0x80000000]\n", ".arg x buffer u32 read\n"),
     "does not fit in a signed 32-bit", 3, 23),
    (k("    mov.sr r0, sr_lane\n"), "expected a special register, got 'sr_lane' (did you mean 'sr_lane_id'", 2, 16),
    (k("    fence .gpu, .acq_rel\n"), "expected a scope", 2, 11),
    (k("    fence .device, .acqrel\n"), "expected a memory order", 2, 20),
    (k("    add.i32 r1,, r3\n"), "empty operand", 2, 16),
    (k("    .loc file 1 2\n    nop\n"), "expected .loc \"FILE\" LINE [COLUMN]", 2, 10),
    (k("    .loc \"f\" x\n    nop\n"), "expected a line number", 2, 14),
    (".version 2.0\n", "unsupported .version 2.0", 1, 10),
    (".kernel 9k\n.end\n", "expected .kernel NAME", 1, 9),
    (k("    @p0\n"), "guard @p0 is not followed by an instruction", 2, 5),
    (".func f\n    ldarg.b32 r0, s\n.end\n", "no kernel calls it", 2, 19),
]


@pytest.mark.parametrize("src, fragment, line, col", DIAGNOSTICS,
                         ids=[f"{i}-{d[1][:30]}" for i, d in enumerate(DIAGNOSTICS)])
def test_diagnostics(src: str, fragment: str, line: int, col: int) -> None:
    with pytest.raises(AsmError) as info:
        assemble(src, "t.wave")
    err = info.value
    assert fragment in err.message, err.message
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("t.wave", line, col), str(err)
    # the rendered message: file:line:col, the offending line, a caret under the column
    text = str(err)
    lines = text.split("\n")
    assert lines[0].startswith(f"t.wave:{line}:{col}: error: ")
    assert lines[1] == "    " + src.split("\n")[line - 1].expandtabs(1).rstrip("\r")
    assert lines[2].index("^") == 4 + col - 1


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(".:,;#@![]+-$\"rpx0123456789 \nabdegiklmnostuv_")), max_size=80))
def test_garbage_only_raises_asmerror(text: str) -> None:
    try:
        assemble(".kernel k\n" + text + "\n.end\n")
    except AsmError:
        pass


# ----------------------------------------------------------------------------- review fixes (issue 2)

_NATIVE = ".kernel k\n.arg x buffer u32 readwrite\n.registers 8\n{body}\n.end\n"


def _asm_error(src: str) -> AsmError:
    with pytest.raises(AsmError) as e:
        assemble(src, "t.wave")
    return e.value


def test_label_in_a_native_kernel_is_an_error_at_the_label():
    e = _asm_error(_NATIVE.format(body="    movi.b32 r0, 1\nfoo:\n    movi.b32 r0, 2"))
    assert "labels are only allowed in reference-dialect kernels" in str(e)
    assert e.loc == SourceLoc("t.wave", 5, 1)
    # .dialect native without arguments: also native
    e = _asm_error(".kernel k\n.dialect native\n.registers 1\nstart:\n    halt\n.end\n")
    assert "labels are only allowed" in str(e) and e.loc.line == 4
    # a reference-dialect kernel keeps its labels (they become functions)
    m = assemble(".kernel k\n.registers 2\n    call helper\n    halt\nhelper:\n    mov_imm r1, 5\n    ret\n.end\n")
    assert [f.name for f in m.functions] == ["helper"]


@pytest.mark.parametrize("mn, lit, ok", [
    ("movi.f16", "0x7e00", True), ("movi.f16", "0xffff", True), ("movi.bf16", "0x7fc0", True),
    ("movi.f16", "0x12345", False), ("movi.bf16", "0x0ffff", False), ("movi.f16", "0x10000", False),
    ("movi.f32", "0x7fc00001", True), ("movi.f32", "0x07fc00001", False),
])
def test_raw_float_bits_take_at_most_the_types_width(mn, lit, ok):
    src = _NATIVE.format(body=f"    {mn} r0, {lit}").replace(".registers 8", ".registers 8\n.capabilities f16, bf16")
    if ok:
        (ins,) = assemble(src).kernels[0].code
        assert ins.operands[1] == int(lit, 16)
        return
    e = _asm_error(src)
    assert "hex digits" in str(e) and e.loc.line == 5 and e.loc.col == len(f"    {mn} r0, ") + 1


@pytest.mark.parametrize("order", [".acquire", ".acq_rel", ".seq_cst"])
def test_red_with_an_acquiring_order_is_an_error_at_the_order(order):
    line = f"    red.device.add.u32 x[r0], r1, .device, {order}"
    e = _asm_error(_NATIVE.format(body=line))
    assert ".relaxed or .release" in str(e) and e.loc.col == line.index(order) + 1
    for ok in (".relaxed", ".release"):
        assemble(_NATIVE.format(body=f"    red.device.add.u32 x[r0], r1, .device, {ok}"))


@pytest.mark.parametrize("body", [
    "    movi.b32 r0, " + "9" * 5000,
    "    movi.b32 r0, 0x" + "f" * 5000,
    "    movi.f64 r0:r1, 1e" + "9" * 5000,
    "    movi.f32 r0, 0." + "0" * 5000 + "1",
    "    ld.device.b32 r0, x[r1+" + "1" * 5000 + "]",
    "    mov.b32 r" + "1" * 5000 + ", r0",
    "    @p" + "1" * 5000 + " halt",
    "    ldarg.b32 r0, $" + "1" * 5000,
])
def test_absurdly_long_literals_are_asm_errors_with_location(body):
    e = _asm_error(_NATIVE.format(body=body).replace(".registers 8", ".registers 8\n.capabilities f64"))
    assert e.loc.file == "t.wave" and e.loc.line == 5


def test_long_literal_limit_message_and_long_directive_numbers():
    e = _asm_error(_NATIVE.format(body="    movi.b32 r0, " + "1" * 401))
    assert "too long: 401 characters, at most 400" in str(e)
    # 400 characters is fine as a literal (a decimal with many leading zeros)
    (ins,) = assemble(_NATIVE.format(body="    movi.b32 r0, " + "0" * 399 + "7")).kernels[0].code
    assert ins.operands[1] == 7
    for src in (".version 1." + "0" * 5000 + "\n.kernel k\n    halt\n.end\n",
                ".kernel k\n.registers " + "1" * 5000 + "\n    halt\n.end\n",
                ".kernel k\n.loc \"f\" " + "1" * 5000 + "\n    halt\n.end\n"):
        assert _asm_error(src).loc.file == "t.wave"


def test_utf8_byte_order_mark_is_skipped():
    src = _NATIVE.format(body="    movi.b32 r0, 1")
    with_bom = assemble("\ufeff" + src, "t.wave")
    assert with_bom == assemble(src, "t.wave")
    # only at the start of the text: elsewhere it is an ordinary (invalid) character
    assert "\ufeff" in str(_asm_error(src.replace("    movi", "\ufeffmovi")))
