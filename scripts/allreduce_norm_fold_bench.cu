// Whether the residual add + RMSNorm after a row-parallel layer's all-reduce is worth doing inside
// the all-reduce. On two GPUs a decode step has 64 such pairs (Llama-3-8B: 4096 bf16 features, 8
// KiB a rank): the one-shot all-reduce (kernels/one_shot_collective.cuh, epoch words, 32 blocks)
// then the norm, one block, a launch of its own. Folded, every one of the 32 blocks sends its slice
// with its epoch as the one-shot kernel does, then reads the whole row (every rank's words, from its
// own memory), sums it in rank order, adds the residual, takes the sum of squares itself and writes
// its slice of the new residual and of the normalized row: one launch, no single-block kernel.
// (Done with one block for the whole exchange instead, this was slower: bench/HISTORY.md.)
//
// One process drives both GPUs (peer access), each a CUDA graph of 64 layer-halves chained through
// the normalized row; launches overlap the one before (programmatic dependent launch). A
// diagnostic; run on a machine with two GPUs from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/arf scripts/allreduce_norm_fold_bench.cu && /tmp/arf
// Prints µs a layer-half for all-reduce + norm and for the folded kernel on 32 blocks (and on
// fewer: one block is close to the form tried before; and with only the first block reading the row,
// the others sending, which a generated one-block norm could take as it is), and the largest
// difference of the final rows (relative to the largest value). `arf gemv` puts a rank's two
// products of the 8B MLP (kernels/gemv.cuh's rows: 4096 -> 7168 from the norm's output, 7168 ->
// 4096 into the all-reduce, each layer-half its own weights) around each pair, as in a step, where
// each kernel's start overlaps the one before: the fold's saving in the chain it would run in.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device_prelude.cuh"
#define TRIPY_FOR_DTYPE(dtype, ...) __VA_ARGS__
#include "one_shot_collective.cuh"
#include "gemv.cuh"
#include "overlap_bench_util.cuh"

constexpr int kK = 4096, kBlocks = 32, kThreads = 512, kLayers = 64;
constexpr float kEps = 1e-5f;

DEVI float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // red is free (an earlier sum may still be read)
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += red[w];
  return total;
}

// The unfolded norm, one block: h = bf16(a + s), n = bf16(h * rsqrt(mean(h^2) + eps) * gamma).
__global__ void __launch_bounds__(256) add_rmsnorm(const unsigned short* a, const unsigned short* s,
                                                   const unsigned short* gamma, unsigned short* h, unsigned short* n) {
  enter_after_previous();
  __shared__ float red[32];
  float ss = 0.0f;
  for (int k = threadIdx.x; k < kK; k += blockDim.x) {
    const float v = b2f(f2b(b2f(a[k]) + b2f(s[k])));
    ss += v * v;
  }
  const float rs = rsqrtf(block_sum(ss, red) / kK + kEps);
  for (int k = threadIdx.x; k < kK; k += blockDim.x) {
    const unsigned short v = f2b(b2f(a[k]) + b2f(s[k]));
    h[k] = v;
    n[k] = f2b(b2f(v) * rs * b2f(gamma[k]));
  }
}

struct FoldArgs {
  OneShotArgs ar;                  // in: this rank's part; out unused
  const unsigned short *a, *gamma;  // the residual, the norm's weight
  unsigned short *h, *n;            // the new residual, the normalized row
  int solo;                         // 1: the blocks past the first only send; the first does the rest
};

// The folded kernel: the one-shot's epoch words, then each block the whole row.
__global__ void __launch_bounds__(kThreads) allreduce_norm(const FoldArgs f) {
  enter_after_previous();
  __shared__ float red[32];
  __shared__ unsigned short row[kK];  // h, the whole row, for this block's slice of n
  const OneShotArgs& a = f.ar;
  union Unit {
    u64 u;
    unsigned w[2];
    unsigned short t[4];
  };
  unsigned* counters = (unsigned*)a.counters;
  const unsigned epoch = counters[blockIdx.x] + 1;
  const i64 units = kK / 4, slot = 2 * a.epoch_bytes;
  const i64 buffer = (i64)(epoch & 1u) * TRIPY_AR_RANKS * slot;
  const u64 tag = (u64)epoch << 32;
  const unsigned short* in = (const unsigned short*)a.in;
  const char* own = (const char*)(a.data[a.rank] + 2 * a.capacity) + buffer;
  // Send this block's units (as the one-shot kernel: unit u from thread u of the grid).
  for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (i64)gridDim.x * blockDim.x) {
    const u64 mine = *(const u64*)(in + u * 4);
    for (int p = 0; p < a.world; ++p)
      if (p != a.rank)
        ar_store_pair((char*)(a.data[p] + 2 * a.capacity) + buffer + a.rank * slot + u * 16, tag | (unsigned)mine,
                      tag | (unsigned)(mine >> 32));
  }
  if (f.solo && blockIdx.x != 0) {
    __syncthreads();  // every thread has read the counter
    if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
    return;
  }
  // Every unit of the row: the ranks' parts summed in rank order, the residual added.
  float ss = 0.0f;
  for (i64 u = threadIdx.x; u < units; u += blockDim.x) {
    Unit mine;
    mine.u = *(const u64*)(in + u * 4);
    float acc[4];
    for (int r = 0; r < a.world; ++r) {
      Unit v;
      v.u = ar_rank_unit(a, own, slot, u, epoch, r, mine.u);
      for (int j = 0; j < 4; ++j) acc[j] = r == 0 ? b2f(v.t[j]) : acc[j] + b2f(v.t[j]);
    }
    for (int j = 0; j < 4; ++j) {
      const unsigned short hv = f2b(b2f(f.a[u * 4 + j]) + b2f(f2b(acc[j])));
      row[u * 4 + j] = hv;
      ss += b2f(hv) * b2f(hv);
    }
  }
  const float rs = rsqrtf(block_sum(ss, red) / kK + kEps);  // its barriers also make `row` whole
  const int per = f.solo ? kK : kK / gridDim.x;
  for (int k = blockIdx.x * per + threadIdx.x; k < (blockIdx.x + 1) * per; k += blockDim.x) {
    f.h[k] = row[k];
    f.n[k] = f2b(b2f(row[k]) * rs * b2f(f.gamma[k]));
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
}

// A product of the chain: one row of x, two weight rows a warp group, as the tuned 8B GEMVs.
__global__ void __launch_bounds__(GEMV_BLOCK) product(const GemvArgs a) { gemv_rows<GemvBf16, 1, 2>(a); }
constexpr int kMid = 7168;  // a rank's half of the 8B MLP's 14336 features

struct Rank {
  cudaStream_t stream;
  unsigned short *x[2], *h[2], *sum, *gamma;
  char* area;          // the epoch words (two buffers of a slot per sending rank)
  unsigned* counters;  // this rank's epoch per block
  i64* err;            // an error record, and the claim word after it
  unsigned short* mid;  // the first product's output
  std::vector<unsigned short*> up, down;  // each layer-half's two weights (with `gemv`)
};

int main(int argc, char** argv) {
  const bool chain = argc > 1 && std::strcmp(argv[1], "gemv") == 0;
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (count < 2) {
    printf("needs two GPUs (found %d)\n", count);
    return 1;
  }
  const i64 epoch_bytes = 64 << 10, area = 2 * TRIPY_AR_RANKS * 2 * epoch_bytes;
  Rank rk[2];
  for (int g = 0; g < 2; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceEnablePeerAccess(1 - g, 0));
    Rank& r = rk[g];
    CK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    for (int i = 0; i < 2; ++i) {
      CK(cudaMalloc(&r.x[i], kK * 2));
      CK(cudaMalloc(&r.h[i], kK * 2));
    }
    CK(cudaMalloc(&r.sum, kK * 2));
    CK(cudaMalloc(&r.gamma, kK * 2));
    CK(cudaMalloc(&r.area, area));
    CK(cudaMemset(r.area, 0, area));
    CK(cudaMalloc(&r.counters, kBlocks * 4));
    CK(cudaMalloc(&r.err, 8 * 8));
    CK(cudaMemset(r.err, 0, 8 * 8));
    CK(cudaMalloc(&r.mid, kMid * 2));
    if (chain)
      for (int l = 0; l < kLayers; ++l) {
        unsigned short *u, *d;
        CK(cudaMalloc(&u, (size_t)kMid * kK * 2));
        CK(cudaMalloc(&d, (size_t)kK * kMid * 2));
        fill_bf16_hash<<<1024, 256>>>(u, (size_t)kMid * kK, 0.03f, 100 + l, 0.0f);
        fill_bf16_hash<<<1024, 256>>>(d, (size_t)kK * kMid, 0.03f, 300 + l, 0.0f);
        r.up.push_back(u);
        r.down.push_back(d);
      }
  }
  auto reset = [&]() {  // the same inputs for both forms, and no words of an earlier epoch 1, 2, ...
    for (int g = 0; g < 2; ++g) {
      CK(cudaSetDevice(g));
      CK(cudaMemset(rk[g].area, 0, area));
      CK(cudaMemset(rk[g].counters, 0, kBlocks * 4));
      fill_bf16_hash<<<8, 256>>>(rk[g].x[0], kK, 1.0f, 10 + g, 0.0f);
      fill_bf16_hash<<<8, 256>>>(rk[g].h[0], kK, 4.0f, 20, 0.0f);  // the residual is the same on every rank
      fill_bf16_hash<<<8, 256>>>(rk[g].gamma, kK, 0.5f, 30, 1.0f);
      CK(cudaDeviceSynchronize());
    }
  };
  auto args_for = [&](int g, int layer) {
    OneShotArgs a{};
    a.in = (i64)rk[g].x[layer & 1];
    a.out = (i64)rk[g].sum;
    a.count = kK;
    a.err = (i64)rk[g].err;
    a.tag = 1;
    a.claim = (i64)(rk[g].err + 7);
    a.timeout_ns = 2000000000;
    a.rank = g;
    a.world = 2;
    a.counters = (i64)rk[g].counters;
    a.capacity = 0;  // no staging buffers: the epoch words start the area
    a.epoch_bytes = epoch_bytes;
    for (int p = 0; p < 2; ++p) a.data[p] = (i64)rk[p].area;
    return a;
  };
  // form 0: one-shot all-reduce + norm; then folded on 32, 8, 2 and 1 blocks, then on 32 and 2 of
  // which only the first reads the row (the others send). Each a graph per GPU.
  const int grids[] = {0, kBlocks, 8, 2, 1, kBlocks, 2}, solo[] = {0, 0, 0, 0, 0, 1, 1};
  const int forms = 7;
  float us[forms];
  std::vector<unsigned short> result[forms];
  for (int form = 0; form < forms; ++form) {
    reset();
    cudaGraphExec_t exec[2];
    for (int g = 0; g < 2; ++g) {
      CK(cudaSetDevice(g));
      Rank& r = rk[g];
      cudaGraph_t graph;
      CK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < kLayers; ++l) {
        const OneShotArgs a = args_for(g, l);
        unsigned short *h_in = r.h[l & 1], *h_out = r.h[(l + 1) & 1], *n_out = r.x[(l + 1) & 1];
        if (chain) {  // the previous norm's output -> mid -> this all-reduce's input (in place)
          unsigned short* x = r.x[l & 1];
          const GemvArgs g1{(i64)r.mid, (i64)x, (i64)r.up[l], 0, 1, kMid, kK, 0, 1, 1, 1};
          const GemvArgs g2{(i64)x, (i64)r.mid, (i64)r.down[l], 0, 1, kK, kMid, 0, 1, 1, 1};
          void* q1[] = {(void*)&g1};
          void* q2[] = {(void*)&g2};
          launch_overlapping((const void*)product, kMid / 16, GEMV_BLOCK, q1, r.stream);
          launch_overlapping((const void*)product, kK / 16, GEMV_BLOCK, q2, r.stream);
        }
        if (form == 0) {
          void* p0[] = {(void*)&a};
          launch_overlapping((const void*)tripy_one_shot_bf16, kBlocks, kThreads, p0, r.stream);
          const unsigned short* s = r.sum;
          const unsigned short* gm = r.gamma;
          void* p1[] = {&h_in, &s, &gm, &h_out, &n_out};
          launch_overlapping((const void*)add_rmsnorm, 1, 256, p1, r.stream);
        } else {
          const FoldArgs fa{a, h_in, r.gamma, h_out, n_out, solo[form]};
          void* p0[] = {(void*)&fa};
          launch_overlapping((const void*)allreduce_norm, grids[form], kThreads, p0, r.stream);
        }
      }
      CK(cudaStreamEndCapture(r.stream, &graph));
      CK(cudaGraphInstantiate(&exec[g], graph, 0));
    }
    auto replay = [&]() {
      for (int g = 0; g < 2; ++g) {
        CK(cudaSetDevice(g));
        CK(cudaGraphLaunch(exec[g], rk[g].stream));
      }
    };
    replay();  // the result below: one replay from the inputs
    for (int g = 0; g < 2; ++g) {
      CK(cudaSetDevice(g));
      CK(cudaStreamSynchronize(rk[g].stream));
    }
    result[form].resize(kK);
    CK(cudaSetDevice(0));
    CK(cudaMemcpy(result[form].data(), rk[0].x[kLayers & 1], kK * 2, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 3; ++i) replay();
    cudaEvent_t e0, e1;
    CK(cudaSetDevice(0));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamSynchronize(rk[0].stream));
    CK(cudaSetDevice(1));
    CK(cudaStreamSynchronize(rk[1].stream));
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(e0, rk[0].stream));
    const int reps = 20;
    for (int i = 0; i < reps; ++i) replay();
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(e1, rk[0].stream));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    us[form] = ms * 1000.f / reps / kLayers;
    i64 err[8];
    for (int g = 0; g < 2; ++g) {
      CK(cudaSetDevice(g));
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(err, rk[g].err, sizeof(err), cudaMemcpyDeviceToHost));
      if (err[0] != 0) printf("rank %d recorded a wait past the timeout (form %d)\n", g, form);
    }
  }
  printf("all-reduce + norm: %.2f us a layer-half\n", us[0]);
  for (int form = 1; form < forms; ++form) {
    float diff = 0.0f, top = 0.0f;
    for (int i = 0; i < kK; ++i) {
      diff = std::max(diff, std::fabs(bf16_value(result[0][i]) - bf16_value(result[form][i])));
      top = std::max(top, std::fabs(bf16_value(result[0][i])));
    }
    printf("folded, %2d blocks%s: %.2f us (saved %.2f us; x %d, an 8B step: %.3f ms); max diff %.2e\n", grids[form],
           solo[form] ? " (the first alone reads)" : "", us[form], us[0] - us[form], kLayers,
           (us[0] - us[form]) * kLayers / 1000.f, diff / top);
  }
  return 0;
}
