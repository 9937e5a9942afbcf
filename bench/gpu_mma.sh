#!/bin/sh
# Issue 15 on the H200: see bench/gpu_mma.py. Usage (device): sh bench/gpu_mma.sh  (writes $OUT)
set -x
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/nvidia_smi.txt" 2>&1
timeout 280 python bench/gpu_mma.py 2>&1 | tail -60
