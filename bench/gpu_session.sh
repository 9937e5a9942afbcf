#!/usr/bin/env bash
# One device call of an integration (device time is scarce): the CUDA-marked tests, then the
# benchmarks named in PHASES, one at a time. OUT=dir ANYWAVE_COMMIT=hash PHASES="tests testsi attn launch conf confi vk suite suitei" bash bench/gpu_session.sh
# Optional VULKAN_DIR: a folder holding .gl/*.deb and .whl/*.whl (the Vulkan loader and binding, and
# the libclang wheel the CUDA front end needs for the suite phase and its tests).
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
: "${OUT:?set OUT}"
R="$OUT/r"; mkdir -p "$R"; log="$OUT/summary.log"; failed=0
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
    if timeout "$limit" "$@" >"$R/$name.log" 2>&1; then echo "=== $name: ok ($((SECONDS - t0)) s)" >>"$log"
    else echo "=== $name: FAILED rc=$? ($((SECONDS - t0)) s)" >>"$log"; failed=$((failed + 1)); fi
    tail -n 4 "$R/$name.log" | sed "s/^/    $name| /" >>"$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$log"
if [ -n "${VULKAN_DIR:-}" ]; then
    for f in "$VULKAN_DIR"/.gl/*.deb; do dpkg -x "$f" /; done; ldconfig
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$VULKAN_DIR"/.whl/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/site" VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
P=" ${PHASES:-tests} "
if [[ $P == *" tests "* ]]; then
    ANYWAVE_CACHE_DIR=/tmp/awc-t step cuda-tests "${TESTS_LIMIT:-200}" python3 -m pytest -q -m cuda -n 8 -p no:cacheprovider -rs tests/ &
fi
if [[ $P == *" testsi "* ]]; then  # the PTX islands lowering (ANYWAVE_PTX_ISLANDS=1), its own cache
    ANYWAVE_PTX_ISLANDS=1 ANYWAVE_CACHE_DIR=/tmp/awc-ti step cuda-tests-islands "${TESTS_LIMIT:-200}" python3 -m pytest -q -m cuda -n 4 -p no:cacheprovider -rs tests/ &
fi
if [[ $P == *" confi "* ]]; then
    mkdir -p "$R/islands"
    ANYWAVE_PTX_ISLANDS=1 ANYWAVE_CACHE_DIR=/tmp/awc-bi step cuda-conformance-islands 330 python3 bench/cuda_conformance.py --out "$R/islands" &
fi
if [[ $P == *" conf "* ]]; then
    ANYWAVE_CACHE_DIR=/tmp/awc-b step cuda-conformance 330 python3 bench/cuda_conformance.py --out "$R" &
    ANYWAVE_CACHE_DIR=/tmp/awc-g step hip-on-cuda-conformance 330 python3 bench/hip_on_cuda_conformance.py --out "$R" &
fi
if [[ $P == *" vk "* ]]; then
    ANYWAVE_CACHE_DIR=/tmp/awc-c step vulkan-conformance 330 python3 bench/vulkan_conformance.py --widths 32 --device-arrays \
        --out "$R/vulkan_conformance_h200_${ANYWAVE_COMMIT:-unknown}.json" --commit "${ANYWAVE_COMMIT:-unknown}" &
fi
wait
export ANYWAVE_CACHE_DIR=/tmp/awc-f
[[ $P == *" attn "* ]] && step attention "${ATTN_LIMIT:-200}" env OUT="$R" python3 bench/bench_attention.py
[[ $P == *" launch "* ]] && step launch "${LAUNCH_LIMIT:-120}" python3 bench/bench_launch24.py --out "$R"
[[ $P == *" suitei "* ]] && mkdir -p "$R/islands" && ANYWAVE_PTX_ISLANDS=1 ANYWAVE_CACHE_DIR=/tmp/awc-si \
    step cuda-suite-islands "${SUITE_LIMIT:-300}" env OUT="$R/islands" python3 bench/bench_cuda_suite.py
[[ $P == *" suite "* ]] && step cuda-suite "${SUITE_LIMIT:-300}" env OUT="$R" python3 bench/bench_cuda_suite.py
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
cat "$log"; exit "$failed"
