"""No import cycles in anywave (issues 24 and 30): every ``import`` of every module under
src/anywave -- at module level, inside functions, and under ``if TYPE_CHECKING:`` (read from the
AST, not by importing, so a type-only import is an edge like any other) -- makes an edge from
its module to the module it names (a package's ``__init__`` when it names the package). That
graph may have no cycle at all, across packages or inside one: a cycle held apart by deferring
one import to call time, or by importing only for type checkers, still fails here. The cycles
other helpers are removing are listed, with their owners, in :data:`MODULE_CYCLES_LEFT`; the
list only shrinks. Between packages (``anywave.compiler``, ``anywave.runtime`` ...; a top-level
module such as ``anywave.abi`` is a unit of its own) there is no cycle either, and the layering
rules the design names (``docs``: the compiler knows no runtime, the emulator sits below both)
are checked as edges that must be absent."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import anywave

ROOT = Path(anywave.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement in ``path`` (see :func:`_imports_in`)."""
    return _imports_in(path.read_text(), _module_name(path), path.name == "__init__.py", str(path))


def _imports_in(text: str, name: str, is_package: bool, filename: str = "<module>") -> list[tuple[str, int]]:
    """(imported module, line) for every import statement of module ``name`` whose source is
    ``text``, wherever it stands (module level, a function, ``if TYPE_CHECKING:``), relative ones
    resolved; ``from pkg import name`` yields ``pkg.name`` when that is a module, else ``pkg``."""
    package = name if is_package else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(text, filename)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if _is_module(sub) else mod, node.lineno))
    return [(m, line) for m, line in out if m == "anywave" or m.startswith("anywave.")]


def _is_module(name: str) -> bool:
    p = ROOT.parent.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _graph(unit) -> dict[str, dict[str, list[str]]]:
    g: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(ROOT.rglob("*.py")):
        src = _module_name(path)
        for dst, line in _imports(path):
            a, b = unit(src), unit(dst)
            if a is not None and b is not None and a != b:
                g[a][b].append(f"{src}:{line} imports {dst}")
    return g


def _cycle(g: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of ``g`` as the import sites along it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, {})):
            if state.get(m) == 1:
                loop = stack[stack.index(m):] + [m]
                return [g[x][y][0] for x, y in zip(loop, loop[1:], strict=False)]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _package(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_the_package_graph_has_no_cycle():
    cycle = _cycle(_graph(_package))
    assert cycle is None, "import cycle between packages:\n  " + "\n  ".join(cycle)


def _cyclic_groups(g: dict[str, dict[str, list[str]]]) -> set[frozenset[str]]:
    """The strongly connected components of ``g`` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: set[frozenset[str]] = set()

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in g.get(n, {}):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            comp = set()
            while True:
                m = stack.pop()
                on.discard(m)
                comp.add(m)
                if m == n:
                    break
            if len(comp) > 1:
                out.add(frozenset(comp))

    for n in sorted(g):
        if n not in index:
            visit(n)
    return out


def _mods(*names: str) -> frozenset[str]:
    return frozenset(f"anywave.{n}" for n in names)


#: the module cycles left while this list was written, each by its modules and the helper
#: removing it -- listed, not exempted silently: a new cycle, or a listed one that grows, fails
#: the test, and so does an entry whose cycle is gone (remove it then). Empty is the goal.
MODULE_CYCLES_LEFT = {
}


def _module_graph() -> dict[str, dict[str, list[str]]]:
    """Every module of src/anywave (a package as its ``__init__``) -> the modules it imports,
    with the import sites."""
    return _graph(lambda name: name)


def test_no_module_cycle_anywhere():
    found = _cyclic_groups(_module_graph())
    new = found - MODULE_CYCLES_LEFT.keys()
    g = _module_graph()

    def sites(c: frozenset[str]) -> str:
        return "\n    ".join(s for a in sorted(c) for b in sorted(c) for s in g.get(a, {}).get(b, [])[:1])

    assert not new, "import cycles (not listed in MODULE_CYCLES_LEFT):\n  " + "\n  ".join(
        " ".join(sorted(c)) + ":\n    " + sites(c) for c in sorted(new, key=sorted))
    gone = MODULE_CYCLES_LEFT.keys() - found
    assert not gone, "cycles gone (remove them from MODULE_CYCLES_LEFT):\n  " + "\n  ".join(
        " ".join(sorted(c)) + f" ({MODULE_CYCLES_LEFT[c]})" for c in sorted(gone, key=sorted))


def test_the_compiler_has_no_cycle_and_no_type_only_import_of_the_frontend():
    # issue 30: intrinsic lowerings receive the builder (compiler/builder.py), not the visitor
    g = _module_graph()
    assert not [c for c in _cyclic_groups(g) if any(m.startswith("anywave.compiler") for m in c)]
    frontend = {"anywave.compiler.frontend", "anywave.compiler.kernel"}
    lowerings = [m for m in g if m.startswith(("anywave.compiler.lower_", "anywave.compiler.mma_lang",
                                               "anywave.compiler.frontend_perf", "anywave.compiler.debugprint"))]
    assert len(lowerings) >= 6, lowerings
    bad = [s for m in lowerings for d in frontend for s in g[m].get(d, [])]
    assert not bad, "a lowering imports the frontend:\n  " + "\n  ".join(bad)
    for m in lowerings:
        assert "anywave.compiler.builder" in g[m], f"{m} does not take its builder's protocol"


def test_the_layers_the_design_names():
    g = _graph(_package)
    absent = {"compiler": ("runtime", "jit", "torch", "kernels"), "emu": ("runtime", "compiler", "jit", "torch"),
              "runtime": ("jit", "torch", "kernels"), "abi": ("emu", "runtime", "compiler", "jit"),
              "backends": ("runtime", "jit", "torch")}
    bad = [site for a, bs in absent.items() for b in bs for site in g.get(a, {}).get(b, [])]
    assert not bad, "imports against the layering:\n  " + "\n  ".join(bad)


def test_the_walk_sees_function_level_and_relative_imports(tmp_path):
    # the reader itself: a deferred import inside a function and a relative import are edges
    mod = ROOT / "jit" / "launch.py"
    found = {m for m, _ in _imports(mod)}
    assert "anywave.compiler.fingerprint" in found  # imported inside _make_plan()
    assert "anywave.jit.capture" in found  # `from . import capture`


def test_the_walk_sees_type_only_imports():
    text = ("from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from .frontend import Frontend\n"
            "def f():\n"
            "    from anywave.compiler import kernel\n")
    found = dict(_imports_in(text, "anywave.compiler.lower_x", False))
    assert found == {"anywave.compiler.frontend": 3, "anywave.compiler.kernel": 5}
