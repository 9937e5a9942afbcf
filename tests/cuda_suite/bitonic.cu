// Bitonic sort of (key, value) pairs in global memory: one launch per (k, j) step.
#include "common.h"

struct KeyValue { unsigned key; float value; };

__device__ void swap_if(KeyValue* a, KeyValue* b, bool ascending) {
    KeyValue x = *a, y = *b;
    if ((x.key > y.key) == ascending) { *a = y; *b = x; }
}

__global__ void bitonic_step(KeyValue* data, int j, int k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned partner = i ^ j;
    if (partner > i) swap_if(&data[i], &data[partner], (i & k) == 0);
}
