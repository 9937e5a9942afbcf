"""Long fuzzing run: mutated .wbin binaries and .wave texts with plain ``random`` (no shrinking).

Usage::

    python bench/fuzz_long.py [--cases 100000] [--seed 1] [--text-share 0.3] [--json OUT.json]

Uses the mutators of ``tests/test_fuzz.py`` (byte flips, truncations, insertions, random
bytes, splices, field-targeted word/byte writes with the header's size and CRC-32
recomputed; token/character/line mutations of the bundled examples). A case *passes*
when ``read_wbin`` / ``assemble`` / ``verify`` either succeed (and the module writes and
reads back unchanged) or raise a ``WaveError`` subclass; anything else is a finding.
Prints a summary: cases, outcomes by type, unexpected exceptions by type (with the first
offending input saved under ``bench/results/fuzz_failures/``), seconds.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_fuzz as fz  # noqa: E402


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--text-share", type=float, default=0.3, help="fraction of cases that mutate .wave texts")
    ap.add_argument("--json", help="also write the summary as JSON here")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    binaries = fz.seed_binaries()
    texts = fz.seed_texts()
    outcomes: collections.Counter[str] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    messages: collections.Counter[str] = collections.Counter()
    fail_dir = ROOT / "bench" / "results" / "fuzz_failures"
    first_tb: dict[str, str] = {}
    t0 = time.perf_counter()
    for case in range(args.cases):
        is_text = rng.random() < args.text_share
        if is_text:
            _, seed = rng.choice(texts)
            payload: str | bytes = fz.mutate_text(seed, rng)
        else:
            payload = fz.mutate_binary(rng.choice(binaries), rng)
        kind = "text" if is_text else "binary"
        try:
            result = fz.check_text(payload) if is_text else fz.check_binary(payload)  # type: ignore[arg-type]
            outcomes[f"{kind}:{result}"] += 1
            if not is_text and result == "BinaryFormatError":
                try:
                    fz.read_wbin(payload)  # type: ignore[arg-type]
                except fz.WaveError as e:
                    messages[str(e).split(":")[0][:48]] += 1
        except Exception as e:  # noqa: BLE001 - the findings we are looking for
            name = f"{kind}:{type(e).__name__}"
            failures[name] += 1
            if name not in first_tb:
                first_tb[name] = traceback.format_exc()
                fail_dir.mkdir(parents=True, exist_ok=True)
                ext = "wave" if is_text else "wbin"
                out = fail_dir / f"case{case}_{type(e).__name__}.{ext}"
                if is_text:
                    out.write_text(payload, encoding="utf-8", errors="surrogatepass")  # type: ignore[arg-type]
                else:
                    out.write_bytes(payload)  # type: ignore[arg-type]
    seconds = time.perf_counter() - t0
    summary = {
        "cases": args.cases, "seed": args.seed, "seconds": round(seconds, 1),
        "seed_binaries": len(binaries), "seed_texts": len(texts),
        "outcomes": dict(sorted(outcomes.items())),
        "unexpected_exceptions": dict(sorted(failures.items())),
        "top_binary_rejections": dict(messages.most_common(25)),
        "python": platform.python_version(), "commit": _commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(json.dumps(summary, indent=2))
    for name, tb in first_tb.items():
        print(f"\n--- first {name} ---\n{tb}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
