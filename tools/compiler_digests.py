"""SHA-256 of the ``.wbin`` bytes of everything the compiler produces that the project ships or
checks: every library kernel (``tools/wbin_digests.py``'s set: the defaults and the variants
bench/bench_compile.py times) and every conformance group's module (``assemble_group``; the
compiled groups -- literals, shifts, perf, collectives -- hold the compiler's output for their
kernels), so a refactor of the compiler shows it keeps the bytes.

Usage: python tools/compiler_digests.py --write FILE    (record the digests of this tree)
       python tools/compiler_digests.py --check FILE    (compare; exit 1 on any difference)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def digests() -> dict[str, str]:
    from wbin_digests import digests as library

    from anywave.binary.wbin import write_wbin
    from anywave.conformance import assemble_group, group_names

    out = {"kernel:" + k: v for k, v in library().items()}
    for g in group_names():
        out["group:" + g] = hashlib.sha256(write_wbin(assemble_group(g))).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    a = ap.parse_args()
    got = digests()
    if a.write:
        Path(a.write).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} digests to {a.write}")
        return 0
    want = json.loads(Path(a.check).read_text())
    bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    for k in bad:
        print(f"DIFFERENT: {k}: recorded {want.get(k)}, now {got.get(k)}")
    print(f"{len(got)} modules compiled; {len(bad)} differ from {a.check}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
