"""A kernel's Python source: its AST, file and lines, and errors pointing into it.

:meth:`FuncSource.error` builds the :class:`~anywave.compiler.errors.CompileError` of an AST
node: ``file:line:col``, the source line and a caret under the node's whole extent.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anywave.errors import SourceLoc

from .errors import CompileError


@dataclass
class FuncSource:
    """A parsed Python function: AST, file, first line and source lines (for messages)."""

    fn: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    first_line: int
    lines: list[str]
    col_offset: int = 0
    #: (line, col) -> SourceLoc: every instruction of a statement carries the same
    #: (immutable) location object instead of a new one each
    _locs: dict[tuple[int, int], SourceLoc] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> FuncSource:
        import inspect
        import textwrap

        try:
            src_lines, first = inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise CompileError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}; kernels "
                               "must be defined in a file (not typed at an interactive prompt)") from None
        text = "".join(src_lines)
        dedented = textwrap.dedent(text)
        indent = len(src_lines[0]) - len(src_lines[0].lstrip())
        module = ast.parse(dedented)
        tree = next((n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if not isinstance(tree, ast.FunctionDef):
            raise CompileError(f"{fn.__name__!r} is not a plain function definition")
        return cls(fn, tree, file, first, text.splitlines(), indent)

    def loc(self, node: ast.AST) -> SourceLoc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        r = self._locs.get((line, col))
        if r is None:
            r = self._locs[(line, col)] = SourceLoc(self.file, self.first_line + line - 1,
                                                    col + 1 + self.col_offset)
        return r

    def error(self, node: ast.AST | None, message: str) -> CompileError:
        if node is None or not hasattr(node, "lineno"):
            return CompileError(message, SourceLoc(self.file, self.first_line))
        loc = self.loc(node)
        idx = node.lineno - 1  # type: ignore[attr-defined]
        line = self.lines[idx] if 0 <= idx < len(self.lines) else None
        end = getattr(node, "end_col_offset", None)
        length = 1
        if end is not None and getattr(node, "end_lineno", node.lineno) == node.lineno:  # type: ignore[attr-defined]
            length = max(1, end - node.col_offset)  # type: ignore[attr-defined]
        return CompileError(message, loc, line, length)

