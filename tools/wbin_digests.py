"""SHA-256 of the ``.wbin`` bytes of every library kernel, to show a refactor keeps them.

Usage: python tools/wbin_digests.py --write FILE    (record the digests of this tree)
       python tools/wbin_digests.py --check FILE    (compare; exit 1 on any difference)
       ... --code-only                               (without the debug table: a refactor that
                                                      moves source lines keeps these digests)

Compiles every ``@aw.kernel`` of ``anywave.kernels`` (the defaults and the variants that
bench/bench_compile.py times, every GEMM config of ``kernels.gemm.CONFIGS`` among them) with the
disk cache off, writes each module with ``write_wbin`` and hashes the bytes (debug table
included, its file names taken relative to the directory holding the ``anywave`` package so
that two checkouts compare). A second tree is then compared against the recorded file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def digests(code_only: bool = False) -> dict[str, str]:
    os.environ["ANYWAVE_NO_DISK_CACHE"] = "1"
    sys.path.insert(0, str(ROOT / "bench"))
    import dataclasses

    from bench_compile import _library_jobs

    import anywave
    from anywave.binary.module import Module
    from anywave.binary.wbin import write_wbin
    from anywave.errors import SourceLoc

    pkg = str(Path(anywave.__file__).resolve().parent.parent) + os.sep

    def relative(ins):  # the debug table names files: hash them relative to the package's root
        loc = ins.loc
        if code_only:
            return dataclasses.replace(ins, loc=None)
        if loc is None or not loc.file.startswith(pkg):
            return ins
        return dataclasses.replace(ins, loc=SourceLoc(loc.file[len(pkg):], loc.line, loc.col))

    jobs = list(_library_jobs())
    out: dict[str, str] = {}
    for name, kf, consts in jobs:
        kernel = kf.compile_kernel(kf._consts_from(consts))
        kernel.code = [relative(ins) for ins in kernel.code]
        out[name] = hashlib.sha256(write_wbin(Module(kernels=[kernel]))).hexdigest()
    return out


def main(digest_fn=None, what: str = "kernels", doc: str | None = None) -> int:  # noqa: ANN001
    """``--write FILE`` / ``--check FILE`` over ``digest_fn()`` (default :func:`digests`); also
    the command line of ``tools/compiler_digests.py``, which passes its own set."""
    ap = argparse.ArgumentParser(description=doc or __doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    if digest_fn is None:
        ap.add_argument("--code-only", action="store_true", help="leave the debug table (source locations) out")
    a = ap.parse_args()
    got = digest_fn() if digest_fn is not None else digests(a.code_only)
    if a.write:
        Path(a.write).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} digests to {a.write}")
        return 0
    want = json.loads(Path(a.check).read_text())
    bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    for k in bad:
        print(f"DIFFERENT: {k}: recorded {want.get(k)}, now {got.get(k)}")
    print(f"{len(got)} {what} compiled; {len(bad)} differ from {a.check}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
