// 2D five-point Jacobi relaxation on a shared-memory tile with a one-cell halo.
// The weights are double literals: C promotes each update to double and rounds once at the store.
#include "common.h"

#define TILE 16
#define CENTER 0.5
#define SIDE 0.125

__global__ void jacobi2d(float* __restrict__ out, const float* __restrict__ in, int nx, int ny) {
    __shared__ float tile[TILE + 2][TILE + 2];
    int gx = blockIdx.x * TILE + threadIdx.x;
    int gy = blockIdx.y * TILE + threadIdx.y;
    int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    bool inside = gx < nx && gy < ny;
    tile[ly][lx] = inside ? in[IDX2(gy, gx, nx)] : 0.0f;
    if (threadIdx.x == 0) tile[ly][0] = (gx > 0 && gy < ny) ? in[IDX2(gy, gx - 1, nx)] : 0.0f;
    if (threadIdx.x == TILE - 1) tile[ly][TILE + 1] = (gx + 1 < nx && gy < ny) ? in[IDX2(gy, gx + 1, nx)] : 0.0f;
    if (threadIdx.y == 0) tile[0][lx] = (gy > 0 && gx < nx) ? in[IDX2(gy - 1, gx, nx)] : 0.0f;
    if (threadIdx.y == TILE - 1) tile[TILE + 1][lx] = (gy + 1 < ny && gx < nx) ? in[IDX2(gy + 1, gx, nx)] : 0.0f;
    __syncthreads();
    if (!inside) return;
    if (gx == 0 || gy == 0 || gx == nx - 1 || gy == ny - 1) {
        out[IDX2(gy, gx, nx)] = tile[ly][lx];        // fixed boundary
        return;
    }
    out[IDX2(gy, gx, nx)] = CENTER * tile[ly][lx]
        + SIDE * (tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx]);
}
