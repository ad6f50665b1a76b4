// check_run_shapes: sizes that only exist once the input shapes are known, checked per run.
// O(buffers + kernels x rank) integer comparisons: negligible beside the kernels themselves.
#include "runtime/run_checks.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "runtime/shape_arith.h"

namespace tripy::rt {
namespace {

class RunChecker {
 public:
  RunChecker(const Program& p, const std::vector<Tensor>& inputs, const std::vector<int64_t>& slots)
      : p_(p), inputs_(inputs), slots_(slots) {}

  Status run() {
    shapes_.resize(p_.buffers.size());
    bytes_.resize(p_.buffers.size());
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      shapes_[i] = p_.buffer_shape(static_cast<int32_t>(i), slots_);
      if (!checked_nbytes(shapes_[i], p_.buffers[i].dtype, &bytes_[i])) {
        bool negative = std::any_of(shapes_[i].begin(), shapes_[i].end(), [](int64_t d) { return d < 0; });
        if (negative) return fail("buffer " + std::to_string(i) + " has the impossible shape " + dims_str(shapes_[i]));
        // Sizes the inputs imply can simply be too large: that is a resource limit, not a bug.
        long double bytes = static_cast<long double>(dtype_size(p_.buffers[i].dtype));
        for (int64_t d : shapes_[i]) bytes *= static_cast<long double>(d);
        char text[64];
        std::snprintf(text, sizeof(text), "%.0Lf", bytes);
        Status st(StatusCode::kResourceExhausted,
                  "This call needs a " + std::string(dtype_name(p_.buffers[i].dtype)) + " tensor of shape " +
                      dims_str(shapes_[i]) + ", which is too large to allocate: " + text +
                      " bytes, more than the 2**40 bytes a tensor may have.");
        for (const Kernel& k : p_.kernels) {
          if (std::find(k.outputs.begin(), k.outputs.end(), static_cast<int32_t>(i)) == k.outputs.end()) continue;
          if (k.source >= 0 && static_cast<size_t>(k.source) < p_.sources.size())
            st.note("The tensor is made by:", std::make_shared<SourceInfo>(p_.sources[static_cast<size_t>(k.source)]));
          break;
        }
        return st;
      }
    }
    for (size_t i = 0; i < p_.buffers.size(); ++i) TRIPY_RETURN_IF_ERROR(check_buffer(i));
    for (const Kernel& k : p_.kernels) {
      std::string why = check_kernel(k);
      if (!why.empty()) {
        Status st = fail("kernel '" + k.name + "' " + why);
        if (k.source >= 0 && static_cast<size_t>(k.source) < p_.sources.size())
          st.at(std::make_shared<SourceInfo>(p_.sources[static_cast<size_t>(k.source)]));
        return st;
      }
    }
    return ok_status();
  }

 private:
  static Status fail(const std::string& what) {
    return internal_error("The executable is inconsistent with these input shapes: " + what + ".");
  }
  const std::vector<int64_t>& shape(int32_t b) const { return shapes_[static_cast<size_t>(b)]; }
  int64_t slot(Slot s) const { return slots_[static_cast<size_t>(s)]; }

  Status check_buffer(size_t i) {
    const BufferDesc& b = p_.buffers[i];
    const std::string name = "buffer " + std::to_string(i) + " " + dims_str(shapes_[i]);
    const size_t index = static_cast<size_t>(b.index);
    switch (b.kind) {
      case BufferDesc::Kind::kInput:
        if (shapes_[i] != inputs_[index].shape())
          return fail(name + " should be input " + std::to_string(index) + " " + dims_str(inputs_[index].shape()));
        break;
      case BufferDesc::Kind::kConstant:
        if (shapes_[i] != p_.constants[index].shape())
          return fail(name + " should be constant " + std::to_string(index) + " " + dims_str(p_.constants[index].shape()));
        break;
      case BufferDesc::Kind::kTemp:
        if (bytes_[i] > b.max_bytes)
          return fail(name + " needs " + std::to_string(bytes_[i]) + " bytes, more than the " +
                      std::to_string(b.max_bytes) + " planned for it");
        break;
      case BufferDesc::Kind::kAlias: {
        const size_t root = static_cast<size_t>(p_.alias_root(static_cast<int32_t>(index)));
        if (bytes_[i] > bytes_[root])
          return fail(name + " is larger than buffer " + std::to_string(root) + ", which it aliases");
        break;
      }
      case BufferDesc::Kind::kOutput:
        if (b.donor >= 0 && shapes_[i] != inputs_[static_cast<size_t>(b.donor)].shape())
          return fail(name + " should have the shape of input " + std::to_string(b.donor) + " " +
                      dims_str(inputs_[static_cast<size_t>(b.donor)].shape()) + ", whose memory it is");
        break;
    }
    return ok_status();
  }

  // Returns why the kernel cannot run on these sizes, or "" when it can: the kind's own rule, one
  // overload of check() per attribute struct (a kind without one fails to compile).
  std::string check_kernel(const Kernel& k) const {
    return visit_kind_attrs(k, [&](const auto& attrs) { return check(k, attrs); });
  }

  std::string check(const Kernel& k, const FusedProgram&) const { return check_fused(k); }
  std::string check(const Kernel& k, const DotAttrs&) const { return check_dot(k); }
  std::string check(const Kernel& k, const ConvolutionAttrs&) const { return check_conv(k); }
  std::string check(const Kernel& k, const PoolingAttrs&) const { return check_pool(k); }
  std::string check(const Kernel&, const PluginAttrs&) const { return ""; }  // the plugin's rule gave the shapes
  std::string check(const Kernel& k, const SampleAttrs&) const {
    const auto& x = shape(k.inputs[0]);
    const auto& out = shape(k.outputs[0]);
    if (shape(k.inputs[1]) != std::vector<int64_t>{1}) return "needs a key of shape (1,), not " + dims_str(shape(k.inputs[1]));
    if (!std::equal(out.begin(), out.end(), x.begin())) return "samples " + dims_str(x) + " into " + dims_str(out);
    const int64_t vocab = x.back();
    if (numel_of(out) > 0 && (vocab < 1 || vocab > kMaxSampleVocab))
      return "samples from rows of " + std::to_string(vocab) + " logits, outside [1, " + std::to_string(kMaxSampleVocab) + "]";
    return "";
  }

  std::string check(const Kernel& k, const TransposeAttrs& t) const {
    const auto& in = shape(k.inputs[0]);
    const auto& out = shape(k.outputs[0]);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != in[static_cast<size_t>(t.perm[i])]) return "transposes " + dims_str(in) + " into " + dims_str(out);
    return "";
  }

  std::string check(const Kernel& k, const SliceAttrs& s) const {
    const auto& in = shape(k.inputs[0]);
    const auto& out = shape(k.outputs[0]);
    for (size_t d = 0; d < in.size(); ++d) {
      const int64_t n = out[d], start = slot(s.starts[d]), step = slot(s.steps[d]);
      if (n == 0) continue;
      const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(n - 1) * step;
      if (step == 0 || start < 0 || start >= in[d] || last < 0 || last >= in[d])
        return "slices " + std::to_string(n) + " elements from " + std::to_string(start) + " by " +
               std::to_string(step) + " out of dimension " + std::to_string(d) + " of " + dims_str(in);
    }
    return "";
  }

  std::string check(const Kernel& k, const ConcatenateAttrs& c) const {
    const auto& out = shape(k.outputs[0]);
    const size_t axis = static_cast<size_t>(c.axis);
    int64_t total = 0;
    for (int32_t b : k.inputs) {
      const auto& in = shape(b);
      for (size_t d = 0; d < out.size(); ++d)
        if (d != axis && in[d] != out[d]) return "joins " + dims_str(in) + " into " + dims_str(out);
      total += in[axis];  // each at most kMaxBytes: no overflow
    }
    return total == out[axis] ? "" : "joins sizes that do not add up to " + dims_str(out);
  }

  std::string check(const Kernel& k, const GatherAttrs& g) const {
    const auto& data = shape(k.inputs[0]);
    const auto& index = shape(k.inputs[1]);
    std::vector<int64_t> want(data.begin(), data.begin() + g.axis);
    want.insert(want.end(), index.begin(), index.end());
    want.insert(want.end(), data.begin() + g.axis + 1, data.end());
    return want == shape(k.outputs[0]) ? "" : "gathers into " + dims_str(shape(k.outputs[0])) + " instead of " + dims_str(want);
  }

  std::string check(const Kernel& k, const AttentionAttrs& a) const {
    std::vector<std::vector<int64_t>> shapes;
    for (int32_t b : k.inputs) shapes.push_back(shape(b));
    shapes.push_back(shape(k.outputs[0]));
    return attention_shape_error(a, shapes);
  }

  std::string check(const Kernel& k, const CopyAttrs&) const {
    return numel_of(shape(k.inputs[0])) == numel_of(shape(k.outputs[0]))
               ? ""
               : "copies " + dims_str(shape(k.inputs[0])) + " into " + dims_str(shape(k.outputs[0]));
  }

  std::string check(const Kernel& k, const UpdateSliceAttrs& u) const {
    const auto& in = shape(k.inputs[0]);
    const auto& up = shape(k.inputs[1]);
    if (shape(k.outputs[0]) != in) return "updates " + dims_str(in) + " into " + dims_str(shape(k.outputs[0]));
    if (numel_of(shape(k.inputs[2])) != 1) return "has a start of shape " + dims_str(shape(k.inputs[2]));
    for (size_t d = 0; d < in.size(); ++d)
      if (d == static_cast<size_t>(u.axis) ? up[d] > in[d] : up[d] != in[d])
        return "writes an update of shape " + dims_str(up) + " into " + dims_str(in);
    return "";
  }

  std::string check_fused(const Kernel& k) const {
    const FusedProgram& f = k.fused;
    std::vector<int64_t> domain;
    for (Slot s : f.domain) domain.push_back(slot(s));
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      std::vector<int64_t> in = shape(k.inputs[i]);
      if (i < f.input_windows.size() && !f.input_windows[i].starts.empty()) {
        // A slice read in place must lie inside its buffer, or the kernel reads past it.
        const FusedProgram::Window& w = f.input_windows[i];
        for (size_t d = 0; d < in.size(); ++d) {
          const int64_t start = slot(w.starts[d]), size = slot(w.sizes[d]);
          if (start < 0 || size < 0 || start > in[d] || size > in[d] - start)
            return "reads [" + std::to_string(start) + ", " + std::to_string(start + size) + ") of dim " +
                   std::to_string(d) + " of input " + std::to_string(i) + " " + dims_str(in);
          in[d] = size;
        }
      }
      for (size_t d = 0; d < in.size(); ++d) {
        const int64_t along = domain[static_cast<size_t>(f.input_axes[i][d])];
        if (in[d] != along && in[d] != 1)
          return "reads input " + std::to_string(i) + " " + dims_str(in) + " over the domain " + dims_str(domain);
      }
    }
    // Outputs cover the whole domain, or (row-level) its leading reduce_from axes.
    for (int32_t b : k.outputs) {
      const auto& out = shape(b);
      if (!std::equal(out.begin(), out.end(), domain.begin()))
        return "writes " + dims_str(out) + " over the domain " + dims_str(domain);
    }
    return "";
  }

  // The output's shape follows from the input's, the weight's and the attributes exactly, so a
  // kernel that walks the output and reads the input where the formula says stays inside both.
  std::string check_conv(const Kernel& k) const {
    const ConvolutionAttrs& c = k.convolution;
    const std::string what = "convolves " + dims_str(shape(k.inputs[0])) + " with " + dims_str(shape(k.inputs[1])) +
                             " into " + dims_str(shape(k.outputs[0]));
    // The rules are stated channels-first: channels-last buffers are read in that order.
    const auto x = to_channels_first(c.layout, shape(k.inputs[0]));
    const auto w = to_channels_first(c.layout, shape(k.inputs[1]));
    const auto o = to_channels_first(c.layout, shape(k.outputs[0]));
    const int64_t in_c = c.transposed ? w[0] : w[1] * c.groups;
    const int64_t out_c = c.transposed ? w[1] * c.groups : w[0];
    if (x[0] != o[0] || x[1] != in_c || o[1] != out_c || in_c % c.groups != 0 || out_c % c.groups != 0) return what;
    for (size_t d = 0; d < c.spatial(); ++d)
      if (w[d + 2] < 1 || o[d + 2] != conv_output_size(c, d, x[d + 2], w[d + 2])) return what;
    // The bias is one value per output channel, in any shape holding exactly those ([O], [O, 1, 1]).
    if (c.has_bias && numel_of(shape(k.inputs[2])) != out_c) return what + " with bias " + dims_str(shape(k.inputs[2]));
    if (c.has_residual && shape(k.inputs.back()) != shape(k.outputs[0]))
      return what + " with residual " + dims_str(shape(k.inputs.back()));
    return "";
  }

  std::string check_pool(const Kernel& k) const {
    const PoolingAttrs& a = k.pooling;
    const std::string what = "pools " + dims_str(shape(k.inputs[0])) + " into " + dims_str(shape(k.outputs[0]));
    const auto x = to_channels_first(a.layout, shape(k.inputs[0]));
    const auto o = to_channels_first(a.layout, shape(k.outputs[0]));
    if (x[0] != o[0] || x[1] != o[1]) return what;
    for (size_t d = 0; d < a.spatial(); ++d)
      if (o[d + 2] != pool_output_size(a, d, x[d + 2])) return what;
    return "";
  }

  std::string check_dot(const Kernel& k) const {
    const auto& l = shape(k.inputs[0]);
    const auto& r = shape(k.inputs[1]);
    const auto& o = shape(k.outputs[0]);
    const size_t nl = l.size(), nr = r.size(), no = o.size();
    const int64_t m = k.dot.transpose_lhs ? l[nl - 1] : l[nl - 2];
    const int64_t kl = k.dot.transpose_lhs ? l[nl - 2] : l[nl - 1];
    const int64_t kr = k.dot.transpose_rhs ? r[nr - 1] : r[nr - 2];
    const int64_t n = k.dot.transpose_rhs ? r[nr - 2] : r[nr - 1];
    const std::string what = "multiplies " + dims_str(l) + " by " + dims_str(r) + " into " + dims_str(o);
    if (kl != kr || o[no - 2] != m || o[no - 1] != n) return what;
    for (size_t i = 0; i + 2 < no; ++i) {
      const int64_t lb = i + nl >= no ? l[i + nl - no] : 1;
      const int64_t rb = i + nr >= no ? r[i + nr - no] : 1;
      if (o[i] != (lb == 1 ? rb : lb) || (rb != 1 && rb != o[i])) return what;
    }
    if (k.dot.has_bias && shape(k.inputs[2]) != std::vector<int64_t>{n}) return what + " with bias " + dims_str(shape(k.inputs[2]));
    return "";
  }

  const Program& p_;
  const std::vector<Tensor>& inputs_;
  const std::vector<int64_t>& slots_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> bytes_;
};

}  // namespace

Status check_run_shapes(const Program& program, const std::vector<Tensor>& inputs, const std::vector<int64_t>& slots) {
  return RunChecker(program, inputs, slots).run();
}

}  // namespace tripy::rt
