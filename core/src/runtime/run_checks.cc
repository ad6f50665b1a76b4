// check_run_shapes: sizes that only exist once the input shapes are known, checked per run.
// O(buffers + kernels x rank) integer comparisons: negligible beside the kernels themselves.
#include "runtime/run_checks.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "runtime/kernel_rules.h"
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
      const std::string why = kernel_run_error(p_, k, shapes_, slots_);  // the kind's rule (kernel_rules.cc)
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
