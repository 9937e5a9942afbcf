// Block reduction, templated on the element type and the block size: a shared-memory tree
// down to two warps, then a warp-synchronous tail with shuffles (no barriers), as written for
// any warp size (warpSize).
#include "common.h"

template <typename T>
__device__ T warp_reduce(T v) {
    for (int offset = warpSize / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

template <typename T, unsigned BLOCK>
__global__ void reduce(T* __restrict__ partial, const T* __restrict__ in, unsigned n) {
    __shared__ T sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (BLOCK * 2) + tid;
    T v = i < n ? in[i] : (T)0;
    if (i + BLOCK < n) v += in[i + BLOCK];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = BLOCK / 2; s >= 2u * warpSize; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < warpSize) {
        v = sdata[tid] + sdata[tid + warpSize];
        v = warp_reduce(v);
        if (tid == 0) partial[blockIdx.x] = v;
    }
}
