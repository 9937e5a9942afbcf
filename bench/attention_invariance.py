"""Batch invariance of attention at the issue's sizes (issue 25, "Measure"): a row's output bits
are the same whether its sequence runs alone (B = 1) or inside a batch of 64 random others, and a
decoded row's bits are the same alone or inside a batch of 256 sequences — on every target named.

For each target: the ``exact`` forward (:func:`anywave.kernels.attention.attention`), the ``fast``
forward (:func:`anywave.kernels.attention_fast.attention_numpy`, bf16 through the fragment MMAs)
and the ``exact`` decode (:func:`anywave.kernels.attention.attention_decode`, its fixed split of
the key walk). Each is run on a batch, on the same batch with every other sequence drawn again,
and on a few of its sequences alone; the rows must be equal bit for bit. (A target that cannot
run the fast kernel, the cpu target without matrix fragments, records why.) The SHA-256 of the exact
results is recorded too: the exact variants give the same bits on every target, so the digests
must agree across targets (the fast variant is identical run to run on one target, and within
its bound across them).

    PYTHONPATH=src python bench/attention_invariance.py OUT.json [targets, default "cpu,opencl,sycl,vulkan,cuda"]

Sizes: forward B 64, Hq 2, Hkv 1, S 96 (not a multiple of the 64-row block), D 64, causal;
decode 256 sequences, H 2, one query row, 700 keys (two chunks of 512), D 64. A target that is not
available here is recorded as skipped with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

from anywave.errors import WaveError
from anywave.kernels import attention as A
from anywave.kernels import attention_fast as AF
from anywave.runtime.targets import target_status

ROWS_FWD = (0, 31, 63)
ROWS_DEC = (0, 100, 255)


def _bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x, np.float32).view(np.uint32).tobytes()


def _digest(*xs: np.ndarray) -> str:
    h = hashlib.sha256()
    for x in xs:
        h.update(_bits(x))
    return h.hexdigest()[:16]


def _redraw_others(arrs: tuple[np.ndarray, ...], keep: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The same batch with every sequence but ``keep`` drawn again."""
    out = []
    for a in arrs:
        b = rng.standard_normal(a.shape).astype(np.float32)
        b[keep] = a[keep]
        out.append(b)
    return tuple(out)


def _check(run, arrs: tuple[np.ndarray, ...], rows: tuple[int, ...], rng: np.random.Generator) -> dict:
    """``run(*arrs) -> (o, lse)`` on the batch, on each row alone and on the batch with the others
    redrawn; which rows kept their bits."""
    t0 = time.perf_counter()
    o, lse = run(*arrs)
    t_batch = time.perf_counter() - t0
    alone, redrawn = {}, {}
    for r in rows:
        o1, l1 = run(*(a[r:r + 1] for a in arrs))
        alone[r] = _bits(o1) == _bits(o[r:r + 1]) and _bits(l1) == _bits(lse[r:r + 1])
        o2, l2 = run(*_redraw_others(arrs, r, rng))
        redrawn[r] = _bits(o2[r:r + 1]) == _bits(o[r:r + 1]) and _bits(l2[r:r + 1]) == _bits(lse[r:r + 1])
    o3, l3 = run(*arrs)
    return {"batch": int(arrs[0].shape[0]), "rows": list(rows), "batch_s": round(t_batch, 3),
            "alone_equal": all(alone.values()), "others_redrawn_equal": all(redrawn.values()),
            "run_to_run_equal": _bits(o3) == _bits(o) and _bits(l3) == _bits(lse),
            "finite": bool(np.isfinite(o).all()), "sha256_16": _digest(o, lse)}


def run_target(target: str) -> dict:
    # the data of each part from its own seed (the same on every target, whichever parts run)
    rng, redraw = np.random.default_rng(25), np.random.default_rng(27)
    q = rng.standard_normal((64, 2, 96, 64)).astype(np.float32)
    k, v = (rng.standard_normal((64, 1, 96, 64)).astype(np.float32) for _ in range(2))
    res = {"exact_forward": _check(lambda q, k, v: A.attention(q, k, v, True, target=target), (q, k, v),
                                   ROWS_FWD, redraw)}
    print(target, "exact forward", res["exact_forward"], flush=True)
    try:
        res["fast_forward"] = _check(lambda q, k, v: AF.attention_numpy(q, k, v, True, target=target), (q, k, v),
                                     ROWS_FWD, redraw)
    except WaveError as e:  # a target without matrix fragments (the cpu target): the reason
        res["fast_forward"] = {"refused": str(e)[:300]}
    print(target, "fast forward", res["fast_forward"], flush=True)
    rng = np.random.default_rng(26)
    qd = rng.standard_normal((256, 2, 1, 64)).astype(np.float32)
    kd, vd = (rng.standard_normal((256, 2, 700, 64)).astype(np.float32) for _ in range(2))
    res["exact_decode"] = _check(lambda q, k, v: A.attention_decode(q, k, v, target=target), (qd, kd, vd),
                                 ROWS_DEC, redraw)
    print(target, "exact decode", res["exact_decode"], flush=True)
    return res


def main() -> int:
    out = sys.argv[1]
    targets = (sys.argv[2] if len(sys.argv) > 2 else "cpu,opencl,sycl,vulkan,cuda").split(",")
    commit = os.environ.get("ANYWAVE_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    report = {"what": "attention batch invariance (bench/attention_invariance.py)", "commit": commit,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "targets": {}}
    for t in targets:
        st = target_status(t)
        if st is None or not st.available:
            report["targets"][t] = {"skipped": "no such target" if st is None else st.reason}
            print(t, "skipped:", report["targets"][t]["skipped"], flush=True)
            continue
        report["targets"][t] = {"device": "; ".join(str(i) for i in st.infos)[:200], **run_target(t)}
    exact = {t: (r["exact_forward"]["sha256_16"], r["exact_decode"]["sha256_16"])
             for t, r in report["targets"].items() if "exact_forward" in r}
    report["exact_same_bits_on_every_target"] = len(set(exact.values())) <= 1
    checks = [r[k][c] for r in report["targets"].values() if "exact_forward" in r
              for k in ("exact_forward", "fast_forward", "exact_decode") if "refused" not in r[k]
              for c in ("alone_equal", "others_redrawn_equal", "run_to_run_equal", "finite")]
    report["all_checks_pass"] = all(checks) and report["exact_same_bits_on_every_target"]
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print("all checks pass:", report["all_checks_pass"], "->", out)
    return 0 if report["all_checks_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
