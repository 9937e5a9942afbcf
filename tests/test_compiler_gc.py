"""The compile pipeline runs with Python's cyclic garbage collector paused and gives it back as
it found it (compiler/kernel.py ``_gc_paused``): enabled after a compile and after a compile
error, still disabled when the user had disabled it."""

from __future__ import annotations

import gc

import pytest

import anywave as aw
from anywave.compiler import passes
from anywave.compiler.errors import CompileError


@aw.kernel
def _scale(x: aw.Buffer[aw.f32], s: aw.f32, n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        x[i] = x[i] * s


@aw.kernel
def _bad(x: aw.Buffer[aw.f32]):
    x[0] = undefined_name  # noqa: F821 - the compile error under test


def test_collector_paused_inside_and_restored_after(monkeypatch) -> None:
    seen = []
    real = passes.optimize
    monkeypatch.setattr(passes, "optimize", lambda body: (seen.append(gc.isenabled()), real(body))[1])
    assert gc.isenabled()
    _scale.compile_kernel({})
    assert seen == [False] and gc.isenabled()


def test_restored_after_a_compile_error() -> None:
    assert gc.isenabled()
    with pytest.raises(CompileError):
        _bad.compile_kernel({})
    assert gc.isenabled()


def test_a_user_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        _scale.compile_kernel({})
        assert not gc.isenabled()
    finally:
        gc.enable()
