// kConvolution on the CPU: float32 through oneDNN's convolution/deconvolution primitives (cached per
// shape in the kernel's state), narrow floats converted to float32 around it, and direct loops
// where oneDNN declines. TRIPY_CPU_CONV=direct forces the loops (for tests and comparisons).
#include "backend/cpu/conv.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/fused_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

class ConvState final : public KernelState {
 public:
  DnnlConvCache dnnl;
  std::vector<float> x32, w32, bias32, res32, out32;
};

const float* as_f32(const View& v, std::vector<float>& buf) {
  if (v.dtype == DType::kFloat32) return static_cast<const float*>(v.data);
  const int64_t n = v.numel();
  buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += kTile)
    load_span(v.dtype, v.data, i, 1, static_cast<int>(std::min<int64_t>(kTile, n - i)), buf.data() + i);
  return buf.data();
}

bool force_direct() {
  const char* v = std::getenv("TRIPY_CPU_CONV");
  return v && std::strcmp(v, "direct") == 0;
}


}  // namespace

void ConvProblem::set_buffers(const std::vector<int64_t>& x_buffer, const std::vector<int64_t>& w_buffer,
                              const std::vector<int64_t>& out_buffer) {
  const rt::Layout l = attrs.layout;
  x = rt::to_channels_first(l, x_buffer);
  w = rt::to_channels_first(l, w_buffer);
  out = rt::to_channels_first(l, out_buffer);
  x_strides = rt::to_channels_first(l, dense_strides(x_buffer));
  w_strides = rt::to_channels_first(l, dense_strides(w_buffer));
  out_strides = rt::to_channels_first(l, dense_strides(out_buffer));
}

void conv_direct(const ConvProblem& p, const float* x, const float* w, const float* bias, const float* residual,
                 float* out) {
  const rt::ConvolutionAttrs& a = p.attrs;
  const size_t nd = p.spatial();
  // Spatial dims padded to 3 with size-1 dims (stride 0), so one loop nest serves 1-D to 3-D.
  int64_t in[3] = {1, 1, 1}, on[3] = {1, 1, 1}, kn[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
  int64_t xs[3] = {0, 0, 0}, ws[3] = {0, 0, 0}, os[3] = {0, 0, 0};
  for (size_t i = 0; i < nd; ++i) {
    const size_t j = 3 - nd + i;
    in[j] = p.x[i + 2];
    on[j] = p.out[i + 2];
    kn[j] = p.w[i + 2];
    s[j] = a.stride[i];
    d[j] = a.dilation[i];
    lo[j] = a.pad_before[i];
    xs[j] = p.x_strides[i + 2];
    ws[j] = p.w_strides[i + 2];
    os[j] = p.out_strides[i + 2];
  }
  const int64_t N = p.x[0], C = p.in_channels(), O = p.out_channels(), G = a.groups;
  const int64_t cg = C / G, og = O / G;
  const int64_t taps = kn[0] * kn[1] * kn[2];
  // Forward weight (O, C/g, k); transposed (C, O/g, k): the weight of (channel c in the group,
  // output channel o) at tap 0.
  auto w_at = [&](int64_t c, int64_t o) {
    return a.transposed ? c * p.w_strides[0] + (o % og) * p.w_strides[1]
                        : o * p.w_strides[0] + (c % cg) * p.w_strides[1];
  };
  parallel_for(N * O, 1, [&](int64_t begin, int64_t end) {
    for (int64_t no = begin; no < end; ++no) {
      const int64_t n = no / O, o = no % O, g = o / og;
      for (int64_t z = 0; z < on[0]; ++z)
        for (int64_t y = 0; y < on[1]; ++y)
          for (int64_t xx = 0; xx < on[2]; ++xx) {
            const int64_t pos[3] = {z, y, xx};
            double acc = 0;
            for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
              const float* src = x + n * p.x_strides[0] + c * p.x_strides[1];
              const float* wt = w + w_at(c, o);
              for (int64_t t = 0; t < taps; ++t) {
                const int64_t k[3] = {t / (kn[1] * kn[2]), t / kn[2] % kn[1], t % kn[2]};
                int64_t at = 0;
                bool inside = true;
                for (int i = 0; i < 3 && inside; ++i) {
                  int64_t q = 0;
                  if (a.transposed) {  // out p gathers input i where i * s - lo + k * d == p
                    const int64_t num = pos[i] + lo[i] - k[i] * d[i];
                    inside = num >= 0 && num % s[i] == 0 && (q = num / s[i]) < in[i];
                  } else {
                    q = pos[i] * s[i] - lo[i] + k[i] * d[i];
                    inside = q >= 0 && q < in[i];
                  }
                  if (inside) at += q * xs[i];
                }
                if (inside) acc += static_cast<double>(src[at]) * wt[k[0] * ws[0] + k[1] * ws[1] + k[2] * ws[2]];
              }
            }
            const int64_t i = n * p.out_strides[0] + o * p.out_strides[1] + z * os[0] + y * os[1] + xx * os[2];
            float v = static_cast<float>(acc) + (bias ? bias[o] : 0.0f);
            if (residual) v += residual[i];
            out[i] = activate(a.activation, v);
          }
    }
  });
}

std::unique_ptr<KernelState> prepare_conv() { return std::make_unique<ConvState>(); }

Status run_conv(const KernelArgs& args, KernelState& state) {
  auto& st = static_cast<ConvState&>(state);
  const rt::ConvolutionAttrs& attrs = args.kernel->convolution;
  const size_t nin = 2 + attrs.has_bias + attrs.has_residual;
  if (args.inputs.size() != nin || args.outputs.size() != 1)
    return kernel_error(args, "convolution takes " + std::to_string(nin) + " inputs and one output",
                        StatusCode::kInternal);
  const View& xv = *args.inputs[0];
  const View& wv = *args.inputs[1];
  const View& ov = *args.outputs[0];
  const View* bv = attrs.has_bias ? args.inputs[2] : nullptr;
  const View* rv = attrs.has_residual ? args.inputs[nin - 1] : nullptr;
  ConvProblem p;
  p.attrs = attrs;
  p.set_buffers(xv.shape, wv.shape, ov.shape);
  p.weight_constant = args.program->is_constant(args.kernel->inputs[1]);
  if (ov.numel() == 0) return ok_status();
  if (xv.numel() == 0) {  // no input channels or sizes: the sum is empty
    std::vector<float> zero(static_cast<size_t>(ov.numel()), 0.0f);
    const float* b = bv ? as_f32(*bv, st.bias32) : nullptr;
    const float* r = rv ? as_f32(*rv, st.res32) : nullptr;
    const int64_t channel_stride = p.out_strides[1];  // channel of element i: i / stride % O
    for (int64_t i = 0; i < ov.numel(); ++i)
      zero[i] = activate(attrs.activation, (b ? b[i / channel_stride % p.out[1]] : 0.0f) + (r ? r[i] : 0.0f));
    for (int64_t i = 0; i < ov.numel(); i += kTile)
      store_span(ov.dtype, ov.data, i, zero.data() + i, static_cast<int>(std::min<int64_t>(kTile, ov.numel() - i)));
    return ok_status();
  }
  const float* x = as_f32(xv, st.x32);
  const float* w = as_f32(wv, st.w32);
  const float* b = bv ? as_f32(*bv, st.bias32) : nullptr;
  const float* r = rv ? as_f32(*rv, st.res32) : nullptr;
  p.weight_constant = p.weight_constant && wv.dtype == DType::kFloat32;
  float* out = static_cast<float*>(ov.data);
  if (ov.dtype != DType::kFloat32) {
    st.out32.resize(static_cast<size_t>(ov.numel()));
    out = st.out32.data();
  }
  bool done = false;
  if (!force_direct()) {
    Status s = st.dnnl.run(p, x, w, b, r, out, done);
    if (!s.ok()) return kernel_error(args, s.message(), s.code());
  }
  if (!done) conv_direct(p, x, w, b, r, out);
  if (ov.dtype != DType::kFloat32)
    for (int64_t i = 0; i < ov.numel(); i += kTile)
      store_span(ov.dtype, ov.data, i, out + i, static_cast<int>(std::min<int64_t>(kTile, ov.numel() - i)));
  return ok_status();
}

const CpuKernel kConvolutionKernel = {
    [](const rt::Program&, const rt::Kernel&, SourceRef) -> StatusOr<std::unique_ptr<KernelState>> { return prepare_conv(); },
    [](const KernelArgs& args, KernelState* state) { return run_conv(args, *state); }};

}  // namespace tripy::cpu
