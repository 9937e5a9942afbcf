#!/usr/bin/env bash
# Issue 14's GPU run in one batch (device time is scarce):
#   ANYWAVE_COMMIT=$(git rev-parse HEAD) OUT=/some/dir bash bench/gpu_speed.sh [bench_speed.py options]
# Builds every benchmarked kernel (ptxas -v: registers, spills), dumps SASS counts (FFMA,
# LDS.128, LDG.E.128, LDL/STL), checks results bit for bit (emulator, sequential fma reference,
# torch) and times GEMM configs, element-wise, softmax, layer norm and sum against cuBLAS, torch
# and Triton in the same process. JSON and the log land in $OUT, PTX and SASS in $OUT/dumps.tgz.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src" PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
PY=${PYTHON:-$(command -v python3 || command -v python)}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu_speed.log"
"$PY" bench/bench_speed.py --out "$OUT" "$@" 2>&1 | tee -a "$OUT/gpu_speed.log"
rc=${PIPESTATUS[0]}
if [ -d "$OUT/dumps" ]; then tar czf "$OUT/dumps.tgz" -C "$OUT" dumps && rm -rf "$OUT/dumps"; fi
exit "$rc"
