"""Fuzzing: mutated binaries and mutated ``.wave`` texts may only raise WaveError subclasses.

Binary mutations include field-targeted ones with the header's size and checksum
recomputed, so the section, record and code parsers (not only the checksum test) see
them. Example counts are sized for CI; ``ANYWAVE_FUZZ_EXAMPLES=N`` runs N examples per
test. ``bench/fuzz_long.py`` runs the same mutators for 100,000+ plain random cases.

The mutators are plain functions of a ``random.Random`` so the long fuzzer reuses them;
hypothesis drives them through ``st.randoms()`` (whose draws it records and shrinks).
"""

from __future__ import annotations

import os
import random
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anywave.binary.module import Module
from anywave.binary.verify import check
from anywave.binary.wbin import read_wbin, write_wbin
from anywave.errors import WaveError

EXAMPLES = int(os.environ.get("ANYWAVE_FUZZ_EXAMPLES", "0")) or None
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "src" / "anywave" / "examples"

RICH_WAVE = """\
; a bit of everything
.kernel rich
.arg n scalar u32
.arg scale scalar f64
.arg src buffer f32 read
.arg dst buffer u32 readwrite
.registers 24
.local_memory 1024
.workgroup_size 64, 1, 1
.max_workgroup_size 256
    mov.sr      r0, sr_global_id_x
    ldarg.b32   r1, n
    ldarg.b64   r10:r11, scale
    setp.ge.u32 p0, r0, r1
    @p0 halt
    movi.b32    r2, 2
    shl.b32     r3, r0, r2
.loc "rich.py" 12 5
    ld.device.b32 r4, src[r3]
    ld.device.b32.o64 r5, src[r12:r13+8]
    st.local.b32 [r3+4], r4
    barrier
    ld.local.b32 r6, [r3+4]
    atom.device.add.u32 r7, dst[r3], r6, .device, .relaxed
    red.local.add.u32 [r3], r6
    fence .workgroup, .acq_rel
    movi.f32    r8, 1.5
    movi.f64    r14:r15, -0.0
    add.f64     r14:r15, r14:r15, r10:r11
    if p0
      add.f32   r8, r8, r4
    else
      sub.f32   r8, r8, r4
    endif
    loop
      setp.lt.u32 p1, r0, r1
      break !p1
      add.i32   r0, r0, r2
      continue p1
    endloop
    shfl.xor.b32 r9, r8, r2
    wred.add.f32 r9, r9
    call helper
    st.device.b32 dst[r3], r9
    halt
.end

.func helper
    @!p2 ret
    nop
.end
"""


# ----------------------------------------------------------------------------- seeds

def seed_texts() -> list[tuple[str, str]]:
    """(name, text) of the bundled examples plus the built-in rich sample."""
    out = [("rich.wave", RICH_WAVE)]
    if EXAMPLES_DIR.is_dir():
        out += [(p.name, p.read_text(encoding="utf-8")) for p in sorted(EXAMPLES_DIR.glob("*.wave"))]
    return out


def seed_modules() -> list[Module]:
    """Valid modules to mutate: hand-built ones plus every seed text that assembles."""
    from test_wbin import saxpy_module

    mods = [saxpy_module(), saxpy_module(with_locs=False)]
    try:
        from anywave.asm import assemble
    except ImportError:  # pragma: no cover - the assembler arrives with its own helper
        return mods
    for name, text in seed_texts():
        try:
            m = assemble(text, name)
        except WaveError:
            continue
        if not check(m):
            mods.append(m)
    return mods


_SEED_BINARIES: list[bytes] = []


def seed_binaries() -> list[bytes]:
    if not _SEED_BINARIES:
        _SEED_BINARIES.extend(write_wbin(m) for m in seed_modules())
    return _SEED_BINARIES


# ----------------------------------------------------------------------------- binary mutators

INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 12, 16, 31, 32, 52, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000,
                   0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF)
INTERESTING_U8 = (0, 1, 2, 3, 4, 7, 8, 0x13, 0x14, 0x15, 0x7F, 0x80, 0xFE, 0xFF)


def fix_header(data: bytes | bytearray) -> bytes:
    """Make file_size and crc32 consistent with the bytes (when there is a header)."""
    b = bytearray(data)
    if len(b) >= 24:
        struct.pack_into("<I", b, 16, len(b))
        b[20:24] = b"\0\0\0\0"
        struct.pack_into("<I", b, 20, zlib.crc32(bytes(b)))
    return bytes(b)


def _sections(b: bytes | bytearray) -> list[tuple[int, int]]:
    """(offset, size) of each section-table entry that lies inside the data."""
    if len(b) < 16:
        return []
    count = min(struct.unpack_from("<I", b, 12)[0], 8)
    out = []
    for i in range(count):
        at = 32 + 16 * i
        if at + 16 > len(b):
            break
        _, off, size, _ = struct.unpack_from("<IIII", b, at)
        if off < len(b):
            out.append((off, min(size, len(b) - off)))
    return out


def m_flip_bits(b: bytearray, rng: random.Random) -> None:
    for _ in range(rng.randint(1, 8)):
        if b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)


def m_truncate(b: bytearray, rng: random.Random) -> None:
    del b[rng.randint(0, len(b)):]


def m_insert(b: bytearray, rng: random.Random) -> None:
    i = rng.randint(0, len(b))
    b[i:i] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 4, 8, rng.randint(1, 64)))))


def m_delete(b: bytearray, rng: random.Random) -> None:
    if b:
        i = rng.randrange(len(b))
        del b[i:i + rng.choice((1, 4, 8, rng.randint(1, 64)))]


def m_word(b: bytearray, rng: random.Random) -> None:
    """Set a 4-byte aligned word, preferring the inside of sections."""
    secs = _sections(b)
    if secs and rng.random() < 0.8:
        off, size = rng.choice(secs)
        at = off + 4 * rng.randrange(max(size // 4, 1))
    else:
        at = 4 * rng.randrange(max(len(b) // 4, 1))
    if at + 4 > len(b):
        return
    old = struct.unpack_from("<I", b, at)[0]
    new = rng.choice((rng.choice(INTERESTING_U32), (old + rng.randint(-4, 4)) & 0xFFFFFFFF,
                      old ^ (1 << rng.randrange(32)), rng.getrandbits(32)))
    struct.pack_into("<I", b, at, new)


def m_byte(b: bytearray, rng: random.Random) -> None:
    if b:
        b[rng.randrange(len(b))] = rng.choice(INTERESTING_U8)


def m_splice(b: bytearray, rng: random.Random) -> None:
    other = rng.choice(seed_binaries())
    if b and other:
        i = rng.randrange(len(b))
        j = rng.randrange(len(other))
        n = rng.randint(1, 64)
        b[i:i + n] = other[j:j + n]


def m_random(b: bytearray, rng: random.Random) -> None:
    head = b[:rng.choice((0, 4, 8, 32))]
    b[:] = head + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))


BINARY_MUTATORS: tuple[Callable[[bytearray, random.Random], None], ...] = (
    m_flip_bits, m_truncate, m_insert, m_delete, m_word, m_word, m_word, m_byte, m_byte, m_splice, m_random)


def mutate_binary(seed: bytes, rng: random.Random, targeted: bool | None = None) -> bytes:
    """1-3 random mutations; then (targeted, or 85% of the time) a consistent header."""
    b = bytearray(seed)
    for _ in range(rng.randint(1, 3)):
        rng.choice(BINARY_MUTATORS)(b, rng)
    if targeted is None:
        targeted = rng.random() < 0.85
    return fix_header(b) if targeted else bytes(b)


def check_binary(data: bytes) -> str:
    """Read ``data``; only WaveError may escape. Accepted modules write and read back
    unchanged. Returns 'ok' or the error class name."""
    try:
        m = read_wbin(data)
    except WaveError as e:
        return type(e).__name__
    again = write_wbin(m)
    back = read_wbin(again)
    assert back == m
    assert write_wbin(back) == again
    return "ok"


# ----------------------------------------------------------------------------- text mutators

WAVE_TOKENS = ("r0", "r7", "r254", "r255", "r300", "r3:r4", "r4:r7", "r1:r0", "p0", "!p7", "p8", "@p1",
               "@!p9", "0", "-1", "0x7fffffff", "0xffffffff", "0x1ffffffff", "18446744073709551616", "1.5",
               "-0.0", "nan", "inf", "1e400", ".kernel", ".func", ".end", ".arg", ".registers",
               ".local_memory", ".loc", ".capabilities", "if", "else", "endif", "loop", "endloop", "break",
               "continue", "call", "ret", "halt", "barrier", "x[r3]", "x[r3+1]", "[r1-4]", "src[r12:r13+8]",
               "dst[r99]", ".device", ".acq_rel", ",", ":", "[", "]", "\"", ";", "#", "é", "\t", "\0")
_TOKEN_RE = re.compile(r"\S+")


def t_delete_char(s: str, rng: random.Random) -> str:
    if not s:
        return s
    i = rng.randrange(len(s))
    return s[:i] + s[i + 1:]


def t_insert_char(s: str, rng: random.Random) -> str:
    i = rng.randint(0, len(s))
    return s[:i] + rng.choice(",:[]+-!@.;#\"\n rpx09_é\0\t") + s[i:]


def t_replace_token(s: str, rng: random.Random) -> str:
    toks = list(_TOKEN_RE.finditer(s))
    if not toks:
        return s
    t = rng.choice(toks)
    new = rng.choice(WAVE_TOKENS) if rng.random() < 0.6 else rng.choice(toks).group()
    return s[:t.start()] + new + s[t.end():]


def t_number(s: str, rng: random.Random) -> str:
    nums = list(re.finditer(r"\d+", s))
    if not nums:
        return s
    t = rng.choice(nums)
    v = int(t.group())
    new = rng.choice((0, 1, v + 1, v - 1, v * 2, 255, 256, 65535, 65536, 2**31, 2**32, 2**64, v + 100))
    return s[:t.start()] + str(new) + s[t.end():]


def _lines(f: Callable[[list[str], random.Random], None]) -> Callable[[str, random.Random], str]:
    def g(s: str, rng: random.Random) -> str:
        lines = s.split("\n")
        if lines:
            f(lines, rng)
        return "\n".join(lines)
    g.__name__ = f.__name__
    return g


@_lines
def t_delete_line(lines: list[str], rng: random.Random) -> None:
    del lines[rng.randrange(len(lines))]


@_lines
def t_duplicate_line(lines: list[str], rng: random.Random) -> None:
    i = rng.randrange(len(lines))
    lines.insert(rng.randint(0, len(lines)), lines[i])


@_lines
def t_swap_lines(lines: list[str], rng: random.Random) -> None:
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]


TEXT_MUTATORS = (t_delete_char, t_insert_char, t_replace_token, t_replace_token, t_number, t_delete_line,
                 t_duplicate_line, t_swap_lines)


def mutate_text(seed: str, rng: random.Random) -> str:
    s = seed
    for _ in range(rng.randint(1, 3)):
        s = rng.choice(TEXT_MUTATORS)(s, rng)
    return s


def check_text(text: str) -> str:
    """Assemble and verify ``text``; only WaveError may escape. Valid modules are written
    and read back unchanged. Returns 'ok' or the error class name."""
    from anywave.asm import assemble

    try:
        m = assemble(text, "fuzz.wave")
    except WaveError as e:
        return type(e).__name__
    problems = check(m)
    if problems:
        return "VerifyError"
    assert read_wbin(write_wbin(m)) == m
    return "ok"


# ----------------------------------------------------------------------------- tests

def _settings(n: int) -> settings:
    return settings(max_examples=EXAMPLES or n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_seeds_are_valid():
    for data in seed_binaries():
        assert check_binary(data) == "ok"


@_settings(4000)
@given(st.integers(0, 1000), st.randoms(use_true_random=False))
def test_mutated_binaries_targeted(i, rng):
    seeds = seed_binaries()
    check_binary(mutate_binary(seeds[i % len(seeds)], rng, targeted=True))


@_settings(1000)
@given(st.integers(0, 1000), st.randoms(use_true_random=False))
def test_mutated_binaries_raw(i, rng):
    seeds = seed_binaries()
    data = mutate_binary(seeds[i % len(seeds)], rng, targeted=False)
    assert check_binary(data) != "ok" or data in seeds


@_settings(1000)
@given(st.binary(max_size=300))
def test_random_bytes(data):
    check_binary(data)
    check_binary(fix_header(b"WBIN\x01\x00\x00\x00" + data))


@_settings(3000)
@given(st.integers(0, 1000), st.randoms(use_true_random=False))
def test_mutated_wave_texts(i, rng):
    pytest.importorskip("anywave.asm", reason="assembler not available")
    seeds = seed_texts()
    name, text = seeds[i % len(seeds)]
    check_text(mutate_text(text, rng))


def test_every_field_of_a_kernel_record():
    """Deterministic sweep: each u32 of every section set to each interesting value."""
    seed = seed_binaries()[-1]
    outcomes: dict[str, int] = {}
    for off, size in _sections(seed):
        for at in range(off, off + size - 3, 4):
            for v in INTERESTING_U32:
                b = bytearray(seed)
                struct.pack_into("<I", b, at, v)
                r = check_binary(fix_header(b))
                outcomes[r] = outcomes.get(r, 0) + 1
    assert outcomes.get("BinaryFormatError", 0) > 0 and outcomes.get("VerifyError", 0) > 0
