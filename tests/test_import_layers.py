"""No import cycles in anywave (issue 24): every ``import`` of every module under src/anywave,
at module level and inside functions (read from the AST, not by importing), makes an edge
between packages (``anywave.compiler``, ``anywave.runtime`` ...; a top-level module such as
``anywave.abi`` is a unit of its own), and between the modules of one package; neither graph may
have a cycle. A function-level import is a dependency like any other: a cycle held apart by
deferring one import to call time still fails here. The layering rules the design names
(``docs``: the compiler knows no runtime, the emulator sits below both) are checked as edges
that must be absent."""

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
    """(imported module, line) for every import statement in ``path``, relative ones resolved;
    ``from pkg import name`` yields ``pkg.name`` when that is a module, else ``pkg``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


#: the module cycles left today, each by its modules -- listed, not exempted silently: a new
#: cycle, or a listed one that grows, fails the test; remove an entry when its cycle is gone
MODULE_CYCLES_LEFT = {
    _mods("compiler.debugprint", "compiler.fingerprint", "compiler.frontend", "compiler.frontend_memory",
          "compiler.frontend_perf", "compiler.kernel", "compiler.language", "compiler.lower_math",
          "compiler.lower_threads", "compiler.lower_wave", "compiler.mma_lang"),
    _mods("kernels.gemm", "kernels.linalg"),
    _mods("torch.cli_train", "torch.distributed", "torch.train"),
}


def test_no_module_cycle_inside_a_package():
    pkgs = sorted({_package(_module_name(p)) for p in ROOT.rglob("*.py")} - {None})
    found: set[frozenset[str]] = set()
    for pkg in pkgs:
        def unit(name: str, pkg: str = pkg) -> str | None:
            # the package's own __init__ re-exports its modules: an edge into it is an edge to
            # the package, not a cycle through its parts
            return name if name.startswith(f"anywave.{pkg}.") else None

        found |= _cyclic_groups(_graph(unit))
    new = found - MODULE_CYCLES_LEFT
    assert not new, "import cycles not listed in MODULE_CYCLES_LEFT:\n  " + "\n  ".join(
        " ".join(sorted(c)) for c in sorted(new, key=sorted))
    gone = MODULE_CYCLES_LEFT - found
    assert not gone, "cycles gone (remove them from MODULE_CYCLES_LEFT):\n  " + "\n  ".join(
        " ".join(sorted(c)) for c in sorted(gone, key=sorted))


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
    assert "anywave.runtime.cuda" in found  # imported inside launch()
    assert "anywave.jit.capture" in found  # `from . import capture`
