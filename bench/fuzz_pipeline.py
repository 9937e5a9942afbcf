"""Fuzzing the whole pipeline: reader, assembler, verifier, emulator and every translator.

Usage::

    nice python bench/fuzz_pipeline.py [--cases 100000] [--seed 1] [--json OUT.json]

Each case is one of

* ``binary``: a mutated ``.wbin`` (the mutators of ``tests/test_fuzz.py``) read with ``read_wbin``;
* ``text``: a mutated ``.wave`` text (the bundled examples and every conformance group's source)
  assembled and verified;
* ``callgraph``: a random module of up to 20 functions whose call graph is a random DAG with
  random fan-out (1..12 call instructions per edge, so the inlined size ranges from a handful
  to far past ``LIMITS.max_inlined_instructions``; issue 11, item 16), random straight-line
  bodies, loops and guarded calls.

A module that reads and verifies then goes through ``ptx.translate`` and the OpenCL, SYCL, HIP
and Metal renderers, and every kernel (at most two) is launched on the emulator with zeroed
buffers of 256 bytes at a random W, ``budget=0.05`` s and ``max_loop_iterations=200``.

A case *passes* when every step either succeeds or raises a ``WaveError`` subclass; anything
else is an *uncaught exception*; a case running longer than 30 s is a *hang* (interrupted with
SIGALRM). Prints and optionally writes a JSON summary (cases, outcomes, uncaught exceptions by
type with the first traceback, hangs, seconds, commit, date).
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_fuzz as fz  # noqa: E402
from anywave.asm import assemble  # noqa: E402
from anywave.backends import hip, metal, opencl, ptx, sycl  # noqa: E402
from anywave.binary.module import Function, Instruction, Kernel, Module, Pred  # noqa: E402
from anywave.binary.verify import verify  # noqa: E402
from anywave.binary.wbin import read_wbin  # noqa: E402
from anywave.emu import emulate  # noqa: E402
from anywave.errors import WaveError  # noqa: E402
from anywave.isa.types import ArgKind, SpecialRegister  # noqa: E402

I = Instruction.make  # noqa: E741
HANG_SECONDS = 30
#: valid random call graphs whose inlined size exceeds this are verified but not translated or
#: run: a valid kernel of up to LIMITS.max_inlined_instructions takes seconds to translate and
#: emulate, which a 100,000-case run on one core cannot afford
MAX_RUN_INLINED = 2_000


def _inlined(m: Module) -> int:
    memo: dict[int, int] = {}

    def size(code, fi=None):  # noqa: ANN001, ANN202
        if fi is not None and fi in memo:
            return memo[fi]
        n = sum(1 + (size(m.functions[i.operands[0]].code, i.operands[0]) if i.defn.op == "call" else 0)
                for i in code)
        if fi is not None:
            memo[fi] = n
        return n
    return max((size(k.code) for k in m.kernels), default=0)


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


def seed_texts() -> list[str]:
    out = [t for _, t in fz.seed_texts()]
    try:
        from anywave.conformance import load_cases

        cases = load_cases()
        out += [c.source for c in random.Random(0).sample(cases, min(150, len(cases)))]
    except Exception:  # noqa: BLE001 - the examples alone still fuzz
        pass
    return out


_BODY = [
    lambda r, rng: I("movi.b32", rng.randrange(r), rng.choice([0, 1, 7, 0xFFFFFFFF, 0x80000000])),
    lambda r, rng: I("add.i32", rng.randrange(r), rng.randrange(r), rng.randrange(r)),
    lambda r, rng: I("mul.i32", rng.randrange(r), rng.randrange(r), rng.randrange(r)),
    lambda r, rng: I("div.i32", rng.randrange(r), rng.randrange(r), rng.randrange(r)),
    lambda r, rng: I("max.f32", rng.randrange(r), rng.randrange(r), rng.randrange(r)),
    lambda r, rng: I("setp.lt.u32", rng.randrange(8), rng.randrange(r), rng.randrange(r)),
    lambda r, rng: I("mov.sr", rng.randrange(r), SpecialRegister.THREAD_LINEAR_ID),
    lambda r, rng: I("nop"),
]


def random_callgraph(rng: random.Random) -> Module:
    """A random module whose call graph is a DAG (edges only to higher-numbered functions)."""
    nf = rng.randint(1, 20)
    regs = rng.randint(4, 32)
    chain = rng.random() < 0.3  # item 16's shape: f_i calls f_{i+1} many times
    funcs = []
    for fi in range(nf):
        code: list[Instruction] = []
        for _ in range(rng.randint(0, 6)):
            code.append(rng.choice(_BODY)(regs, rng))
        if fi + 1 < nf:
            callees = [fi + 1] if chain else rng.sample(range(fi + 1, nf), k=min(nf - fi - 1, rng.randint(0, 3)))
            for callee in callees:
                fan = rng.randint(2, 12) if chain else rng.choice([1, 1, 2, 3, 4, 8, 12])
                guard = Pred(rng.randrange(8), rng.random() < 0.5) if rng.random() < 0.3 else None
                code += [I("call", callee, guard=None)] * fan
                if guard is not None:
                    code += [I("ret", guard=guard)]
        if rng.random() < 0.2:
            p = rng.randrange(8)
            code = [I("loop"), *code, I("setp.true", p), I("break", guard=Pred(p)), I("endloop")]
        funcs.append(Function(f"f{fi}", code))
    kcode = [I("mov.sr", 0, SpecialRegister.THREAD_LINEAR_ID)]
    kcode += [I("call", 0)] * rng.randint(1, 4)
    if rng.random() < 0.1:
        kcode = [I("loop"), *kcode, I("endloop")]  # an infinite loop: the budget must stop it
    return Module([Kernel("k", [], regs, 0, code=kcode)], funcs)


def pipeline(m: Module, rng: random.Random, out: collections.Counter) -> None:
    """Translate one kernel with one backend (taken in turn) and run it on the emulator; WaveErrors
    are outcomes."""
    k0 = rng.choice(m.kernels).name if m.kernels else None
    ks = [k0] if k0 else []
    translators = [("ptx", lambda: ptx.translate(m, kernels=ks)),
                   ("opencl", lambda: opencl.translate(m, rng.choice([8, 16, 32, 64]), kernels=ks)),
                   ("sycl", lambda: sycl.translate(m, rng.choice([8, 16, 32, 64]), kernels=ks)),
                   ("hip", lambda: hip.translate(m, kernels=ks)), ("metal", lambda: metal.translate(m, kernels=ks))]
    steps = [translators[pipeline.turn % len(translators)]]
    pipeline.turn += 1
    for k in [k for k in m.kernels if k.name == k0]:
        def run(k=k):  # noqa: ANN202
            args = {}
            for a in k.args:
                args[a.name] = np.zeros(256, np.uint8) if a.kind is ArgKind.BUFFER else 0
            wg = tuple(k.workgroup_size) if k.workgroup_size else (rng.choice([1, 8, 33]),)
            emulate(m, k.name, grid=rng.choice([1, 2]), workgroup=wg, args=args,
                    wave_width=rng.choice([8, 16, 32, 64]), budget=0.05, max_loop_iterations=200)
        steps.append((f"emulate:{k.name}", run))
    for name, fn in steps:
        try:
            fn()
            out[f"{name.split(':')[0]}:ok"] += 1
        except WaveError as e:
            out[f"{name.split(':')[0]}:{type(e).__name__}"] += 1


pipeline.turn = 0  # type: ignore[attr-defined]


def one_case(kind: str, rng: random.Random, binaries: list[bytes], texts: list[str],
             out: collections.Counter) -> str | bytes:
    if kind == "binary":
        payload: str | bytes = fz.mutate_binary(rng.choice(binaries), rng)
        try:
            m = read_wbin(payload)  # type: ignore[arg-type]
        except WaveError as e:
            out[f"read:{type(e).__name__}"] += 1
            return payload
    elif kind == "text":
        payload = fz.mutate_text(rng.choice(texts), rng)
        try:
            m = assemble(payload, "fuzz.wave")
            verify(m)
        except WaveError as e:
            out[f"asm:{type(e).__name__}"] += 1
            return payload
    else:
        m = random_callgraph(rng)
        payload = repr(m)[:100000]
        try:
            verify(m)
        except WaveError as e:
            out[f"verify:{type(e).__name__}"] += 1
            return payload
        if _inlined(m) > MAX_RUN_INLINED:  # valid but long to run: verified only (see MAX_RUN_INLINED)
            out["callgraph:valid_large"] += 1
            return payload
    out[f"{kind}:valid"] += 1
    pipeline(m, rng, out)
    return payload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the summary as JSON here")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    binaries = fz.seed_binaries()
    texts = seed_texts()
    outcomes: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    first_tb: dict[str, str] = {}
    hangs = 0
    fail_dir = ROOT / "bench" / "results" / "fuzz_failures"
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    for case in range(args.cases):
        kind = rng.choices(["binary", "text", "callgraph"], [0.45, 0.35, 0.2])[0]
        kinds[kind] += 1
        signal.alarm(HANG_SECONDS)
        try:
            one_case(kind, random.Random(rng.getrandbits(64)), binaries, texts, outcomes)
        except Hang:
            hangs += 1
            failures[f"{kind}:hang"] += 1
        except Exception as e:  # noqa: BLE001 - the findings we are looking for
            name = f"{kind}:{type(e).__name__}"
            failures[name] += 1
            if name not in first_tb:
                first_tb[name] = traceback.format_exc()
                fail_dir.mkdir(parents=True, exist_ok=True)
                (fail_dir / f"pipeline_case{case}_{type(e).__name__}.txt").write_text(
                    f"seed {args.seed} case {case}\n{traceback.format_exc()}\n")
        finally:
            signal.alarm(0)
        if case and case % 5000 == 0:
            print(f"{case} cases, {time.perf_counter() - t0:.0f} s, {sum(failures.values())} findings",
                  flush=True)
    seconds = time.perf_counter() - t0
    summary = {
        "command": "nice python bench/fuzz_pipeline.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cases": args.cases, "seed": args.seed, "seconds": round(seconds, 1),
        "kinds": dict(kinds), "hangs": hangs,
        "uncaught_exceptions": sum(v for k, v in failures.items() if not k.endswith(":hang")),
        "findings_by_type": dict(sorted(failures.items())),
        "outcomes": dict(sorted(outcomes.items())),
        "python": platform.python_version(), "numpy": np.__version__, "commit": _commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.machine(),
    }
    print(json.dumps(summary, indent=2))
    for name, tb in first_tb.items():
        print(f"\n--- first {name} ---\n{tb}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
