"""Data-parallel training on GPUs with NCCL: WAVE ops (CUDA target, ordered all-reduce hook)
against plain PyTorch DDP in the same run; checks the determinism statement of
:mod:`anywave.torch.distributed` and writes JSON.

    python bench/ddp_gpu.py --nproc 2 --out DIR     # one process per GPU (needs 2 GPUs)

With one GPU, ``--nproc 1`` still exercises the NCCL path, the communication hook and the CUDA
target, and compares the result with the emulator's single-process accumulation.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")


def main() -> int:
    import numpy as np
    import torch

    from anywave.torch import distributed as D
    from anywave.torch import ops
    from anywave.torch import train as T

    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=torch.cuda.device_count())
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--out", type=Path, default=Path("."))
    a = p.parse_args()
    cfg = T.TrainConfig(steps=a.steps, batch=64, lr=0.5, seed=0)
    wave = D.run_distributed(cfg, D.DistributedConfig(a.nproc, "nccl"))
    peer = D.run_distributed(cfg, D.DistributedConfig(a.nproc, "nccl", reference=True))
    wave2 = D.run_distributed(cfg, D.DistributedConfig(a.nproc, "nccl"))
    data = T.load_data(cfg.seed)
    with ops.cpu_target("emulator", wave_width=16):
        emu = D.train_accumulated(data, cfg, a.nproc)
    T.assert_identical([*wave, *wave2, emu])
    rec = {**T.provenance(), "device": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(),
           "world_size": a.nproc, "steps": cfg.steps,
           "identical": "ranks, two runs, and the emulator's single-process accumulation (W=16): bit-identical",
           "seconds_per_step": {"anywave": float(np.median([r.seconds for r in wave2])) / cfg.steps,
                                "pytorch_ddp": float(np.median([r.seconds for r in peer])) / cfg.steps},
           "final_loss": {"anywave": float(wave[0].losses[-1]), "pytorch_ddp": float(peer[0].losses[-1])},
           "max_abs_diff_vs_pytorch": T.max_abs_diff(wave[0], peer[0])}
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"ddp_gpu_{a.nproc}ranks.json"
    path.write_text(json.dumps(rec, indent=1))
    print(json.dumps(rec["seconds_per_step"]), rec["identical"], path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
