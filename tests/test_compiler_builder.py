"""The builder intrinsic lowerings receive (issue 30): :class:`anywave.compiler.builder.Builder`
is exactly what the lowerings use -- every ``bld.<name>`` in a lowering module is declared there,
and every declared member is used by some lowering (the protocol stays narrow) -- and the
frontend's :class:`~anywave.compiler.frontend_ops.IRBuilder` implements each member with the
protocol's parameters. Read from the source (AST) and from the classes, not by running kernels."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import anywave as aw
from anywave.compiler import builder, language
from anywave.compiler.bindings import Intrinsic
from anywave.compiler.frontend_ops import IRBuilder

COMPILER = Path(builder.__file__).parent
#: the modules whose functions are registered as intrinsic lowerings in compiler/language.py
LOWERING_MODULES = ("lower_math", "lower_threads", "lower_wave", "mma_lang", "frontend_perf", "debugprint", "numlimits")


def _members(cls: type) -> set[str]:
    names = set(getattr(cls, "__annotations__", {}))
    names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return names


def _used(module: str) -> dict[str, int]:
    """``name -> line`` of every ``bld.<name>`` in ``compiler/<module>.py``."""
    tree = ast.parse((COMPILER / f"{module}.py").read_text())
    out: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "bld":
            out.setdefault(n.attr, n.lineno)
    return out


def test_every_lowering_is_registered_from_a_listed_module():
    mods = {getattr(v.lower, "func", v.lower).__module__ for v in vars(language).values()
            if isinstance(v, Intrinsic) and v.lower is not None}
    assert mods == {f"anywave.compiler.{m}" for m in LOWERING_MODULES}


def test_lowerings_use_only_the_builder_protocol_and_all_of_it():
    declared = _members(builder.Builder)
    used: dict[str, str] = {}
    for m in LOWERING_MODULES:
        for name, line in _used(m).items():
            used.setdefault(name, f"compiler/{m}.py:{line}")
    outside = {n: where for n, where in used.items() if n not in declared}
    assert not outside, f"lowerings use builder members the protocol does not declare: {outside}"
    unused = declared - used.keys()
    assert not unused, f"protocol members no lowering uses (remove them, keep it narrow): {sorted(unused)}"


def test_the_ir_builder_implements_the_protocol():
    b = IRBuilder.__init__
    src = inspect.getsource(b)
    for name in sorted(_members(builder.Builder)):
        proto = getattr(builder.Builder, name, None)
        if proto is None or not callable(proto):  # a data member: set in IRBuilder.__init__
            assert f"self.{name}" in src, f"IRBuilder has no attribute {name!r}"
            continue
        impl = getattr(IRBuilder, name, None)
        assert callable(impl), f"IRBuilder lacks {name}()"
        want = list(inspect.signature(proto).parameters)
        got = list(inspect.signature(impl).parameters)
        assert got == want, f"IRBuilder.{name}{got} differs from Builder.{name}{want}"


def test_a_lowering_receives_the_builder_not_the_visitor(monkeypatch):
    seen = []
    real = language.lane_id.lower

    def spy(bld, node, discard):
        seen.append(type(bld))
        return real(bld, node, discard)

    monkeypatch.setattr(language.lane_id, "lower", spy)
    monkeypatch.setenv("ANYWAVE_NO_DISK_CACHE", "1")  # compiled here, not read back

    def k(out: aw.Out[aw.i32]):
        out[aw.global_id()] = aw.lane_id()

    aw.kernel(k).compile()
    assert seen == [IRBuilder]


def test_a_translation_leaves_no_cycle_behind():
    # compilation pauses the cyclic collector (compiler/kernel.py _gc_paused): the visitor, its
    # builder and the IR must be freed by reference counting alone
    import gc
    import weakref

    from anywave.compiler.frontend import Frontend

    def k(x: aw.Buffer[aw.f32], n: aw.i32):
        i = aw.global_id()
        if i < n:
            x[i] = aw.wave_sum(x[i]) + 1.0

    kd = aw.kernel(k)
    params = [(p.name, p.ann) for p in kd.params if p.kind != "const"]
    was = gc.isenabled()
    gc.disable()
    try:
        fe = Frontend(kd._kernel_source(), kd._consts_from({}), kd.name)
        fe.build(params)
        refs = [weakref.ref(fe), weakref.ref(fe.b)]
        del fe
        assert [r() for r in refs] == [None, None]
    finally:
        if was:
            gc.enable()
