"""The cache directory is never a way to run another user's code (issue 11, item 19), and an
unusable one does not silently disable a runtime (item 22). The tests run as root, so "another
user" is simulated with os.chown to uid 12345 inside a temporary directory."""

from __future__ import annotations

import errno
import os
import stat
import warnings
from pathlib import Path

import pytest

from anywave.runtime import cache
from anywave.runtime.cache import CacheSecurityError

OTHER_UID = 12345


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    r = tmp_path / "awcache"
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(r))
    monkeypatch.setattr(cache, "_FALLBACK", None)
    return r


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_directories_are_created_private(root: Path) -> None:
    d = cache.safe_subdir("compiled")
    assert d == root / "compiled"
    assert _mode(root) == 0o700 and _mode(d) == 0o700


@pytest.mark.parametrize("how", ["0777", "0775", "other-uid"])
def test_insecure_root_is_refused(root: Path, how: str) -> None:
    root.mkdir()
    if how == "other-uid":
        os.chown(root, OTHER_UID, OTHER_UID)
        os.chmod(root, 0o700)
    else:
        os.chmod(root, int(how, 8))
    with pytest.raises(CacheSecurityError) as ei:
        cache.safe_subdir("compiled")
    msg = str(ei.value)
    assert str(root) in msg
    assert ("another user" in msg and str(OTHER_UID) in msg) if how == "other-uid" else "writable by group" in msg


def test_symlinked_entry_is_refused(root: Path, tmp_path: Path) -> None:
    d = cache.safe_subdir("compiled")
    (tmp_path / "elsewhere.wbin").write_bytes(b"x")
    (d / "e.wbin").symlink_to(tmp_path / "elsewhere.wbin")
    with pytest.raises(CacheSecurityError, match="symbolic link"):
        cache.verified_read(d / "e.wbin")


# ----------------------------------------------------------------------------- OpenCL ICD files

def test_planted_icd_is_refused(root: Path) -> None:
    from anywave.runtime.opencl import _write_vendor_dir

    vdir = cache.safe_subdir("opencl-vendors")
    (vdir / "evil.icd").write_text("/tmp/evil.so\n")
    with pytest.raises(CacheSecurityError, match="evil.icd"):
        _write_vendor_dir({"anywave-intel-cpu.icd": "/x/libintelocl.so"})


@pytest.mark.parametrize("how", ["0777", "other-uid"])
def test_vendor_dir_of_others_is_refused(root: Path, how: str) -> None:
    from anywave.runtime.opencl import _write_vendor_dir

    vdir = cache.safe_subdir("opencl-vendors")
    if how == "other-uid":
        os.chown(vdir, OTHER_UID, OTHER_UID)
    else:
        os.chmod(vdir, 0o777)
    with pytest.raises(CacheSecurityError):
        _write_vendor_dir({"anywave-intel-cpu.icd": "/x/libintelocl.so"})


def test_planted_entry_owned_by_another_user_is_refused(root: Path) -> None:
    from anywave.runtime.opencl import _write_vendor_dir

    vdir = cache.safe_subdir("opencl-vendors")
    p = vdir / "anywave-intel-cpu.icd"
    p.write_text("/tmp/evil.so\n")
    os.chown(p, OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError, match="another user"):
        _write_vendor_dir({"anywave-intel-cpu.icd": "/x/libintelocl.so"})


def test_vendor_dir_written_and_read_back(root: Path) -> None:
    from anywave.runtime.opencl import _write_vendor_dir

    vdir = _write_vendor_dir({"anywave-intel-cpu.icd": "/x/libintelocl.so"})
    assert (vdir / "anywave-intel-cpu.icd").read_text() == "/x/libintelocl.so\n"
    assert _mode(vdir) == 0o700
    assert not [f for f in vdir.iterdir() if ".tmp" in f.name]


# ----------------------------------------------------------------------------- SYCL shim library

def test_planted_sycl_shim_is_refused(root: Path) -> None:
    from anywave.runtime import sycl

    try:
        _, lib = sycl._sycl_paths()
    except sycl.SyclError as e:
        pytest.skip(str(e))
    libsycl = sorted(lib.glob("libsycl.so*"), key=lambda p: len(p.name))[0]
    d = cache.safe_subdir("sycl")
    planted = d / f"libaw_sycl_shim-{sycl.shim_key(libsycl)}.so"
    planted.write_bytes(b"\x7fELF planted")
    (d / (planted.name + ".sha256")).write_text(cache.sha256_hex(planted.read_bytes()) + "\n")
    os.chown(planted, OTHER_UID, OTHER_UID)
    with pytest.raises(sycl.SyclError, match="another user"):
        sycl.build_shim()
    os.chown(planted, os.geteuid(), os.getegid())
    os.chmod(d, 0o777)
    with pytest.raises(sycl.SyclError, match="writable by group or others"):
        sycl.build_shim()


# ----------------------------------------------------------------------------- .wbin and cubin entries

def _module():
    from anywave.asm import assemble

    return assemble(""".version 1.0
.kernel k
.arg y buffer u32 write
.registers 4
    mov.sr r0, sr_thread_linear_id
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    st.device.b32 y[r2], r0
    halt
.end
""", "k.wave")


def test_wbin_cache_round_trip_and_damage(root: Path) -> None:
    from anywave.compiler.kernel import _DiskCache

    dc = _DiskCache()
    m = _module()
    dc.store("abc", m)
    assert dc.load("abc") is not None
    p = root / "compiled" / "abc.wbin"
    data = bytearray(p.read_bytes())
    data[-1] ^= 1  # a damaged (or swapped) entry without a matching recorded hash is not used
    p.write_bytes(bytes(data))
    assert dc.load("abc") is None


@pytest.mark.parametrize("how", ["0777-dir", "other-uid-file"])
def test_planted_wbin_is_refused(root: Path, how: str) -> None:
    from anywave.binary.wbin import write_wbin
    from anywave.compiler.kernel import _DiskCache

    d = cache.safe_subdir("compiled")
    blob = write_wbin(_module())
    cache.atomic_write(d / "abc.wbin", blob, record_hash=True)
    if how == "0777-dir":
        os.chmod(d, 0o777)
    else:
        os.chown(d / "abc.wbin", OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError):
        _DiskCache().load("abc")


def test_planted_cubin_is_refused(root: Path) -> None:
    from anywave.runtime import cuda

    d = cuda.cache_dir()
    p = d / "x.cubin"
    cuda._atomic_write(p, b"cubin bytes")
    assert cuda._read_cached(p) == b"cubin bytes"
    os.chown(p, OTHER_UID, OTHER_UID)
    with pytest.raises(CacheSecurityError, match="another user"):
        cuda._read_cached(p)


# ----------------------------------------------------------------------------- unusable caches (item 22)

def test_uncreatable_root_falls_back_with_a_warning(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ANYWAVE_CACHE_DIR", str(tmp_path / "afile" / "cache"))
    monkeypatch.setattr(cache, "_FALLBACK", None)
    with pytest.warns(RuntimeWarning, match="cannot be created"):
        d = cache.cache_dir()
    assert d.is_dir() and _mode(d) == 0o700 and str(tmp_path) not in str(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.cache_dir() == d  # once per process


def test_full_disk_leaves_no_temporary_files(root: Path, monkeypatch) -> None:
    d = cache.safe_subdir("opencl-vendors")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        cache.atomic_write(d / "x.icd", b"/x/lib.so\n")
    assert list(d.iterdir()) == []


def test_full_disk_vendor_dir_falls_back(root: Path, monkeypatch) -> None:
    from anywave.runtime import opencl

    real = cache.atomic_write
    calls = []

    def full_once(path, data, **kw):
        if not calls:
            calls.append(path)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(cache, "atomic_write", full_once)
    with pytest.warns(RuntimeWarning, match="No space left"):
        vdir = opencl._write_vendor_dir({"anywave-intel-cpu.icd": "/x/libintelocl.so"})
    assert (vdir / "anywave-intel-cpu.icd").read_text() == "/x/libintelocl.so\n"
    assert not list((root / "opencl-vendors").iterdir())


def test_opencl_error_gives_the_real_reason(monkeypatch) -> None:
    from anywave.runtime import opencl

    class NoPlatforms:
        @staticmethod
        def get_platforms():
            raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(opencl, "_ENV_PROBLEMS", ["anywave cache directory '/x' is owned by another user"])
    with pytest.raises(opencl.OpenCLError, match="ICD set-up failed: anywave cache directory"):
        opencl._pick_device(NoPlatforms)


def test_default_target_says_why_it_falls_back(monkeypatch) -> None:
    from anywave.runtime import targets

    monkeypatch.setattr(targets, "preferred_names", lambda: ["emulator"])
    monkeypatch.setattr(targets, "_FALLBACK_WARNED", False)
    monkeypatch.setattr(targets, "available_targets", lambda: [
        targets.TargetStatus("opencl", False, "no OpenCL platform found (because of X)"),
        targets.TargetStatus("emulator", True)])
    with pytest.warns(RuntimeWarning, match="because of X"):
        t = targets.default_target(wave_width=8)
    assert t.info.name == "emulator"
