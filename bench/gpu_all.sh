#!/usr/bin/env bash
# Everything this project records on an NVIDIA GPU, in one batch (device time is scarce):
#   ANYWAVE_COMMIT=$(git rev-parse HEAD) OUT=/some/dir bash bench/gpu_all.sh
# Each step writes its JSON under $OUT and its log to $OUT/gpu_all.log; a failing step does
# not stop the others, and the script's exit status is the number of failed steps.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src" PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
log="$OUT/gpu_all.log"
failed=0
step() {
    local name=$1; shift
    echo "=== $name: $*" | tee -a "$log"
    local t0=$SECONDS
    if "$@" >>"$log" 2>&1; then echo "=== $name: ok ($((SECONDS - t0)) s)" | tee -a "$log"
    else echo "=== $name: FAILED ($((SECONDS - t0)) s)" | tee -a "$log"; failed=$((failed + 1)); fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
step cuda-conformance   python bench/cuda_conformance.py --out "$OUT"
step hip-on-cuda        python bench/hip_on_cuda_conformance.py --out "$OUT"
step launch-overhead    python bench/bench_launch_overhead.py
step torch-train        python bench/torch_train_gpu.py --out "$OUT"
step gpu-tests          python -m pytest -q -m cuda tests/test_cuda.py tests/test_torch_ops.py tests/test_torch_train.py
step demo-on-gpu        python -m anywave demo --quick --no-progress --out "$OUT/demo"
grep "=== " "$log" | grep -v ": python\|: nvidia" 
exit $failed
