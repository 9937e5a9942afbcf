"""The CUDA driver's native launcher: a small CPython extension (``aw_launch.c`` beside this file)
that does a CUDA launch plan's per-call work in C and calls ``cuLaunchKernel`` directly (issue 24
item 1; made by :func:`anywave.runtime.cuda_launch.native_launcher`).

The extension is compiled at first use -- the first CUDA launch plan of a process -- with the
system C compiler (``$CC``, else the compiler Python was built with, else ``cc``/``gcc``/
``clang``) against the running Python's headers (``sysconfig.get_paths()["include"]``); it
needs no CUDA header (the two driver entries it calls are declared in the source). The shared
library is cached in the anywave cache (``<cache>/launch/``, keyed by the source, the Python
version and ABI, the compiler and the machine), written atomically with its SHA-256 recorded
and checked before it is loaded (:mod:`anywave.cache`'s rules for native code).

When it cannot be built or loaded (no compiler, no ``Python.h``, a compile error, an untrusted
cache, ``ANYWAVE_NATIVE_LAUNCH=0``), launch plans use the generated Python launcher instead
(:func:`anywave.runtime.cuda_launch.python_launcher`), with the same checks and the same words;
the reason is :func:`status`'s second element, and each CUDA plan says which path it took in its
``path`` attribute (``"native"`` or ``"python: <reason>"``);
``anywave.runtime.cuda_native.explain()`` prints both.

    >>> from anywave.runtime import cuda_native
    >>> cuda_native.status()  # doctest: +SKIP
    (True, 'built /home/me/.cache/anywave/launch/_aw_launch-....so')
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["SOURCE", "explain", "load", "make_launcher", "status"]

#: the C source of the extension
SOURCE = Path(__file__).with_name("aw_launch.c")

_LOCK = threading.Lock()
_STATE: tuple[Any, str] | None = None  # (module or None, reason)


def _compiler() -> str | None:
    cands = [os.environ.get("CC"), (sysconfig.get_config_var("CC") or "").split(" ")[0] or None, "cc", "gcc", "clang"]
    for c in cands:
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def _flags() -> list[str]:
    f = ["-O2", "-shared", "-fPIC", "-fno-strict-aliasing", "-std=c11"]
    if sys.platform == "darwin":
        f += ["-undefined", "dynamic_lookup"]
    return f


def _key(cc: str, inc: str) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    for part in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", inc, cc, platform.machine(),
                 " ".join(_flags())):
        h.update(b"\0" + str(part).encode())
    return h.hexdigest()[:16]


def _build() -> tuple[Any, str]:
    if os.environ.get("ANYWAVE_NATIVE_LAUNCH", "").strip() == "0":
        return None, "disabled by ANYWAVE_NATIVE_LAUNCH=0"
    if sys.platform == "win32":
        return None, "the native launcher is built on Linux and macOS only"
    if sys.implementation.name != "cpython":
        return None, f"the native launcher needs CPython, not {sys.implementation.name}"
    inc = sysconfig.get_paths().get("include") or ""
    if not (Path(inc) / "Python.h").is_file():
        return None, f"no Python.h in {inc!r} (install the Python development headers, e.g. python3-dev)"
    cc = _compiler()
    if cc is None:
        return None, "no C compiler found (set CC, or install gcc or clang)"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    from anywave.cache import CacheSecurityError, atomic_write, check_file, safe_subdir, verified_read

    try:
        d = safe_subdir("launch")
    except (CacheSecurityError, OSError) as e:
        return None, f"the anywave cache cannot hold the native launcher: {e}"
    out = d / f"_aw_launch-{_key(cc, inc)}{suffix}"
    try:
        have = verified_read(out)
    except CacheSecurityError as e:
        return None, f"the cached native launcher is not loaded: {e}"
    how = "cached"
    if have is None:
        fd, tmp_name = tempfile.mkstemp(dir=d, prefix=f".{out.name}.build-", suffix=suffix)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            cmd = [cc, *_flags(), f"-I{inc}", str(SOURCE), "-o", str(tmp)]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as e:
                return None, f"running the C compiler failed ({' '.join(cmd)}): {e}"
            if r.returncode != 0:
                return None, f"compiling the native launcher failed ({' '.join(cmd)}): {r.stderr[-1500:]}"
            try:
                atomic_write(out, tmp.read_bytes(), record_hash=True)
            except OSError as e:
                return None, f"cannot write the native launcher into {str(d)!r}: {e}"
        finally:
            tmp.unlink(missing_ok=True)
        how = "built"
    try:
        check_file(out)
        loader = importlib.machinery.ExtensionFileLoader("anywave.runtime._aw_launch", str(out))
        spec = importlib.util.spec_from_file_location("anywave.runtime._aw_launch", str(out), loader=loader)
        if spec is None:
            return None, f"cannot load {out}"
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    except (CacheSecurityError, ImportError, OSError) as e:
        return None, f"loading the native launcher {out} failed: {e}"
    if getattr(mod, "ABI_VERSION", None) != 1:
        return None, f"the native launcher {out} is of another version"
    return mod, f"{how} {out}"


def load() -> Any:
    """The extension module (``Launcher`` type), or None (see :func:`status` for why)."""
    return status_entry()[0]


def status_entry() -> tuple[Any, str]:
    global _STATE
    st = _STATE
    if st is None:
        with _LOCK:
            st = _STATE
            if st is None:
                try:
                    st = _build()
                except Exception as e:  # noqa: BLE001 - never a failed launch for want of the fast path
                    st = (None, f"building the native launcher failed: {type(e).__name__}: {e}")
                _STATE = st
    return st


def status() -> tuple[bool, str]:
    """(available, how or why not): whether CUDA launch plans use the native launcher."""
    mod, why = status_entry()
    return mod is not None, why


def explain() -> str:
    """One line: which launcher CUDA launch plans use, and why."""
    ok, why = status()
    return f"native launcher: {why}" if ok else f"Python launcher (no native launcher: {why})"


def reset() -> None:
    """Forget the loaded state (tests: rebuild after changing the environment)."""
    global _STATE
    with _LOCK:
        _STATE = None


def make_launcher(desc: dict[str, Any]) -> Any:
    """A native ``Launcher`` from ``desc``, or None when the extension is unavailable.

    ``desc`` keys: ``nargs`` (positional arguments of a call), ``slots`` (one tuple per ABI
    argument: ``(kind, index, written, type, a, b, c, device, lo, hi, mask, width, signed,
    view)``, kinds 0 anywave array (``a`` its space, ``b`` its dtype), 1 torch tensor (``a``
    dtype, ``device``), 2 any other buffer (``a`` the plan's quick check returning ``(base,
    address, nbytes, value)`` or None), 3 integer scalar (``[lo, hi]``, ``mask``, ``width``
    bytes, ``signed``), 4 float scalar (``b`` the ABI word function ``b(c, value)``, ``view``:
    finite f32/f64 values stored by C conversion); for 3 and 4 ``type``/``a`` the exact NumPy
    type and its converter, or None), ``pairs`` (slot pairs for the overlap rule), ``bump``
    (slots whose torch tensors get their version bumped, by ``bump_fn``), ``guards`` (the
    kernel fingerprint's dependencies, :class:`anywave.compiler.fingerprint.Fingerprint`),
    ``launch``/``ctx_set`` (addresses of ``cuLaunchKernel``/``cuCtxSetCurrent``), ``fn``,
    ``ctx`` (handles), ``grid``, ``block``, ``shared``, ``stream`` or ``stream_fn(stream_arg)``,
    ``fail(call, status)``, ``space`` (its ``pending`` is set after a launch), ``shape``,
    ``miss``, ``tensor_type``, ``builtins``, ``undefined``, ``keep`` (kept alive)."""
    mod = load()
    if mod is None:
        return None
    return mod.Launcher(desc)
