// The one-row int4 weight-only products of a Llama-3-8B decode step (groups of 128 with zero points)
// with the packed weight streamed by the tensor memory accelerator, timed alone against the kernel
// file's CUDA-core rows and tensor-core ring (kernels/weight_only_dot.cuh) and against a kernel that
// only reads the same bytes, with back-to-back launches over weight copies larger than the L2. The
// TMA form here is the one bench/HISTORY.md describes (not in the compiler): each warp takes TR
// tiles of 16 weight rows and streams boxes of 16 TR rows x 128 packed bytes (256 values) through a
// ring of STAGES slots with one copy instruction a box (128B-swizzled tensor map, rows paired so a
// quarter warp meets 8 bank groups); the raw nibbles reach mma.m16n8k16 under bfloat16's exponent of
// 128 and each 128-value block adds s (sum x q - (136 + z) sum x), sum x from an mma with A all ones.
// A diagnostic for work on an int4 TMA path; on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wot scripts/weight_only_tma_bench.cu -lcuda && /tmp/wot
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_bench_util.cuh"

extern "C" __global__ void __launch_bounds__(WO_BLOCK, 2) k_ring4(const WoArgs a) { wo_mma_ring<WoBf16, 4, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows4(const WoArgs a) { wo_dot<WoBf16, 4, 1, 4>(a); }

struct TmaArgs {
  i64 out, x, scale, zero;
  int rows, N, K, groups, group, split, n_blocks;
};

DEVI unsigned lop3_or(unsigned a, unsigned mask, unsigned magic) {  // (a & mask) | magic
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(mask), "r"(magic));
  return d;
}
DEVI unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
DEVI void mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// out[0..M) x N of x (M <= 8 rows) times the row-major packed int4 weight [N, K / 2] (k even in the
// low nibble, u meaning u - 8), K a multiple of 128 and the group too.
template <int WARPS, int STAGES, int TR>
__global__ void __launch_bounds__(WARPS * 32, 4) k_tma(const TmaArgs a, const __grid_constant__ TmaMap map) {
  constexpr int BOX = 2048 * TR;
  __shared__ __align__(1024) unsigned char ring[WARPS][STAGES][BOX];
  __shared__ float part[WARPS][TR * 4 * 32];
  __shared__ u64 bars[WARPS][STAGES];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, t4 = lane & 3;
  const int split = a.split, wg = warp / split, ws = warp % split;
  const int n0 = ((blockIdx.x % a.n_blocks) * (WARPS / split) + wg) * 16 * TR, M = min(a.rows, 8);
  const int N = a.N, K = a.K, groups = a.groups, KB = K / 128, boxes = (KB + 1) / 2;
  const int per = (boxes + split - 1) / split, b0 = ws * per, nb = max(0, min(boxes, b0 + per) - b0);
  const bool live = n0 < N && nb > 0;
  if (lane == 0)
    for (int s = 0; s < STAGES; ++s) tma_barrier_init(&bars[warp][s]);
  __syncwarp();
  auto fill = [&](int i) {
    tma_arm(&bars[warp][i % STAGES], BOX);
    tma_load_2d(&ring[warp][i % STAGES][0], &map, (b0 + i) * 128, n0, &bars[warp][i % STAGES]);
  };
  if (live && lane == 0)
    for (int i = 0; i < STAGES && i < nb; ++i) fill(i);
  enter_after_previous();
  const int rho = (g8 >> 1) + 4 * (g8 & 1);
  const unsigned short *sp[TR][2], *zq[TR][2];
  const unsigned short* zp = (const unsigned short*)a.zero;
  for (int r = 0; r < TR; ++r)
    for (int h = 0; h < 2; ++h) {
      const int n = min(n0 + 16 * r + 8 * h + rho, N - 1);
      sp[r][h] = (const unsigned short*)a.scale + (i64)n * groups;
      zq[r][h] = zp ? zp + (i64)n * groups : sp[r][h];
    }
  const int gsh = __ffs(a.group / 128) - 1;
  const unsigned short* xr = (const unsigned short*)a.x + (i64)(g8 < M ? g8 : 0) * K + t4 * 32;
  const int at0 = rho * 128 + (t4 ^ rho) * 16, at1 = rho * 128 + ((4 + t4) ^ rho) * 16;
  float c[TR][4] = {};
  if (live)
    for (int i = 0; i < nb; ++i) {
      tma_wait(&bars[warp][i % STAGES], (i / STAGES) & 1);
      const unsigned char* box = &ring[warp][i % STAGES][0];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int kb = (b0 + i) * 2 + j;
        if (kb >= KB) break;
        unsigned nx[16], X[16];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const V16 q = *(const V16*)(xr + kb * 128 + v * 8);
          nx[4 * v] = q.x, nx[4 * v + 1] = q.y, nx[4 * v + 2] = q.z, nx[4 * v + 3] = q.w;
        }
#pragma unroll
        for (int w = 0; w < 4; ++w) {  // x paired as the nibbles are: (k, k + 4) of each 8
          X[4 * w] = prmt(nx[4 * w], nx[4 * w + 2], 0x5410), X[4 * w + 1] = prmt(nx[4 * w], nx[4 * w + 2], 0x7632);
          X[4 * w + 2] = prmt(nx[4 * w + 1], nx[4 * w + 3], 0x5410);
          X[4 * w + 3] = prmt(nx[4 * w + 1], nx[4 * w + 3], 0x7632);
        }
        float cs[4] = {};
#pragma unroll
        for (int m = 0; m < 8; ++m) mma_bf16(cs, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u, X[2 * m], X[2 * m + 1]);
        const int grp = kb >> gsh;
#pragma unroll
        for (int r = 0; r < TR; ++r) {
          const int at = r * 2048 + (j ? at1 : at0);
          const V16 wa = lds16(box + at), wb = lds16(box + at + 1024);
          const unsigned ua[4] = {wa.x, wa.y, wa.z, wa.w}, ub[4] = {wb.x, wb.y, wb.z, wb.w};
          float cq[4] = {};
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            unsigned pa[4], pb[4];
#pragma unroll
            for (int b = 0; b < 4; ++b) {
              pa[b] = lop3_or(ua[w] >> (4 * b), 0x000f000fu, 0x43004300u);
              pb[b] = lop3_or(ub[w] >> (4 * b), 0x000f000fu, 0x43004300u);
            }
            mma_bf16(cq, pa[0], pb[0], pa[1], pb[1], X[4 * w], X[4 * w + 1]);
            mma_bf16(cq, pa[2], pb[2], pa[3], pb[3], X[4 * w + 2], X[4 * w + 3]);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1;
            const float s = b2f(sp[r][h][grp]), off = 136.f + (zp ? b2f(zq[r][h][grp]) : 0.f);
            c[r][e] = fmaf(s, fmaf(-off, cs[e], cq[e]), c[r][e]);
          }
        }
      }
      __syncwarp();
      if (lane == 0 && i + STAGES < nb) {
        tma_reuse();
        fill(i + STAGES);
      }
    }
  if (!split_sum_lanes<TR * 4>(&c[0][0], part, split, wg, ws) || n0 >= N) return;
  for (int r = 0; r < TR; ++r)
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + 16 * r + (e >> 1) * 8 + rho, m = 2 * t4 + (e & 1);
      if (m < M && n < N) ((unsigned short*)a.out)[(i64)m * N + n] = f2b(c[r][e]);
    }
}

static TmaMap weight_map(const void* w, int N, long row_bytes, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {(cuuint64_t)row_bytes, (cuuint64_t)N}, strides[1] = {(cuuint64_t)row_bytes};
  cuuint32_t box[2] = {128, (cuuint32_t)box_rows}, unit[2] = {1, 1};
  if (cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(w), dims, strides, box, unit,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    printf("tensor map refused\n"), exit(1);
  TmaMap t;
  memcpy(&t, &m, sizeof t);
  return t;
}
template <int WARPS, int STAGES, int TR>
float time_tma(TmaArgs ta, const std::vector<TmaMap>& maps, int* best_split) {
  float best = 1e9f;
  for (int split : {1, 2, 4}) {
    if (split > WARPS) continue;
    ta.split = split;
    ta.n_blocks = (ta.N + 16 * TR * (WARPS / split) - 1) / (16 * TR * (WARPS / split));
    const float t = time_us([&](int i) { k_tma<WARPS, STAGES, TR><<<ta.n_blocks, WARPS * 32>>>(ta, maps[i % maps.size()]); });
    if (t < best) best = t, *best_split = split;
  }
  return best;
}

int main() {
  struct S { const char* name; int N, K; } shapes[] = {
      {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (auto& s : shapes) {
    const int N = s.N, K = s.K, group = 128, groups = K / group;
    const long row_bytes = K / 2;
    const size_t wbytes = (size_t)N * row_bytes;
    const int copies = (int)std::max<size_t>(2, (size_t(384) << 20) / wbytes);
    std::vector<void*> ws(copies);
    std::vector<TmaMap> maps16, maps32;
    for (int i = 0; i < copies; ++i) {
      CK(cudaMalloc(&ws[i], wbytes));
      fill_bytes<<<512, 256>>>((unsigned*)ws[i], wbytes / 4, 17u + i);
      maps16.push_back(weight_map(ws[i], N, row_bytes, 16));
      maps32.push_back(weight_map(ws[i], N, row_bytes, 32));
    }
    unsigned short *x, *sc, *zp, *out, *out2;
    CK(cudaMalloc(&x, (size_t)K * 2));
    CK(cudaMalloc(&sc, (size_t)N * groups * 2));
    CK(cudaMalloc(&zp, (size_t)N * groups * 2));
    CK(cudaMalloc(&out, (size_t)N * 2));
    CK(cudaMalloc(&out2, (size_t)N * 2));
    fill_bf16<<<256, 256>>>(x, K, -1.f, 1.f, 7, false);
    fill_bf16<<<256, 256>>>(sc, (size_t)N * groups, 0.002f, 0.02f, 9, false);
    fill_bf16<<<256, 256>>>(zp, (size_t)N * groups, -3.f, 3.f, 11, true);
    CK(cudaDeviceSynchronize());
    WoArgs a{};
    a.out = (i64)out, a.x = (i64)x, a.scale = (i64)sc, a.zero = (i64)zp, a.rows = 1, a.N = N, a.K = K;
    a.row_bytes = row_bytes, a.groups = groups, a.group = group, a.vec = 1;
    float rows = 1e9f, ring = 1e9f;
    for (int split : {1, 2, 4, 8}) {
      a.split = split, a.n_blocks = (N + (8 / split) * 4 - 1) / ((8 / split) * 4), a.mma_split = a.mma_blocks = 0;
      rows = std::min(rows, time_us([&](int i) { a.w = (i64)ws[i % copies]; k_rows4<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a); }));
      a.mma_split = split, a.mma_blocks = (N + (8 / split) * 32 - 1) / ((8 / split) * 32);
      ring = std::min(ring, time_us([&](int i) { a.w = (i64)ws[i % copies]; k_ring4<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a); }));
    }
    float floor = 1e9f;
    for (int blocks : {sms * 4, sms * 8})
      floor = std::min(floor, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); }));
    TmaArgs ta{(i64)out2, (i64)x, (i64)sc, (i64)zp, 1, N, K, groups, group, 1, 1};
    int s1, s2;
    const float t1 = time_tma<8, 2, 1>(ta, maps16, &s1), t2 = time_tma<4, 2, 2>(ta, maps32, &s2);
    // Agreement with the rows kernel on the first copy.
    a.w = (i64)ws[0], a.split = 8, a.n_blocks = (N + 3) / 4, a.mma_split = 0;
    k_rows4<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a);
    ta.split = 2, ta.n_blocks = (N + 63) / 64;
    k_tma<4, 2, 2><<<ta.n_blocks, 128>>>(ta, maps32[0]);
    std::vector<unsigned short> h1(N), h2(N);
    CK(cudaMemcpy(h1.data(), out, N * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
    double diff = 0, top = 0;
    for (int i = 0; i < N; ++i) diff = std::max(diff, (double)fabsf(bf(h1[i]) - bf(h2[i]))), top = std::max(top, (double)fabsf(bf(h1[i])));
    printf("%-8s (%6d, %6d) %6.1f MB | read floor %6.2f | rows %6.2f ring %6.2f | TMA 8 warps %6.2f (split %d), "
           "2 tiles a warp %6.2f (split %d) us | max diff %.1e of the largest\n",
           s.name, N, K, wbytes / 1e6, floor, rows, ring, t1, s1, t2, s2, diff / top);
    for (auto p : ws) cudaFree(p);
    cudaFree(x), cudaFree(sc), cudaFree(zp), cudaFree(out), cudaFree(out2);
  }
}
