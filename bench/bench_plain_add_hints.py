"""Does a cache hint close the plain element-wise add's gap to torch.add? (issue 28: the plain
one-element-per-thread add over 2^28 floats reached 0.93 of torch.add from anywave and 0.91 from
NVRTC on an H100 at 9461882, bench/results/cuda_suite_h100_9461882_islands.json.)

NVRTC builds the plain CUDA add once; its PTX is then edited textually into variants that differ
only in the load/store qualifiers of PTX ISA §9.7.9.8 (``ld``: ``.nc``, ``.L1::no_allocate``,
``.L2::128B``/``.L2::256B`` prefetch size; ``st``: ``.cs``), each loaded with cuModuleLoadData
and timed against torch.add and anywave's Python kernel in one interleaved run (CUDA events, the
median of ``--reps``). Every variant's output is compared bit for bit with torch's.

    PYTHONPATH=src python3 bench/bench_plain_add_hints.py [--reps 30]     # writes $OUT/plain_add_hints.json
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))
from bench_cuda_suite import ADD_CU, _check, interleaved_medians, nvrtc_ptx  # noqa: E402

#: variant name -> (load qualifiers after "ld.global", store qualifiers after "st.global")
VARIANTS = {
    "plain": ("", ""),
    "nc": (".nc", ""),
    "L1_no_allocate": (".L1::no_allocate", ""),
    "L2_128B": (".L2::128B", ""),
    "L2_256B": (".L2::256B", ""),
    "nc_L2_256B": (".nc.L2::256B", ""),
    "L2_256B_st_cs": (".L2::256B", ".cs"),
    "st_cs": ("", ".cs"),
}


def variant(ptx: str, ld: str, st: str) -> str:
    out = re.sub(r"\bld\.global\.(f32|b32|u32|s32)\b", lambda m: f"ld.global{ld}.{m.group(1)}", ptx)
    return re.sub(r"\bst\.global\.(f32|b32|u32|s32)\b", lambda m: f"st.global{st}.{m.group(1)}", out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--ptx-only", help="write the variants' PTX to this folder and stop (no GPU)")
    a = ap.parse_args()
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "add_plain.cu")
        src.write_text(ADD_CU)
        ptx, lowered = nvrtc_ptx(src, ["add_plain"], "compute_90", "")
    text = ptx.rstrip(b"\0").decode()
    ptxs = {k: variant(text, ld, st) for k, (ld, st) in VARIANTS.items()}
    if a.ptx_only:
        for k, v in ptxs.items():
            Path(a.ptx_only, f"{k}.ptx").write_text(v)
        return 0
    import torch
    from cuda.bindings import driver

    import anywave as aw

    n = 1 << a.log2n
    g = torch.Generator(device="cuda").manual_seed(28)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    out = torch.empty_like(x)
    grid = (n + 255) // 256

    @aw.kernel
    def add_py(x: aw.In[aw.f32], y: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = x[i] + y[i]

    fns = {}
    for k, v in ptxs.items():
        image = np.frombuffer(v.encode() + b"\0", dtype=np.uint8).copy()
        mod = _check(driver.cuModuleLoadData(image.ctypes.data), f"cuModuleLoadData {k}")
        fns[k] = _check(driver.cuModuleGetFunction(mod, lowered["add_plain"].encode()), "cuModuleGetFunction")

    def launcher(fn: Any):
        def go() -> None:
            stream = torch.cuda.current_stream().cuda_stream
            _check(driver.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, driver.CUstream(stream),
                                         ((x.data_ptr(), y.data_ptr(), out.data_ptr(), n),
                                          (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)), 0),
                   "cuLaunchKernel")
        return go

    runs = {"torch_add": lambda: torch.add(x, y, out=out),
            "anywave_python": lambda: add_py(x, y, out, n, grid=grid, workgroup=256, target="cuda")}
    runs.update({f"nvrtc_{k}": launcher(f) for k, f in fns.items()})
    ref = x + y
    doc: dict[str, Any] = {"bench": "bench_plain_add_hints", "n": n, "workgroup": 256,
                           "device": torch.cuda.get_device_name(),
                           "commit": os.environ.get("ANYWAVE_COMMIT") or subprocess.run(
                               ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip(),
                           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "torch": torch.__version__, "variants": {k: list(v) for k, v in VARIANTS.items()}}
    same = {}
    for k, f in runs.items():
        out.zero_()
        f()
        torch.cuda.synchronize()
        same[k] = bool(torch.equal(out.view(torch.int32), ref.view(torch.int32)))
    med = interleaved_medians(torch, runs, a.reps)
    doc["rows"] = {k: {"ms": med[k], "over_torch": med["torch_add"] / med[k],
                       "tb_per_s": 12 * n / (med[k] * 1e-3) / 1e12, "same_bits_as_torch": same[k]} for k in runs}
    for k, r in doc["rows"].items():
        print(f"{k:24s} {r['ms']:.4f} ms  {r['over_torch']:.3f} of torch.add  {r['tb_per_s']:.2f} TB/s"
              f"  same={r['same_bits_as_torch']}")
    out_dir = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "plain_add_hints.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
