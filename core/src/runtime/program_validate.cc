// validate_program: the static half of the runtime's defence against corrupt or hostile files.
// Every index, enum and arity is checked here, once, at load (each kind's own rule:
// kernel_rules.cc); sizes that depend on the input shapes are checked per run by check_run_shapes
// (run_checks.cc). Together they guarantee that a backend indexing by what the Program says stays
// inside its buffers.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kernel_rules.h"
#include "runtime/program.h"
#include "runtime/shape_arith.h"

namespace tripy::rt {
namespace {

bool in_range(int64_t i, size_t n) { return i >= 0 && static_cast<uint64_t>(i) < n; }
bool valid(DType t) { return static_cast<int>(t) < kNumDTypes; }

class Validator {
 public:
  explicit Validator(const Program& p) : p_(p) {}

  Status run() {
    TRIPY_RETURN_IF_ERROR(check_inputs());
    TRIPY_RETURN_IF_ERROR(check_shape_program());
    TRIPY_RETURN_IF_ERROR(check_shape_checks());
    TRIPY_RETURN_IF_ERROR(check_constants());
    TRIPY_RETURN_IF_ERROR(check_buffers());
    TRIPY_RETURN_IF_ERROR(check_outputs());
    for (size_t k = 0; k < p_.kernels.size(); ++k) TRIPY_RETURN_IF_ERROR(check_kernel(k));
    return ok_status();
  }

 private:
  static Status fail(const std::string& what) {
    return data_loss("Invalid executable program: " + what + ".");
  }
  size_t rank_of_input(size_t i) const { return p_.inputs[i].dim_min.size(); }
  size_t rank_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].shape.size(); }
  DType dtype_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].dtype; }
  bool slot_ok(int64_t s) const { return in_range(s, p_.shape_program.size()); }

  Status check_inputs() {
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      const InputSpec& in = p_.inputs[i];
      const std::string where = "input " + std::to_string(i) + " ('" + in.name + "')";
      if (!valid(in.dtype)) return fail(where + " has an invalid dtype");
      if (in.kind > InputSpec::Kind::kShapeValue) return fail(where + " has an invalid kind");
      if (in.kind == InputSpec::Kind::kShapeValue) {
        if (in.dtype != DType::kInt64 || !in.dim_min.empty() || !in.dim_opt.empty() || !in.dim_max.empty() ||
            !in.dim_names.empty())
          return fail(where + " is a shape value, which must be a 0-d int64 tensor");
        if (in.value_min < 0 || in.value_min > in.value_opt || in.value_opt > in.value_max)
          return fail(where + " has value bounds [" + std::to_string(in.value_min) + ", " +
                      std::to_string(in.value_opt) + ", " + std::to_string(in.value_max) +
                      "], which are not 0 <= min <= opt <= max");
        continue;
      }
      const size_t rank = in.dim_min.size();
      if (in.dim_opt.size() != rank || in.dim_max.size() != rank ||
          (!in.dim_names.empty() && in.dim_names.size() != rank))
        return fail(where + " has bounds of different ranks");
      for (size_t d = 0; d < rank; ++d)
        if (in.dim_min[d] < 0 || in.dim_min[d] > in.dim_opt[d] || in.dim_opt[d] > in.dim_max[d])
          return fail(where + " dimension " + std::to_string(d) + " has bounds [" +
                      std::to_string(in.dim_min[d]) + ", " + std::to_string(in.dim_opt[d]) + ", " +
                      std::to_string(in.dim_max[d]) + "], which are not 0 <= min <= opt <= max");
    }
    if (p_.input_shapes.size() != p_.inputs.size())
      return fail("input_shapes has " + std::to_string(p_.input_shapes.size()) +
                  " entries for " + std::to_string(p_.inputs.size()) + " inputs");
    return ok_status();
  }

  // Also evaluates what is known without inputs, so constant buffers can be checked statically.
  Status check_shape_program() {
    using Op = ShapeInstr::Op;
    known_.assign(p_.shape_program.size(), std::nullopt);
    for (size_t i = 0; i < p_.shape_program.size(); ++i) {
      const ShapeInstr& in = p_.shape_program[i];
      const std::string where = "shape instruction " + std::to_string(i);
      if (in.op > Op::kInputValue) return fail(where + " has an invalid opcode");
      if (in.op == Op::kConst) {
        known_[i] = in.a;
      } else if (in.op == Op::kInputValue) {
        if (!in_range(in.a, p_.inputs.size()) || p_.inputs[static_cast<size_t>(in.a)].kind != InputSpec::Kind::kShapeValue)
          return fail(where + " reads the value of input " + std::to_string(in.a) + ", which is not a shape value");
        const InputSpec& spec = p_.inputs[static_cast<size_t>(in.a)];
        if (spec.value_min == spec.value_max) known_[i] = spec.value_min;
      } else if (in.op == Op::kInputDim) {
        if (!in_range(in.a, p_.inputs.size()) || !in_range(in.b, rank_of_input(static_cast<size_t>(in.a))))
          return fail(where + " reads dimension " + std::to_string(in.b) + " of input " +
                      std::to_string(in.a) + ", which does not exist");
        const InputSpec& spec = p_.inputs[static_cast<size_t>(in.a)];
        if (spec.dim_min[static_cast<size_t>(in.b)] == spec.dim_max[static_cast<size_t>(in.b)])
          known_[i] = spec.dim_min[static_cast<size_t>(in.b)];
      } else {
        if (!in_range(in.a, i) || !in_range(in.b, i))
          return fail(where + " uses slots " + std::to_string(in.a) + " and " + std::to_string(in.b) +
                      ", but only earlier slots (< " + std::to_string(i) + ") may be used");
        const auto& a = known_[static_cast<size_t>(in.a)];
        const auto& b = known_[static_cast<size_t>(in.b)];
        if (a && b) known_[i] = apply_shape_op(in.op, *a, *b);
      }
    }
    for (size_t i = 0; i < p_.input_shapes.size(); ++i) {
      if (p_.input_shapes[i].size() != rank_of_input(i))
        return fail("input " + std::to_string(i) + " has rank " + std::to_string(rank_of_input(i)) +
                    " but " + std::to_string(p_.input_shapes[i].size()) + " shape slots");
      for (Slot s : p_.input_shapes[i])
        if (!slot_ok(s)) return fail("input " + std::to_string(i) + " uses missing slot " + std::to_string(s));
    }
    return ok_status();
  }

  Status check_shape_checks() {
    for (size_t i = 0; i < p_.checks.size(); ++i) {
      const ShapeCheck& c = p_.checks[i];
      const std::string where = "shape check " + std::to_string(i);
      if (c.kind > ShapeCheck::Kind::kBroadcast) return fail(where + " has an invalid kind");
      if (!slot_ok(c.a) || !slot_ok(c.b)) return fail(where + " uses a missing slot");
      if (c.source != -1 && !in_range(c.source, p_.sources.size()))
        return fail(where + " refers to missing source " + std::to_string(c.source));
    }
    return ok_status();
  }

  Status check_constants() {
    for (size_t i = 0; i < p_.constants.size(); ++i) {
      const Tensor& t = p_.constants[i];
      const std::string where = "constant " + std::to_string(i);
      int64_t bytes = 0;
      if (!valid(t.dtype())) return fail(where + " has an invalid dtype");
      if (!checked_nbytes(t.shape(), t.dtype(), &bytes)) return fail(where + " has an invalid shape");
      if (bytes > 0 && t.data() == nullptr) return fail(where + " has no data");
    }
    return ok_status();
  }

  Status check_buffers() {
    using Kind = BufferDesc::Kind;
    if (p_.arena_bytes < 0 || p_.arena_bytes > kMaxBytes)
      return fail("arena size " + std::to_string(p_.arena_bytes) + " is out of range");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const BufferDesc& b = p_.buffers[i];
      const std::string where = "buffer " + std::to_string(i);
      if (b.kind > Kind::kAlias) return fail(where + " has an invalid kind");
      if (!valid(b.dtype)) return fail(where + " has an invalid dtype");
      for (Slot s : b.shape)
        if (!slot_ok(s)) return fail(where + " uses missing slot " + std::to_string(s));
      const std::string idx = std::to_string(b.index);
      switch (b.kind) {
        case Kind::kInput: {
          if (!in_range(b.index, p_.inputs.size())) return fail(where + " refers to missing input " + idx);
          const InputSpec& in = p_.inputs[static_cast<size_t>(b.index)];
          if (in.kind != InputSpec::Kind::kTensor)
            return fail(where + " refers to input " + idx + ", a shape value, which kernels cannot read");
          if (b.dtype != in.dtype || b.shape.size() != in.dim_min.size())
            return fail(where + " does not match the dtype and rank of input " + idx);
          break;
        }
        case Kind::kConstant: {
          if (!in_range(b.index, p_.constants.size())) return fail(where + " refers to missing constant " + idx);
          const Tensor& c = p_.constants[static_cast<size_t>(b.index)];
          bool same = b.dtype == c.dtype() && b.shape.size() == c.shape().size();
          for (size_t d = 0; same && d < b.shape.size(); ++d) {
            const auto& k = known_[static_cast<size_t>(b.shape[d])];
            same = !k || *k == c.shape()[d];  // unknown sizes are checked per run
          }
          if (!same) return fail(where + " does not match the dtype and shape of constant " + idx);
          break;
        }
        case Kind::kTemp:
          if (b.offset < 0 || b.offset % 256 != 0 || b.max_bytes < 0 || b.max_bytes > kMaxBytes ||
              b.offset > p_.arena_bytes - b.max_bytes)
            return fail(where + " occupies [" + std::to_string(b.offset) + ", +" +
                        std::to_string(b.max_bytes) + ") which is not an aligned range inside the " +
                        std::to_string(p_.arena_bytes) + "-byte arena");
          break;
        case Kind::kOutput: {
          if (!in_range(b.index, p_.outputs.size()) || p_.outputs[static_cast<size_t>(b.index)] != static_cast<int32_t>(i))
            return fail(where + " claims to be output " + idx + ", but the outputs list disagrees");
          if (b.donor == -1) break;
          // An output in a donated input's memory: that input, of this dtype and rank (the sizes
          // are compared per run), lending its memory to this output alone.
          const std::string donor = std::to_string(b.donor);
          if (!in_range(b.donor, p_.inputs.size()) || !p_.inputs[static_cast<size_t>(b.donor)].donated ||
              p_.inputs[static_cast<size_t>(b.donor)].kind != InputSpec::Kind::kTensor)
            return fail(where + " lives in input " + donor + "'s memory, which is not a donated tensor input");
          const InputSpec& in = p_.inputs[static_cast<size_t>(b.donor)];
          if (b.dtype != in.dtype || b.shape.size() != in.dim_min.size())
            return fail(where + " does not match the dtype and rank of input " + donor + ", whose memory it is");
          for (size_t j = 0; j < i; ++j)
            if (p_.buffers[j].kind == Kind::kOutput && p_.buffers[j].donor == b.donor)
              return fail(where + " lives in input " + donor + "'s memory, as buffer " + std::to_string(j) + " does");
          break;
        }
        case Kind::kAlias:
          if (!in_range(b.index, p_.buffers.size())) return fail(where + " aliases missing buffer " + idx);
          if (b.dtype != p_.buffers[static_cast<size_t>(b.index)].dtype)
            return fail(where + " aliases buffer " + idx + " of another dtype");
          break;
      }
    }
    // Alias chains end at a real buffer: following more links than there are buffers means a cycle.
    roots_.assign(p_.buffers.size(), -1);
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      int32_t at = static_cast<int32_t>(i);
      for (size_t steps = 0; p_.buffers[static_cast<size_t>(at)].kind == Kind::kAlias; ++steps) {
        if (steps > p_.buffers.size()) return fail("buffer " + std::to_string(i) + " is part of an alias cycle");
        at = p_.buffers[static_cast<size_t>(at)].index;
      }
      roots_[i] = at;
    }
    return ok_status();
  }

  Status check_outputs() {
    if (p_.output_names.size() != p_.outputs.size())
      return fail(std::to_string(p_.outputs.size()) + " outputs but " +
                  std::to_string(p_.output_names.size()) + " output names");
    for (size_t i = 0; i < p_.outputs.size(); ++i) {
      const int32_t id = p_.outputs[i];
      if (!in_range(id, p_.buffers.size()) || p_.buffers[static_cast<size_t>(id)].kind != BufferDesc::Kind::kOutput ||
          p_.buffers[static_cast<size_t>(id)].index != static_cast<int32_t>(i))
        return fail("output " + std::to_string(i) + " is not an output buffer with that number");
      bool written = false;
      for (const Kernel& k : p_.kernels)
        for (int32_t o : k.outputs) written = written || (in_range(o, roots_.size()) && roots_[static_cast<size_t>(o)] == id);
      if (!written) return fail("output " + std::to_string(i) + " is never written by a kernel");
    }
    return ok_status();
  }

  Status check_kernel(size_t k) {
    const Kernel& kn = p_.kernels[k];
    const std::string where = "kernel " + std::to_string(k) + " ('" + kn.name + "')";
    auto bad = [&](const std::string& what) { return fail(where + " " + what); };
    if (static_cast<size_t>(kn.kind) >= kNumKernelKinds) return bad("has an invalid kind");
    if (kn.source != -1 && !in_range(kn.source, p_.sources.size())) return bad("refers to a missing source");
    for (int32_t b : kn.inputs)
      if (!in_range(b, p_.buffers.size())) return bad("reads missing buffer " + std::to_string(b));
    for (int32_t b : kn.outputs) {
      if (!in_range(b, p_.buffers.size())) return bad("writes missing buffer " + std::to_string(b));
      const BufferDesc& root = p_.buffers[static_cast<size_t>(roots_[static_cast<size_t>(b)])];
      // Inputs are read-only, except donated ones, which only update_slice writes (in place).
      const bool donated = root.kind == BufferDesc::Kind::kInput && kn.kind == KernelKind::kUpdateSlice &&
                           p_.inputs[static_cast<size_t>(root.index)].donated;
      if (root.kind != BufferDesc::Kind::kTemp && root.kind != BufferDesc::Kind::kOutput && !donated)
        return bad("writes buffer " + std::to_string(b) + ", which is an input or a constant");
    }
    // The kind's own rule (kernel_rules.cc).
    const std::string why = kernel_load_error(p_, kn);
    return why.empty() ? ok_status() : bad(why);
  }

  const Program& p_;
  std::vector<std::optional<int64_t>> known_;  // slot values that do not depend on the inputs
  std::vector<int32_t> roots_;                 // each buffer's alias root
};

}  // namespace

Status validate_program(const Program& program) { return Validator(program).run(); }

Status check_profiles_agree(const std::vector<const Program*>& programs) {
  auto kind_name = [](const InputSpec& in) { return in.kind == InputSpec::Kind::kShapeValue ? "shape value" : "tensor"; };
  const Program& first = *programs.front();
  for (size_t p = 1; p < programs.size(); ++p) {
    const Program& other = *programs[p];
    const std::string profile = "Optimization profile " + std::to_string(p);
    auto differ = [&](const std::string& what) {
      return invalid_argument(profile + " " + what + ": every profile of an executable takes the same inputs and "
                              "returns the same outputs.");
    };
    if (other.inputs.size() != first.inputs.size())
      return differ("has " + std::to_string(other.inputs.size()) + " input(s), profile 0 has " +
                    std::to_string(first.inputs.size()));
    for (size_t i = 0; i < first.inputs.size(); ++i) {
      const InputSpec &a = first.inputs[i], &b = other.inputs[i];
      const std::string input = "input " + std::to_string(i) + " ('" + b.name + "')";
      if (a.name != b.name) return differ("names input " + std::to_string(i) + " '" + b.name + "', profile 0 '" + a.name + "'");
      if (a.kind != b.kind) return differ("takes " + input + " as a " + kind_name(b) + ", profile 0 as a " + kind_name(a));
      if (a.dtype != b.dtype)
        return differ("takes " + input + " as " + std::string(dtype_name(b.dtype)) + ", profile 0 as " +
                      std::string(dtype_name(a.dtype)));
      if (a.dim_min.size() != b.dim_min.size())
        return differ("takes " + input + " with rank " + std::to_string(b.dim_min.size()) + ", profile 0 with rank " +
                      std::to_string(a.dim_min.size()));
      if (a.donated != b.donated) return differ(std::string(b.donated ? "donates " : "does not donate ") + input);
    }
    if (other.output_names != first.output_names)
      return differ("has " + std::to_string(other.output_names.size()) + " output(s) named otherwise than profile 0's");
  }
  return ok_status();
}

}  // namespace tripy::rt
