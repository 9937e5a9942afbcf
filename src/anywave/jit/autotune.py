"""``@aw.autotune``: pick the fastest of several compile-time configurations of a kernel on the
target it runs on, and remember the choice.

    @aw.autotune(configs=[{"bm": 128, "bn": 128, "bk": 8}, {"bm": 128, "bn": 128, "bk": 16}],
                 key=["m", "n", "k"],
                 grid=lambda cfg, a: (a["n"] // cfg["bn"], a["m"] // cfg["bm"]),
                 workgroup=lambda cfg, a: cfg["bm"] * cfg["bn"] // 64)
    @aw.kernel
    def gemm(a: aw.In[aw.f32], ..., m: aw.i32, n: aw.i32, k: aw.i32, *, bm: int = 128, ...): ...

    gemm(a, b, bias, c, m, n, k, target="cuda")     # tunes once per (device, kernel, key), then runs

* **Timing.** Each config is launched ``warmup`` times, then timed ``reps`` times on the actual
  target (wall clock around each launch, which the targets run synchronously; ``timer=`` takes
  a function ``timer(run) -> seconds`` for device-event timing); the median decides. A
  progress bar (rich) shows the configs while they are timed when ``progress`` is true.
* **Cache.** The choice is stored in ``<cache dir>/autotune.json`` (``$ANYWAVE_CACHE_DIR`` or
  the platformdirs user cache, as the compiled-kernel cache), keyed by the device (target name,
  device name, W), the kernel's hash (source fingerprint and compiler version: the kernel's
  :meth:`~anywave.compiler.kernel.KernelDef.cache_key` without constants) and the values
  of the ``key`` arguments (arrays by shape and dtype). Writes are atomic. :func:`export_cache`
  and :func:`import_cache` move choices between machines, so a package can ship its own.
* **Same bits.** The configs of one kernel must differ in speed only: the arithmetic order
  belongs to the kernel, not to its tile shape. :meth:`Autotuner.check_same_bits` runs every
  config on the same inputs and raises :class:`AutotuneError` naming the first config whose
  outputs differ.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anywave.errors import WaveError

CACHE_FILE = "autotune.json"
_FORMAT = 1


class AutotuneError(WaveError, ValueError):
    """Bad autotune configuration, or configs of one kernel that give different bits."""


def cache_path() -> Path | None:
    """The JSON file holding the remembered choices (None when the disk cache is off)."""
    if os.environ.get("ANYWAVE_NO_DISK_CACHE"):
        return None
    d = os.environ.get("ANYWAVE_CACHE_DIR")
    if d:
        return Path(d) / CACHE_FILE
    try:
        import platformdirs
    except ImportError:
        return None
    return Path(platformdirs.user_cache_dir("anywave")) / CACHE_FILE


def _read(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("choices"), dict):
        return {}
    return data["choices"]


def _write(path: Path | None, choices: Mapping[str, Any]) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"format": _FORMAT, "choices": dict(choices)}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs tuning again


def export_cache(path: str | os.PathLike[str]) -> int:
    """Write every remembered choice to ``path`` (JSON); returns how many."""
    choices = _read(cache_path())
    Path(path).write_text(json.dumps({"format": _FORMAT, "choices": choices}, indent=1, sort_keys=True) + "\n")
    return len(choices)


def import_cache(path: str | os.PathLike[str], *, overwrite: bool = False) -> int:
    """Merge the choices of an exported file into the cache (existing entries win unless
    ``overwrite``); returns how many were added or replaced.

    Raises:
        AutotuneError: the file is not an exported autotune cache."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise AutotuneError(f"cannot read autotune cache {str(path)!r}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("choices"), dict):
        raise AutotuneError(f"{str(path)!r} is not an anywave autotune cache (format {_FORMAT})")
    cp = cache_path()
    choices = _read(cp)
    n = 0
    for k, v in data["choices"].items():
        if overwrite or k not in choices:
            choices[k] = v
            n += 1
    _write(cp, choices)
    return n


def _key_value(v: Any) -> Any:
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return ["array", list(v.shape), str(v.dtype)]
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    return repr(v)


def _device_id(target: str | None, wave_width: int | None) -> str:
    return _device_of(target or os.environ.get("ANYWAVE_TARGET"), wave_width)


@functools.cache
def _device_of(target: str | None, wave_width: int | None) -> str:
    from anywave.runtime import targets as rt

    from .targets import get_target

    name = get_target(target).name
    devices = sorted({i.device for st in rt.available_targets() if st.name == name for i in st.infos})
    return f"{name}|{','.join(devices)}|W={wave_width}"


class Autotuner:
    """A kernel with a list of compile-time configs; calling it launches the best one.

    Args:
        kernel: an ``@aw.kernel`` function.
        configs: dicts of the kernel's compile-time parameters (each a full set of the
            parameters it varies; at least one).
        key: names of run-time arguments whose values select the tuning entry (sizes).
        grid, workgroup: launch geometry, constants or ``f(config, args) -> value`` where
            ``args`` maps parameter names to the call's arguments.
        warmup, reps: launches before timing, timed launches per config.
        timer: ``timer(run) -> seconds`` for one timed launch (default: wall clock).
        launch: ``launch(config, args)`` runs one config instead of calling the kernel (e.g. a
            runtime's own launch with device tensors and a stream); ``args`` as for ``grid``.
        progress: show progress while timing (rich on a terminal, else plain lines on stderr);
            None: :func:`anywave.progress.enabled` (``ANYWAVE_PROGRESS=1``/``0``, else stderr
            is a terminal).

    Raises:
        AutotuneError: no configs, a config naming a parameter the kernel lacks or one that is
            not a compile-time constant, or a key that is not a parameter.
    """

    def __init__(self, kernel: Any, configs: Sequence[Mapping[str, Any]], key: Sequence[str] = (), *,
                 grid: Any = None, workgroup: Any = None, warmup: int = 1, reps: int = 5,
                 timer: Callable[[Callable[[], Any]], float] | None = None,
                 launch: Callable[[Mapping[str, Any], Mapping[str, Any]], Any] | None = None,
                 progress: bool | None = None) -> None:
        self.kernel = kernel
        self.configs = [dict(c) for c in configs]
        self.key = list(key)
        self.grid, self.workgroup = grid, workgroup
        self.warmup, self.reps = warmup, max(1, reps)
        self.timer = timer
        self.launch = launch
        self.progress = progress
        self.name = getattr(kernel, "name", repr(kernel))
        if not self.configs:
            raise AutotuneError(f"autotune of {self.name!r}: configs is empty; give at least one dict")
        params = {p.name: p for p in kernel.params}
        for c in self.configs:
            for k in c:
                if k not in params:
                    raise AutotuneError(f"autotune of {self.name!r}: config {c} names {k!r}, which is not a "
                                        f"parameter; parameters: {list(params)}")
                if params[k].kind != "const":
                    raise AutotuneError(f"autotune of {self.name!r}: config parameter {k!r} is a run-time "
                                        "argument; configs may only set compile-time constants")
        for k in self.key:
            if k not in params:
                raise AutotuneError(f"autotune of {self.name!r}: key {k!r} is not a parameter; parameters: "
                                    f"{list(params)}")

    # ---------------------------------------------------------------- choosing
    def entry_key(self, bound: Mapping[str, Any], target: str | None, wave_width: int | None) -> str:
        """The cache key of a call: device, kernel hash, key argument values."""
        kernel_hash = self.kernel.cache_key({})
        keyvals = [[k, _key_value(bound.get(k))] for k in self.key]
        raw = json.dumps([_device_id(target, wave_width), kernel_hash, keyvals])
        return hashlib.sha256(raw.encode()).hexdigest()

    def _bound(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return self.kernel._bind(args, kwargs)

    def _geometry(self, what: Any, cfg: Mapping[str, Any], bound: Mapping[str, Any], name: str) -> Any:
        if what is None:
            raise AutotuneError(f"autotune of {self.name!r}: give {name}= (a value or f(config, args))")
        return what(cfg, bound) if callable(what) else what

    def _run(self, cfg: Mapping[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any], bound: Mapping[str, Any],
             target: str | None, wave_width: int | None) -> Any:
        if self.launch is not None:
            return self.launch(cfg, {**bound, **cfg})
        kw = {k: v for k, v in kwargs.items() if k not in cfg}
        return self.kernel(*args, **kw, **cfg, grid=self._geometry(self.grid, cfg, bound, "grid"),
                           workgroup=self._geometry(self.workgroup, cfg, bound, "workgroup"), target=target,
                           wave_width=wave_width)

    def best_config(self, *args: Any, target: str | None = None, wave_width: int | None = None,
                    **kwargs: Any) -> dict[str, Any]:
        """The remembered best config for this call, timing every config first if there is none.
        Buffers are written by the timing launches."""
        bound = self._bound(args, kwargs)
        ek = self.entry_key(bound, target, wave_width)
        cp = cache_path()
        choices = _read(cp)
        hit = choices.get(ek)
        if hit is not None and hit.get("config") in self.configs:
            return dict(hit["config"])
        times = self.time_configs(*args, target=target, wave_width=wave_width, **kwargs)
        best = min(range(len(self.configs)), key=lambda i: times[i])
        choices = _read(cp)
        choices[ek] = {"kernel": self.name, "config": self.configs[best], "median_s": times,
                       "device": _device_id(target, wave_width), "key": {k: _key_value(bound.get(k)) for k in self.key},
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _write(cp, choices)
        return dict(self.configs[best])

    def time_configs(self, *args: Any, target: str | None = None, wave_width: int | None = None,
                     **kwargs: Any) -> list[float]:
        """Median seconds of each config on the target (index order of ``configs``)."""
        bound = self._bound(args, kwargs)
        out: list[float] = []
        for cfg in self._progress(self.configs):
            def run(cfg: Mapping[str, Any] = cfg) -> Any:
                return self._run(cfg, args, kwargs, bound, target, wave_width)

            for _ in range(self.warmup):
                run()
            samples = []
            for _ in range(self.reps):
                if self.timer is not None:
                    samples.append(float(self.timer(run)))
                else:
                    t0 = time.perf_counter()
                    run()
                    samples.append(time.perf_counter() - t0)
            out.append(statistics.median(samples))
        return out

    def _progress(self, configs: list[dict[str, Any]]) -> Any:
        from anywave.progress import track

        return track(configs, f"autotuning {self.name}", show=self.progress)

    def __call__(self, *args: Any, target: str | None = None, wave_width: int | None = None, **kwargs: Any) -> Any:
        """Launch with the best config for these arguments (tuning first when none is known)."""
        cfg = self.best_config(*args, target=target, wave_width=wave_width, **kwargs)
        return self._run(cfg, args, kwargs, self._bound(args, kwargs), target, wave_width)

    # ---------------------------------------------------------------- same bits
    def check_same_bits(self, *args: Any, target: str | None = None, wave_width: int | None = None,
                        **kwargs: Any) -> None:
        """Run every config on copies of the same arguments and compare every buffer bit for bit.

        Raises:
            AutotuneError: a config's outputs differ from the first config's (naming both)."""
        first: list[np.ndarray] | None = None
        for cfg in self.configs:
            a = [copy.deepcopy(x) if isinstance(x, np.ndarray) else x for x in args]
            kw = {k: (copy.deepcopy(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
            bound = self._bound(a, kw)
            self._run(cfg, a, kw, bound, target, wave_width)
            outs = [np.ascontiguousarray(x).view(np.uint8) for x in [*a, *kw.values()] if isinstance(x, np.ndarray)]
            if first is None:
                first = outs
                continue
            for i, (p, q) in enumerate(zip(first, outs, strict=True)):
                if not np.array_equal(p, q):
                    raise AutotuneError(f"autotune of {self.name!r}: config {cfg} gives different bits than "
                                        f"{self.configs[0]} in buffer argument #{i}; configs must change speed only")


def autotune(configs: Sequence[Mapping[str, Any]], key: Sequence[str] = (),
             **options: Any) -> Callable[[Any], Autotuner]:
    """Decorator: ``@aw.autotune(configs=[...], key=[...], grid=..., workgroup=...)`` above
    ``@aw.kernel``. See :class:`Autotuner` for the options and the module docstring for the
    timing, the cache and the same-bits rule."""
    def wrap(kernel: Any) -> Autotuner:
        return Autotuner(kernel, configs, key, **options)

    return wrap
