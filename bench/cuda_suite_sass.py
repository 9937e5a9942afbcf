"""Static comparison of the CUDA suite's code (issue 28, item 3; no GPU needed): each suite
kernel built by anywave (CUDA front end -> WAVE -> PTX backend) and by NVRTC ``--fmad=false``
from the same source, both assembled by ``ptxas -arch=sm_90 -v`` (registers, spills) and
disassembled with ``cuobjdump --dump-sass``; the SASS of each build is written out and the
instruction counts printed (total, and per innermost loop: the instructions between a backward
branch's target and the branch).

    PYTHONPATH=src python3 bench/cuda_suite_sass.py [--out DIR] [--cases a,b]

Needs ptxas and cuobjdump on PATH, cuda-bindings' NVRTC and libclang. Writes
``DIR/<kernel>.{anywave,nvrtc}.{ptx,sass}`` and ``DIR/sass_counts.json`` (DIR defaults to
``$OUT`` or a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_cuda_suite import NVRTC_HEADERS, kernel_names, nvrtc_ptx  # noqa: E402
from cases import CASES, HERE  # noqa: E402

_INS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_TARGET = re.compile(r"0x([0-9a-f]+)")


def sass_of(ptx: bytes, arch: str, work: Path, tag: str) -> tuple[str, str]:
    """(ptxas -v report, SASS text) of ``ptx`` for ``arch``."""
    p = work / f"{tag}.ptx"
    p.write_bytes(ptx.rstrip(b"\0"))
    cubin = work / f"{tag}.cubin"
    r = subprocess.run(["ptxas", f"-arch={arch}", "-v", str(p), "-o", str(cubin)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"ptxas failed on {p}:\n{r.stderr}")
    s = subprocess.run(["cuobjdump", "--dump-sass", str(cubin)], capture_output=True, text=True, check=True)
    (work / f"{tag}.sass").write_text(s.stdout)
    return r.stderr + r.stdout, s.stdout


def functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """SASS per function: [(address, instruction text)]."""
    out: dict[str, list[tuple[int, str]]] = {}
    cur: list[tuple[int, str]] | None = None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = _INS.search(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def loops(code: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """Backward branches: each loop's [target, branch] address range and its instruction count
    (innermost first: the smallest ranges)."""
    found = []
    for addr, text in code:
        if "BRA" not in text:
            continue
        m = _TARGET.search(text.split("BRA", 1)[1])
        if not m:
            continue
        tgt = int(m.group(1), 16)
        if tgt <= addr:
            body = [t for a, t in code if tgt <= a <= addr]
            found.append({"from": tgt, "to": addr, "instructions": len(body),
                          "loads": sum(1 for t in body if re.search(r"\bLD[GSL]?\b|LDG|LDS|LDC", t)),
                          "branch": text})
    return sorted(found, key=lambda d: d["instructions"])


def summary(code: list[tuple[int, str]]) -> dict[str, Any]:
    return {"instructions": len([t for _, t in code if not t.startswith("NOP")]), "loops": loops(code)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "")
    ap.add_argument("--cases", default="")
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="aw_sass_"))
    out.mkdir(parents=True, exist_ok=True)
    include = tempfile.mkdtemp(prefix="aw_nvrtc_include_")
    for name, text in NVRTC_HEADERS.items():
        Path(include, name).write_text(text)

    import anywave as aw
    from anywave.backends.ptx import translate

    wanted = {c for c in a.cases.split(",") if c}
    files = {c.file for c in CASES if not wanted or c.name in wanted}
    shared = {"scan.cu": 2 * 256 * 4}
    report: dict[str, Any] = {}
    names = kernel_names()
    for file in sorted(files):
        ptx_nv, lowered = nvrtc_ptx(HERE / file, names[file], "compute_" + a.arch[3:], include)
        stem = Path(file).stem
        v_nv, s_nv = sass_of(ptx_nv, a.arch, out, f"{stem}.nvrtc")
        f_nv = functions(s_nv)
        for name in names[file]:
            k = aw.cuda_kernel(HERE / file, name)
            m = k.compile(shared_bytes=shared.get(file, 0))
            prog = translate(m, a.arch)
            sym = m.kernels[0].name
            v_aw, s_aw = sass_of(prog.text.encode(), a.arch, out, f"{sym}.anywave")
            f_aw = functions(s_aw)
            row = {"anywave": summary(f_aw[sym]), "nvrtc": summary(f_nv[lowered[name]]),
                   "anywave_ptxas": [ln for ln in v_aw.splitlines() if "Used" in ln or "spill" in ln],
                   "nvrtc_ptxas": [ln for ln in v_nv.splitlines() if lowered[name] in ln or "Used" in ln][:4]}
            report[name] = row
            la = [lp["instructions"] for lp in row["anywave"]["loops"]]
            ln_ = [lp["instructions"] for lp in row["nvrtc"]["loops"]]
            print(f"{name:24s} anywave {row['anywave']['instructions']:5d} ins, loops {la}   "
                  f"nvrtc {row['nvrtc']['instructions']:5d} ins, loops {ln_}")
            for ln in row["anywave_ptxas"]:
                print("    anywave ptxas:", ln.strip())
    (out / "sass_counts.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
