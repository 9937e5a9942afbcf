"""The .wbin container: byte layout, round trips and every rejection of the reader."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anywave.asm import assemble, disassemble
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
from anywave.binary.wbin import load, read_wbin, save, write_wbin
from anywave.errors import BinaryFormatError, SourceLoc, VerifyError, WaveError
from anywave.isa.table import BY_MNEMONIC, INSTRUCTIONS, MAX_ASYNC_WAIT, Category, Flag, Operand
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

I = Instruction.make  # noqa: E741


# ----------------------------------------------------------------------------- sample modules

def saxpy_module(with_locs: bool = True) -> Module:
    """y = a*x + y with a helper function; hand-built, valid."""
    loc = (lambda line: SourceLoc("saxpy.wave", line, 5)) if with_locs else (lambda line: None)
    k = Kernel(
        "saxpy",
        [Arg("a", ArgKind.SCALAR, ScalarType.F32), Arg("x", ArgKind.BUFFER, ScalarType.F32),
         Arg("y", ArgKind.BUFFER, ScalarType.F32, Access.READWRITE),
         Arg("n", ArgKind.SCALAR, ScalarType.U32)],
        registers=8, local_memory=0, workgroup_size=(64, 1, 1), max_workgroup_size=256,
        code=[
            I("mov.sr", 0, SpecialRegister.GLOBAL_ID_X, loc=loc(10)),
            I("ldarg.b32", 1, 3, loc=loc(11)),
            I("setp.ge.u32", 0, 0, 1),
            I("halt", guard=Pred(0), loc=loc(13)),
            I("ldarg.b32", 1, 0),
            I("movi.b32", 5, 2),
            I("shl.b32", 2, 0, 5),
            I("ld.device.b32", 3, DeviceAddr(1, 2, 0)),
            I("ld.device.b32", 4, DeviceAddr(2, 2, 0)),
            I("fma.f32", 4, 1, 3, 4),
            I("call", 0),
            I("st.device.b32", DeviceAddr(2, 2, 0), 4, loc=loc(20)),
            I("halt"),
        ])
    f = Function("helper", [I("nop"), I("ret", loc=loc(30))])
    return Module([k], [f])


def locs(m: Module) -> list:
    return [[ins.loc for ins in body.code] for body in list(m.kernels) + list(m.functions)]


# ----------------------------------------------------------------------------- layout helpers
# (an independent little parser of the documented layout, used to find fields to corrupt)

def sections(data: bytes) -> dict[int, tuple[int, int, int]]:
    """kind -> (offset, size, table entry offset)"""
    count = struct.unpack_from("<I", data, 12)[0]
    out = {}
    for i in range(count):
        at = 32 + 16 * i
        kind, off, size, _ = struct.unpack_from("<IIII", data, at)
        out[kind] = (off, size, at)
    return out


def fix_crc(data: bytes | bytearray) -> bytes:
    b = bytearray(data)
    b[20:24] = b"\0\0\0\0"
    struct.pack_into("<I", b, 20, zlib.crc32(bytes(b)))
    return bytes(b)


def patch(data: bytes, offset: int, fmt: str, value: int, crc: bool = True) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return fix_crc(b) if crc else bytes(b)


def build(parts: list[tuple[int, bytes]]) -> bytes:
    """An independent writer of the documented container layout from section payloads."""
    pos = (32 + 16 * len(parts) + 3) // 4 * 4
    table, body = b"", b""
    for kind, payload in parts:
        table += struct.pack("<IIII", kind, pos, len(payload), 0)
        pad = -len(payload) % 4
        body += payload + b"\0" * pad
        pos += len(payload) + pad
    head = struct.pack("<4sHHIIII8x", b"WBIN", 1, 0, 0, len(parts), pos, 0)
    raw = head + table
    raw += b"\0" * (-len(raw) % 4)
    return fix_crc(raw + body)


def kernel_field(data: bytes, field_offset: int) -> int:
    """Byte offset of a field of the first kernel record."""
    return sections(data)[3][0] + 4 + field_offset


def rejects(data: bytes, *words: str, offset: int | None = None) -> BinaryFormatError:
    with pytest.raises(BinaryFormatError) as ei:
        read_wbin(data)
    msg = str(ei.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    if offset is not None:
        assert ei.value.offset == offset, msg
    return ei.value


# ----------------------------------------------------------------------------- layout

def test_header_and_section_table_by_hand():
    m = saxpy_module()
    data = write_wbin(m)
    magic, major, minor, flags, count, size, crc, r0, r1 = struct.unpack_from("<4sHHIIIIII", data, 0)
    assert (magic, major, minor, flags, r0, r1) == (b"WBIN", 1, 0, 0, 0, 0)
    assert size == len(data) and len(data) % 4 == 0
    zeroed = data[:20] + b"\0" * 4 + data[24:]
    assert crc == zlib.crc32(zeroed)
    assert count == 5  # STRTAB CODE KERNELS FUNCS DEBUG
    secs = sections(data)
    assert sorted(secs) == [1, 2, 3, 4, 5]
    expected = (32 + 16 * count + 3) // 4 * 4
    for kind in sorted(secs):
        off, sz, _ = secs[kind]
        assert off == expected
        expected = (off + sz + 3) // 4 * 4
    assert expected == len(data)


def test_string_table_and_kernel_record_by_hand():
    m = saxpy_module()
    data = write_wbin(m)
    secs = sections(data)
    soff, ssize, _ = secs[1]
    strtab = data[soff:soff + ssize]
    # first-use order: kernel name, its argument names, the function, then debug files
    assert strtab == b"\0saxpy\0a\0x\0y\0n\0helper\0saxpy.wave\0"
    koff, ksize, _ = secs[3]
    (count,) = struct.unpack_from("<I", data, koff)
    assert count == 1
    fields = struct.unpack_from("<13I", data, koff + 4)
    name, start, words, regs, local, wx, wy, wz, mx, caps, flags, reserved, argc = fields
    assert strtab[name:].split(b"\0")[0] == b"saxpy"
    assert (start, regs, local, (wx, wy, wz), mx, caps, flags, reserved, argc) == (
        0, 8, 0, (64, 1, 1), 256, 0, 0, 0, 4)
    # word count by hand from the table's operand word counts
    assert words == sum(ins.defn.words for ins in m.kernels[0].code)
    args = [struct.unpack_from("<IBBBB", data, koff + 4 + 52 + 8 * i) for i in range(4)]
    assert args[1][1:] == (0, int(ScalarType.F32), int(Access.READ), 0)
    assert args[2][1:] == (0, 15, 3, 0)
    assert args[3][1:] == (1, 8, 1, 0)
    assert ksize == 4 + 52 + 4 * 8
    # the last kernel instruction is `halt` without guard: its word is just the opcode
    coff = secs[2][0]
    (last,) = struct.unpack_from("<I", data, coff + 4 * (words - 1))
    assert last == BY_MNEMONIC["halt"].opcode
    # FUNCS: helper starts right after the kernel
    foff = secs[4][0]
    assert struct.unpack_from("<4I", data, foff)[0] == 1
    assert struct.unpack_from("<4I", data, foff)[2:] == (words, 2)
    # DEBUG: word index of mov.sr (0), halt (after 3 instructions) ...
    doff, dsize, _ = secs[5]
    (dcount,) = struct.unpack_from("<I", data, doff)
    assert dcount == 5 and dsize == 4 + 16 * 5
    first = struct.unpack_from("<4I", data, doff + 4)
    assert first[0] == 0 and first[2:] == (10, 5)
    code = m.kernels[0].code
    halt_word = sum(ins.defn.words for ins in code[:3])
    assert struct.unpack_from("<4I", data, doff + 4 + 32)[0] == halt_word


def test_no_debug_section_without_locations():
    data = write_wbin(saxpy_module(with_locs=False))
    assert sorted(sections(data)) == [1, 2, 3, 4]


def test_round_trip_and_determinism():
    m = saxpy_module()
    data = write_wbin(m)
    back = read_wbin(data)
    assert back == m
    assert locs(back) == locs(m)
    assert write_wbin(back) == data
    assert write_wbin(saxpy_module()) == data


def test_load_save(tmp_path):
    m = saxpy_module()
    p = tmp_path / "k.wbin"
    save(m, p)
    assert p.read_bytes() == write_wbin(m)
    assert load(p) == m
    p.write_bytes(b"WBIN")
    with pytest.raises(BinaryFormatError, match="k.wbin: truncated"):
        load(p)


def test_writer_verifies_by_default():
    m = saxpy_module()
    m.kernels[0].registers = 2
    with pytest.raises(VerifyError):
        write_wbin(m)
    data = write_wbin(m, verify=False)
    with pytest.raises(VerifyError, match="beyond kernel 'saxpy'"):
        read_wbin(data)
    assert read_wbin(data, verify=False).kernels[0].registers == 2


def test_writer_rejects_unencodable_values():
    m = saxpy_module()
    m.kernels[0].name = "bad\0name"
    with pytest.raises(BinaryFormatError, match="NUL"):
        write_wbin(m, verify=False)
    m = saxpy_module()
    m.version = (1, 3)
    with pytest.raises(BinaryFormatError, match="version 1.3"):
        write_wbin(m, verify=False)
    m = saxpy_module()
    m.kernels[0].local_memory = 1 << 32
    with pytest.raises(BinaryFormatError, match="local memory"):
        write_wbin(m, verify=False)
    m = saxpy_module()
    m.kernels[0].code.append(Instruction(BY_MNEMONIC["add.i32"], (300, 0, 0)))
    with pytest.raises(BinaryFormatError, match="instruction 13"):
        write_wbin(m, verify=False)


# ----------------------------------------------------------------------------- rejections

def test_truncated():
    data = write_wbin(saxpy_module())
    rejects(data[:10], "truncated", offset=10)
    rejects(data[:-8], "truncated", "file_size", offset=16)


def test_wrong_magic():
    data = write_wbin(saxpy_module())
    rejects(b"WBIX" + data[4:], "magic", offset=0)


def test_unsupported_version():
    data = write_wbin(saxpy_module())
    rejects(patch(data, 4, "<H", 2), "version 2.0", offset=4)
    rejects(patch(data, 6, "<H", 2), "version 1.2", offset=4)


_WAVE_BARRIER_TEXT = """
.kernel k
.arg out buffer u32 write
.registers 2
    mov.sr r0, sr_lane_id
    barrier.wave
    st.device.b32 out[r0], r0
.end
"""


def test_versions_1_0_and_1_1():
    """WAVE 1.1 adds barrier.wave (spec §1.4, §7.10): a module is written as the lowest version its
    instructions allow, so a module without it keeps its 1.0 bytes; a 1.0 file holding it, or a
    module declaring 1.0, is refused; a 1.1 file without it is read as 1.1 and written back the
    same (canonical)."""
    old = write_wbin(saxpy_module())
    assert struct.unpack_from("<HH", old, 4) == (1, 0)
    m = assemble(_WAVE_BARRIER_TEXT)
    assert m.version == (1, 1)
    data = write_wbin(m)
    assert struct.unpack_from("<HH", data, 4) == (1, 1)
    back = read_wbin(data)
    assert back.version == (1, 1) and write_wbin(back) == data
    rejects(patch(data, 6, "<H", 0), "declares WAVE 1.0 but uses barrier.wave", offset=4)
    with pytest.raises(BinaryFormatError, match="declares WAVE 1.0 but uses barrier.wave"):
        write_wbin(dataclasses.replace(m, version=(1, 0)), verify=False)
    with pytest.raises(VerifyError, match="declares WAVE 1.0 but uses barrier.wave"):
        write_wbin(dataclasses.replace(m, version=(1, 0)))
    newer = write_wbin(dataclasses.replace(saxpy_module(), version=(1, 1)))
    assert read_wbin(newer).version == (1, 1) and write_wbin(read_wbin(newer)) == newer
    with pytest.raises(WaveError, match=r"declares WAVE 1.0 but uses barrier.wave.*\.version 1\.1"):
        assemble(".version 1.0\n" + _WAVE_BARRIER_TEXT)
    assert assemble(".version 1.1\n" + _WAVE_BARRIER_TEXT).version == (1, 1)



_CONSTANT_TEXT = """
.kernel k
.arg c buffer f32 constant
.arg out buffer f32 write
.registers 4
    mov.sr r0, sr_thread_linear_id
    movi.u32 r1, 2
    shl.b32 r0, r0, r1
    ld.device.b32 r2, c[r0]
    st.device.b32 out[r0], r2
.end
"""


def test_constant_buffer_hint():
    """A read buffer may carry the constant hint (WAVE 1.1, spec §12): argument record byte +7,
    bit 0; the assembler spells it as the access ``constant``; it changes no result."""
    m = assemble(_CONSTANT_TEXT)
    a = m.kernels[0].args[0]
    assert (a.access, a.constant, m.version) == (Access.READ, True, (1, 1))
    data = write_wbin(m)
    assert read_wbin(data) == m and write_wbin(read_wbin(data)) == data
    assert data[kernel_field(data, 52 + 7)] == 1
    assert assemble(disassemble(m)) == m
    with pytest.raises(VerifyError, match="only a buffer of access read can be constant"):
        bad = Arg("c", ArgKind.BUFFER, ScalarType.F32, Access.READWRITE, True)
        k = dataclasses.replace(m.kernels[0], args=[bad, m.kernels[0].args[1]])
        write_wbin(dataclasses.replace(m, kernels=[k]))


def test_bad_checksum():
    data = write_wbin(saxpy_module())
    b = bytearray(data)
    b[-1] ^= 0x40
    rejects(bytes(b), "crc32", "checksum", offset=20)


def test_nonzero_flags_and_reserved():
    data = write_wbin(saxpy_module())
    rejects(patch(data, 8, "<I", 1), "flags", offset=8)
    rejects(patch(data, 28, "<I", 7), "reserved", offset=28)
    entry = sections(data)[2][2]
    rejects(patch(data, entry + 12, "<I", 1), "reserved", offset=entry + 12)
    rejects(patch(data, kernel_field(data, 44), "<I", 1), "reserved", offset=kernel_field(data, 44))
    arg_res = kernel_field(data, 52 + 7)
    rejects(patch(data, arg_res, "<B", 2), "argument 'a'", "hints", offset=arg_res)
    # bit 0, a constant buffer, is WAVE 1.1 (spec §12): not in a 1.0 file
    rejects(patch(data, arg_res, "<B", 1), "declares WAVE 1.0 but uses a constant buffer argument", offset=4)


def test_section_table_errors():
    data = write_wbin(saxpy_module(with_locs=False))
    secs = sections(data)
    # out of bounds: CODE size far too large
    e = secs[2][2]
    rejects(patch(data, e + 8, "<I", 10_000), "CODE", "out of bounds", offset=e + 8 - 4)
    # overlapping: KERNELS starting inside CODE
    e3 = secs[3][2]
    rejects(patch(data, e3 + 4, "<I", secs[3][0] - 4), "KERNELS", "overlaps section CODE", offset=e3 + 4)
    # gap
    rejects(patch(data, e3 + 4, "<I", secs[3][0] + 4), "KERNELS", "gap", offset=e3 + 4)
    # unknown kind and duplicates, ordering, missing
    rejects(patch(data, e3, "<I", 9), "unknown section kind 9", offset=e3)
    rejects(patch(data, e3, "<I", 2), "duplicate CODE", offset=e3)
    rejects(patch(data, secs[1][2], "<I", 4), "listed after", offset=secs[2][2])
    parts = [(k, data[secs[k][0]:secs[k][0] + secs[k][1]]) for k in (1, 2, 3)]
    rejects(build(parts), "required section FUNCS is missing")
    assert read_wbin(build([(k, data[secs[k][0]:secs[k][0] + secs[k][1]]) for k in (1, 2, 3, 4)])) == \
        saxpy_module()
    rejects(patch(data, 12, "<I", 1000), "section_count", offset=12)


def test_trailing_garbage():
    data = write_wbin(saxpy_module())
    rejects(data + b"\0\0\0\0", "trailing garbage", offset=len(data))
    # consistent header (size and checksum) but bytes after the last section
    grown = patch(data + b"\0" * 8, 16, "<I", len(data) + 8)
    rejects(grown, "trailing garbage", "after the last section", offset=len(data))


def test_nonzero_padding():
    data = write_wbin(saxpy_module(with_locs=False))
    off, size, _ = sections(data)[1]
    assert size % 4  # the sample's string table needs padding
    rejects(patch(data, off + size, "<B", 1), "padding after section STRTAB", offset=off + size)


def test_bad_string_offsets_and_utf8():
    data = write_wbin(saxpy_module())
    name_at = kernel_field(data, 0)
    rejects(patch(data, name_at, "<I", 5000), "kernel 0 name", "outside the string table", offset=name_at)
    rejects(patch(data, name_at, "<I", 2), "middle of a string", offset=name_at)
    soff = sections(data)[1][0]
    rejects(patch(data, soff + 1, "<B", 0xFF), "kernel 0 name", "UTF-8", offset=name_at)
    rejects(patch(data, soff, "<B", 0x41), "STRTAB", "NUL", offset=soff)


def test_code_range_errors():
    m = saxpy_module(with_locs=False)
    data = write_wbin(m)
    kwords = sum(ins.defn.words for ins in m.kernels[0].code)
    start_at = kernel_field(data, 4)
    len_at = kernel_field(data, 8)
    # out of range
    rejects(patch(data, len_at, "<I", 10_000), "out of range", offset=start_at)
    # overlap: kernel's range grows into the function's
    foff = sections(data)[4][0]
    rejects(patch(data, len_at, "<I", kwords + 1), "function 'helper'", "overlaps", offset=foff + 8)
    # a kernel range that ends inside an instruction: 'halt' is 1 word, st.device is 4
    b = patch(data, len_at, "<I", kwords - 2, crc=False)
    b = patch(b, foff + 8, "<I", kwords - 2)
    b = patch(b, foff + 12, "<I", 4)
    err = rejects(b, "kernel 'saxpy' code", "truncated")
    assert err.offset is not None
    # words belonging to nobody
    b = patch(data, len_at, "<I", kwords - 1)
    rejects(b, "belong to no kernel or function", offset=sections(data)[2][0] + 4 * (kwords - 1))


def test_unknown_enum_values():
    data = write_wbin(saxpy_module())
    arg = kernel_field(data, 52)
    rejects(patch(data, arg + 4, "<B", 7), "argument 'a' kind", "unknown value 7", offset=arg + 4)
    rejects(patch(data, arg + 5, "<B", 0), "argument 'a' type", "unknown value 0", offset=arg + 5)
    rejects(patch(data, arg + 6, "<B", 4), "argument 'a' access", "unknown value 4", offset=arg + 6)


def test_unknown_opcode_and_operand():
    data = write_wbin(saxpy_module())
    coff = sections(data)[2][0]
    assert 0xFFFF not in {d.opcode for d in INSTRUCTIONS}
    rejects(patch(data, coff, "<I", 0xFFFF), "unknown opcode", offset=coff)
    # mov.sr's special-register operand: 99 is not one
    rejects(patch(data, coff + 8, "<I", 99), "sreg", "99", offset=coff + 8)


def test_bad_capability_and_flag_bits():
    data = write_wbin(saxpy_module())
    caps = kernel_field(data, 36)
    rejects(patch(data, caps, "<I", 1 << 20), "capabilities", "undefined bits", offset=caps)
    flags = kernel_field(data, 40)
    rejects(patch(data, flags, "<I", 4), "flags", "undefined bits", offset=flags)
    rejects(patch(data, flags, "<I", 1 << 31), "flags", "undefined bits", offset=flags)


def test_partial_workgroup_size():
    data = write_wbin(saxpy_module())
    rejects(patch(data, kernel_field(data, 24), "<I", 0), "workgroup_size", offset=kernel_field(data, 20))


def test_debug_entry_errors():
    data = write_wbin(saxpy_module())
    doff = sections(data)[5][0]
    e0, e1 = doff + 4, doff + 4 + 16
    # out of order: entry 1 gets index 0
    rejects(patch(data, e1, "<I", 0), "debug entry 1", "sorted", offset=e1)
    # not an instruction start (word 1 is mov.sr's operand)
    rejects(patch(data, e0, "<I", 1), "debug entry 0", "first word of an instruction", offset=e0)
    # out of range
    rejects(patch(data, doff + 4 + 16 * 4, "<I", 100_000), "debug entry 4", offset=doff + 4 + 64)
    # bad file string
    rejects(patch(data, e0 + 4, "<I", 9999), "debug entry 0 file", offset=e0 + 4)
    # count beyond the section
    rejects(patch(data, doff, "<I", 6), "DEBUG", "count 6", offset=doff)


def test_section_record_trailing_bytes():
    data = write_wbin(saxpy_module(with_locs=False))
    koff = sections(data)[3][0]
    # claim 3 args instead of 4: the last 8 bytes become unexplained
    rejects(patch(data, kernel_field(data, 48), "<I", 3), "KERNELS", "unexpected bytes",
            offset=koff + 4 + 52 + 24)


# ----------------------------------------------------------------------------- random modules

_NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=8)


def operand_value(kind: Operand) -> st.SearchStrategy:
    if kind.reg_count:
        return st.integers(0, 255 - kind.reg_count)
    if kind is Operand.PD:
        return st.integers(0, 7)
    if kind is Operand.PS:
        return st.builds(Pred, st.integers(0, 7), st.booleans())
    if kind is Operand.IMM32:
        return st.integers(0, 2**32 - 1)
    if kind is Operand.IMM64:
        return st.integers(0, 2**64 - 1)
    if kind is Operand.SREG:
        return st.sampled_from(list(SpecialRegister))
    if kind is Operand.SCOPE:
        return st.sampled_from(list(Scope))
    if kind is Operand.ORDER:
        return st.sampled_from(list(MemoryOrder))
    if kind in (Operand.ARG, Operand.FUNC):
        return st.integers(0, 0xFFFF)
    if kind in (Operand.FD, Operand.FS):
        return st.integers(0, 31)
    off = st.integers(-(2**31), 2**31 - 1)
    if kind is Operand.DADDR:
        return st.builds(DeviceAddr, st.integers(0, 0xFFFF), st.integers(0, 254), off)
    if kind is Operand.DADDR64:
        return st.builds(DeviceAddr, st.integers(0, 0xFFFF), st.integers(0, 253), off)
    assert kind is Operand.LADDR
    return st.builds(LocalAddr, st.integers(0, 254), off)


@st.composite
def any_instruction(draw: st.DrawFn) -> Instruction:
    d = draw(st.sampled_from(INSTRUCTIONS))
    ops = tuple(draw(operand_value(k)) for k in d.operands)
    guard = draw(st.none() | st.builds(Pred, st.integers(0, 7), st.booleans()))
    loc = draw(st.none() | st.builds(SourceLoc, _NAME, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)))
    return Instruction(d, ops, guard, loc)


_u32 = st.integers(1, 2**32 - 1)


@st.composite
def any_module(draw: st.DrawFn) -> Module:
    """Encodable modules (not necessarily valid): for the container round trip; each declares the
    lowest WAVE version that has its instructions (spec §1.4)."""
    kernels = []
    for _ in range(draw(st.integers(0, 3))):
        args = draw(st.lists(st.builds(Arg, _NAME, st.sampled_from(list(ArgKind)),
                                       st.sampled_from(list(ScalarType)), st.sampled_from(list(Access))),
                             max_size=4))
        kernels.append(Kernel(
            draw(_NAME), args, draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1)),
            draw(st.none() | st.tuples(_u32, _u32, _u32)), draw(st.none() | _u32),
            Capability(draw(st.integers(0, 255))), draw(st.lists(any_instruction(), max_size=12)),
            draw(st.integers(0, 1))))
    functions = [Function(draw(_NAME), draw(st.lists(any_instruction(), max_size=6)))
                 for _ in range(draw(st.integers(0, 2)))]
    return settle_version(Module(kernels, functions))


# straight-line instructions whose operands are only registers/predicates/immediates
_SIMPLE = [d for d in INSTRUCTIONS
           if not d.flags & (Flag.STRUCTURED | Flag.NO_GUARD | Flag.TERMINATOR)
           and d.category is not Category.MMA
           and all(o not in (Operand.ARG, Operand.FUNC, Operand.DADDR, Operand.DADDR64, Operand.LADDR)
                   for o in d.operands)]


@st.composite
def valid_module(draw: st.DrawFn) -> Module:
    """Random modules that pass the verifier (straight-line code in nested if/loop regions)."""
    nregs = draw(st.integers(4, 255))

    def simple() -> Instruction:
        d = draw(st.sampled_from(_SIMPLE))
        ops = []
        for k in d.operands:
            if k.reg_count:
                ops.append(draw(st.integers(0, nregs - k.reg_count)))
            elif k is Operand.IMM32 and d.type is not None and d.type.is_float and d.type.bits < 32:
                ops.append(draw(st.integers(0, (1 << d.type.bits) - 1)))  # f16/bf16: a 16-bit pattern
            elif k is Operand.IMM32 and d.mnemonic == "cp.async.wait":
                ops.append(draw(st.integers(0, MAX_ASYNC_WAIT)))  # groups left pending (spec §4.5)
            else:
                ops.append(draw(operand_value(k)))
        guard = draw(st.none() | st.builds(Pred, st.integers(0, 7), st.booleans()))
        return Instruction(d, tuple(ops), guard)

    def block(depth: int) -> list[Instruction]:
        out: list[Instruction] = []
        for _ in range(draw(st.integers(0, 4))):
            choice = draw(st.integers(0, 5 if depth < 3 else 3))
            if choice <= 3:
                out.append(simple())
            elif choice == 4:
                out.append(I("if", draw(operand_value(Operand.PS))))
                out += block(depth + 1)
                if draw(st.booleans()):
                    out.append(I("else"))
                    out += block(depth + 1)
                out.append(I("endif"))
            else:
                out.append(I("loop"))
                out += block(depth + 1)
                out.append(I("break", guard=draw(operand_value(Operand.PS))))
                out.append(I("endloop"))
        return out

    code = block(0)
    caps = Capability.NONE
    for ins in code:
        caps |= ins.defn.capability
    args = [Arg(f"a{i}", ArgKind.BUFFER, draw(st.sampled_from(BUFFER_TYPES)),
                draw(st.sampled_from(list(Access)))) for i in range(draw(st.integers(0, 2)))]
    args += [Arg(f"s{i}", ArgKind.SCALAR, draw(st.sampled_from(SCALAR_ARG_TYPES)))
             for i in range(draw(st.integers(0, 2)))]
    k = Kernel("k", args, nregs, draw(st.integers(0, 65536)), code=code, capabilities=caps)
    return Module([k], [])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_module())
def test_round_trip_random_modules(m):
    data = write_wbin(m, verify=False)
    back = read_wbin(data, verify=False)
    assert back == m
    assert locs(back) == locs(m)
    assert write_wbin(back, verify=False) == data


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_module())
def test_round_trip_random_valid_modules(m):
    data = write_wbin(m)
    assert read_wbin(data) == m


def test_errors_are_wave_errors():
    assert issubclass(BinaryFormatError, WaveError)


# ----------------------------------------------------------------------------- canonical layout only

def _fix_crc(b: bytearray) -> bytes:
    b[20:24] = b"\0\0\0\0"
    struct.pack_into("<I", b, 20, zlib.crc32(bytes(b)) & 0xFFFFFFFF)
    return bytes(b)


def _two_string_module() -> bytes:
    k = Kernel("kk", args=[Arg("xy", ArgKind.BUFFER, ScalarType.U32, Access.READWRITE)], registers=2,
               code=[Instruction.make("halt")])
    return write_wbin(Module(kernels=[k]))


def test_reader_rejects_reordered_strings_naming_the_string_table_and_offset():
    blob = bytearray(_two_string_module())
    kind, strtab, size, _ = struct.unpack_from("<4I", blob, 32)
    assert kind == 1 and bytes(blob[strtab:strtab + size]) == b"\0kk\0xy\0"   # first-use order
    kind, kernels, _, _ = struct.unpack_from("<4I", blob, 32 + 2 * 16)
    assert kind == 3
    # same strings, other order, references patched: decodes to the same module, not canonical
    blob[strtab:strtab + size] = b"\0xy\0kk\0"
    struct.pack_into("<I", blob, kernels + 4, 4)        # kernel name -> "kk" now at 4
    struct.pack_into("<I", blob, kernels + 4 + 52, 1)   # argument name -> "xy" now at 1
    with pytest.raises(BinaryFormatError) as e:
        read_wbin(_fix_crc(blob))
    assert "string table is not canonical" in str(e.value)
    assert e.value.offset == strtab + 1 and f"offset {strtab + 1}" in str(e.value)


def test_reader_rejects_a_duplicated_string():
    blob = bytearray(_two_string_module())
    kind, strtab, size, _ = struct.unpack_from("<4I", blob, 32)
    # "\0kk\0xy\0" -> "\0kk\0kk\0": the argument renamed to "kk" but stored twice
    blob[strtab + 4:strtab + 6] = b"kk"
    with pytest.raises(BinaryFormatError, match="string table is not canonical"):
        read_wbin(_fix_crc(blob))


def test_every_written_file_is_accepted():
    """The canonical check never rejects what the writer produces (with and without debug)."""
    blob = write_wbin(saxpy_module())
    assert write_wbin(read_wbin(blob)) == blob
    m = saxpy_module()
    code = m.kernels[0].code
    code[0] = dataclasses.replace(code[0], loc=SourceLoc("a.wave", 3, 5))
    code[2] = dataclasses.replace(code[2], loc=SourceLoc("b.wave", 1, 0))
    blob = write_wbin(m)
    assert write_wbin(read_wbin(blob)) == blob


def _fix_crc(b: bytearray) -> bytes:
    b[20:24] = b"\0\0\0\0"
    struct.pack_into("<I", b, 20, zlib.crc32(bytes(b)) & 0xFFFFFFFF)
    return bytes(b)


# Was a bug (review): spec §14.3 'a reader accepts only that layout (canonical), so two files are equal
# iff the modules are equal'; a STRTAB with an extra unreferenced string (size grown by 1 into the zero
# padding) is accepted
def test_wbin_reader_rejects_strtab_with_unreferenced_string() -> None:
    # names chosen so that the string table's size is not a multiple of 4 (padding follows)
    src = ".kernel kk\n.arg xy buffer u32 readwrite\n.registers 2\n    halt\n.end\n"
    orig = write_wbin(assemble(src, "s.wave", debug=False))
    kind, off, size, _ = struct.unpack_from("<4I", orig, 32)
    assert kind == 1 and size % 4 != 0 and orig[off + size] == 0  # precondition: STRTAB, padding byte is 0
    b = bytearray(orig)
    struct.pack_into("<I", b, 32 + 8, size + 1)  # STRTAB now ends "...\0\0": an extra empty string
    mutant = _fix_crc(b)
    assert mutant != orig
    try:
        m = read_wbin(mutant)
    except WaveError:
        return
    # accepted: then it must at least be canonical (re-written bytes identical)
    assert write_wbin(m) == mutant, "reader accepted a non-canonical .wbin"
