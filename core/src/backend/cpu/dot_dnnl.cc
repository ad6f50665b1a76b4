// oneDNN matmul for kDot: transposes expressed as strides, batch broadcast as size-1 dims, bias
// as the matmul bias argument and relu/gelu(erf) as eltwise post-ops, so one primitive does all.
#include "backend/cpu/dot_dnnl.h"

#include <unordered_map>

#if TRIPY_WITH_DNNL
#include <dnnl.hpp>

#include "backend/cpu/dnnl_threads.h"
#endif

namespace tripy::cpu {

#if TRIPY_WITH_DNNL
namespace {
// Multiply-adds below which a matmul runs on one thread (64 x 256 x 512 was still faster on one).
constexpr int64_t kDnnlOneThreadMacs = int64_t{1} << 24;

dnnl::engine& cpu_engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Logical dims [batch..., rows, cols] over storage that may hold the last two dims swapped.
dnnl::memory::desc operand_desc(const std::vector<int64_t>& batch, int64_t rows, int64_t cols,
                                bool transposed) {
  std::vector<int64_t> stored = batch;
  stored.push_back(transposed ? cols : rows);
  stored.push_back(transposed ? rows : cols);
  std::vector<int64_t> st = dense_strides(stored);
  std::vector<int64_t> dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  if (transposed) std::swap(st[st.size() - 1], st[st.size() - 2]);
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, st);
}
}  // namespace

struct DnnlMatmulCache::Impl {
  struct Entry {
    std::unique_ptr<dnnl::matmul> prim;  // null: oneDNN declined this shape
    dnnl::memory::desc a, b, bias, c;
    // Constant weights reordered once into the layout the primitive runs fastest with.
    dnnl::memory::desc packed_desc;
    std::unique_ptr<dnnl::memory> packed;
    const float* packed_from = nullptr;
  };
  std::map<std::vector<int64_t>, Entry> cache;
  std::unique_ptr<dnnl::stream> stream;
};

DnnlMatmulCache::DnnlMatmulCache() : impl_(std::make_unique<Impl>()) {}
DnnlMatmulCache::~DnnlMatmulCache() = default;

Status DnnlMatmulCache::run(const DotShape& s, const float* a, const float* b, const float* bias,
                            float* c, bool& done) {
  done = false;
  if (s.batch.size() + 2 > DNNL_MAX_NDIMS) return ok_status();
  std::vector<int64_t> key = {s.M, s.N, s.K, s.transpose_lhs, s.transpose_rhs, s.has_bias,
                              static_cast<int64_t>(s.activation), s.rhs_constant};
  key.insert(key.end(), s.lhs_batch.begin(), s.lhs_batch.end());
  key.insert(key.end(), s.rhs_batch.begin(), s.rhs_batch.end());
  key.insert(key.end(), s.batch.begin(), s.batch.end());
  auto it = impl_->cache.find(key);
  try {
    // Also around creation: a primitive fixes its thread partitioning when it is built. A small
    // product runs on one thread: waking the others costs more than they save (16 x 256 x 512 on
    // two cores: 52 us on one thread, 84 us on two).
    const DnnlThreads threads(s.M * s.N * s.K * numel_of(s.batch) < kDnnlOneThreadMacs ? 1 : 0);
    if (it == impl_->cache.end()) {
      Impl::Entry e;
      try {
        e.a = operand_desc(s.lhs_batch, s.M, s.K, s.transpose_lhs);
        e.b = operand_desc(s.rhs_batch, s.K, s.N, s.transpose_rhs);
        std::vector<int64_t> cdims = s.batch;
        cdims.push_back(s.M);
        cdims.push_back(s.N);
        e.c = dnnl::memory::desc(cdims, dnnl::memory::data_type::f32, dense_strides(cdims));
        std::vector<int64_t> bdims(cdims.size(), 1);
        bdims.back() = s.N;
        if (s.has_bias)
          e.bias = dnnl::memory::desc(bdims, dnnl::memory::data_type::f32, dense_strides(bdims));
        dnnl::primitive_attr attr;
        if (s.activation != rt::Activation::kNone) {
          dnnl::post_ops ops;
          ops.append_eltwise(1.0f,
                             s.activation == rt::Activation::kRelu
                                 ? dnnl::algorithm::eltwise_relu
                                 : dnnl::algorithm::eltwise_gelu_erf,
                             0.0f, 0.0f);
          attr.set_post_ops(ops);
        }
        // Constant weights: let oneDNN pick their layout (blocked, for its kernels); they are
        // reordered once below and reused on every call.
        dnnl::memory::desc wdesc = e.b;
        if (s.rhs_constant) {
          std::vector<int64_t> wdims = s.rhs_batch;
          wdims.push_back(s.K);
          wdims.push_back(s.N);
          wdesc = dnnl::memory::desc(wdims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
        }
        auto desc = s.has_bias ? dnnl::matmul::desc(e.a, wdesc, e.bias, e.c)
                               : dnnl::matmul::desc(e.a, wdesc, e.c);
        dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
        e.packed_desc = pd.weights_desc();
        e.prim = std::make_unique<dnnl::matmul>(pd);
      } catch (const dnnl::error&) {
        e.prim.reset();  // unimplemented for this shape: remember and fall back
      }
      it = impl_->cache.emplace(std::move(key), std::move(e)).first;
    }
    Impl::Entry& e = it->second;
    if (!e.prim) return ok_status();
    if (!impl_->stream) impl_->stream = std::make_unique<dnnl::stream>(cpu_engine());
    dnnl::engine& eng = cpu_engine();
    dnnl::memory weights(e.b, eng, const_cast<float*>(b));
    if (s.rhs_constant && e.packed_desc != e.b) {
      if (e.packed_from != b) {
        e.packed = std::make_unique<dnnl::memory>(e.packed_desc, eng);
        dnnl::reorder(weights, *e.packed).execute(*impl_->stream, weights, *e.packed);
        impl_->stream->wait();
        e.packed_from = b;
      }
      weights = *e.packed;
    }
    std::unordered_map<int, dnnl::memory> margs = {
        {DNNL_ARG_SRC, dnnl::memory(e.a, eng, const_cast<float*>(a))},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, dnnl::memory(e.c, eng, c)}};
    if (s.has_bias) margs.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, eng, const_cast<float*>(bias)));
    e.prim->execute(*impl_->stream, margs);
    impl_->stream->wait();
    done = true;
    return ok_status();
  } catch (const dnnl::error& err) {
    return Status(StatusCode::kInternal, std::string("oneDNN matmul failed: ") + err.what());
  }
}

#else  // no oneDNN: always decline

struct DnnlMatmulCache::Impl {};
DnnlMatmulCache::DnnlMatmulCache() = default;
DnnlMatmulCache::~DnnlMatmulCache() = default;
Status DnnlMatmulCache::run(const DotShape&, const float*, const float*, const float*, float*,
                            bool& done) {
  done = false;
  return ok_status();
}

#endif

}  // namespace tripy::cpu
