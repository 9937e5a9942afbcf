"""Issue 28 item 2 on CUDA, in one command: the language idioms run on the CUDA target at W = 32 and
are compared bit for bit with the emulator at W = 32 (and with NumPy where the tests do).

    PYTHONPATH=src python3 bench/lang28_cuda_check.py

Checks (kernels from tests/test_wave_barrier.py, tests/test_pow.py, tests/test_language_idioms.py):
the warp-synchronous reduction tail with ``aw.wave_barrier()`` and with CUDA ``__syncwarp()`` +
``volatile`` (PTX ``bar.warp.sync``: NumPy's sums), the same tail without the barrier (recorded,
not judged: a race, whatever it gives), ``aw.pow`` (the emulator's bits, spec §8.18), bool
buffers, dtype-generic kernels (f16, f32, f64, i32), local memory sized at launch
(``local_bytes=``), constant buffers. Writes ``$OUT/lang28_cuda.json`` (``$OUT`` or
bench/results) with device, commit, date and one entry per check; exit status 0 when all passed.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "src", ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402

import anywave as aw  # noqa: E402

W = 32
#: the target checked (another one only to try the script without a GPU)
TARGET = os.environ.get("LANG28_TARGET", "cuda")


def _commit() -> str:
    """``$ANYWAVE_COMMIT`` (the hash of the tree sent to a device, whose git copy may be stale), else git's."""
    if os.environ.get("ANYWAVE_COMMIT"):
        return os.environ["ANYWAVE_COMMIT"]
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main() -> int:
    import test_language_idioms as L
    import test_pow as P
    import test_wave_barrier as B

    results: list[dict[str, Any]] = []

    def check(name: str, fn: Any) -> None:
        try:
            ok, detail = fn()
            results.append({"check": name, "status": "pass" if ok else "fail", "detail": detail})
        except Exception as e:  # noqa: BLE001
            results.append({"check": name, "status": "error", "detail": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()[-2000:]})
        print(f"{results[-1]['status']:5}  {name}: {str(results[-1]['detail'])[:160]}", flush=True)

    x, exp = B._data()

    def tail_python() -> tuple[bool, str]:
        out = np.zeros(B.GRID, np.int32)
        B.tail_sum(x, out, grid=B.GRID, workgroup=B.WG, target=TARGET, wave_width=W)
        aw.synchronize()
        return bool(np.array_equal(out, exp)), f"sums {out.tolist()} expected {exp.tolist()}"

    def tail_cuda_source() -> tuple[bool, str]:
        out = np.zeros(B.GRID, np.int32)
        B._cuda(sync=True, vol=True)(x, out, grid=B.GRID, workgroup=B.WG, target=TARGET, wave_width=W)
        aw.synchronize()
        return bool(np.array_equal(out, exp)), f"sums {out.tolist()} expected {exp.tolist()}"

    def tail_without_barrier() -> tuple[bool, str]:
        out = np.zeros(B.GRID, np.int32)
        B.tail_sum(x, out, grid=B.GRID, workgroup=B.WG, target=TARGET, wave_width=W, sync=False)
        aw.synchronize()
        return True, f"(a race; recorded only) {int((out != exp).sum())} of {B.GRID} sums differ"

    def pow_bits() -> tuple[bool, str]:
        xs, ys = P._arguments(4, 4096)
        got = P._run(xs, ys, TARGET, W)
        ref = P._run(xs, ys, "emulator", W)
        bad = int((got.view(np.uint32) != ref.view(np.uint32)).sum())
        return bad == 0, f"{bad} of {xs.size} results differ from the emulator's bits"

    def bool_buffers() -> tuple[bool, str]:
        rng = np.random.default_rng(1)
        xx = rng.random(96).astype(np.float32)
        m = rng.random(96) < 0.4
        outs = []
        for target in (TARGET, "emulator"):
            big, y = np.zeros(96, bool), np.full(96, -1.0, np.float32)
            L.bool_kernel(xx, m, big, y, grid=3, workgroup=32, target=target, wave_width=W)
            aw.synchronize()
            outs.append((big, y))
        ok = _same(outs[0][0], outs[1][0]) and _same(outs[0][1], outs[1][1])
        return ok, "bool buffers: same bytes as the emulator" if ok else "bool buffers differ"

    def generic() -> tuple[bool, str]:
        rng = np.random.default_rng(2)
        bad = []
        for dt in (np.float16, np.float32, np.float64, np.int32):
            xx = (rng.standard_normal(50) * 100).astype(dt)
            o = np.zeros(1, dt)
            L.amax_kernel(xx, o, 50, grid=1, workgroup=32, target=TARGET, wave_width=W)
            aw.synchronize()
            if o[0] != xx.max():
                bad.append(np.dtype(dt).name)
        return not bad, f"wrong max for {bad}" if bad else "max of f16/f32/f64/i32 buffers"

    def dynamic_local() -> tuple[bool, str]:
        xx = np.random.default_rng(64).standard_normal(256).astype(np.float32)
        x0 = xx.copy()
        bits = np.zeros(256, np.uint32)
        L.reverse_blocks(xx, bits, grid=4, workgroup=64, target=TARGET, wave_width=W, local_bytes=256)
        aw.synchronize()
        e = x0.reshape(4, 64)[:, ::-1].ravel()
        return bool(np.array_equal(xx, e) and np.array_equal(bits, e.view(np.uint32))), "reversed blocks"

    def constant() -> tuple[bool, str]:
        rng = np.random.default_rng(5)
        xx = rng.standard_normal(128).astype(np.float32)
        c = np.sort(rng.standard_normal(7)).astype(np.float32)
        lab = np.zeros(128, np.int32)
        L.nearest_centre(xx, c, lab, 7, grid=4, workgroup=32, target=TARGET, wave_width=W)
        aw.synchronize()
        e = np.argmin(np.abs(xx[:, None] - c[None, :]), axis=1)
        return bool(np.array_equal(lab, e)), "nearest centres"

    for name, fn in (("wave_barrier tail (Python)", tail_python), ("__syncwarp tail (CUDA source)", tail_cuda_source),
                     ("tail without barrier (race, recorded)", tail_without_barrier), ("aw.pow bits", pow_bits),
                     ("bool buffers", bool_buffers), ("dtype-generic kernel", generic),
                     ("local memory sized at launch", dynamic_local), ("constant buffer", constant)):
        check(name, fn)

    try:
        from anywave.jit.targets import get_target

        info = get_target(TARGET).instance(W, None).info
        device = f"{info.device} {info.details}"
    except Exception as e:  # noqa: BLE001
        device = f"unknown ({type(e).__name__}: {e})"
    report = {"target": TARGET, "device": device, "commit": _commit(),
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(), "wave_width": W, "results": results}
    out = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "lang28_cuda.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'lang28_cuda.json'}")
    return 0 if all(r["status"] == "pass" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
