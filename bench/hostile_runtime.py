"""Hostile pass over the runtime (issue 31): array constructors with hostile shapes, dtypes and
objects; kernel calls with hostile buffer arguments; out-of-bounds kernels on every CPU target;
threads; fork; SIGINT. Counts per category: inputs, uncaught exceptions (an exception that is
not a :class:`~anywave.errors.WaveError` -- a raw TypeError, IndexError ...), crashes (a child
process killed by a signal or a wrong answer where one is defined) and hangs (a child past its
generous timeout).

Usage: ``python bench/hostile_runtime.py [--seed 0] [--json bench/results/hostile_runtime.json]``.

Generated sizes stay below 64 MiB, or above 2^63 bytes (which must be refused): the range in
between would really allocate on this shared machine. Crash-prone parts (out-of-bounds kernels,
fork, signals) run in child processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _blank() -> dict[str, int]:
    return {"inputs": 0, "uncaught": 0, "crashes": 0, "hangs": 0}


RESULTS: dict[str, dict[str, int]] = {}
EXAMPLES: dict[str, list[str]] = {}


def record(cat: str, outcome: str, example: str = "") -> None:
    r = RESULTS.setdefault(cat, _blank())
    r["inputs"] += 1
    if outcome != "ok":
        r[outcome] += 1
        ex = EXAMPLES.setdefault(cat, [])
        if len(ex) < 5:
            ex.append(example[:300])


# ------------------------------------------------------------------ arrays (in process)

def hostile_shapes(rng: np.random.Generator) -> object:
    k = int(rng.integers(0, 14))
    small = lambda: int(rng.integers(0, 9))  # noqa: E731
    return [
        lambda: int(rng.integers(0, 1000)),
        lambda: tuple(small() for _ in range(int(rng.integers(0, 5)))),
        lambda: -int(rng.integers(1, 10)),
        lambda: (small(), -1),
        lambda: 2 ** int(rng.integers(64, 130)),
        lambda: (2**32, 2**32, int(rng.integers(1, 9))),
        lambda: (2**31,) * int(rng.integers(2, 5)),
        lambda: float(rng.random() * 10),
        lambda: "3",
        lambda: [None],
        lambda: (True, 2),
        lambda: np.int64(small()),
        lambda: (np.uint64(2**63), 4),
        lambda: object(),
    ][k]()


def hostile_dtypes(rng: np.random.Generator) -> object:
    import ml_dtypes

    import anywave as aw

    pool = [np.float32, np.int8, np.uint64, np.bool_, ml_dtypes.bfloat16, aw.f32, aw.i32, aw.u8, object, str,
            np.complex64, np.complex128, "U4", "S3", "V8", [("a", "f4"), ("b", "i4")], ">f4", "<i8", "M8[s]",
            "m8", None, "nonsense", 3.5, aw.pred if hasattr(aw, "pred") else "f2", np.float16, int, float, bool]
    return pool[int(rng.integers(0, len(pool)))]


def hostile_data(rng: np.random.Generator) -> object:
    k = int(rng.integers(0, 12))
    return [
        lambda: rng.standard_normal(int(rng.integers(0, 20))).astype(np.float32),
        lambda: [1, 2, 3],
        lambda: [[1], [1, 2]],
        lambda: [1, "a"],
        lambda: np.array([1 + 2j]),
        lambda: np.array([object(), object()]),
        lambda: {"a": 1},
        lambda: None,
        lambda: "text",
        lambda: np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],
        lambda: np.zeros(5, ">f4"),
        lambda: 2**70,
    ][k]()


def run_arrays(rng: np.random.Generator, n: int, targets: list[str]) -> None:
    import anywave as aw
    from anywave.errors import WaveError

    for i in range(n):
        target = targets[i % len(targets)]
        which = int(rng.integers(0, 4))
        try:
            if which == 0:
                args = (hostile_shapes(rng), hostile_dtypes(rng))
                aw.zeros(*args, target=target)
            elif which == 1:
                args = (hostile_shapes(rng), hostile_dtypes(rng))
                aw.empty(*args, target=target)
            elif which == 2:
                args = (hostile_data(rng), hostile_dtypes(rng) if rng.random() < 0.5 else None)
                aw.array(*args, target=target)
            else:
                a = aw.zeros(int(rng.integers(0, 8)), np.float32, target=target)
                args = (hostile_data(rng),)
                a.assign(*args)
            record("arrays", "ok")
        except (WaveError, MemoryError):
            record("arrays", "ok")
        except Exception as e:  # noqa: BLE001 - what the pass counts
            record("arrays", "uncaught", f"{target} {which} {args!r}: {type(e).__name__}: {e}")


def run_buffer_args(rng: np.random.Generator, n: int, targets: list[str]) -> None:
    import anywave as aw
    from anywave.errors import WaveError

    @aw.kernel
    def inc(a: aw.Buffer[aw.f32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            a[i] += 1.0

    def value() -> object:
        k = int(rng.integers(0, 13))
        return [
            lambda: np.zeros(8, np.float32),
            lambda: np.zeros(8, np.float64),
            lambda: np.zeros(8, object),
            lambda: np.zeros(16, np.float32)[::2],
            lambda: np.frombuffer(bytes(32), np.float32),
            lambda: [0.0] * 8,
            lambda: None,
            lambda: memoryview(bytearray(32)),
            lambda: np.zeros(8, ">f4"),
            lambda: np.zeros((2, 4), np.float32),
            lambda: np.zeros(0, np.float32),
            lambda: "buffer",
            lambda: np.zeros(8, np.complex64),
        ][k]()

    for i in range(n):
        target = targets[i % len(targets)]
        v = value()
        cnt = [8, 0, -1, 2**31, 2**40, 1.5, "8"][int(rng.integers(0, 7))]
        try:
            inc(v, cnt, grid=1, workgroup=8, target=target)
            record("buffer_args", "ok")
        except WaveError:
            record("buffer_args", "ok")
        except Exception as e:  # noqa: BLE001
            record("buffer_args", "uncaught", f"{target} {type(v).__name__} {getattr(v, 'dtype', '')} {cnt!r}: "
                   f"{type(e).__name__}: {e}")


# ------------------------------------------------------------------ out of bounds (children)

OOB_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import anywave as aw
    from anywave.errors import WaveError, OutOfBoundsError, EmulationError

    @aw.kernel
    def poke(a: aw.Buffer[aw.f32], off: aw.i32, stride: aw.i32):
        i = aw.global_id(0)
        a[i * stride + off] = a[i * stride + off] + 1.0

    target, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(seed)
    res = {"ok": 0, "uncaught": 0, "mismatch": 0, "examples": []}
    for j in range(count):
        n = int(rng.integers(1, 300))
        off = int(rng.choice([0, 1, -1, n, n - 1, -n, 2**20, -2**20, 2**31 - 1, -2**31, int(rng.integers(-600, 600))]))
        stride = int(rng.choice([0, 1, 2, -1, 7, 1000, int(rng.integers(-5, 6))]))
        wg = int(rng.choice([8, 16, 32, 64]))
        dev = bool(rng.random() < 0.5) and target != "emulator"
        host = rng.standard_normal(n).astype(np.float32)
        emu = host.copy()
        try:
            poke(emu, off, stride, grid=1, workgroup=wg, target="emulator")
            emu_err = None
        except EmulationError as e:
            emu_err = type(e).__name__
        a = aw.array(host, target=target) if dev else host.copy()
        try:
            poke(a, off, stride, grid=1, workgroup=wg, target=target)
            if dev:
                aw.synchronize()
            err = None
        except OutOfBoundsError:
            err = "OutOfBoundsError"
        except WaveError as e:
            err = type(e).__name__
        except Exception as e:
            res["uncaught"] += 1
            res["examples"].append(f"{n} {off} {stride} {wg}: {type(e).__name__}: {e}"[:300])
            continue
        # in bounds: the same values as the emulator (lanes with equal addresses race: skip those)
        if (emu_err is None) != (err is None):
            res["mismatch"] += 1
            res["examples"].append(f"n={n} off={off} stride={stride} wg={wg} emu={emu_err} target={err}")
        elif err is None and stride != 0:
            got = a.numpy() if dev else a
            if not np.array_equal(got, emu):
                res["mismatch"] += 1
                res["examples"].append(f"values differ n={n} off={off} stride={stride} wg={wg}")
        res["ok"] += 1
    print("RESULT", json.dumps(res), flush=True)
''')


def _child(code: str, argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[str, int | None]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
        path = f.name
    try:
        r = subprocess.run([sys.executable, path, *argv], capture_output=True, text=True, timeout=timeout,
                           env=env or dict(os.environ))
        return r.stdout + "\n" + r.stderr[-1500:], r.returncode
    except subprocess.TimeoutExpired:
        return "TIMEOUT", None
    finally:
        os.unlink(path)


def run_oob(targets: list[str], per_child: int, children: int, seed: int) -> None:
    for t in targets:
        cat = f"oob_{t}"
        for c in range(children):
            out, rc = _child(OOB_CHILD, [t, str(seed * 1000 + c), str(per_child)], 900)
            line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
            if rc is None:
                for _ in range(per_child):
                    record(cat, "hangs", "child timed out")
                continue
            if line is None or rc != 0:
                for _ in range(per_child):
                    record(cat, "crashes", f"rc={rc}: {out[-500:]}")
                continue
            res = json.loads(line[7:])
            for _ in range(res["ok"]):
                record(cat, "ok")
            for _ in range(res["uncaught"]):
                record(cat, "uncaught", "; ".join(res["examples"]))
            RESULTS[cat]["crashes"] += res["mismatch"]  # a wrong answer counts with the crashes
            if res["mismatch"]:
                EXAMPLES.setdefault(cat, []).extend(res["examples"][:5])


# ------------------------------------------------------------------ threads (in process)

def run_threads(rng: np.random.Generator, trials: int, targets: list[str]) -> None:
    import anywave as aw

    @aw.kernel
    def lin(x: aw.In[aw.f32], out: aw.Out[aw.f32], a: aw.f32, n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = a * x[i] + 1.0

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in targets:
            for _trial in range(trials):
                k = int(rng.integers(2, 9))
                n = int(rng.integers(1, 600))
                problems: list[str] = []
                start = threading.Barrier(k)

                def work(j: int, n: int = n, start: threading.Barrier = start, problems: list[str] = problems,
                         t: str = t) -> None:
                    x = np.arange(n, dtype=np.float32) + j
                    out = np.zeros(n, np.float32)
                    start.wait()
                    try:
                        lin(x, out, float(j + 2), n, grid=-(-n // 64), workgroup=64, target=t,
                            check=bool(j % 2))
                        if not np.array_equal(out, np.float32(j + 2) * x + np.float32(1.0)):
                            problems.append(f"thread {j}: wrong output")
                    except Exception as e:  # noqa: BLE001
                        problems.append(f"thread {j}: {type(e).__name__}: {e}")

                ths = [threading.Thread(target=work, args=(j,)) for j in range(k)]
                for th in ths:
                    th.start()
                for th in ths:
                    th.join(300)
                hung = any(th.is_alive() for th in ths)
                outcome = "hangs" if hung else ("crashes" if any("wrong" in p for p in problems)
                                                else "uncaught" if problems else "ok")
                record(f"threads_{t}", outcome, "; ".join(problems[:2]))
    finally:
        sys.setswitchinterval(old)


# ------------------------------------------------------------------ fork and signals (children)

FORK_CHILD = textwrap.dedent('''
    import multiprocessing as mp, sys
    import numpy as np
    import anywave as aw
    from anywave.errors import WaveError

    @aw.kernel
    def fill(out: aw.Out[aw.i32], n: aw.i32):
        i = aw.global_id(0)
        if i < n:
            out[i] = i

    def work(t, q):
        try:
            fill(np.zeros(8, np.int32), 8, grid=1, workgroup=8, target=t)
            q.put("RAN")
        except WaveError as e:
            q.put("CLEAN " + ("spawn" if "'spawn'" in str(e) else "other"))
        except Exception as e:
            q.put(f"UNCAUGHT {type(e).__name__}: {e}")

    targets = sys.argv[1].split(",")
    for t in targets:
        fill(np.zeros(8, np.int32), 8, grid=1, workgroup=8, target=t)
    ctx = mp.get_context("fork")
    for t in targets:
        for rep in range(int(sys.argv[2])):
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(t, q))
            p.start()
            p.join(120)
            if p.is_alive():
                p.kill(); print("FORK", t, "HUNG", flush=True)
            else:
                print("FORK", t, q.get() if not q.empty() else f"EXIT {p.exitcode}", flush=True)
''')


def run_fork(targets: list[str], reps: int) -> None:
    out, rc = _child(FORK_CHILD, [",".join(targets), str(reps)], 900)
    for t in targets:
        lines = [ln for ln in out.splitlines() if ln.startswith(f"FORK {t} ")]
        for ln in lines:
            tail = ln.split(" ", 2)[2]
            outcome = ("ok" if tail == "CLEAN spawn" else "hangs" if tail == "HUNG" else
                       "uncaught" if tail.startswith(("UNCAUGHT", "CLEAN other")) else "crashes")
            record(f"fork_{t}", outcome, tail)
        for _ in range(reps - len(lines)):
            record(f"fork_{t}", "crashes" if rc is not None else "hangs", out[-400:])


SIG_CHILD = textwrap.dedent('''
    import sys, numpy as np
    import anywave as aw
    from anywave.asm import assemble
    from anywave.runtime.targets import get_target
    SPIN = """.version 1.0
    .kernel spin
    .arg y buffer u32 readwrite
    .registers 4
        movi.b32 r1, 0
        loop
            movi.b32 r2, 1
            add.i32 r1, r1, r2
        endloop
        halt
    .end
    """
    target, how = sys.argv[1], sys.argv[2]
    t = get_target(target, wave_width=8)
    m = assemble(SPIN, "spin.wave")
    y = aw.zeros(8, np.uint32, target=target)
    if how == "host":
        print("READY", flush=True)
        t.launch(m, "spin", (1,), (8,), {"y": np.zeros(8, np.uint32)})
    else:
        t.launch(m, "spin", (1,), (8,), {"y": y}, sync=False, check=False)
        print("READY", flush=True)
        if how == "sync":
            aw.synchronize()
        else:
            y.numpy()
''')


def run_signals(rng: np.random.Generator, targets: list[str], per_target: int) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(SIG_CHILD)
        path = f.name
    try:
        for t in targets:
            for j in range(per_target):
                how = ["host", "sync", "numpy"][j % 3]
                p = subprocess.Popen([sys.executable, path, t, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
                first = p.stdout.readline()
                time.sleep(float(rng.random()) * 0.5)  # at a random point of the wait
                p.send_signal(signal.SIGINT)
                try:
                    _, err = p.communicate(timeout=120)
                    ok = first.startswith("READY") and "KeyboardInterrupt" in err and p.returncode not in (0, None)
                    record(f"sigint_{t}", "ok" if ok else "crashes", f"{how} rc={p.returncode} {err[-300:]}")
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
                    record(f"sigint_{t}", "hangs", how)
    finally:
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arrays", type=int, default=3000)
    ap.add_argument("--buffer-args", type=int, default=900)
    ap.add_argument("--oob-per-child", type=int, default=250)
    ap.add_argument("--oob-children", type=int, default=2)
    ap.add_argument("--thread-trials", type=int, default=60)
    ap.add_argument("--forks", type=int, default=4)
    ap.add_argument("--signals", type=int, default=6)
    ap.add_argument("--json")
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    from anywave.runtime.targets import target_status

    cpu = [t for t in ("opencl", "sycl") if (st := target_status(t)) is not None and st.available]
    forkable = cpu + [t for t in ("vulkan",) if (st := target_status(t)) is not None and st.available]
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    run_arrays(rng, args.arrays, ["emulator", *cpu])
    run_buffer_args(rng, args.buffer_args, ["emulator", *cpu])
    run_oob(cpu, args.oob_per_child, args.oob_children, args.seed)
    run_threads(rng, args.thread_trials, cpu)
    run_fork(forkable, args.forks)
    run_signals(rng, cpu, args.signals)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=HERE).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    total = Counter()
    for r in RESULTS.values():
        total.update(r)
    out = {"bench": "hostile_runtime", "seed": args.seed, "commit": commit, "targets": ["emulator", *cpu],
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(time.time() - t0, 1),
           "categories": RESULTS, "total": dict(total), "examples": EXAMPLES}
    text = json.dumps(out, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
