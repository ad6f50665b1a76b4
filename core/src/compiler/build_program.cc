// Builds the backend-neutral Program from an optimised FlatIR graph and its fusion plan.
#include "compiler/build_program.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/memory_plan.h"
#include "compiler/shape_slots.h"
#include "flat/constant_data.h"
#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"
#include "runtime/shape_arith.h"
#include "tripy/executable.h"

namespace tripy::compiler {
namespace {

using flat::FusionGroup;
using flat::GroupKind;
using flat::ValueId;
using rt::BufferDesc;

class ProgramBuilder {
 public:
  ProgramBuilder(const flat::Graph& g, const BuildProgramOptions& options)
      : g_(g), options_(options), slots_(p_.shape_program, g.symbols), buffer_of_(g.values.size(), -1),
        uses_(g.use_counts()) {}

  StatusOr<rt::Program> build() {
    TRIPY_ASSIGN_OR_RETURN(flat::FusionPlan plan, flat::plan_fusion(g_));
    if (options_.dump_fusion) options_.dump_fusion(flat::fusion_plan_str(g_, plan));
    TRIPY_RETURN_IF_ERROR(add_inputs());
    TRIPY_RETURN_IF_ERROR(add_assertions());
    claim_outputs(plan);
    for (const FusionGroup& grp : plan.groups) TRIPY_RETURN_IF_ERROR(add_group(grp));
    TRIPY_RETURN_IF_ERROR(finish_outputs());
    plan_arena();
    return std::move(p_);
  }

 private:
  int32_t source_index(const flat::OriginRef& origin) {
    if (!origin || !origin->where) return -1;
    auto it = sources_.find(origin->where.get());
    if (it != sources_.end()) return it->second;
    p_.sources.push_back(*origin->where);
    int32_t i = static_cast<int32_t>(p_.sources.size() - 1);
    sources_[origin->where.get()] = i;
    return i;
  }

  std::string dim_name(const Dim& d) const {
    if (d.op() != DimOp::kSym) return "";
    const Symbol& s = g_.symbols.symbols[static_cast<size_t>(d.symbol_id())];
    return s.name == "s" + std::to_string(s.id) ? "" : s.name;
  }

  Status add_inputs() {
    struct Deferred {
      rt::Slot actual;
      Dim dim;
      std::string where;
    };
    std::vector<Deferred> deferred;
    std::map<rt::Slot, std::string> slot_where;  // first input dim (or value) bound to each symbol slot
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const flat::Value& v = g_.values[g_.inputs[i]];
      rt::InputSpec spec;
      spec.name = i < g_.input_names.size() ? g_.input_names[i] : "";
      spec.dtype = v.dtype;
      const auto& donated = options_.donated_inputs;
      spec.donated = std::find(donated.begin(), donated.end(), static_cast<int32_t>(i)) != donated.end();
      if (const int32_t symbol = g_.def(g_.inputs[i]).shape_symbol; symbol >= 0) {
        // A shape value: read by the shape program alone, so it gets no buffer.
        const Symbol& sym = g_.symbols.symbols[static_cast<size_t>(symbol)];
        spec.kind = rt::InputSpec::Kind::kShapeValue;
        spec.donated = false;  // a host scalar: nothing to update
        spec.value_min = sym.min;
        spec.value_opt = sym.opt;
        spec.value_max = sym.max;
        rt::Slot before;
        rt::Slot s = slots_.input_value(static_cast<int>(i), symbol, &before);
        std::string where = "the value of input '" + spec.name + "'";
        if (before >= 0) {
          p_.checks.push_back(rt::ShapeCheck{rt::ShapeCheck::Kind::kEqual, before, s,
                                             where + " must equal " + slot_where[before] + " (both are '" +
                                                 sym.name + "')",
                                             -1});
        } else {
          slot_where[s] = where;
        }
        p_.inputs.push_back(std::move(spec));
        p_.input_shapes.emplace_back();
        continue;
      }
      std::vector<rt::Slot> shape;
      for (size_t d = 0; d < v.shape.size(); ++d) {
        const Dim& dim = v.shape[d];
        rt::Slot before;
        rt::Slot s = slots_.input_dim(static_cast<int>(i), static_cast<int>(d), dim, &before);
        std::string where = "dim " + std::to_string(d) + " of input '" + spec.name + "'";
        if (before >= 0) {
          p_.checks.push_back(rt::ShapeCheck{rt::ShapeCheck::Kind::kEqual, before, s,
                                             where + " must equal " + slot_where[before] + " (both are '" +
                                                 dim.str(&g_.symbols) + "')",
                                             -1});
        } else if (dim.op() == DimOp::kSym) {
          slot_where[s] = where;
        } else if (!dim.is_static()) {
          deferred.push_back(Deferred{s, dim, where});
        }
        shape.push_back(s);
        spec.dim_min.push_back(dim.is_static() ? dim.static_value() : dim.lower_bound(g_.symbols));
        spec.dim_opt.push_back(dim.is_static() ? dim.static_value() : dim.opt_value(g_.symbols));
        spec.dim_max.push_back(dim.is_static() ? dim.static_value() : dim.upper_bound(g_.symbols));
        spec.dim_names.push_back(dim_name(dim));
      }
      p_.inputs.push_back(std::move(spec));
      p_.input_shapes.push_back(shape);
    }
    // Input buffers take their shapes from the dims' slots, so static sizes are compile-time
    // constants for the backend (the runtime has checked them against min == max).
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      if (p_.inputs[i].kind != rt::InputSpec::Kind::kTensor) continue;
      BufferDesc b;
      b.kind = BufferDesc::Kind::kInput;
      b.index = static_cast<int32_t>(i);
      b.dtype = g_.values[g_.inputs[i]].dtype;
      TRIPY_ASSIGN_OR_RETURN(b.shape, slots_.slots(g_.values[g_.inputs[i]].shape));
      buffer_of_[g_.inputs[i]] = add_buffer(std::move(b));
    }
    for (const Deferred& d : deferred) {
      TRIPY_ASSIGN_OR_RETURN(rt::Slot want, slots_.slot(d.dim));
      p_.checks.push_back(rt::ShapeCheck{rt::ShapeCheck::Kind::kEqual, want, d.actual,
                                         d.where + " must equal " + d.dim.str(&g_.symbols), -1});
    }
    return ok_status();
  }

  Status add_assertions() {
    for (const flat::ShapeAssertion& a : g_.assertions) {
      TRIPY_ASSIGN_OR_RETURN(rt::Slot x, slots_.slot(a.a));
      TRIPY_ASSIGN_OR_RETURN(rt::Slot y, slots_.slot(a.b));
      p_.checks.push_back(rt::ShapeCheck{a.kind, x, y, a.message, source_index(a.origin)});
    }
    return ok_status();
  }

  int32_t add_buffer(BufferDesc b) {
    p_.buffers.push_back(std::move(b));
    return static_cast<int32_t>(p_.buffers.size() - 1);
  }

  // Bytes of `v` at the largest input sizes, capped at 2**43 (past the 2**40 the validator allows,
  // so the program is still refused, while sums of a million such sizes cannot overflow).
  int64_t max_bytes(ValueId v) const {
    const flat::Value& val = g_.values[v];
    const int64_t n = std::max<int64_t>(0, num_elements(val.shape).upper_bound(g_.symbols));
    int64_t bytes = 0;
    if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(val.dtype)), &bytes)) bytes = INT64_MAX;
    return std::min<int64_t>(bytes, int64_t{1} << 43);
  }

  // Which graph outputs a kernel can write directly: values a kernel computes (first occurrence),
  // and reshapes of such values (the kernel writes through an alias of the output buffer, so
  // keepdim reductions and flattened results need no copy).
  void claim_outputs(const flat::FusionPlan& plan) {
    p_.outputs.assign(g_.outputs.size(), -1);
    std::map<ValueId, ValueId> reshaped_from;  // reshape result -> its operand
    std::set<ValueId> computed;
    for (const FusionGroup& grp : plan.groups) {
      if (grp.kind == GroupKind::kAlias) {
        reshaped_from[grp.outputs[0]] = grp.inputs[0];
      } else {
        computed.insert(grp.outputs.begin(), grp.outputs.end());
      }
    }
    std::set<ValueId> seen;
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      ValueId v = g_.outputs[i];
      if (!seen.insert(v).second) continue;
      if (computed.count(v)) claimed_[v] = Claim{static_cast<int32_t>(i), v};
    }
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      ValueId v = g_.outputs[i], base = v;
      if (computed.count(v) || std::count(g_.outputs.begin(), g_.outputs.begin() + i, v)) continue;
      while (reshaped_from.count(base)) base = reshaped_from[base];
      if (base != v && computed.count(base) && !claimed_.count(base)) {
        claimed_[base] = Claim{static_cast<int32_t>(i), v};
      }
    }
  }

  StatusOr<int32_t> read_buffer(ValueId v) {
    if (buffer_of_[v] >= 0) return buffer_of_[v];
    const flat::Op& def = g_.def(v);
    if (def.kind != flat::OpKind::kConstant) {
      return internal_error("build_program: %" + std::to_string(v) + " is read before a kernel writes it");
    }
    if (def.constant.device() == options_.device || flat::on_host(def.constant)) {
      p_.constants.push_back(def.constant);
    } else {
      TRIPY_ASSIGN_OR_RETURN(Tensor host, copy_to(def.constant, Device{}));
      p_.constants.push_back(std::move(host));
    }
    BufferDesc b;
    b.kind = BufferDesc::Kind::kConstant;
    b.index = static_cast<int32_t>(p_.constants.size() - 1);
    b.dtype = def.constant.dtype();
    TRIPY_ASSIGN_OR_RETURN(b.shape, slots_.slots(g_.values[v].shape));
    buffer_of_[v] = add_buffer(std::move(b));
    return buffer_of_[v];
  }

  int32_t root_of(int32_t b) const {
    while (p_.buffers[b].kind == BufferDesc::Kind::kAlias) b = p_.buffers[b].index;
    return b;
  }

  // The buffer whose memory `operand` is (itself or through aliases), when an update of it may be
  // written there: nothing else reads the operand, so its old contents are not needed, and the
  // memory is a temp or a donated input.
  int32_t writable_root(ValueId operand) const {
    if (uses_[operand] != 1 || buffer_of_[operand] < 0) return -1;
    const int32_t root = root_of(buffer_of_[operand]);
    const BufferDesc& b = p_.buffers[root];
    const bool donated = b.kind == BufferDesc::Kind::kInput && p_.inputs[b.index].donated;
    return donated || b.kind == BufferDesc::Kind::kTemp ? root : -1;
  }

  // update_slice in place: the result is the operand's memory (an alias of it, or the output
  // that the runtime returns as the donated input). Returns -1 where it must be a copy.
  StatusOr<int32_t> write_in_place(ValueId v, ValueId operand) {
    const int32_t root = writable_root(operand);
    if (root < 0) return -1;
    const bool donated = p_.buffers[root].kind == BufferDesc::Kind::kInput;
    BufferDesc b;
    b.dtype = g_.values[v].dtype;
    TRIPY_ASSIGN_OR_RETURN(b.shape, slots_.slots(g_.values[v].shape));
    auto it = claimed_.find(v);
    if (it != claimed_.end()) {
      // A temp cannot become an output; an output reshaped has not the input's shape.
      if (!donated || it->second.shaped_as != v) return -1;
      b.kind = BufferDesc::Kind::kOutput;
      b.index = it->second.output;
      b.donor = p_.buffers[root].index;
      p_.outputs[b.index] = add_buffer(std::move(b));
      buffer_of_[v] = p_.outputs[it->second.output];
    } else {
      b.kind = BufferDesc::Kind::kAlias;
      b.index = root;
      buffer_of_[v] = add_buffer(std::move(b));
    }
    return buffer_of_[v];
  }

  // A temporary no program may hold (the validator's bound on the arena): named at its op's line,
  // instead of the inconsistent program the validator would otherwise refuse.
  Status check_fits(ValueId v, int64_t bytes) const {
    if (bytes <= rt::kMaxBytes) return ok_status();
    const flat::OriginRef& origin = g_.def(v).origin;
    const std::string op = origin && !origin->trace_op.empty() ? origin->trace_op : "an op";
    return Status(StatusCode::kResourceExhausted,
                  "The result of " + op + ", of shape " + shape_str(g_.values[v].shape, &g_.symbols) + " and dtype " +
                      std::string(dtype_name(g_.values[v].dtype)) + ", needs more than 2**40 bytes (1 TiB) at its largest: " +
                      "more than one tensor of a Tripy program may hold.",
                  origin ? origin->where : nullptr);
  }

  StatusOr<int32_t> write_buffer(ValueId v) {
    BufferDesc b;
    b.dtype = g_.values[v].dtype;
    TRIPY_ASSIGN_OR_RETURN(b.shape, slots_.slots(g_.values[v].shape));
    b.max_bytes = max_bytes(v);
    auto it = claimed_.find(v);
    if (it != claimed_.end()) {
      const auto [output, shaped_as] = it->second;
      BufferDesc out = b;
      out.kind = BufferDesc::Kind::kOutput;
      out.index = output;
      if (shaped_as != v) {
        TRIPY_ASSIGN_OR_RETURN(out.shape, slots_.slots(g_.values[shaped_as].shape));
      }
      p_.outputs[output] = add_buffer(std::move(out));
      buffer_of_[v] = p_.outputs[output];
      if (shaped_as != v) {
        // The kernel writes the output's bytes in its own shape.
        b.kind = BufferDesc::Kind::kAlias;
        b.index = p_.outputs[output];
        b.max_bytes = 0;
        buffer_of_[v] = add_buffer(std::move(b));
      }
    } else {
      // Temporaries share the arena, planned for their largest sizes (outputs are allocated per
      // call, at the sizes of the call).
      TRIPY_RETURN_IF_ERROR(check_fits(v, b.max_bytes));
      b.kind = BufferDesc::Kind::kTemp;
      buffer_of_[v] = add_buffer(std::move(b));
    }
    return buffer_of_[v];
  }

  Status add_group(const FusionGroup& grp) {
    const flat::Op& first = g_.ops[grp.ops.front()];
    if (grp.kind == GroupKind::kAlias) {
      TRIPY_ASSIGN_OR_RETURN(int32_t in, read_buffer(grp.inputs[0]));
      ValueId v = grp.outputs[0];
      BufferDesc b;
      b.kind = BufferDesc::Kind::kAlias;
      b.index = root_of(in);
      b.dtype = g_.values[v].dtype;
      TRIPY_ASSIGN_OR_RETURN(b.shape, slots_.slots(g_.values[v].shape));
      buffer_of_[v] = add_buffer(std::move(b));
      return ok_status();
    }
    rt::Kernel k;
    k.name = grp.name;
    k.source = source_index(first.origin);
    for (ValueId v : grp.inputs) {
      TRIPY_ASSIGN_OR_RETURN(int32_t b, read_buffer(v));
      k.inputs.push_back(b);
    }
    for (ValueId v : grp.outputs) {
      int32_t b = -1;
      if (grp.kind == GroupKind::kUpdateSlice) {
        TRIPY_ASSIGN_OR_RETURN(b, write_in_place(v, grp.inputs[0]));
      }
      if (b < 0) {
        TRIPY_ASSIGN_OR_RETURN(b, write_buffer(v));
      }
      k.outputs.push_back(b);
    }
    k.kind = flat::kernel_kind_of(grp.kind);
    if (first.kind == flat::OpKind::kKernel) {  // the op carries the kernel's kind and attributes
      static_cast<rt::KernelAttrs&>(k) = first.kernel;
      p_.kernels.push_back(std::move(k));
      return ok_status();
    }
    switch (grp.kind) {
      case GroupKind::kFused: {
        k.fused = grp.fused;
        TRIPY_ASSIGN_OR_RETURN(k.fused.domain, slots_.slots(grp.domain));
        TRIPY_RETURN_IF_ERROR(add_windows(grp, k.fused));
        break;
      }
      case GroupKind::kDot:
        k.dot = grp.dot;
        break;
      case GroupKind::kTranspose:
        k.transpose.perm = first.dims;
        break;
      case GroupKind::kSlice: {
        TRIPY_ASSIGN_OR_RETURN(k.slice.starts, slots_.slots(first.starts));
        TRIPY_ASSIGN_OR_RETURN(k.slice.steps, slots_.slots(first.steps));
        break;
      }
      case GroupKind::kConcatenate:
        k.concatenate.axis = first.dims.at(0);
        break;
      case GroupKind::kGather:
        k.gather.axis = first.dims.at(0);
        break;
      case GroupKind::kAttention:
        k.attention = first.attention;
        break;
      case GroupKind::kUpdateSlice:
        k.update_slice.axis = first.dims.at(0);
        if (first.dims.size() > 1) k.update_slice.row_offset = first.dims[1];
        break;
      case GroupKind::kPlugin:
        k.plugin = first.plugin;
        break;
      case GroupKind::kAlias:  // handled above, as kernel ops' kinds are
      case GroupKind::kCopy:
      default: return internal_error("fusion planned a " + std::string(flat::group_kind_name(grp.kind)) + " group here");
      case GroupKind::kConvolution:
        k.convolution = grp.convolution;
        break;
      case GroupKind::kPooling:
        k.pooling = first.pooling;
        break;
    }
    p_.kernels.push_back(std::move(k));
    return ok_status();
  }

  // Slices that the fused kernel reads in place.
  Status add_windows(const FusionGroup& grp, rt::FusedProgram& f) {
    bool any = false;
    for (const auto& w : grp.windows) any |= !w.first.empty();
    if (!any) return ok_status();
    for (const auto& [starts, sizes] : grp.windows) {
      rt::FusedProgram::Window w;
      TRIPY_ASSIGN_OR_RETURN(w.starts, slots_.slots(starts));
      TRIPY_ASSIGN_OR_RETURN(w.sizes, slots_.slots(sizes));
      f.input_windows.push_back(std::move(w));
    }
    return ok_status();
  }

  // Outputs no kernel wrote directly (inputs, constants, reshapes of them, repeats) get a copy.
  Status finish_outputs() {
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      if (p_.outputs[i] >= 0) continue;
      ValueId v = g_.outputs[i];
      TRIPY_ASSIGN_OR_RETURN(int32_t src, read_buffer(v));
      BufferDesc b;
      b.kind = BufferDesc::Kind::kOutput;
      b.index = static_cast<int32_t>(i);
      b.dtype = g_.values[v].dtype;
      b.shape = p_.buffers[src].shape;
      b.max_bytes = max_bytes(v);
      p_.outputs[i] = add_buffer(std::move(b));
      rt::Kernel k;
      k.kind = rt::KernelKind::kCopy;
      k.name = "copy_output_" + std::to_string(i);
      k.inputs = {src};
      k.outputs = {p_.outputs[i]};
      k.source = source_index(g_.def(v).origin);
      p_.kernels.push_back(std::move(k));
    }
    p_.output_names = options_.output_names;
    p_.output_names.resize(g_.outputs.size());
    return ok_status();
  }

  // Liveness of each temp over the kernel order (reads through aliases count), then placement.
  void plan_arena() {
    std::vector<int32_t> temps;
    std::vector<BufferLife> lives;
    std::map<int32_t, size_t> index;
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      if (p_.buffers[b].kind != BufferDesc::Kind::kTemp) continue;
      index[static_cast<int32_t>(b)] = temps.size();
      temps.push_back(static_cast<int32_t>(b));
      lives.push_back(BufferLife{p_.buffers[b].max_bytes, -1, -1});
    }
    std::map<int32_t, int32_t> last_read;  // per root of any kind: the last kernel reading it
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      auto touch = [&](int32_t b, bool write) {
        if (!write) last_read[root_of(b)] = static_cast<int32_t>(k);
        auto it = index.find(root_of(b));
        if (it == index.end()) return;
        BufferLife& life = lives[it->second];
        if (life.first < 0 || (write && life.first > static_cast<int32_t>(k))) life.first = static_cast<int32_t>(k);
        life.last = std::max(life.last, static_cast<int32_t>(k));
      };
      for (int32_t b : p_.kernels[k].outputs) touch(b, true);
      for (int32_t b : p_.kernels[k].inputs) touch(b, false);
    }
    // An update_slice's rows stay readable while what it wrote is read: a backend may write them
    // as late as that reader runs (the CUDA backend folds a decode step's cache writes into its
    // attention, which then reads the rows from here).
    for (const rt::Kernel& k : p_.kernels) {
      if (k.kind != rt::KernelKind::kUpdateSlice || k.inputs.size() < 2) continue;
      auto src = index.find(root_of(k.inputs[1]));
      auto reader = last_read.find(root_of(k.outputs[0]));
      if (src != index.end() && reader != last_read.end())
        lives[src->second].last = std::max(lives[src->second].last, reader->second);
    }
    for (BufferLife& life : lives) {
      if (life.first < 0) life.first = 0;
      life.last = std::max(life.last, life.first);
    }
    MemoryPlan plan = plan_memory(lives);
    for (size_t i = 0; i < temps.size(); ++i) p_.buffers[temps[i]].offset = plan.offsets[i];
    p_.arena_bytes = plan.arena_bytes;
  }

  const flat::Graph& g_;
  const BuildProgramOptions& options_;
  rt::Program p_;
  ShapeSlots slots_;
  std::vector<int32_t> buffer_of_;
  std::vector<int32_t> uses_;  // per value: readers, graph outputs included
  struct Claim {
    int32_t output;      // the output number the value's kernel writes
    ValueId shaped_as;   // the output value (the value itself, or a reshape of it)
  };
  std::map<ValueId, Claim> claimed_;
  std::map<const SourceInfo*, int32_t> sources_;
};

}  // namespace

StatusOr<rt::Program> build_program(const flat::Graph& graph, const BuildProgramOptions& options) {
  flat::Graph g = flat::canonicalize_reductions(graph);
  return ProgramBuilder(g, options).build();
}

}  // namespace tripy::compiler
