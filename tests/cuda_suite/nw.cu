// Needleman-Wunsch style global alignment score: one launch per anti-diagonal of the
// (n+1) x (n+1) score matrix; each thread fills one cell of the diagonal.
#include "common.h"

__device__ __forceinline__ int max3(int a, int b, int c) { return max(a, max(b, c)); }

__global__ void nw_diagonal(int* score, const int* sim, int n, int diag, int penalty) {
    // cells (i, j) with i + j == diag, 1 <= i, j <= n
    int i_lo = max(1, diag - n);
    int i = i_lo + blockIdx.x * blockDim.x + threadIdx.x;
    int j = diag - i;
    if (i > n || j < 1) return;
    int ld = n + 1;
    int up = score[IDX2(i - 1, j, ld)] - penalty;
    int left = score[IDX2(i, j - 1, ld)] - penalty;
    int dg = score[IDX2(i - 1, j - 1, ld)] + sim[IDX2(i - 1, j - 1, n)];
    score[IDX2(i, j, ld)] = max3(up, left, dg);
}
