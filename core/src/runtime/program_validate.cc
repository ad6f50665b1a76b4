// validate_program: the static half of the runtime's defence against corrupt or hostile files.
// Every index, enum and arity is checked here, once, at load; sizes that depend on the input
// shapes are checked per run by check_run_shapes (run_checks.cc). Together they guarantee that a
// backend indexing by what the Program says stays inside its buffers.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/fused_analysis.h"
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
    // The kind's own rule: one overload of check() per attribute struct, so a kind without one
    // fails to compile.
    return visit_kind_attrs(kn, [&](const auto& attrs) { return check(kn, attrs, bad); });
  }

  bool arity(const Kernel& kn, size_t ins, size_t outs) const { return kn.inputs.size() == ins && kn.outputs.size() == outs; }
  bool same_dtype(const Kernel& kn) const { return dtype_of(kn.inputs[0]) == dtype_of(kn.outputs[0]); }

  template <typename Bad>
  Status check(const Kernel& kn, const DotAttrs& dot, const Bad& bad) {
    if (dot.activation > Activation::kGelu) return bad("has an invalid activation");
    if (!arity(kn, dot.has_bias ? 3 : 2, 1)) return bad("needs 2 inputs (3 with a bias) and 1 output");
    const size_t l = rank_of(kn.inputs[0]), r = rank_of(kn.inputs[1]);
    if (l < 2 || r < 2 || rank_of(kn.outputs[0]) != (l > r ? l : r))
      return bad("has operand ranks " + std::to_string(l) + " and " + std::to_string(r) + " and result rank " +
                 std::to_string(rank_of(kn.outputs[0])));
    if (dtype_of(kn.inputs[0]) != dtype_of(kn.inputs[1])) return bad("multiplies operands of different dtypes");
    const DType in = dtype_of(kn.inputs[0]), out = dtype_of(kn.outputs[0]);
    if (out != in && out != dot_accumulator_dtype(in))
      return bad("writes " + std::string(dtype_name(out)) + " from " + std::string(dtype_name(in)) + " operands");
    if (dot.has_bias && dtype_of(kn.inputs[2]) != out) return bad("has a bias of another dtype than its result");
    if (dot.has_bias && rank_of(kn.inputs[2]) != 1) return bad("has a bias that is not 1-D");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const TransposeAttrs& t, const Bad& bad) {
    if (!arity(kn, 1, 1) || !same_dtype(kn)) return bad("needs 1 input and 1 output of one dtype");
    const size_t rank = rank_of(kn.inputs[0]);
    if (t.perm.size() != rank || rank_of(kn.outputs[0]) != rank) return bad("has a permutation of the wrong rank");
    std::vector<bool> seen(rank, false);
    for (int64_t d : t.perm) {
      if (!in_range(d, rank) || seen[static_cast<size_t>(d)]) return bad("has an invalid permutation");
      seen[static_cast<size_t>(d)] = true;
    }
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const SliceAttrs& s, const Bad& bad) {
    if (!arity(kn, 1, 1) || !same_dtype(kn)) return bad("needs 1 input and 1 output of one dtype");
    const size_t rank = rank_of(kn.inputs[0]);
    if (s.starts.size() != rank || s.steps.size() != rank || rank_of(kn.outputs[0]) != rank)
      return bad("has starts/steps of the wrong rank");
    for (size_t d = 0; d < rank; ++d)
      if (!slot_ok(s.starts[d]) || !slot_ok(s.steps[d])) return bad("uses a missing slot");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const ConcatenateAttrs& c, const Bad& bad) {
    if (kn.inputs.empty() || kn.outputs.size() != 1) return bad("needs inputs and 1 output");
    const size_t rank = rank_of(kn.outputs[0]);
    for (int32_t b : kn.inputs)
      if (rank_of(b) != rank || dtype_of(b) != dtype_of(kn.outputs[0])) return bad("joins buffers of different ranks or dtypes");
    if (!in_range(c.axis, rank)) return bad("has axis " + std::to_string(c.axis) + " out of range");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const GatherAttrs& g, const Bad& bad) {
    if (!arity(kn, 2, 1) || !same_dtype(kn)) return bad("needs 2 inputs and 1 output of the data's dtype");
    const size_t data = rank_of(kn.inputs[0]), index = rank_of(kn.inputs[1]);
    const DType it = dtype_of(kn.inputs[1]);
    if (it != DType::kInt32 && it != DType::kInt64) return bad("has indices that are not int32 or int64");
    if (!in_range(g.axis, data) || rank_of(kn.outputs[0]) != data - 1 + index)
      return bad("has an axis or a result rank that does not fit its operands");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const CopyAttrs&, const Bad& bad) {
    if (!arity(kn, 1, 1) || !same_dtype(kn)) return bad("needs 1 input and 1 output of one dtype");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const UpdateSliceAttrs& u, const Bad& bad) {
    if (!arity(kn, 3, 1) || !same_dtype(kn) || dtype_of(kn.inputs[1]) != dtype_of(kn.outputs[0]))
      return bad("needs an operand, an update and a start, and 1 output, of one dtype");
    const DType st = dtype_of(kn.inputs[2]);
    if ((st != DType::kInt32 && st != DType::kInt64) || rank_of(kn.inputs[2]) > 1)
      return bad("has a start that is not an int32 or int64 scalar");
    const size_t rank = rank_of(kn.inputs[0]);
    if (rank_of(kn.inputs[1]) != rank || rank_of(kn.outputs[0]) != rank || !in_range(u.axis, rank))
      return bad("has an axis or ranks that do not fit its operands");
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const PluginAttrs& p, const Bad& bad) {
    // Backends hand a plugin at most kMaxPluginInputs inputs of rank <= kMaxPluginRank.
    if (kn.inputs.size() > kMaxPluginInputs || kn.outputs.size() != 1)
      return bad("needs at most " + std::to_string(kMaxPluginInputs) + " inputs and 1 output");
    for (int32_t b : kn.inputs)
      if (rank_of(b) > kMaxPluginRank) return bad("reads a buffer of rank above " + std::to_string(kMaxPluginRank));
    if (rank_of(kn.outputs[0]) > kMaxPluginRank) return bad("writes a buffer of rank above 8");
    if (p.name.empty()) return bad("names no plugin");
    if (p.block < 1 || p.block > 1024) return bad("has a CUDA block size outside [1, 1024]");
    return ok_status();
  }

  // Static half of the attention rule: arity, dtypes, ranks and layouts. The sizes are checked
  // per run (attention_shape_error), so together no index leaves its buffer.
  template <typename Bad>
  Status check(const Kernel& kn, const AttentionAttrs& a, const Bad& bad) {
    if (a.mask > MaskKind::kCausalOffset) return bad("has an invalid mask kind");
    const bool masked = a.mask != MaskKind::kNone;
    if (kn.inputs.size() != (masked ? 4u : 3u) || kn.outputs.size() != 1)
      return bad(masked ? "needs q, k, v, a mask and 1 output" : "needs q, k, v and 1 output");
    if (!std::isfinite(a.scale)) return bad("has a scale that is not finite");
    const DType t = dtype_of(kn.inputs[0]);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return bad("attends over a non-float dtype");
    if (dtype_of(kn.inputs[1]) != t || dtype_of(kn.inputs[2]) != t || dtype_of(kn.outputs[0]) != t)
      return bad("has q, k, v and out of different dtypes");
    if (a.mask == MaskKind::kCausalOffset) {
      // One int32 or int64 element, read whole: no head window; causal would be a second rule.
      const DType o = dtype_of(kn.inputs[3]);
      if (o != DType::kInt32 && o != DType::kInt64) return bad("has a causal offset that is not int32 or int64");
      if (a.causal) return bad("has both causal and a causal offset");
      if (a.heads[AttentionAttrs::kMask] != AttentionAttrs::HeadWindow{})
        return bad("has a head window on its causal offset");
    } else if (masked && dtype_of(kn.inputs[3]) != (a.mask == MaskKind::kBool ? DType::kBool : t)) {
      return bad("has a mask whose dtype does not fit its kind");
    }
    for (int32_t b : kn.inputs)
      if (rank_of(b) != 4) return bad("has an operand that is not 4-D");
    if (rank_of(kn.outputs[0]) != 4) return bad("has an output that is not 4-D");
    for (const AttentionAttrs::Perm& p : a.perms) {
      bool seen[4] = {false, false, false, false};
      for (int8_t d : p) {
        if (d < 0 || d > 3 || seen[d]) return bad("has an operand layout that is not a permutation of 4 dims");
        seen[d] = true;
      }
    }
    for (const AttentionAttrs::HeadWindow& w : a.heads)
      if (w != AttentionAttrs::HeadWindow{} &&
          (w.start < 0 || w.count < 1 || w.start > (int64_t{1} << 40) || w.count > (int64_t{1} << 40)))
        return bad("has a head window that is empty, starts before 0 or is past any buffer");
    return ok_status();
  }

  // Ranks, dtypes and attribute ranges; sizes are checked per run (check_run_shapes).
  template <typename Bad>
  Status check(const Kernel& kn, const ConvolutionAttrs& c, const Bad& bad) {
    if (c.activation > Activation::kSilu) return bad("has an invalid activation");
    if (c.layout > Layout::kChannelsLast) return bad("has an invalid layout");
    if (!(kn.inputs.size() == 2u + c.has_bias + c.has_residual && kn.outputs.size() == 1))
      return bad("needs an input, a weight, the bias and residual it declares, and 1 output");
    const size_t rank = rank_of(kn.inputs[0]), nd = rank - 2;
    if (rank < 3 || nd > kMaxConvSpatialDims || rank_of(kn.inputs[1]) != rank || rank_of(kn.outputs[0]) != rank)
      return bad("needs input, weight and output of one rank with 1 to 3 spatial dims");
    if (c.has_residual && rank_of(kn.inputs.back()) != rank) return bad("has a residual of another rank");
    const DType dt = dtype_of(kn.outputs[0]);
    if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16) return bad("is not a float convolution");
    for (int32_t b : kn.inputs)
      if (dtype_of(b) != dt) return bad("mixes dtypes");
    if (c.stride.size() != nd || c.pad_before.size() != nd || c.pad_after.size() != nd || c.dilation.size() != nd ||
        c.output_padding.size() != nd)
      return bad("needs stride, padding, dilation and output padding for each of its " + std::to_string(nd) +
                 " spatial dims");
    constexpr int64_t kLimit = int64_t{1} << 30;
    if (c.groups < 1 || c.groups > kLimit) return bad("has groups out of range");
    for (size_t d = 0; d < nd; ++d) {
      const bool ok = c.stride[d] >= 1 && c.stride[d] <= kLimit && c.dilation[d] >= 1 && c.dilation[d] <= kLimit &&
                      c.pad_before[d] >= 0 && c.pad_before[d] <= kLimit && c.pad_after[d] >= 0 &&
                      c.pad_after[d] <= kLimit && c.output_padding[d] >= 0 &&
                      (c.transposed ? c.output_padding[d] < std::max(c.stride[d], c.dilation[d]) : c.output_padding[d] == 0);
      if (!ok) return bad("has stride, padding, dilation or output padding out of range in spatial dim " + std::to_string(d));
    }
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const PoolingAttrs& a, const Bad& bad) {
    if (a.kind > PoolingAttrs::Kind::kAvg) return bad("has an invalid pooling kind");
    if (a.layout > Layout::kChannelsLast) return bad("has an invalid layout");
    if (kn.inputs.size() != 1 || kn.outputs.size() != 1) return bad("needs 1 input and 1 output");
    const size_t rank = rank_of(kn.inputs[0]), nd = rank - 2;
    if (rank < 3 || nd > kMaxConvSpatialDims || rank_of(kn.outputs[0]) != rank)
      return bad("needs input and output of one rank with 1 to 3 spatial dims");
    const DType dt = dtype_of(kn.outputs[0]);
    if (dtype_of(kn.inputs[0]) != dt) return bad("mixes dtypes");
    const bool floating = dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16;
    const bool integer = dt == DType::kInt8 || dt == DType::kInt32 || dt == DType::kInt64;
    if (!floating && !(integer && a.kind == PoolingAttrs::Kind::kMax)) return bad("pools an unsupported dtype");
    if (a.window.size() != nd || a.stride.size() != nd || a.pad_before.size() != nd || a.pad_after.size() != nd)
      return bad("needs window, stride and padding for each of its " + std::to_string(nd) + " spatial dims");
    constexpr int64_t kLimit = int64_t{1} << 30;
    for (size_t d = 0; d < nd; ++d) {
      const bool ok = a.window[d] >= 1 && a.window[d] <= kLimit && a.stride[d] >= 1 && a.stride[d] <= kLimit &&
                      a.pad_before[d] >= 0 && a.pad_before[d] <= kLimit && a.pad_after[d] >= 0 &&
                      a.pad_after[d] <= kLimit;
      if (!ok) return bad("has window, stride or padding out of range in spatial dim " + std::to_string(d));
    }
    return ok_status();
  }

  template <typename Bad>
  Status check(const Kernel& kn, const SampleAttrs& a, const Bad& bad) {
    if (!std::isfinite(a.temperature) || a.temperature < 0) return bad("has a temperature that is not finite and >= 0");
    if (a.top_k < 0) return bad("has a negative top_k");
    if (!(a.top_p > 0 && a.top_p <= 1)) return bad("has a top_p outside (0, 1]");
    if (!arity(kn, 2, 1)) return bad("needs logits, a key and 1 output");
    const DType t = dtype_of(kn.inputs[0]);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return bad("samples non-float logits");
    if (dtype_of(kn.inputs[1]) != DType::kInt64 || rank_of(kn.inputs[1]) != 1) return bad("has a key that is not 1-D int64");
    if (dtype_of(kn.outputs[0]) != DType::kInt32 || rank_of(kn.inputs[0]) != rank_of(kn.outputs[0]) + 1)
      return bad("needs int32 output of the logits' rank minus one");
    return ok_status();
  }

  // The analysis every consumer of fused programs shares (fused_analysis.cc).
  template <typename Bad>
  Status check(const Kernel& kn, const FusedProgram& fused, const Bad& bad) {
    for (Slot s : fused.domain)
      if (!slot_ok(s)) return bad("has a domain with a missing slot");
    for (const FusedProgram::Window& w : fused.input_windows)
      for (size_t d = 0; d < w.starts.size() && d < w.sizes.size(); ++d)
        if (!slot_ok(w.starts[d]) || !slot_ok(w.sizes[d])) return bad("has a window with a missing slot");
    StatusOr<FusedAnalysis> an = analyze_fused_program(p_, kn);
    return an.ok() ? ok_status() : bad(an.status().message());
  }

  const Program& p_;
  std::vector<std::optional<int64_t>> known_;  // slot values that do not depend on the inputs
  std::vector<int32_t> roots_;                 // each buffer's alias root
};

}  // namespace

Status validate_program(const Program& program) { return Validator(program).run(); }

}  // namespace tripy::rt
