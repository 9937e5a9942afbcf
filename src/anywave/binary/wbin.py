"""The ``.wbin`` container: a WAVE :class:`~anywave.binary.module.Module` on disk.

Format versions 1.0 and 1.1 (one layout; 1.1 only adds an instruction). Every integer is
**little-endian** and unsigned unless stated. Every section starts at a 4-byte aligned
offset. A writer produces exactly one byte string per module (the *canonical* layout below); a
reader accepts only that layout, so two files are equal iff the modules are equal (instruction
source locations and the declared version included).

Header (32 bytes, offset 0)
===========================

====== ==== ================ ==============================================================
offset size field            meaning
====== ==== ================ ==============================================================
0      4    magic            the bytes ``57 42 49 4E`` (ASCII ``WBIN``)
4      2    major            format major version, 1
6      2    minor            format minor version, 0 or 1: the module's version, at least the
                             lowest that has every instruction of the module (1.1 adds
                             ``barrier.wave``; the compiler and the assembler write the lowest);
                             a reader rejects versions it does not know, and a 1.0 file that
                             holds a 1.1 instruction
8      4    flags            file flags; no flag is defined, must be 0
12     4    section_count    number of section-table entries (4 to 6)
16     4    file_size        total size of the file in bytes (must equal the actual size)
20     4    crc32            CRC-32 (ISO-HDLC, ``zlib.crc32``) of the whole file computed
                             with these four bytes set to zero
24     8    reserved         must be 0
====== ==== ================ ==============================================================

Section table (``section_count`` entries of 16 bytes, offset 32)
================================================================

====== ==== ======== ===================================================================
offset size field    meaning
====== ==== ======== ===================================================================
+0     4    kind     1 STRTAB, 2 CODE, 3 KERNELS, 4 FUNCS, 5 DEBUG, 6 PRINT
+4     4    offset   byte offset of the section's first byte from the start of the file
+8     4    size     section size in bytes (without padding)
+12    4    reserved must be 0
====== ==== ======== ===================================================================

Entries are listed in strictly increasing ``kind`` order; each kind appears at most once.
STRTAB, CODE, KERNELS and FUNCS are required; DEBUG is present iff at least one
instruction has a source location; PRINT is present iff a kernel has ``aw.print`` call
sites. Layout: the first section starts at
``align4(32 + 16 * section_count)``; each next section starts at ``align4(end of the
previous one)``; the file ends at ``align4(end of the last section)``. Padding bytes are
zero. Anything else (gaps, overlap, bytes past the last section) is rejected.

Section STRTAB (kind 1): string table
=====================================
A sequence of UTF-8 strings, each terminated by one NUL byte. The first byte is NUL (the
empty string is at offset 0) and the last byte is NUL. A *string reference* elsewhere is a
u32 byte offset into this section that points at the first byte of a string (offset 0 or
a byte right after a NUL). Strings contain no NUL and are valid UTF-8. A writer stores
each distinct string once, in order of first use (kernels in module order: name, argument
names; then functions' names; then debug file names; then, per PRINT entry, its format,
place and types strings).

Section CODE (kind 2): instruction words
========================================
``size / 4`` u32 words (``size`` is a multiple of 4): the code of every kernel, in module
order, then of every function, in module order, each encoded by
:mod:`anywave.binary.encoding` (docs/spec.md, "Instruction encoding"). Code positions are
*word indices* into this section. The code ranges of the kernels and functions tile the
section exactly: no overlap, no gap, no word outside a range; each range decodes to
whole instructions (starts and ends on instruction boundaries). Empty ranges are allowed.

Section KERNELS (kind 3)
========================
u32 ``count``, then ``count`` kernel records, each 52 bytes plus 8 bytes per argument:

====== ==== ================= ===========================================================
offset size field             meaning
====== ==== ================= ===========================================================
+0     4    name              string reference
+4     4    code_start        first code word (word index into CODE)
+8     4    code_words        length of the code in words
+12    4    registers         32-bit registers used, 1..255
+16    4    local_memory      bytes of local memory per workgroup
+20    4    workgroup_size_x  required workgroup size; x, y and z are all 0 (no
+24    4    workgroup_size_y  requirement) or all nonzero
+28    4    workgroup_size_z
+32    4    max_workgroup_sz  largest supported x*y*z; 0 = no limit declared
+36    4    capabilities      ``Capability`` bits (only defined bits may be set)
+40    4    flags             kernel flags: bit 0 ``flat`` (reference-dialect flat memory);
                              bit 1 ``w_invariant`` (results do not depend on W);
                              other bits must be 0
+44    4    reserved          must be 0
+48    4    arg_count         number of argument records that follow
+52    8n   args              ``arg_count`` records of 8 bytes:
                              +0 u32 name (string reference);
                              +4 u8 kind (0 buffer, 1 scalar);
                              +5 u8 type (``ScalarType`` value);
                              +6 u8 access (1 read, 2 write, 3 readwrite);
                              +7 u8 hints: bit 0 ``constant`` (WAVE 1.1: a read
                              buffer the target may place in constant memory);
                              other bits 0
====== ==== ================= ===========================================================

The section ends right after the last record.

Section FUNCS (kind 4)
======================
u32 ``count``, then ``count`` records of 12 bytes: +0 u32 name (string reference),
+4 u32 code_start, +8 u32 code_words. ``call`` operands index this list (0-based). The
section ends right after the last record.

Section DEBUG (kind 5, optional): source locations
==================================================
u32 ``count``, then ``count`` entries of 16 bytes: +0 u32 code word index (the first word
of an instruction), +4 u32 file (string reference), +8 u32 line, +12 u32 column (1-based;
0 = unknown). Entries are sorted by strictly increasing word index. The section ends right
after the last entry.

Section PRINT (kind 6, optional): ``aw.print`` call sites
=========================================================
u32 ``count``, then ``count`` entries of 16 bytes: +0 u32 kernel index (into KERNELS),
+4 u32 format (string reference: the format string, Python ``str.format`` syntax), +8 u32
place (string reference: ``file:line`` of the call, or the empty string), +12 u32 types
(string reference: the value types' ABI spellings joined by commas, e.g. ``f32,i32``; empty
for none). Entries are sorted by kernel index (stable: a kernel's entries are its call sites
in record-index order). A kernel with entries has the hidden buffer argument ``_aw_print``
(u32, readwrite) as its last argument. Record layout in that buffer:
:mod:`anywave.compiler.debugprint`.

Errors
======
:func:`read_wbin` raises :class:`~anywave.errors.BinaryFormatError` naming the byte offset
and the field for every violation of the above, and (``verify=True``, the default)
:class:`~anywave.errors.VerifyError` for a well-formed container whose module breaks a rule
of the spec (:mod:`anywave.binary.verify`).
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from anywave.binary.encoding import _encode_into as encode_into
from anywave.binary.encoding import decode_code
from anywave.binary.module import (
    FORMAT_VERSIONS,
    KERNEL_FLAG_FLAT,
    KERNEL_FLAG_W_INVARIANT,
    PRINT_ARG,
    Arg,
    Function,
    Instruction,
    Kernel,
    Module,
    PrintFormat,
    version_problem,
    version_text,
)
from anywave.errors import BinaryFormatError, SourceLoc
from anywave.isa.types import Access, ArgKind, Capability, ScalarType

MAGIC = b"WBIN"
HEADER_SIZE = 32
SECTION_ENTRY_SIZE = 16
KERNEL_RECORD_SIZE = 52
ARG_RECORD_SIZE = 8
#: argument record hints (+7): bit 0, a constant buffer (WAVE 1.1, docs/spec.md §12)
ARG_HINT_CONSTANT = 1
FUNC_RECORD_SIZE = 12
DEBUG_ENTRY_SIZE = 16
CRC_OFFSET = 20

SECTION_STRTAB = 1
SECTION_CODE = 2
SECTION_KERNELS = 3
SECTION_FUNCS = 4
SECTION_DEBUG = 5
SECTION_PRINT = 6
SECTION_NAMES = {SECTION_STRTAB: "STRTAB", SECTION_CODE: "CODE", SECTION_KERNELS: "KERNELS",
                 SECTION_FUNCS: "FUNCS", SECTION_DEBUG: "DEBUG", SECTION_PRINT: "PRINT"}
PRINT_ENTRY_SIZE = 16
REQUIRED_SECTIONS = (SECTION_STRTAB, SECTION_CODE, SECTION_KERNELS, SECTION_FUNCS)

#: every defined kernel-flag bit
KNOWN_KERNEL_FLAGS = KERNEL_FLAG_FLAT | KERNEL_FLAG_W_INVARIANT
#: every defined capability bit
KNOWN_CAPABILITIES = int(sum(int(c) for c in Capability.names().values()))

_U32_MAX = 0xFFFFFFFF


def _align4(n: int) -> int:
    return (n + 3) & ~3


# ----------------------------------------------------------------------------- writing

class _StringTable:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.index: dict[str, int] = {"": 0}

    def add(self, text: str, what: str) -> int:
        if not isinstance(text, str):
            raise BinaryFormatError(f"cannot write {what}: {text!r} is not a string")
        found = self.index.get(text)
        if found is not None:
            return found
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BinaryFormatError(f"cannot write {what} {text!r}: not encodable as UTF-8 "
                                    f"({e.reason})") from None
        if b"\0" in raw:
            raise BinaryFormatError(f"cannot write {what} {text!r}: it contains a NUL character")
        off = len(self.data)
        self.data += raw + b"\0"
        self.index[text] = off
        return off


def _u32(value: object, what: str) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _U32_MAX:
        raise BinaryFormatError(f"cannot write {what}: {value!r} is not an unsigned 32-bit integer")
    return struct.pack("<I", value)


def _u8(value: object, what: str) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFF:
        raise BinaryFormatError(f"cannot write {what}: {value!r} is not in 0..255")
    return struct.pack("<B", value)


def write_wbin(module: Module, *, verify: bool = True) -> bytes:
    """Serialise ``module`` to ``.wbin`` bytes (layout in this module's docstring).

    Deterministic: the same module gives the same bytes. With ``verify=True`` (default)
    the module is verified first, so every file written reads back with
    ``read_wbin(verify=True)``.

    Raises:
        VerifyError: (``verify=True``) the module breaks a rule of the spec.
        BinaryFormatError: a value the container cannot hold (a name with a NUL, an
            operand out of its encoding range, a field beyond 32 bits ...).
    """
    if verify:
        from anywave.binary.verify import verify as _verify

        _verify(module)
    why = version_problem(module)
    if why is not None:
        raise BinaryFormatError(f"cannot write module: {why}")
    strtab = _StringTable()
    code: list[int] = []
    debug: list[tuple[int, SourceLoc]] = []

    def emit(body: list[Instruction], owner: str) -> tuple[int, int]:
        start = len(code)
        for i, ins in enumerate(body):
            pos = len(code)
            try:
                encode_into(ins, code)
            except (ValueError, TypeError, AttributeError) as e:
                raise BinaryFormatError(f"cannot encode {owner}, instruction {i}: {e}") from None
            if ins.loc is not None:
                debug.append((pos, ins.loc))
        return start, len(code) - start

    kernels = bytearray()
    kernels += _u32(len(module.kernels), "kernel count")
    for k in module.kernels:
        what = f"kernel {k.name!r}"
        start, length = emit(k.code, what)
        wg = k.workgroup_size if k.workgroup_size is not None else (0, 0, 0)
        if len(wg) != 3 or (k.workgroup_size is not None and 0 in wg):
            raise BinaryFormatError(f"cannot write {what}: workgroup size {wg!r} is not three "
                                    f"positive integers")
        kernels += _u32(strtab.add(k.name, "kernel name"), "kernel name")
        kernels += _u32(start, f"{what} code start") + _u32(length, f"{what} code length")
        kernels += _u32(k.registers, f"{what} registers")
        kernels += _u32(k.local_memory, f"{what} local memory")
        for axis, v in zip("xyz", wg, strict=True):
            kernels += _u32(v, f"{what} workgroup size {axis}")
        kernels += _u32(k.max_workgroup_size or 0, f"{what} max workgroup size")
        kernels += _u32(int(k.capabilities), f"{what} capabilities")
        kernels += _u32(k.flags, f"{what} flags")
        kernels += _u32(0, "reserved")
        kernels += _u32(len(k.args), f"{what} argument count")
        for a in k.args:
            kernels += _u32(strtab.add(a.name, "argument name"), "argument name")
            kernels += _u8(int(a.kind), f"{what} argument {a.name!r} kind")
            kernels += _u8(int(a.type), f"{what} argument {a.name!r} type")
            kernels += _u8(int(a.access), f"{what} argument {a.name!r} access")
            kernels += b"\1" if a.constant else b"\0"

    funcs = bytearray(_u32(len(module.functions), "function count"))
    for f in module.functions:
        start, length = emit(f.code, f"function {f.name!r}")
        funcs += _u32(strtab.add(f.name, "function name"), "function name")
        funcs += _u32(start, "code start") + _u32(length, "code length")

    dbg = bytearray(_u32(len(debug), "debug entry count"))
    dwords: list[int] = []
    add = strtab.add
    for pos, loc in debug:
        fi = add(loc.file, "debug file name")
        line, col = loc.line, loc.col
        if type(line) is int and type(col) is int and 0 <= line <= _U32_MAX and 0 <= col <= _U32_MAX:
            dwords += (pos, fi, line, col)  # the common case, packed at once below
            continue
        _u32(line, f"debug line of {loc}")  # raises the error naming the field
        _u32(col, f"debug column of {loc}")
        dwords += (pos, fi, int(line), int(col))  # an int subclass (an IntEnum): valid too
    dbg += struct.pack(f"<{len(dwords)}I", *dwords)

    prn = bytearray()
    nprint = 0
    for ki, k in enumerate(module.kernels):
        for pf in k.prints:
            what = f"kernel {k.name!r} print format"
            prn += _u32(ki, "print kernel index") + _u32(strtab.add(pf.format, what), what)
            prn += _u32(strtab.add(pf.where, what), what)
            prn += _u32(strtab.add(",".join(ScalarType(t).spelling for t in pf.types), what), what)
            nprint += 1
    prn = bytearray(_u32(nprint, "print entry count")) + prn

    sections: list[tuple[int, bytes]] = [
        (SECTION_STRTAB, bytes(strtab.data)),
        (SECTION_CODE, struct.pack(f"<{len(code)}I", *code)),
        (SECTION_KERNELS, bytes(kernels)),
        (SECTION_FUNCS, bytes(funcs)),
    ]
    if debug:
        sections.append((SECTION_DEBUG, bytes(dbg)))
    if nprint:
        sections.append((SECTION_PRINT, bytes(prn)))

    table = bytearray()
    body = bytearray()
    pos = _align4(HEADER_SIZE + SECTION_ENTRY_SIZE * len(sections))
    first = pos
    for kind, payload in sections:
        table += struct.pack("<IIII", kind, pos, len(payload), 0)
        body += payload + b"\0" * (_align4(len(payload)) - len(payload))
        pos += _align4(len(payload))
    total = first + len(body)
    if total > _U32_MAX:
        raise BinaryFormatError(f"cannot write module: {total} bytes exceed the 4 GiB container limit")
    header = struct.pack("<4sHHIIII8x", MAGIC, int(module.version[0]), int(module.version[1]), 0,
                         len(sections), total, 0)
    out = bytearray(header + table)
    out += b"\0" * (first - len(out))
    out += body
    struct.pack_into("<I", out, CRC_OFFSET, zlib.crc32(out))
    return bytes(out)


# ----------------------------------------------------------------------------- reading

class _Cursor:
    """Reads little-endian fields inside one section, raising BinaryFormatError with the
    byte offset and field name on running past the section's end."""

    def __init__(self, data: bytes, start: int, size: int, section: str) -> None:
        self.data = data
        self.pos = start
        self.end = start + size
        self.section = section

    def u32(self, field: str) -> tuple[int, int]:
        """Return (value, byte offset of the field)."""
        at = self.pos
        if at + 4 > self.end:
            raise BinaryFormatError(f"{self.section} section truncated: field {field} needs 4 bytes, "
                                    f"{self.end - at} left", at)
        self.pos += 4
        return struct.unpack_from("<I", self.data, at)[0], at

    def u8(self, field: str) -> tuple[int, int]:
        at = self.pos
        if at + 1 > self.end:
            raise BinaryFormatError(f"{self.section} section truncated: field {field} needs 1 byte", at)
        self.pos += 1
        return self.data[at], at

    def need(self, count: int, record_size: int, what: str, at: int) -> None:
        left = self.end - self.pos
        if count * record_size > left:
            raise BinaryFormatError(f"{self.section} section: {what} count {count} needs at least "
                                    f"{count * record_size} bytes, only {left} left", at)

    def finish(self) -> None:
        if self.pos != self.end:
            raise BinaryFormatError(f"{self.section} section: {self.end - self.pos} unexpected bytes "
                                    f"after the last record", self.pos)


class _Strings:
    def __init__(self, data: bytes, start: int, size: int) -> None:
        self.data = data
        self.start = start
        self.size = size
        self.cache: dict[int, str] = {}
        if size == 0:
            raise BinaryFormatError("STRTAB section is empty; it must start with a NUL byte "
                                    "(the empty string)", start)
        if data[start] != 0:
            raise BinaryFormatError(f"STRTAB section must start with a NUL byte, found {data[start]:#04x}",
                                    start)
        if data[start + size - 1] != 0:
            raise BinaryFormatError("STRTAB section: last string is not NUL-terminated", start + size - 1)

    def get(self, ref: int, field: str, at: int) -> str:
        hit = self.cache.get(ref)
        if hit is not None:
            return hit
        if ref >= self.size:
            raise BinaryFormatError(f"field {field}: string offset {ref} is outside the string table "
                                    f"({self.size} bytes)", at)
        p = self.start + ref
        if ref != 0 and self.data[p - 1] != 0:
            raise BinaryFormatError(f"field {field}: string offset {ref} points into the middle of a "
                                    f"string (must follow a NUL)", at)
        end = self.data.index(0, p, self.start + self.size)  # found: the table ends with NUL
        try:
            text = self.data[p:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise BinaryFormatError(f"field {field}: string at STRTAB offset {ref} is not valid UTF-8 "
                                    f"({e.reason} at byte {p + e.start:#x})", at) from None
        self.cache[ref] = text
        return text


def _enum(cls: type, value: int, field: str, at: int) -> object:
    try:
        return cls(value)
    except ValueError:
        valid = ", ".join(f"{int(m)} ({m.name.lower()})" for m in cls)  # type: ignore[attr-defined]
        raise BinaryFormatError(f"field {field}: unknown value {value}; valid: {valid}", at) from None


def read_wbin(data: bytes | bytearray | memoryview, *, verify: bool = True) -> Module:
    """Parse ``.wbin`` bytes into a :class:`Module` (layout in this module's docstring).

    With ``verify=True`` (default) the module is then checked by
    :func:`anywave.binary.verify.verify`.

    Raises:
        BinaryFormatError: the bytes are not a well-formed WAVE 1.0 container; the message
            names the field and the byte offset.
        VerifyError: (``verify=True``) the module breaks a rule of the spec.

    Only the canonical layout is accepted (spec §14.3): after decoding, the module is
    written back and must give the same bytes, else BinaryFormatError names the first
    differing byte offset and the section it lies in.
    """
    data = bytes(data)
    module = _parse(data)
    if verify:
        from anywave.binary.verify import verify as _verify

        _verify(module)
    _check_canonical(data, module)
    return module


def _check_canonical(data: bytes, module: Module) -> None:
    """Require that ``data`` is exactly what :func:`write_wbin` makes of ``module``.

    The container has one canonical layout (string table in first-use order without
    duplicates or unreferenced strings, sections packed in kind order, zero padding), so
    two files are equal iff their modules are equal (spec §14.3). The field-by-field checks
    of :func:`_parse` report the specific problems; this catches what remains (an extra or
    reordered string, a string referenced at a non-canonical offset ...).
    """
    try:
        canonical = write_wbin(module, verify=False)
    except BinaryFormatError as e:
        raise BinaryFormatError(f"not a canonical .wbin: the module cannot be written back ({e.message})",
                                0) from None
    if canonical == data:
        return
    at, where = _first_difference(data, canonical)
    if where == "STRTAB":
        what = ("string table is not canonical: unreferenced, duplicated or reordered strings (the writer "
                "stores each distinct name once, in first-use order)")
    else:
        what = f"{where} is not in the canonical layout the writer produces"
    raise BinaryFormatError(f"not a canonical .wbin: {what}; first differing byte at offset {at} "
                            f"(found {_byte(data, at)}, canonical {_byte(canonical, at)})", at)


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    count = struct.unpack_from("<I", data, 12)[0]
    out: dict[int, tuple[int, int]] = {}
    for i in range(count):
        kind, off, size, _ = struct.unpack_from("<IIII", data, HEADER_SIZE + SECTION_ENTRY_SIZE * i)
        out[kind] = (off, size)
    return out


def _first_difference(data: bytes, canonical: bytes) -> tuple[int, str]:
    """(offset in ``data``, where) of the first difference that matters: section payloads are
    compared first, in kind order (a longer string table also moves every later offset and
    changes the checksum, which are consequences, not the cause), then header and table."""
    mine, theirs = _sections(data), _sections(canonical)
    for kind in sorted(set(mine) | set(theirs)):
        name = SECTION_NAMES.get(kind, f"section kind {kind}")
        if kind not in mine or kind not in theirs:
            return HEADER_SIZE, f"section table ({name} present in only one layout)"
        (off, size), (coff, csize) = mine[kind], theirs[kind]
        a, b = data[off:off + size], canonical[coff:coff + csize]
        if a != b:
            i = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            return off + i, name
    n = min(len(data), len(canonical))
    at = next((i for i in range(n) if data[i] != canonical[i] and not CRC_OFFSET <= i < CRC_OFFSET + 4), n)
    return at, _locate(data, at)


def _byte(data: bytes, at: int) -> str:
    return f"{data[at]:#04x}" if at < len(data) else "end of file"


def _locate(data: bytes, at: int) -> str:
    """The header field, section table or section that byte ``at`` of a parsed file lies in."""
    if at < HEADER_SIZE:
        return "header"
    count = struct.unpack_from("<I", data, 12)[0]
    if at < HEADER_SIZE + SECTION_ENTRY_SIZE * count:
        return "section table"
    for i in range(count):
        kind, off, size, _ = struct.unpack_from("<IIII", data, HEADER_SIZE + SECTION_ENTRY_SIZE * i)
        if off <= at < _align4(off + size):
            return SECTION_NAMES.get(kind, f"section kind {kind}")
    return "file"


def _parse(data: bytes) -> Module:
    n = len(data)
    if n < HEADER_SIZE:
        raise BinaryFormatError(f"truncated file: {n} bytes, the header alone needs {HEADER_SIZE}", n)
    magic = data[:4]
    if magic != MAGIC:
        raise BinaryFormatError(f"field magic: expected {MAGIC!r}, found {magic!r} (not a .wbin file)", 0)
    major, minor, flags, count, file_size, crc = struct.unpack_from("<HHIIII", data, 4)
    if (major, minor) not in FORMAT_VERSIONS:
        raise BinaryFormatError(f"field version: unsupported format version {major}.{minor}; this "
                                f"reader supports {', '.join(version_text(v) for v in FORMAT_VERSIONS)}", 4)
    if file_size > n:
        raise BinaryFormatError(f"truncated file: field file_size says {file_size} bytes, the file has {n}",
                                16)
    if file_size < n:
        raise BinaryFormatError(f"trailing garbage: {n - file_size} bytes after the end given by field "
                                f"file_size ({file_size})", file_size)
    zeroed = data[:CRC_OFFSET] + b"\0\0\0\0" + data[CRC_OFFSET + 4:]
    actual = zlib.crc32(zeroed)
    if actual != crc:
        raise BinaryFormatError(f"field crc32: bad checksum: stored {crc:#010x}, computed {actual:#010x}",
                                CRC_OFFSET)
    if flags:
        raise BinaryFormatError(f"field flags: {flags:#x}; no file flag is defined, must be 0", 8)
    for at in (24, 28):
        v = struct.unpack_from("<I", data, at)[0]
        if v:
            raise BinaryFormatError(f"field reserved: {v:#x}, must be 0", at)
    if count > (n - HEADER_SIZE) // SECTION_ENTRY_SIZE:
        raise BinaryFormatError(f"field section_count: {count} entries do not fit in the file "
                                f"({n} bytes)", 12)
    sections: dict[int, tuple[int, int]] = {}
    expected = _align4(HEADER_SIZE + SECTION_ENTRY_SIZE * count)
    _check_zero(data, HEADER_SIZE + SECTION_ENTRY_SIZE * count, expected, "section-table padding")
    prev_kind = 0
    prev_name = "the section table"
    for i in range(count):
        at = HEADER_SIZE + SECTION_ENTRY_SIZE * i
        kind, off, size, reserved = struct.unpack_from("<IIII", data, at)
        name = SECTION_NAMES.get(kind)
        if name is None:
            raise BinaryFormatError(f"section table entry {i}: field kind: unknown section kind {kind}; "
                                    f"valid: {', '.join(f'{k} ({v})' for k, v in SECTION_NAMES.items())}", at)
        if kind in sections:
            raise BinaryFormatError(f"section table entry {i}: duplicate {name} section", at)
        if kind < prev_kind:
            raise BinaryFormatError(f"section table entry {i}: {name} listed after "
                                    f"{SECTION_NAMES[prev_kind]}; entries must be in increasing kind order",
                                    at)
        if reserved:
            raise BinaryFormatError(f"section table entry {i} ({name}): field reserved is {reserved:#x}, "
                                    f"must be 0", at + 12)
        if off + size > n:
            raise BinaryFormatError(f"section {name}: out of bounds: bytes {off}..{off + size} lie beyond "
                                    f"the end of the file ({n} bytes)", at + 4)
        if off < expected:
            raise BinaryFormatError(f"section {name}: offset {off} overlaps {prev_name} (which ends at "
                                    f"{expected}, 4-byte aligned)", at + 4)
        if off > expected:
            raise BinaryFormatError(f"section {name}: offset {off} leaves a gap after {prev_name}; it must "
                                    f"start at {expected}", at + 4)
        end = off + size
        expected = _align4(end)
        _check_zero(data, end, min(expected, n), f"padding after section {name}")
        sections[kind] = (off, size)
        prev_kind, prev_name = kind, f"section {name}"
    for kind in REQUIRED_SECTIONS:
        if kind not in sections:
            raise BinaryFormatError(f"section table: required section {SECTION_NAMES[kind]} is missing", 32)
    if expected != n:
        raise BinaryFormatError(f"trailing garbage: {n - expected} bytes after the last section", expected)

    strings = _Strings(data, *sections[SECTION_STRTAB])
    code_off, code_size = sections[SECTION_CODE]
    if code_size % 4:
        raise BinaryFormatError(f"section CODE: size {code_size} is not a multiple of 4", 32)
    words = struct.unpack_from(f"<{code_size // 4}I", data, code_off)

    # -- kernels and functions (headers first, code after the ranges are validated)
    ranges: list[tuple[int, int, str, int]] = []  # (start, length, owner, field offset)
    kernels: list[Kernel] = []
    cur = _Cursor(data, *sections[SECTION_KERNELS], "KERNELS")
    kcount, at = cur.u32("kernel count")
    cur.need(kcount, KERNEL_RECORD_SIZE, "kernel", at)
    for ki in range(kcount):
        kernels.append(_read_kernel(cur, strings, ki, ranges))
    cur.finish()

    functions: list[Function] = []
    cur = _Cursor(data, *sections[SECTION_FUNCS], "FUNCS")
    fcount, at = cur.u32("function count")
    cur.need(fcount, FUNC_RECORD_SIZE, "function", at)
    for fi in range(fcount):
        ref, at = cur.u32(f"function {fi} name")
        name = strings.get(ref, f"function {fi} name", at)
        start, at = cur.u32(f"function {name!r} code_start")
        length, _ = cur.u32(f"function {name!r} code_words")
        ranges.append((start, length, f"function {name!r}", at))
        functions.append(Function(name))
    cur.finish()

    nwords = len(words)
    for start, length, owner, at in ranges:
        if start + length > nwords:
            raise BinaryFormatError(f"{owner}: code range words {start}..{start + length} is out of range "
                                    f"(CODE has {nwords} words)", at)
    covered = 0
    for start, length, owner, at in sorted(ranges, key=lambda r: (r[0], r[1])):
        if start < covered:
            raise BinaryFormatError(f"{owner}: code range words {start}..{start + length} overlaps another "
                                    f"kernel's or function's code (which ends at word {covered})", at)
        if start > covered:
            raise BinaryFormatError(f"CODE words {covered}..{start} belong to no kernel or function", code_off
                                    + 4 * covered)
        covered = start + length
    if covered != nwords:
        raise BinaryFormatError(f"CODE words {covered}..{nwords} belong to no kernel or function",
                                code_off + 4 * covered)

    starts: dict[int, tuple[list[Instruction], int]] = {}  # word index -> (body, instruction index)
    bodies: list[list[Instruction]] = []
    for start, length, owner, _ in ranges:
        try:
            body = decode_code(words[start:start + length], code_off + 4 * start)
        except BinaryFormatError as e:
            raise BinaryFormatError(f"{owner} code: {e.message}", e.offset) from None
        p = start
        for i, ins in enumerate(body):
            starts[p] = (body, i)
            p += ins.defn.words
        bodies.append(body)
    for k, body in zip(kernels, bodies, strict=False):
        k.code = body
    for f, body in zip(functions, bodies[len(kernels):], strict=True):
        f.code = body

    if SECTION_DEBUG in sections:
        cur = _Cursor(data, *sections[SECTION_DEBUG], "DEBUG")
        dcount, at = cur.u32("debug entry count")
        cur.need(dcount, DEBUG_ENTRY_SIZE, "debug entry", at)
        last = -1
        for di in range(dcount):
            word, at = cur.u32(f"debug entry {di} word index")
            if word <= last:
                raise BinaryFormatError(f"debug entry {di}: word index {word} is not greater than the "
                                        f"previous entry's ({last}); entries must be sorted and unique", at)
            hit = starts.get(word)
            if hit is None:
                raise BinaryFormatError(f"debug entry {di}: word index {word} is not the first word of an "
                                        f"instruction (CODE has {nwords} words)", at)
            ref, fat = cur.u32(f"debug entry {di} file")
            file = strings.get(ref, f"debug entry {di} file", fat)
            line, _ = cur.u32(f"debug entry {di} line")
            col, _ = cur.u32(f"debug entry {di} column")
            body, i = hit
            body[i] = dataclasses.replace(body[i], loc=SourceLoc(file, line, col))
            last = word
        cur.finish()

    if SECTION_PRINT in sections:
        _read_prints(_Cursor(data, *sections[SECTION_PRINT], "PRINT"), strings, kernels)

    module = Module(kernels, functions, (major, minor))
    why = version_problem(module)
    if why is not None:
        raise BinaryFormatError(f"field version: {why}", 4)
    return module


_TYPE_BY_SPELLING = {t.spelling: t for t in ScalarType}


def _read_prints(cur: _Cursor, strings: _Strings, kernels: list[Kernel]) -> None:
    count, at = cur.u32("print entry count")
    cur.need(count, PRINT_ENTRY_SIZE, "print entry", at)
    last = 0
    for pi in range(count):
        ki, at = cur.u32(f"print entry {pi} kernel index")
        if ki >= len(kernels):
            raise BinaryFormatError(f"print entry {pi}: kernel index {ki} is out of range (the module has "
                                    f"{len(kernels)} kernels)", at)
        if ki < last:
            raise BinaryFormatError(f"print entry {pi}: kernel index {ki} after {last}; entries must be sorted "
                                    "by kernel index", at)
        last = ki
        ref, fat = cur.u32(f"print entry {pi} format")
        fmt = strings.get(ref, f"print entry {pi} format", fat)
        ref, wat = cur.u32(f"print entry {pi} place")
        where = strings.get(ref, f"print entry {pi} place", wat)
        ref, tat = cur.u32(f"print entry {pi} types")
        spelled = strings.get(ref, f"print entry {pi} types", tat)
        types = []
        for name in spelled.split(",") if spelled else []:
            if name not in _TYPE_BY_SPELLING:
                raise BinaryFormatError(f"print entry {pi}: unknown value type {name!r} in {spelled!r}", tat)
            types.append(_TYPE_BY_SPELLING[name])
        k = kernels[ki]
        last_arg = k.args[-1] if k.args else None
        if last_arg is None or last_arg.name != PRINT_ARG or not last_arg.is_buffer:
            raise BinaryFormatError(f"print entry {pi}: kernel {k.name!r} has print call sites but its last "
                                    f"argument is not the {PRINT_ARG!r} buffer", at)
        k.prints.append(PrintFormat(fmt, tuple(types), where))
    cur.finish()


def _check_zero(data: bytes, start: int, end: int, what: str) -> None:
    for p in range(start, end):
        if data[p]:
            raise BinaryFormatError(f"{what}: byte {data[p]:#04x}, must be 0", p)


def _read_kernel(cur: _Cursor, strings: _Strings, ki: int,
                 ranges: list[tuple[int, int, str, int]]) -> Kernel:
    ref, at = cur.u32(f"kernel {ki} name")
    name = strings.get(ref, f"kernel {ki} name", at)
    what = f"kernel {name!r}"
    start, at = cur.u32(f"{what} code_start")
    length, _ = cur.u32(f"{what} code_words")
    ranges.append((start, length, what, at))
    registers, _ = cur.u32(f"{what} registers")
    local, _ = cur.u32(f"{what} local_memory")
    wg = []
    for axis in "xyz":
        v, wat = cur.u32(f"{what} workgroup_size_{axis}")
        wg.append(v)
    if 0 in wg and any(wg):
        raise BinaryFormatError(f"{what}: fields workgroup_size x/y/z are {tuple(wg)}; all must be 0 (no "
                                f"requirement) or all nonzero", wat - 8)
    max_wg, _ = cur.u32(f"{what} max_workgroup_size")
    caps, at = cur.u32(f"{what} capabilities")
    if caps & ~KNOWN_CAPABILITIES:
        raise BinaryFormatError(f"{what}: field capabilities {caps:#x} has undefined bits "
                                f"{caps & ~KNOWN_CAPABILITIES:#x}; defined: {KNOWN_CAPABILITIES:#x} "
                                f"({', '.join(Capability.names())})", at)
    flags, at = cur.u32(f"{what} flags")
    if flags & ~KNOWN_KERNEL_FLAGS:
        raise BinaryFormatError(f"{what}: field flags {flags:#x} has undefined bits; defined: "
                                f"{KNOWN_KERNEL_FLAGS:#x} (bit 0 flat, bit 1 w_invariant)", at)
    reserved, at = cur.u32(f"{what} reserved")
    if reserved:
        raise BinaryFormatError(f"{what}: field reserved is {reserved:#x}, must be 0", at)
    argc, at = cur.u32(f"{what} arg_count")
    cur.need(argc, ARG_RECORD_SIZE, f"{what} argument", at)
    args: list[Arg] = []
    for ai in range(argc):
        ref, at = cur.u32(f"{what} argument {ai} name")
        aname = strings.get(ref, f"{what} argument {ai} name", at)
        field = f"{what} argument {aname!r}"
        kind_v, at = cur.u8(f"{field} kind")
        kind = _enum(ArgKind, kind_v, f"{field} kind", at)
        type_v, at = cur.u8(f"{field} type")
        type_ = _enum(ScalarType, type_v, f"{field} type", at)
        access_v, at = cur.u8(f"{field} access")
        access = _enum(Access, access_v, f"{field} access", at)
        hints, at = cur.u8(f"{field} hints")
        if hints & ~ARG_HINT_CONSTANT:
            raise BinaryFormatError(f"{field}: field hints is {hints:#x}; defined: bit 0 constant", at)
        args.append(Arg(aname, kind, type_, access, bool(hints & ARG_HINT_CONSTANT)))  # type: ignore[arg-type]
    return Kernel(name=name, args=args, registers=registers, local_memory=local,
                  workgroup_size=tuple(wg) if wg[0] else None,  # type: ignore[arg-type]
                  max_workgroup_size=max_wg or None, capabilities=Capability(caps),
                  flags=flags)


# ----------------------------------------------------------------------------- files

def load(path: str | os.PathLike[str], *, verify: bool = True) -> Module:
    """Read a ``.wbin`` file. Raises OSError for I/O problems and the errors of
    :func:`read_wbin`; a BinaryFormatError's message is prefixed with the path."""
    data = Path(path).read_bytes()
    return _with_path(path, lambda: read_wbin(data, verify=verify))


def save(module: Module, path: str | os.PathLike[str], *, verify: bool = True) -> None:
    """Write ``module`` to ``path`` as ``.wbin`` (atomically: a temporary file in the same
    directory is renamed over ``path``). Raises the errors of :func:`write_wbin` and OSError."""
    data = write_wbin(module, verify=verify)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _with_path(path: str | os.PathLike[str], fn: Callable[[], Module]) -> Module:
    try:
        return fn()
    except BinaryFormatError as e:
        raise BinaryFormatError(f"{os.fspath(path)}: {e.message}", e.offset) from None
