"""Hostile pass of issue 31 (items 1, 8, 10-12, 14): malformed inputs through every translator,
random kernels differentially on the emulator, Vulkan (lavapipe) and OpenCL.

Usage::

    nice python bench/fuzz_robust_sc.py [--wbin 2500] [--wave 2500] [--diff 300] [--seed 7] [--json OUT]

Categories:

* ``wbin``: a mutated ``.wbin`` (tests/test_fuzz.py's mutators) read with ``read_wbin``; a module
  that reads goes through all six translators (PTX, OpenCL C, SYCL, HIP, Metal, SPIR-V; translation
  only, no device);
* ``wave``: a mutated ``.wave`` text (examples and conformance sources) assembled, then the same;
* ``diff``: a random kernel (tests/test_cfamily_diff.py's instruction pool: integer, bitwise, float,
  compare and convert instructions of the exact classes, ifs, divergent loops, and ``movi``
  literals of special values feeding them) run on the emulator, Vulkan and OpenCL at a random W the
  device offers; outputs compared bit for bit (NaN as a class).

An input passes when every step succeeds or raises a ``WaveError``; anything else is an
*uncaught* exception. Each category runs in child processes of ``CHUNK`` inputs: a child killed by
a signal is a *crash* (its chunk is recorded); an input running longer than ``HANG_SECONDS`` is a
*hang* (SIGALRM). Writes a JSON summary (inputs per category, uncaught, crashes, hangs, mismatches,
first tracebacks, commit, date, devices).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
HANG_SECONDS = 60
CHUNK = 2500
W_CHOICES = (8, 16, 32, 64)
SPECIAL = (0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1, 0x3F800000, 0xBF800000, 0x00800000, 0x7F7FFFFF)


class Hang(BaseException):
    pass


def _alarm(signum, frame):  # noqa: ANN001
    raise Hang()


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except OSError:
        return "unknown"


def _translators(rng: random.Random):  # noqa: ANN202
    from anywave.backends import hip, metal, opencl, ptx, spirv, sycl

    W = rng.choice(W_CHOICES)
    return [("ptx", lambda m: ptx.translate(m)), ("opencl", lambda m: opencl.translate(m, W)),
            ("sycl", lambda m: sycl.translate(m, W)), ("hip", lambda m: hip.translate(m)),
            ("metal", lambda m: metal.translate(m)), ("spirv", lambda m: spirv.translate(m, W))]


def translate_all(m, rng: random.Random, out: collections.Counter) -> None:  # noqa: ANN001
    from anywave.errors import WaveError

    for name, fn in _translators(rng):
        try:
            fn(m)
            out[f"{name}:ok"] += 1
        except WaveError as e:
            out[f"{name}:{type(e).__name__}"] += 1


def case_wbin(rng: random.Random, seeds: dict, out: collections.Counter) -> None:
    import test_fuzz as fz
    from anywave.binary.wbin import read_wbin
    from anywave.errors import WaveError

    data = fz.mutate_binary(rng.choice(seeds["binaries"]), rng)
    try:
        m = read_wbin(data)
    except WaveError as e:
        out[f"read:{type(e).__name__}"] += 1
        return
    translate_all(m, rng, out)


def case_wave(rng: random.Random, seeds: dict, out: collections.Counter) -> None:
    import test_fuzz as fz
    from anywave.asm import assemble
    from anywave.errors import WaveError

    text = fz.mutate_text(rng.choice(seeds["texts"]), rng)
    try:
        m = assemble(text, "fuzz.wave")
    except WaveError as e:
        out[f"asm:{type(e).__name__}"] += 1
        return
    translate_all(m, rng, out)


def _diff_kernel(rng: random.Random) -> str:
    import test_cfamily_diff as cd

    def instr() -> str:
        if rng.random() < 0.25:  # a literal, often an IEEE special value, feeding what follows
            return f"    movi.b32 r{rng.randrange(cd.NREG)}, {rng.choice(SPECIAL):#x}"
        d = rng.choice(cd.POOL)
        ops = []
        for k in d.operands:
            if k.name in ("RD", "RS"):
                ops.append(f"r{rng.randrange(cd.NREG)}")
            elif k.name == "PD":
                ops.append(f"p{rng.randrange(7)}")
            else:
                ops.append(("!" if rng.random() < 0.5 else "") + f"p{rng.randrange(7)}")
        guard = (("@!" if rng.random() < 0.5 else "@") + f"p{rng.randrange(7)} ") if rng.random() < 0.15 else ""
        return f"    {guard}{d.mnemonic} {', '.join(ops)}"

    def block(depth: int) -> list[str]:
        out: list[str] = []
        for _ in range(rng.randint(1, 6)):
            c = rng.randrange(10) if depth < 2 else 0
            if c == 8:
                out.append(f"    if {'!' if rng.random() < 0.5 else ''}p{rng.randrange(7)}")
                out += block(depth + 1)
                if rng.random() < 0.5:
                    out += ["    else", *block(depth + 1)]
                out.append("    endif")
            elif c == 9 and depth == 0:
                out += ["    movi.b32 r9, 3", f"    and.b32 r8, r{rng.randrange(cd.NREG)}, r9", "    loop",
                        "    movi.b32 r9, 0", "    setp.eq.u32 p7, r8, r9", "    break p7", *block(depth + 1),
                        "    movi.b32 r9, 1", "    sub.i32 r8, r8, r9", "    endloop"]
            else:
                out.append(instr())
        return out

    return cd._kernel("k0", block(0))


def case_diff(rng: random.Random, seeds: dict, out: collections.Counter) -> None:
    import numpy as np

    import test_cfamily_diff as cd
    from anywave.asm import assemble
    from anywave.emu import emulate

    src = _diff_kernel(rng)
    m = assemble(src, "diff.wave")
    n = cd.GROUP * cd.GRID
    x = np.array([rng.getrandbits(32) for _ in range(n * 8)], np.uint32)
    pick = np.array([rng.random() < 0.35 for _ in range(x.size)])
    x[pick] = np.array([rng.choice(cd.SPECIAL) for _ in range(int(pick.sum()))], np.uint32)
    widths = [w for w in seeds["vk_widths"] if w in W_CHOICES] or [8]
    W = rng.choice(widths)
    want = np.zeros(n * 16, np.uint32)
    emulate(m, "k0", grid=(cd.GRID, 1, 1), workgroup=(cd.GROUP, 1, 1), args={"x": x, "y": want}, wave_width=W)
    for name, runner in seeds["runners"]:
        got = np.zeros_like(want)
        runner(m, "k0", (cd.GRID, 1, 1), (cd.GROUP, 1, 1), {"x": x.copy(), "y": got}, W)
        ok = cd._nan_class_equal(want, got)
        if ok.all():
            out[f"diff:{name}:same"] += 1
        else:
            out[f"diff:{name}:MISMATCH"] += 1
            i = int(np.flatnonzero(~ok)[0])
            seeds["mismatches"].append({"target": name, "W": W, "word": i, "emulator": f"{int(want[i]):#010x}",
                                        "target_value": f"{int(got[i]):#010x}", "source": src})


def worker(kind: str, seed: int, count: int) -> dict:
    rng = random.Random(seed)
    seeds: dict = {"mismatches": []}
    if kind in ("wbin", "wave"):
        from fuzz_pipeline import seed_texts  # type: ignore[import-not-found]

        import test_fuzz as fz

        seeds["binaries"] = fz.seed_binaries()
        seeds["texts"] = seed_texts()
    else:
        from anywave.runtime import opencl, vulkan

        seeds["runners"] = []
        seeds["vk_widths"] = list(W_CHOICES)
        if vulkan.status()[0]:
            vr = vulkan.VulkanRunner()
            seeds["runners"].append(("vulkan", vr))
            seeds["vk_widths"] = list(vr.dev.features.wave_widths)
        if opencl.status()[0]:
            seeds["runners"].append(("opencl", opencl.OpenCLRunner(opencl.get_device())))
    fn = {"wbin": case_wbin, "wave": case_wave, "diff": case_diff}[kind]
    outcomes: collections.Counter = collections.Counter()
    uncaught: collections.Counter = collections.Counter()
    first: dict[str, str] = {}
    hangs = 0
    signal.signal(signal.SIGALRM, _alarm)
    for i in range(count):
        signal.alarm(HANG_SECONDS)
        try:
            fn(random.Random(rng.getrandbits(64)), seeds, outcomes)
        except Hang:
            hangs += 1
        except Exception as e:  # noqa: BLE001 - what we look for
            from anywave.errors import WaveError

            key = f"{type(e).__module__}.{type(e).__name__}"
            if isinstance(e, WaveError):  # a diff case's launch refused: an outcome, not a finding
                outcomes[f"{kind}:{type(e).__name__}"] += 1
            else:
                uncaught[key] += 1
                first.setdefault(key, f"seed {seed} input {i}\n{traceback.format_exc()}")
        finally:
            signal.alarm(0)
    return {"inputs": count, "outcomes": dict(outcomes), "uncaught": dict(uncaught), "hangs": hangs,
            "first_tracebacks": first, "mismatches": seeds["mismatches"][:20],
            "mismatch_count": len(seeds["mismatches"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wbin", type=int, default=2500)
    ap.add_argument("--wave", type=int, default=2500)
    ap.add_argument("--diff", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results"
                                          / f"robust_sc_fuzz_{time.strftime('%Y-%m-%d')}.json"))
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "SEED", "COUNT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker[0], int(a.worker[1]), int(a.worker[2]))), flush=True)
        return 0
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench"), env.get("PYTHONPATH", "")])
    rng = random.Random(a.seed)
    t0 = time.perf_counter()
    summary: dict = {"categories": {}}
    for kind, total, chunk in (("wbin", a.wbin, CHUNK), ("wave", a.wave, CHUNK), ("diff", a.diff, 25)):
        cat = {"inputs": 0, "uncaught": collections.Counter(), "crashes": 0, "crashed_chunks": [], "hangs": 0,
               "mismatches": 0, "outcomes": collections.Counter(), "first_tracebacks": {}, "mismatch_examples": []}
        done = 0
        while done < total:
            n = min(chunk, total - done)
            seed = rng.getrandbits(32)
            r = subprocess.run([sys.executable, __file__, "--worker", kind, str(seed), str(n)], env=env,
                               capture_output=True, text=True, timeout=HANG_SECONDS * n + 600)
            line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if r.returncode < 0 or line is None:
                cat["crashes"] += 1
                cat["crashed_chunks"].append({"seed": seed, "count": n, "returncode": r.returncode,
                                              "stderr": r.stderr[-1500:]})
                cat["inputs"] += n
            else:
                res = json.loads(line[7:])
                cat["inputs"] += res["inputs"]
                cat["uncaught"].update(res["uncaught"])
                cat["hangs"] += res["hangs"]
                cat["mismatches"] += res["mismatch_count"]
                cat["outcomes"].update(res["outcomes"])
                for k, v in res["first_tracebacks"].items():
                    cat["first_tracebacks"].setdefault(k, v)
                cat["mismatch_examples"] += res["mismatches"][: max(0, 5 - len(cat["mismatch_examples"]))]
            done += n
            print(f"{kind}: {cat['inputs']}/{total} inputs, {sum(cat['uncaught'].values())} uncaught, "
                  f"{cat['crashes']} crashed chunks, {cat['hangs']} hangs, {cat['mismatches']} mismatches "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        cat["uncaught_total"] = sum(cat["uncaught"].values())
        cat["uncaught"] = dict(cat["uncaught"])
        cat["outcomes"] = dict(sorted(cat["outcomes"].items()))
        summary["categories"][kind] = cat
    devices = {}
    try:
        from anywave.runtime import opencl, vulkan

        if vulkan.status()[0]:
            d = vulkan.get_device()
            devices["vulkan"] = f"{d.name} ({d.driver})"
        if opencl.status()[0]:
            devices["opencl"] = opencl.get_device().name
    except Exception as e:  # noqa: BLE001
        devices["error"] = repr(e)
    summary.update({
        "command": "nice python bench/fuzz_robust_sc.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seed": a.seed, "seconds": round(time.perf_counter() - t0, 1), "devices": devices,
        "totals": {k: sum(c[k if k != "uncaught" else "uncaught_total"] for c in summary["categories"].values())
                   for k in ("inputs", "uncaught", "crashes", "hangs", "mismatches")},
        "python": platform.python_version(), "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    })
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["totals"]))
    bad = summary["totals"]
    return 1 if bad["uncaught"] or bad["crashes"] or bad["hangs"] or bad["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
