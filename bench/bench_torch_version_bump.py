"""Cost of the autograd bookkeeping a kernel call does for torch tensors it writes (issue 31,
item 13): bumping the version counter (``torch.autograd.graph.increment_version``'s primitive)
and the requires-grad test, on CPU tensors; alone and inside a launch by a recorded plan.

Writes ``bench/results/torch_version_bump_cost.json``: nanoseconds per bump; microseconds per
kernel call through the plan path with the bump and with it replaced by a no-op (same process,
interleaved rounds, median of rounds), on the emulator and the OpenCL CPU target.

    python bench/bench_torch_version_bump.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

import anywave as aw  # noqa: E402
from anywave.runtime import arrays as A  # noqa: E402
from anywave.torch.train import provenance  # noqa: E402


@aw.kernel
def twice(x: aw.In[aw.f32], y: aw.Out[aw.f32], n: aw.i32):
    i = aw.global_id(0)
    if i < n:
        y[i] = x[i] * 2.0


def _per_call(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main() -> int:
    out = {**provenance(), "script": "bench/bench_torch_version_bump.py", "kernel": "twice (y[i] = 2 x[i], n = 64)"}
    t = torch.zeros(64)
    A.bump_versions([t])
    bumps = [_per_call(lambda: A.bump_versions([t]), 20000) for _ in range(7)]
    out["bump_ns"] = round(statistics.median(bumps) * 1e9, 1)
    grad_test = [_per_call(lambda: A.torch_write_problem(t), 20000) for _ in range(7)]
    out["requires_grad_test_ns"] = round(statistics.median(grad_test) * 1e9, 1)
    targets = ["emulator"]
    from anywave.runtime import opencl

    if opencl.status()[0]:
        targets.append("opencl")
    real = A.bump_versions
    out["launch_us"] = {}
    for target in targets:
        x, y = torch.ones(64), torch.zeros(64)

        def call(target=target, x=x, y=y):
            twice(x, y, 64, grid=(8, 1, 1), workgroup=(8, 1, 1), target=target)

        for _ in range(20):
            call()  # compile, record the plan
        with_bump, without = [], []
        calls = 200 if target == "emulator" else 1000
        for _ in range(9):
            A.bump_versions = real
            with_bump.append(_per_call(call, calls))
            A.bump_versions = lambda ts: None
            without.append(_per_call(call, calls))
        A.bump_versions = real
        w, wo = statistics.median(with_bump), statistics.median(without)
        out["launch_us"][target] = {"with_bump": round(w * 1e6, 2), "bump_replaced_by_noop": round(wo * 1e6, 2),
                                    "difference_us": round((w - wo) * 1e6, 3)}
    out["note"] = ("the machine is a shared 2-core CPU: launch times vary with load; the per-bump figure is the "
                   "bookkeeping's own cost")
    path = ROOT / "bench" / "results" / "torch_version_bump_cost.json"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
