// One CUDA kernel per FusedProgram. Pure elementwise groups become a grid-stride loop (with a
// vectorised path for contiguous aligned operands); groups with row reductions give each row to a
// warp or a block, loop over the row once per reduction phase (reductions that do not depend on
// each other share a phase), then once more for the element-level outputs.
#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_launch.h"
#include "runtime/fused_analysis.h"

namespace tripy::rt::cuda {
namespace {

// The prelude's rc<N>, warp_allreduce<N> and row_combine<N> combine by code: 0 sum, 1 prod, 2 max, 3 min.
int reduce_code(EwOp op) {
  switch (ew_info(op).reduce) {
    case ReduceKind::kSum: return 0;
    case ReduceKind::kProd: return 1;
    case ReduceKind::kMax: return 2;
    case ReduceKind::kMin: return 3;
    case ReduceKind::kNone: break;
  }
  return -1;  // not a reduction: the analysis never lets one here
}

// The shared per-register facts (runtime/fused_analysis.h) plus the launch layout (analyze_fused,
// the runtime's: load() fills the argument words by it).
struct Analysis : FusedAnalysis {
  FusedLayout layout;
};

StatusOr<Analysis> analyze(const Program& p, const Kernel& k) {
  Analysis an;
  TRIPY_ASSIGN_OR_RETURN(an.layout, analyze_fused(p, k));
  TRIPY_ASSIGN_OR_RETURN(static_cast<FusedAnalysis&>(an), analyze_fused_program(p, k));
  return an;
}

class SourceWriter {
 public:
  SourceWriter& operator<<(const std::string& s) { out_ += s; return *this; }
  SourceWriter& operator<<(const char* s) { out_ += s; return *this; }
  SourceWriter& operator<<(char c) { out_ += c; return *this; }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  SourceWriter& operator<<(T v) {
    out_ += std::to_string(v);
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

class Emitter {
 public:
  Emitter(const Program& p, const Kernel& k, const Analysis& an)
      : p_(p), k_(k), f_(k.fused), an_(an), L_(an.layout) {}

  GeneratedKernel emit() {
    std::string name = kernel_name();
    s_ << device_prelude();
    s_ << "struct Args { i64 v[" << L_.word_count() << "]; };\n";
    // Reductions: at least three or four blocks per SM (fewer registers when no row cache), so a
    // row's barriers overlap other rows' loads; but where no block takes a second row (a decode
    // step's norm) there are none to overlap, and a cap would only spill.
    if (L_.has_reduction) fixed_ = fixed_rows();
    const bool one_row = fixed_ && fixed_->one_row;
    const char* bounds = !L_.has_reduction || one_row ? "256" : hands_over_values() ? "256, 3" : "256, 4";
    s_ << "extern \"C\" __global__ void __launch_bounds__(" << bounds << ") "
       << name << "(const Args a) {\n";
    // Row reductions wait in each row loop, after loading what no kernel writes (row_loop).
    if (!L_.has_reduction) s_ << "  enter_after_previous();\n";
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << "  " << storage_type(out_dtype(o)) << "* out" << o << " = (" << storage_type(out_dtype(o))
         << "*)a.v[" << o << "];\n";
    for (int i = 0; i < L_.num_inputs; ++i)
      s_ << "  const " << storage_type(an_.input_dtype[i]) << "* in" << i << " = (const "
         << storage_type(an_.input_dtype[i]) << "*)a.v[" << L_.num_outputs + i << "];\n";
    emit_row_regs(0, "  ");
    if (L_.has_reduction) {
      emit_reduction_body();
    } else {
      if (L_.vec_width > 0 && L_.rank > 0) emit_vector_path();
      s_ << "  if (a.v[" << L_.misc_word(FusedLayout::kMiscSmall) << "]) {\n";
      emit_elementwise_loop("unsigned");
      s_ << "  } else {\n";
      emit_elementwise_loop("i64");
      s_ << "  }\n";
    }
    s_ << "}\n";
    return GeneratedKernel{s_.str(), name};
  }

 private:
  DType out_dtype(int o) const { return p_.buffers[k_.outputs[o]].dtype; }
  std::string reg(int32_t r) const { return "r" + std::to_string(r); }
  const char* rtype(int32_t r) const { return ctype(an_.kind[r]); }

  // A readable, content-derived name: identical programs get identical sources.
  std::string kernel_name() const {
    std::string name = "tripy";
    int shown = 0;
    for (const Instr& in : f_.instrs) {
      if (in.op == EwOp::kLoad || in.op == EwOp::kConst || shown >= 5) continue;
      std::string op = ew_op_name(in.op);
      if (!op.empty() && op[0] == 'k') op = op.substr(1);
      for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      name += "_" + op;
      ++shown;
    }
    return name;
  }

  // Row-level, non-reduction registers known after `phase` reductions.
  void emit_row_regs(int32_t phase, const std::string& ind) {
    for (int32_t r = 0; r < static_cast<int32_t>(f_.instrs.size()); ++r) {
      const Instr& in = f_.instrs[r];
      if (!an_.row_level[r] || is_reduction(in.op) || an_.phase[r] != phase) continue;
      s_ << ind << "const " << rtype(r) << " " << reg(r) << " = " << value_expr(r, nullptr) << ";\n";
    }
  }

  // The expression computing register r; `load` gives input k's compute value (element code).
  std::string value_expr(int32_t r, const std::function<std::string(int32_t)>* load) {
    const Instr& in = f_.instrs[r];
    switch (in.op) {
      case EwOp::kConst: return const_literal(in.dtype, in.imm);
      case EwOp::kLoad: return (*load)(in.a);
      case EwOp::kIota: return std::string("(") + rtype(r) + ")c" + std::to_string(in.a);
      default: break;
    }
    auto opnd = [&](int32_t o) { return o >= 0 ? reg(o) : std::string(); };
    return ew_expr(in, an_.operand_kind[r], opnd(in.a), opnd(in.b), opnd(in.c));
  }

  // `leaf` (when >= 0) is read from `leaf_value` instead of being computed.
  void emit_elements(const std::vector<int32_t>& regs, const std::function<std::string(int32_t)>& load,
                     const std::string& ind, int32_t leaf = -1, const std::string& leaf_value = "") {
    for (int32_t r : regs)
      s_ << ind << "const " << rtype(r) << " " << reg(r) << " = " << (r == leaf ? leaf_value : value_expr(r, &load))
         << ";\n";
  }

  std::vector<int32_t> element_output_roots() const {
    std::vector<int32_t> roots;
    for (int o = 0; o < L_.num_outputs; ++o)
      if (!L_.output_row_level[o]) roots.push_back(f_.output_regs[o]);
    return roots;
  }

  // Decomposes `idx` over positions [from, to) (outermost `lo`, a run-time word) into the offsets
  // o<k> (+= coordinate * stride) and, with iota, coordinates c<d>.
  void emit_decompose(const std::string& it, const std::string& idx, int from, int to,
                      const std::string& lo, const std::string& off, const std::string& ind) {
    s_ << ind << it << " rem = " << idx << ";\n";
    for (int d = to - 1; d >= from; --d) {
      std::string sz = "(" + it + ")a.v[" + std::to_string(L_.size_word(d)) + "]";
      s_ << ind << "if (" << d << " > " << lo << ") { const " << it << " q = rem / " << sz
         << "; const " << it << " c = rem - q * " << sz << ";";
      for (int k = 0; k < L_.num_inputs; ++k)
        s_ << " " << off << k << " += (i64)c * a.v[" << L_.stride_word(k, d) << "];";
      if (L_.has_iota) s_ << " c" << d << " = (i64)c;";
      s_ << " rem = q; } else if (" << d << " == " << lo << ") {";
      for (int k = 0; k < L_.num_inputs; ++k)
        s_ << " " << off << k << " += (i64)rem * a.v[" << L_.stride_word(k, d) << "];";
      if (L_.has_iota) s_ << " c" << d << " = (i64)rem;";
      s_ << " }\n";
    }
  }

  void declare_offsets(const std::string& off, const std::string& init, const std::string& ind) {
    if (L_.num_inputs == 0) return;
    s_ << ind << "i64 ";
    for (int k = 0; k < L_.num_inputs; ++k)
      s_ << (k ? ", " : "") << off << k << " = " << (init.empty() ? "0" : init + std::to_string(k));
    s_ << ";\n";
  }

  void declare_coords(int from, int to, const std::string& ind) {
    if (!L_.has_iota || from >= to) return;
    s_ << ind << "i64 ";
    for (int d = from; d < to; ++d) s_ << (d > from ? ", " : "") << "c" << d << " = 0";
    s_ << ";\n";
  }

  std::function<std::string(int32_t)> gather_load(const std::string& off) {
    return [this, off](int32_t k) {
      return load_expr(an_.input_dtype[k], "in" + std::to_string(k) + "[" + off + std::to_string(k) + "]");
    };
  }

  void emit_elementwise_loop(const std::string& it) {
    const std::string ind = "    ";
    s_ << "    const " << it << " n = (" << it << ")a.v[" << L_.misc_word(FusedLayout::kMiscRows) << "];\n";
    s_ << "    const int lo = (int)a.v[" << L_.misc_word(FusedLayout::kMiscRowLo) << "];\n";
    s_ << "    for (" << it << " i = (" << it << ")blockIdx.x * blockDim.x + threadIdx.x; i < n; i += ("
       << it << ")gridDim.x * blockDim.x) {\n";
    const std::string in2 = "      ";
    declare_offsets("o", "", in2);
    declare_coords(0, L_.rank, in2);
    s_ << in2 << "{\n";
    emit_decompose(it, "i", 0, L_.rank, "lo", "o", in2 + "  ");
    s_ << in2 << "}\n";
    emit_elements(element_closure(f_, an_.row_level, element_output_roots()), gather_load("o"), in2);
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << in2 << "out" << o << "[i] = " << store_expr(out_dtype(o), reg(f_.output_regs[o])) << ";\n";
    s_ << "    }\n";
    (void)ind;
  }

  // Each thread moves vec_width elements per input with one wide load along the innermost merged
  // axis, which every input reads contiguously (stride 1) or as one value (stride 0); the launch
  // takes this path only where every wide load is 16-byte aligned (cuda_launch.cc,
  // vector_elementwise). Over one merged axis a scalar tail finishes; over several, the innermost
  // holds whole wide loads and the vector index is decomposed over the axes like the scalar loop's.
  void emit_vector_path() {
    const int vw = L_.vec_width, last = L_.rank - 1;
    s_ << "  if (a.v[" << L_.misc_word(FusedLayout::kMiscVector) << "]) {\n";
    s_ << "    const i64 n = a.v[" << L_.misc_word(FusedLayout::kMiscRows) << "], nv = n / " << vw
       << ", step = (i64)gridDim.x * blockDim.x, t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
    s_ << "    const int lo = (int)a.v[" << L_.misc_word(FusedLayout::kMiscRowLo) << "];\n";
    // Wide loads in the innermost axis: a.v's size there over the width.
    s_ << "    const unsigned inner = (unsigned)(a.v[" << L_.size_word(last) << "] / " << vw << ");\n";
    for (int k = 0; k < L_.num_inputs; ++k)
      s_ << "    const bool s" << k << " = a.v[" << L_.stride_word(k, last) << "] != 0;\n";
    s_ << "    for (i64 v = t0; v < nv; v += step) {\n";
    declare_offsets("o", "", "      ");
    s_ << "      if (lo == " << last << ") {";
    for (int k = 0; k < L_.num_inputs; ++k) s_ << " if (s" << k << ") o" << k << " = v * " << vw << ";";
    s_ << " } else {\n";
    // Several axes: the launch takes this form only with fewer than 2^31 elements.
    s_ << "        const unsigned cv = (unsigned)v % inner;\n";
    for (int k = 0; k < L_.num_inputs; ++k) s_ << "        if (s" << k << ") o" << k << " = (i64)cv * " << vw << ";\n";
    s_ << "        {\n";
    emit_decompose("unsigned", "(unsigned)v / inner", 0, last, "lo", "o", "          ");
    s_ << "        }\n      }\n";
    for (int k = 0; k < L_.num_inputs; ++k) {
      std::string st = storage_type(an_.input_dtype[k]);
      std::string pk = "Pack<" + st + ", " + std::to_string(vw) + ">";
      s_ << "      " << pk << " p" << k << ";\n";
      s_ << "      if (s" << k << ") p" << k << " = *(const " << pk << "*)(in" << k << " + o" << k << ");\n";
      s_ << "      else { const " << st << " x = in" << k << "[o" << k << "];\n#pragma unroll\n        for (int e = 0; e < "
         << vw << "; ++e) p" << k << ".v[e] = x; }\n";
    }
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << "      Pack<" << storage_type(out_dtype(o)) << ", " << vw << "> q" << o << ";\n";
    s_ << "#pragma unroll\n      for (int e = 0; e < " << vw << "; ++e) {\n";
    auto pack_load = [this](int32_t k) {
      return load_expr(an_.input_dtype[k], "p" + std::to_string(k) + ".v[e]");
    };
    emit_elements(element_closure(f_, an_.row_level, element_output_roots()), pack_load, "        ");
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << "        q" << o << ".v[e] = " << store_expr(out_dtype(o), reg(f_.output_regs[o])) << ";\n";
    s_ << "      }\n";
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << "      *(Pack<" << storage_type(out_dtype(o)) << ", " << vw << ">*)(out" << o
         << " + v * " << vw << ") = q" << o << ";\n";
    s_ << "    }\n";
    // The tail of one merged axis (with several, nv * width is n).
    s_ << "    for (i64 i = nv * " << vw << " + t0; i < n; i += step) {\n";
    auto tail_load = [this](int32_t k) {
      std::string ks = std::to_string(k);
      return load_expr(an_.input_dtype[k], "in" + ks + "[s" + ks + " ? i : 0]");
    };
    emit_elements(element_closure(f_, an_.row_level, element_output_roots()), tail_load, "      ");
    for (int o = 0; o < L_.num_outputs; ++o)
      s_ << "      out" << o << "[i] = " << store_expr(out_dtype(o), reg(f_.output_regs[o])) << ";\n";
    s_ << "    }\n    return;\n  }\n";
  }

  std::string acc_type(int32_t r) const { return an_.operand_kind[r] == CKind::kF32 ? "float" : "i64"; }

  std::string identity(int32_t r) const {
    const Instr& in = f_.instrs[r];
    bool flt = an_.operand_kind[r] == CKind::kF32;
    bool boolean = an_.operand_kind[r] == CKind::kBool;
    switch (in.op) {
      case EwOp::kReduceSum: return flt ? "0.0f" : "0LL";
      case EwOp::kReduceProd: return flt ? "1.0f" : "1LL";
      case EwOp::kReduceMax:
        return flt ? "__int_as_float(0xff800000)" : boolean ? "0LL" : "(-9223372036854775807LL - 1)";
      default:
        return flt ? "__int_as_float(0x7f800000)" : boolean ? "1LL" : "9223372036854775807LL";
    }
  }

  // kVector: wide loads, the row held in registers; kVectorStream: wide loads, too long to hold;
  // kCached: scalar loads, held; kPlain: scalar loads with index arithmetic per element.
  enum class RowMode { kVector, kVectorStream, kCached, kPlain };

  // The inputs that the registers `regs` load.
  std::vector<int32_t> inputs_loaded(const std::vector<int32_t>& regs) const {
    std::vector<int32_t> ks;
    for (int32_t r : regs)
      if (f_.instrs[r].op == EwOp::kLoad && std::find(ks.begin(), ks.end(), f_.instrs[r].a) == ks.end())
        ks.push_back(f_.instrs[r].a);
    std::sort(ks.begin(), ks.end());
    return ks;
  }

  // Whether input k may differ between rows (it has a row axis); only those are kept in registers
  // by the vector path, the rest (weights such as LayerNorm's) are re-read from L1. (Keeping the
  // weights too cost a LayerNorm + softmax over (8192, 4096) float16 80% on an H100: 104.6 ->
  // 188.8 us.)
  bool varies_by_row(int32_t k) const {
    for (int32_t ax : f_.input_axes[k])
      if (ax < L_.reduce_from) return true;
    return false;
  }

  std::string pack_type(DType t) const {
    return "Pack<" + std::string(storage_type(t)) + ", " + std::to_string(L_.vec_width) + ">";
  }

  // One pass over a row per reduction phase, then one for the element outputs. A pass may hand the
  // next one a value per element in registers (the latest float both compute, when that saves
  // recomputing at least two instructions): softmax's exp is computed once, not twice.
  struct RowPass {
    std::vector<int32_t> reds, roots, regs;
    int32_t reads = -1, writes = -1;  // the register taken from / left in the row cache
  };

  std::vector<RowPass> plan_row_passes(bool hand_over) const {
    std::vector<RowPass> passes;
    for (int32_t ph = 1; ph <= an_.num_phases; ++ph) {
      RowPass p;
      for (int32_t r = 0; r < static_cast<int32_t>(f_.instrs.size()); ++r)
        if (is_reduction(f_.instrs[r].op) && an_.phase[r] == ph) {
          p.reds.push_back(r);
          p.roots.push_back(f_.instrs[r].a);
        }
      passes.push_back(std::move(p));
    }
    if (!element_output_roots().empty()) passes.push_back(RowPass{{}, element_output_roots(), {}});
    for (RowPass& p : passes) p.regs = element_closure(f_, an_.row_level, p.roots);
    for (size_t i = 1; hand_over && i < passes.size(); ++i) {
      const std::vector<int32_t>& prev = passes[i - 1].regs;
      int32_t cand = -1;
      for (auto it = passes[i].regs.rbegin(); it != passes[i].regs.rend() && cand < 0; ++it) {
        EwOp op = f_.instrs[*it].op;
        if (an_.kind[*it] == CKind::kF32 && op != EwOp::kLoad && op != EwOp::kConst && op != EwOp::kIota &&
            std::binary_search(prev.begin(), prev.end(), *it))
          cand = *it;
      }
      if (cand < 0) continue;
      std::vector<int32_t> leafed = element_closure(f_, an_.row_level, passes[i].roots, cand);
      if (passes[i].regs.size() < leafed.size() + 2) continue;
      passes[i].regs = std::move(leafed);
      passes[i].reads = cand;
      passes[i - 1].writes = cand;
    }
    return passes;
  }

  bool hands_over_values() const {
    if (!L_.has_reduction || L_.has_iota) return false;
    for (const RowPass& p : plan_row_passes(true))
      if (p.writes >= 0) return true;
    return false;
  }

  // The launches a row reduction's runs may plan: with every size fixed, the same block and path
  // at every call; with dynamic sizes, those of sizes spread over their ranges
  // (Program::sample_inputs) where the row length is one for them all. The row loops no run can
  // reach are left out (each costs NVRTC time: a LayerNorm's four took 0.5 s, its vector loop
  // alone 0.15 s, on the build machine), the scalar ones too where every address is the backend's
  // own (always aligned, so the vector loop always runs). With fixed sizes, a left-out loop that
  // would run after all traps; with dynamic ones (judged from samples, not proven) the run falls
  // through to the plain loop, which serves any row and is always kept there.
  struct FixedRows {
    int64_t row_len = 0;
    int64_t block_lo = 0, block_hi = 0;  // a row's threads on the fewest and the most SMs
    bool vector = false;  // a launch may take the vector path (when the addresses allow)
    bool aligned = false;  // ... and every launch takes it (cuda_launch.h, always_aligned)
    bool exact = false;    // every size is fixed: the one launch there is
    bool one_row = false;  // ... and it gives each of its block's rows at most one row
  };
  // The row-cache slots a thread needs (fewer registers than the most it may use): each thread's
  // share of the row at the smallest block, where the row length is fixed.
  int cache_slots(const std::optional<FixedRows>& fixed, bool vec) const {
    const int most = vec ? FusedLayout::kRowCacheVector : FusedLayout::kRowCacheScalar;
    if (!fixed || fixed->block_lo <= 0 || (vec && (L_.vec_width <= 0 || fixed->row_len % L_.vec_width != 0)))
      return most;
    const int64_t units = vec ? fixed->row_len / L_.vec_width : fixed->row_len;
    return static_cast<int>(std::clamp<int64_t>((units + fixed->block_lo - 1) / fixed->block_lo, 1, most));
  }
  std::optional<FixedRows> fixed_rows() const {
    FixedRows f;
    f.exact = p_.sizes_fixed();
    bool first = true;
    std::vector<int64_t> slots;
    for (const std::vector<Tensor>& inputs : p_.sample_inputs(Device{Device::Kind::kGpu, 0})) {
      p_.eval_shapes(inputs, slots);
      // A row's threads grow with the SM count and shrink with the rows (few rows spread wider),
      // and each loop's reach moves one way with them: the smallest and largest row counts on one
      // SM and on very many bound them.
      for (int sms : {1, 1 << 16}) {
        auto launches = plan_fused(p_, k_, L_, nullptr, slots, sms);
        if (!launches.ok() || launches->size() > 1) return std::nullopt;
        if (launches->empty()) continue;  // no rows: nothing runs
        const Launch& l = launches->front();
        const int64_t row_len = l.words[L_.misc_word(FusedLayout::kMiscRowLen)];
        const int64_t rows = l.words[L_.misc_word(FusedLayout::kMiscRows)];
        const bool one_row = rows <= int64_t{l.grid} * l.block_y;
        const bool vector = l.vector_word >= 0, aligned = vector && always_aligned(p_, l);
        if (first) {
          f.row_len = row_len;
          f.block_lo = f.block_hi = l.block_x;
          f.vector = vector;
          f.aligned = aligned;
          f.one_row = one_row;
          first = false;
        } else if (row_len != f.row_len) {
          return std::nullopt;
        }
        f.block_lo = std::min<int64_t>(f.block_lo, l.block_x);
        f.block_hi = std::max<int64_t>(f.block_hi, l.block_x);
        f.vector = f.vector || vector;
        f.aligned = f.aligned && aligned;
        f.one_row = f.one_row && one_row;
      }
    }
    if (first) return std::nullopt;
    f.one_row = f.one_row && f.exact;
    return f;
  }

  void emit_reduction_body() {
    const std::optional<FixedRows>& fixed = fixed_;
    const int per_vector = cache_slots(fixed, true), per_scalar = cache_slots(fixed, false);
    // Whether a row loop can run, judged as the kernel judges it below.
    auto reachable = [&](RowMode mode) {
      if (!fixed || (mode == RowMode::kPlain && !fixed->exact)) return true;
      auto vector_fits = [&](int64_t block) { return fixed->row_len <= per_vector * L_.vec_width * block; };
      auto scalar_fits = [&](int64_t block) { return !L_.has_iota && fixed->row_len <= per_scalar * block; };
      switch (mode) {
        case RowMode::kVector: return fixed->vector && vector_fits(fixed->block_hi);
        case RowMode::kVectorStream: return fixed->vector && !vector_fits(fixed->block_lo);
        case RowMode::kCached: return !fixed->aligned && scalar_fits(fixed->block_hi);
        case RowMode::kPlain: return !fixed->aligned && !scalar_fits(fixed->block_lo);
      }
      return true;
    };
    // A loop and its return, or where no run reaches it a trap (fixed sizes) or nothing (dynamic:
    // the run falls through to the loops below it).
    auto row_loop = [&](RowMode mode) {
      if (reachable(mode)) {
        const bool vec = mode == RowMode::kVector || mode == RowMode::kVectorStream;
        emit_row_loop(mode, vec ? per_vector : per_scalar, mode == RowMode::kVector && fixed && fixed->one_row);
        s_ << "    return;\n";
      } else if (fixed->exact) {
        s_ << "  __trap();\n";
      }
    };
    // Two areas of slots, alternating from one barrier to the next, each with room for the
    // most reductions of one phase (of each accumulator type), 32 slots for each of a block's rows.
    most_ = slots_per_phase();
    if (most_.floats > 0)
      s_ << "  __shared__ float smf[" << 2 * most_.floats * FusedLayout::kMaxRowsPerBlock * 32 << "];\n";
    if (most_.ints > 0)
      s_ << "  __shared__ i64 smi[" << 2 * most_.ints * FusedLayout::kMaxRowsPerBlock * 32 << "];\n";
    s_ << "  const i64 rows = a.v[" << L_.misc_word(FusedLayout::kMiscRows) << "], L = a.v["
       << L_.misc_word(FusedLayout::kMiscRowLen) << "];\n";
    s_ << "  const int rlo = (int)a.v[" << L_.misc_word(FusedLayout::kMiscRowLo) << "], elo = (int)a.v["
       << L_.misc_word(FusedLayout::kMiscRedLo) << "];\n";
    if (L_.vec_width > 0 && (!fixed || fixed->vector)) {
      s_ << "  if (a.v[" << L_.misc_word(FusedLayout::kMiscVector) << "]) {\n";
      s_ << "  if (L <= " << per_vector * L_.vec_width << " * (i64)blockDim.x) {\n";
      row_loop(RowMode::kVector);
      s_ << "  }\n";
      row_loop(RowMode::kVectorStream);
      s_ << "  }\n";
    }
    if (!L_.has_iota) {
      s_ << "  if (L <= " << per_scalar << " * (i64)blockDim.x) {\n";
      row_loop(RowMode::kCached);
      s_ << "  }\n";
    }
    row_loop(RowMode::kPlain);
  }

  // Every thread of a block runs the same number of row iterations (a row's reductions have a
  // barrier); threads past the last row recompute it and store nothing. `per`: the row-cache
  // slots a thread has. `early`: every block-row takes at most one row, so the inputs no kernel
  // writes and every row shares (a norm's weight) are loaded into registers once, before the
  // wait for the previous kernel: off the row's chain of dependent loads.
  void emit_row_loop(RowMode mode, int per, bool early) {
    const int rf = L_.reduce_from, rank = L_.rank;
    const bool vec = mode == RowMode::kVector || mode == RowMode::kVectorStream;
    const bool cached = mode == RowMode::kVector || mode == RowMode::kCached;
    const std::string ind = "    ", in2 = ind + "  ", in3 = in2 + "  ";
    if (vec) {
      s_ << "  const i64 U = L / " << L_.vec_width << ";\n";
      for (int k = 0; k < L_.num_inputs; ++k)
        s_ << "  const bool s" << k << " = a.v[" << L_.stride_word(k, rank - 1) << "] != 0;\n";
    }
    const std::vector<int32_t> loaded = inputs_loaded(element_closure(f_, an_.row_level, all_element_roots()));
    // Kept in registers for the whole row: 1 loaded with the row, 2 loaded once early.
    std::vector<uint8_t> in_regs(L_.num_inputs, 0);
    for (int32_t k : loaded) in_regs[k] = cached && (!vec || varies_by_row(k));
    const std::string w = std::to_string(L_.vec_width);
    auto pack_at = [&](int32_t k, const std::string& base) {
      std::string ks = std::to_string(k);
      return "load_pack<" + std::string(storage_type(an_.input_dtype[k])) + ", " + w + ">(in" + ks + base +
             " + (s" + ks + " ? (i64)u * " + w + " : 0), s" + ks + ")";
    };
    if (early && vec) {
      for (int32_t k : loaded) {
        if (varies_by_row(k) || !p_.is_constant(k_.inputs[k])) continue;
        in_regs[k] = 2;
        s_ << "  " << pack_type(an_.input_dtype[k]) << " c" << k << "[" << per << "];\n";
        s_ << "#pragma unroll\n  for (int e = 0; e < " << per << "; ++e) {\n";
        s_ << "    const int u = threadIdx.x + e * (int)blockDim.x;\n";
        s_ << "    if (u < U) c" << k << "[e] = " << pack_at(k, "") << ";\n  }\n";
      }
    }
    s_ << "  enter_after_previous();\n";
    s_ << "  int it = 0;\n";
    s_ << "  for (i64 row0 = (i64)blockIdx.x * blockDim.y; row0 < rows; row0 += (i64)gridDim.x * blockDim.y, ++it) {\n";
    s_ << ind << "const bool live = row0 + threadIdx.y < rows;\n";
    s_ << ind << "const i64 row = live ? row0 + threadIdx.y : rows - 1;\n";
    declare_offsets("b", "", ind);
    declare_coords(0, rf, ind);
    s_ << ind << "{\n";
    emit_decompose("i64", "row", 0, rf, "rlo", "b", ind + "  ");
    s_ << ind << "}\n";

    // One pass over the row's elements: `body(load)` emits the per-element code.
    // Around the wide path's per-element loop, `around(ind, false)` and `around(ind, true)` emit
    // code before and after it (packing the outputs).
    using Emit = std::function<void(const std::string&)>;
    using Around = std::function<void(const std::string&, bool)>;
    auto pass = [&](const std::vector<int32_t>& regs, const Emit& body, const Around& around = nullptr) {
      if (cached) {
        s_ << "#pragma unroll\n" << ind << "for (int e = 0; e < " << per << "; ++e) {\n";
        s_ << in2 << "const " << (vec ? "int u" : "i64 j") << " = threadIdx.x + e * " << (vec ? "(int)" : "(i64)")
           << "blockDim.x;\n" << in2 << "if (" << (vec ? "u < U" : "j < L") << ") {\n";
      } else if (vec) {
        s_ << ind << "for (i64 u = threadIdx.x; u < U; u += blockDim.x) {\n" << in2 << "{\n";
      } else {
        s_ << ind << "for (i64 j = threadIdx.x; j < L; j += blockDim.x) {\n" << in2 << "{\n";
        declare_offsets("o", "b", in3);
        declare_coords(rf, rank, in3);
        s_ << in3 << "{\n";
        emit_decompose("i64", "j", rf, rank, "elo", "o", in3 + "  ");
        s_ << in3 << "}\n";
      }
      if (vec) {
        for (int32_t k : inputs_loaded(regs))
          if (!in_regs[k])
            s_ << in3 << "const " << pack_type(an_.input_dtype[k]) << " p" << k << " = "
               << pack_at(k, " + b" + std::to_string(k)) << ";\n";
        if (around) around(in3, false);
        s_ << "#pragma unroll\n" << in3 << "for (int w = 0; w < " << w << "; ++w) {\n";
        body(in3 + "  ");
        s_ << in3 << "}\n";
        if (around) around(in3, true);
      } else {
        body(in3);
      }
      s_ << in2 << "}\n" << ind << "}\n";
    };
    std::function<std::string(int32_t)> load = gather_load("o");
    if (vec) {
      load = [&](int32_t k) {
        std::string ks = std::to_string(k);
        return load_expr(an_.input_dtype[k], (in_regs[k] ? "c" + ks + "[e]" : "p" + ks) + ".v[w]");
      };
    } else if (cached) {
      load = [](int32_t k) { return "c" + std::to_string(k) + "[e]"; };
    }
    if (cached) {  // load the row once
      for (int k = 0; k < L_.num_inputs; ++k) {
        if (in_regs[k] != 1) continue;
        if (vec) s_ << ind << pack_type(an_.input_dtype[k]) << " c" << k << "[" << per << "];\n";
        else s_ << ind << ctype(compute_kind(an_.input_dtype[k])) << " c" << k << "[" << per << "];\n";
      }
      s_ << "#pragma unroll\n" << ind << "for (int e = 0; e < " << per << "; ++e) {\n";
      if (vec) {
        s_ << in2 << "const int u = threadIdx.x + e * (int)blockDim.x;\n" << in2 << "if (u < U) {\n";
        for (int k = 0; k < L_.num_inputs; ++k)
          if (in_regs[k] == 1) s_ << in3 << "c" << k << "[e] = " << pack_at(k, " + b" + std::to_string(k)) << ";\n";
      } else {
        s_ << in2 << "const i64 j = threadIdx.x + e * (i64)blockDim.x;\n" << in2 << "if (j < L) {\n";
        declare_offsets("o", "b", in3);
        s_ << in3 << "{\n";
        emit_decompose("i64", "j", rf, rank, "elo", "o", in3 + "  ");
        s_ << in3 << "}\n";
        for (int k = 0; k < L_.num_inputs; ++k)
          if (in_regs[k] == 1) s_ << in3 << "c" << k << "[e] = " << gather_load("o")(k) << ";\n";
      }
      s_ << in2 << "}\n" << ind << "}\n";
    }
    const std::vector<RowPass> passes = plan_row_passes(cached);
    const std::string slot = vec ? "k[e][w]" : "k[e]";
    bool any_cache = false;
    for (const RowPass& p : passes) any_cache |= p.writes >= 0;
    if (any_cache) s_ << ind << "float k[" << per << "]" << (vec ? "[" + w + "]" : "") << ";\n";
    for (const RowPass& p : passes) {
      for (int32_t r : p.reds) s_ << ind << acc_type(r) << " acc" << r << " = " << identity(r) << ";\n";
      auto body = [&](const std::string& bi) {
        emit_elements(p.regs, load, bi, p.reads, slot);
        if (p.writes >= 0) s_ << bi << slot << " = " << reg(p.writes) << ";\n";
        for (int32_t r : p.reds)
          s_ << bi << "acc" << r << " = rc<" << reduce_code(f_.instrs[r].op) << ">(acc" << r << ", ("
             << acc_type(r) << ")" << reg(f_.instrs[r].a) << ");\n";
        if (!p.reds.empty()) return;
        for (int o = 0; o < L_.num_outputs; ++o) {
          if (L_.output_row_level[o]) continue;
          std::string v = store_expr(out_dtype(o), reg(f_.output_regs[o]));
          if (vec) s_ << bi << "q" << o << ".v[w] = " << v << ";\n";
          else s_ << bi << "if (live) out" << o << "[row * L + j] = " << v << ";\n";
        }
      };
      // The wide path fills one pack per output and stores it once.
      auto around = [&](const std::string& bi, bool after) {
        for (int o = 0; o < L_.num_outputs; ++o) {
          if (L_.output_row_level[o]) continue;
          if (after)
            s_ << bi << "if (live) *(" << pack_type(out_dtype(o)) << "*)(out" << o << " + row * L + (i64)u * " << w
               << ") = q" << o << ";\n";
          else
            s_ << bi << pack_type(out_dtype(o)) << " q" << o << ";\n";
        }
      };
      pass(p.regs, body, p.reds.empty() && vec ? Around(around) : Around());
      // The phase's reductions share one barrier, and their slots alternate with the phases'.
      Slots taken;
      std::vector<std::string> slot_of(f_.instrs.size());
      for (int32_t r : p.reds) {
        const bool flt = acc_type(r) == "float";
        const int per_area = flt ? most_.floats : most_.ints, j = flt ? taken.floats++ : taken.ints++;
        slot_of[static_cast<size_t>(r)] = std::string(flt ? "smf" : "smi") + " + ((((it * " +
                                          std::to_string(an_.num_phases) + " + " + std::to_string(an_.phase[r] - 1) +
                                          ") & 1) * " + std::to_string(per_area) + " + " + std::to_string(j) + ") * " +
                                          std::to_string(FusedLayout::kMaxRowsPerBlock) + " + threadIdx.y) * 32";
      }
      auto slots = [&](int32_t r) { return slot_of[static_cast<size_t>(r)]; };
      for (int32_t r : p.reds)
        s_ << ind << "acc" << r << " = warp_allreduce<" << reduce_code(f_.instrs[r].op) << ">(acc" << r << ");\n";
      if (!p.reds.empty()) {
        s_ << ind << "if (blockDim.x > 32) {\n";
        for (int32_t r : p.reds) s_ << in2 << "row_share(acc" << r << ", " << slots(r) << ");\n";
        s_ << in2 << "__syncthreads();\n";
        for (int32_t r : p.reds)
          s_ << in2 << "acc" << r << " = row_combine<" << reduce_code(f_.instrs[r].op) << ">(" << slots(r) << ");\n";
        s_ << ind << "}\n";
      }
      for (int32_t r : p.reds) {
        const Instr& in = f_.instrs[r];
        std::string v = an_.kind[r] == CKind::kBool
                            ? "(acc" + std::to_string(r) + " != 0)"
                            : narrow_expr(in.dtype, std::string("(") + rtype(r) + ")acc" + std::to_string(r));
        s_ << ind << "const " << rtype(r) << " " << reg(r) << " = " << v << ";\n";
      }
      if (!p.reds.empty()) emit_row_regs(an_.phase[p.reds[0]], ind);
    }
    bool any_row = false;
    for (int o = 0; o < L_.num_outputs; ++o) any_row |= L_.output_row_level[o] != 0;
    if (any_row) {
      s_ << ind << "if (live && threadIdx.x == 0) {\n";
      for (int o = 0; o < L_.num_outputs; ++o)
        if (L_.output_row_level[o])
          s_ << in2 << "out" << o << "[row] = " << store_expr(out_dtype(o), reg(f_.output_regs[o])) << ";\n";
      s_ << ind << "}\n";
    }
    s_ << "  }\n";
  }

  // The most reductions one phase has, by accumulator type (each needs its own slots).
  struct Slots {
    int floats = 0, ints = 0;
  };
  Slots slots_per_phase() const {
    std::vector<Slots> per(static_cast<size_t>(an_.num_phases) + 1);
    Slots most;
    for (int32_t r = 0; r < static_cast<int32_t>(f_.instrs.size()); ++r) {
      if (!is_reduction(f_.instrs[r].op)) continue;
      Slots& s = per[static_cast<size_t>(an_.phase[r])];
      (acc_type(r) == "float" ? s.floats : s.ints) += 1;
      most.floats = std::max(most.floats, s.floats);
      most.ints = std::max(most.ints, s.ints);
    }
    return most;
  }

  // Every register an element-level pass may need: reduction operands and element outputs.
  std::vector<int32_t> all_element_roots() const {
    std::vector<int32_t> roots = element_output_roots();
    for (const Instr& in : f_.instrs)
      if (is_reduction(in.op)) roots.push_back(in.a);
    return roots;
  }

  std::optional<FixedRows> fixed_;  // a reduction's rows, where every launch has the same length
  Slots most_;                      // the slots each of the two areas holds (emit_reduction_body)
  const Program& p_;
  const Kernel& k_;
  const FusedProgram& f_;
  const Analysis& an_;
  const FusedLayout& L_;
  SourceWriter s_;
};

}  // namespace

StatusOr<GeneratedKernel> generate_fused(const Program& program, const Kernel& kernel) {
  TRIPY_ASSIGN_OR_RETURN(Analysis an, analyze(program, kernel));
  return Emitter(program, kernel, an).emit();
}

}  // namespace tripy::rt::cuda
