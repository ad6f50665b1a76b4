// The layout module (layout_module_source() in cuda_prelude.cc, after device_prelude.cuh): strided
// copies by element size, a byte copy and the in-place GELU after a GEMM. Fixed: compiled once per
// process and GPU architecture; its function names are in cuda_layout_functions.cc.

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
extern "C" __global__ void tripy_copy_1(const CopyArgs a) { enter_after_previous(); copy_body<unsigned char>(a); }
extern "C" __global__ void tripy_copy_2(const CopyArgs a) { enter_after_previous(); copy_body<unsigned short>(a); }
extern "C" __global__ void tripy_copy_4(const CopyArgs a) { enter_after_previous(); copy_body<unsigned>(a); }
extern "C" __global__ void tripy_copy_8(const CopyArgs a) { enter_after_previous(); copy_body<u64>(a); }
extern "C" __global__ void tripy_copy_16(const CopyArgs a) { enter_after_previous(); copy_body<V16>(a); }

// A plain byte copy that takes the widest accesses both addresses allow.
struct BytesArgs { i64 dst, src, n; };
extern "C" __global__ void tripy_copy_bytes(const BytesArgs a) {
  enter_after_previous();
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

// n zero bytes at dst (src unused): a plugin's output before its kernel runs, so that elements
// the kernel leaves unwritten read as zeros, not as what the memory held before.
extern "C" __global__ void tripy_zero_bytes(const BytesArgs a) {
  enter_after_previous();
  const i64 step = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if ((a.dst & 15) == 0) {
    done = a.n / 16 * 16;
    for (i64 i = t0; i < a.n / 16; i += step) ((V16*)a.dst)[i] = V16{0u, 0u, 0u, 0u};
  }
  for (i64 i = done + t0; i < a.n; i += step) ((unsigned char*)a.dst)[i] = 0;
}

// In-place exact GELU, 0.5 x (1 + erf(x / sqrt 2)), after a GEMM whose epilogue added the bias.
struct GeluArgs { i64 ptr, n, vec; };
extern "C" __global__ void tripy_gelu_f32(const GeluArgs a) {
  enter_after_previous();
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
    enter_after_previous(); \
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

