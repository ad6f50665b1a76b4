// Whether a product's constant weight, asked of the L2 before the product waits for the kernel
// before it, arrives while that kernel runs and is then read from the L2. In a decode step the
// kernels between two products (attention, a norm, rotary) are chains of latencies that leave the
// memory idle for 3-10 µs each; a product launched to overlap them (programmatic dependent launch)
// runs only its wait-free part meanwhile. Here a one-block kernel that spins for a set time stands
// for them, and a weight-streaming kernel (every block reads its rows with 16-byte loads that skip
// the L1, as kernels/gemv.cuh's rows do, and sums them) for the product; `layers` pairs, each with
// its own weight (so weights come from memory, as in a step), captured in a CUDA graph. Before its
// wait the stream kernel's blocks ask the L2 for up to `budget` bytes of their rows: with
// cp.async.bulk.prefetch.L2 (a thread a 4 KB piece and more) or prefetch.global.L2 (a line a
// thread at a time). A diagnostic; run on the GPU machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -Iscripts -o /tmp/l2p scripts/l2_prefetch_bench.cu && /tmp/l2p
// Prints µs a layer (spin + stream) for each weight size, spin time, budget and form, beside the
// spin alone; then the stream with its first pieces loaded into registers before the wait instead.
#include <cstdio>
#include <vector>

#include "device_prelude.cuh"
#include "overlap_bench_util.cuh"

DEVI u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// [lo, hi) of base, clipped to [0, limit), asked of the L2 by the block's threads, a bulk prefetch
// of at least 4 KB each.
DEVI void ask_l2(const char* base, long long lo, long long hi, long long limit) {
  if (hi > limit) hi = limit;
  if (lo >= hi) return;
  long long piece = ((hi - lo + blockDim.x - 1) / blockDim.x + 15) & ~15LL;
  if (piece < 4096) piece = 4096;
  const long long at = lo + threadIdx.x * piece;
  if (at < hi) {
    const unsigned n = (unsigned)(hi - at < piece ? hi - at : piece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + at), "r"(n) : "memory");
  }
}

// One block that waits for the kernel before it, lets the next launch, and spins `ns`.
__global__ void spin(long long ns, unsigned* sink) {
  enter_after_previous();
  const u64 t0 = globaltimer();
  while (globaltimer() - t0 < (u64)ns) {
  }
  if (threadIdx.x == 0) sink[0] += 1;
}

// A piece of the weight, read once: 16 bytes that skip the L1.
DEVI V16 piece(const V16* p) {
  V16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
DEVI float count(float acc, const V16& v) { return acc + __uint_as_float(v.x ^ v.y ^ v.z ^ v.w) * 0.0f + 1.0f; }

// The thread's pieces of p[0, n) from `from`, four loads in flight at a time, counted into acc.
DEVI float stream_from(const V16* p, int from, int n, float acc) {
  for (int i = from; i < n; i += 4 * 256) {
    V16 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = i + u * 256 < n ? piece(p + i + u * 256) : V16{0u, 0u, 0u, 0u};
#pragma unroll
    for (int u = 0; u < 4; ++u) acc = count(acc, v[u]);
  }
  return acc;
}

// form 0: no prefetch; 1: bulk prefetch of the block's rows (up to budget bytes of w); 2: a
// prefetch.global.L2 per 128-byte line of them.
__global__ void __launch_bounds__(256) stream(const V16* w, long long bytes_per_block, long long budget, int form,
                                              float* out) {
  const char* base = (const char*)w;
  const long long lo = (long long)blockIdx.x * bytes_per_block, hi = lo + bytes_per_block;
  if (form == 1) {
    ask_l2(base, lo, hi, budget);
  } else if (form == 2) {
    const long long end = hi < budget ? hi : budget;
    for (long long at = lo + threadIdx.x * 128; at < end; at += 256 * 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(base + at));
  }
  enter_after_previous();
  const V16* p = (const V16*)(base + lo);
  const int n = (int)(bytes_per_block / 16);
  const float acc = stream_from(p, threadIdx.x, n, 0.0f);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// The same stream, its first PRE 16-byte pieces a thread loaded into registers before the wait
// (what kernels/gemv.cuh's rows do with their first chunks where the weight is constant).
template <int PRE>
__global__ void __launch_bounds__(256) stream_ahead(const V16* w, long long bytes_per_block, float* out) {
  const V16* p = (const V16*)((const char*)w + (long long)blockIdx.x * bytes_per_block);
  const int n = (int)(bytes_per_block / 16);
  V16 first[PRE];
#pragma unroll
  for (int u = 0; u < PRE; ++u)
    first[u] = threadIdx.x + u * 256 < n ? piece(p + threadIdx.x + u * 256) : V16{0u, 0u, 0u, 0u};
  enter_after_previous();
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < PRE; ++u) acc = count(acc, first[u]);
  acc = stream_from(p, threadIdx.x + PRE * 256, n, acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

int main() {
  const int layers = 16, blocks = 512;
  unsigned* sink;
  float* out;
  CK(cudaMalloc(&sink, 64));
  CK(cudaMalloc(&out, blocks * sizeof(float)));
  printf("%-8s %-7s %-9s %10s %10s %10s %10s\n", "weight", "spin", "budget", "spin only", "none", "bulk", "lines");
  for (long long mb : {16, 32, 64}) {
    const long long bytes = mb << 20, per_block = bytes / blocks;
    std::vector<V16*> w(layers);
    for (auto& p : w) {
      CK(cudaMalloc(&p, bytes));
      CK(cudaMemset(p, 1, bytes));
    }
    for (long long spin_ns : {3000LL, 9000LL}) {
      const float spin_only = graph_us(layers, [&](int, cudaStream_t s) {
        void* sp[] = {(void*)&spin_ns, (void*)&sink};
        launch_overlapping((const void*)spin, 1, 128, sp, s);
      });
      for (long long budget_mb : {0LL, 8LL, 16LL, 24LL, 32LL}) {
        if (budget_mb > mb) continue;
        float t[3];
        for (int form = 0; form < 3; ++form) {
          const long long budget = budget_mb << 20;
          const int f = budget ? form : 0;
          t[form] = graph_us(layers, [&](int l, cudaStream_t s) {
            void* sp[] = {(void*)&spin_ns, (void*)&sink};
            launch_overlapping((const void*)spin, 1, 128, sp, s);
            const V16* wl = w[l];
            long long pb = per_block, bg = budget;
            int fm = f;
            void* st[] = {(void*)&wl, (void*)&pb, (void*)&bg, (void*)&fm, (void*)&out};
            launch_overlapping((const void*)stream, blocks, 256, st, s);
          });
        }
        printf("%-8lld %-7.1f %-9lld %10.2f %10.2f %10.2f %10.2f\n", mb, spin_ns / 1000.0, budget_mb, spin_only, t[0],
               t[1], t[2]);
      }
      // Registers instead: the first 4, 8 or 16 pieces a thread (16 KB to 64 KB a block) before the wait.
      const void* ahead[] = {(const void*)stream_ahead<4>, (const void*)stream_ahead<8>, (const void*)stream_ahead<16>};
      for (int k = 0; k < 3; ++k) {
        const float us = graph_us(layers, [&](int l, cudaStream_t s) {
          void* sp[] = {(void*)&spin_ns, (void*)&sink};
          launch_overlapping((const void*)spin, 1, 128, sp, s);
          const V16* wl = w[l];
          long long pb = per_block;
          void* st[] = {(void*)&wl, (void*)&pb, (void*)&out};
          launch_overlapping(ahead[k], blocks, 256, st, s);
        });
        printf("%-8lld %-7.1f registers: %d pieces a thread before the wait: %.2f us\n", mb, spin_ns / 1000.0, 4 << k, us);
      }
    }
    for (auto& p : w) CK(cudaFree(p));
  }
  return 0;
}
