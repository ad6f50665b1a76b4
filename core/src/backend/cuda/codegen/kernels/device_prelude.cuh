// The device helpers every generated module starts with (device_prelude() in cuda_prelude.cc):
// float16, bfloat16 and float8 conversions, numpy-exact integer and float arithmetic, the
// activations, packed loads, warp and block reductions. Self-contained, without CUDA headers, so
// NVRTC compiles a module in tens of milliseconds. Like every file here, embedded at build time
// without its opening comment (core/cmake/embed_sources.cmake): what follows is what NVRTC
// compiles and what the kernel cache keys on.

typedef long long i64;
typedef unsigned long long u64;
#define DEVI __device__ __forceinline__

// Programmatic dependent launch (sm_90 and later): a kernel launched with `Launch::overlaps`
// may start while the stream's previous kernel still runs. It calls this before touching global
// memory: the wait returns once that kernel has finished and its writes are visible, then the
// next kernel may start its own launch. Elsewhere (or launched plainly) both are no-ops.
DEVI void enter_after_previous() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// float16 via the hardware conversions; bfloat16 and float8 e4m3fn bit-exact with the CPU backend.
DEVI float h2f(unsigned short x) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x)); return f; }
DEVI unsigned short f2h(float f) { unsigned short x; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x) : "f"(f)); return x; }
DEVI float b2f(unsigned short x) { return __uint_as_float(((unsigned)x) << 16); }
DEVI unsigned short f2b(float f) {
  unsigned x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
DEVI float f82f(unsigned char v) {
  unsigned sign = (unsigned)(v & 0x80u) << 24, e = (v >> 3) & 0xfu, m = v & 7u;
  if (e == 15 && m == 7) return __uint_as_float(sign | 0x7fc00000u);
  if (e == 0) { float r = (float)m * (1.0f / 512.0f); return sign ? -r : r; }
  return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}
DEVI unsigned char f2f8(float f) {
  unsigned x = __float_as_uint(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
  if (a >= 0x43e00000u) return (unsigned char)(sign | 0x7eu);
  if (a < 0x3c800000u) return (unsigned char)(sign | (unsigned)rintf(__uint_as_float(a) * 512.0f));
  unsigned h = (((a >> 23) - 120u) << 3) | ((a & 0x7fffffu) >> 20), rem = a & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (h & 1u))) ++h;
  if (h > 0x7eu) h = 0x7eu;
  return (unsigned char)(sign | h);
}
DEVI int wrap4(int v) { return ((v & 0xf) ^ 8) - 8; }

// Integer arithmetic wraps around (no undefined behaviour), as on the CPU backend.
DEVI int wadd(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
DEVI int wsub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
DEVI int wmul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
DEVI i64 wadd(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
DEVI i64 wsub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
DEVI i64 wmul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
template <class T> DEVI T wneg(T a) { return wsub((T)0, a); }
// numpy: division by zero gives 0; floor division and modulo take the divisor's sign.
template <class T> DEVI T ifloordiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return wneg(a);
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <class T> DEVI T irem(T a, T b) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class T> DEVI T ipow(T base, T e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  T r = 1;
  while (e) { if (e & 1) r = wmul(r, base); base = wmul(base, base); e >>= 1; }
  return r;
}
DEVI float ffloordiv(float a, float b) {
  if (b == 0) return a / b;
  float mod = fmodf(a, b), div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysignf(0.0f, a / b);
  float fl = floorf(div);
  return div - fl > 0.5f ? fl + 1 : fl;
}
DEVI float frem(float a, float b) {
  float r = fmodf(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r == 0 ? copysignf(0.0f, b) : r;
}
DEVI float fmaxn(float x, float y) { return (x > y || x != x) ? x : y; }  // NaN propagates
DEVI float fminn(float x, float y) { return (x < y || x != x) ? x : y; }
DEVI float fsign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }
// The activations (rt::Activation), defined once: the fused kernels' gelu and silu rows, the GELU
// after a GEMM and the convolution epilogues all call these. relu propagates NaN, as max(x, 0).
DEVI float act_relu(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
DEVI float act_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }  // erf form
DEVI float act_silu(float x) { return x / (1.0f + expf(-x)); }
// By rt::Activation's value: 0 none, 1 relu, 2 gelu, 3 silu.
DEVI float activate(long long act, float x) {
  return act == 1 ? act_relu(x) : act == 2 ? act_gelu(x) : act == 3 ? act_silu(x) : x;
}

template <class T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };
// N elements from p: one wide load when they are contiguous (p aligned), else p[0] repeated.
template <class T, int N> DEVI Pack<T, N> load_pack(const T* p, bool contiguous) {
  if (contiguous) return *(const Pack<T, N>*)p;
  Pack<T, N> q;
  const T x = *p;
#pragma unroll
  for (int e = 0; e < N; ++e) q.v[e] = x;
  return q;
}
struct alignas(16) V16 { unsigned x, y, z, w; };

// Reductions: OP 0 sum, 1 prod, 2 max, 3 min; floats accumulate in float, the rest in i64.
template <int OP> DEVI float rc(float a, float b) {
  return OP == 0 ? a + b : OP == 1 ? a * b : OP == 2 ? fmaxn(a, b) : fminn(a, b);
}
template <int OP> DEVI i64 rc(i64 a, i64 b) {
  return OP == 0 ? wadd(a, b) : OP == 1 ? wmul(a, b) : OP == 2 ? (a > b ? a : b) : (a < b ? a : b);
}
// A row's reductions, in three steps so that all of a phase's share one barrier (generated
// kernels: cuda_codegen_fused.cc). A row is blockDim.x threads: a warp, or a multiple of 32 (at
// most 32 warps) with blockDim.y rows per block; every thread of the block takes part. Each value's
// warp total (warp_allreduce); where a row spans warps, lane 0 of each warp leaves it in one of the
// row's 32 slots (row_share), one __syncthreads(), and every thread combines the slots
// (row_combine). Callers alternate between two slot areas from one barrier to the next, so one
// barrier suffices: an area is rewritten only after the next barrier, when every thread has read
// it.
template <int OP, class T> DEVI T warp_allreduce(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = rc<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <class T> DEVI void row_share(T v, T* sm) {
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
}
template <int OP, class T> DEVI T row_combine(const T* sm) {
  const int nw = blockDim.x >> 5;
  T v = sm[0];
  for (int i = 1; i < nw; ++i) v = rc<OP>(v, sm[i]);
  return v;
}

// The few-row products (gemv.cuh, weight_only_dot.cuh): `split` warps of a group (the group's
// g-th, this warp its ws-th) each sum part of K for the same outputs, and add their parts through
// `part` (a row of shared memory per warp). split_sum_entries: after the warp's own shuffle sums,
// entry e of N belongs to lane e % 32; split_sum_lanes: each lane's N accumulators are its own
// (mma fragments). Both return false to the warps that leave (all but the group's first).
template <int N, int W> DEVI bool split_sum_entries(float* v, float (*part)[W], int split, int g, int ws) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int e = 0; e < N; ++e)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[e] += __shfl_xor_sync(0xffffffffu, v[e], o);
  if (split <= 1) return true;
#pragma unroll
  for (int e = 0; e < N; ++e)
    if ((e & 31) == lane) part[warp][e] = v[e];
  __syncthreads();
  if (ws != 0) return false;
#pragma unroll
  for (int e = 0; e < N; ++e)
    if ((e & 31) == lane) {
      float s = 0.0f;
      for (int j = 0; j < split; ++j) s += part[g * split + j][e];
      v[e] = s;
    }
  return true;
}
template <int N, int W> DEVI bool split_sum_lanes(float* v, float (*part)[W], int split, int g, int ws) {
  if (split <= 1) return true;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int e = 0; e < N; ++e) part[warp][e * 32 + lane] = v[e];
  __syncthreads();
  if (ws != 0) return false;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    float s = 0.0f;
    for (int j = 0; j < split; ++j) s += part[g * split + j][e * 32 + lane];
    v[e] = s;
  }
  return true;
}
// c += A (16 x 16) B (16 x 8), float16 or bfloat16 operands, float32 sums: A's rows g and g + 8 at
// slots {2t, 2t + 1, 2t + 8, 2t + 9} in a0..a3, B's column g at the same slots in b0, b1 (g = lane
// / 4, t = lane % 4). Nothing before sm_80 (its callers take another path there).
template <bool BF16> DEVI void mma16816_f32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                            unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// Tensor-memory-accelerator copies (sm_90): a TmaMap is the driver's CUtensorMap, encoded on the
// host (Launch::tensor_map) into a __grid_constant__ kernel argument. A warp's ring slot is armed
// with the bytes it expects (tma_arm), filled by one tma_load_2d and waited on by parity: the
// slot's n-th fill completes phase n, so fill i of a ring of S slots waits on parity (i / S) & 1.
struct alignas(64) TmaMap { u64 bits[16]; };
DEVI unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
DEVI void tma_barrier_init(u64* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
DEVI void tma_arm(u64* bar, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#endif
}
// The box at (x, y) of `map` (x in elements of its innermost dimension) into shared `dst`.
DEVI void tma_load_2d(void* dst, const TmaMap* map, int x, int y, u64* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
      : "memory");
#endif
}
DEVI void tma_wait(u64* bar, unsigned parity) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n TMA_WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra TMA_WAIT_%=;\n}" ::"r"(
          smem_u32(bar)),
      "r"(parity)
      : "memory");
#endif
}
// Before a slot is filled again: this thread's (and, after a __syncwarp, its warp's) reads of it
// are ordered before the copy's writes.
DEVI void tma_reuse() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
DEVI V16 lds16(const void* p) {
  V16 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(smem_u32(p)));
  return v;
}

// Errors kernels find at run time (cuda_error_record.h: gathers, update_slices, an all-reduce's
// wait): `claim` is a device word that elects the first error; its winner writes {value, dim,
// rows} to the host-mapped record `err`, fences to the system and writes its tag last, so the
// host never sees a tag without them.
DEVI void record_error(i64 err, i64 claim, i64 tag, i64 value, i64 dim, i64 rows) {
  if (!err || atomicCAS((unsigned long long*)claim, 0ull, (unsigned long long)tag) != 0ull) return;
  volatile i64* e = (volatile i64*)err;
  e[1] = value;
  e[2] = dim;
  e[3] = rows;
  __threadfence_system();
  e[0] = tag;
}
