"""The anywave cache directory, safe to load native code and binaries from (issue 11, items 19, 22).

Everything anywave keeps on disk -- compiled ``.wbin`` kernels, cubins, the SYCL shim library,
the OpenCL ICD files that name the library the ICD loader then ``dlopen``\\ s -- lives under
one root: ``$ANYWAVE_CACHE_DIR``, else the platformdirs user cache dir (``~/.cache/anywave``).
Whatever is loaded from there runs as the user, so:

* directories are created with mode 0700, and every directory used (the root and each
  subdirectory) must be owned by the effective user and not writable by group or others;
  otherwise :class:`CacheSecurityError` says which path, its owner and mode, and what to do
  (another user's file is never read, a library never loaded from a place others can write);
* files read back must be regular files (no symbolic links) with the same ownership rule, and
  :func:`verified_read` checks their SHA-256 against the one recorded beside them (or embedded
  by the caller) before the bytes are used;
* writes are atomic (:func:`atomic_write`: a temporary file in the same directory, then
  ``os.replace``) and never leave a temporary file behind when they fail (a full disk);
* one fallback policy (issue 31, item 17): a cache place that cannot be created or written --
  the root or a subdirectory, read-only, a full disk (ENOSPC), no permission -- is replaced by
  the same place under one private per-user fallback root, ``<tmpdir>/anywave-cache-<uid>``
  (mode 0700, checked like the root), with a warning naming the reason once per process
  (:func:`cache_dir`, :func:`safe_subdir`, :func:`writable_subdir`). Every process uses that
  same directory, so a read-only or full cache leaves nothing new behind per process start and
  still keeps compiled artefacts across runs; it costs recompilation, never a runtime (the SYCL
  shim is built there when the cache cannot take it). Only when the fallback is unusable too
  (another user's, or itself unwritable) does a process use a private ``mkdtemp`` directory,
  removed at exit. An *insecure* configured root is refused, not replaced: the user's setting
  is wrong and must be fixed.

    >>> from anywave.cache import safe_subdir, atomic_write, verified_read  # doctest: +SKIP
    >>> d = safe_subdir("compiled")                                                  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path

from anywave.errors import WaveError

_LOCK = threading.Lock()
_FALLBACK: Path | None = None
_FALLBACK_FOR: str | None = None


class CacheSecurityError(WaveError):
    """A cache directory or file that must not be trusted (owned by another user, writable by
    group or others, a symbolic link, or a content hash that does not match); the message
    names the path, its owner and mode, and the fix."""


def configured_root() -> Path:
    """The configured cache root (``$ANYWAVE_CACHE_DIR`` or the platformdirs user cache dir),
    not created or checked."""
    env = os.environ.get("ANYWAVE_CACHE_DIR")
    if env:
        return Path(env)
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("anywave"))
    except ImportError:  # pragma: no cover - platformdirs is a dependency of pyopencl
        return Path.home() / ".cache" / "anywave"


def _describe(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}"


def check_private(path: Path, *, directory: bool) -> None:
    """Refuse ``path`` unless it is a directory (``directory=True``) or regular file, not a
    symbolic link, owned by the effective user and not writable by group or others.

    Raises:
        CacheSecurityError: naming the path, its owner and mode.
        OSError: it cannot be examined (e.g. it does not exist)."""
    st = os.lstat(path)
    kind = "directory" if directory else "file"
    ok_kind = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not ok_kind:
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a " + kind
        raise CacheSecurityError(f"anywave cache {kind} {str(path)!r} is {what}; refusing to use it "
                                 f"(remove it, or set ANYWAVE_CACHE_DIR to a private directory)")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise CacheSecurityError(
            f"anywave cache {kind} {str(path)!r} is owned by another user ({_describe(st)}; this process "
            f"runs as uid {uid}); code and binaries are never loaded from it. Remove it, or set "
            f"ANYWAVE_CACHE_DIR to a directory of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheSecurityError(
            f"anywave cache {kind} {str(path)!r} is writable by group or others ({_describe(st)}); code "
            f"and binaries are never loaded from a place others can write. Run chmod go-w on it (0700 "
            f"for directories), or set ANYWAVE_CACHE_DIR to a private directory")


def _make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700 where it does not exist, then check it."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private(path, directory=True)


def fallback_root() -> Path:
    """The shared per-user fallback root, ``<tempfile.gettempdir()>/anywave-cache-<euid>`` (not
    created or checked here)."""
    return Path(tempfile.gettempdir()) / f"anywave-cache-{os.geteuid()}"


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _fallback(reason: str) -> Path:
    """The fallback root (module docs), created and checked once per process; warns once."""
    global _FALLBACK, _FALLBACK_FOR
    if _FALLBACK is None or not _FALLBACK.is_dir():
        fb = fallback_root()
        note = "kept across runs"
        try:
            _make_private_dir(fb)
            if not os.access(fb, os.W_OK | os.X_OK):
                raise PermissionError(f"{fb} is not writable")
        except (OSError, CacheSecurityError) as e:
            import atexit

            fb = Path(tempfile.mkdtemp(prefix=f"anywave-cache-{os.geteuid()}-"))
            atexit.register(_remove_tree, fb)  # a per-process directory: never left behind
            note = f"removed at exit; the shared fallback {str(fallback_root())!r} is unusable: {e}"
        _FALLBACK, _FALLBACK_FOR = fb, reason
        warnings.warn(f"{reason}; using the private directory {fb} instead ({note})", RuntimeWarning, stacklevel=4)
    return _FALLBACK


def cache_dir() -> Path:
    """The checked cache root, created 0700 if missing.

    A root that cannot be created or is not writable falls back (warning once) to a private
    temporary directory.

    Raises:
        CacheSecurityError: the root exists but is a symbolic link, another user's, or writable
            by group or others."""
    root = configured_root()
    with _LOCK:
        try:
            _make_private_dir(root)
        except CacheSecurityError:
            raise
        except OSError as e:
            return _fallback(f"the anywave cache directory {str(root)!r} cannot be created ({e.strerror or e})")
        if not os.access(root, os.W_OK | os.X_OK):
            return _fallback(f"the anywave cache directory {str(root)!r} is not writable")
        return root


def safe_subdir(name: str) -> Path:
    """``cache_dir() / name``, created 0700 and checked like the root; when it cannot be created
    or written (read-only, full disk), the same subdirectory of the fallback root (module docs).

    Raises:
        CacheSecurityError: the root or the subdirectory must not be trusted.
        OSError: neither the subdirectory nor its fallback can be created."""
    d = cache_dir() / name
    with _LOCK:
        try:
            _make_private_dir(d)
            if not os.access(d, os.W_OK | os.X_OK):
                raise PermissionError(f"{d} is not writable")
            return d
        except CacheSecurityError:
            raise
        except OSError as e:
            if d.parent == _FALLBACK:
                raise
            reason = f"the anywave cache directory {str(d)!r} cannot be used ({getattr(e, 'strerror', None) or e})"
    return writable_subdir(name, reason)


def writable_subdir(name: str, reason: str) -> Path:
    """``name`` under the fallback root (module docs), for a write into ``cache_dir() / name``
    that failed for ``reason`` (a full disk ...): created 0700 and checked.

    Raises:
        CacheSecurityError: the fallback subdirectory must not be trusted.
        OSError: it cannot be created either."""
    with _LOCK:
        d = _fallback(reason) / name
        _make_private_dir(d)
    return d


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def atomic_write(path: Path, data: bytes, *, record_hash: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, mode 0600,
    then ``os.replace``); on any failure the temporary file is removed and the error raised.
    ``record_hash``: also write ``<path>.sha256`` for :func:`verified_read`.

    Raises:
        OSError: the write failed (nothing is left behind)."""
    parts = [(path, data)]
    if record_hash:
        parts.insert(0, (_digest_path(path), (sha256_hex(data) + "\n").encode()))
    for p, blob in parts:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def verified_read(path: Path, sha256: str | None = None) -> bytes | None:
    """The bytes of a cache entry, or None when it is absent or its content hash does not
    match (a truncated or damaged entry: the caller rebuilds it). The hash is ``sha256`` when
    given, else the one recorded by ``atomic_write(..., record_hash=True)``.

    Raises:
        CacheSecurityError: the entry (or its recorded hash) exists but is another user's, a
            symbolic link, or writable by group or others."""
    try:
        check_private(path, directory=False)
    except FileNotFoundError:
        return None
    want = sha256
    if want is None:
        dp = _digest_path(path)
        try:
            check_private(dp, directory=False)
            want = dp.read_text().strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError):
            return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if sha256_hex(data) != want:
        return None
    return data


def check_file(path: Path) -> None:
    """:func:`check_private` for a file about to be loaded as native code (``dlopen``).

    Raises:
        CacheSecurityError, OSError: see :func:`check_private`."""
    check_private(path, directory=False)
