// The shape of one kDot call and the oneDNN matmul path with its per-shape primitive cache.
// Without oneDNN in the build the cache declines every call and the built-in GEMM runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"

namespace tripy::cpu {

struct DotShape {
  int64_t M = 0, N = 0, K = 0;
  std::vector<int64_t> batch;                 // the output's batch dims
  std::vector<int64_t> lhs_batch, rhs_batch;  // right-aligned to batch, 1 where broadcast
  bool transpose_lhs = false, transpose_rhs = false, has_bias = false;
  rt::Activation activation = rt::Activation::kNone;
  // rhs is a program constant (its bytes never change): oneDNN may keep it pre-packed.
  bool rhs_constant = false;

  // lhs is stored [.., M, K] (or [.., K, M] transposed); rhs [.., K, N] (or [.., N, K]).
  template <class T>
  MatRef<T> lhs_ref(const T* p) const {
    return transpose_lhs ? MatRef<T>{p, 1, M} : MatRef<T>{p, K, 1};
  }
  template <class T>
  MatRef<T> rhs_ref(const T* p) const {
    return transpose_rhs ? MatRef<T>{p, 1, K} : MatRef<T>{p, N, 1};
  }
};

// Calls f(batch, lhs_offset, rhs_offset, out_offset) for each output batch, offsets in elements.
template <class F>
void for_each_batch(const DotShape& s, F f) {
  const size_t nb = s.batch.size();
  std::vector<int64_t> ls(nb, 0), rs(nb, 0);
  int64_t lstep = s.M * s.K, rstep = s.K * s.N;
  for (size_t d = nb; d-- > 0;) {
    ls[d] = s.lhs_batch[d] == 1 ? 0 : lstep;
    rs[d] = s.rhs_batch[d] == 1 ? 0 : rstep;
    lstep *= s.lhs_batch[d];
    rstep *= s.rhs_batch[d];
  }
  int64_t total = 1;
  for (int64_t d : s.batch) total *= d;
  for (int64_t b = 0; b < total; ++b) {
    int64_t lo = 0, ro = 0, q = b;
    for (size_t d = nb; d-- > 0;) {
      int64_t c = q % s.batch[d];
      q /= s.batch[d];
      lo += c * ls[d];
      ro += c * rs[d];
    }
    f(b, lo, ro, b * s.M * s.N);
  }
}

// oneDNN matmul primitives keyed by shape and attributes. Creating one costs ~100 us; eager mode
// and repeated runs reuse them.
class DnnlMatmulCache {
 public:
  DnnlMatmulCache();
  ~DnnlMatmulCache();
  // Runs c = act(a @ b + bias) in float32 if oneDNN supports the shape; `done` says whether it
  // ran (false: the caller falls back). A failure while executing is an error.
  Status run(const DotShape& s, const float* a, const float* b, const float* bias, float* c,
             bool& done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tripy::cpu
