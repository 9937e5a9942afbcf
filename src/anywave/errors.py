"""Exception types. Every error a user can cause is a :class:`WaveError` subclass whose
message names the thing, the offending value and what would be valid; the CLI prints it
without a traceback (exit status 1 for user errors, 2 for usage errors)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in a source file (1-based line and column; 0 when unknown)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"


class WaveError(Exception):
    """Base class of every anywave error caused by the user's input."""


def caret_excerpt(source_line: str, col: int, length: int = 1) -> str:
    """Two lines: the source line and a caret under column ``col`` (1-based)."""
    line = source_line.rstrip("\n").expandtabs(1)
    pad = " " * max(col - 1, 0)
    return f"    {line}\n    {pad}{'^' * max(length, 1)}"


class AsmError(WaveError):
    """A malformed ``.wave`` text: carries file:line:column and the offending line."""

    def __init__(self, message: str, loc: SourceLoc | None = None, source_line: str | None = None,
                 length: int = 1) -> None:
        self.message = message
        self.loc = loc
        self.source_line = source_line
        self.length = length
        super().__init__(self.__str__())

    def __str__(self) -> str:
        head = f"{self.loc}: error: {self.message}" if self.loc else f"error: {self.message}"
        if self.source_line is not None and self.loc is not None:
            return head + "\n" + caret_excerpt(self.source_line, self.loc.col, self.length)
        return head


class BinaryFormatError(WaveError):
    """A malformed ``.wbin`` container: names the byte offset and the field."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.message = message
        self.offset = offset
        super().__init__(f"{message} (at byte offset {offset:#x})" if offset is not None else message)


class VerifyError(WaveError):
    """A binary or module that breaks a rule of the spec. ``problems`` lists every one found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = "invalid module: " + (self.problems[0] if count == 1 else f"{count} problems")
        body = "" if count == 1 else "\n" + "\n".join("  - " + p for p in self.problems)
        super().__init__(head + body)


class EmulationError(WaveError):
    """A kernel did something the spec makes an error (out-of-bounds access, divergent
    barrier, data race in checked mode ...). The message names the kernel, the
    instruction, its source line when the debug table has it, and the threads."""


class LaunchConfigError(WaveError, ValueError):
    """A launch a target cannot run as asked: a grid or workgroup shape, wave width, local
    memory size or argument outside what the kernel or the target allows. The message names
    the value and the limit. (Also a ValueError, for callers that catch bad arguments.)"""


class OutOfBoundsError(EmulationError):
    """A memory access outside its buffer or the workgroup's local memory: raised by the
    emulator (always) and by the bounds-checked builds of the compiled targets
    (``launch(..., check=True)``, ``ANYWAVE_CHECK=1``). The message names the kernel, the
    argument, the byte offset, the access size, the buffer size and the source line."""


class LaunchError(WaveError, TypeError):
    """Arguments that do not match the kernel's ABI (count, kind, dtype, contiguity, range)."""


class LaunchValueError(WaveError, ValueError):
    """Bad launch geometry or an out-of-range scalar."""
