// Sparse matrix-vector product in CSR form, one warp per row ("vector" kernel): lanes stride
// over the row's nonzeros, then a shuffle reduction; written for any warp size.
#include "common.h"

__global__ void spmv_csr_vector(float* y, const int* row_ptr, const int* cols, const float* vals, const float* x,
                                int rows) {
    int lane = threadIdx.x % warpSize;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    if (row >= rows) return;                 // a whole warp leaves together
    float sum = 0.0f;
    for (int e = row_ptr[row] + lane; e < row_ptr[row + 1]; e += warpSize) sum += vals[e] * x[cols[e]];
    for (int off = warpSize / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if (lane == 0) y[row] = sum;
}
