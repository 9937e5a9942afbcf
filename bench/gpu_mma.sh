#!/bin/sh
# Issue 15 on the H200: the wave-operation conformance groups on CUDA (the warp-uniform lowering
# changes their PTX), then bench/gpu_mma.py. Usage (device): sh bench/gpu_mma.sh  (writes $OUT).
# Beforehand, with no GPU: python bench/gpu_mma.py --make-ref (the emulator's GEMM outputs).
set -x
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/nvidia_smi.txt" 2>&1
timeout 75 python bench/cuda_conformance.py --group wave --group collectives --group control --group mma \
    --group mma_frag --group sync --timeout 60 --out "$OUT" 2>&1 | tail -8
timeout 150 python bench/gpu_mma.py 2>&1 | tee "$OUT/gpu_mma_log.txt" | tail -40
rm -f "$OUT/k.cubin"
