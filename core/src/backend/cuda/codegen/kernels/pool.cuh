// The pooling module (the pooling row of codegen/cuda_builder.cc, after device_prelude.cuh): a
// grid-stride loop over output elements in storage order, each reading its window of the (n, c)
// plane (spatial dims right-aligned to 3; channels-last, a plane's elements are C apart and
// neighbouring threads read neighbouring channels). Max compares in float32 for floats (NaN wins,
// padding never does) and in the own type for integers; average sums in float32 and divides by the
// window's size (count_include_pad) or by its unpadded elements. The module's one entry
// point, of its dtype, is picked from the rows at the end.

// Words, in this order (cuda_pool.cc fills them).
struct PoolArgs {
  i64 out, x;
  i64 planes;                                  // N * C
  i64 in[3], on[3], k[3], s[3], lo[3], hi[3];  // spatial dims right-aligned, missing ones are 1
  i64 is_max, include_pad;
  i64 C, channels_last;
};
// Output element i (storage order): its position in the plane, and where the plane's input
// starts and how far apart its elements are.
DEVI void pool_locate(const PoolArgs& a, i64 i, i64 in_size, i64 out_size, i64* pos, i64* base, i64* step) {
  if (a.channels_last) {
    const i64 c = i % a.C, np = i / a.C, n = np / out_size;
    *pos = np - n * out_size;
    *base = n * in_size * a.C + c;
    *step = a.C;
  } else {
    const i64 plane = i / out_size;
    *pos = i - plane * out_size;
    *base = plane * in_size;
    *step = 1;
  }
}
struct H { unsigned short v; };
struct B { unsigned short v; };
DEVI float ld(const float* p, i64 i) { return p[i]; }
DEVI void st(float* p, i64 i, float v) { p[i] = v; }
DEVI float ld(const H* p, i64 i) { return h2f(p[i].v); }
DEVI void st(H* p, i64 i, float v) { p[i].v = f2h(v); }
DEVI float ld(const B* p, i64 i) { return b2f(p[i].v); }
DEVI void st(B* p, i64 i, float v) { p[i].v = f2b(v); }

// Visits the window of output element `pos` (an index into one plane); returns the count to
// divide an average by.
template <class F> DEVI i64 pool_window(const PoolArgs& a, i64 pos, F visit) {
  const i64 p[3] = {pos / (a.on[1] * a.on[2]), pos / a.on[2] % a.on[1], pos % a.on[2]};
  i64 b[3], e[3], full = 1, real = 1;
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    const i64 start = p[j] * a.s[j] - a.lo[j];
    full *= min(start + a.k[j], a.in[j] + a.hi[j]) - start;
    b[j] = max(start, (i64)0);
    e[j] = min(start + a.k[j], a.in[j]);
    real *= max(e[j] - b[j], (i64)0);
  }
  for (i64 z = b[0]; z < e[0]; ++z)
    for (i64 y = b[1]; y < e[1]; ++y)
      for (i64 x = b[2]; x < e[2]; ++x) visit((z * a.in[1] + y) * a.in[2] + x);
  return a.include_pad ? full : real;
}

// A float window's running value (max: NaN wins; average: the sum) and its result.
DEVI float pool_add(bool is_max, float acc, float x) { return is_max ? (x > acc || x != x ? x : acc) : acc + x; }
DEVI float pool_result(bool is_max, float acc, i64 count) {
  return is_max ? acc : count > 0 ? acc / (float)count : 0.0f;
}

// Channels-last with C a multiple of the vector: 16 bytes of channels per thread and window step,
// one index division per vector (the per-element loop ran a batch-32 max pool at an eighth of the
// memory bandwidth). False where that layout does not hold.
template <class T> DEVI bool pool_vectors(const PoolArgs& a) {
  constexpr int V = 16 / sizeof(T);
  if (!a.channels_last || a.C % V != 0 || ((a.out | a.x) & 15) != 0) return false;
  typedef Pack<T, V> P;
  const i64 in_size = a.in[0] * a.in[1] * a.in[2], out_size = a.on[0] * a.on[1] * a.on[2];
  const i64 cv = a.C / V, total = a.planes / V * out_size, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 np = i / cv, n = np / out_size;
    const P* src = (const P*)a.x + n * in_size * cv + (i - np * cv);
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = a.is_max ? -__int_as_float(0x7f800000) : 0.0f;
    const i64 count = pool_window(a, np - n * out_size, [&](i64 j) {
      const P v = src[j * cv];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        acc[e] = pool_add(a.is_max, acc[e], ld(v.v, e));
      }
    });
    P out;
#pragma unroll
    for (int e = 0; e < V; ++e) st(out.v, e, pool_result(a.is_max, acc[e], count));
    ((P*)a.out)[i] = out;
  }
  return true;
}

template <class T> DEVI void pool_float(const PoolArgs& a) {
  if (pool_vectors<T>(a)) return;
  const i64 in_size = a.in[0] * a.in[1] * a.in[2], out_size = a.on[0] * a.on[1] * a.on[2];
  const i64 total = a.planes * out_size, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    i64 pos, base, apart;
    pool_locate(a, i, in_size, out_size, &pos, &base, &apart);
    const T* src = (const T*)a.x + base;
    float acc = a.is_max ? -__int_as_float(0x7f800000) : 0.0f;
    const i64 count = pool_window(a, pos, [&](i64 j) { acc = pool_add(a.is_max, acc, ld(src, j * apart)); });
    st((T*)a.out, i, pool_result(a.is_max, acc, count));
  }
}

template <class T> DEVI void pool_int(const PoolArgs& a, T lowest) {
  const i64 in_size = a.in[0] * a.in[1] * a.in[2], out_size = a.on[0] * a.on[1] * a.on[2];
  const i64 total = a.planes * out_size, step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    i64 pos, base, apart;
    pool_locate(a, i, in_size, out_size, &pos, &base, &apart);
    const T* src = (const T*)a.x + base;
    T m = lowest;
    pool_window(a, pos, [&](i64 j) { m = src[j * apart] > m ? src[j * apart] : m; });
    ((T*)a.out)[i] = m;
  }
}

// One entry point per module, tripy_pool_<dtype>: the builder keeps the TRIPY_FOR_DTYPE row of the
// module's dtype (kind_module_source, cuda_sources.h), so a program compiles only the dtypes it
// pools (NVRTC's time grows with every instantiation).
TRIPY_FOR_DTYPE(f16, extern "C" __global__ void tripy_pool_f16(const PoolArgs a) { enter_after_previous(); pool_float<H>(a); })
TRIPY_FOR_DTYPE(bf16, extern "C" __global__ void tripy_pool_bf16(const PoolArgs a) { enter_after_previous(); pool_float<B>(a); })
TRIPY_FOR_DTYPE(f32, extern "C" __global__ void tripy_pool_f32(const PoolArgs a) { enter_after_previous(); pool_float<float>(a); })
TRIPY_FOR_DTYPE(i8, extern "C" __global__ void tripy_pool_i8(const PoolArgs a) { enter_after_previous(); pool_int<signed char>(a, (signed char)-128); })
TRIPY_FOR_DTYPE(i32, extern "C" __global__ void tripy_pool_i32(const PoolArgs a) { enter_after_previous(); pool_int<int>(a, (int)0x80000000); })
TRIPY_FOR_DTYPE(i64, extern "C" __global__ void tripy_pool_i64(const PoolArgs a) { enter_after_previous(); pool_int<i64>(a, (i64)0x8000000000000000ull); })
