"""SHA-256 of the ``.wbin`` bytes of everything the compiler produces that the project ships or
checks: every library kernel (``tools/wbin_digests.py``'s set: the defaults and the variants
bench/bench_compile.py times) and every conformance group's module (``assemble_group``; the
compiled groups -- literals, shifts, perf, collectives -- hold the compiler's output for their
kernels), so a refactor of the compiler shows it keeps the bytes.

Usage: python tools/compiler_digests.py --write FILE    (record the digests of this tree)
       python tools/compiler_digests.py --check FILE    (compare; exit 1 on any difference)
"""

from __future__ import annotations

import hashlib
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
    from wbin_digests import main as digest_cli

    return digest_cli(digests, "modules", __doc__)


if __name__ == "__main__":
    sys.exit(main())
