"""What keeps the CUDA suite's k-means at 0.73 of NVRTC (issue 28; H100, 9461882)? An experiment,
not a feature: anywave's PTX of ``kmeans_assign`` reads the ``__constant__`` centres through the
global path (``ld.global.nc``: an LSU instruction per element beside the point's), NVRTC's from
the constant bank (``LDC``). This times, in one interleaved run on the suite's bench data
(2^20 points, 8 features, 16 centres):

* ``nvrtc``: NVRTC's build of tests/cuda_suite/kmeans.cu (``--fmad=false``);
* ``anywave_global``: anywave's PTX with the centres on the global path (``ANYWAVE_PTX_CONST_BANK=0``);
* ``anywave_bank``: anywave's PTX as the PTX backend now writes it (the centres in ``__wa_cbank``);
* ``anywave_const``: the same PTX with the centres' loads rewritten to ``ld.const`` from a
  module-scope ``.const`` array filled by cuMemcpyHtoD (what a constant-bank lowering would emit);
* ``nvrtc_global``: NVRTC's build of the source with the centres a plain ``const float*`` argument.

Each result (membership, changed) is compared with NumPy's. Writes ``$OUT/kmeans_const.json``.

    PYTHONPATH=src python3 bench/bench_kmeans_const.py [--reps 30] [--ptx-only DIR]
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
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))
from bench_cuda_suite import NVRTC_HEADERS, _check, interleaved_medians, nvrtc_ptx  # noqa: E402
from cases import HERE  # noqa: E402

N, F, K = 1 << 20, 8, 16


def const_variant(ptx: str, buf: str = "%buf6") -> str:
    """The centres' loads (``add.s64 %dX, %dX, BUF; ld.global.nc.b32 %r, [%dX]``) from a .const array."""
    pat = re.compile(r"add\.s64 (%d\d+), (%d\d+), " + re.escape(buf)
                     + r";\s*\n(\s*)ld\.global\.nc\.b32 (%r\d+), \[(%d\d+)\];")

    def rep(m: re.Match[str]) -> str:
        d, d2, ind, r, d3 = m.groups()
        return f"add.s64 {d}, {d2}, aw_centres_addr;\n{ind}ld.const.b32 {r}, [{d3}];"
    out, n = pat.subn(rep, ptx)
    assert n > 0, "no centres load found"
    # the array at module scope, its address once per kernel
    out = re.sub(r"(\.address_size 64\s*\n)", r"\1.const .align 16 .b8 aw_centres[512];\n", out, count=1)
    out = re.sub(r"(ld\.param\.u64 %buf6, \[__wa_p6\];[^\n]*\n)",
                 r"\1    .reg .u64 aw_centres_addr;\n    mov.u64 aw_centres_addr, aw_centres;\n", out, count=1)
    return out


def builds(include: str) -> dict[str, Any]:
    import anywave as aw
    from anywave.backends.ptx import translate

    src = HERE / "kmeans.cu"
    ptx_nv, low = nvrtc_ptx(src, ["kmeans_assign"], "compute_90", include)
    text = src.read_text()
    glob = text.replace("__constant__ float centres[MAX_K * MAX_F];\n", "").replace(
        "int k) {", "int k, const float* centres) {")
    assert glob != text
    with tempfile.TemporaryDirectory() as d:
        p = Path(d, "kmeans_global.cu")
        p.write_text(glob)
        (Path(d) / "common.h").write_text((HERE / "common.h").read_text())
        ptx_g, low_g = nvrtc_ptx(p, ["kmeans_assign"], "compute_90", include)
    from anywave.backends import ptx

    m = aw.cuda_kernel(src, "kmeans_assign").compile()
    saved = ptx.PTX_CONST_BANK
    try:
        ptx.PTX_CONST_BANK = False  # the global path (ld.global.nc), as before the constant bank
        aw_global = translate(m, "sm_90").text
        ptx.PTX_CONST_BANK = True  # the PTX backend's constant bank (__wa_cbank), the default now
        aw_bank = translate(m, "sm_90").text
    finally:
        ptx.PTX_CONST_BANK = saved
    return {"nvrtc": (ptx_nv.rstrip(b"\0").decode(), low["kmeans_assign"]),
            "nvrtc_global": (ptx_g.rstrip(b"\0").decode(), low_g["kmeans_assign"]),
            "anywave_global": (aw_global, m.kernels[0].name),
            "anywave_const": (const_variant(aw_global), m.kernels[0].name),
            "anywave_bank": (aw_bank, m.kernels[0].name)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ptx-only", help="write the four PTX texts to this folder and stop (no GPU)")
    a = ap.parse_args()
    include = tempfile.mkdtemp(prefix="aw_nvrtc_include_")
    for name, text in NVRTC_HEADERS.items():
        Path(include, name).write_text(text)
    b = builds(include)
    if a.ptx_only:
        for k, (t, _sym) in b.items():
            Path(a.ptx_only, f"{k}.ptx").write_text(t)
        print({k: sym for k, (t, sym) in b.items()})
        return 0
    import torch
    from cuda.bindings import driver

    rng = np.random.default_rng(28)
    pts = rng.standard_normal((N, F)).astype(np.float32)
    cen = np.zeros(16 * 8, np.float32)
    cen[:K * F] = pts[rng.choice(N, K, replace=False)].reshape(-1)
    mem0 = rng.integers(0, K, N).astype(np.int32)
    d2 = ((pts[:, None, :].astype(np.float32) - cen[:K * F].reshape(K, F)[None]) ** 2)
    # the reference: the kernel's order (features summed left to right in f32, first minimum wins)
    dist = np.zeros((N, K), np.float32)
    for f in range(F):
        dist = (dist + d2[:, :, f]).astype(np.float32)
    best = np.argmin(dist, axis=1).astype(np.int32)
    changed_ref = int(np.count_nonzero(best != mem0))

    t_pts = torch.from_numpy(pts).cuda()
    t_cen = torch.from_numpy(cen).cuda()
    t_mem = torch.from_numpy(mem0).cuda()
    t_chg = torch.zeros(1, dtype=torch.int32, device="cuda")
    fns = {}
    for k, (t, sym) in b.items():
        image = np.frombuffer(t.encode() + b"\0", dtype=np.uint8).copy()
        mod = _check(driver.cuModuleLoadData(image.ctypes.data), f"cuModuleLoadData {k}")
        fns[k] = _check(driver.cuModuleGetFunction(mod, sym.encode()), "cuModuleGetFunction")
        for gname in ("centres", "aw_centres", "__wa_cbank"):
            r = driver.cuModuleGetGlobal(mod, gname.encode())
            if int(r[0]) == 0:
                _check(driver.cuMemcpyHtoD(r[1], cen.ctypes.data, cen.nbytes), "cuMemcpyHtoD")
    grid = (N + 127) // 128
    P, I = ctypes.c_void_p, ctypes.c_int

    def launcher(k: str):
        fn = fns[k]
        if k == "nvrtc":
            args = ((t_mem.data_ptr(), t_chg.data_ptr(), t_pts.data_ptr(), N, F, K), (P, P, P, I, I, I))
        else:  # anywave's ABI and the global variant: the centres buffer last
            args = ((t_mem.data_ptr(), t_chg.data_ptr(), t_pts.data_ptr(), N, F, K, t_cen.data_ptr()),
                    (P, P, P, I, I, I, P))

        def go() -> None:
            stream = torch.cuda.current_stream().cuda_stream
            _check(driver.cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, driver.CUstream(stream), args, 0), "launch")
        return go

    runs = {k: launcher(k) for k in fns}
    ok = {}
    for k, f in runs.items():
        t_mem.copy_(torch.from_numpy(mem0))
        t_chg.zero_()
        f()
        torch.cuda.synchronize()
        ok[k] = bool(np.array_equal(t_mem.cpu().numpy(), best)) and int(t_chg.item()) == changed_ref
    med = interleaved_medians(torch, runs, a.reps)
    doc = {"bench": "bench_kmeans_const", "device": torch.cuda.get_device_name(),
           "commit": os.environ.get("ANYWAVE_COMMIT") or subprocess.run(
               ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "n": N, "features": F, "centres": K, "reps": a.reps,
           "rows": {k: {"ms": med[k], "speed_vs_nvrtc": med["nvrtc"] / med[k], "matches_numpy": ok[k]} for k in runs}}
    for k, r in doc["rows"].items():
        print(f"{k:16s} {r['ms']:.4f} ms  {r['speed_vs_nvrtc']:.3f} of nvrtc  numpy={r['matches_numpy']}")
    out_dir = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kmeans_const.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
