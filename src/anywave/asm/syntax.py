"""Lexical layer of the ``.wave`` text shared by the assembler, the reference dialect and
the disassembler: comments, tokens with columns, literals and operand spellings.

Every function that can fail on user text raises :class:`anywave.errors.AsmError` through
:class:`Cursor`, so callers never see ``ValueError``/``IndexError``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from anywave.errors import AsmError, SourceLoc

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
IDENT_RE = re.compile(IDENT)
_WORD_RE = re.compile(r"[^\s,]+")
_LINE_BREAKS = ("\x85", "\u2028", "\u2029")
INT_RE = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)")
#: longest numeric literal (characters) the assembler reads; longer ones are an error
#: (they cannot be a valid operand of any type, and Python refuses to convert integer
#: strings of more than 4300 digits)
MAX_LITERAL_CHARS = 400


@dataclass(frozen=True)
class Token:
    """A piece of a source line and its 1-based column."""

    text: str
    col: int


@dataclass(frozen=True)
class Line:
    """One physical source line (``lineno`` is 1-based)."""

    file: str
    lineno: int
    text: str

    def error(self, message: str, col: int = 1, length: int = 1) -> AsmError:
        """An AsmError pointing at ``col`` of this line."""
        return AsmError(message, SourceLoc(self.file, self.lineno, max(col, 1)), self.text, length)

    def error_at(self, message: str, tok: Token) -> AsmError:
        return self.error(message, tok.col, max(len(tok.text), 1))


def strip_comment(text: str) -> str:
    """Drop a ``;`` or ``#`` comment (outside double-quoted strings) from a line."""
    in_str = escaped = False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in ";#":
            return text[:i]
    return text


def first_word(text: str, start: int = 0) -> tuple[Token | None, int]:
    """The first whitespace-delimited word at or after ``start`` (0-based index) and the
    index just past it; (None, len) when the rest is blank."""
    m = re.compile(r"\s*(\S+)").match(text, start)
    if m is None:
        return None, len(text)
    return Token(m.group(1), m.start(1) + 1), m.end(1)


def split_operands(line: Line, text: str, start: int) -> list[Token]:
    """Comma-separated operands of ``text[start:]`` with their columns. A blank rest gives
    no operands; an empty piece (``r1,,r2`` or a trailing comma) is an error."""
    rest = text[start:]
    if not rest.strip():
        return []
    out: list[Token] = []
    pos = start
    for piece in rest.split(","):
        stripped = piece.strip()
        lead = len(piece) - len(piece.lstrip())
        if not stripped:
            raise line.error("empty operand (two commas in a row or a trailing comma)", pos + lead + 1)
        out.append(Token(stripped, pos + lead + 1))
        pos += len(piece) + 1
    return out


def split_words(text: str, start: int) -> list[Token]:
    """Words of ``text[start:]`` separated by whitespace and/or commas, with columns."""
    return [Token(m.group(0), m.start() + 1) for m in _WORD_RE.finditer(text, start)]


def check_literal_length(line: Line, tok: Token, what: str = "numeric literal") -> None:
    """AsmError if ``tok`` is longer than :data:`MAX_LITERAL_CHARS` characters."""
    if len(tok.text) > MAX_LITERAL_CHARS:
        raise line.error(f"{what} is too long: {len(tok.text)} characters, at most {MAX_LITERAL_CHARS} "
                         f"are allowed", tok.col, len(tok.text))


def small_int(digits: str) -> int:
    """``int(digits)`` for the decimal digits of a register/predicate number, capped so that a
    huge digit string cannot trip Python's int-conversion limit (returns 10**9 then, which
    every range check rejects)."""
    return int(digits) if len(digits) <= 9 else 10 ** 9


def parse_int(line: Line, tok: Token, what: str, lo: int, hi: int) -> int:
    """An integer literal (decimal, ``0x`` hex, ``0b`` binary, optional sign) in [lo, hi]."""
    check_literal_length(line, tok, f"{what} literal")
    m = INT_RE.fullmatch(tok.text)
    if m is None:
        raise line.error_at(f"expected {what}, got {tok.text!r}", tok)
    sign, body = m.groups()
    value = int(body, 0) if body[:2].lower() in ("0x", "0b") else int(body, 10)
    if sign == "-":
        value = -value
    if not lo <= value <= hi:
        raise line.error_at(f"{what} must be in [{lo}, {hi}], got {tok.text}", tok)
    return value


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str] | dict[str, object]) -> str:
    """`` (did you mean 'x'?)`` from difflib, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def quote(text: str) -> str:
    """A double-quoted string literal for ``.loc`` (JSON escapes)."""
    import json

    out = json.dumps(text, ensure_ascii=False)
    # characters str.splitlines() would break a line at, beyond the control characters
    # that JSON already escapes
    for ch in _LINE_BREAKS:
        out = out.replace(ch, f"\\u{ord(ch):04x}")
    return out


def unquote(line: Line, tok: Token) -> str:
    """Inverse of :func:`quote`; AsmError on a malformed string."""
    import json

    if not (len(tok.text) >= 2 and tok.text.startswith('"') and tok.text.endswith('"')):
        raise line.error_at(f"expected a double-quoted file name, got {tok.text!r}", tok)
    try:
        value = json.loads(tok.text)
    except ValueError as exc:
        raise line.error_at(f"malformed string literal {tok.text}: {exc}", tok) from None
    if not isinstance(value, str):  # pragma: no cover - a quoted JSON value is a string
        raise line.error_at(f"expected a string, got {tok.text}", tok)
    return value
