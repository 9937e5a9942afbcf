"""Run the conformance suite on the Vulkan target at every subgroup size the device offers (or
the ones named) and write a JSON record: device, driver, API version, float controls, commit,
date, counts per W and every failure.

    python bench/vulkan_conformance.py --out bench/results/vulkan_conformance_lavapipe.json
    python bench/vulkan_conformance.py --widths 32 --out $OUT/vulkan_conformance_h200.json
    python bench/vulkan_conformance.py --device-arrays --out bench/results/vulkan_conformance_lavapipe_dev.json
    LP_NATIVE_VECTOR_WIDTH=512 python bench/vulkan_conformance.py \
        --out bench/results/vulkan_conformance_lavapipe_w16.json

lavapipe offers one subgroup size, its native vector width / 32 (8 on a 256-bit AVX2 build);
Mesa's ``LP_NATIVE_VECTOR_WIDTH`` changes it (512 gives 16), and the record keeps the variable.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True).stdout
        return (sha or "unknown") + (" (+ uncommitted changes)" if dirty.strip() else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", default="", help="comma-separated W values (default: all the device offers)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--commit", default="", help="commit to record (default: git rev-parse HEAD)")
    p.add_argument("--device-arrays", action="store_true",
                   help="run every case on vulkan device arrays (vulkan.DeviceArrayRunner) instead of staged "
                        "NumPy arguments")
    args = p.parse_args(argv)

    from anywave.conformance import suite
    from anywave.runtime import vulkan

    ok, why = vulkan.status()
    if not ok:
        print(f"Vulkan unavailable: {why}", file=sys.stderr)
        Path(args.out).write_text(json.dumps({"target": "vulkan", "available": False, "reason": why}, indent=1))
        return 1
    runner = vulkan.DeviceArrayRunner() if args.device_arrays else vulkan.VulkanRunner()
    dev = runner.dev
    widths = tuple(int(w) for w in args.widths.split(",") if w) or dev.features.wave_widths
    t0 = time.perf_counter()
    rep = suite.run_suite(runner, widths, progress=True)
    per: dict[str, dict[str, int]] = {}
    for r in rep.results:
        d = per.setdefault(str(r.wave_width), {})
        d[r.status] = d.get(r.status, 0) + 1
    out = {
        "target": "vulkan", "device": dev.name, "api_version": dev.api_version,
        "driver_version": dev.driver_version, "features": repr(dev.features),
        "details": dev.details(), "offered_wave_widths": list(dev.features.wave_widths),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": args.commit or _commit(), "seconds": round(time.perf_counter() - t0, 1),
        "counts": rep.counts(), "per_wave_width": per,
        "arguments": "vulkan device arrays" if args.device_arrays else "NumPy arrays (staged by the launch)",
        "transfers": dict(dev.transfers), "submissions": dev.submissions,
        "environment": {k: os.environ[k] for k in ("LP_NATIVE_VECTOR_WIDTH", "MESA_SHADER_CACHE_DISABLE",
                                                            "ANYWAVE_VULKAN_COOPMAT") if k in os.environ},
        "failures": [{"case": r.case, "W": r.wave_width, "status": r.status, "message": r.message[:600]}
                     for r in rep.failures()],
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("device", "counts", "per_wave_width")}))
    return 0 if rep.ok else 2


if __name__ == "__main__":
    sys.exit(main())
