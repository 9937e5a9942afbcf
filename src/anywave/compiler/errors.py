"""Compile errors: the user's own file:line:col, the source line and a caret."""

from __future__ import annotations

from anywave.errors import SourceLoc, WaveError, caret_excerpt


class CompileError(WaveError):
    """A kernel the compiler cannot translate: an unsupported construct, a type error, too
    many live values ... The message names the construct or type and what would be valid;
    ``str(err)`` shows ``file:line:col``, the kernel's source line and a caret under the
    offending expression.

    Attributes:
        message: the bare message.
        loc: where (file, 1-based line and column), or None.
        source_line: the text of that line, or None.
        length: caret length.
        kernel: the kernel being compiled, when known.
    """

    def __init__(self, message: str, loc: SourceLoc | None = None, source_line: str | None = None,
                 length: int = 1, kernel: str | None = None) -> None:
        self.message = message
        self.loc = loc
        self.source_line = source_line
        self.length = length
        self.kernel = kernel
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f" (in kernel {self.kernel!r})" if self.kernel else ""
        head = f"{self.loc}: error: {self.message}{where}" if self.loc else f"error: {self.message}{where}"
        if self.source_line is not None and self.loc is not None and self.loc.col:
            return head + "\n" + caret_excerpt(self.source_line, self.loc.col, self.length)
        return head
