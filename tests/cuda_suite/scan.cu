// Inclusive prefix sum: a Hillis-Steele scan of each block in double-buffered dynamic shared
// memory (sized at launch), then a pass adding each block's offset.
#include "common.h"

__global__ void scan_blocks(float* out, float* block_sums, const float* in, int n) {
    extern __shared__ float temp[];           // 2 * blockDim.x floats
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    int pout = 0, pin = 1;
    temp[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        pout = 1 - pout;
        pin = 1 - pout;
        float v = temp[pin * blockDim.x + tid];
        if (tid >= offset) v += temp[pin * blockDim.x + tid - offset];
        temp[pout * blockDim.x + tid] = v;
        __syncthreads();
    }
    if (i < n) out[i] = temp[pout * blockDim.x + tid];
    if (tid == blockDim.x - 1) block_sums[blockIdx.x] = temp[pout * blockDim.x + tid];
}

__global__ void add_offsets(float* out, const float* scanned_sums, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x == 0 || i >= n) return;
    out[i] += scanned_sums[blockIdx.x - 1];
}
