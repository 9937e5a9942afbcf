"""Kernel definitions and ``@aw.func``: the compilation pipeline and its caches.

Pipeline: :class:`~anywave.compiler.frontend.Frontend` (AST → structured IR) →
:func:`~anywave.compiler.passes.optimize` → :func:`~anywave.compiler.codegen.allocate` →
:func:`~anywave.compiler.codegen.emit` → :class:`~anywave.binary.module.Module`, verified.

Launching (``saxpy(2.0, x, y, n, grid=..., workgroup=...)``) is not the compiler's: it is
:mod:`anywave.jit`, whose :class:`~anywave.jit.kernel.KernelFunction` extends :class:`KernelDef`.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import hashlib
import inspect
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anywave.abi import dims3 as _dims3
from anywave.binary.module import KERNEL_FLAG_W_INVARIANT, Arg, Kernel, Module, settle_version
from anywave.binary.verify import verify_cached
from anywave.errors import LaunchError, LaunchValueError, VerifyError  # noqa: F401 - re-exported
from anywave.isa.types import LIMITS, ArgKind

from . import codegen, passes, spill
from . import types as ty
from .bindings import DeviceFunction, KernelDefinition
from .errors import CompileError
from .fingerprint import Fingerprint, Unkeyable, compiler_hash, fingerprint
from .frontend import DemoteName, Frontend, FuncSource

#: the package version (informational; the cache key uses the compiler's source hash instead)
COMPILER_VERSION = "0.1.1"  # 0.1.1: W-invariant collectives, the kernel W-dependence flag


class CacheWarning(UserWarning):
    """A kernel cannot be cached (it reads a value with no stable description)."""


# ----------------------------------------------------------------------------- device functions

class Func(DeviceFunction):
    """``@aw.func``: a device function, inlined at every call site in a kernel. Its
    parameters may be annotated (``x: aw.f32``) or left free (typed by the call);
    parameters receiving compile-time constants specialise the inlined body."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn
        self._source: FuncSource | None = None
        self._defaults: tuple[Any, Any, dict[str, Any]] | None = None

    @property
    def source(self) -> FuncSource:
        if self._source is None:
            self._source = FuncSource.of(self.fn)
        return self._source

    def defaults(self) -> dict[str, Any]:
        """Parameter defaults by name (a fresh dict; computed once per state of the
        function's ``__defaults__``/``__kwdefaults__`` — it is inlined at every call site)."""
        fn = self.fn
        d, kd = getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)
        c = self._defaults
        if c is None or c[0] is not d or c[1] is not kd:
            sig = inspect.signature(fn)
            c = self._defaults = (d, kd, {k: p.default for k, p in sig.parameters.items()
                                          if p.default is not inspect.Parameter.empty})
        return dict(c[2])

    def annotations(self) -> dict[str, Any]:
        return _eval_annotations(self.fn)

    def fingerprint(self, seen: set[int] | None = None) -> str:
        """The cache-key text of this function: its source, defaults and every value it reads
        (:func:`anywave.compiler.fingerprint.fingerprint`; raises ``Unkeyable`` when a value
        has no stable description). ``seen`` is accepted for compatibility and ignored."""
        return fingerprint(self.fn).text

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Host call: runs the Python function (useful only when it uses no intrinsics; one that
        does raises a CompileError naming this function)."""
        from anywave.compiler.errors import CompileError

        try:
            return self.fn(*args, **kwargs)
        except CompileError as e:
            if "can only be used inside an @aw.kernel" in str(e) and f"aw.{self.name}()" not in str(e):
                raise CompileError(f"aw.{self.name}() was called outside a kernel: it is a device function "
                                   f"(@aw.func) that uses the language's intrinsics ({e}); call it inside an "
                                   "@aw.kernel or @aw.func body") from None
            raise

    def __repr__(self) -> str:
        return f"<aw.func {self.name}>"


def func(fn: Callable[..., Any]) -> Func:
    """Decorator: make ``fn`` a device function callable from kernels (inlined)."""
    return Func(fn)


# ----------------------------------------------------------------------------- kernels

@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "buffer" | "scalar" | "const"
    ann: Any
    default: Any = inspect.Parameter.empty


def _eval_annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, evaluated (string annotations in the function's globals and
    closure). Text that names a type parameter (``"aw.In[T]"`` with ``T: aw.constexpr``) sees
    ``T`` as a :class:`~anywave.compiler.types.TypeParam`."""
    out: dict[str, Any] = {}
    scope: dict[str, Any] | None = None
    texts = {k: v for k, v in getattr(fn, "__annotations__", {}).items()}
    failed: dict[str, Exception] = {}
    for k, v in texts.items():
        if isinstance(v, str):
            if scope is None:
                scope = _closure_vars(fn)  # annotation text may name the enclosing function's locals
            try:
                v = eval(v, fn.__globals__, scope)  # noqa: S307 - the user's own annotation text
            except Exception as e:  # noqa: BLE001
                failed[k] = e
                continue
        out[k] = v
    if failed:  # a second pass with the type parameters bound (T: aw.constexpr)
        tps = {k: ty.TypeParam(k) for k, v in out.items() if v is ty.constexpr}
        scope2 = {**(scope or {}), **tps}
        for k, e in failed.items():
            try:
                out[k] = eval(texts[k], fn.__globals__, scope2)  # noqa: S307 - the user's own annotation text
            except Exception:  # noqa: BLE001
                raise CompileError(f"cannot evaluate the annotation of {k!r} in {fn.__name__}: {texts[k]!r} ({e})"
                                   ) from None
    return out


def _uses_dynamic(tree: ast.AST) -> bool:
    """Whether a function body names ``dynamic`` (``aw.dynamic``, or the name imported): the
    kernel then takes the launch keyword ``local_bytes`` (a spelling that turns out to be another
    ``dynamic`` only adds an unused keyword)."""
    return any((isinstance(n, ast.Attribute) and n.attr == "dynamic") or (isinstance(n, ast.Name) and n.id == "dynamic")
               for n in ast.walk(tree))


def _closure_vars(fn: Callable[..., Any]) -> dict[str, Any]:
    """The values of ``fn``'s closure cells by name (empty cells left out)."""
    code = getattr(fn, "__code__", None)
    out: dict[str, Any] = {}
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or (), strict=False):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting still frees
    everything acyclic); re-enabled afterwards only if it was enabled, so nesting and a user's
    own ``gc.disable()`` are respected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class KernelDef(KernelDefinition):
    """A kernel definition, compiled on demand: :meth:`compile` for the Module. It knows no
    runtime: launching is :class:`anywave.jit.kernel.KernelFunction` (what ``@aw.kernel`` makes).

    Attributes:
        name: kernel name (the function's name unless given).
        params: parameters in order (buffers, scalars, compile-time constants).
    """

    def __init__(self, fn: Callable[..., Any], *, workgroup: Sequence[int] | int | None = None,
                 max_workgroup_size: int | None = None, name: str | None = None, optimize: bool = True) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn
        self.workgroup = _dims3(workgroup, "workgroup") if workgroup is not None else None
        self.max_workgroup_size = max_workgroup_size
        self.optimize = optimize
        self._lock = threading.Lock()
        #: constants -> (fingerprint, digest, module); a hit is re-validated on every call
        self._memo: dict[tuple[Any, ...], tuple[Fingerprint, str, Module]] = {}
        self._warned_unkeyable = False
        self._params: list[Param] | None = None
        #: constants -> the register report of the last pipeline run (compiler/spill.py)
        self._resources: dict[tuple[Any, ...], Any] = {}
        #: (code object, its parsed source): see _kernel_source
        self._parsed: tuple[Any, FuncSource] | None = None

    # ------------------------------------------------------------ signature
    @property
    def params(self) -> list[Param]:
        if self._params is None:
            self._params = self._parse_params()
        return self._params

    def _parse_params(self) -> list[Param]:
        src = FuncSource.of(self.fn)
        anns = _eval_annotations(self.fn)
        sig = inspect.signature(self.fn)
        out: list[Param] = []
        for p in sig.parameters.values():
            node = next((a for a in src.tree.args.args + src.tree.args.kwonlyargs if a.arg == p.name), src.tree)
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise src.error(node, f"parameter {p.name!r}: *args, **kwargs and positional-only parameters are "
                                "not supported in kernels")
            ann = anns.get(p.name)
            tp = ty.type_param_of(ann)
            if p.kind is p.KEYWORD_ONLY or isinstance(ann, ty.ConstType) or ann is ty.constexpr:
                out.append(Param(p.name, "const", ann, p.default))
            elif isinstance(ann, ty.BufferType):
                out.append(Param(p.name, "buffer", ann))
            elif isinstance(ann, ty.DType) and ann in ty.VALUE_TYPES and ann is not ty.bool_:
                out.append(Param(p.name, "scalar", ann))
            elif tp is not None:
                out.append(Param(p.name, "scalar", tp))
            else:
                valid = "aw.i32, aw.u32, aw.i64, aw.u64, aw.f16, aw.bf16, aw.f32, aw.f64, aw.Buffer[T], aw.In[T], " \
                        "aw.Out[T], aw.Const[int], aw.constexpr"
                what = "has no annotation" if ann is None else f"is annotated {ann!r}"
                raise src.error(node, f"kernel parameter {p.name!r} {what}; valid annotations: {valid} "
                                "(or make it keyword-only for a compile-time constant)")
        if _uses_dynamic(src.tree):  # aw.local_array(dtype, aw.dynamic): the launch gives its bytes
            if any(p.name == ty.DYNAMIC_LOCAL for p in out):
                raise src.error(src.tree, f"kernel parameter {ty.DYNAMIC_LOCAL!r}: the name is the launch keyword of "
                                "the kernel's aw.dynamic local memory; rename the parameter")
            out.append(Param(ty.DYNAMIC_LOCAL, "const", ty.ConstType(int), 0))
        consts = {p.name for p in out if p.kind == "const"}
        for p in out:  # every type parameter an annotation names is a compile-time parameter
            tp = p.ann.elem if isinstance(p.ann, ty.BufferType) else p.ann
            if isinstance(tp, ty.TypeParam) and tp.name not in consts:
                node = next((a for a in src.tree.args.args + src.tree.args.kwonlyargs if a.arg == p.name), src.tree)
                raise src.error(node, f"kernel parameter {p.name!r} is annotated {p.ann!r}, but {tp.name!r} is not a "
                                f"compile-time parameter of the kernel; add {tp.name}: aw.constexpr (its value: a "
                                "dtype such as aw.f32)")
        return out

    @property
    def type_params(self) -> dict[str, list[str]]:
        """The kernel's type parameters: name -> the buffer parameters annotated with it (from
        which a launch takes the dtype when it is not given)."""
        tps = self.__dict__.get("_type_params")
        if tps is None:
            tps = {}
            for p in self.params:
                tp = p.ann.elem if isinstance(p.ann, ty.BufferType) else p.ann
                if isinstance(tp, ty.TypeParam):
                    tps.setdefault(tp.name, [])
                    if p.kind == "buffer":
                        tps[tp.name].append(p.name)
            self.__dict__["_type_params"] = tps
        return tps

    def params_for(self, consts: Mapping[str, Any]) -> list[Param]:
        """:attr:`params` with each type parameter replaced by its dtype in ``consts`` (the
        kernel's own list when it has none). Raises CompileError for a value that is no dtype."""
        if not self.type_params:
            return self.params
        dts: dict[str, ty.DType] = {}
        for name in self.type_params:
            v = consts.get(name)
            t = v if isinstance(v, ty.DType) else None
            if t is None or (t is not ty.bool_ and t not in ty.VALUE_TYPES and t not in ty.NARROW_TYPES):
                raise CompileError(f"kernel {self.name!r}: type parameter {name!r} must be a dtype (aw.f32, aw.i32, "
                                   f"np.float16 ...), got {v!r}")
            dts[name] = t
        out = []
        for p in self.params:
            if isinstance(p.ann, ty.BufferType):
                out.append(Param(p.name, p.kind, p.ann.resolved(dts), p.default))
            elif isinstance(p.ann, ty.TypeParam):
                t = dts[p.ann.name]
                if t not in ty.VALUE_TYPES or t is ty.bool_:
                    raise CompileError(f"kernel {self.name!r}: scalar parameter {p.name!r} has type {p.ann.name} = "
                                       f"{t!r}, which is no scalar argument type (aw.i32, aw.u32, aw.i64, aw.u64, "
                                       "aw.f16, aw.bf16, aw.f32, aw.f64)")
                out.append(Param(p.name, p.kind, t, p.default))
            else:
                out.append(p)
        return out

    # ------------------------------------------------------------ compile
    def _consts_from(self, bound: Mapping[str, Any]) -> dict[str, Any]:
        consts: dict[str, Any] = {}
        for p in self.params:
            if p.kind != "const":
                continue
            if p.name in bound:
                v = bound[p.name]
            elif p.default is not inspect.Parameter.empty:
                v = p.default
            else:
                raise LaunchError(f"kernel {self.name!r}: compile-time constant {p.name!r} was not given")
            if p.name in self.type_params:  # a dtype: aw.f16, np.float16, "float16", bool
                t = ty.resolve_dtype(v)
                if t is None:
                    raise LaunchError(f"kernel {self.name!r}: type parameter {p.name!r} must be a dtype (aw.f32, "
                                      f"np.float16 ...), got {v!r}")
                v = t
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(p.ann, ty.ConstType) and not isinstance(v, p.ann.py):
                raise LaunchError(f"kernel {self.name!r}: constant {p.name!r} must be a {p.ann.py.__name__}, "
                                  f"got {v!r}")
            if not isinstance(v, (bool, int, float, str, tuple, ty.DType)):
                raise LaunchError(f"kernel {self.name!r}: constant {p.name!r} must be a number, bool, str, tuple "
                                  f"or dtype, got {type(v).__name__}")
            consts[p.name] = v
        return consts

    def compile(self, **constants: Any) -> Module:
        """The Module (one kernel) for the given compile-time constants; cached in memory and
        on disk. Raises CompileError for an invalid kernel.

        The cache key (:meth:`cache_key`) covers everything the bytes depend on: the source of
        the kernel and of every ``@aw.func`` it reaches, the values of the globals, closure
        cells and attribute constants they read, the constants, the decorator options and
        the compiler's own source (:func:`~anywave.compiler.fingerprint.compiler_hash`). An
        in-memory hit is re-checked on every call (the names must still hold the identical
        values). A kernel that reads a value with no stable description (an arbitrary
        object) is compiled on every call, never cached, with one ``CacheWarning``.
        """
        consts = self._consts_from(constants)
        key = tuple(sorted((k, repr(v)) for k, v in consts.items()))
        with self._lock:
            hit = self._memo.get(key)
        if hit is not None and hit[0].still_valid():
            return hit[2]
        try:
            fp = fingerprint(self.fn)
        except Unkeyable as e:
            if not self._warned_unkeyable:
                self._warned_unkeyable = True
                warnings.warn(f"kernel {self.name!r} is compiled on every call and never cached: {e}",
                              CacheWarning, stacklevel=3)
            m = settle_version(Module(kernels=[self.compile_kernel(consts)]))
            _verify_output(m, self.name)
            return m
        fp = self._shared_fingerprint(fp)
        digest = self._digest(consts, fp)
        if hit is not None and hit[1] == digest:
            m = hit[2]
        else:
            m = _DISK.load(digest, lambda m: self._entry_matches(m, consts))
            if m is None:
                kernel = self.compile_kernel(consts)
                m = settle_version(Module(kernels=[kernel]))
                _verify_output(m, self.name)
                _DISK.store(digest, m)
        with self._lock:
            self._memo[key] = (fp, digest, m)
        return m

    def _modules_current(self) -> bool:
        """True when the compiled modules are still current: every name the compiled code read
        holds the identical value (and the kernel is cacheable at all); a launcher drops what it
        recorded for them otherwise (:mod:`anywave.jit.kernel`). Specialisations share one
        fingerprint object while their dependencies are the same (:meth:`_shared_fingerprint`),
        so it is checked once, not once per specialisation."""
        if self._warned_unkeyable:
            return False
        last = None
        for fp, _, _ in self._memo.values():
            if fp is last:
                continue
            if not fp.still_valid():
                return False
            last = fp
        return True

    def _shared_fingerprint(self, fp: Fingerprint) -> Fingerprint:
        """``fp``, or an equal fingerprint already held by another specialisation: the same text
        and the same dependencies (the same cells, globals, names, attribute paths and the
        identical values), so either one's ``still_valid`` answers for both."""
        with self._lock:
            held = [v[0] for v in self._memo.values()]
        for old in reversed(held):
            if old is fp:
                return fp
            if (old.exact and fp.exact and old.text == fp.text and len(old.deps) == len(fp.deps)
                    and all(a[0] is b[0] and a[1] is b[1] and a[2] == b[2] and a[3] == b[3] and a[4] is b[4]
                            for a, b in zip(old.deps, fp.deps, strict=True))):
                return old
        return fp

    def _expected_abi(self, consts: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for p in self.params_for(consts or {}):
            if p.kind == "buffer":
                out.append((p.name, ArgKind.BUFFER, p.ann.elem.scalar, p.ann.access, p.ann.constant))
            elif p.kind == "scalar":
                out.append((p.name, ArgKind.SCALAR, p.ann.scalar))
        return out

    def _entry_matches(self, m: Module, consts: Mapping[str, Any] | None = None) -> bool:
        """A disk-cache entry is used only when it holds exactly this kernel: its name, ABI
        and launch requirements (anything else is a miss, never an error)."""
        if len(m.kernels) != 1:
            return False
        k = m.kernels[0]
        abi = [(a.name, a.kind, a.type, a.access, a.constant) if a.kind is ArgKind.BUFFER else (a.name, a.kind, a.type)
               for a in k.args]
        wg = tuple(k.workgroup_size) if k.workgroup_size is not None else None
        # a kernel that spills declares its own max_workgroup_size (compiler/spill.py)
        return (k.name == self.name and abi == self._expected_abi(consts) and wg == self.workgroup
                and (k.max_workgroup_size == self.max_workgroup_size or self.max_workgroup_size is None))

    def _kernel_source(self) -> FuncSource:
        """The parsed source, read once per code object of the function (as the cache key's
        :func:`~anywave.compiler.fingerprint.fingerprint` reads it), so a recompilation does not
        parse it again (the frontend does not change the tree: ``@aw.func`` bodies are shared
        the same way)."""
        code = getattr(self.fn, "__code__", None)
        hit = self._parsed
        if hit is None or hit[0] is not code:
            hit = self._parsed = (code, FuncSource.of(self.fn))
        return hit[1]

    def compile_kernel(self, consts: Mapping[str, Any] | None = None) -> Kernel:
        """Run the pipeline (no caching) and return the Kernel.

        Python's cyclic garbage collector is paused meanwhile (:func:`_gc_paused`): the pipeline
        makes ~10^5 short-lived objects, freed by reference counting, and in a process with a
        large heap (torch imported) a full collection that falls inside a compile cost ~200 ms
        of CPU on a 2-core machine, 3x the compile itself (bench/results/compile_gc_2026-12-01.json)."""
        with _gc_paused():
            return self._compile_kernel(consts)

    def _translate(self, src: FuncSource, consts: dict[str, Any], params: list[tuple[str, Any]]
                   ) -> tuple[Frontend, list[Any]]:
        """The Frontend that translated the kernel, and its (optimized) IR. A name of an
        ``aw.static_range`` body translated as a compile-time int that turns out to need a
        variable (:class:`~anywave.compiler.frontend.DemoteName`) is a variable in a new
        translation (at most one more per such name); an error of that translation on a line
        that reads the name says why it is a variable."""
        demoted: list[DemoteName] = []
        while True:
            fe = Frontend(src, dict(consts), self.name, frozenset(d.key for d in demoted))
            with _deep_recursion():
                try:
                    body = fe.build(params)
                    if self.optimize:
                        passes.optimize(body)
                except DemoteName as d:
                    if any(d.key == e.key for e in demoted):  # cannot happen: the name is no longer one
                        raise RuntimeError(f"internal error: {d.name!r} demoted twice") from None
                    demoted.append(d)
                    continue
                except CompileError as e:
                    _note_demoted(e, demoted)
                    raise
                except RecursionError:
                    node = getattr(fe, "node", None)
                    raise fe.b.err(node, "expression nested too deeply to compile (more than "
                                   f"{_RECURSION_LIMIT // 8} levels, e.g. a very long chain of + or nested calls): "
                                   "split it into several statements with intermediate variables") from None
            return fe, body

    def _compile_kernel(self, consts: Mapping[str, Any] | None) -> Kernel:
        consts = dict(consts or {})
        src = self._kernel_source()
        params = [(p.name, p.ann) for p in self.params_for(consts) if p.kind != "const"]
        fe, body = self._translate(src, consts, params)
        threads = None if self.workgroup is None else self.workgroup[0] * self.workgroup[1] * self.workgroup[2]
        alloc, info = spill.allocate(body, self.name, local_memory=fe.b.local_memory, threads=threads,
                                     max_workgroup_size=self.max_workgroup_size)
        self._resources[tuple(sorted((k, repr(v)) for k, v in consts.items()))] = info
        code, caps = codegen.emit(body, alloc)
        args = []
        for name, ann in fe.b.args:
            if isinstance(ann, ty.BufferType):
                args.append(Arg(name, ArgKind.BUFFER, ann.elem.scalar, ann.access, ann.constant))
            else:
                args.append(Arg(name, ArgKind.SCALAR, ann.scalar))
        # the W-dependence flag (docs/spec.md §14.3): no W-observing intrinsic outside the
        # W-invariant library collectives (compiler/wdep.py)
        flags = 0 if fe.w_uses else KERNEL_FLAG_W_INVARIANT
        return Kernel(self.name, args=args, registers=alloc.registers, local_memory=info.local_memory,
                      workgroup_size=self.workgroup, max_workgroup_size=info.max_workgroup_size,
                      capabilities=caps, code=code, flags=flags, prints=list(fe.b.prints))

    def resources(self, **constants: Any) -> dict[str, Any]:
        """Registers and spills of the kernel for ``constants`` (compiler/spill.py): a dict with
        ``registers`` (count), ``spilled`` (values kept in local memory), ``bytes_per_thread``
        (the spill area), ``spill_offset``, ``local_memory`` (bytes, spill areas included) and
        ``max_workgroup_size`` (threads, or None). Runs the pipeline when the module came from
        the disk cache (the report is not stored in ``.wbin``). Raises CompileError as
        :meth:`compile`."""
        consts = self._consts_from(constants)
        key = tuple(sorted((k, repr(v)) for k, v in consts.items()))
        info = self._resources.get(key)
        if info is None:
            self.compile_kernel(consts)
            info = self._resources[key]
        return info.as_dict()

    def cache_key(self, consts: Mapping[str, Any]) -> str:
        """The disk-cache key (SHA-256 hex) for compile-time constants ``consts``.

        Raises:
            Unkeyable: the kernel reads a value with no stable description.
        """
        return self._digest(dict(consts), fingerprint(self.fn))

    def _digest(self, consts: Mapping[str, Any], fp: Fingerprint) -> str:
        h = hashlib.sha256()
        h.update(f"anywave-compiler {compiler_hash()}\n".encode())
        h.update(fp.text.encode())
        try:  # the debug table records the file: the same text in another file is another entry
            h.update((inspect.getsourcefile(self.fn) or "").encode())
        except TypeError:
            pass
        h.update(repr(sorted((k, repr(v)) for k, v in consts.items())).encode())
        h.update(repr((self.name, self.workgroup, self.max_workgroup_size, self.optimize)).encode())
        return h.hexdigest()

    def signature(self) -> str:
        return ", ".join(f"{p.name}: {p.ann!r}" if p.kind != "const" else f"{p.name} (constant)" for p in self.params)

    def __repr__(self) -> str:
        return f"<aw.kernel {self.name}({self.signature()})>"


#: Python recursion limit while a kernel is compiled: the frontend visits expressions recursively
#: (a 500-term sum is ~3000 frames), Python 3.11+ runs such Python-to-Python calls without
#: growing the C stack, so a limit this size is safe; beyond it a RecursionError becomes a
#: CompileError at the kernel's line (issue 31, item 12)
_RECURSION_LIMIT = 20000


_DEEP_LOCK = threading.Lock()
_deep_users = [0, 0]  # compiles inside _deep_recursion, the limit before the first of them


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
    """Raise the (process-wide) recursion limit to at least :data:`_RECURSION_LIMIT` while any
    thread compiles; the last compile to finish restores the previous limit."""
    with _DEEP_LOCK:
        if _deep_users[0] == 0:
            _deep_users[1] = sys.getrecursionlimit()
            if _deep_users[1] < _RECURSION_LIMIT:
                sys.setrecursionlimit(_RECURSION_LIMIT)
        _deep_users[0] += 1
    try:
        yield
    finally:
        with _DEEP_LOCK:
            _deep_users[0] -= 1
            if _deep_users[0] == 0 and _deep_users[1] < _RECURSION_LIMIT:
                sys.setrecursionlimit(_deep_users[1])


def _verify_output(m: Module, name: str) -> None:
    """Verify the compiler's output once: recorded by ``verify_cached``, so the launch paths
    (emulator, PTX, C family), which verify every module they are given through it, do not
    verify it again."""
    try:
        verify_cached(m)
    except VerifyError as e:
        raise VerifyError([f"internal compiler error in kernel {name!r} (please report): {p}"
                           for p in e.problems]) from None


# ----------------------------------------------------------------------------- disk cache

class _DiskCache:
    """Content-addressed ``.wbin`` files under ``<anywave cache>/compiled``
    (:mod:`anywave.cache`: directories 0700, entries refused when another user's or
    writable by others, each checked against its recorded SHA-256 before it is read);
    ``ANYWAVE_NO_DISK_CACHE=1`` turns it off. Writes are atomic; damaged entries are ignored
    and rewritten; a read-only cache falls back to a private temporary directory.
    Raises CacheSecurityError (a WaveError) for an untrustworthy directory or entry."""

    def directory(self) -> Path | None:
        if os.environ.get("ANYWAVE_NO_DISK_CACHE"):
            return None
        from anywave.cache import safe_subdir

        try:
            return safe_subdir("compiled")
        except OSError:
            return None  # cannot be created (a full disk): compile without the cache

    def load(self, digest: str, accept: Callable[[Module], bool] | None = None) -> Module | None:
        """The cached module for ``digest``, or None: missing, unreadable, corrupt (it fails
        the reader's verification) or rejected by ``accept`` (another kernel's name or ABI)
        are all misses, and the caller recompiles and rewrites the entry."""
        d = self.directory()
        if d is None:
            return None
        from anywave.cache import verified_read

        data = verified_read(d / f"{digest}.wbin")
        if data is None:
            return None
        try:
            from anywave.binary.wbin import read_wbin

            m = read_wbin(data)
            return m if accept is None or accept(m) else None
        except Exception:  # noqa: BLE001 - any damage to a cache entry only costs recompilation
            return None

    def store(self, digest: str, module: Module) -> None:
        """Write ``module`` (which the caller has just verified: it is not verified again)."""
        d = self.directory()
        if d is None:
            return
        try:
            from anywave.binary.wbin import write_wbin
            from anywave.cache import atomic_write

            atomic_write(d / f"{digest}.wbin", write_wbin(module, verify=False), record_hash=True)
        except OSError:
            pass  # a read-only or full cache directory only costs recompilation


_DISK = _DiskCache()
_ = LIMITS


def _note_demoted(e: CompileError, demoted: list[DemoteName]) -> None:
    """Append to ``e`` why each ``aw.static_range`` name its line (or message) mentions is a
    variable rather than a compile-time int (Frontend translated the kernel again for it)."""
    notes = [d for d in demoted
             if re.search(rf"\b{re.escape(d.name)}\b", (e.source_line or "") + " " + e.message)]
    if not notes:
        return
    e.message += "".join(f" (note: {d.name!r} is a variable of the type of its first value, not a compile-time "
                         f"int, because {d.reason}; a name assigned only inside aw.static_range loops is a "
                         "compile-time int where every path leaves it the same int)" for d in notes)
    e.args = (str(e),)
