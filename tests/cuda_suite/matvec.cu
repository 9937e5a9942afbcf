// Dense matrix-vector product y = alpha * A x + beta * y, one row per thread, the vector
// staged through shared memory in chunks.
#include "common.h"

#define CHUNK 64

__global__ void gemv(float* y, const float* A, const float* x, int rows, int cols, float alpha, float beta) {
    __shared__ float xs[CHUNK];
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int c0 = 0; c0 < cols; c0 += CHUNK) {
        for (int k = threadIdx.x; k < CHUNK; k += blockDim.x) xs[k] = c0 + k < cols ? x[c0 + k] : 0.0f;
        __syncthreads();
        if (r < rows) {
            int lim = min(CHUNK, cols - c0);
            const float* row = A + (size_t)r * cols + c0;
            for (int k = 0; k < lim; k++) acc += row[k] * xs[k];
        }
        __syncthreads();
    }
    if (r < rows) y[r] = alpha * acc + beta * y[r];
}
