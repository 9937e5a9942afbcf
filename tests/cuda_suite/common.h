// Shared definitions of the anywave CUDA suite (written for anywave's tests; not from any
// other suite). Kernels include it to check that local headers and macros work unchanged.
#pragma once

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define IDX2(row, col, ld) ((row) * (ld) + (col))

typedef unsigned int uint;
