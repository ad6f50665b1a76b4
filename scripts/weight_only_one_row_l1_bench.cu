// One row of x against Llama-3-8B's weight-only products (int4 in groups of 128 with zero points,
// int8 per output feature): the one-row tile of kernels/weight_only_frag.cuh (wo_frag_row) against
// a form with less L1 traffic a chunk, and each against the CUDA-core rows' outputs. Nsight Compute
// put the one-row tile's gate/up (25 us, 15.6 the read floor) at 79% of the L1/TEX unit's
// throughput while issuing 0.5 instructions a cycle: per chunk of a warp its four 2-byte scale and
// zero-point loads touch 8 sectors each (the lanes' 16 rows; 60% of the kernel's global sectors
// are these excess ones), and its four reads of x's pairs span 256 bytes for 4 distinct addresses.
// The form here: each lane of a row's 4 keeps 8 groups of one of {scale, zero} x {row g, row g + 8}
// as one 16-byte load (and the next 8 in flight), a shuffle hands the zero point to the scale's
// lane, and x's pieces lie interleaved (the 4 lanes' pieces of a step side by side: one 64-byte
// span). A diagnostic for the next form of the decode step's products; run on the GPU machine
// from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wol1 scripts/weight_only_one_row_l1_bench.cu && /tmp/wol1
// Prints, per shape and format, each kernel's best time over the splits (µs), its GB/s and the
// largest difference of its outputs from the rows kernel's (over the largest output).
#include <algorithm>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_frag.cuh"
#include "weight_only_bench_util.cuh"

// wo_row_x's values and sums, piece p of a chunk stored at slot (j, t) = (p % (PC / 4), p / (PC / 4))
// of the chunk: lane t's j-th piece.
template <int BITS>
DEVI void wo_row_x_interleaved(const unsigned short* x, int K, uint4* xs, float2* sums) {
  constexpr int PC = WoRowChunk<BITS>::kPieces, PL = PC / 4;
  for (int p0 = 0; p0 < K / 8; p0 += WO_BLOCK) {
    const int p = p0 + threadIdx.x;
    const bool live = p < K / 8;
    const V16 v = live ? wo_load_x(x + p * 8) : V16{0u, 0u, 0u, 0u};
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    float f[8], m = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
#pragma unroll
    for (int o = 1; o < PC; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const int e = m > 0.0f ? min(max(static_cast<int>((__float_as_uint(m) >> 23) & 0xff) - 127, -100), 117) : 0;
    const float scale = __uint_as_float(static_cast<unsigned>(127 + 14 - e) << 23);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] *= scale, s += f[i];
    const int q = p % PC, slot = p - q + (q % PL) * 4 + q / PL;
    if (live)
      xs[slot] = BITS == 4 ? make_uint4(wo_half2(f[0], f[4]), wo_half2(f[2], f[6]), wo_half2(f[1], f[5]), wo_half2(f[3], f[7]))
                           : make_uint4(wo_half2(f[0], f[2]), wo_half2(f[1], f[3]), wo_half2(f[4], f[6]), wo_half2(f[5], f[7]));
#pragma unroll
    for (int o = 1; o < PC; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (live && q == 0)
      sums[p / PC] = make_float2(s * 0x1p-24f, __uint_as_float(static_cast<unsigned>(127 - 14 + e + 24) << 23));
  }
}

// 16-bit entry i (0..7) of v.
DEVI unsigned wo_u16_of(const V16& v, int i) {
  const unsigned w = i < 4 ? (i < 2 ? v.x : v.y) : (i < 6 ? v.z : v.w);
  return i & 1 ? w >> 16 : w & 0xffffu;
}

// wo_frag_row (int4 or int8) with the scales and zero points held 8 groups a lane and x's pieces
// interleaved. Lane t of a row's 4 keeps kind t: 0 the scale of row g, 1 its zero point, 2 and 3
// those of row g + 8; lanes 0 and 2 sum rows g and g + 8 (every column of the tile is x's row).
template <int BITS>
DEVI void wo_frag_row_l1(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  constexpr int P = WO_ROW_SLOTS;
  __shared__ uint4 xs[WO_ROW_MAX_K / 8];
  __shared__ float2 sums[WO_ROW_MAX_K / C::kValues];
  __shared__ V16 ring[P][2][WO_BLOCK];
  float (*part)[4 * 32] = reinterpret_cast<float (*)[4 * 32]>(&ring[0][0][0]);
  const WoMmaPlace at = wo_mma_place<8>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws;
  const int N = static_cast<int>(a.N), n0 = static_cast<int>(at.n0), K = static_cast<int>(a.K);
  const int chunks = n0 < N ? K / C::kValues : 0, groups = static_cast<int>(a.groups);
  const int gshift = groups == 1 ? 30 : __ffs(static_cast<int>(a.group / C::kValues)) - 1;
  const int ra = min(n0 + g8, N - 1), rb = min(n0 + g8 + 8, N - 1);
  const signed char* wp = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16 + ws * 64;
  const int wd = (rb - ra) * static_cast<int>(a.row_bytes);
  const i64 wstep = split * 64;
  // This lane's kind: its array (the zero points where any, else the scales again, times 0) and row.
  const S* kp = (const S*)(t4 & 1 && a.zero ? a.zero : a.scale) + (i64)(t4 & 2 ? rb : ra) * groups;
  const bool window = groups % 8 == 0;  // whole 16-byte windows of 8 groups a row
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : 128.0f;
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  auto copy = [&](int i) {
    if (i < mine) {
      wo_cp16(&ring[i % P][0][threadIdx.x], wp);
      wo_cp16(&ring[i % P][1][threadIdx.x], wp + wd);
      wp += wstep;
    }
    wo_commit();
  };
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  // The window of 8 groups holding this warp's first chunk's group, and the next one in flight.
  int base = (ws >> gshift) & ~7, have = -1;
  V16 cur{0u, 0u, 0u, 0u}, nxt{0u, 0u, 0u, 0u};
  unsigned own = 0;
  if (mine > 0 && window) {
    cur = *(const V16*)(kp + base);
    if (base + 8 < groups) nxt = *(const V16*)(kp + base + 8);
  }
  wo_row_x_interleaved<BITS>((const S*)a.x + at.m0 * a.K, K, xs, sums);
  __syncthreads();
  float acc = 0.0f;
  const uint4* xc = xs + ws * C::kPieces + t4;
  int c = ws;
#pragma unroll 1
  for (int i = 0; c < chunks; c += split, ++i) {
    copy(i + P - 1);
    const float2 sm = sums[c];
    const int grp = c >> gshift;
    if (window) {
      if (grp >= base + 8) {  // into the next window (a chunk moves at most 8 groups), the one after it out
        cur = nxt, base += 8;
        if (base + 8 < groups) nxt = *(const V16*)(kp + base + 8);
      }
      own = wo_u16_of(cur, grp - base);
    } else if (grp != have) {
      own = kp[grp], have = grp;
    }
    const unsigned other = __shfl_down_sync(0xffffffffu, own, 1);  // lanes 0 and 2: their row's zero point
    const float s = b2f(static_cast<S>(own)) * sm.y, o = fmaf(zf, b2f(static_cast<S>(other)), offset);
    wo_wait<P - 1>();
    const V16 va = ring[i % P][0][threadIdx.x], vb = ring[i % P][1][threadIdx.x];
    const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
    float lo[4] = {}, hi[4] = {};
#pragma unroll
    for (int k = 0; k < 4; ++k) wo_row_mmas<BITS>(lo, hi, wa[k], wb[k], xc[(BITS == 4 ? k : k >> 1) * 4], k);
    xc += split * C::kPieces;
    const float u = t4 & 2 ? fmaf(hi[2], 0.0625f, lo[2]) : fmaf(hi[0], 0.0625f, lo[0]);
    acc = fmaf(s, fmaf(-o, sm.x, u), acc);
  }
  wo_wait<0>();
  if (split > 1) __syncthreads();
  if (!split_sum_lanes<1>(&acc, part, split, g, ws)) return;
  S* out = (S*)a.out + at.m0 * a.N;
  const int n = n0 + g8 + (t4 & 2 ? 8 : 0);
  if ((t4 & 1) == 0 && n < N) out[n] = f2b(acc);
}

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_row4(const WoArgs a) { wo_frag_row<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_row8(const WoArgs a) { wo_frag_row<8>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_l1_4(const WoArgs a) { wo_frag_row_l1<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_l1_8(const WoArgs a) { wo_frag_row_l1<8>(a); }
// Held to 64 registers: four blocks a multiprocessor, as the one-row tile (the form above takes 68).
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 4) k_l1_4b(const WoArgs a) { wo_frag_row_l1<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows4(const WoArgs a) { wo_dot<WoBf16, 4, 1, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows8(const WoArgs a) { wo_dot<WoBf16, 8, 1, 4>(a); }

int main() {
  struct Shape { const char* name; long N, K; } shapes[] = {
      {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  for (int bits : {4, 8}) {
    for (const Shape& s : shapes) {
      const long N = s.N, K = s.K, row_bytes = K * bits / 8, group = bits == 4 ? 128 : K, groups = K / group;
      const size_t wbytes = (size_t)N * row_bytes;
      const int copies = (int)std::max<size_t>(2, (size_t(512) << 20) / wbytes);
      std::vector<void*> ws(copies);
      for (auto& p : ws) { CK(cudaMalloc(&p, wbytes)); fill_bytes<<<512, 256>>>((unsigned*)p, wbytes / 4, (unsigned)(size_t)p); }
      unsigned short *x, *sc, *zp, *ref, *out;
      CK(cudaMalloc(&x, K * 2)); CK(cudaMalloc(&sc, N * groups * 2)); CK(cudaMalloc(&zp, N * groups * 2));
      CK(cudaMalloc(&ref, N * 2)); CK(cudaMalloc(&out, N * 2));
      fill_bf16<<<256, 256>>>(x, K, -1.f, 1.f, 7, false);
      fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
      fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
      WoArgs a{};
      a.x = (i64)x; a.w = (i64)ws[0]; a.scale = (i64)sc; a.zero = bits == 4 ? (i64)zp : 0;
      a.rows = 1; a.N = N; a.K = K; a.row_bytes = row_bytes; a.groups = groups; a.group = group;
      a.vec = 0; a.split = 8; a.n_blocks = (N + 3) / 4; a.mma_split = 0; a.out = (i64)ref;
      (bits == 4 ? k_rows4 : k_rows8)<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a);
      std::vector<unsigned short> want(N), got(N);
      CK(cudaMemcpy(want.data(), ref, N * 2, cudaMemcpyDeviceToHost));
      double most = 0;
      for (unsigned short v : want) most = std::max(most, (double)fabsf(bf(v)));
      a.vec = 1; a.out = (i64)out;
      printf("%-8s b%d (%6ld, %6ld) %6.1f MB:", s.name, bits, N, K, wbytes / 1e6);
      auto variant = [&](const char* name, auto fn) {
        float best = 1e9f;
        int best_split = 0;
        for (int split : {1, 2, 4, 8}) {
          a.mma_split = split; a.mma_blocks = (N + (8 / split) * 16 - 1) / ((8 / split) * 16);
          const float t = time_us([&](int i) { a.w = (i64)ws[i % copies]; fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a); });
          if (t < best) best = t, best_split = split;
        }
        a.w = (i64)ws[0]; a.mma_split = 4; a.mma_blocks = (N + 31) / 32;
        CK(cudaMemset(out, 0, N * 2));
        fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
        CK(cudaMemcpy(got.data(), out, N * 2, cudaMemcpyDeviceToHost));
        double diff = 0;
        for (long i = 0; i < N; ++i) diff = std::max(diff, (double)fabsf(bf(got[i]) - bf(want[i])));
        printf(" | %s %6.2f us s%d %5.0f GB/s diff %.1e", name, best, best_split, wbytes / best / 1e3, diff / most);
      };
      variant("one-row", bits == 4 ? k_row4 : k_row8);
      variant("l1", bits == 4 ? k_l1_4 : k_l1_8);
      if (bits == 4) variant("l1-64reg", k_l1_4b);
      printf("\n");
      for (void* p : ws) cudaFree(p);
      cudaFree(x); cudaFree(sc); cudaFree(zp); cudaFree(ref); cudaFree(out);
    }
  }
}
