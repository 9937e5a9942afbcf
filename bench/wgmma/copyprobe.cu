// L2 -> shared memory copy rate on the H200 (bench/wgmma/copyprobe.cu): what bounds the group
// GEMM's K loop. 132 blocks x 256 threads, each streaming 48 KB slices (the GEMM's BK = 64 slice
// of A and B) through a ring of 4 shared buffers from a 32 MB L2-resident buffer:
//   ldgsts: 16-byte cp.async per thread (what the GEMM uses), wait_group 2 + __syncthreads;
//   bulk:   one thread issues 96 cp.async.bulk of 512 bytes per slice, completion on an mbarrier.
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a copyprobe.cu -o copyprobe
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("{\"error\": \"%s at %d\"}\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int SLICE = 49152, STAGES = 4, THREADS = 256;
constexpr size_t WORK = 32u << 20;

__global__ void __launch_bounds__(THREADS, 1) ldgsts(const uint8_t* src, int iters, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t sm[];
  uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
  size_t off0 = (size_t)blockIdx.x * 7919 * 1024;
  for (int it = 0; it < iters + STAGES - 1; it++) {
    if (it < iters) {
      int st = it % STAGES;
      size_t off = (off0 + (size_t)it * SLICE) % (WORK - SLICE);
      for (int c = threadIdx.x; c < SLICE / 16; c += THREADS)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(base + st * SLICE + c * 16), "l"(src + off + c * 16));
    }
    asm volatile("cp.async.commit_group;\n");
    asm volatile("cp.async.wait_group 2;\n" ::: "memory");
    __syncthreads();
  }
  if (threadIdx.x == 0 && sm[5] == 123) sink[blockIdx.x] = sm[7];
}

__global__ void __launch_bounds__(THREADS, 1) bulk(const uint8_t* src, int iters, uint32_t* sink, int rowbytes) {
  extern __shared__ __align__(1024) uint8_t sm[];
  __shared__ __align__(8) uint64_t bar[STAGES];
  uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; s++)
      asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" :: "r"((uint32_t)__cvta_generic_to_shared(&bar[s])));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  __syncthreads();
  size_t off0 = (size_t)blockIdx.x * 7919 * 1024;
  auto issue = [&](int it) {
    int st = it % STAGES;
    uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar[st]);
    size_t off = (off0 + (size_t)it * SLICE) % (WORK - SLICE);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" :: "r"(b), "r"(SLICE));
    for (int r = 0; r < SLICE / rowbytes; r++)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   :: "r"(base + st * SLICE + r * rowbytes), "l"(src + off + r * rowbytes), "r"(rowbytes), "r"(b) : "memory");
  };
  if (threadIdx.x == 0)
    for (int it = 0; it < STAGES - 1 && it < iters; it++) issue(it);
  for (int it = 0; it < iters; it++) {
    int st = it % STAGES;
    uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar[st]);
    uint32_t phase = (it / STAGES) & 1;
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra W;\n}\n" :: "r"(b), "r"(phase) : "memory");
    __syncthreads();  // everyone is past the wait; buffer it-1 is free
    if (threadIdx.x == 0 && it + STAGES - 1 < iters) issue(it + STAGES - 1);
  }
  if (threadIdx.x == 0 && sm[5] == 123) sink[blockIdx.x] = sm[7];
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  uint8_t* src; CK(cudaMalloc(&src, WORK)); CK(cudaMemset(src, 1, WORK));
  uint32_t* sink; CK(cudaMalloc(&sink, 4096));
  int blocks = pr.multiProcessorCount, iters = 2000, smem = SLICE * STAGES;
  CK(cudaFuncSetAttribute(ldgsts, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  double bytes = (double)blocks * iters * SLICE;
  printf("{\"device\": \"%s\", \"blocks\": %d, \"slice_bytes\": %d, \"stages\": %d", pr.name, blocks, SLICE, STAGES);
  for (int v = 0; v < 4; v++) {
    float best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
      cudaEventRecord(a);
      if (v == 0) ldgsts<<<blocks, THREADS, smem>>>(src, iters, sink);
      else bulk<<<blocks, THREADS, smem>>>(src, iters, sink, v == 1 ? 512 : v == 2 ? 128 : 4096);
      cudaEventRecord(b); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
      float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    }
    const char* nm = v == 0 ? "ldgsts_16B" : v == 1 ? "bulk_512B" : v == 2 ? "bulk_128B" : "bulk_4096B";
    printf(", \"%s_TBps\": %.2f", nm, bytes / best / 1e9);
  }
  printf("}\n");
  return 0;
}
