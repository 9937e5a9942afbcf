"""``@aw.autotune``: timing on the target, the on-disk choice keyed by device/kernel/key,
export/import, and the rule that every config gives the same bits."""

from __future__ import annotations

import json

import numpy as np
import pytest

import anywave as aw
from anywave.jit import autotune as A
from anywave.kernels import gemm as G
from anywave.kernels import reference as R


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "cache"))


def _tuned(**kw) -> A.Autotuner:
    return aw.autotune(configs=[{"bm": 64, "bn": 64, "bk": 8}, {"bm": 128, "bn": 64, "bk": 8}], key=["m", "n", "k"],
                       grid=lambda cfg, a: (a["n"] // cfg["bn"], a["m"] // cfg["bm"]),
                       workgroup=lambda cfg, a: (cfg["bm"] // 8) * (cfg["bn"] // 8), reps=1, warmup=0, **kw)(
        G.gemm_f32_kernel)


def _args(m=128, n=64, k=8, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return a, b, np.zeros(4, np.float32), np.zeros((m, n), np.float32), m, n, k


def test_tunes_once_then_remembers(monkeypatch) -> None:
    t = _tuned()
    args = _args()
    t(*args, wave_width=16)
    assert np.array_equal(args[3], R.matmul_f32(args[0], args[1]))
    data = json.loads(A.cache_path().read_text())
    (entry,) = data["choices"].values()
    assert entry["config"] in t.configs and len(entry["median_s"]) == 2
    assert entry["key"] == {"m": 128, "n": 64, "k": 8} and "W=16" in entry["device"]

    def boom(*a, **k):
        raise AssertionError("timed again")

    monkeypatch.setattr(t, "time_configs", boom)
    args2 = _args(seed=1)
    t(*args2, wave_width=16)  # same key: the remembered config, no timing
    assert np.array_equal(args2[3], R.matmul_f32(args2[0], args2[1]))
    with pytest.raises(AssertionError, match="timed again"):
        t(*_args(k=16), wave_width=16)  # a new key value is tuned
    with pytest.raises(AssertionError, match="timed again"):
        t(*args2, wave_width=32)  # another device (W) too


def test_custom_timer_decides(monkeypatch) -> None:
    calls = []

    def timer(run) -> float:
        run()
        calls.append(1)
        return 1.0 if len(calls) == 1 else 0.5  # the second config is "faster"

    t = _tuned(timer=timer)
    assert t.best_config(*_args(), wave_width=8) == t.configs[1]


def test_export_import_round_trip(tmp_path, monkeypatch) -> None:
    t = _tuned()
    t.best_config(*_args(), wave_width=8)
    out = tmp_path / "shipped.json"
    assert A.export_cache(out) == 1
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "fresh"))
    assert A.cache_path().exists() is False
    assert A.import_cache(out) == 1
    monkeypatch.setattr(t, "time_configs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("timed")))
    t.best_config(*_args(), wave_width=8)  # found in the imported cache
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(A.AutotuneError, match="not an anywave autotune cache"):
        A.import_cache(bad)


def test_gemm_configs_give_the_same_bits() -> None:
    # (every config of gemm.CONFIGS: tests/test_perf_kernels.py)
    _tuned().check_same_bits(*_args(128, 64, 16), wave_width=32)


@aw.kernel
def _order(x: aw.In[aw.f32], out: aw.Out[aw.f32], *, reverse: bool = False):
    s = 0.0
    if reverse:
        for i in range(7, -1, -1):
            s = s + x[i]
    else:
        for i in range(8):
            s = s + x[i]
    out[0] = s


def test_configs_that_change_the_order_are_refused() -> None:
    t = aw.autotune(configs=[{"reverse": False}, {"reverse": True}], grid=1, workgroup=1)(_order)
    x = np.array([1e8, 1, -1e8, 1, 3, 1e-3, 7, 2], np.float32)
    with pytest.raises(A.AutotuneError, match="different bits"):
        t.check_same_bits(x, np.zeros(1, np.float32))


def test_config_errors() -> None:
    with pytest.raises(A.AutotuneError, match="configs is empty"):
        aw.autotune(configs=[])(_order)
    with pytest.raises(A.AutotuneError, match="not a parameter"):
        aw.autotune(configs=[{"tile": 4}])(_order)
    with pytest.raises(A.AutotuneError, match="run-time argument"):
        aw.autotune(configs=[{"x": 4}])(_order)
    with pytest.raises(A.AutotuneError, match="key 'n'"):
        aw.autotune(configs=[{"reverse": True}], key=["n"])(_order)


def test_gemm_auto_config() -> None:
    a, b, bias, *_ = _args(128, 64, 8, seed=3)
    c = G.gemm(a, b, np.ones(64, np.float32), config="auto", wave_width=16)
    assert np.array_equal(c, R.matmul_f32(a, b, np.ones(64, np.float32)))
    (entry,) = json.loads(A.cache_path().read_text())["choices"].values()
    assert entry["config"] in [cfg for cfg in G.CONFIGS if G.fits(128, 64, 8, cfg)]
    assert entry["key"]["epilogue"] == "bias"


def test_launch_hook_replaces_the_kernel_call() -> None:
    seen = []
    t = aw.autotune(configs=[{"reverse": False}, {"reverse": True}], key=["x"], warmup=0, reps=2,
                    launch=lambda cfg, a: seen.append((cfg["reverse"], a["x"].shape)))(_order)
    t.best_config(np.zeros(8, np.float32), np.zeros(1, np.float32))
    assert seen == [(False, (8,))] * 2 + [(True, (8,))] * 2
