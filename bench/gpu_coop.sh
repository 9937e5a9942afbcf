#!/usr/bin/env bash
# One device call for issue 27's cooperative matrices (NVIDIA Vulkan driver): the device's
# features, the mma conformance kernels' lowering, the whole conformance suite on device arrays
# at W = 32 (cooperative matrices where offered), and the bf16 GEMM bench.
# OUT=dir ANYWAVE_COMMIT=hash VULKAN_DIR=. bash bench/gpu_coop.sh
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
export ANYWAVE_VULKAN_COOPMAT="${ANYWAVE_VULKAN_COOPMAT:-1}"  # (off by default until this run passes)
: "${OUT:?set OUT}"
mkdir -p "$OUT/r"
for f in "${VULKAN_DIR:-.}"/.gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${VULKAN_DIR:-.}"/.whl/*.whl
export PYTHONPATH="$PYTHONPATH:/tmp/site" VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/r/coop_probe.log"
from anywave.runtime import vulkan
from anywave.backends import spirv
from anywave.conformance import suite
d = vulkan.get_device()
print(d.name, d.driver, d.features)
for g in ("mma_frag", "mma_group", "mma_acc"):
    p = spirv.translate(suite.assemble_group(g), 32, d.features)
    print(g, {n: k.cooperative_matrix for n, k in p.kernels.items()}, p.refused)
PY
ANYWAVE_CACHE_DIR=/tmp/awc-c timeout "${CONF_LIMIT:-300}" python3 bench/vulkan_conformance.py --widths 32 --device-arrays \
    --out "$OUT/r/vulkan_conformance_coop_${ANYWAVE_COMMIT:-unknown}.json" --commit "${ANYWAVE_COMMIT:-unknown}" \
    > "$OUT/r/conf.log" 2>&1; echo "conformance rc=$?"; tail -3 "$OUT/r/conf.log"
ANYWAVE_CACHE_DIR=/tmp/awc-m timeout "${MMA_LIMIT:-240}" python3 bench/bench_vulkan_mma.py --out "$OUT/r" \
    --commit "${ANYWAVE_COMMIT:-unknown}" --sizes "${SIZES:-4096,8192}" > "$OUT/r/mma.log" 2>&1; echo "mma rc=$?"; tail -20 "$OUT/r/mma.log"
if [ -n "${INV:-}" ]; then  # issue 25: batch invariance on CUDA and on Vulkan (NVIDIA)
    ANYWAVE_CACHE_DIR=/tmp/awc-i timeout "${INV_LIMIT:-150}" python3 bench/attention_invariance.py \
        "$OUT/r/attention_invariance_gpu_${ANYWAVE_COMMIT:-unknown}.json" cuda,vulkan > "$OUT/r/inv.log" 2>&1
    echo "invariance rc=$?"; tail -8 "$OUT/r/inv.log"
fi
if [ -n "${HD:-}" ]; then  # issue 25: the fast forward at the other head dims (zero-padded to 64/128)
    AW_ATTN_SHAPES="$HD" AW_ATTN_GR=1 ANYWAVE_CACHE_DIR=/tmp/awc-f timeout "${HD_LIMIT:-150}" \
        python3 bench/bench_attention_fast.py "$OUT/r/attention_headdims_${ANYWAVE_COMMIT:-unknown}.json" > "$OUT/r/hd.log" 2>&1
    echo "headdims rc=$?"; tail -12 "$OUT/r/hd.log"
fi
