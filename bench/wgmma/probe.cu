// wgmma probe (bench/wgmma/probe.cu): which descriptor fields read the 128-byte-swizzled
// MN-major B layout of docs/spec.md (mma.mmab), with A from registers in the mma.sync
// m16n8k16 layout; and the rates of wgmma m64n256k16 and of ldmatrix on this device.
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a probe.cu -o probe
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("{\"error\": \"%s at %d\"}\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

// B element (k, n) of a 16-deep slice at local byte offset: panels of 64 columns, P bytes apart;
// row k of a panel at 128*k; 16-byte chunk c = (n % 64) / 8 stored at chunk c ^ (k % 8)
__host__ __device__ inline uint32_t b_off(int k, int n, uint32_t P) {
  return (n / 64) * P + k * 128 + ((((n % 64) / 8) ^ (k % 8)) * 16) + (n % 8) * 2;
}

__device__ inline uint64_t desc(uint32_t saddr, uint32_t lbo, uint32_t sbo, uint32_t swz) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | ((uint64_t)swz << 62);
}

template <int N> __device__ inline void wgmma_call(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db);

#define D8(i) "+f"(d[i+0]), "+f"(d[i+1]), "+f"(d[i+2]), "+f"(d[i+3]), "+f"(d[i+4]), "+f"(d[i+5]), "+f"(d[i+6]), "+f"(d[i+7])
template <> __device__ inline void wgmma_call<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
    " {%32,%33,%34,%35}, %36, 1, 1, 1, 1;\n}\n"
    : D8(0), D8(8), D8(16), D8(24) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// n256 via a generated operand list (128 accumulators)
#define R4(b) "+f"(d[b]), "+f"(d[b+1]), "+f"(d[b+2]), "+f"(d[b+3])
#define R16(b) R4(b), R4(b+4), R4(b+8), R4(b+12)
template <> __device__ inline void wgmma_call<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
    "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
    "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127},"
    " {%128,%129,%130,%131}, %132, 1, 1, 1, 1;\n}\n"
    : R16(0), R16(16), R16(32), R16(48), R16(64), R16(80), R16(96), R16(112)
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ inline void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ inline void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// one warpgroup: D (64 x N) = A (64 x KS*16) B (KS*16 x N); B slices 16 deep at +2048 B in each panel
template <int N>
__global__ void check(const uint16_t* A, const uint16_t* B, float* D, int K, uint32_t P, uint32_t lbo, uint32_t sbo) {
  extern __shared__ __align__(1024) uint8_t sm[];
  int t = threadIdx.x, w = t / 32, l = t % 32, g = l >> 2, q = l & 3;
  for (int e = t; e < K * N; e += 128) {
    int k = e / N, n = e % N;
    *(uint16_t*)(sm + (k / 16) * 2048 + b_off(k % 16, n, P)) = B[k * N + n];
  }
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; i++) d[i] = 0.f;
  uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
  for (int ks = 0; ks < K / 16; ks++) {
    const uint16_t* a = A + ks * 16;
    auto pk = [&](int r, int c) { return (uint32_t)a[r * K + c] | ((uint32_t)a[r * K + c + 1] << 16); };
    int r = 16 * w + g;
    uint32_t ar[4] = {pk(r, 2 * q), pk(r + 8, 2 * q), pk(r, 2 * q + 8), pk(r + 8, 2 * q + 8)};
    wg_fence();
    wgmma_call<N>(d, ar, desc(base + ks * 2048, lbo, sbo, 1));
    wg_commit(); wg_wait0();
  }
  for (int i = 0; i < N / 8; i++) {
    int r = 16 * w + g, c = 8 * i + 2 * q;
    D[r * N + c] = d[4 * i]; D[r * N + c + 1] = d[4 * i + 1];
    D[(r + 8) * N + c] = d[4 * i + 2]; D[(r + 8) * N + c + 1] = d[4 * i + 3];
  }
}

// rate: every warpgroup issues ITER m64n256k16 on the same B; BATCH per commit/wait
template <int BATCH>
__global__ void __launch_bounds__(256, 1) rate(float* out, int iters, uint32_t P, uint32_t lbo, uint32_t sbo) {
  extern __shared__ __align__(1024) uint8_t sm[];
  for (int e = threadIdx.x; e < 16384; e += blockDim.x) ((uint32_t*)sm)[e] = 0x3f803f80u * (e & 1);
  __syncthreads();
  float d[128];
  for (int i = 0; i < 128; i++) d[i] = 0.f;
  uint32_t ar[4] = {0x3f803f80u, 0, 0x3f803f80u, 0};
  uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
  for (int it = 0; it < iters; it += BATCH) {
    wg_fence();
#pragma unroll
    for (int b = 0; b < BATCH; b++) wgmma_call<256>(d, ar, desc(base + (b & 1) * 2048, lbo, sbo, 1));
    wg_commit(); wg_wait0();
  }
  float s = 0.f;
  for (int i = 0; i < 128; i++) s += d[i];
  if (s == 12345.f) out[threadIdx.x] = s;
}

// ldmatrix.x4 rate: each warp reads 512 B per instruction from conflict-free rows
__global__ void __launch_bounds__(256, 1) ldsm_rate(uint32_t* out, int iters, long long* clk) {
  __shared__ __align__(128) uint8_t sm[32768];
  for (int e = threadIdx.x; e < 8192; e += blockDim.x) ((uint32_t*)sm)[e] = e;
  __syncthreads();
  int l = threadIdx.x % 32, w = threadIdx.x / 32;
  uint32_t base = (uint32_t)__cvta_generic_to_shared(sm) + w * 4096 + l * 16;
  uint32_t x = 0;
  long long c0 = clock64();
  for (int it = 0; it < iters; it++) {
    uint32_t r0, r1, r2, r3;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(base + ((it & 7) * 512)));
    x ^= r0 ^ r1 ^ r2 ^ r3;
  }
  long long c1 = clock64();
  if (x == 0x12345678u) out[threadIdx.x] = x;
  if (threadIdx.x == 0 && blockIdx.x == 0) *clk = c1 - c0;
}

static uint16_t f2bf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }
static float bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }

template <int N> static int run_check(int K, uint32_t P, uint32_t lbo, uint32_t sbo) {
  int M = 64;
  uint16_t *hA = (uint16_t*)malloc(M * K * 2), *hB = (uint16_t*)malloc(K * N * 2);
  float* hD = (float*)malloc(M * N * 4);
  srand(7);
  for (int i = 0; i < M * K; i++) hA[i] = f2bf((float)(rand() % 9 - 4));
  for (int i = 0; i < K * N; i++) hB[i] = f2bf((float)(rand() % 9 - 4));
  uint16_t *dA, *dB; float* dD;
  CK(cudaMalloc(&dA, M * K * 2)); CK(cudaMalloc(&dB, K * N * 2)); CK(cudaMalloc(&dD, M * N * 4));
  CK(cudaMemcpy(dA, hA, M * K * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dB, hB, K * N * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dD, 0xff, M * N * 4));
  int smem = (K / 16) * 2048 + (N / 64) * P + 4096;
  CK(cudaFuncSetAttribute(check<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  check<N><<<1, 128, smem>>>(dA, dB, dD, K, P, lbo, sbo);
  CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(hD, dD, M * N * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {
    float s = 0; for (int k = 0; k < K; k++) s += bf2f(hA[i * K + k]) * bf2f(hB[k * N + j]);
    if (s != hD[i * N + j]) bad++;
  }
  cudaFree(dA); cudaFree(dB); cudaFree(dD); free(hA); free(hB); free(hD);
  return bad;
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("{\"device\": \"%s\", \"sms\": %d,\n", pr.name, pr.multiProcessorCount);
  // which (lbo, sbo) reads the layout: P = 4096 (a 32-deep slice per 64-column panel)
  uint32_t cand[][2] = {{4096, 1024}, {1024, 4096}, {16, 1024}, {1024, 16}, {4096, 16}, {16, 4096}};
  printf(" \"check\": [");
  for (int c = 0; c < 6; c++) {
    int b64 = run_check<64>(32, 4096, cand[c][0], cand[c][1]);
    int b256 = run_check<256>(32, 4096, cand[c][0], cand[c][1]);
    printf("%s{\"lbo\": %u, \"sbo\": %u, \"bad_n64_of_4096\": %d, \"bad_n256_of_16384\": %d}", c ? ", " : "",
           cand[c][0], cand[c][1], b64, b256);
  }
  printf("],\n");
  // rates
  uint32_t lbo = 4096, sbo = 1024;
  const char* e = getenv("LBO"); if (e) lbo = atoi(e);
  e = getenv("SBO"); if (e) sbo = atoi(e);
  float* out; CK(cudaMalloc(&out, 4096));
  int iters = 4096, blocks = pr.multiProcessorCount;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  CK(cudaFuncSetAttribute(rate<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(rate<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(rate<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  for (int bt = 1; bt <= 4; bt *= 2) {
    float best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
      cudaEventRecord(a);
      if (bt == 1) rate<1><<<blocks, 256, 65536>>>(out, iters, 4096, lbo, sbo);
      if (bt == 2) rate<2><<<blocks, 256, 65536>>>(out, iters, 4096, lbo, sbo);
      if (bt == 4) rate<4><<<blocks, 256, 65536>>>(out, iters, 4096, lbo, sbo);
      cudaEventRecord(b); CK(cudaEventSynchronize(b));
      float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    }
    double flop = 2.0 * blocks * iters * 64.0 * 256 * 16 * 2;
    printf(" \"wgmma_m64n256k16_2wg_batch%d_tflops\": %.1f,\n", bt, flop / best / 1e9);
  }
  long long* clk; CK(cudaMalloc(&clk, 8));
  uint32_t* o2; CK(cudaMalloc(&o2, 4096));
  int li = 1 << 16; float best = 1e9; long long hc = 0;
  for (int rep = 0; rep < 5; rep++) {
    cudaEventRecord(a); ldsm_rate<<<blocks, 256>>>(o2, li, clk); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) { best = ms; CK(cudaMemcpy(&hc, clk, 8, cudaMemcpyDeviceToHost)); }
  }
  double bytes = (double)blocks * 8 * li * 512;
  printf(" \"ldmatrix_x4_TBps\": %.2f, \"ldmatrix_bytes_per_clk_per_sm\": %.1f, \"sm_clock_ghz_est\": %.3f}\n",
         bytes / best / 1e9, (double)8 * li * 512 / hc, hc / (best * 1e6));
  return 0;
}
