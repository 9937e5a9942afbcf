#!/usr/bin/env bash
# Everything this project records on an NVIDIA GPU after an integration, in ONE device call
# (device time is scarce). Correctness runs side by side first, then the benchmarks one at a
# time on an otherwise idle GPU.
#   ANYWAVE_COMMIT=$(git rev-parse HEAD) OUT=/some/dir bash bench/gpu_integration.sh
# Optional: VULKAN_DIR=dir holding .gl/*.deb (Vulkan loader) and .whl/*.whl (the vulkan binding);
# WHOLE_SUITE=1 runs the whole test suite (pytest -n 8) instead of only the tests marked cuda.
# Beforehand, with no GPU: python bench/gpu_mma.py --make-ref (the emulator's GEMM outputs).
# Writes $OUT/summary.log and $OUT/results.tgz (every JSON/log); exit status = failed steps.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
R="$OUT/r"; mkdir -p "$R"
log="$OUT/summary.log"
failed=0
step() {  # step NAME LIMIT_S CMD... : run, log to $R/NAME.log, one summary line
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    if timeout "$limit" "$@" >"$R/$name.log" 2>&1; then echo "=== $name: ok ($((SECONDS - t0)) s)" >>"$log"
    else echo "=== $name: FAILED rc=$? ($((SECONDS - t0)) s)" >>"$log"; failed=$((failed + 1)); fi
    tail -n 3 "$R/$name.log" | sed "s/^/    $name| /" >>"$log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$log"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >>"$log"

if [ -n "${VULKAN_DIR:-}" ]; then
    for f in "$VULKAN_DIR"/.gl/*.deb; do dpkg -x "$f" /; done; ldconfig
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$VULKAN_DIR"/.whl/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && \
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi

# --- phase A: correctness, side by side (separate caches: no two writers race on one)
if [ -n "${WHOLE_SUITE:-}" ]; then  # the whole test suite on the GPU machine (CUDA tests included)
    ANYWAVE_CACHE_DIR=/tmp/awc-a step whole-suite 300 python3 -m pytest -q -n 8 -p no:cacheprovider -rs tests/ &
else
    ANYWAVE_CACHE_DIR=/tmp/awc-a step gpu-tests 240 python3 -m pytest -q -m cuda -p no:cacheprovider -rs tests/ &
fi
ANYWAVE_CACHE_DIR=/tmp/awc-b step cuda-conformance 240 python3 bench/cuda_conformance.py --out "$R" &
ANYWAVE_CACHE_DIR=/tmp/awc-g step hip-on-cuda-conformance 240 python3 bench/hip_on_cuda_conformance.py --out "$R" &
if [ -n "${VULKAN_DIR:-}" ]; then
    ANYWAVE_CACHE_DIR=/tmp/awc-c step vulkan-conformance 240 python3 bench/vulkan_conformance.py --widths 32 \
        --out "$R/vulkan_conformance_h200.json" --commit "${ANYWAVE_COMMIT:-unknown}" &
fi
ANYWAVE_CACHE_DIR=/tmp/awc-d step identity-cuda 200 python3 -m anywave conformance --target cuda --no-suite \
    --out "$R/identity_cuda" --no-progress &
ANYWAVE_CACHE_DIR=/tmp/awc-e step ddp-nccl-1rank 200 python3 bench/ddp_gpu.py --nproc 1 --steps 30 --out "$R" &
wait

# --- phase B: benchmarks, one at a time
export ANYWAVE_CACHE_DIR=/tmp/awc-f
step speed 150 python3 bench/bench_speed.py --out "$R"
step mma 150 python3 bench/gpu_mma.py
[ -f "$OUT/gpu_mma.json" ] && mv "$OUT/gpu_mma.json" "$R/"
step async-spill 120 python3 bench/gpu_async_spill.py --out "$R"
step mma-limits 90 env OUT="$R" python3 bench/gpu_mma_limits.py
step group-gemm 90 env OUT="$R" python3 bench/gpu_group_gemm.py
step torch-op-overhead 120 python3 bench/bench_torch_op_overhead.py --out "$R"
step compile-time 150 python3 bench/bench_compile.py --only gemm --repeat 10 --baseline bench/results/compile_h200_host_2026-12-01.json --out "$R/compile_gpu_host.json"
step arrays-overhead 60 python3 bench/bench_arrays.py overhead --calls 1000 --rounds 11 --out "$R"
step arrays-chain 50 python3 bench/bench_arrays.py chain --log2n 26 --rounds 11 --out "$R"

rm -rf "$R/dumps"
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
cat "$log"
exit "$failed"
