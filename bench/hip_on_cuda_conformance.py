"""Conformance of the HIP backend on an NVIDIA GPU (HIP source -> NVRTC -> CUDA driver), W = 32.

    PYTHONPATH=src python bench/hip_on_cuda_conformance.py [--quick] [--out DIR] [--device N]

1. discovers the device and NVRTC;
2. runs the whole conformance suite at W = 32 through
   :class:`anywave.runtime.hip_nvidia.HipOnCudaRunner` (the HIP text of
   :mod:`anywave.backends.hip`, compiled by NVRTC with ``hip_to_cuda.h``), each group in a child
   process with a timeout; every case is judged against the suite's independent expected values
   *and* compared bit-for-bit with the emulator at W = 32 (NaN == NaN only where the output's
   class is exact-nan), with the comparison helpers of ``bench/cuda_conformance.py``;
3. writes ``OUT/hip_on_cuda_conformance.json`` (device, driver, NVRTC, commit, date, per-case
   results) and prints a summary. OUT is ``--out``, else ``$OUT``, else ``bench/results``.
   Exit status 0 when every case passed and matched the emulator.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))


_spec = importlib.util.spec_from_file_location("cuda_conformance", Path(__file__).with_name("cuda_conformance.py"))
cc = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(cc)  # type: ignore[union-attr]

W = 32
NAME = "hip_on_cuda_conformance.json"


def run_group_child(group: str, out_json: str, device: int) -> None:
    """Run one group through HIP-on-NVIDIA and the emulator; write per-case results to ``out_json``."""
    from anywave.runtime.hip_nvidia import HipOnCudaRunner

    runner = HipOnCudaRunner(device)
    cc.run_group_cases(group, runner, runner.load, out_json, label="hip",
                       extra=lambda module: {"image": runner.image_kinds.get(id(module))})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the groups " + ", ".join(cc.QUICK_GROUPS))
    ap.add_argument("--out", help="output directory (default $OUT or bench/results)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--group", action="append", help="run only these groups")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per group")
    ap.add_argument("--child", nargs=2, metavar=("GROUP", "JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_group_child(args.child[0], args.child[1], args.device)
        return 0

    from anywave.conformance import group_names, load_cases
    from anywave.runtime import cuda
    from anywave.runtime.hip_nvidia import nvrtc_version

    out_dir = Path(args.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"commit": cc._commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                              "wave_width": W, "python": sys.version.split()[0],
                              "path": "anywave.backends.hip -> NVRTC (hip_to_cuda.h) -> CUDA driver"}
    try:
        report["nvrtc"] = nvrtc_version()
    except Exception as e:  # noqa: BLE001
        report["nvrtc"] = f"unusable: {e}"
    ok, reason = cuda.driver_status()
    if not ok:
        print(f"no CUDA device: {reason}")
        report["error"] = reason
        if args.out or os.environ.get("OUT"):
            (out_dir / NAME).write_text(json.dumps(report, indent=1))
        return 2
    p = cuda.device_properties(args.device)
    report["device"] = {"name": p.name, "compute_capability": f"{p.compute_capability[0]}.{p.compute_capability[1]}",
                        "arch": p.arch, "driver_version": p.driver_version}
    try:
        report["device"]["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", f"--id={args.device}"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    print(f"device {args.device}: {p.name}, {p.arch}, CUDA driver {p.driver_version}, NVRTC {report['nvrtc']}")

    groups = args.group or (list(cc.QUICK_GROUPS) if args.quick else group_names())
    results: list[dict[str, Any]] = []
    report["groups"] = {}
    t_all = time.perf_counter()
    for g in groups:
        t0 = time.perf_counter()
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
            path = tf.name
        cmd = [sys.executable, str(Path(__file__).resolve()), "--device", str(args.device), "--child", g, path]
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            data = json.loads(Path(path).read_text()) if Path(path).stat().st_size else None
            if data is None:
                raise RuntimeError(f"child exited {cp.returncode}: {cp.stderr[-2000:]}")
            rs = data["results"]
            report["groups"][g] = {"compile_s": data.get("compile_s"), "image": data.get("image"),
                                   "seconds": round(time.perf_counter() - t0, 2)}
        except Exception as e:  # noqa: BLE001 - timeout, crash: the group's cases are errors
            why = "timeout" if isinstance(e, subprocess.TimeoutExpired) else f"{type(e).__name__}: {e}"
            rs = [{"case": c.name, "group": g, "status": "error", "message": f"group run failed: {why}",
                   "emulator_match": None} for c in load_cases([g])]
            report["groups"][g] = {"error": why[-2000:]}
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        results += rs
        bad = [r for r in rs if r["status"] not in ("pass", "skip") or r.get("emulator_match") is False]
        print(f"{g:>20}: {len(rs) - len(bad)}/{len(rs)} ok  ({time.perf_counter() - t0:.1f}s)"
              + (f"  failing: {', '.join(r['case'] for r in bad[:5])}" if bad else ""), flush=True)
    report["suite_seconds"] = round(time.perf_counter() - t_all, 2)
    report["results"] = results
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    report["counts"] = counts
    emu_diff = [r for r in results if r.get("emulator_match") is False]
    report["emulator_mismatches"] = len(emu_diff)
    (out_dir / NAME).write_text(json.dumps(report, indent=1))
    print(f"\nsuite at W={W}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {len(emu_diff)} cases differ from the emulator")
    for r in results:
        if r["status"] not in ("pass", "skip") or r.get("emulator_match") is False:
            msg = (r.get("message") or r.get("emulator_mismatch") or "").strip().splitlines()
            print(f"  {r['status']:<5} {r['case']}: {msg[0][:200] if msg else ''}")
    print(f"wrote {out_dir / NAME}")
    return 0 if not emu_diff and all(r["status"] in ("pass", "skip") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
