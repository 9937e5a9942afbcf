"""One steady launch of the group GEMM at 8192³ for Nsight Compute (bench/results/gpu_mma.md):

    ncu --clock-control none -k regex:gemm_group -s 2 -c 1 --section SpeedOfLight ... \\
        python bench/wgmma/ncu_one.py
"""

import torch

from anywave.kernels.gemm_group import gemm_group_kernel
from anywave.runtime import cuda

N = 8192
tgt = cuda.CudaTarget()
A = torch.randn(N, N, device="cuda").to(torch.bfloat16)
B = torch.randn(N, N, device="cuda").to(torch.bfloat16)
C = torch.empty(N, N, device="cuda")
bias = torch.zeros(N, device="cuda")
mod = gemm_group_kernel.compile(W=32, GR=2, GM=8, STAGES=4, BK=64)
args = [A.view(torch.int32), B.view(torch.int32), bias, C, N, N, N]
for _ in range(3):
    tgt.launch(mod, gemm_group_kernel.name, (N // 256, N // 128), 256, args)
torch.cuda.synchronize()
