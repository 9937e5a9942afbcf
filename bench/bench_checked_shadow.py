"""Resident memory of the emulator's checked mode for large, sparsely touched buffers.

Usage: ``python bench/bench_checked_shadow.py [--json OUT]``. For buffers of 8 MB and 64 MB, a
checked launch (``emulate(..., check=True)``) of a kernel whose 64 threads each read and write
one u32 (256 bytes touched) runs in a fresh subprocess; its peak resident set size
(``ru_maxrss``) minus that of the same process before the launch is the cost of checking. The
peer in the same run is the same launch unchecked.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import resource, sys, numpy as np
from anywave.asm import assemble
from anywave.emu import emulate
src = '''.version 1.0
.kernel touch
.arg y buffer u32 readwrite
.registers 6
    mov.sr r0, sr_thread_linear_id
    movi.b32 r1, 2
    shl.b32 r2, r0, r1
    ld.device.b32 r3, y[r2]
    add.i32 r3, r3, r1
    st.device.b32 y[r2], r3
    halt
.end
'''
m = assemble(src, "touch.wave")
nbytes, check = int(sys.argv[1]), sys.argv[2] == "1"
y = np.ones(nbytes // 4, np.uint32)
y[:] = 1  # touch every page before measuring
emulate(m, "touch", grid=1, workgroup=8, args={"y": np.zeros(8, np.uint32)}, wave_width=8, check=check)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    emulate(m, "touch", grid=1, workgroup=64, args={"y": y}, wave_width=32, check=check)
    ok = bool(np.all(y[:64] == 3))
    err = ""
except MemoryError as e:
    ok, err = False, "MemoryError"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024, ok, err)
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for mb in (8, 64):
        for check in (False, True):
            r = subprocess.run([sys.executable, "-c", CHILD, str(mb << 20), str(int(check))], capture_output=True,
                               text=True)
            parts = r.stdout.split()
            if r.returncode != 0 or len(parts) < 2:
                rows.append({"buffer_mb": mb, "check": check, "error": r.stderr[-300:]})
                continue
            rows.append({"buffer_mb": mb, "check": check, "extra_resident_mb": round(int(parts[0]) / 2**20, 1),
                         "ok": parts[1] == "True", "error": parts[2] if len(parts) > 2 else ""})
            print(rows[-1], flush=True)
    out = {"bench": "checked-mode shadow memory", "rows": rows, "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=Path(__file__).resolve().parents[1]).stdout.strip()}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
