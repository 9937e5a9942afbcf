"""Syntax-only analyses of a kernel's Python AST (no types, no IR): which names a function
assigns and how often, whether it returns early, and how unsupported constructs are named
in messages. Results per function AST are cached (device functions are inlined at every
call site)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any


def has_early_return(body: list[ast.stmt]) -> bool:
    """True when a return appears anywhere except as the last top-level statement."""
    for i, s in enumerate(body):
        for n in ast.walk(s):
            if isinstance(n, ast.Return) and not (i == len(body) - 1 and n is s):
                return True
    return False


def memo_by_tree(fn: Callable[[ast.FunctionDef], Any]) -> Callable[[ast.FunctionDef], Any]:
    """Cache ``fn(fd)`` per function AST (device functions are inlined at every call site;
    their syntax-only analyses need not be redone). The AST is kept alive by the entry, so
    its id cannot be reused while cached."""
    cache: dict[int, tuple[ast.FunctionDef, Any]] = {}

    def wrapper(fd: ast.FunctionDef) -> Any:
        hit = cache.get(id(fd))
        if hit is not None and hit[0] is fd:
            return hit[1]
        if len(cache) > 1024:
            cache.clear()
        r = fn(fd)
        cache[id(fd)] = (fd, r)
        return r

    return wrapper


@memo_by_tree
def fn_has_early_return(fd: ast.FunctionDef) -> bool:
    """:func:`has_early_return` of a function's body, cached per function AST."""
    return has_early_return(fd.body)


@memo_by_tree
def assign_counts(fd: ast.FunctionDef) -> dict[str, int]:
    """How many times each name is assigned in ``fd`` (augmented assignments and loop
    targets count twice). Callers must not mutate the result (it is cached)."""
    counts: dict[str, int] = {}
    for n in ast.walk(fd):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
            counts_inc = 2 if isinstance(n, ast.AugAssign) else 1
            for t in targets:
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + counts_inc
            continue
        elif isinstance(n, ast.For):
            targets = [n.target]
            for t in ast.walk(n.target):
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 2
            continue
        for t in targets:
            for x in bound_names(t):
                counts[x] = counts.get(x, 0) + 1
    return counts


def bound_names(t: ast.AST) -> list[str]:
    """Names an assignment target binds (``x``, ``x, y``); ``buf[i, j] = v`` binds none (the
    names inside its index are read, not assigned)."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in bound_names(e)]
    if isinstance(t, ast.Starred):
        return bound_names(t.value)
    return []


@memo_by_tree
def assigned_names(fd: ast.FunctionDef) -> frozenset[str]:
    out: set[str] = set()
    for n in ast.walk(fd):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        out.add(x.id)
    return frozenset(out)


def construct_name(node: ast.AST) -> str:
    names = {
        "ListComp": "a list comprehension", "DictComp": "a dict comprehension", "SetComp": "a set comprehension",
        "GeneratorExp": "a generator expression", "Lambda": "a lambda", "With": "a with statement",
        "Try": "a try statement", "Raise": "a raise statement", "Global": "a global statement",
        "Nonlocal": "a nonlocal statement", "Delete": "a del statement", "Import": "an import",
        "ImportFrom": "an import", "ClassDef": "a class definition", "FunctionDef": "a nested function",
        "AsyncFunctionDef": "an async function", "Await": "await", "Yield": "yield", "YieldFrom": "yield from",
        "JoinedStr": "an f-string", "Dict": "a dict", "Set": "a set", "Starred": "a starred expression",
        "NamedExpr": "an assignment expression (:=)", "Slice": "a slice", "Match": "a match statement",
        "AsyncFor": "async for", "AsyncWith": "async with",
    }
    return names.get(type(node).__name__, f"'{type(node).__name__}'")


def supported_hint(node: ast.AST) -> str:
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return "; use a for loop over range() instead"
    if isinstance(node, ast.FunctionDef):
        return "; define it at module level with @aw.func"
    if isinstance(node, (ast.Raise, ast.Try)):
        return "; kernels cannot raise — write an error flag to an output buffer"
    if isinstance(node, ast.Slice):
        return "; index one element at a time"
    return ""

