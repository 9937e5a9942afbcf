"""Train a small MLP on scikit-learn's handwritten digits with WAVE kernels only — forward,
backward and the SGD update — and show the run is bit-identical on every target.

Model: 64 → 32 (ReLU) → 10, mean softmax cross-entropy, plain SGD; a fixed seed decides the
initial weights (NumPy's PCG64, uniform ±1/√fan_in like ``torch.nn.Linear``), the train/test
split and the mini-batch order, so two runs differ only in where the kernels ran.

``python -m anywave.torch.train`` (or ``anywave train`` once the CLI registers the provider
:mod:`anywave.torch.cli_train`) trains on the emulator at W = 8, 16, 32, 64 and on every
other available target, checks per-step losses and final weights bit for bit, compares
with plain PyTorch and writes a loss-curve plot (matplotlib) and a JSON summary.

Why plain PyTorch differs (a few ulp per op, growing slowly over the steps): its matmul
(oneDNN/MKL, cuBLAS) sums in blocked orders with vector fma, its ``exp``/``log`` are other
approximations, and its cross-entropy uses ``log_softmax`` in another order. The WAVE
kernels fix one order (:mod:`anywave.torch.kernels`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anywave.errors import WaveError
from anywave.torch import ops
from anywave.torch.train_options import arguments

#: layer sizes of the model
SIZES = (64, 32, 10)
PARAM_NAMES = ("w1", "b1", "w2", "b2")


class TrainingMismatch(WaveError, AssertionError):
    """Two targets gave different bits (names the targets, the first differing step or tensor)."""


@dataclass(frozen=True)
class Digits:
    """The digits split: images scaled to [0, 1] as float32 (N, 64), labels int64 (N,)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters; ``seed`` fixes weights, split and batch order."""

    steps: int = 200
    batch: int = 64
    lr: float = 0.5
    seed: int = 0
    hidden: int = SIZES[1]


@dataclass
class RunResult:
    """One training run.

    Attributes:
        label: where it ran (``emulator W=16``, ``cuda``, ``pytorch`` ...).
        losses: float32 (steps,), the loss of each step's batch before its update.
        params: final parameters, float32 NumPy arrays by name (``w1`` (H, 64), ``b1`` (H,),
            ``w2`` (10, H), ``b2`` (10,)).
        test_accuracy: fraction of the test digits classified correctly after training.
        seconds: wall time of the training loop.
        info: extra facts (device name, wave width ...).
    """

    label: str
    losses: np.ndarray
    params: dict[str, np.ndarray]
    test_accuracy: float
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


def load_data(seed: int = 0, test_fraction: float = 0.2) -> Digits:
    """scikit-learn's bundled 1797 8×8 digits (no download), pixel values / 16, shuffled with
    ``seed`` and split ``test_fraction`` for testing."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    te, tr = order[:n_test], order[n_test:]
    return Digits(x[tr], y[tr], x[te], y[te])


def init_params(seed: int = 0, hidden: int = SIZES[1]) -> dict[str, np.ndarray]:
    """Initial float32 weights: uniform in ±1/√fan_in (as ``torch.nn.Linear``), from NumPy's
    PCG64 with ``seed`` — the same bits on every machine."""
    rng = np.random.default_rng(seed + 1)
    out = {}
    for i, (fan_in, fan_out) in enumerate(((SIZES[0], hidden), (hidden, SIZES[2])), start=1):
        bound = 1.0 / np.sqrt(fan_in)
        out[f"w{i}"] = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        out[f"b{i}"] = rng.uniform(-bound, bound, fan_out).astype(np.float32)
    return out


def batch_indices(n: int, cfg: TrainConfig) -> np.ndarray:
    """(steps, batch) int64 indices into the training set: epochs of a seeded permutation."""
    rng = np.random.default_rng(cfg.seed + 2)
    idx: list[np.ndarray] = []
    need = cfg.steps * cfg.batch
    while sum(len(i) for i in idx) < need:
        perm = rng.permutation(n)
        idx.append(perm[: (n // cfg.batch) * cfg.batch])
    return np.concatenate(idx)[:need].reshape(cfg.steps, cfg.batch)


class WaveMLP(torch.nn.Module):
    """64 → hidden (ReLU) → 10 with ``torch.ops.anywave`` ops only; ``forward`` gives logits,
    :meth:`loss` the mean cross-entropy."""

    def __init__(self, params: dict[str, np.ndarray]) -> None:
        super().__init__()
        for name in PARAM_NAMES:
            setattr(self, name, torch.nn.Parameter(torch.from_numpy(params[name].copy())))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = ops.relu(ops.linear(x, self.w1, self.b1))
        return ops.linear(h, self.w2, self.b2)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ops.cross_entropy(self.forward(x), y)


class TorchMLP(WaveMLP):
    """The same model in plain PyTorch (the comparison reference)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        return f.linear(f.relu(f.linear(x, self.w1, self.b1)), self.w2, self.b2)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.forward(x), y)


def train(data: Digits, cfg: TrainConfig, *, label: str, device: str | torch.device = "cpu",
          reference: bool = False, compile_backend: str | None = None,
          progress: Callable[[int, float], None] | None = None) -> RunResult:
    """Train from :func:`init_params` on ``device`` and return the losses and final weights.

    CPU tensors run on the CPU target selected with :func:`anywave.torch.ops.cpu_target`
    (wrap the call in it); CUDA tensors on the ``cuda`` target.

    Args:
        reference: use plain PyTorch ops (:class:`TorchMLP`; SGD as ``p -= lr * grad``).
        compile_backend: run the loss through ``torch.compile(..., backend=, fullgraph=True)``.
        progress: called as ``progress(step, loss)`` every 50 steps (forces a sync).
    """
    dev = torch.device(device)
    model = (TorchMLP if reference else WaveMLP)(init_params(cfg.seed, cfg.hidden)).to(dev)
    xs = torch.from_numpy(data.train_x).to(dev)
    ys = torch.from_numpy(data.train_y).to(dev)
    idx = torch.from_numpy(batch_indices(len(data.train_y), cfg)).to(dev)
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = model.loss
    if compile_backend is not None:
        loss_fn = torch.compile(model.loss, backend=compile_backend, fullgraph=True)
    losses = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        b = idx[step]
        loss = loss_fn(xs[b], ys[b])
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                if reference:
                    p.sub_(cfg.lr * p.grad)
                else:
                    torch.ops.anywave.sgd_(p, p.grad, cfg.lr)
                p.grad = None
        losses.append(loss.detach())
        if progress is not None and (step % 50 == 0 or step == cfg.steps - 1):
            progress(step, float(loss))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        logits = model(torch.from_numpy(data.test_x).to(dev))
        acc = float((logits.argmax(1).cpu().numpy() == data.test_y).mean())
    return RunResult(label, torch.stack(losses).cpu().numpy().astype(np.float32),
                     {n: getattr(model, n).detach().cpu().numpy().copy() for n in PARAM_NAMES}, acc, seconds)


def train_on_cpu_target(data: Digits, cfg: TrainConfig, name: str, **options: Any) -> RunResult:
    """:func:`train` on CPU tensors with the CPU target ``name`` (e.g. ``emulator``,
    ``wave_width=16``); the label records the target and its W."""
    with ops.cpu_target(name, **options) as tgt:
        label = f"{name} W={tgt.info.wave_width}"
        r = train(data, cfg, label=label, device="cpu")
        r.info = {"target": name, "device": tgt.info.device, "wave_width": tgt.info.wave_width}
    return r


def assert_identical(runs: Sequence[RunResult]) -> None:
    """Raise :class:`TrainingMismatch` unless every run has the same loss bits at every step
    and the same final weight bits as the first."""
    if not runs:
        return
    base = runs[0]
    for r in runs[1:]:
        a, b = base.losses.view(np.uint32), r.losses.view(np.uint32)
        if a.shape != b.shape or not np.array_equal(a, b):
            bad = int(np.flatnonzero(a != b)[0]) if a.shape == b.shape else -1
            raise TrainingMismatch(f"losses of {r.label!r} differ from {base.label!r}: first at step {bad} "
                                   f"({base.losses[bad]!r} vs {r.losses[bad]!r})" if bad >= 0 else
                                   f"{r.label!r} ran {len(b)} steps, {base.label!r} {len(a)}")
        for n in PARAM_NAMES:
            if not np.array_equal(base.params[n].view(np.uint32), r.params[n].view(np.uint32)):
                k = int(np.flatnonzero(base.params[n].view(np.uint32).ravel()
                                       != r.params[n].view(np.uint32).ravel())[0])
                raise TrainingMismatch(f"final {n} of {r.label!r} differs from {base.label!r} at flat index {k}: "
                                       f"{base.params[n].ravel()[k]!r} vs {r.params[n].ravel()[k]!r}")


def max_abs_diff(a: RunResult, b: RunResult) -> dict[str, float]:
    """Largest absolute differences between two runs: ``losses`` and each parameter."""
    out = {"losses": float(np.max(np.abs(a.losses.astype(np.float64) - b.losses)))}
    for n in PARAM_NAMES:
        out[n] = float(np.max(np.abs(a.params[n].astype(np.float64) - b.params[n])))
    return out


def plot(runs: Sequence[RunResult], path: str | Path, title: str = "") -> Path:
    """Write a PNG of the per-step loss of each run (matplotlib, Agg backend); identical
    curves are drawn on top of each other with distinct line styles. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = ["-", "--", "-.", ":"]
    for i, r in enumerate(runs):
        ax.plot(np.arange(len(r.losses)), r.losses, styles[i % len(styles)], lw=2.2 - 0.25 * (i % 6),
                label=f"{r.label} (test acc {r.test_accuracy:.1%})")
    ax.set_xlabel("SGD step")
    ax.set_ylabel("mini-batch cross-entropy")
    ax.set_yscale("log")
    ax.set_title(title or "MLP 64-32-10 on digits, WAVE kernels")
    ax.legend(fontsize=8)
    base = runs[0]
    for r in runs[1:]:
        d = np.abs(r.losses.astype(np.float64) - base.losses)
        ax2.plot(np.arange(len(d)), np.where(d > 0, d, np.nan), "o" if d.any() else "-", ms=2,
                 label=f"|{r.label} − {base.label}|" + ("" if d.any() else ": all 0 (bit-identical)"))
    ax2.set_yscale("log")
    ax2.set_xlabel("SGD step")
    ax2.set_ylabel("absolute loss difference (0 not drawn)")
    ax2.set_title(f"difference from {base.label}")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def provenance() -> dict[str, Any]:
    """Where and when: UTC date, git commit of the source tree (``+dirty`` with uncommitted
    changes; ``$ANYWAVE_COMMIT`` or ``unknown`` outside a checkout), Python, PyTorch and
    NumPy versions, platform."""
    import datetime
    import os
    import platform

    # $ANYWAVE_COMMIT first: the GPU batch scripts set it, and a copied tree's .git may be stale
    commit = os.environ.get("ANYWAVE_COMMIT") or _git_commit(Path(__file__).resolve().parent) or "unknown"
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "platform": platform.platform(), "cpu": platform.processor() or platform.machine()}


def _git_commit(where: Path) -> str | None:
    """``git rev-parse HEAD`` at ``where`` (``+dirty`` with uncommitted changes), or None."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=where, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def summary(runs: Sequence[RunResult], reference: RunResult, cfg: TrainConfig) -> dict[str, Any]:
    """A JSON-ready record: provenance, config, per-target losses (floats) and accuracy,
    bit-identity, differences from plain PyTorch."""
    return {
        **provenance(),
        "config": {"steps": cfg.steps, "batch": cfg.batch, "lr": cfg.lr, "seed": cfg.seed,
                   "sizes": [SIZES[0], cfg.hidden, SIZES[2]]},
        "bit_identical": True,
        "targets": {r.label: {"losses": [float(v) for v in r.losses], "test_accuracy": r.test_accuracy,
                              "seconds": round(r.seconds, 3), **r.info} for r in runs},
        "pytorch": {"losses": [float(v) for v in reference.losses], "test_accuracy": reference.test_accuracy,
                    "max_abs_diff_vs_wave": max_abs_diff(runs[0], reference)},
        "final_weight_sha": {n: __import__("hashlib").sha256(runs[0].params[n].tobytes()).hexdigest()[:16]
                             for n in PARAM_NAMES},
    }


# ----------------------------------------------------------------------------- command line

def run(args: argparse.Namespace) -> int:
    """Train everywhere, check bit-identity, compare with PyTorch, plot. Exit 0 when the runs
    are bit-identical, 1 (with the first difference) when not, or when a target failed to
    run (the others are still compared, plotted and summarised)."""
    if getattr(args, "nproc", 1) != 1:
        # the ranks are anywave.torch.distributed's, which builds on this module
        print(f"error: --nproc {args.nproc}: data-parallel runs go through `anywave train --nproc N` or "
              "`python -m anywave.torch.cli_train --nproc N`", file=sys.stderr)
        return 1
    cfg = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed)
    data = load_data(cfg.seed)
    try:
        widths = [int(w) for w in str(args.widths).split(",") if w.strip()]
    except ValueError:
        print(f"error: --widths takes comma-separated integers from 8, 16, 32, 64, got {args.widths!r}",
              file=sys.stderr)
        return 1
    if cfg.steps < 1 or not 1 <= cfg.batch <= len(data.train_y):
        print(f"error: --steps must be >= 1 and --batch in 1..{len(data.train_y)}, got {cfg.steps} and {cfg.batch}",
              file=sys.stderr)
        return 1
    others = _other_targets(args.targets)
    runs: list[RunResult] = []

    def note(r: RunResult) -> None:
        print(f"  {r.label:<16} final loss {r.losses[-1]:.6f}  test accuracy {r.test_accuracy:.1%}  "
              f"({r.seconds:.1f} s)", flush=True)

    print(f"MLP {SIZES[0]}-{cfg.hidden}-{SIZES[2]} on {len(data.train_y)} train / {len(data.test_y)} test digits, "
          f"{cfg.steps} SGD steps of {cfg.batch}, lr {cfg.lr}, seed {cfg.seed}")
    for w in widths:
        runs.append(train_on_cpu_target(data, cfg, "emulator", wave_width=w))
        note(runs[-1])
    failed: dict[str, str] = {}
    for name in others:
        try:
            if name == "cuda":
                r = train(data, cfg, label="cuda", device="cuda")
                r.info = {"target": "cuda", "device": torch.cuda.get_device_name(), "wave_width": 32}
            else:
                r = train_on_cpu_target(data, cfg, name)
        except Exception as e:  # noqa: BLE001 - one broken runtime must not hide the others' results
            failed[name] = f"{type(e).__name__}: {e}"
            print(f"  {name:<16} FAILED: {failed[name]}", file=sys.stderr, flush=True)
            continue
        runs.append(r)
        note(r)
    ref = train(data, cfg, label="pytorch", reference=True)
    note(ref)
    try:
        assert_identical(runs)
    except TrainingMismatch as e:
        print(f"NOT bit-identical: {e}", file=sys.stderr)
        return 1
    d = max_abs_diff(runs[0], ref)
    print(f"bit-identical: per-step losses and final weights of {len(runs)} runs ({', '.join(r.label for r in runs)})")
    print(f"vs plain PyTorch: max |loss diff| {d['losses']:.3g}, max |weight diff| "
          f"{max(d[n] for n in PARAM_NAMES):.3g}")
    path = plot(runs + [ref], args.plot)
    print(f"plot: {path}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**summary(runs, ref, cfg), "failed_targets": failed}, indent=1))
        print(f"summary: {args.json}")
    if failed:
        print(f"targets that failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _other_targets(spec: str) -> list[str]:
    if spec == "none":
        return []
    avail = [n for n in ops.cpu_target_names() if n != "emulator"]
    if torch.cuda.is_available():
        from anywave.runtime.targets import available_targets

        if any(st.name == "cuda" and st.available for st in available_targets()):
            avail.append("cuda")
    if spec == "all":
        return avail
    want = [s.strip() for s in spec.split(",") if s.strip()]
    missing = [w for w in want if w not in avail]
    if missing:
        raise WaveError(f"--targets: {missing} not available here; available: {avail or 'none besides the emulator'}")
    return want


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m anywave.torch.train``."""
    p = argparse.ArgumentParser(prog="python -m anywave.torch.train", description=__doc__.split("\n\n")[0])
    arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except WaveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
