"""Cache keys of compiled kernels: everything the compiled bytes depend on.

A kernel's code depends on more than its source text: the values of the globals and closure
cells it reads (``SCALE = np.float32(2.0)``, ``s`` in ``make_scale(s)``), attribute constants
(``cfg.OFFSET``), the ``@aw.func`` helpers it reaches (through globals, closures or
attributes, recursively, with their own defaults and names), the compile-time constants of
the launch, and the compiler itself. :func:`fingerprint` walks the kernel's syntax tree once
per function (cached per code object), resolves every free name and attribute chain the way
the frontend does — closure cell, then module global, then builtin — and describes each value
by a stable text (:func:`describe_value`).

A value that has no stable description (an arbitrary object read by the kernel) makes the
kernel *unkeyable*: :class:`Unkeyable` is raised and the caller compiles without the disk
cache. :class:`Fingerprint.still_valid` re-resolves the same names and compares the values by
identity, so an in-memory cache can check a hit in a few microseconds instead of rebuilding
the key on every launch.

The compiler's identity is :func:`compiler_hash`: a SHA-256 of the source files of the
packages that decide the compiled bytes (``anywave.compiler``, ``isa``, ``binary``, ``emu``
— constant folding runs the emulator — and ``asm``), computed once per process.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from .bindings import DeviceFunction, Intrinsic, KernelDefinition
from .types import BufferType, ConstType, DType, TypeParam, _Dynamic

#: packages (under ``src/anywave``) whose source decides the compiled bytes
COMPILER_PACKAGES = ("compiler", "isa", "binary", "emu", "asm")

UNDEFINED = object()
_NOT_GLOBAL = object()


class Unkeyable(Exception):
    """A value the kernel reads has no stable description (the message names it)."""


def hash_sources(root: Path, packages: tuple[str, ...] = COMPILER_PACKAGES) -> str:
    """SHA-256 (hex) over the relative paths and bytes of every ``*.py`` file of ``packages``
    under ``root``, in sorted order."""
    h = hashlib.sha256()
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


_COMPILER_HASH: str | None = None


def compiler_hash() -> str:
    """The identity of this process's compiler: :func:`hash_sources` of the installed
    ``anywave`` package (computed on first use, then remembered)."""
    global _COMPILER_HASH
    if _COMPILER_HASH is None:
        _COMPILER_HASH = hash_sources(Path(__file__).resolve().parent.parent)
    return _COMPILER_HASH


# ----------------------------------------------------------------------------- syntax (per code object)

@dataclass(frozen=True)
class _Syntax:
    """What one function's source says, independent of the values its names hold."""

    text: str
    #: free names read other than as the base of an attribute chain
    names: tuple[str, ...]
    #: attribute chains rooted at a free name: (root, attr, attr, ...)
    chains: tuple[tuple[str, ...], ...]


_SYNTAX: dict[Any, _Syntax] = {}


def _chain(node: ast.AST) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    return None


def _syntax(fn: Callable[..., Any]) -> _Syntax:
    code = getattr(fn, "__code__", None)
    hit = _SYNTAX.get(code) if code is not None else None
    if hit is not None:
        return hit
    try:
        text = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError) as e:
        raise Unkeyable(f"the source of {getattr(fn, '__qualname__', fn)!r} cannot be read ({e})") from None
    fd = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    bound: set[str] = set()
    if fd is not None:
        a = fd.args
        bound |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        for n in ast.walk(fd):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bound.add(n.id)
    bases: set[int] = set()
    chains: set[tuple[str, ...]] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and id(n) not in bases:
            c = _chain(n)
            if c is not None and c[0] not in bound:
                chains.add(c)
            inner = n.value
            while isinstance(inner, ast.Attribute):
                bases.add(id(inner))
                inner = inner.value
            bases.add(id(inner))
    names = {n.id for n in ast.walk(tree)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in bases and n.id not in bound}
    # decorators are evaluated before the kernel exists; the kernel object records their effect
    if fd is not None:
        for d in fd.decorator_list:
            for n in ast.walk(d):
                if isinstance(n, ast.Name):
                    names.discard(n.id)
                c = _chain(n) if isinstance(n, ast.Attribute) else None
                if c is not None:
                    chains.discard(c)
    syn = _Syntax(text, tuple(sorted(names)), tuple(sorted(chains)))
    if code is not None:
        _SYNTAX[code] = syn
    return syn


def resolve(fn: Callable[..., Any], name: str) -> Any:
    """The value a kernel-body name refers to, in Python's order: closure cell, module
    global, builtin (``UNDEFINED`` when none)."""
    code = getattr(fn, "__code__", None)
    if code is not None and name in code.co_freevars and fn.__closure__:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return UNDEFINED
    g = getattr(fn, "__globals__", {})
    if name in g:
        return g[name]
    return getattr(builtins, name, UNDEFINED)


def _resolve_chain(fn: Callable[..., Any], chain: tuple[str, ...]) -> Any:
    v = resolve(fn, chain[0])
    for attr in chain[1:]:
        if v is UNDEFINED:
            return v
        try:
            v = getattr(v, attr)
        except Exception:  # noqa: BLE001 - a failing attribute is reported by the frontend
            return UNDEFINED
    return v


# ----------------------------------------------------------------------------- values

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def describe_value(v: Any, visit: Callable[[Any], str]) -> str:
    """A stable text for a value a kernel reads; ``visit`` describes a device function.

    Raises:
        Unkeyable: the value is an arbitrary object whose state could change unseen.
    """

    if v is UNDEFINED:
        return "<undefined>"
    if isinstance(v, _SCALARS):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, np.generic):
        return f"np.{v.dtype.str}:{v.tobytes().hex()}"
    if isinstance(v, tuple):
        return "(" + ", ".join(describe_value(x, visit) for x in v) + ")"
    if isinstance(v, (DType, BufferType, ConstType, TypeParam, _Dynamic)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, Intrinsic):
        return f"intrinsic:{v.name}"
    if isinstance(v, Enum):
        return f"enum:{type(v).__qualname__}.{v.name}"
    if isinstance(v, DeviceFunction):
        return visit(v)
    if isinstance(v, KernelDefinition):
        return f"kernel:{v.name}"
    if isinstance(v, types.ModuleType):
        return f"module:{v.__name__}"
    if isinstance(v, (type, types.BuiltinFunctionType, np.ufunc)):
        return f"object:{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', v.__name__)}"
    if isinstance(v, types.FunctionType):
        # a plain Python function cannot be called in a kernel (the frontend refuses it),
        # so its name is all the code can depend on
        return f"function:{v.__module__}.{v.__qualname__}"
    raise Unkeyable(f"a {type(v).__name__} object")


#: values compared by identity in :meth:`Fingerprint.still_valid` (immutable, or keyed by name)
def _identity_safe(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(_identity_safe(x) for x in v)
    return v is UNDEFINED or isinstance(v, (*_SCALARS, np.generic, DType, BufferType, ConstType, TypeParam, _Dynamic,
                                           Intrinsic, Enum,
                                           DeviceFunction, KernelDefinition, types.ModuleType, type,
                                           types.BuiltinFunctionType, types.FunctionType, np.ufunc))


# ----------------------------------------------------------------------------- fingerprints

@dataclass
class Fingerprint:
    """The key text of a kernel and the lookups it was built from.

    Attributes:
        text: the description (hash it for a key).
        deps: (cell, globals, name, attributes, value) of every lookup, for :meth:`still_valid`
            (``cell`` the closure cell or None; ``globals`` None for a function attribute
            such as ``__defaults__`` of ``name``, which is then the function).
        exact: every dependency is identity-comparable (else always rebuild the key).
    """

    text: str
    deps: list[tuple[Any, Any, Any, tuple[str, ...], Any]]
    exact: bool

    def still_valid(self) -> bool:
        """True when every name still resolves to the identical value (a fast hit check)."""
        if not self.exact:
            return False
        for cell, g, name, attrs, value in self.deps:
            if cell is not None:
                try:
                    v = cell.cell_contents
                except ValueError:
                    v = UNDEFINED
            elif g is None:
                v = getattr(name, attrs[0], None)
                attrs = ()
            else:
                v = g.get(name, _NOT_GLOBAL)
                if v is _NOT_GLOBAL:
                    v = getattr(builtins, name, UNDEFINED)
            for a in attrs:
                try:
                    v = getattr(v, a)
                except Exception:  # noqa: BLE001 - a changed object: rebuild the key
                    return False
            if v is not value:
                return False
        return True


def fingerprint(fn: Callable[..., Any]) -> Fingerprint:
    """The :class:`Fingerprint` of kernel or device function ``fn`` (its source, defaults,
    and every global/closure/attribute value it reads, recursively through ``@aw.func``).

    Raises:
        Unkeyable: a value read by the kernel cannot be described (see the module docstring).
    """
    deps: list[tuple[Any, Any, Any, tuple[str, ...], Any]] = []
    seen: dict[int, str] = {}
    exact = [True]

    def visit_func(f: Any) -> str:
        inner = f.fn
        mod = getattr(inner, "__module__", "") or ""
        if mod.split(".")[:1] == ["anywave"] and mod.split(".")[1:2] and mod.split(".")[1] in COMPILER_PACKAGES:
            return f"func:{mod}.{inner.__qualname__}"  # part of compiler_hash() (the standard library)
        # every other function by its source, the kernel library's (anywave.kernels) included:
        # compiler_hash() does not cover those files
        return "func:" + walk(inner)

    def walk(f: Callable[..., Any]) -> str:
        key = id(f)
        if key in seen:
            return f"<see {seen[key]}>"
        seen[key] = f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', '')}#{len(seen)}"
        syn = _syntax(f)
        parts = [f"def {seen[key]}", syn.text]
        for what in ("__defaults__", "__kwdefaults__"):
            d = getattr(f, what, None)
            if d:
                vals = tuple(d.values()) if isinstance(d, dict) else d
                keys = tuple(d.keys()) if isinstance(d, dict) else ()
                parts.append(f"{what}={keys!r}:" + describe(f, (what,), vals))
        for name in syn.names:
            parts.append(f"name {name}=" + describe(f, (name,), resolve(f, name)))
        for chain in syn.chains:
            parts.append(f"attr {'.'.join(chain)}=" + describe(f, chain, _resolve_chain(f, chain)))
        return "\n".join(parts)

    def describe(f: Callable[..., Any], chain: tuple[str, ...], value: Any) -> str:
        if chain[0] in ("__defaults__", "__kwdefaults__"):
            deps.append((None, None, f, chain, getattr(f, chain[0])))
        else:
            code = getattr(f, "__code__", None)
            cell = None
            if code is not None and chain[0] in code.co_freevars and f.__closure__:
                cell = f.__closure__[code.co_freevars.index(chain[0])]
            attrs, checked = chain[1:], value
            if attrs and _is_anywave_module(_resolve_chain(f, chain[:1])):
                # aw.f32, aw.In ...: the package's own names are fixed for the process (and
                # covered by compiler_hash); checking the root's identity is enough
                checked, attrs = _resolve_chain(f, chain[:1]), ()
            deps.append((cell, getattr(f, "__globals__", {}), chain[0], attrs, checked))
        if not _identity_safe(value):
            exact[0] = False
        try:
            return describe_value(value, visit_func)
        except Unkeyable as e:
            raise Unkeyable(f"{'.'.join(chain)!r} in {getattr(f, '__qualname__', f)!r} is {e}; the compiled "
                            "kernel cannot be keyed on it") from None

    text = walk(fn)
    unique: dict[tuple[int, int, str, tuple[str, ...]], tuple[Any, Any, Any, tuple[str, ...], Any]] = {}
    for d in deps:
        unique.setdefault((id(d[0]), id(d[1]), d[2] if isinstance(d[2], str) else str(id(d[2])), d[3]), d)
    return Fingerprint(text, list(unique.values()), exact[0])


def _is_anywave_module(v: Any) -> bool:
    return isinstance(v, types.ModuleType) and (v.__name__ == "anywave" or v.__name__.startswith("anywave."))
