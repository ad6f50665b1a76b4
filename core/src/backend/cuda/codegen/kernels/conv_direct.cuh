// The fixed convolution module (the convolution row of codegen/cuda_builder.cc, after
// device_prelude.cuh): a direct convolution per float dtype (the fallback where cuDNN is absent,
// disabled with TRIPY_CUDNN=0, or cannot take the problem: asymmetric padding) and, in the same
// function, the epilogue (bias, residual, activation) that runs after a cuDNN call which did not
// fuse it. The module's one entry point, of its dtype, is picked from the rows at the end.

// Words, in this order (cuda_conv.cc fills them): addresses, mode, sizes, geometry.
struct ConvArgs {
  i64 out, x, w, bias, res;
  i64 mode;  // 0: convolution then epilogue; 1: epilogue only, in place on `out`
  i64 N, C, O, G;
  i64 in[3], on[3], k[3], s[3], d[3], lo[3];  // spatial dims right-aligned, missing ones are 1
  i64 transposed, act;  // act: 0 none, 1 relu, 2 gelu (erf), 3 silu
  i64 channels_last;    // x, out, res (N, spatial..., C) and w (w0, k..., w1); else channels-first
};
DEVI float ld(const float* p, i64 i) { return p[i]; }
DEVI void st(float* p, i64 i, float v) { p[i] = v; }
struct H { unsigned short v; };
struct B { unsigned short v; };
DEVI float ld(const H* p, i64 i) { return h2f(p[i].v); }
DEVI void st(H* p, i64 i, float v) { p[i].v = f2h(v); }
DEVI float ld(const B* p, i64 i) { return b2f(p[i].v); }
DEVI void st(B* p, i64 i, float v) { p[i].v = f2b(v); }

// The epilogue alone, in place on `out`, 16 bytes per thread: channels-last vectors run along the
// channels (O a multiple of the vector), channels-first ones along the positions (spatial size a
// multiple). One index division per vector instead of three per element (the per-element path ran
// a batch-32 ResNet-50's epilogues at a fifth of the memory bandwidth). False when neither fits.
template <class T> DEVI bool epilogue_vectors(const ConvArgs& a) {
  constexpr int V = 16 / sizeof(T);
  const i64 spatial = a.on[0] * a.on[1] * a.on[2];
  const i64 run = a.channels_last ? a.O : spatial;
  if (run % V != 0 || ((a.out | a.bias | a.res) & 15) != 0) return false;
  typedef Pack<T, V> P;
  P* out = (P*)a.out;
  const T* bias = (const T*)a.bias;
  const P* res = (const P*)a.res;
  const i64 total = a.N * a.O * spatial / V, per_run = run / V;
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    // channels-last: vector i holds channels o0..o0+V-1; channels-first: channel o0 throughout.
    const i64 o0 = a.channels_last ? (i % per_run) * V : (i / per_run) % a.O;
    P y = out[i];
    P r;
    if (res) r = res[i];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float acc = ld(y.v, e);
      if (bias) acc += ld(bias, a.channels_last ? o0 + e : o0);
      if (res) acc += ld(r.v, e);
      st(y.v, e, activate(a.act, acc));
    }
    out[i] = y;
  }
  return true;
}

// One thread per output element in storage order (grid-stride): out[n, o, p] = act(sum + bias[o]
// + res[n, o, p]), the sum over the group's channels and the kernel taps, accumulated in float32.
// Forward reads x at p * s - lo + k * d; transposed gathers the x whose scatter lands on p.
template <class T> DEVI void conv_body(const ConvArgs& a) {
  if (a.mode == 1 && epilogue_vectors<T>(a)) return;
  T* out = (T*)a.out;
  const T* x = (const T*)a.x;
  const T* w = (const T*)a.w;
  const T* bias = (const T*)a.bias;
  const T* res = (const T*)a.res;
  const i64 spatial = a.on[0] * a.on[1] * a.on[2], in_size = a.in[0] * a.in[1] * a.in[2];
  const i64 taps = a.k[0] * a.k[1] * a.k[2], total = a.N * a.O * spatial;
  const i64 cg = a.C / a.G, og = a.O / a.G;
  const i64 step = (i64)gridDim.x * blockDim.x;
  // Element strides: of an input channel and spatial position, and of a weight column (w1) and tap.
  const i64 x_c = a.channels_last ? 1 : in_size, x_p = a.channels_last ? a.C : 1;
  const i64 w_cols = a.transposed ? og : cg;
  const i64 w_col = a.channels_last ? 1 : taps, w_tap = a.channels_last ? w_cols : 1;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    i64 n, o, pos;
    if (a.channels_last) {
      const i64 np = i / a.O;
      o = i - np * a.O;
      n = np / spatial;
      pos = np - n * spatial;
    } else {
      const i64 no = i / spatial;
      pos = i - no * spatial;
      n = no / a.O;
      o = no - n * a.O;
    }
    float acc = 0.0f;
    if (a.mode == 0) {
      const i64 p[3] = {pos / (a.on[1] * a.on[2]), pos / a.on[2] % a.on[1], pos % a.on[2]};
      const i64 g = o / og;
      for (i64 c = g * cg; c < (g + 1) * cg; ++c) {
        const T* src = x + n * a.C * in_size + c * x_c;
        const i64 row = a.transposed ? c : o, col = a.transposed ? o % og : c % cg;
        const T* wt = w + row * w_cols * taps + col * w_col;
        for (i64 t = 0; t < taps; ++t) {
          const i64 k[3] = {t / (a.k[1] * a.k[2]), t / a.k[2] % a.k[1], t % a.k[2]};
          i64 at = 0;
          bool inside = true;
#pragma unroll
          for (int j = 0; j < 3; ++j) {
            i64 q;
            if (a.transposed) {
              const i64 num = p[j] + a.lo[j] - k[j] * a.d[j];
              q = num / a.s[j];
              inside = inside && num >= 0 && q * a.s[j] == num && q < a.in[j];
            } else {
              q = p[j] * a.s[j] - a.lo[j] + k[j] * a.d[j];
              inside = inside && q >= 0 && q < a.in[j];
            }
            at = at * a.in[j] + q;
          }
          if (inside) acc += ld(src, at * x_p) * ld(wt, t * w_tap);
        }
      }
    } else {
      acc = ld(out, i);
    }
    if (bias) acc += ld(bias, o);
    if (res) acc += ld(res, i);
    acc = activate(a.act, acc);  // the prelude's, shared with the fused kernels
    st(out, i, acc);
  }
}

// One entry point per module, tripy_conv_<dtype>: the builder keeps the TRIPY_FOR_DTYPE row of the
// module's dtype (kind_module_source, cuda_sources.h).
TRIPY_FOR_DTYPE(f16, extern "C" __global__ void tripy_conv_f16(const ConvArgs a) { enter_after_previous(); conv_body<H>(a); })
TRIPY_FOR_DTYPE(bf16, extern "C" __global__ void tripy_conv_bf16(const ConvArgs a) { enter_after_previous(); conv_body<B>(a); })
TRIPY_FOR_DTYPE(f32, extern "C" __global__ void tripy_conv_f32(const ConvArgs a) { enter_after_previous(); conv_body<float>(a); })
