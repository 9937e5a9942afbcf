"""Conformance of the CUDA target (PTX backend) against the emulator at W = 32, in one command.

    python bench/cuda_conformance.py [--quick] [--out DIR] [--device N]

1. discovers the device (name, compute capability, driver);
2. runs the whole conformance suite at W = 32 through the CUDA target, each group in a
   child process with a timeout (a hang or a sticky CUDA error costs one group, not the run);
   every case is judged against its independent expected values (class-aware, as for every
   target) *and* compared with the emulator at W = 32 output by output (bit-for-bit; NaNs
   count as equal where the output's class is exact-nan);
3. runs the bundled examples on both and compares bit-for-bit;
4. writes ``OUT/cuda_conformance.json`` (device, driver, commit, date, per-case results with
   the first mismatch) and prints a summary. OUT is ``--out``, else ``$OUT``, else
   ``bench/results``. Exit status 0 when everything passed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

W = 32
QUICK_GROUPS = ("integer", "float", "convert", "control", "wave", "memory", "atomic", "sync", "sync.wave")


def _commit() -> str:
    env = os.environ.get("ANYWAVE_COMMIT")
    if env:
        return env
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                                   text=True, timeout=10).stdout.strip()
            return r.stdout.strip() + ("+dirty" if dirty else "")
    except Exception:  # noqa: BLE001
        pass
    return "unknown"


def _output(args: dict[str, Any], name: str) -> np.ndarray:
    """An output by name; ``a+b`` concatenates outputs (as the suite does)."""
    if "+" in name:
        return np.concatenate([np.asarray(args[p]).reshape(-1).view(np.uint8) for p in name.split("+")])
    return np.asarray(args[name])


def _first_mismatch(name: str, exp: np.ndarray, got: np.ndarray, how: Any) -> str | None:
    """Bitwise comparison; NaN == NaN when the output's comparison is not plain exact."""
    e, g = np.ascontiguousarray(exp), np.ascontiguousarray(got)
    if e.nbytes != g.nbytes:
        return f"{name}: size {g.nbytes} bytes, emulator {e.nbytes}"
    eb, gb = e.reshape(-1).view(np.uint8), g.reshape(-1).view(np.uint8)
    if np.array_equal(eb, gb):
        return None
    ftype = getattr(how, "ftype", None)
    if ftype in ("f16x2", "bf16x2"):
        ftype = ftype[:-2]
    item = e.dtype.itemsize
    if ftype in ("f32", "f64", "f16", "bf16") and getattr(how, "mode", "exact") != "exact":
        import ml_dtypes

        dt = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[ftype]
        ev, gv = eb.view(dt).astype(np.float64), gb.view(dt).astype(np.float64)
        same = (eb.view(f"u{np.dtype(dt).itemsize}") == gb.view(f"u{np.dtype(dt).itemsize}")) | (
            np.isnan(ev) & np.isnan(gv))
        bad = np.flatnonzero(~same)
        if bad.size == 0:
            return None
        i = int(bad[0])
        return (f"{name}[{i}]: cuda {gv[i]!r} ({int(gb.view(f'u{np.dtype(dt).itemsize}')[i]):#x}), emulator "
                f"{ev[i]!r} ({int(eb.view(f'u{np.dtype(dt).itemsize}')[i]):#x}); {bad.size} differ")
    if item in (1, 2, 4, 8):
        ue, ug = eb.view(f"u{item}"), gb.view(f"u{item}")
        bad = np.flatnonzero(ue != ug)
        i = int(bad[0])
        return f"{name}[{i}]: cuda {int(ug[i]):#x}, emulator {int(ue[i]):#x}; {bad.size} elements differ"
    i = int(np.flatnonzero(eb != gb)[0])
    return f"{name}: first differing byte {i}"


# ------------------------------------------------------------------------ one group (child)

def run_group_child(group: str, out_json: str, device: int) -> None:
    """Run one conformance group on CUDA and the emulator; write per-case results."""
    from anywave.runtime.cuda import CudaTarget, cuda_runner

    target = CudaTarget(device)
    run_group_cases(group, cuda_runner(target), target.load, out_json)


def run_group_cases(group: str, runner: Any, load: Any, out_json: str, label: str = "cuda",
                    extra: Any = None) -> None:
    """Run every case of ``group`` through ``runner`` (after ``load(module)``, timed as the
    compile), judge it with the suite's comparison, compare each exact-class output bit for bit
    with the emulator at the same W, and write ``{"results", "compile_s", **extra(module)}`` to
    ``out_json``. One case's failure never stops the group."""
    from anywave.conformance import assemble_group, kernel_name, load_cases, run_case
    from anywave.emu import emulate

    results: list[dict[str, Any]] = []
    module = assemble_group(group)
    compile_s = None

    def write() -> None:
        Path(out_json).write_text(json.dumps({"results": results, "compile_s": compile_s,
                                              **(extra(module) if extra else {})}))

    try:
        t0 = time.perf_counter()
        load(module)
        compile_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        for c in load_cases([group]):
            results.append({"case": c.name, "group": group, "status": "error", "emulator_match": None,
                            "message": f"module load failed: {type(e).__name__}: {e}"[:4000]})
        write()
        return
    for case in load_cases([group]):
        entry: dict[str, Any] = {"case": case.name, "group": group}
        try:
            r = run_case(case, runner, W, module=module)
            entry.update(status=r.status, message=r.message, seconds=round(r.seconds, 4))
            if r.status == "skip":
                entry["emulator_match"] = None
                results.append(entry)
                continue
            if case.expect_refusal:  # run_case saw the refusal and the untouched buffers; so does the emulator
                entry["emulator_match"] = r.status == "pass"
                results.append(entry)
                continue
            # bit-for-bit against the emulator at the same W
            a_dev = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.args.items()}
            a_emu = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.args.items()}
            runner(module, kernel_name(case), case.grid, case.workgroup, a_dev, W)
            emulate(module, kernel_name(case), grid=case.grid, workgroup=case.workgroup, args=a_emu, wave_width=W)
            mism = []
            for name in sorted(case.expected_for(W)):
                how = case.compare_for(name)
                if getattr(how, "mode", "exact") not in ("exact", "exact-nan"):
                    continue  # schedule/approx/bounded outputs: judged by the suite's comparison only
                m = _first_mismatch(name, _output(a_emu, name), _output(a_dev, name), how)
                if m:
                    mism.append(m.replace("cuda ", f"{label} ", 1))
            entry["emulator_match"] = not mism
            if mism:
                entry["emulator_mismatch"] = mism[0]
        except Exception as e:  # noqa: BLE001 - one case's failure must not stop the group
            entry.update(status=entry.get("status", "error"), emulator_match=False,
                         message=entry.get("message") or f"{type(e).__name__}: {e}",
                         traceback="".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:]))
        results.append(entry)
    write()


# ------------------------------------------------------------------------ examples

def _examples(device: int) -> list[dict[str, Any]]:
    from anywave.emu import emulate
    from anywave.runtime.cuda import CudaTarget, load_example

    target = CudaTarget(device)
    rng = np.random.default_rng(0)
    n = 100_003
    x = (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)
    y = (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)
    u = rng.integers(0, 2**32, n, dtype=np.uint32)
    g256 = (n + 255) // 256
    launches = [
        ("saxpy", "saxpy", g256, 256, {"a": np.float32(0.75), "x": x, "y": y.copy(), "n": n}),
        ("reduce_sum", "reduce_sum", g256, 256, {"x": x, "partial": np.zeros(g256, np.float32), "n": n}),
        ("prefix_sum", "prefix_sum", g256, 256, {"x": u, "y": np.zeros(n, np.uint32), "n": n}),
        ("histogram", "histogram_local", (n + 63) // 64, 64,
         {"data": u, "hist": np.zeros(64, np.uint32), "n": n}),
        ("histogram", "histogram", g256, 256, {"data": u, "hist": np.zeros(64, np.uint32), "n": n, "nbins": 64}),
    ]
    out = []
    for ex, kernel, grid, wg, args in launches:
        entry: dict[str, Any] = {"example": ex, "kernel": kernel}
        try:
            m = load_example(ex)
            a_c = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            a_e = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            t0 = time.perf_counter()
            target.launch(m, kernel, grid, wg, a_c)
            entry["cuda_s"] = round(time.perf_counter() - t0, 4)
            emulate(m, kernel, grid=grid, workgroup=wg, args=a_e, wave_width=W)
            mism = [mm for k in a_e if isinstance(a_e[k], np.ndarray)
                    for mm in [_first_mismatch(k, a_e[k], a_c[k], None)] if mm]
            entry["status"] = "pass" if not mism else "fail"
            if mism:
                entry["message"] = mism[0]
        except Exception as e:  # noqa: BLE001
            entry["status"] = "error"
            entry["message"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    return out


# ------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the core groups " + ", ".join(QUICK_GROUPS))
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

    out_dir = Path(args.out or os.environ.get("OUT") or ROOT / "bench" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"commit": _commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                              "wave_width": W, "python": sys.version.split()[0]}
    ok, reason = cuda.driver_status()
    if not ok:
        print(f"no CUDA device: {reason}")
        report["error"] = reason
        if args.out or os.environ.get("OUT"):  # never clobber recorded results with "no device"
            (out_dir / "cuda_conformance.json").write_text(json.dumps(report, indent=1))
        return 2
    p = cuda.device_properties(args.device)
    report["device"] = {"name": p.name, "compute_capability": f"{p.compute_capability[0]}.{p.compute_capability[1]}",
                        "arch": p.arch, "multiprocessors": p.multiprocessors, "total_memory": p.total_memory,
                        "driver_version": p.driver_version}
    try:
        report["device"]["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", f"--id={args.device}"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    print(f"device {args.device}: {p.name}, {p.arch}, {p.multiprocessors} SMs, "
          f"{p.total_memory / 2**30:.1f} GiB, CUDA driver {p.driver_version}")

    groups = args.group or (list(QUICK_GROUPS) if args.quick else group_names())
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
            report["groups"][g] = {"compile_s": data.get("compile_s"), "seconds": round(time.perf_counter() - t0, 2)}
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
    try:
        report["examples"] = _examples(args.device)
    except Exception as e:  # noqa: BLE001
        report["examples"] = [{"status": "error", "message": f"{type(e).__name__}: {e}"}]
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    report["counts"] = counts
    emu_diff = [r for r in results if r.get("emulator_match") is False]
    report["emulator_mismatches"] = len(emu_diff)
    (out_dir / "cuda_conformance.json").write_text(json.dumps(report, indent=1))

    print()
    print(f"suite at W={W}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {len(emu_diff)} cases differ from the emulator")
    for r in results:
        if r["status"] not in ("pass", "skip") or r.get("emulator_match") is False:
            msg = (r.get("message") or r.get("emulator_mismatch") or "").strip().splitlines()
            print(f"  {r['status']:<5} {r['case']}: {msg[0][:200] if msg else ''}")
            if r.get("emulator_mismatch"):
                print(f"        vs emulator: {r['emulator_mismatch'][:200]}")
    print("examples:")
    for e in report["examples"]:
        print(f"  {e.get('status'):<5} {e.get('example', '?')}/{e.get('kernel', '?')} {e.get('message', '')}")
    print(f"wrote {out_dir / 'cuda_conformance.json'}")
    all_ok = (not emu_diff and all(r["status"] in ("pass", "skip") for r in results)
              and all(e.get("status") == "pass" for e in report["examples"]))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
