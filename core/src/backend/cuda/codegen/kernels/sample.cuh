// The sampling module (the sample row of codegen/cuda_builder.cc, after device_prelude.cuh):
// one thread block per row of logits draws that row's token by rt::SampleAttrs's rule, bit for bit
// as the CPU backend (backend/cpu/sample.cc) does: the same order keys, the same correctly rounded
// exp (explicit fma, multiply and divide intrinsics, so nothing is contracted) and integer weights,
// whose sums do not depend on their order. Passes over the row: the argmax (greedy, and the max
// z); for top-k a radix select of the k-th largest logit key (four 8-bit digits, a 256-bin count
// histogram in shared memory each); the kept weight; for top-p a radix select over z keys whose
// bins add weights (of the top-k set) instead of counts; then a block-wide prefix sum of kept
// weights in index order, chunk by chunk, that stops at the chunk holding the drawn index. No
// allocation, no host synchronisation: the launch is recorded in CUDA graphs like any other.
// The module's one entry point, of the logits' dtype, is picked from the rows at the end.

// Words, in this order (cuda_kinds.cc fills them).
struct SampleArgs {
  i64 out, logits, key;  // int32 [rows], the logits [rows, V], int64 [1]
  i64 rows, V;
  i64 temperature;       // the bits of float(temperature) (0: greedy)
  i64 top_k;             // 0 or >= V: every token
  i64 top_p;             // the bits of the double top_p (1: every token)
  // The argmax's blocks per row (parts): each takes a slice of the row, the last to finish merges
  // the slices' maxima (u64 [rows][parts] in ws; ctr: int32 [rows], zero between launches) and
  // goes on alone. A row read by one block took 26 us of a decode step (128256 tokens, an H200).
  i64 ws, ctr, parts;
};

struct SampleHalf { unsigned short v; };
struct SampleBf16 { unsigned short v; };
DEVI float sample_load(const float* p, i64 i) { return p[i]; }
DEVI float sample_load(const SampleHalf* p, i64 i) { return h2f(p[i].v); }
DEVI float sample_load(const SampleBf16* p, i64 i) { return b2f(p[i].v); }

// A float's order as an unsigned integer; -0 has +0's key.
DEVI unsigned sample_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// exp(d) for d <= 0 in units of 2**-40, rounded down (the CPU's weight_of, step for step).
DEVI u64 sample_weight(float d) {
  if (!(d >= -28.0f)) return 0;
  const float n = rintf(__fmul_rn(d, 0x1.715476p+0f));
  float r = __fmaf_rn(n, -0x1.62e4p-1f, d);
  r = __fmaf_rn(n, -0x1.7f7d1cp-20f, r);
  float p = 0x1.a01a02p-13f;
  p = __fmaf_rn(p, r, 0x1.6c16c2p-10f);
  p = __fmaf_rn(p, r, 0x1.111112p-7f);
  p = __fmaf_rn(p, r, 0x1.555556p-5f);
  p = __fmaf_rn(p, r, 0x1.555556p-3f);
  p = __fmaf_rn(p, r, 0.5f);
  p = __fmaf_rn(p, r, 1.0f);
  p = __fmaf_rn(p, r, 1.0f);
  return __float2ull_rz(__fmul_rn(p, __int_as_float(((int)n + 40 + 127) << 23)));
}

// The (row + 1)-th output of splitmix64 seeded with `key`.
DEVI u64 sample_bits(i64 key, i64 row) {
  u64 z = (u64)key + ((u64)row + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Block-wide sum and max: every thread gets the result. `warp` holds 32 values; the barrier first
// lets a previous call's readers finish.
DEVI u64 sample_block_sum(u64 v, u64* warp) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = v;
  __syncthreads();
  u64 s = 0;
  for (unsigned w = 0; w < (blockDim.x >> 5); ++w) s += warp[w];
  return s;
}
DEVI u64 sample_block_max(u64 v, u64* warp) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const u64 u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) warp[threadIdx.x >> 5] = v;
  __syncthreads();
  u64 s = 0;
  for (unsigned w = 0; w < (blockDim.x >> 5); ++w) s = warp[w] > s ? warp[w] : s;
  return s;
}

// A histogram's bins kept as 32-bit halves, a bin's value being lo + hi * 2**32: 32-bit shared
// atomics are the fast kind (with 64-bit bins, top-k 50 with top-p 0.9 took 16% longer on an H200).
DEVI void sample_bin_add(unsigned* lo, unsigned* hi, unsigned bin, u64 v) {
  const unsigned low = (unsigned)v, old = atomicAdd(&lo[bin], low);
  const unsigned high = (unsigned)(v >> 32) + (old + low < old ? 1u : 0u);
  if (high) atomicAdd(&hi[bin], high);
}

// Adds `v` to bin `bin` (< 256; 256: nothing), one atomic per distinct bin of the warp: the lanes
// of a bin add their values (counts: their number; weights: a warp reduction in three 20-bit
// parts, exact) and the lowest of them adds the sum. Every lane of the warp calls it.
template <bool kCount> DEVI void sample_hist_add(unsigned* lo, unsigned* hi, unsigned bin, u64 v) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const bool leader = bin < 256 && (threadIdx.x & 31) == (unsigned)(__ffs(peers) - 1);
  if (kCount) {
    if (leader) atomicAdd(&lo[bin], (unsigned)__popc(peers));
    return;
  }
#if __CUDA_ARCH__ >= 800
  const u64 sum = (u64)__reduce_add_sync(peers, (unsigned)(v & 0xfffffu)) +
                  ((u64)__reduce_add_sync(peers, (unsigned)((v >> 20) & 0xfffffu)) << 20) +
                  ((u64)__reduce_add_sync(peers, (unsigned)(v >> 40)) << 40);
  if (leader) sample_bin_add(lo, hi, bin, sum);
#else  // no warp reductions: every lane adds its own
  if (bin < 256) sample_bin_add(lo, hi, bin, v);
#endif
}

// What every pass shares: the row, the block's shared memory and the pass loop. The loop hands
// visit(i, valid, logit) U elements per thread and round, loaded first, so that U loads per thread
// are in flight (one block reads the row: with one load at a time, its latency bounds the pass);
// every thread runs the same rounds (lanes past V get valid = false), so warps stay converged. The
// argmax, all a greedy step runs, takes 16 a round (more spill at 1024 threads): a 128256-token
// row in 8 rounds instead of 16 (26 us a decode step on an H200 at 8, most of it waiting on loads).
template <class T> struct SampleRow {
  const T* x;
  i64 V;
  unsigned *lo, *hi;  // the histogram's [256] bins (sample_bin_add)
  u64* warp;  // [32]
  u64* pick;  // [3]: the digit chosen, and two sums it carries
  template <int U = 8, class F> DEVI void each(F visit) const {
    const i64 stride = blockDim.x;
    for (i64 c = threadIdx.x; c - threadIdx.x < V; c += U * stride) {
      float f[U];
#pragma unroll
      for (int j = 0; j < U; ++j) f[j] = c + j * stride < V ? sample_load(x, c + j * stride) : 0.0f;
#pragma unroll
      for (int j = 0; j < U; ++j) visit(c + j * stride, c + j * stride < V, f[j]);
    }
  }
};

// One radix select: the key tau that `need` units (a count of 1 per element with kCount, else
// weights) from the top reach. item(logit, mask, prefix, &key) gives an element's key and, when the
// key's bits under `mask` are `prefix`, its units (0 otherwise, or when the element takes no part),
// so it computes a weight only for the elements a pass counts. Each of four passes adds those
// units into the bins of the next digit (a warp without any skips the histogram); one thread then
// walks the bins from the largest. Returns tau; *above gets the units above tau, *at those at or
// above it.
template <bool kCount, class T, class Item>
DEVI unsigned sample_select(const SampleRow<T>& r, u64 need, Item item, u64* above, u64* at) {
  unsigned prefix = 0, mask = 0;
  u64 over = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) r.lo[b] = r.hi[b] = 0;
    __syncthreads();
    r.each([&](i64, bool valid, float f) {
      unsigned bin = 256, k = 0;
      const u64 v = valid ? item(f, mask, prefix, &k) : 0;
      if (v > 0) bin = (k >> shift) & 255u;
      if (__any_sync(0xffffffffu, bin < 256)) sample_hist_add<kCount>(r.lo, r.hi, bin, v);
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      auto bin = [&](int b) { return (u64)r.lo[b] + ((u64)r.hi[b] << 32); };
      for (; d > 0 && over + bin(d) < need; --d) over += bin(d);
      r.pick[0] = (u64)d;
      r.pick[1] = over;
      r.pick[2] = over + bin(d);
    }
    __syncthreads();
    prefix |= (unsigned)r.pick[0] << shift;
    mask |= 255u << shift;
    over = r.pick[1];
  }
  *above = over;
  *at = r.pick[2];
  return prefix;
}

template <class T> DEVI void sample_row(const SampleArgs& a) {
  __shared__ unsigned lo[256], hi[256];
  __shared__ u64 warp[32];
  __shared__ u64 pick[3];
  const i64 row = blockIdx.x / a.parts, part = blockIdx.x % a.parts;
  if (row >= a.rows) return;
  const T* x = (const T*)a.logits + row * a.V;
  int* out = (int*)a.out;
  const SampleRow<T> r{x, a.V, lo, hi, warp, pick};

  // The argmax as tp.argmax: NaN above every key, then the largest key, then the smallest index;
  // this block's slice [first, first + slice.V) of the row, then the merge of the slices'.
  const i64 per = (a.V + a.parts - 1) / a.parts, first = part * per;
  const SampleRow<T> slice{x + first, first < a.V ? (a.V - first < per ? a.V - first : per) : 0, lo, hi, warp, pick};
  u64 best = 0;
  slice.template each<16>([&](i64 i, bool valid, float f) {
    if (!valid) return;
    const u64 c = ((u64)(f != f ? 0xffffffffu : sample_key(f)) << 32) | (u64)(0xffffffffu - (unsigned)(first + i));
    best = c > best ? c : best;
  });
  best = sample_block_max(best, warp);
  if (a.parts > 1) {
    u64* parts = (u64*)a.ws + row * a.parts;
    if (threadIdx.x == 0) {
      parts[part] = best;
      __threadfence();
      const unsigned n1 = (unsigned)(a.parts - 1);
      pick[0] = atomicInc((unsigned*)a.ctr + row, n1) == n1;
    }
    __syncthreads();
    if (!pick[0]) return;  // the same for every thread of the block
    __threadfence();
    best = 0;
    for (i64 i = threadIdx.x; i < a.parts; i += blockDim.x) {
      const u64 c = __ldcg(parts + i);
      best = c > best ? c : best;
    }
    best = sample_block_max(best, warp);
  }
  const i64 g = (i64)(0xffffffffu - (unsigned)(best & 0xffffffffu));
  const float t = __int_as_float((int)a.temperature);
  const float zmax = t == 0.0f ? 0.0f : __fdiv_rn(sample_load(x, g), t);
  if (t == 0.0f || !(fabsf(zmax) < __int_as_float(0x7f800000))) {  // greedy, or a NaN or infinite z
    if (threadIdx.x == 0) out[row] = (int)g;
    return;
  }

  // Top-k: the k-th largest logit key; every logit at or above it stays.
  unsigned kmin = 0;
  if (a.top_k > 0 && a.top_k < a.V) {
    u64 above, at;
    kmin = sample_select<true>(r, (u64)a.top_k, [&](float f, unsigned mask, unsigned prefix, unsigned* k) {
      *k = sample_key(f);
      return (u64)((*k & mask) == prefix);
    }, &above, &at);
  }
  auto weight_at = [&](float z) { return sample_weight(__fsub_rn(z, zmax)); };
  u64 total = 0;
  r.each([&](i64, bool valid, float f) {
    if (valid && sample_key(f) >= kmin) total += weight_at(__fdiv_rn(f, t));
  });
  total = sample_block_sum(total, warp);

  // Top-p: the largest z key whose kept weight at or above it reaches ceil(top_p * total).
  unsigned pmin = 0;
  const double top_p = __longlong_as_double(a.top_p);
  if (top_p < 1.0) {
    u64 need = (u64)ceil(__dmul_rn(top_p, __ull2double_rn(total)));
    need = need < 1 ? 1 : need > total ? total : need;
    u64 above;
    pmin = sample_select<false>(r, need, [&](float f, unsigned mask, unsigned prefix, unsigned* k) -> u64 {
      if (sample_key(f) < kmin) return 0;
      const float z = __fdiv_rn(f, t);
      *k = sample_key(z);
      return (*k & mask) == prefix ? weight_at(z) : 0;
    }, &above, &total);
  }

  // The draw: target = floor(u * total) for u = bits / 2**53; the first kept index whose running
  // weight passes it. Each thread sums 8 consecutive elements; a block scan places the threads.
  const u64 u = sample_bits(*(const i64*)a.key, row) >> 11;
  const u64 target = (__umul64hi(u, total) << 11) | ((u * total) >> 53);
  const unsigned lane = threadIdx.x & 31, wid = threadIdx.x >> 5, warps = blockDim.x >> 5;
  u64 base = 0;  // kept weight before this chunk
  for (i64 c = 0; c < a.V; c += 8 * (i64)blockDim.x) {
    const i64 first = c + 8 * (i64)threadIdx.x;
    float f[8];
    u64 w[8], mine = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = first + j < a.V ? sample_load(x, first + j) : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      w[j] = 0;
      if (first + j < a.V && sample_key(f[j]) >= kmin) {
        const float z = __fdiv_rn(f[j], t);
        if (sample_key(z) >= pmin) w[j] = weight_at(z);
      }
      mine += w[j];
    }
    u64 incl = mine;  // inclusive scan over the warp, then over the warps' totals
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 v = __shfl_up_sync(0xffffffffu, incl, o);
      if ((int)lane >= o) incl += v;
    }
    __syncthreads();
    if (lane == 31) warp[wid] = incl;
    __syncthreads();
    u64 before = base + incl - mine, chunk = 0;
    for (unsigned v = 0; v < warps; ++v) {
      if (v < wid) before += warp[v];
      chunk += warp[v];
    }
    if (before <= target && target < before + mine) {  // exactly one thread holds the crossing
      u64 run = before;
      int j = 0;
      for (; j < 7; ++j) {
        run += w[j];
        if (run > target) break;
      }
      out[row] = (int)(first + j);
    }
    base += chunk;
    if (base > target) return;
  }
  if (threadIdx.x == 0) out[row] = (int)g;  // unreachable: target < total
}

// One entry point per module, tripy_sample_<dtype>: the builder keeps the TRIPY_FOR_DTYPE row of
// the module's dtype (kind_module_source, cuda_sources.h).
TRIPY_FOR_DTYPE(f16, extern "C" __global__ void __launch_bounds__(1024) tripy_sample_f16(const SampleArgs a) { enter_after_previous(); sample_row<SampleHalf>(a); })
TRIPY_FOR_DTYPE(bf16, extern "C" __global__ void __launch_bounds__(1024) tripy_sample_bf16(const SampleArgs a) { enter_after_previous(); sample_row<SampleBf16>(a); })
TRIPY_FOR_DTYPE(f32, extern "C" __global__ void __launch_bounds__(1024) tripy_sample_f32(const SampleArgs a) { enter_after_previous(); sample_row<float>(a); })
