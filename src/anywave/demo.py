"""``anywave demo``: the main job on the embedded default target.

Assembles the bundled example kernels, runs each on every available target at every wave
width it offers (for now: the reference emulator at W = 8, 16, 32, 64), and checks every
output **bit for bit** against an independent NumPy computation of the same arithmetic in
the same order. Prints one line per run and a summary; exits non-zero on any mismatch.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import numpy as np

from anywave.asm import assemble
from anywave.binary.module import Module
from anywave.emu import emulate

WAVE_WIDTHS = (8, 16, 32, 64)
WG = 256  # the examples' workgroup size


def load_example(name: str) -> Module:
    """Assemble a bundled example (``anywave/examples/NAME.wave``)."""
    text = resources.files("anywave.examples").joinpath(f"{name}.wave").read_text()
    return assemble(text, filename=f"examples/{name}.wave")


def _grid(n: int) -> int:
    return (n + WG - 1) // WG


def _uniform_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """Floats in [-1, 1) that are multiples of 2^-24: every a*x + y of them is exact in
    float64 (at most 50 significant bits), so rounding that float64 once to float32 is the
    correctly rounded fused multiply-add — an independent reference for ``fma.f32``."""
    return (rng.integers(-(1 << 24), 1 << 24, n) * 2.0**-24).astype(np.float32)


def _butterfly_sum(x: np.ndarray, w: int) -> np.ndarray:
    """Sum of each row of W lanes in the spec's butterfly order (docs/spec.md, wred.add.f32)."""
    s = x.astype(np.float32)
    lanes = np.arange(w)
    k = 1
    while k < w:
        s = (s + s[..., lanes ^ k]).astype(np.float32)
        k *= 2
    return s[..., 0]


@dataclass
class Run:
    example: str
    wave_width: int
    threads: int
    ok: bool
    detail: str
    seconds: float
    thread_instructions: int


def _saxpy(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 1_000_003
    a = np.float32(0.75)
    x, y = _uniform_f32(rng, n), _uniform_f32(rng, n)
    expect = (np.float64(a) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    stats = emulate(load_example("saxpy"), "saxpy", grid=_grid(n), workgroup=WG,
                    args={"a": a, "x": x, "y": y, "n": n}, wave_width=w)
    bad = np.count_nonzero(y.view(np.uint32) != expect.view(np.uint32))
    return bad == 0, f"{n:,} elements, {bad} bit mismatches", stats


def _reduce_sum(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 200_000
    g = _grid(n)
    x = _uniform_f32(rng, n)
    partial = np.zeros(g, np.float32)
    stats = emulate(load_example("reduce_sum"), "reduce_sum", grid=g, workgroup=WG,
                    args={"x": x, "partial": partial, "n": n}, wave_width=w)
    padded = np.zeros(g * WG, np.float32)
    padded[:n] = x
    slots = _butterfly_sum(padded.reshape(g, WG // w, w), w)  # one sum per wave
    stride = slots.shape[1] // 2
    while stride:  # the kernel's local-memory tree
        slots[:, :stride] = (slots[:, :stride] + slots[:, stride:2 * stride]).astype(np.float32)
        stride //= 2
    expect = slots[:, 0]
    bad = np.count_nonzero(partial.view(np.uint32) != expect.view(np.uint32))
    err = abs(float(partial.astype(np.float64).sum()) - float(x.astype(np.float64).sum()))
    return bad == 0, f"{g} partial sums, {bad} bit mismatches, |sum - exact| = {err:.2e}", stats


def _prefix_sum(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n = 100_000
    g = _grid(n)
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    y = np.zeros(n, np.uint32)
    stats = emulate(load_example("prefix_sum"), "prefix_sum", grid=g, workgroup=WG,
                    args={"x": x, "y": y, "n": n}, wave_width=w)
    padded = np.zeros(g * WG, np.uint64)
    padded[:n] = x
    expect = (np.cumsum(padded.reshape(g, WG), axis=1) & 0xFFFFFFFF).astype(np.uint32).ravel()[:n]
    bad = np.count_nonzero(y != expect)
    return bad == 0, f"{n:,} elements, {bad} mismatches", stats


def _histogram(w: int, rng: np.random.Generator) -> tuple[bool, str, object]:
    n, nbins = 300_000, 64
    data = rng.integers(0, 2**32, n, dtype=np.uint32)
    hist = np.zeros(nbins, np.uint32)
    stats = emulate(load_example("histogram"), "histogram_local", grid=(n + 63) // 64, workgroup=64,
                    args={"data": data, "hist": hist, "n": n}, wave_width=w)
    expect = np.bincount(data % nbins, minlength=nbins).astype(np.uint32)
    bad = np.count_nonzero(hist != expect)
    return bad == 0, f"{n:,} values into {nbins} bins, {bad} wrong bins", stats


EXAMPLES: dict[str, Callable[[int, np.random.Generator], tuple[bool, str, object]]] = {
    "saxpy": _saxpy, "reduce_sum": _reduce_sum, "prefix_sum": _prefix_sum, "histogram": _histogram,
}


def run_demo(wave_widths: tuple[int, ...] = WAVE_WIDTHS, seed: int = 0, out=print) -> list[Run]:
    """Run every example at every wave width on the emulator; return one :class:`Run` each."""
    runs: list[Run] = []
    out(f"anywave demo — target: emulator (reference), wave widths {', '.join(map(str, wave_widths))}")
    out(f"{'example':<12} {'W':>3} {'threads':>10} {'result':<8} {'time':>7} {'M thr-instr/s':>14}  detail")
    for name, fn in EXAMPLES.items():
        for w in wave_widths:
            rng = np.random.default_rng(seed)
            t0 = time.perf_counter()
            ok, detail, stats = fn(w, rng)
            dt = time.perf_counter() - t0
            ti = int(stats.thread_instructions)  # type: ignore[attr-defined]
            run = Run(name, w, int(stats.threads), ok, detail, dt, ti)  # type: ignore[attr-defined]
            runs.append(run)
            rate = ti / max(stats.wall_seconds, 1e-9) / 1e6  # type: ignore[attr-defined]
            out(f"{name:<12} {w:>3} {run.threads:>10,} {'ok' if ok else 'MISMATCH':<8} {dt:>6.2f}s "
                f"{rate:>14.1f}  {detail}")
    bad = [r for r in runs if not r.ok]
    out("")
    if bad:
        out(f"{len(bad)} of {len(runs)} runs differ from their NumPy reference")
    else:
        out(f"all {len(runs)} runs are bit-identical to independent NumPy references")
    return runs


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("demo", help="run the bundled examples on every available target and check them",
                              description=__doc__)
    p.add_argument("--wave-width", type=int, action="append", choices=WAVE_WIDTHS,
                   help="wave width(s) to run (default: all)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the input data")
    return p


def run(args: argparse.Namespace) -> int:
    widths = tuple(args.wave_width) if args.wave_width else WAVE_WIDTHS
    runs = run_demo(widths, seed=args.seed)
    return 0 if all(r.ok for r in runs) else 1
