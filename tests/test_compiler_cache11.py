"""Issue 11, items 11 and 20: the compiled-kernel caches never serve a stale kernel, and a
cache entry that does not match is a miss (recompiled), never an exception.

Each scenario runs with the default settings (memory and disk cache on, one process); the
expected outputs are the Python values the kernels are written to compute.
"""

import dataclasses
import importlib
import types
from pathlib import Path

import numpy as np
import pytest

import anywave as aw
from anywave.binary.module import Module
from anywave.binary.wbin import write_wbin
from anywave.compiler import fingerprint as fpmod

kmod = importlib.import_module("anywave.compiler.kernel")  # the package's 'kernel' is the decorator


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANYWAVE_NO_DISK_CACHE", raising=False)


def _run1(k, *extra) -> float:
    y = np.zeros(1, np.float32)
    k(y, *extra, grid=1, workgroup=1, target="emulator")
    return float(y[0])


def make_scale(s):
    @aw.kernel
    def scale(y: aw.Out[aw.f32]):
        y[0] = 1.0 * s

    return scale


def test_closure_values_are_keyed() -> None:
    assert [_run1(make_scale(v)) for v in (2.0, 3.0, 10.0)] == [2.0, 3.0, 10.0]
    # and again, now that all three are on disk
    assert [_run1(make_scale(v)) for v in (10.0, 2.0, 3.0)] == [10.0, 2.0, 3.0]


SCALE = np.float32(2.0)


@aw.kernel
def _scaled(y: aw.Out[aw.f32]):
    y[0] = SCALE * 1.0


def test_numpy_scalar_global_changed_between_calls(monkeypatch) -> None:
    assert _run1(_scaled) == 2.0
    monkeypatch.setitem(globals(), "SCALE", np.float32(5.0))
    assert _run1(_scaled) == 5.0  # the same KernelFunction: the memory cache re-checks
    monkeypatch.setitem(globals(), "SCALE", np.float32(2.0))
    assert _run1(_scaled) == 2.0


cfg = types.SimpleNamespace(OFFSET=1)


@aw.kernel
def _offset(y: aw.Out[aw.f32]):
    y[0] = aw.f32(cfg.OFFSET)


def test_attribute_constant_changed_between_calls(monkeypatch) -> None:
    assert _run1(_offset) == 1.0
    monkeypatch.setattr(cfg, "OFFSET", 7)
    assert _run1(_offset) == 7.0


def make_via_func(k):
    @aw.func
    def helper(x):
        return x * k

    @aw.kernel
    def via(y: aw.Out[aw.f32]):
        y[0] = helper(1.0)

    return via


def test_func_reached_through_a_closure_is_keyed() -> None:
    assert [_run1(make_via_func(v)) for v in (2.0, 4.0, 2.0)] == [2.0, 4.0, 2.0]


def make_with_default(d):
    @aw.func
    def add(x, k=d):
        return x + k

    @aw.kernel
    def with_default(y: aw.Out[aw.f32]):
        y[0] = add(1.0)

    return with_default


def test_func_defaults_are_keyed() -> None:
    assert [_run1(make_with_default(v)) for v in (1.0, 5.0)] == [2.0, 6.0]


def make_typed(dt):
    @aw.kernel
    def typed(y: aw.Out[aw.f32]):
        y[0] = aw.f32(aw.bitcast(dt(1), aw.u32) // 2**24)  # f32: 0x3f800000 >> 24 = 63

    return typed


def test_dtype_in_a_closure_is_keyed() -> None:
    assert [_run1(make_typed(t)) for t in (aw.f32, aw.i32, aw.f32)] == [63.0, 0.0, 63.0]


def test_compiler_source_hash_is_in_the_key(monkeypatch, tmp_path) -> None:
    k = make_scale(2.0)
    key1 = k.cache_key({})
    monkeypatch.setattr(fpmod, "_COMPILER_HASH", "0" * 64)
    key2 = k.cache_key({})
    assert key1 != key2
    # the hash follows the compiler's source files: one changed byte changes it
    root = tmp_path / "pkg"
    for pkg in fpmod.COMPILER_PACKAGES:
        (root / pkg).mkdir(parents=True)
        (root / pkg / "a.py").write_text("x = 1\n")
    h1 = fpmod.hash_sources(root)
    (root / "compiler" / "a.py").write_text("x = 2\n")
    assert fpmod.hash_sources(root) != h1


class _Opaque:
    scale = 3.0


OPAQUE = _Opaque()


@aw.kernel
def _reads_object(y: aw.Out[aw.f32]):
    o = OPAQUE
    y[0] = o.scale


def test_unkeyable_values_are_not_cached() -> None:
    with pytest.warns(kmod.CacheWarning, match="OPAQUE"):
        assert _run1(_reads_object) == 3.0
    _Opaque.scale = 4.0
    try:
        assert _run1(_reads_object) == 4.0
    finally:
        _Opaque.scale = 3.0


# ----------------------------------------------------------------------------- item 20

@aw.kernel
def _copy(x: aw.In[aw.f32], y: aw.Out[aw.f32]):
    y[0] = x[0] + 1.0


@aw.kernel
def _other(a: aw.In[aw.i32], b: aw.Out[aw.i32], c: aw.In[aw.i32]):
    b[0] = a[0] + c[0]


def _entry(k) -> Path:
    return kmod._DISK.directory() / f"{k.cache_key({})}.wbin"


@pytest.mark.parametrize("planted", ["other_name", "other_abi", "garbage", "truncated", "two_kernels"])
def test_mismatching_disk_entry_is_a_miss(planted: str) -> None:
    k = aw.kernel(_copy.fn)  # a fresh KernelFunction: empty memory cache, same disk key
    p = _entry(k)
    p.parent.mkdir(parents=True, exist_ok=True)
    other = _other.compile()
    good = write_wbin(make_scale(1.0).compile())
    if planted == "other_name":
        data = good  # one kernel named 'scale' (ABI y only)
    elif planted == "other_abi":
        m = Module(kernels=[dataclasses.replace(other.kernels[0], name="_copy")])
        data = write_wbin(m)
    elif planted == "garbage":
        data = b"WBIN\x00\x01garbage" * 3
    elif planted == "truncated":
        data = good[: len(good) // 2]
    else:
        data = write_wbin(Module(kernels=[_copy.compile_kernel(), other.kernels[0]]))
    p.write_bytes(data)
    x = np.array([41.0], np.float32)
    y = np.zeros(1, np.float32)
    k(x, y, grid=1, workgroup=1, target="emulator")
    assert float(y[0]) == 42.0
    assert p.read_bytes() != data  # rewritten with the right kernel


def test_library_kernel_helpers_are_keyed_by_source(tmp_path) -> None:
    """A kernel-library (``anywave.kernels``) ``@aw.func`` is keyed by its source: the compiler
    hash covers only the compiler's packages, so naming such a helper (as for the standard
    library) served a stale kernel after the helper changed (seen with
    ``gemm_group._slice``). A module of that package written twice, with one literal changed,
    must give two keys and two results."""
    import sys

    keys, outs = [], []
    for v in (1.0, 2.0):
        path = tmp_path / f"helper_{int(v)}.py"
        path.write_text("import anywave as aw\n\n\n@aw.func\ndef helper(x):\n"
                        f"    return x + {v}\n")
        spec = importlib.util.spec_from_file_location("anywave.kernels._fp_probe", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["anywave.kernels._fp_probe"] = mod
        try:
            spec.loader.exec_module(mod)

            @aw.kernel
            def k(o: aw.Out[aw.f32]):
                o[0] = mod.helper(1.0)  # noqa: B023 - compiled and run inside this iteration

            keys.append(k.cache_key({}))
            out = np.zeros(1, np.float32)
            k(out, grid=1, workgroup=1)
            outs.append(float(out[0]))
        finally:
            sys.modules.pop("anywave.kernels._fp_probe", None)
    assert keys[0] != keys[1]
    assert outs == [2.0, 3.0]
    # and the library's own helpers are walked by source (not named): gemm_group's copy function
    text = fpmod.fingerprint(importlib.import_module("anywave.kernels.gemm_group").gemm_group_kernel.fn).text
    assert "def anywave.kernels.gemm_group._slice#" in text and "func:anywave.kernels.gemm_group._slice" not in text
