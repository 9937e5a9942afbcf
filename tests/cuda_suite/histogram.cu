// 256-bin byte histogram: per-block counts in shared memory with shared atomics, then one
// global atomic per bin and block. Grid-stride loop over the input.
#include "common.h"

#define BINS 256

__global__ void histogram256(uint* hist, const unsigned char* data, int n) {
    __shared__ uint local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}
