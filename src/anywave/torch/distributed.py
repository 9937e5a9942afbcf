"""Data-parallel training with WAVE ops on ``torch.distributed``: one process per rank,
``torch.nn.parallel.DistributedDataParallel`` with a fixed-order gradient reduction.

Each rank takes a contiguous shard of every global mini-batch (rank r gets samples
``[r * B/N, (r+1) * B/N)`` of the batch the single-process run would use), runs forward and
backward with ``torch.ops.anywave`` ops, and DDP reduces the gradients through
:func:`ordered_mean_hook`, a DDP communication hook that **all-gathers** each gradient
bucket and sums the ranks' copies **in rank order** in a WAVE kernel::

    g = ((g_0 + g_1) + g_2) + ... + g_{N-1};   g = g * (1 / N)

(each ``+`` and ``*`` an IEEE-754 f32 operation rounded to nearest even; for N a power of
two the scaling is exact). The collective's own reduction order (ring, tree, NCCL's
channels) never touches the numbers: only gathered copies are combined, by our kernel.

What is identical (and tested):

* every rank holds the same weights after every step;
* two runs with the same seed, global batch and N give the same per-step losses and final
  weights, bit for bit, on any target and wave width (the kernels are W-invariant);
* the N-rank run equals, bit for bit, the **single-process run with N-way gradient
  accumulation** (:func:`train_accumulated`: the same shards one after the other, their
  gradients combined by the same ordered mean) — so a distributed result can be
  reproduced on one device.

What is not identical: the plain single-process run over the whole batch
(:func:`anywave.torch.train.train`). Its matmul gradient sums the batch's B terms in one
sequence; the sharded run sums N partial sums of B/N terms, then adds them — another
rounding order. The difference is a few float32 ulp per step (reported by
``anywave train --nproc N``), never a nondeterminism.

Launching: :func:`run_distributed` starts N processes with ``torch.multiprocessing``
(``spawn``) and a file-based rendezvous, or run :func:`ddp_worker_main` under ``torchrun``
(it reads ``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` from the environment). Backends: ``gloo``
for CPU tensors (the emulator, OpenCL or SYCL target), ``nccl`` for CUDA tensors (one GPU
per rank: rank r uses ``cuda:r``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

import anywave as aw
from anywave.errors import WaveError
from anywave.torch import ops
from anywave.torch import train as T

__all__ = [
    "DistributedConfig", "DistributedError", "ordered_mean", "ordered_mean_hook", "run_distributed",
    "shard_of", "train_accumulated", "train_rank",
]


class DistributedError(WaveError, RuntimeError):
    """A distributed run could not start or its ranks disagree (the message says which)."""


# ----------------------------------------------------------------------------- the reduction

@aw.kernel
def _ordered_mean_kernel(parts: aw.In[aw.f32], out: aw.Out[aw.f32], n: aw.i32, ranks: aw.i32, scale: aw.f32):
    # parts is (ranks, n) row-major; out[i] = (((p0 + p1) + p2) + ...) * scale
    i = aw.global_id(0)
    if i < n:
        acc = parts[i]
        j = i
        for _ in range(1, ranks):
            j += n
            acc = acc + parts[j]
        out[i] = acc * scale


@torch.library.custom_op("anywave::ordered_mean", mutates_args=())
def ordered_mean(parts: torch.Tensor) -> torch.Tensor:
    """Mean over dim 0 in a fixed order: ``(((parts[0] + parts[1]) + parts[2]) + ...) * (1/R)``.

    Args:
        parts: float32 tensor (R, ...), R >= 1, on the CPU or a CUDA device.

    Returns:
        float32 tensor of shape ``parts.shape[1:]`` on the same device.

    Raises:
        OpDtypeError: not float32. OpInputError: fewer than one row.
    """
    p = ops._f32(parts, "ordered_mean", "parts")
    if p.dim() < 1 or p.shape[0] < 1:
        raise ops.OpInputError(f"anywave.ordered_mean: parts needs a leading dimension >= 1, got {tuple(p.shape)}")
    ranks = int(p.shape[0])
    n = p[0].numel()
    out = torch.empty(p.shape[1:], dtype=torch.float32, device=p.device)
    ops._launch(_ordered_mean_kernel, n, {"parts": p, "out": out, "n": n, "ranks": ranks,
                                          "scale": float(np.float32(1.0) / np.float32(ranks))}, p.device)
    return out


@ordered_mean.register_fake
def _(parts: torch.Tensor) -> torch.Tensor:
    return parts.new_empty(parts.shape[1:])


def ordered_mean_hook(state: Any, bucket: Any) -> torch.futures.Future:
    """DDP communication hook (``ddp.register_comm_hook(group, ordered_mean_hook)``): all-gather
    the bucket's flattened gradients from every rank, then :func:`ordered_mean` them in rank
    order. ``state`` is the process group (or None for the default group)."""
    group = state
    world = dist.get_world_size(group)
    buf = bucket.buffer()
    gathered = [torch.empty_like(buf) for _ in range(world)]
    fut = dist.all_gather(gathered, buf, group=group, async_op=True).get_future()

    def combine(f: torch.futures.Future) -> torch.Tensor:
        value = f.value()
        parts = value[0] if value and isinstance(value[0], list) else gathered
        return ordered_mean(torch.stack(list(parts)))

    return fut.then(combine)


# DDP checks the hook's annotations as objects (this module's are strings)
ordered_mean_hook.__annotations__ = {"state": Any, "bucket": dist.GradBucket,
                                     "return": torch.futures.Future[torch.Tensor]}


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class DistributedConfig:
    """Where the ranks run.

    Attributes:
        world_size: number of ranks N (the global batch must divide by it).
        backend: ``gloo`` (CPU tensors) or ``nccl`` (CUDA tensors, one GPU per rank).
        target: the CPU target of the ranks' ops (``emulator``, ``opencl``, ``sycl``); ignored
            for nccl.
        wave_width: its wave width (None: the target's default).
        reference: plain PyTorch instead (``TorchMLP``, DDP's default all-reduce, ``p -= lr * g``):
            the peer for timings, not bit-identical.
    """

    world_size: int = 2
    backend: str = "gloo"
    target: str = "emulator"
    wave_width: int | None = None
    reference: bool = False


def shard_of(batch: np.ndarray, rank: int, world: int) -> np.ndarray:
    """Rank ``rank``'s contiguous share of one global batch of indices (B,), B divisible by world."""
    if len(batch) % world:
        raise DistributedError(f"global batch {len(batch)} does not divide into {world} ranks; "
                               f"choose --batch as a multiple of {world}")
    per = len(batch) // world
    return batch[rank * per:(rank + 1) * per]


class _LossModule(torch.nn.Module):
    def __init__(self, model: T.WaveMLP) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.model.loss(x, y)


def _check_config(cfg: T.TrainConfig, world: int) -> None:
    if world < 1:
        raise DistributedError(f"world size must be >= 1, got {world}")
    if cfg.batch % world:
        raise DistributedError(f"global batch {cfg.batch} does not divide into {world} ranks; "
                               f"choose --batch as a multiple of {world}")


def _target_options(dcfg: DistributedConfig) -> dict[str, Any]:
    return {} if dcfg.wave_width is None else {"wave_width": dcfg.wave_width}


def train_rank(rank: int, data: T.Digits, cfg: T.TrainConfig, dcfg: DistributedConfig) -> T.RunResult:
    """Train rank ``rank`` of an initialised process group under DDP with
    :func:`ordered_mean_hook`. Returns this rank's run: ``losses`` are the **global** batch
    losses (the rank losses combined by :func:`ordered_mean`, the same on every rank),
    ``info["rank_losses"]`` this rank's shard losses."""
    world = dist.get_world_size()
    _check_config(cfg, world)
    dev = torch.device(f"cuda:{rank}") if dcfg.backend == "nccl" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    model = (T.TorchMLP if dcfg.reference else T.WaveMLP)(T.init_params(cfg.seed, cfg.hidden)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(_LossModule(model),
                                                    device_ids=[rank] if dev.type == "cuda" else None)
    if not dcfg.reference:
        ddp.register_comm_hook(None, ordered_mean_hook)
    mean = (lambda t: t.mean(0)) if dcfg.reference else ordered_mean
    xs = torch.from_numpy(data.train_x).to(dev)
    ys = torch.from_numpy(data.train_y).to(dev)
    idx = T.batch_indices(len(data.train_y), cfg)
    losses, rank_losses = [], []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        b = torch.from_numpy(shard_of(idx[step], rank, world)).to(dev)
        loss = ddp(xs[b], ys[b])
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                if dcfg.reference:
                    p.sub_(cfg.lr * p.grad)
                else:
                    torch.ops.anywave.sgd_(p, p.grad, cfg.lr)
                p.grad = None
            every = [torch.empty_like(loss) for _ in range(world)]
            dist.all_gather(every, loss.detach())
            losses.append(mean(torch.stack(every)))
            rank_losses.append(loss.detach())
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        logits = model(torch.from_numpy(data.test_x).to(dev))
        acc = float((logits.argmax(1).cpu().numpy() == data.test_y).mean())
    params = {n: getattr(model, n).detach().cpu().numpy().copy() for n in T.PARAM_NAMES}
    return T.RunResult(f"rank {rank}/{world}", torch.stack(losses).cpu().numpy().astype(np.float32), params, acc,
                       seconds, {"rank": rank, "world_size": world, "backend": dcfg.backend,
                                 "rank_losses": torch.stack(rank_losses).cpu().numpy().astype(np.float32)})


def train_accumulated(data: T.Digits, cfg: T.TrainConfig, shards: int, *, label: str | None = None,
                      device: str | torch.device = "cpu") -> T.RunResult:
    """The single-process equivalent of an N-rank run (N = ``shards``): each global batch is cut
    into the same N shards, their gradients are computed one after the other and combined by
    :func:`ordered_mean` in shard order, then one SGD step. Bit-identical to :func:`train_rank`
    with N ranks (CPU tensors run on the current CPU target: wrap in
    :func:`anywave.torch.ops.cpu_target`)."""
    _check_config(cfg, shards)
    dev = torch.device(device)
    model = T.WaveMLP(T.init_params(cfg.seed, cfg.hidden)).to(dev)
    xs = torch.from_numpy(data.train_x).to(dev)
    ys = torch.from_numpy(data.train_y).to(dev)
    idx = T.batch_indices(len(data.train_y), cfg)
    params = list(model.parameters())
    losses = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        grads: list[list[torch.Tensor]] = [[] for _ in params]
        shard_losses = []
        for r in range(shards):
            b = torch.from_numpy(shard_of(idx[step], r, shards)).to(dev)
            loss = model.loss(xs[b], ys[b])
            loss.backward()
            for i, p in enumerate(params):
                grads[i].append(p.grad)
                p.grad = None
            shard_losses.append(loss.detach())
        with torch.no_grad():
            for p, gs in zip(params, grads, strict=True):
                torch.ops.anywave.sgd_(p, ordered_mean(torch.stack(gs)), cfg.lr)
            losses.append(ordered_mean(torch.stack(shard_losses)))
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        logits = model(torch.from_numpy(data.test_x).to(dev))
        acc = float((logits.argmax(1).cpu().numpy() == data.test_y).mean())
    return T.RunResult(label or f"1 process, {shards} accumulated shards",
                       torch.stack(losses).cpu().numpy().astype(np.float32),
                       {n: getattr(model, n).detach().cpu().numpy().copy() for n in T.PARAM_NAMES}, acc, seconds,
                       {"shards": shards})


# ----------------------------------------------------------------------------- launching

def _worker(rank: int, world: int, init_file: str, cfg: T.TrainConfig, dcfg: DistributedConfig,
            out_dir: str) -> None:
    # one rank: rendezvous, train, save the result for the parent (pickled NumPy)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # multicast off (the GPU machines' rule)
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    dist.init_process_group(dcfg.backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        data = T.load_data(cfg.seed)
        if dcfg.backend == "nccl":
            r = train_rank(rank, data, cfg, dcfg)
        else:
            with ops.cpu_target(dcfg.target, **_target_options(dcfg)) as tgt:
                r = train_rank(rank, data, cfg, dcfg)
                r.info.update(target=dcfg.target, wave_width=tgt.info.wave_width)
        import pickle

        Path(out_dir, f"rank{rank}.pkl").write_bytes(pickle.dumps(r))
    finally:
        dist.destroy_process_group()


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    return float(timeout)


def _spawn_ranks(fn: Any, args: tuple[Any, ...], nprocs: int, timeout: float) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes (``torch.multiprocessing.spawn``) and
    wait at most ``timeout`` seconds (wall clock) for all of them.

    Raises:
        TimeoutError: a rank was still running at the deadline (the message names the ranks
            still running); every rank is killed first, so nothing is left behind.
        torch.multiprocessing.ProcessRaisedException / ProcessExitedException: a rank failed
            (the others are stopped by torch)."""
    import torch.multiprocessing as mp

    budget = _check_timeout(timeout)
    ctx = mp.spawn(fn, args=args, nprocs=nprocs, join=False)
    deadline = time.monotonic() + budget
    try:
        while not ctx.join(timeout=max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                running = [r for r, proc in enumerate(ctx.processes) if proc.is_alive()]
                if not running:
                    continue  # they all ended just now: join collects their status
                done = [r for r in range(nprocs) if r not in running]
                names = ", ".join(str(r) for r in running)
                raise TimeoutError(
                    f"rank{'s' if len(running) > 1 else ''} {names} of the {nprocs}-process run did not finish within "
                    f"{budget:g} s (finished: {', '.join(map(str, done)) or 'none'}); every rank was stopped. A rank "
                    "that waits in a collective for a stalled peer is listed too.")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
        for proc in ctx.processes:
            proc.join()


def run_distributed(cfg: T.TrainConfig, dcfg: DistributedConfig, *, timeout: float = 600.0) -> list[T.RunResult]:
    """Train with ``dcfg.world_size`` processes (``torch.multiprocessing.spawn``) and return
    every rank's :class:`~anywave.torch.train.RunResult`, rank order. ``timeout``: seconds
    (wall clock) the whole run may take.

    Raises:
        DistributedError: a rank failed (its error is included), the batch does not divide,
            or nccl was asked for with fewer GPUs than ranks.
        TimeoutError: a rank was still running after ``timeout`` seconds (the message names it);
            every rank is killed first.
        ValueError: ``timeout`` is not a finite number > 0.
    """
    timeout = _check_timeout(timeout)
    _check_config(cfg, dcfg.world_size)
    if dcfg.backend not in ("gloo", "nccl"):
        raise DistributedError(f"backend must be 'gloo' (CPU) or 'nccl' (CUDA), got {dcfg.backend!r}")
    if dcfg.backend == "nccl" and torch.cuda.device_count() < dcfg.world_size:
        raise DistributedError(f"nccl with {dcfg.world_size} ranks needs {dcfg.world_size} GPUs; "
                               f"{torch.cuda.device_count()} visible")
    with tempfile.TemporaryDirectory(prefix="anywave-ddp-") as tmp:
        init_file = str(Path(tmp, "rendezvous"))
        try:
            _spawn_ranks(_worker, (dcfg.world_size, init_file, cfg, dcfg, tmp), dcfg.world_size, timeout)
        except TimeoutError:
            raise
        except Exception as e:  # noqa: BLE001 - a rank's failure is reported with its message
            raise DistributedError(f"a rank of the {dcfg.world_size}-process run failed: {e}") from None
        import pickle

        return [pickle.loads(Path(tmp, f"rank{r}.pkl").read_bytes()) for r in range(dcfg.world_size)]


def plot_ranks(runs: Sequence[T.RunResult], reference: T.RunResult, path: str | Path) -> Path:
    """PNG: each rank's shard losses and the global loss per step (left); the global loss's
    distance from the single-process full-batch run (right). Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    steps = np.arange(len(runs[0].losses))
    for r in runs:
        ax.plot(steps, r.info["rank_losses"], lw=1.2, label=f"{r.label}: its shard's loss")
    ax.plot(steps, runs[0].losses, "k-", lw=2.2, label="global batch loss (every rank)")
    ax.set_yscale("log")
    ax.set_xlabel("SGD step")
    ax.set_ylabel("cross-entropy")
    ax.set_title(f"DDP, {len(runs)} ranks ({runs[0].info.get('backend', '')}), WAVE ops, ordered all-reduce")
    ax.legend(fontsize=8)
    d = np.abs(runs[0].losses.astype(np.float64) - reference.losses)
    ax2.plot(steps, np.where(d > 0, d, np.nan), "o", ms=2, label=f"|global loss - {reference.label}|")
    ax2.set_yscale("log")
    ax2.set_xlabel("SGD step")
    ax2.set_ylabel("absolute difference (0 not drawn)")
    ax2.set_title("sharded sums round differently from the full batch")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def run_cli(args: Any) -> int:
    """``anywave train --nproc N``: train N DDP ranks (gloo on the CPU target ``--ddp-target``, or
    nccl on N GPUs with ``--backend nccl``), check every rank holds the same weights and that
    the run equals the single-process N-shard accumulation bit for bit, report the distance
    from the full-batch single-process run, plot per-rank losses. Exit 0 when identical."""
    import json
    import sys

    cfg = T.TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed)
    dcfg = DistributedConfig(args.nproc, args.backend, args.ddp_target)
    print(f"DDP: {dcfg.world_size} ranks, backend {dcfg.backend}"
          + (f", CPU target {dcfg.target}" if dcfg.backend == "gloo" else "")
          + f"; {cfg.steps} steps, global batch {cfg.batch} ({cfg.batch // max(dcfg.world_size, 1)} per rank)")
    runs = run_distributed(cfg, dcfg)
    for r in runs:
        print(f"  {r.label:<12} final global loss {r.losses[-1]:.6f}  test accuracy {r.test_accuracy:.1%}  "
              f"({r.seconds:.1f} s)", flush=True)
    data = T.load_data(cfg.seed)
    device = "cuda" if dcfg.backend == "nccl" else "cpu"
    if device == "cpu":
        with ops.cpu_target(dcfg.target):
            acc = train_accumulated(data, cfg, dcfg.world_size, device=device)
            full = T.train(data, cfg, label="1 process, full batch", device=device)
    else:
        acc = train_accumulated(data, cfg, dcfg.world_size, device=device)
        full = T.train(data, cfg, label="1 process, full batch", device=device)
    try:
        T.assert_identical(list(runs) + [acc])
    except T.TrainingMismatch as e:
        print(f"NOT bit-identical: {e}", file=sys.stderr)
        return 1
    d = T.max_abs_diff(runs[0], full)
    print(f"bit-identical: the {len(runs)} ranks' weights and global losses, and the single-process run with "
          f"{dcfg.world_size} accumulated shards")
    print(f"vs the single-process full-batch run (another summation order): max |loss diff| {d['losses']:.3g}, "
          f"max |weight diff| {max(d[n] for n in T.PARAM_NAMES):.3g}")
    path = plot_ranks(runs, full, args.plot)
    print(f"plot: {path}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            **T.provenance(), "world_size": dcfg.world_size, "backend": dcfg.backend, "target": dcfg.target,
            "config": {"steps": cfg.steps, "batch": cfg.batch, "lr": cfg.lr, "seed": cfg.seed},
            "identical_to_accumulated": True,
            "global_losses": [float(v) for v in runs[0].losses],
            "rank_losses": {r.label: [float(v) for v in r.info["rank_losses"]] for r in runs},
            "seconds_per_rank": [round(r.seconds, 3) for r in runs],
            "max_abs_diff_vs_full_batch": d}, indent=1))
        print(f"summary: {args.json}")
    return 0


def ddp_worker_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``torchrun --nproc-per-node N -m anywave.torch.distributed [--steps ...]``:
    rank and world size from the environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT``); rank 0 prints the losses and the final weights' hash."""
    import argparse
    import hashlib

    p = argparse.ArgumentParser(prog="torchrun ... -m anywave.torch.distributed")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--target", default="emulator")
    a = p.parse_args(argv)
    dist.init_process_group(a.backend)
    try:
        cfg = T.TrainConfig(steps=a.steps, batch=a.batch, lr=a.lr, seed=a.seed)
        dcfg = DistributedConfig(dist.get_world_size(), a.backend, a.target)
        rank = dist.get_rank()
        data = T.load_data(cfg.seed)
        if a.backend == "nccl":
            r = train_rank(rank, data, cfg, dcfg)
        else:
            with ops.cpu_target(a.target):
                r = train_rank(rank, data, cfg, dcfg)
        if rank == 0:
            sha = hashlib.sha256(b"".join(r.params[n].tobytes() for n in T.PARAM_NAMES)).hexdigest()[:16]
            print(f"final loss {r.losses[-1]:.6f}, test accuracy {r.test_accuracy:.1%}, weights sha {sha}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(ddp_worker_main())
