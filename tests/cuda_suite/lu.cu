// Right-looking LU factorisation without pivoting, one pivot per pair of launches: scale the
// column under the pivot, then update the trailing submatrix (2D grid).
#include "common.h"

__global__ void lu_scale(float* a, int n, int k) {
    int i = k + 1 + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[IDX2(i, k, n)] = a[IDX2(i, k, n)] / a[IDX2(k, k, n)];
}

__global__ void lu_update(float* a, int n, int k) {
    int j = k + 1 + blockIdx.x * blockDim.x + threadIdx.x;
    int i = k + 1 + blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n) a[IDX2(i, j, n)] -= a[IDX2(i, k, n)] * a[IDX2(k, j, n)];
}
