"""The cache's one fallback policy (issue 31, item 17) and the SYCL kernel cache (item 21).

* An unusable cache root (here: a path under a regular file, so it cannot be created) falls back
  to one shared per-user directory under the temp dir: two process starts leave one directory,
  not one new temporary directory each (before: ``mkdtemp`` per start, plus another for the
  OpenCL ICD files).
* A full cache disk (every write into the configured cache raises ENOSPC) no longer removes the
  SYCL target: its shim is built in the fallback directory.
* anywave sets ``SYCL_CACHE_PERSISTENT=1`` and a ``SYCL_CACHE_DIR`` under its cache before the
  SYCL runtime loads, unless the user set it; the runtime then writes compiled kernels there.

Each case runs in a child process with its own ``TMPDIR`` and ``ANYWAVE_CACHE_DIR``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

START = textwrap.dedent('''
    import warnings
    warnings.simplefilter("ignore")
    from anywave.runtime import cache, opencl
    d = cache.safe_subdir("compiled")
    print("SUBDIR", d)
    print("ICD", opencl.setup_environment())
''')

FULL_DISK = textwrap.dedent('''
    import errno, os, sys, warnings
    from pathlib import Path
    warnings.simplefilter("ignore")
    from anywave.runtime import cache
    root = Path(os.environ["ANYWAVE_CACHE_DIR"]).resolve()
    real = cache.atomic_write

    def full(path, data, **kw):
        if Path(path).resolve().is_relative_to(root):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, **kw)

    cache.atomic_write = full
    import numpy as np
    from anywave.runtime import sycl
    ok, why = sycl.status()
    print("SYCL", ok, why[:300])
    if ok:
        print("SHIM", sycl.build_shim())
        print("PERSISTENT", os.environ.get("SYCL_CACHE_PERSISTENT"), os.environ.get("SYCL_CACHE_DIR"))
        import anywave as aw

        @aw.kernel
        def fill(out: aw.Out[aw.i32], n: aw.i32):
            i = aw.global_id(0)
            if i < n:
                out[i] = i

        out = np.zeros(8, np.int32)
        fill(out, 8, grid=1, workgroup=8, target="sycl")
        print("OUT", out.tolist())
''')


def _env(tmp_path, cache_root: str) -> dict[str, str]:
    env = dict(os.environ)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env.update(TMPDIR=str(tmpdir), ANYWAVE_CACHE_DIR=cache_root)
    for k in ("OCL_ICD_VENDORS", "SYCL_CACHE_PERSISTENT", "SYCL_CACHE_DIR"):
        env.pop(k, None)
    return env


def _run(tmp_path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = tmp_path / "child.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)


def test_unusable_root_leaves_one_fallback_dir(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = _env(tmp_path, str(blocker / "cache"))
    for _ in range(2):
        r = _run(tmp_path, START, env)
        assert r.returncode == 0, r.stderr[-3000:]
    left = sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("anywave"))
    assert left == [f"anywave-cache-{os.geteuid()}"], left
    sub = [ln for ln in r.stdout.splitlines() if ln.startswith("SUBDIR ")][0]
    assert sub.endswith(f"anywave-cache-{os.geteuid()}/compiled"), sub


# slow tier: ~18 s (the SYCL shim and a kernel built from nothing in a fresh fallback cache);
# the fallback itself runs in the default tier (test_unusable_root_leaves_one_fallback_dir)
@pytest.mark.slow
def test_full_cache_disk_keeps_sycl(tmp_path) -> None:
    from anywave.runtime.targets import target_status

    st = target_status("sycl")
    if st is None or not st.available:
        pytest.skip(f"sycl unavailable: {None if st is None else st.reason}")
    root = tmp_path / "cache"
    env = _env(tmp_path, str(root))
    r = _run(tmp_path, FULL_DISK, env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    assert lines.get("SYCL", "").startswith("True"), r.stdout
    fb = tmp_path / "tmp" / f"anywave-cache-{os.geteuid()}"
    assert lines["SHIM"].startswith(str(fb / "sycl")), lines["SHIM"]
    persistent, sdir = lines["PERSISTENT"].split(" ", 1)
    assert persistent == "1" and sdir == str(root / "sycl-kernels"), lines["PERSISTENT"]
    assert lines["OUT"] == str(list(range(8)))
    assert any(os.scandir(sdir)), "the SYCL runtime wrote no persistent kernel cache entry"


def test_user_sycl_cache_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from anywave.runtime import sycl

    monkeypatch.setenv("SYCL_CACHE_PERSISTENT", "0")
    monkeypatch.setenv("SYCL_CACHE_DIR", "/nonexistent-user-choice")
    assert "set by the user" in sycl.set_kernel_cache_environment()
    assert os.environ["SYCL_CACHE_PERSISTENT"] == "0" and os.environ["SYCL_CACHE_DIR"] == "/nonexistent-user-choice"
