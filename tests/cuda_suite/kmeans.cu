// K-means assignment step: each point finds its nearest centre (centres in constant memory),
// records its membership and counts the points that changed cluster.
#include "common.h"
#include <cfloat>

#define MAX_K 16
#define MAX_F 8

__constant__ float centres[MAX_K * MAX_F];

__global__ void kmeans_assign(int* membership, int* changed, const float* points, int npoints, int nfeatures,
                              int k) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npoints) return;
    int best = 0;
    float best_dist = FLT_MAX;
    for (int c = 0; c < k; c++) {
        float dist = 0.0f;
        for (int f = 0; f < nfeatures; f++) {
            float d = points[p * nfeatures + f] - centres[c * nfeatures + f];
            dist += d * d;
        }
        if (dist < best_dist) { best_dist = dist; best = c; }
    }
    if (membership[p] != best) atomicAdd(changed, 1);
    membership[p] = best;
}
