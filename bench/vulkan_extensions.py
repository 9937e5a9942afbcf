"""The Vulkan device's extensions and cooperative-matrix shapes, as anywave's Vulkan runtime sees
them (issue 27: which of them could make the Vulkan target fast), written to
``$OUT/vulkan_extensions.json`` with the device, driver, commit and date.

    PYTHONPATH=src python3 bench/vulkan_extensions.py

Looked for: ``VK_KHR_shader_fma`` (SPV_KHR_fma: a correctly rounded fused multiply-add, which
would replace the f64 emulation of WAVE's exact ``fma``), ``VK_KHR_cooperative_matrix``,
``VK_KHR_shader_float_controls2``, ``VK_KHR_vulkan_memory_model``, ``VK_EXT_shader_replicated_composites``."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

WATCH = ("VK_KHR_shader_fma", "VK_KHR_cooperative_matrix", "VK_KHR_shader_float_controls2",
         "VK_KHR_vulkan_memory_model", "VK_EXT_shader_replicated_composites", "VK_KHR_shader_float_controls",
         "VK_NV_cooperative_matrix2", "VK_KHR_shader_bfloat16")


def main() -> int:
    from anywave.runtime import vulkan

    dev = vulkan.get_device()
    doc = {"bench": "vulkan_extensions", "device": dev.name,
           "commit": os.environ.get("ANYWAVE_COMMIT") or subprocess.run(
               ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "watched": {e: e in dev.extensions for e in WATCH},
           "cooperative_matrix": [str(p) for p in (dev.cooperative_matrix or [])],
           "extensions": sorted(dev.extensions)}
    for k in ("driver", "api_version", "driver_version", "subgroup_size"):
        if hasattr(dev, k):
            doc[k] = str(getattr(dev, k))
    print(json.dumps({k: doc[k] for k in ("device", "watched", "cooperative_matrix")}, indent=1))
    out = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "vulkan_extensions.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
