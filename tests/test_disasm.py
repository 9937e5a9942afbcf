"""The disassembler's canonical text: exact spellings, indentation, debug locations."""

from __future__ import annotations

import pytest

from anywave.asm import assemble, disassemble
from anywave.asm.disassembler import format_immediate
from anywave.binary.module import (
    KERNEL_FLAG_FLAT,
    Arg,
    DeviceAddr,
    Function,
    Instruction,
    Kernel,
    LocalAddr,
    Module,
    Pred,
)
from anywave.errors import SourceLoc, WaveError
from anywave.isa.types import Access, ArgKind, Capability, MemoryOrder, ScalarType, Scope, SpecialRegister

T = ScalarType
I = Instruction.make  # noqa: E741


def _module() -> Module:
    args = [Arg("x", ArgKind.BUFFER, T.F32, Access.READ), Arg("n", ArgKind.SCALAR, T.U32)]
    code = [
        I("mov.sr", 0, SpecialRegister.LANE_ID, loc=SourceLoc("k.py", 3, 7)),
        I("ldarg.b32", 1, 1),
        I("setp.ge.u32", 0, 0, 1),
        I("if", Pred(0, True)),
        I("ld.device.b32", 2, DeviceAddr(0, 3, 16)),
        I("ld.device.b64.o64", 4, DeviceAddr(0, 6, -4)),
        I("else"),
        I("loop"),
        I("break", guard=Pred(1, True)),
        I("continue"),
        I("st.local.b128", LocalAddr(3, 0), 8),
        I("endloop"),
        I("endif"),
        I("add.f32", 1, 2, 3, guard=Pred(2)),
        I("atom.device.cas.b32", 1, DeviceAddr(0, 2, 0), 3, 4, Scope.WORKGROUP, MemoryOrder.ACQ_REL),
        I("call", 0),
        I("halt", guard=Pred(5)),
    ]
    kern = Kernel("k", args, registers=12, local_memory=256, workgroup_size=(64, 2, 1),
                  capabilities=Capability.OFFSET64 | Capability.INT64, code=code, flags=KERNEL_FLAG_FLAT)
    return Module([kern], [Function("helper", [I("ret")])])


EXPECTED = """\
.version 1.0

.kernel k
.arg x buffer f32 read
.arg n scalar u32
.registers 12
.local_memory 256
.workgroup_size 64, 2, 1
.capabilities int64, offset64
.flags flat
    .loc "k.py" 3 7
    mov.sr         r0, sr_lane_id
    ldarg.b32      r1, n
    setp.ge.u32    p0, r0, r1
    if             !p0
      ld.device.b32  r2, x[r3+16]
      ld.device.b64.o64 r4:r5, x[r6:r7-4]
    else
      loop
        break !p1
        continue
        st.local.b128  [r3], r8:r11
      endloop
    endif
    @p2 add.f32        r1, r2, r3
    atom.device.cas.b32 r1, x[r2], r3, r4, .workgroup, .acq_rel
    call           helper
    halt p5
.end

.func helper
    ret
.end
"""


def test_canonical_text() -> None:
    m = _module()
    text = disassemble(m)
    assert text == EXPECTED
    back = assemble(text)
    assert back == m
    assert back.kernels[0].code[0].loc == SourceLoc("k.py", 3, 7)


@pytest.mark.parametrize("value, t, width, text", [
    (0x3FC00000, T.F32, 32, "1.5"), (0x80000000, T.F32, 32, "-0.0"), (0x7F800000, T.F32, 32, "inf"),
    (0xFF800000, T.F32, 32, "-inf"), (0x7FC00000, T.F32, 32, "nan"), (0xFFC00000, T.F32, 32, "0xffc00000"),
    (0x7F800001, T.F32, 32, "0x7f800001"), (0x00000001, T.F32, 32, "1e-45"), (0x3DCCCCCD, T.F32, 32, "0.1"),
    (0x7E00, T.F16, 32, "nan"), (0x7E01, T.F16, 32, "0x7e01"), (0x3C00, T.F16, 32, "1.0"),
    (0x1_3C00, T.F16, 32, "0x13c00"), (0x4049, T.BF16, 32, "3.14"), (0x4B800000, T.F32, 32, "16777216.0"),
    (0x5A0E1BCA, T.F32, 32, "1e+16"), (0x3FF0000000000000, T.F64, 64, "1.0"),
    (0x7FF8000000000000, T.F64, 64, "nan"), (0x7FF8000000000001, T.F64, 64, "0x7ff8000000000001"),
    (0xFFFFFFFF, T.I32, 32, "-1"), (0xFFFFFFFF, T.U32, 32, "4294967295"), (0xFF, T.B32, 32, "0xff"),
    ((1 << 64) - 2, T.I64, 64, "-2"), (5, T.B64, 64, "0x5"),
])
def test_immediates(value: int, t: ScalarType, width: int, text: str) -> None:
    assert format_immediate(value, t, width) == text


def test_loc_file_names_with_quotes_and_comment_characters() -> None:
    loc = SourceLoc('we"ird; #name\\\n\u2028.py', 1, 0)
    m = Module([Kernel("k", code=[I("nop", loc=loc)])])
    text = disassemble(m)
    assert assemble(text).kernels[0].code[0].loc == loc


def test_function_arguments_fall_back_to_raw_index() -> None:
    a = Kernel("a", [Arg("s", ArgKind.SCALAR, T.U32)], code=[I("call", 0)])
    b = Kernel("b", [Arg("t", ArgKind.SCALAR, T.U32)], code=[I("call", 0)])
    f = Function("f", [I("ldarg.b32", 0, 0)])
    m = Module([a, b], [f])
    text = disassemble(m)
    assert "ldarg.b32      r0, $0" in text
    assert assemble(text) == m
    m.kernels.pop()  # one caller only: the name is used
    assert "ldarg.b32      r0, s" in disassemble(m)


def test_capabilities_none_when_declared_empty_but_used() -> None:
    m = Module([Kernel("k", code=[I("wred.add.u32", 0, 1)])])
    text = disassemble(m)
    assert ".capabilities none" in text
    assert assemble(text).kernels[0].capabilities == Capability.NONE


def test_unprintable_name() -> None:
    with pytest.raises(WaveError, match="cannot be written"):
        disassemble(Module([Kernel("bad name")]))
