/* The HIP names that anywave's HIP backend uses, spelled in CUDA, so that the same HIP source
   compiles for NVIDIA GPUs with NVRTC (CUDA >= 12.8 for the __nv_atomic_* builtins).
   Given to NVRTC as the include "hip/hip_runtime.h". NVIDIA warps are 32 lanes, and the
   backend calls wave operations from converged code with every lane of the warp present
   (workgroups are padded to whole waves), so the full mask is exact. */
#pragma once
#define __HIP_PLATFORM_NVIDIA__ 1
#define AW_DEVICE_WAVE_SIZE 32
#define __shfl(v, lane) __shfl_sync(0xFFFFFFFFu, (v), (lane))
#define __ballot(p) ((unsigned long long)__ballot_sync(0xFFFFFFFFu, (p)))
#define __any(p) __any_sync(0xFFFFFFFFu, (p))
/* memory orders and scopes (CUDA has no warp scope: block scope is the next wider one) */
#define __ATOMIC_RELAXED __NV_ATOMIC_RELAXED
#define __ATOMIC_ACQUIRE __NV_ATOMIC_ACQUIRE
#define __ATOMIC_RELEASE __NV_ATOMIC_RELEASE
#define __ATOMIC_ACQ_REL __NV_ATOMIC_ACQ_REL
#define __ATOMIC_SEQ_CST __NV_ATOMIC_SEQ_CST
#define __HIP_MEMORY_SCOPE_WAVEFRONT __NV_THREAD_SCOPE_BLOCK
#define __HIP_MEMORY_SCOPE_WORKGROUP __NV_THREAD_SCOPE_BLOCK
#define __HIP_MEMORY_SCOPE_AGENT __NV_THREAD_SCOPE_DEVICE
#define __HIP_MEMORY_SCOPE_SYSTEM __NV_THREAD_SCOPE_SYSTEM
#define __hip_atomic_fetch_add __nv_atomic_fetch_add
#define __hip_atomic_fetch_and __nv_atomic_fetch_and
#define __hip_atomic_fetch_or __nv_atomic_fetch_or
#define __hip_atomic_fetch_xor __nv_atomic_fetch_xor
#define __hip_atomic_fetch_min __nv_atomic_fetch_min
#define __hip_atomic_fetch_max __nv_atomic_fetch_max
#define __hip_atomic_exchange __nv_atomic_exchange_n
#define __hip_atomic_compare_exchange_strong(p, e, d, so, fo, sc) \
  __nv_atomic_compare_exchange_n((p), (e), (d), false, (so), (fo), (sc))
/* AMD's wave barrier + wavefront-scope fences: __syncwarp orders memory among the warp's lanes */
#define __builtin_amdgcn_wave_barrier() __syncwarp()
#define __builtin_amdgcn_fence(order, scope) __threadfence_block()
/* RDNA 3 matrix cores: used only under #if defined(__gfx11xx__), never on NVIDIA (unusable here) */
#define __builtin_amdgcn_wmma_f32_16x16x16_f16_w32 __aw_no_wmma_on_nvidia
#define __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32 __aw_no_wmma_on_nvidia
