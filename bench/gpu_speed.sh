#!/usr/bin/env bash
# Issue 14's GPU run in one batch (device time is scarce):
#   ANYWAVE_COMMIT=$(git rev-parse HEAD) OUT=/some/dir bash bench/gpu_speed.sh [bench_speed.py options]
# 1. bench/bench_speed.py: builds every benchmarked kernel (ptxas -v: registers, spills), SASS
#    counts (FFMA, LDS.128, LDG.E.128, LDL/STL), bit-exact checks (emulator, sequential fma
#    reference, torch), timings of GEMM configs (+ the autotuner on CUDA), element-wise,
#    softmax, layer norm and sum against cuBLAS, torch and Triton in the same process;
# 2. the conformance suite on the CUDA target (conformance group perf included);
# 3. the GPU tests of the kernels and torch ops.
# JSON and logs land in $OUT, PTX and SASS in $OUT/dumps.tgz. SKIP_CONFORMANCE=1 skips step 2.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src" PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
PY=${PYTHON:-$(command -v python3 || command -v python)}
mkdir -p "$OUT"
log="$OUT/gpu_speed.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$log"
"$PY" bench/bench_speed.py --out "$OUT" "$@" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
if [ -d "$OUT/dumps" ]; then tar czf "$OUT/dumps.tgz" -C "$OUT" dumps && rm -rf "$OUT/dumps"; fi
if [ -z "${SKIP_CONFORMANCE:-}" ]; then
    "$PY" bench/cuda_conformance.py --out "$OUT" >>"$log" 2>&1 || rc=$((rc + 1))
    grep -iE "pass|fail|summary" "$log" | tail -4
fi
"$PY" -m pytest -q -m cuda tests/test_cuda.py tests/test_torch_ops.py tests/test_perf_kernels.py -p no:cacheprovider \
    2>&1 | tail -4 | tee -a "$log"
exit "$rc"
