// Device-side source shared by generated kernels (conversions, numpy-exact integer and float
// helpers, warp/block reductions) and the fixed layout module (copies, gather, GELU, fill).
// Self-contained: no CUDA headers, so NVRTC compiles each kernel in tens of milliseconds.
#include "backend/cuda/codegen/cuda_sources.h"

#include <set>

namespace tripy::rt::cuda {

const std::string& device_prelude() {
  static const std::string kPrelude = R"CUDA(
typedef long long i64;
typedef unsigned long long u64;
#define DEVI __device__ __forceinline__

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
// All threads of a row get the result. A row is blockDim.x threads: a warp, or a multiple of 32
// (at most 32 warps) with blockDim.y rows per block; every thread of the block calls it. sm holds
// 32 slots for this row; callers alternate between two such areas from one row to the next, so
// one barrier suffices: a slot is rewritten only after the next row's barrier, when every thread
// has read it.
template <int OP, class T> DEVI T block_allreduce(T v, T* sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = rc<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (blockDim.x <= 32) return v;
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  v = sm[0];
  for (int i = 1; i < nw; ++i) v = rc<OP>(v, sm[i]);
  return v;
}
)CUDA";
  return kPrelude;
}

const std::string& layout_module_source() {
  static const std::string kSource = device_prelude() + R"CUDA(
// dst[dst_base + sum idx_d * dstride_d] = src[src_base + sum idx_d * sstride_d] over sizes
// (positions [lo, 8) used, outermost first).
struct CopyArgs { i64 dst, src, n, lo; i64 size[8], sstride[8], dstride[8]; };
template <class T> DEVI void copy_body(const CopyArgs& a) {
  T* d = (T*)a.dst;
  const T* s = (const T*)a.src;
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {
    i64 rem = i, so = 0, dof = 0;
    // A loop, not unrolled: five instantiations of 8 unrolled 64-bit divisions were half the
    // layout module's NVRTC time, and an element's divisions cost the same either way.
#pragma unroll 1
    for (int k = 7; k > a.lo; --k) {
      const i64 q = rem / a.size[k], c = rem - q * a.size[k];
      so += c * a.sstride[k]; dof += c * a.dstride[k]; rem = q;
    }
    if (a.lo >= 0 && a.lo < 8) { so += rem * a.sstride[a.lo]; dof += rem * a.dstride[a.lo]; }
    d[dof] = s[so];
  }
}
extern "C" __global__ void tripy_copy_1(const CopyArgs a) { copy_body<unsigned char>(a); }
extern "C" __global__ void tripy_copy_2(const CopyArgs a) { copy_body<unsigned short>(a); }
extern "C" __global__ void tripy_copy_4(const CopyArgs a) { copy_body<unsigned>(a); }
extern "C" __global__ void tripy_copy_8(const CopyArgs a) { copy_body<u64>(a); }
extern "C" __global__ void tripy_copy_16(const CopyArgs a) { copy_body<V16>(a); }

// A plain byte copy that takes the widest accesses both addresses allow.
struct BytesArgs { i64 dst, src, n; };
extern "C" __global__ void tripy_copy_bytes(const BytesArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if (((a.dst | a.src) & 15) == 0) {
    done = a.n / 16 * 16;
    for (i64 i = t0; i < a.n / 16; i += step) ((V16*)a.dst)[i] = ((const V16*)a.src)[i];
  } else if (((a.dst | a.src) & 3) == 0) {
    done = a.n / 4 * 4;
    for (i64 i = t0; i < a.n / 4; i += step) ((unsigned*)a.dst)[i] = ((const unsigned*)a.src)[i];
  }
  for (i64 i = done + t0; i < a.n; i += step) ((unsigned char*)a.dst)[i] = ((const unsigned char*)a.src)[i];
}

// In-place exact GELU, 0.5 x (1 + erf(x / sqrt 2)), after a GEMM whose epilogue added the bias.
struct GeluArgs { i64 ptr, n, vec; };
extern "C" __global__ void tripy_gelu_f32(const GeluArgs a) {
  float* p = (float*)a.ptr;
  const i64 step = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if (a.vec) {
    done = a.n / 4 * 4;
    for (i64 v = t0; v < a.n / 4; v += step) {
      Pack<float, 4> q = ((Pack<float, 4>*)p)[v];
#pragma unroll
      for (int e = 0; e < 4; ++e) q.v[e] = act_gelu(q.v[e]);
      ((Pack<float, 4>*)p)[v] = q;
    }
  }
  for (i64 i = done + t0; i < a.n; i += step) p[i] = act_gelu(p[i]);
}
#define TRIPY_GELU16(name, LOAD, STORE) \
  extern "C" __global__ void name(const GeluArgs a) { \
    unsigned short* p = (unsigned short*)a.ptr; \
    const i64 step = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x; \
    i64 done = 0; \
    if (a.vec) { \
      done = a.n / 8 * 8; \
      for (i64 v = t0; v < a.n / 8; v += step) { \
        Pack<unsigned short, 8> q = ((Pack<unsigned short, 8>*)p)[v]; \
        _Pragma("unroll") for (int e = 0; e < 8; ++e) q.v[e] = STORE(act_gelu(LOAD(q.v[e]))); \
        ((Pack<unsigned short, 8>*)p)[v] = q; \
      } \
    } \
    for (i64 i = done + t0; i < a.n; i += step) p[i] = STORE(act_gelu(LOAD(p[i]))); \
  }
TRIPY_GELU16(tripy_gelu_f16, h2f, f2h)
TRIPY_GELU16(tripy_gelu_bf16, b2f, f2b)

)CUDA";
  return kSource;
}

// The index half of the layout functions (gathers, update_slices): a module of its own, holding
// only the functions its program launches (all sixteen took NVRTC ~1.6 s on the H100's host, the
// longest module of a GPT-2 build); load() looks layout functions up in every module.
std::string index_module_source(const std::vector<IndexFunction>& functions) {
  static const std::string kBodies = device_prelude() + R"CUDA(
// Run-time errors of gathers and update_slices (cuda_error_record.h): `claim` is a device word
// that elects the first error; its winner writes {value, dim, rows} to the host-mapped record
// `err`, fences to the system and writes its tag last, so the host never sees a tag without them.
DEVI void record_error(i64 err, i64 claim, i64 tag, i64 value, i64 dim, i64 rows) {
  if (!err || atomicCAS((unsigned long long*)claim, 0ull, (unsigned long long)tag) != 0ull) return;
  volatile i64* e = (volatile i64*)err;
  e[1] = value;
  e[2] = dim;
  e[3] = rows;
  __threadfence_system();
  e[0] = tag;
}

// out[o, k, i] = data[o, idx[k] (negative counts from the end), i]; out-of-range indices give 0
// and record an error (err, claim and tag set by the program; err 0: none).
struct GatherArgs { i64 dst, src, idx, outer, nidx, inner, dim, err, tag, claim; };
template <class T, class I> DEVI void gather_body(const GatherArgs& a) {
  T* d = (T*)a.dst;
  const T* s = (const T*)a.src;
  const I* ix = (const I*)a.idx;
  const i64 n = a.outer * a.nidx * a.inner, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    i64 t = i / a.inner, in = i - t * a.inner, o = t / a.nidx, k = t - o * a.nidx;
    const i64 given = (i64)ix[k];
    const i64 p = given < 0 ? given + a.dim : given;
    T zero;
    for (int b = 0; b < (int)sizeof(T); ++b) ((unsigned char*)&zero)[b] = 0;
    const bool ok = p >= 0 && p < a.dim;
    d[i] = ok ? s[(o * a.dim + p) * a.inner + in] : zero;
    if (!ok) record_error(a.err, a.claim, a.tag, given, a.dim, 0);
  }
}

// update_slice's rows: dst[o, start + r, i] = src[o, r, i] for r < rows, with start read from device
// memory (a decode step's position changes without a new launch plan or graph). A start outside
// [0, dim - rows] writes nothing and records an error, as a gather does. Its words are laid out
// like GatherArgs (err, tag and claim at the same places).
struct UpdateArgs { i64 dst, src, start, outer, rows, inner, dim, err, tag, claim; };
template <class T, class I> DEVI void update_body(const UpdateArgs& a) {
  const i64 s = (i64)*(const I*)a.start;
  if (s < 0 || s > a.dim - a.rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) record_error(a.err, a.claim, a.tag, s, a.dim, a.rows);
    return;
  }
  T* d = (T*)a.dst;
  const T* src = (const T*)a.src;
  const i64 n = a.outer * a.rows * a.inner, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const i64 t = i / a.inner, in = i - t * a.inner, o = t / a.rows, r = t - o * a.rows;
    d[(o * a.dim + s + r) * a.inner + in] = src[i];
  }
}

)CUDA";
  std::string out = kBodies;
  std::set<std::string> seen;
  for (const IndexFunction& f : functions) {
    const char* element = f.elem_size == 1   ? "unsigned char"
                          : f.elem_size == 2 ? "unsigned short"
                          : f.elem_size == 4 ? "unsigned"
                          : f.elem_size == 8 ? "u64"
                                             : nullptr;
    const std::string name = f.update ? update_function(f.elem_size, f.index) : gather_function(f.elem_size, f.index);
    if (!element || !seen.insert(name).second) continue;  // no such function: the launch says so
    out += "extern \"C\" __global__ void " + name +
           (f.update ? "(const UpdateArgs a) { update_body<" : "(const GatherArgs a) { gather_body<") + element +
           (f.index == DType::kInt64 ? ", i64>(a); }\n" : ", int>(a); }\n");
  }
  return out;
}

// Build-time only: tuning fills its scratch operands with these. A module of its own, so the
// tuner can start after compiling three small kernels instead of the whole layout module (which
// then compiles beside the tuning, with the program's other modules).
const std::string& fill_module_source() {
  static const std::string kSource = device_prelude() + R"CUDA(
// Deterministic pseudo-random values in [-1, 1): GEMM timing must not run on zeros.
struct FillArgs { i64 ptr, n, seed; };
DEVI float hash_unit(u64 x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
extern "C" __global__ void tripy_fill_f32(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((float*)a.ptr)[i] = hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL));
}
extern "C" __global__ void tripy_fill_f16(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((unsigned short*)a.ptr)[i] = f2h(hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL)));
}
extern "C" __global__ void tripy_fill_bf16(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((unsigned short*)a.ptr)[i] = f2b(hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL)));
}
// Holds the stream for `ns` nanoseconds, so the timed calls queued behind it run back to back:
// the timing then measures the GPU's work, not how fast the host enqueues it.
extern "C" __global__ void tripy_spin(const i64 ns) {
  u64 start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while ((i64)(now - start) < ns);
}
)CUDA";
  return kSource;
}

std::string fill_function(DType t) {
  return std::string("tripy_fill_") + float_suffix(t);
}

}  // namespace tripy::rt::cuda
