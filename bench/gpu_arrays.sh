#!/usr/bin/env bash
# Issue 12 on an NVIDIA GPU, one batch (device time is scarce; ~4 minutes):
#   OUT=/some/dir bash bench/gpu_arrays.sh
# 1. benches, alone on the GPU: per-call overhead (kernel(...) with device arrays and with torch
#    CUDA tensors vs CudaTarget.launch, Triton, torch.add, the custom_op wrapper), the 10-launch
#    chain over 2^26 floats vs torch, the torch-op wrapper vs a direct call -> $OUT/arrays_*.json
# 2. then, side by side: the CUDA tests of arrays and torch ops (pytest -m cuda) and the two
#    examples on CUDA -> $OUT/gpu_tests.log, $OUT/gpu_examples.log
# A failing step does not stop the others; the exit status is the number of failed steps.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src" PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
log="$OUT/gpu_arrays.log"
failed=0
step() {
    local name=$1 limit=$2; shift 2
    echo "=== $name: $*" | tee -a "$log"
    local t0=$SECONDS
    if timeout "$limit" "$@" >>"$log" 2>&1; then echo "=== $name: ok ($((SECONDS - t0)) s)" | tee -a "$log"
    else echo "=== $name: FAILED rc=$? ($((SECONDS - t0)) s)" | tee -a "$log"; failed=$((failed + 1)); fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee -a "$log"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())' | tee -a "$log"
step overhead 55 python3 bench/bench_arrays.py overhead --calls 1000 --rounds 11 --out "$OUT"
step chain 45 python3 bench/bench_arrays.py chain --log2n 26 --rounds 11 --out "$OUT"
step torch-op 25 python3 bench/bench_arrays.py torch-op --calls 1000 --rounds 11 --out "$OUT"
(timeout 115 python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_arrays_cuda.py tests/test_torch_ops.py \
    tests/test_cuda.py >"$OUT/gpu_tests.log" 2>&1; echo "=== gpu-tests rc=$?" >>"$OUT/gpu_tests.log") &
tests=$!
(timeout 115 python3 examples/warp_style.py --target cuda --n 1000000 --steps 100 >"$OUT/gpu_examples.log" 2>&1
 echo "=== warp_style rc=$?" >>"$OUT/gpu_examples.log"
 timeout 100 python3 examples/triton_style.py --device cuda >>"$OUT/gpu_examples.log" 2>&1
 echo "=== triton_style rc=$?" >>"$OUT/gpu_examples.log") &
ex=$!
wait $tests $ex
tail -n 4 "$OUT/gpu_tests.log" | tee -a "$log"
grep -E "bit-identical|agree|graph breaks|rc=" "$OUT/gpu_examples.log" | tee -a "$log"
grep -q "gpu-tests rc=0" "$OUT/gpu_tests.log" || failed=$((failed + 1))
[ "$(grep -c ' rc=0' "$OUT/gpu_examples.log")" = 2 ] || failed=$((failed + 1))
python3 - "$OUT" <<'PY' | tee -a "$log"
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("arrays_*.json")):
    d = json.loads(p.read_text())
    for key in ("per_call_us", "ms_per_chain"):
        for k, v in d.get(key, {}).items():
            print(f"{p.stem:20s} {k:48s} {v['median']:10.2f}")
PY
exit $failed
