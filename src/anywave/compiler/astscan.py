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


def unrolled_names(fd: ast.FunctionDef, is_static_range: Callable[[ast.expr], bool]
                   ) -> tuple[frozenset[str], frozenset[str]]:
    """The names of ``fd`` that are compile-time values in ``aw.static_range`` bodies, as two
    sets ``(straight, nested)``. ``is_static_range(iter)`` tells an ``aw.static_range(...)``
    loop from the others. A *binding* below is any assignment, loop target or ``:=`` of the name.

    ``straight``: every binding is a plain or augmented assignment statement (``x = ...``,
    ``x //= 2``) in the body of a ``for ... in aw.static_range(...)`` loop that sits at the
    function's top level or directly in another such body (so it runs as straight-line code at
    compile time). Such a name is bound to whatever compile-time value it is assigned (an int,
    a float, a tuple ...); assigned a run-time value it is a variable. (A name also assigned at
    the top level, say an accumulator ``s = 0.0`` summed in the loop, stays a variable.)

    ``nested``: the other names whose every binding is a plain or augmented assignment
    statement directly in the body of an ``aw.static_range`` loop (not inside an ``if``,
    ``while`` or ``range`` loop within that body), the loop sitting anywhere: in a run-time
    ``if`` or loop, in another static body's ``if``, in an ``@aw.func``. The frontend binds such
    a name as a compile-time int while it is assigned Python ints (``off = 1 << k``), so it
    types like a literal (``v < off`` with ``v: u32`` compares as u32). Read after a run-time
    ``if`` or loop, it is the int every path leaves (the same on all), and refused where some
    path leaves it unbound. Where the paths leave different ints, where a run-time loop reads
    it before its body rebinds it, or where it is assigned a run-time value after an int, it
    is instead a variable in the whole function, typed by its first value (i32 for an int),
    exactly as such names were before this rule (the kernel is translated again:
    ``frontend.DemoteName``); a name whose first value is a run-time one is a variable
    at once. Function parameters are in neither set (docs/guide/types.md states the rule)."""
    where: dict[str, list[int]] = {}  # name -> 0 (top level), 1 (unrolled body), 2 (elsewhere)
    direct: dict[str, list[bool]] = {}  # name -> per binding: directly in some static body

    def note(t: ast.AST, level: int, in_static: bool) -> None:
        for n in bound_names(t):
            where.setdefault(n, []).append(level)
            direct.setdefault(n, []).append(in_static)

    def visit(stmts: list[ast.stmt], level: int, in_static: bool) -> None:
        for st in stmts:
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    note(t, level, in_static)
            elif isinstance(st, ast.AugAssign):
                note(st.target, level, in_static)
            elif isinstance(st, ast.For) and is_static_range(st.iter):
                note(st.target, 2, False)  # the loop's variable is bound by the loop itself
                visit(st.body, 1 if level < 2 else 2, True)
                visit(st.orelse, 2, False)
            else:
                compound(st)

    def compound(st: ast.AST) -> None:
        """An if, while, run-time for ...: what it binds itself is no unrolled name; the
        statements of its bodies are visited as 'elsewhere' (static loops in them included)."""
        if isinstance(st, (ast.For, ast.AnnAssign)):
            note(st.target, 2, False)
        for value in ast.iter_fields(st):
            items = value[1] if isinstance(value[1], list) else [value[1]]
            if items and all(isinstance(x, ast.stmt) for x in items):
                visit(items, 2, False)
                continue
            for x in items:
                if isinstance(x, (ast.excepthandler, ast.match_case)):
                    compound(x)
    visit(fd.body, 0, False)
    for n in ast.walk(fd):  # walrus targets anywhere, annotated assignments: typed variables
        if isinstance(n, (ast.NamedExpr, ast.AnnAssign)):
            note(n.target, 2, False)
    params = {a.arg for a in fd.args.posonlyargs + fd.args.args + fd.args.kwonlyargs}
    straight = frozenset(n for n, lv in where.items() if set(lv) == {1})
    nested = frozenset(n for n, ds in direct.items() if all(ds) and n not in straight and n not in params)
    return straight, nested


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

