// The sampling module (sample_module_source() in cuda_sample_source.cc, after device_prelude.cuh):
// one thread block per row of logits draws that row's token by rt::SampleAttrs's rule, bit for bit
// as the CPU backend (backend/cpu/sample.cc) does: the same order keys, the same correctly rounded
// exp (explicit fma, multiply and divide intrinsics, so nothing is contracted) and integer weights,
// whose sums do not depend on their order. Passes over the row: the argmax (greedy, and the max
// z); for top-k a radix select of the k-th largest logit key (four 8-bit digits, a 256-bin count
// histogram in shared memory each); the kept weight; for top-p a radix select over z keys whose
// bins add weights (of the top-k set) instead of counts; then a block-wide prefix sum of kept
// weights in index order, chunk by chunk, that stops at the chunk holding the drawn index. No
// allocation, no host synchronisation: the launch is recorded in CUDA graphs like any other.
// The C++ side appends the one entry point of the module's dtype.

// Words, in this order (cuda_kinds.cc fills them).
struct SampleArgs {
  i64 out, logits, key;  // int32 [rows], the logits [rows, V], int64 [1]
  i64 rows, V;
  i64 temperature;       // the bits of float(temperature) (0: greedy)
  i64 top_k;             // 0 or >= V: every token
  i64 top_p;             // the bits of the double top_p (1: every token)
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

// Adds `v` to hist[bin] (bin < 256; 256: nothing), one atomic per distinct bin of the warp: the
// lanes of a bin add their values by a warp reduction (in three 20-bit parts, exact) and the
// lowest adds the sum. Every lane of the warp calls it.
DEVI void sample_hist_add(u64* hist, unsigned bin, u64 v) {
#if __CUDA_ARCH__ >= 800
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const unsigned lo = __reduce_add_sync(peers, (unsigned)(v & 0xfffffu));
  const unsigned mid = __reduce_add_sync(peers, (unsigned)((v >> 20) & 0xfffffu));
  const unsigned hi = __reduce_add_sync(peers, (unsigned)(v >> 40));
  if (bin < 256 && (threadIdx.x & 31) == (unsigned)(__ffs(peers) - 1))
    atomicAdd(&hist[bin], (u64)lo + ((u64)mid << 20) + ((u64)hi << 40));
#else  // no warp reductions: an atomic per lane
  if (bin < 256) atomicAdd(&hist[bin], v);
#endif
}

// What every pass shares: the row, the block's shared memory and the pass loop, which runs every
// thread the same number of times (lanes past V pass valid = false) so warps stay converged.
struct SampleRow {
  i64 V;
  u64* hist;  // [256]
  u64* warp;  // [32]
  u64* pick;  // [3]: the digit chosen, and two sums it carries
  template <class F> DEVI void each(F visit) const {
    const i64 stride = blockDim.x, end = (V + stride - 1) / stride * stride;
    for (i64 i = threadIdx.x; i < end; i += stride) visit(i, i < V);
  }
};

// One radix select over the keys `key_of(i)` of the elements with `take(i)`: the key tau of the
// element that `need` units (a count, or weights) from the top reach. Each of four passes adds
// the units of the elements whose key has the digits chosen so far into the bins of their next
// digit; one thread then walks the bins from the largest. Returns tau; *above gets the units
// above tau, *at the units at or above it.
template <class Key, class Units> DEVI unsigned sample_select(const SampleRow& r, u64 need, Key key_of, Units units,
                                                              u64* above, u64* at) {
  unsigned prefix = 0, mask = 0;
  u64 over = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) r.hist[b] = 0;
    __syncthreads();
    r.each([&](i64 i, bool valid) {
      unsigned bin = 256;
      u64 v = 0;
      if (valid) {
        const unsigned k = key_of(i);
        v = units(i);
        if ((k & mask) == prefix && v > 0) bin = (k >> shift) & 255u;
      }
      sample_hist_add(r.hist, bin, v);
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0 && over + r.hist[d] < need; --d) over += r.hist[d];
      r.pick[0] = (u64)d;
      r.pick[1] = over;
      r.pick[2] = over + r.hist[d];
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
  __shared__ u64 hist[256];
  __shared__ u64 warp[32];
  __shared__ u64 pick[3];
  const i64 row = blockIdx.x;
  if (row >= a.rows) return;
  const T* x = (const T*)a.logits + row * a.V;
  int* out = (int*)a.out;
  const SampleRow r{a.V, hist, warp, pick};

  // The argmax as tp.argmax: NaN above every key, then the largest key, then the smallest index.
  u64 best = 0;
  r.each([&](i64 i, bool valid) {
    if (!valid) return;
    const float f = sample_load(x, i);
    const u64 c = ((u64)(f != f ? 0xffffffffu : sample_key(f)) << 32) | (u64)(0xffffffffu - (unsigned)i);
    best = c > best ? c : best;
  });
  best = sample_block_max(best, warp);
  const i64 g = (i64)(0xffffffffu - (unsigned)(best & 0xffffffffu));
  const float t = __int_as_float((int)a.temperature);
  const float zmax = t == 0.0f ? 0.0f : __fdiv_rn(sample_load(x, g), t);
  if (t == 0.0f || !(fabsf(zmax) < __int_as_float(0x7f800000))) {  // greedy, or a NaN or infinite z
    if (threadIdx.x == 0) out[row] = (int)g;
    return;
  }
  auto z_of = [&](i64 i) { return __fdiv_rn(sample_load(x, i), t); };
  auto logit_key = [&](i64 i) { return sample_key(sample_load(x, i)); };

  // Top-k: the k-th largest logit key; every logit at or above it stays.
  unsigned kmin = 0;
  if (a.top_k > 0 && a.top_k < a.V) {
    u64 above, at;
    kmin = sample_select(r, (u64)a.top_k, logit_key, [](i64) { return (u64)1; }, &above, &at);
  }
  auto weight = [&](i64 i) { return logit_key(i) >= kmin ? sample_weight(__fsub_rn(z_of(i), zmax)) : (u64)0; };
  u64 total = 0;
  r.each([&](i64 i, bool valid) {
    if (valid) total += weight(i);
  });
  total = sample_block_sum(total, warp);

  // Top-p: the largest z key whose kept weight at or above it reaches ceil(top_p * total).
  unsigned pmin = 0;
  const double top_p = __longlong_as_double(a.top_p);
  if (top_p < 1.0) {
    u64 need = (u64)ceil(__dmul_rn(top_p, __ull2double_rn(total)));
    need = need < 1 ? 1 : need > total ? total : need;
    u64 above;
    pmin = sample_select(r, need, [&](i64 i) { return sample_key(z_of(i)); }, weight, &above, &total);
  }

  // The draw: target = floor(u * total) for u = bits / 2**53; the first kept index whose running
  // weight passes it. Each thread sums 4 consecutive elements; a block scan places the threads.
  const u64 u = sample_bits(*(const i64*)a.key, row) >> 11;
  const u64 target = (__umul64hi(u, total) << 11) | ((u * total) >> 53);
  const unsigned lane = threadIdx.x & 31, wid = threadIdx.x >> 5, warps = blockDim.x >> 5;
  u64 base = 0;  // kept weight before this chunk
  for (i64 c = 0; c < a.V; c += 4 * (i64)blockDim.x) {
    u64 w[4], mine = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const i64 i = c + 4 * (i64)threadIdx.x + j;
      w[j] = i < a.V && sample_key(z_of(i)) >= pmin ? weight(i) : 0;
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
      for (; j < 3; ++j) {
        run += w[j];
        if (run > target) break;
      }
      out[row] = (int)(c + 4 * (i64)threadIdx.x + j);
    }
    base += chunk;
    if (base > target) return;
  }
  if (threadIdx.x == 0) out[row] = (int)g;  // unreachable: target < total
}
