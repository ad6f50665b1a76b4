// oneDNN convolution and deconvolution for kConvolution. Buffers hold plain tensors, channels-first
// (NCHW) or channels-last (NHWC, KRSC weights), described to oneDNN by their strides; the
// primitive's layouts are left to oneDNN (`any`): constant weights are reordered into its blocked
// layout once, activations on each call (scratch cached with the primitive). Bias is the
// primitive's bias, the residual a sum post-op (written into the destination first) and
// relu/gelu/silu (swish) an eltwise post-op: one primitive does the rest.
#include "backend/cpu/conv.h"

#include <cstring>
#include <map>
#include <unordered_map>

#if TRIPY_WITH_DNNL
#include <dnnl.hpp>

#include "backend/cpu/dnnl_threads.h"
#endif

namespace tripy::cpu {

#if TRIPY_WITH_DNNL
namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

memory::desc plain(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

// The weight as oneDNN's logical dims ({G, O/G, I/G, k...} grouped, else {O, I, k...}) with the
// strides of our storage: forward (O, C/g, k...), transposed (C, O/g, k...), in either layout.
memory::desc weight_desc(const ConvProblem& p, bool any) {
  const rt::ConvolutionAttrs& a = p.attrs;
  const int64_t G = a.groups, O = p.out_channels(), C = p.in_channels();
  std::vector<int64_t> k(p.w.begin() + 2, p.w.end());
  std::vector<int64_t> dims, strides;
  if (G > 1) dims = {G, O / G, C / G};
  else dims = {O, C};
  dims.insert(dims.end(), k.begin(), k.end());
  if (any) return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
  std::vector<int64_t> ks(p.w_strides.begin() + 2, p.w_strides.end());
  // Strides of (o within group, c within group) in elements; a group spans that many weight rows.
  const int64_t s0 = p.w_strides[0], s1 = p.w_strides[1];
  const int64_t so = a.transposed ? s1 : s0;
  const int64_t sc = a.transposed ? s0 : s1;
  if (G > 1) strides = {a.transposed ? (C / G) * s0 : (O / G) * s0, so, sc};
  else strides = {so, sc};
  strides.insert(strides.end(), ks.begin(), ks.end());
  return memory::desc(dims, memory::data_type::f32, strides);
}

}  // namespace

struct DnnlConvCache::Impl {
  struct Entry {
    std::unique_ptr<dnnl::primitive> prim;  // null: oneDNN declined this problem
    memory::desc x, w_user, w_prim, bias, out;
    memory::desc x_prim, out_prim;   // activations in the primitive's layout (blocked, usually)
    std::unique_ptr<memory> packed;  // weights in the primitive's layout
    const float* packed_from = nullptr;
    std::unique_ptr<memory> x_blocked, out_blocked;  // scratch for the activations' reorders
  };
  std::map<std::vector<int64_t>, Entry> cache;
  std::unique_ptr<dnnl::stream> stream;

  static std::vector<int64_t> key(const ConvProblem& p) {
    const rt::ConvolutionAttrs& a = p.attrs;
    std::vector<int64_t> k = {a.groups, a.transposed, a.has_bias, a.has_residual, static_cast<int64_t>(a.activation),
                              p.weight_constant, static_cast<int64_t>(a.layout)};
    for (const auto* v : {&p.x, &p.w, &p.out, &a.stride, &a.pad_before, &a.pad_after, &a.dilation}) {
      k.push_back(static_cast<int64_t>(v->size()));
      k.insert(k.end(), v->begin(), v->end());
    }
    return k;
  }

  // The forward or transposed primitive, with or without a bias, and the layouts it chose.
  template <typename Prim>
  static void build(Entry& e, dnnl::algorithm alg, const memory::desc& x, const memory::desc& w,
                    const memory::desc& out, const std::vector<int64_t>& dil, const rt::ConvolutionAttrs& a,
                    const dnnl::primitive_attr& attr) {
    const auto prop = dnnl::prop_kind::forward_inference;
    auto desc = a.has_bias ? typename Prim::desc(prop, alg, x, w, e.bias, out, a.stride, dil, a.pad_before, a.pad_after)
                           : typename Prim::desc(prop, alg, x, w, out, a.stride, dil, a.pad_before, a.pad_after);
    typename Prim::primitive_desc pd(desc, attr, cpu_engine());
    e.w_prim = pd.weights_desc();
    e.x_prim = pd.src_desc();
    e.out_prim = pd.dst_desc();
    e.prim = std::make_unique<Prim>(pd);
  }

  static Entry make(const ConvProblem& p) {
    const rt::ConvolutionAttrs& a = p.attrs;
    Entry e;
    e.x = plain(p.x, p.x_strides);
    e.out = plain(p.out, p.out_strides);
    e.w_user = weight_desc(p, false);
    if (a.has_bias) e.bias = plain({p.out_channels()}, {1});
    std::vector<int64_t> dil;
    for (int64_t d : a.dilation) dil.push_back(d - 1);  // oneDNN counts the gaps
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    if (a.has_residual) ops.append_sum(1.0f);  // dst holds the residual when the primitive runs
    if (a.activation == rt::Activation::kSilu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
    else if (a.activation != rt::Activation::kNone)
      ops.append_eltwise(1.0f,
                         a.activation == rt::Activation::kRelu ? dnnl::algorithm::eltwise_relu
                                                                : dnnl::algorithm::eltwise_gelu_erf,
                         0.0f, 0.0f);
    attr.set_post_ops(ops);
    const memory::desc w_any = weight_desc(p, true);
    // Activations too are `any`: oneDNN's blocked kernels (nChw16c) with a reorder on each side
    // beat its plain-layout (im2col + GEMM) kernels by ~2x on ResNet-50's convolutions.
    const memory::desc x_any(p.x, memory::data_type::f32, memory::format_tag::any);
    const memory::desc out_any(p.out, memory::data_type::f32, memory::format_tag::any);
    try {
      if (a.transposed)
        build<dnnl::deconvolution_forward>(e, dnnl::algorithm::deconvolution_direct, x_any, w_any, out_any, dil, a, attr);
      else
        build<dnnl::convolution_forward>(e, dnnl::algorithm::convolution_direct, x_any, w_any, out_any, dil, a, attr);
    } catch (const dnnl::error&) {
      e.prim.reset();  // unimplemented for this problem: remember, and run the direct loops
    }
    return e;
  }
};

DnnlConvCache::DnnlConvCache() : impl_(std::make_unique<Impl>()) {}
DnnlConvCache::~DnnlConvCache() = default;

Status DnnlConvCache::run(const ConvProblem& p, const float* x, const float* w, const float* bias,
                          const float* residual, float* out, bool& done) {
  done = false;
  if (p.x.size() > 5) return ok_status();
  try {
    // Also around creation: a primitive fixes its thread partitioning when it is built.
    const DnnlThreads threads;
    std::vector<int64_t> key = Impl::key(p);
    auto it = impl_->cache.find(key);
    if (it == impl_->cache.end()) it = impl_->cache.emplace(std::move(key), Impl::make(p)).first;
    Impl::Entry& e = it->second;
    if (!e.prim) return ok_status();
    dnnl::engine& eng = cpu_engine();
    if (!impl_->stream) impl_->stream = std::make_unique<dnnl::stream>(eng);
    memory weights(e.w_user, eng, const_cast<float*>(w));
    if (e.w_prim != e.w_user) {
      // Constant weights are reordered on the first call and kept; others on every call.
      if (!p.weight_constant || e.packed_from != w) {
        if (!e.packed) e.packed = std::make_unique<memory>(e.w_prim, eng);
        dnnl::reorder(weights, *e.packed).execute(*impl_->stream, weights, *e.packed);
        e.packed_from = p.weight_constant ? w : nullptr;
      }
      weights = *e.packed;
    }
    // Activations: the primitive's layout when it chose another (blocked: nChw16c), with a
    // reorder on each side; the residual goes where the sum post-op reads it, the destination.
    memory src(e.x, eng, const_cast<float*>(x)), dst(e.out, eng, out);
    dnnl::stream& s = *impl_->stream;
    if (e.x_prim != e.x) {
      if (!e.x_blocked) e.x_blocked = std::make_unique<memory>(e.x_prim, eng);
      dnnl::reorder(src, *e.x_blocked).execute(s, src, *e.x_blocked);
      src = *e.x_blocked;
    }
    memory prim_dst = dst;
    if (e.out_prim != e.out) {
      if (!e.out_blocked) e.out_blocked = std::make_unique<memory>(e.out_prim, eng);
      prim_dst = *e.out_blocked;
    }
    if (p.attrs.has_residual) {
      memory res(e.out, eng, const_cast<float*>(residual));
      if (prim_dst.get_desc() != e.out) dnnl::reorder(res, prim_dst).execute(s, res, prim_dst);
      else if (residual != out) std::memcpy(out, residual, e.out.get_size());
    }
    std::unordered_map<int, memory> margs = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, prim_dst}};
    if (p.attrs.has_bias) margs.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<float*>(bias)));
    e.prim->execute(s, margs);
    if (e.out_prim != e.out) dnnl::reorder(prim_dst, dst).execute(s, prim_dst, dst);
    s.wait();
    done = true;
    return ok_status();
  } catch (const dnnl::error& err) {
    return Status(StatusCode::kInternal, std::string("oneDNN convolution failed: ") + err.what());
  }
}

#else  // no oneDNN: always decline

struct DnnlConvCache::Impl {};
DnnlConvCache::DnnlConvCache() = default;
DnnlConvCache::~DnnlConvCache() = default;
Status DnnlConvCache::run(const ConvProblem&, const float*, const float*, const float*, const float*, float*,
                          bool& done) {
  done = false;
  return ok_status();
}

#endif

}  // namespace tripy::cpu
