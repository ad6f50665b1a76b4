// Each kernel kind's rules on its buffers, side by side (kernel_rules.h): load(), what
// validate_program checks once (arity, ranks, dtypes, attribute ranges), and run(), what
// check_run_shapes checks on every run once the sizes are known. Together they guarantee that a
// backend indexing by what the Program says stays inside its buffers. Enum fields out of their
// names' range are refused before load() for every kind, from the field lists (fields.h).
#include "runtime/kernel_rules.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/fused_analysis.h"
#include "runtime/shape_arith.h"

namespace tripy::rt {
namespace {

bool in_range(int64_t i, size_t n) { return i >= 0 && static_cast<uint64_t>(i) < n; }

// One kernel's view of the program: its buffers' ranks and dtypes (load), and their shapes and
// the slots' values (run: `shapes` and `slots` set). One load() and one run() per attribute
// struct, kind by kind in kernel_kinds.h's order: a kind without them fails to compile.
class KernelRules {
 public:
  KernelRules(const Program& p, const Kernel& k, const std::vector<std::vector<int64_t>>* shapes = nullptr,
              const std::vector<int64_t>* slots = nullptr)
      : p_(p), k_(k), shapes_(shapes), slots_(slots) {}

  // The analysis every consumer of fused programs shares (fused_analysis.cc).
  std::string load(const FusedProgram& fused) const {
    for (Slot s : fused.domain)
      if (!slot_ok(s)) return "has a domain with a missing slot";
    for (const FusedProgram::Window& w : fused.input_windows)
      for (size_t d = 0; d < w.starts.size() && d < w.sizes.size(); ++d)
        if (!slot_ok(w.starts[d]) || !slot_ok(w.sizes[d])) return "has a window with a missing slot";
    StatusOr<FusedAnalysis> an = analyze_fused_program(p_, k_);
    return an.ok() ? std::string() : an.status().message();
  }

  std::string run(const FusedProgram&) const {
    const FusedProgram& f = k_.fused;
    std::vector<int64_t> domain;
    for (Slot s : f.domain) domain.push_back(slot(s));
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      std::vector<int64_t> in = shape(k_.inputs[i]);
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
    for (int32_t b : k_.outputs) {
      const auto& out = shape(b);
      if (!std::equal(out.begin(), out.end(), domain.begin()))
        return "writes " + dims_str(out) + " over the domain " + dims_str(domain);
    }
    return "";
  }

  std::string load(const DotAttrs& dot) const {
    if (dot.activation > Activation::kGelu) return "has an invalid activation";
    if (!arity(dot.has_bias ? 3 : 2, 1)) return "needs 2 inputs (3 with a bias) and 1 output";
    const size_t l = rank_of(k_.inputs[0]), r = rank_of(k_.inputs[1]);
    if (l < 2 || r < 2 || rank_of(k_.outputs[0]) != (l > r ? l : r))
      return "has operand ranks " + std::to_string(l) + " and " + std::to_string(r) + " and result rank " +
             std::to_string(rank_of(k_.outputs[0]));
    if (dtype_of(k_.inputs[0]) != dtype_of(k_.inputs[1])) return "multiplies operands of different dtypes";
    const DType in = dtype_of(k_.inputs[0]), out = dtype_of(k_.outputs[0]);
    if (!dot_kernel_writes(in, out))
      return "writes " + std::string(dtype_name(out)) + " from " + std::string(dtype_name(in)) + " operands";
    if (!(std::abs(dot.scale) < 1e30))  // finite (NaN fails too)
      return "has a scale out of range";
    if (dot.scale != 1.0 && (in != DType::kFloat8E4M3 || dot.has_bias || dot.activation != Activation::kNone))
      return "scales the sum of " + std::string(dtype_name(in)) + " operands or before an epilogue";
    if (dot.has_bias && dtype_of(k_.inputs[2]) != out) return "has a bias of another dtype than its result";
    if (dot.has_bias && rank_of(k_.inputs[2]) != 1) return "has a bias that is not 1-D";
    return "";
  }

  std::string run(const DotAttrs&) const {
    const auto& l = shape(k_.inputs[0]);
    const auto& r = shape(k_.inputs[1]);
    const auto& o = shape(k_.outputs[0]);
    const size_t nl = l.size(), nr = r.size(), no = o.size();
    const int64_t m = k_.dot.transpose_lhs ? l[nl - 1] : l[nl - 2];
    const int64_t kl = k_.dot.transpose_lhs ? l[nl - 2] : l[nl - 1];
    const int64_t kr = k_.dot.transpose_rhs ? r[nr - 1] : r[nr - 2];
    const int64_t n = k_.dot.transpose_rhs ? r[nr - 2] : r[nr - 1];
    const std::string what = "multiplies " + dims_str(l) + " by " + dims_str(r) + " into " + dims_str(o);
    if (kl != kr || o[no - 2] != m || o[no - 1] != n) return what;
    for (size_t i = 0; i + 2 < no; ++i) {
      const int64_t lb = i + nl >= no ? l[i + nl - no] : 1;
      const int64_t rb = i + nr >= no ? r[i + nr - no] : 1;
      if (o[i] != (lb == 1 ? rb : lb) || (rb != 1 && rb != o[i])) return what;
    }
    if (k_.dot.has_bias && shape(k_.inputs[2]) != std::vector<int64_t>{n}) return what + " with bias " + dims_str(shape(k_.inputs[2]));
    return "";
  }

  std::string load(const TransposeAttrs& t) const {
    if (!arity(1, 1) || !same_dtype()) return "needs 1 input and 1 output of one dtype";
    const size_t rank = rank_of(k_.inputs[0]);
    if (t.perm.size() != rank || rank_of(k_.outputs[0]) != rank) return "has a permutation of the wrong rank";
    std::vector<bool> seen(rank, false);
    for (int64_t d : t.perm) {
      if (!in_range(d, rank) || seen[static_cast<size_t>(d)]) return "has an invalid permutation";
      seen[static_cast<size_t>(d)] = true;
    }
    return "";
  }

  std::string run(const TransposeAttrs& t) const {
    const auto& in = shape(k_.inputs[0]);
    const auto& out = shape(k_.outputs[0]);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != in[static_cast<size_t>(t.perm[i])]) return "transposes " + dims_str(in) + " into " + dims_str(out);
    return "";
  }

  std::string load(const SliceAttrs& s) const {
    if (!arity(1, 1) || !same_dtype()) return "needs 1 input and 1 output of one dtype";
    const size_t rank = rank_of(k_.inputs[0]);
    if (s.starts.size() != rank || s.steps.size() != rank || rank_of(k_.outputs[0]) != rank)
      return "has starts/steps of the wrong rank";
    for (size_t d = 0; d < rank; ++d)
      if (!slot_ok(s.starts[d]) || !slot_ok(s.steps[d])) return "uses a missing slot";
    return "";
  }

  std::string run(const SliceAttrs& s) const {
    const auto& in = shape(k_.inputs[0]);
    const auto& out = shape(k_.outputs[0]);
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

  std::string load(const ConcatenateAttrs& c) const {
    if (k_.inputs.empty() || k_.outputs.size() != 1) return "needs inputs and 1 output";
    const size_t rank = rank_of(k_.outputs[0]);
    for (int32_t b : k_.inputs)
      if (rank_of(b) != rank || dtype_of(b) != dtype_of(k_.outputs[0])) return "joins buffers of different ranks or dtypes";
    if (!in_range(c.axis, rank)) return "has axis " + std::to_string(c.axis) + " out of range";
    return "";
  }

  std::string run(const ConcatenateAttrs& c) const {
    const auto& out = shape(k_.outputs[0]);
    const size_t axis = static_cast<size_t>(c.axis);
    int64_t total = 0;
    for (int32_t b : k_.inputs) {
      const auto& in = shape(b);
      for (size_t d = 0; d < out.size(); ++d)
        if (d != axis && in[d] != out[d]) return "joins " + dims_str(in) + " into " + dims_str(out);
      total += in[axis];  // each at most kMaxBytes: no overflow
    }
    return total == out[axis] ? "" : "joins sizes that do not add up to " + dims_str(out);
  }

  std::string load(const GatherAttrs& g) const {
    if (!arity(2, 1) || !same_dtype()) return "needs 2 inputs and 1 output of the data's dtype";
    const size_t data = rank_of(k_.inputs[0]), index = rank_of(k_.inputs[1]);
    const DType it = dtype_of(k_.inputs[1]);
    if (it != DType::kInt32 && it != DType::kInt64) return "has indices that are not int32 or int64";
    if (!in_range(g.axis, data) || rank_of(k_.outputs[0]) != data - 1 + index)
      return "has an axis or a result rank that does not fit its operands";
    return "";
  }

  std::string run(const GatherAttrs& g) const {
    const auto& data = shape(k_.inputs[0]);
    const auto& index = shape(k_.inputs[1]);
    std::vector<int64_t> want(data.begin(), data.begin() + g.axis);
    want.insert(want.end(), index.begin(), index.end());
    want.insert(want.end(), data.begin() + g.axis + 1, data.end());
    return want == shape(k_.outputs[0]) ? "" : "gathers into " + dims_str(shape(k_.outputs[0])) + " instead of " + dims_str(want);
  }

  std::string load(const CopyAttrs&) const {
    if (!arity(1, 1) || !same_dtype()) return "needs 1 input and 1 output of one dtype";
    return "";
  }

  std::string run(const CopyAttrs&) const {
    return numel_of(shape(k_.inputs[0])) == numel_of(shape(k_.outputs[0]))
               ? ""
               : "copies " + dims_str(shape(k_.inputs[0])) + " into " + dims_str(shape(k_.outputs[0]));
  }

  // Static half of the attention rule: arity, dtypes, ranks and layouts. The sizes are checked
  // per run (attention_shape_error), so together no index leaves its buffer.
  std::string load(const AttentionAttrs& a) const {
    const bool masked = a.mask != MaskKind::kNone;
    if (k_.inputs.size() != (masked ? 4u : 3u) || k_.outputs.size() != 1)
      return masked ? "needs q, k, v, a mask and 1 output" : "needs q, k, v and 1 output";
    if (!std::isfinite(a.scale)) return "has a scale that is not finite";
    const DType t = dtype_of(k_.inputs[0]);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return "attends over a non-float dtype";
    if (dtype_of(k_.inputs[1]) != t || dtype_of(k_.inputs[2]) != t || dtype_of(k_.outputs[0]) != t)
      return "has q, k, v and out of different dtypes";
    if (a.mask == MaskKind::kCausalOffset) {
      // One int32 or int64 element, read whole: no head window; causal would be a second rule.
      const DType o = dtype_of(k_.inputs[3]);
      if (o != DType::kInt32 && o != DType::kInt64) return "has a causal offset that is not int32 or int64";
      if (a.causal) return "has both causal and a causal offset";
      if (a.heads[AttentionAttrs::kMask] != AttentionAttrs::HeadWindow{})
        return "has a head window on its causal offset";
    } else if (masked && dtype_of(k_.inputs[3]) != (a.mask == MaskKind::kBool ? DType::kBool : t)) {
      return "has a mask whose dtype does not fit its kind";
    }
    for (int32_t b : k_.inputs)
      if (rank_of(b) != 4) return "has an operand that is not 4-D";
    if (rank_of(k_.outputs[0]) != 4) return "has an output that is not 4-D";
    for (const AttentionAttrs::Perm& p : a.perms) {
      bool seen[4] = {false, false, false, false};
      for (int8_t d : p) {
        if (d < 0 || d > 3 || seen[d]) return "has an operand layout that is not a permutation of 4 dims";
        seen[d] = true;
      }
    }
    for (const AttentionAttrs::HeadWindow& w : a.heads)
      if (w != AttentionAttrs::HeadWindow{} &&
          (w.start < 0 || w.count < 1 || w.start > (int64_t{1} << 40) || w.count > (int64_t{1} << 40)))
        return "has a head window that is empty, starts before 0 or is past any buffer";
    return "";
  }

  std::string run(const AttentionAttrs& a) const {
    std::vector<std::vector<int64_t>> shapes;
    for (int32_t b : k_.inputs) shapes.push_back(shape(b));
    shapes.push_back(shape(k_.outputs[0]));
    return attention_shape_error(a, shapes);
  }

  // Ranks, dtypes and attribute ranges; sizes are checked per run (below).
  std::string load(const ConvolutionAttrs& c) const {
    if (!(k_.inputs.size() == 2u + c.has_bias + c.has_residual && k_.outputs.size() == 1))
      return "needs an input, a weight, the bias and residual it declares, and 1 output";
    const size_t rank = rank_of(k_.inputs[0]), nd = rank - 2;
    if (rank < 3 || nd > kMaxConvSpatialDims || rank_of(k_.inputs[1]) != rank || rank_of(k_.outputs[0]) != rank)
      return "needs input, weight and output of one rank with 1 to 3 spatial dims";
    if (c.has_residual && rank_of(k_.inputs.back()) != rank) return "has a residual of another rank";
    const DType dt = dtype_of(k_.outputs[0]);
    if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16) return "is not a float convolution";
    for (int32_t b : k_.inputs)
      if (dtype_of(b) != dt) return "mixes dtypes";
    return conv_attrs_error(c, nd);
  }

  // The output's shape follows from the input's, the weight's and the attributes exactly, so a
  // kernel that walks the output and reads the input where the formula says stays inside both.
  std::string run(const ConvolutionAttrs&) const {
    const ConvolutionAttrs& c = k_.convolution;
    const std::string what = "convolves " + dims_str(shape(k_.inputs[0])) + " with " + dims_str(shape(k_.inputs[1])) +
                             " into " + dims_str(shape(k_.outputs[0]));
    // The rules are stated channels-first: channels-last buffers are read in that order.
    const auto x = to_channels_first(c.layout, shape(k_.inputs[0]));
    const auto w = to_channels_first(c.layout, shape(k_.inputs[1]));
    const auto o = to_channels_first(c.layout, shape(k_.outputs[0]));
    const int64_t in_c = c.transposed ? w[0] : w[1] * c.groups;
    const int64_t out_c = c.transposed ? w[1] * c.groups : w[0];
    if (x[0] != o[0] || x[1] != in_c || o[1] != out_c || in_c % c.groups != 0 || out_c % c.groups != 0) return what;
    for (size_t d = 0; d < c.spatial(); ++d)
      if (w[d + 2] < 1 || o[d + 2] != conv_output_size(c, d, x[d + 2], w[d + 2])) return what;
    // The bias is one value per output channel, in any shape holding exactly those ([O], [O, 1, 1]).
    if (c.has_bias && numel_of(shape(k_.inputs[2])) != out_c) return what + " with bias " + dims_str(shape(k_.inputs[2]));
    if (c.has_residual && shape(k_.inputs.back()) != shape(k_.outputs[0]))
      return what + " with residual " + dims_str(shape(k_.inputs.back()));
    return "";
  }

  std::string load(const UpdateSliceAttrs& u) const {
    if (!arity(3, 1) || !same_dtype() || dtype_of(k_.inputs[1]) != dtype_of(k_.outputs[0]))
      return "needs an operand, an update and a start, and 1 output, of one dtype";
    const DType st = dtype_of(k_.inputs[2]);
    if ((st != DType::kInt32 && st != DType::kInt64) || rank_of(k_.inputs[2]) > 1)
      return "has a start that is not an int32 or int64 scalar";
    const size_t rank = rank_of(k_.inputs[0]);
    if (rank_of(k_.inputs[1]) != rank || rank_of(k_.outputs[0]) != rank || !in_range(u.axis, rank) || u.row_offset < 0)
      return "has an axis, ranks or a row offset that do not fit its operands";
    return "";
  }

  std::string run(const UpdateSliceAttrs& u) const {
    const auto& in = shape(k_.inputs[0]);
    const auto& up = shape(k_.inputs[1]);
    if (shape(k_.outputs[0]) != in) return "updates " + dims_str(in) + " into " + dims_str(shape(k_.outputs[0]));
    if (numel_of(shape(k_.inputs[2])) != 1) return "has a start of shape " + dims_str(shape(k_.inputs[2]));
    return update_slice_shape_error(u, in, up);
  }

  std::string load(const PluginAttrs& p) const {
    // Backends hand a plugin at most kMaxPluginInputs inputs of rank <= kMaxPluginRank.
    if (k_.inputs.size() > kMaxPluginInputs || k_.outputs.size() != 1)
      return "needs at most " + std::to_string(kMaxPluginInputs) + " inputs and 1 output";
    for (int32_t b : k_.inputs)
      if (rank_of(b) > kMaxPluginRank) return "reads a buffer of rank above " + std::to_string(kMaxPluginRank);
    if (rank_of(k_.outputs[0]) > kMaxPluginRank) return "writes a buffer of rank above 8";
    if (p.name.empty()) return "names no plugin";
    if (p.block < 1 || p.block > 1024) return "has a CUDA block size outside [1, 1024]";
    return "";
  }

  std::string run(const PluginAttrs&) const { return ""; }  // the plugin's rule gave the shapes

  std::string load(const PoolingAttrs& a) const {
    if (k_.inputs.size() != 1 || k_.outputs.size() != 1) return "needs 1 input and 1 output";
    const size_t rank = rank_of(k_.inputs[0]), nd = rank - 2;
    if (rank < 3 || nd > kMaxConvSpatialDims || rank_of(k_.outputs[0]) != rank)
      return "needs input and output of one rank with 1 to 3 spatial dims";
    const DType dt = dtype_of(k_.outputs[0]);
    if (dtype_of(k_.inputs[0]) != dt) return "mixes dtypes";
    const bool floating = dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16;
    const bool integer = dt == DType::kInt8 || dt == DType::kInt32 || dt == DType::kInt64;
    if (!floating && !(integer && a.kind == PoolingAttrs::Kind::kMax)) return "pools an unsupported dtype";
    return pool_attrs_error(a, nd);
  }

  std::string run(const PoolingAttrs&) const {
    const PoolingAttrs& a = k_.pooling;
    const std::string what = "pools " + dims_str(shape(k_.inputs[0])) + " into " + dims_str(shape(k_.outputs[0]));
    const auto x = to_channels_first(a.layout, shape(k_.inputs[0]));
    const auto o = to_channels_first(a.layout, shape(k_.outputs[0]));
    if (x[0] != o[0] || x[1] != o[1]) return what;
    for (size_t d = 0; d < a.spatial(); ++d)
      if (o[d + 2] != pool_output_size(a, d, x[d + 2])) return what;
    return "";
  }

  std::string load(const SampleAttrs& a) const {
    if (!std::isfinite(a.temperature) || a.temperature < 0) return "has a temperature that is not finite and >= 0";
    if (a.top_k < 0) return "has a negative top_k";
    if (!(a.top_p > 0 && a.top_p <= 1)) return "has a top_p outside (0, 1]";
    if (!arity(2, 1)) return "needs logits, a key and 1 output";
    const DType t = dtype_of(k_.inputs[0]);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return "samples non-float logits";
    if (dtype_of(k_.inputs[1]) != DType::kInt64 || rank_of(k_.inputs[1]) != 1) return "has a key that is not 1-D int64";
    if (dtype_of(k_.outputs[0]) != DType::kInt32 || rank_of(k_.inputs[0]) != rank_of(k_.outputs[0]) + 1)
      return "needs int32 output of the logits' rank minus one";
    return "";
  }

  std::string run(const SampleAttrs&) const {
    const auto& x = shape(k_.inputs[0]);
    const auto& out = shape(k_.outputs[0]);
    if (shape(k_.inputs[1]) != std::vector<int64_t>{1}) return "needs a key of shape (1,), not " + dims_str(shape(k_.inputs[1]));
    if (!std::equal(out.begin(), out.end(), x.begin())) return "samples " + dims_str(x) + " into " + dims_str(out);
    const int64_t vocab = x.back();
    if (numel_of(out) > 0 && (vocab < 1 || vocab > kMaxSampleVocab))
      return "samples from rows of " + std::to_string(vocab) + " logits, outside [1, " + std::to_string(kMaxSampleVocab) + "]";
    return "";
  }

  std::string load(const WeightOnlyDotAttrs& a) const {
    if (a.bits != 4 && a.bits != 8) return "has " + std::to_string(a.bits) + " bits a weight (4 or 8)";
    if (a.group_size < 1 || a.group_size > (int64_t{1} << 40)) return "has a group size out of range";
    if (!arity(weight_only_inputs(a), 1))
      return "needs x, the weight, its scales (and zero points, the norm's weight, the residual) and 1 output";
    if (a.norm && a.gated) return "normalizes a gated x";
    if (a.gate_output && a.residual) return "adds a residual to a gated output";
    if (a.norm && !(a.norm_eps >= 0.0 && a.norm_eps < 1e30)) return "has a norm's epsilon out of range";
    const DType t = dtype_of(k_.inputs[0]);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return "multiplies a non-float x";
    const DType w = dtype_of(k_.inputs[1]);
    if (w != DType::kInt8 && !(w == DType::kFloat8E4M3 && a.bits == 8))
      return "has a weight that is not int8 bytes (or float8 values of 8 bits)";
    for (size_t i = 2; i < k_.inputs.size(); ++i)
      if (dtype_of(k_.inputs[i]) != t && !(a.norm && i == weight_only_gamma_input(a) && dtype_of(k_.inputs[i]) == DType::kFloat32))
        return "has scales, zero points, a norm's weight or a residual of another dtype than x";
    if (dtype_of(k_.outputs[0]) != t) return "has an output of another dtype than x";
    if (rank_of(k_.inputs[0]) < 1 || rank_of(k_.outputs[0]) != rank_of(k_.inputs[0]))
      return "needs x and the output of one rank (at least 1)";
    for (size_t i = 1; i < 3 + static_cast<size_t>(a.has_zero); ++i)
      if (rank_of(k_.inputs[i]) != 2) return "has a weight, scales or zero points that are not 2-D";
    return "";
  }

  std::string run(const WeightOnlyDotAttrs& a) const {
    const auto& x = shape(k_.inputs[0]);
    const auto& w = shape(k_.inputs[1]);
    const auto& out = shape(k_.outputs[0]);
    if (a.gated && x.back() % 2 != 0) return "gates an x of odd width " + std::to_string(x.back());
    const int64_t K = weight_only_k(a, x.back()), N = w[0];
    if (a.gate_output && N % 2 != 0) return "gates its output of an odd count of weight rows " + std::to_string(N);
    const int64_t groups = K / a.group_size + (K % a.group_size != 0);
    std::vector<int64_t> want(x.begin(), x.end() - 1);
    want.push_back(weight_only_out_n(a, N));
    if (w[1] != weight_only_row_bytes(a.bits, K) || out != want)
      return "multiplies " + dims_str(x) + " by a " + std::to_string(a.bits) + "-bit weight " + dims_str(w) +
             " into " + dims_str(out);
    for (size_t i = 2; i < 3 + static_cast<size_t>(a.has_zero); ++i)
      if (shape(k_.inputs[i]) != std::vector<int64_t>{N, groups})
        return "has scales or zero points " + dims_str(shape(k_.inputs[i])) + " for " + std::to_string(N) +
               " rows of " + std::to_string(groups) + " groups";
    if (a.norm && shape(k_.inputs[weight_only_gamma_input(a)]) != std::vector<int64_t>{K})
      return "normalizes rows of " + std::to_string(K) + " with a weight " + dims_str(shape(k_.inputs[weight_only_gamma_input(a)]));
    if (a.residual && shape(k_.inputs[weight_only_residual_input(a)]) != out)
      return "adds a residual " + dims_str(shape(k_.inputs[weight_only_residual_input(a)])) + " to " + dims_str(out);
    return "";
  }

  std::string load(const CollectiveAttrs& a) const {
    if (a.world_size < 1 || a.world_size > kMaxWorldSize) return "has a world size outside [1, 1024]";
    if (!arity(1, 1)) return "needs 1 input and 1 output";
    if (!same_dtype()) return "changes the dtype";
    const DType t = dtype_of(k_.inputs[0]);
    if (a.op != CollectiveAttrs::Op::kAllGather && !(t == DType::kFloat32 || t == DType::kFloat16 ||
                                                     t == DType::kBFloat16 || t == DType::kInt32 || t == DType::kInt64))
      return "sums a dtype other than float32, float16, bfloat16, int32 or int64";
    if (rank_of(k_.inputs[0]) != rank_of(k_.outputs[0])) return "needs input and output of one rank";
    if (a.op != CollectiveAttrs::Op::kAllReduce && (a.axis < 0 || a.axis >= static_cast<int64_t>(rank_of(k_.inputs[0]))))
      return "splits or joins along an axis outside its rank";
    return "";
  }

  std::string run(const CollectiveAttrs& a) const {
    const auto& x = shape(k_.inputs[0]);
    const auto& out = shape(k_.outputs[0]);
    std::vector<int64_t> want = x;
    if (a.op == CollectiveAttrs::Op::kAllGather) want[static_cast<size_t>(a.axis)] *= a.world_size;
    if (a.op == CollectiveAttrs::Op::kReduceScatter) {
      const int64_t d = x[static_cast<size_t>(a.axis)];
      if (d % a.world_size != 0)
        return "splits dim " + std::to_string(a.axis) + " of " + dims_str(x) + " into " + std::to_string(a.world_size) +
               " equal parts, but its size is not a multiple of " + std::to_string(a.world_size);
      want[static_cast<size_t>(a.axis)] = d / a.world_size;
    }
    if (out != want)
      return std::string(a.op == CollectiveAttrs::Op::kAllGather ? "gathers " : "sums ") + dims_str(x) + " into " + dims_str(out);
    return "";
  }

 private:
  size_t rank_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].shape.size(); }
  DType dtype_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].dtype; }
  bool slot_ok(int64_t s) const { return in_range(s, p_.shape_program.size()); }
  bool arity(size_t ins, size_t outs) const { return k_.inputs.size() == ins && k_.outputs.size() == outs; }
  bool same_dtype() const { return dtype_of(k_.inputs[0]) == dtype_of(k_.outputs[0]); }
  const std::vector<int64_t>& shape(int32_t b) const { return (*shapes_)[static_cast<size_t>(b)]; }
  int64_t slot(Slot s) const { return (*slots_)[static_cast<size_t>(s)]; }

  const Program& p_;
  const Kernel& k_;
  const std::vector<std::vector<int64_t>>* shapes_;
  const std::vector<int64_t>* slots_;
};

// The first enum field of `attrs` (its own fields, not nested ones) whose value has no name.
template <class A>
std::string invalid_enum_field(const A& attrs) {
  std::string bad;
  A::visit_fields(
      [&](const char* name, const auto& f) {
        using F = std::decay_t<decltype(f)>;
        if constexpr (std::is_enum_v<F>)
          if (bad.empty() && static_cast<size_t>(f) >= enum_names(f).count)
            bad = std::string(name) + " " + std::to_string(static_cast<size_t>(f));
      },
      attrs);
  return bad;
}

}  // namespace

std::string kernel_load_error(const Program& p, const Kernel& k) {
  return visit_kind_attrs(k, [&](const auto& attrs) {
    const std::string bad = invalid_enum_field(attrs);
    return bad.empty() ? KernelRules(p, k).load(attrs) : "has an invalid " + bad;
  });
}

std::string kernel_run_error(const Program& p, const Kernel& k, const std::vector<std::vector<int64_t>>& shapes,
                             const std::vector<int64_t>& slots) {
  return visit_kind_attrs(k, [&](const auto& attrs) { return KernelRules(p, k, &shapes, &slots).run(attrs); });
}

}  // namespace tripy::rt
