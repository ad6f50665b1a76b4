// The CPU convolution (kConvolution): one problem description shared by the oneDNN path and the direct
// loops that run where oneDNN declines (or is absent from the build).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::cpu {

// One kConvolution call at run-time sizes, float32 operands. Shapes are channels-first whatever the
// buffers' layout; the strides (in elements, along those dims) say where the buffers keep them.
struct ConvProblem {
  rt::ConvolutionAttrs attrs;
  std::vector<int64_t> x, w, out;  // shapes: (N, C, spatial...), weight, (N, O, spatial...)
  std::vector<int64_t> x_strides, w_strides, out_strides;  // the residual's are out's
  bool weight_constant = false;    // program constant: a reordered copy may be kept
  // Fills shapes and strides from the buffers' shapes, stored in attrs.layout.
  void set_buffers(const std::vector<int64_t>& x_buffer, const std::vector<int64_t>& w_buffer,
                   const std::vector<int64_t>& out_buffer);
  int64_t in_channels() const { return x[1]; }
  int64_t out_channels() const { return out[1]; }
  size_t spatial() const { return x.size() - 2; }
};

// oneDNN convolution/deconvolution primitives keyed by shape signature and attributes, with
// constant weights reordered once into the layout oneDNN picks. Declines (done = false) shapes
// it has no implementation for; the caller then runs conv_direct.
class DnnlConvCache {
 public:
  DnnlConvCache();
  ~DnnlConvCache();
  Status run(const ConvProblem& p, const float* x, const float* w, const float* bias, const float* residual,
             float* out, bool& done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Straightforward loops (gather form for both directions), epilogue included: the reference the
// oneDNN path is tested against and the fallback where it declines.
void conv_direct(const ConvProblem& p, const float* x, const float* w, const float* bias, const float* residual,
                 float* out);

}  // namespace tripy::cpu
