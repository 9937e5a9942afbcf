"""GPU checks for the asynchronous copies (spec §4.5), spilling (compiler/spill.py) and the torch
mm route to the tiled GEMM, in one command (an NVIDIA GPU, sm_80+):

    python bench/gpu_async_spill.py [--out DIR]

1. SASS of the ``async_copy`` conformance group for the device's arch: ``LDGSTS`` (cp.async),
   ``LDGDEPBAR`` (commit) and ``DEPBAR`` (wait) present (ptxas + cuobjdump);
2. the language's double-buffered pipeline and a kernel that spills, on CUDA and on the
   emulator at W = 32: bit-for-bit equal;
3. ``torch.ops.anywave.mm`` on CUDA float32 tensors of 1024^3 (routed to the tiled GEMM): bits
   equal to ``kernels.gemm.gemm`` on CUDA and to the emulator's on a 128^3 product; the time of
   both against ``torch.mm`` (TF32 off), for information only.

Writes ``OUT/gpu_async_spill.json`` (device, driver, commit, date, results); exit status 0 when
every check passed. OUT is ``--out``, else ``$OUT``, else ``bench/results``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

# the kernels the tests check on the CPU targets, the same objects (not copies)
from test_async_copy import _pipelined_sum as pipelined_sum  # noqa: E402
from test_compiler_spill import _pressure as pressure  # noqa: E402


def _sass(arch: str) -> dict:
    from anywave.backends import ptx
    from anywave.conformance import suite

    text = ptx.translate(suite.assemble_group("async_copy"), arch).text
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "g.ptx"
        p.write_text(text)
        subprocess.run(["ptxas", f"-arch={arch}", str(p), "-o", str(Path(d) / "g.cubin")], check=True)
        sass = subprocess.run(["cuobjdump", "--dump-sass", str(Path(d) / "g.cubin")], capture_output=True,
                              text=True, check=True).stdout
    counts = {op: sass.count(op) for op in ("LDGSTS", "LDGDEPBAR", "DEPBAR")}
    return {"arch": arch, "counts": counts, "ok": all(counts.values())}


def _same(kern, args: dict, grid: int, wg: int) -> dict:
    from anywave.emu import emulate
    from anywave.runtime.targets import get_target

    m = kern.compile()
    name = m.kernels[0].name
    emu = {k: v.copy() for k, v in args.items()}
    emulate(m, name, grid=grid, workgroup=wg, args=emu, wave_width=32)
    gpu = {k: v.copy() for k, v in args.items()}
    get_target("cuda").launch(m, name, (grid,), (wg,), gpu)
    ok = all(np.array_equal(emu[k].view(np.uint8), gpu[k].view(np.uint8)) for k in args
             if isinstance(args[k], np.ndarray))
    return {"kernel": name, "ok": bool(ok), "resources": kern.resources()}


def _torch_mm() -> dict:
    import torch

    from anywave.kernels import gemm as G
    from anywave.torch import ops

    torch.backends.cuda.matmul.allow_tf32 = False
    out: dict = {}
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    got = ops.mm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    ref = G.gemm(a, b, target="emulator", wave_width=32)
    out["mm_128_equals_emulator_gemm"] = bool(np.array_equal(got.view(np.uint32), ref.view(np.uint32)))
    n = 1024
    x = torch.randn(n, n, device="cuda")
    y = torch.randn(n, n, device="cuda")
    c = ops.mm(x, y)
    lib = G.gemm(x.cpu().numpy(), y.cpu().numpy(), config=G.FAST, target="cuda")
    out["mm_1024_equals_library_gemm"] = bool(np.array_equal(c.cpu().numpy().view(np.uint32), lib.view(np.uint32)))

    def t(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 10

    out["ms_anywave_mm_1024"] = t(lambda: ops.mm(x, y))
    out["ms_torch_mm_1024_tf32_off"] = t(lambda: torch.mm(x, y))
    out["ok"] = out["mm_128_equals_emulator_gemm"] and out["mm_1024_equals_library_gemm"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    out = Path(args.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat()}
    try:
        res["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()
        res["device"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap",
                                        "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    cap = res.get("device", "").split(",")[-1].strip().replace(".", "") or "90"
    checks = {}
    for name, fn in (
            ("sass", lambda: _sass(f"sm_{cap}") if shutil.which("cuobjdump") else {"ok": False, "why": "no cuobjdump"}),
            ("pipeline", lambda: _same(pipelined_sum, {
                "x": np.random.default_rng(1).standard_normal(2 * 8 * 256).astype(np.float32),
                "out": np.zeros(128, np.float32), "tiles": np.int32(8)}, 2, 64)),
            ("spill", lambda: _same(pressure, {"x": np.random.default_rng(2).standard_normal(4 * 128).astype(
                np.float32), "out": np.zeros(128, np.float32)}, 2, 64)),
            ("torch_mm", _torch_mm)):
        try:
            checks[name] = fn()
        except Exception as e:  # noqa: BLE001 - every check reports, none stops the others
            checks[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        print(name, json.dumps(checks[name])[:400], flush=True)
    res["checks"] = checks
    (out / "gpu_async_spill.json").write_text(json.dumps(res, indent=2))
    return 0 if all(c.get("ok") for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
