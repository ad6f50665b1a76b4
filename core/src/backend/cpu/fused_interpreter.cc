// Runs a fused elementwise/row-reduction kernel as a vectorised loop over cache-sized tiles:
// each instruction streams over a tile of up to kTile elements held in per-register scratch.
// Rows (indices over the non-reduced axes) are independent and are spread over the thread pool.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/fused_plan.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

using rt::EwOp;

AxisGroup coalesce(const std::vector<int64_t>& dom, const std::vector<int64_t>& strides,
                   int num_streams, int from, int to) {
  const int rank = static_cast<int>(dom.size());
  std::vector<int> keep;
  for (int a = from; a < to; ++a)
    if (dom[a] != 1) keep.push_back(a);
  AxisGroup g;
  std::vector<std::vector<int64_t>> st(num_streams);
  for (int a : keep) {
    g.numel *= dom[a];
    bool merge = !g.dims.empty();
    for (int s = 0; merge && s < num_streams; ++s)
      merge = st[s].back() == strides[s * rank + a] * dom[a];
    if (merge) {
      g.dims.back() *= dom[a];
      for (int s = 0; s < num_streams; ++s) st[s].back() = strides[s * rank + a];
    } else {
      g.dims.push_back(dom[a]);
      for (int s = 0; s < num_streams; ++s) st[s].push_back(strides[s * rank + a]);
    }
  }
  if (g.dims.empty()) {  // a scalar group: one axis of size 1 keeps the loops uniform
    g.dims.push_back(1);
    for (auto& v : st) v.push_back(0);
  }
  for (auto& v : st) g.strides.insert(g.strides.end(), v.begin(), v.end());
  return g;
}

// Per-thread scratch, reused across kernels so small kernels allocate nothing.
struct Scratch {
  uint8_t* tiles = nullptr;
  size_t bytes = 0;
  ~Scratch() { std::free(tiles); }
  uint8_t* get(size_t need) {
    if (need > bytes) {
      std::free(tiles);
      bytes = std::max(need, bytes * 2);
      tiles = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
    }
    return tiles;
  }
};
thread_local Scratch t_scratch;

// A worker's per-row state, likewise per thread: a worker is made per run (per chunk of one), and
// a small run allocating its vectors anew costs as much as its arithmetic.
struct WorkerState {
  std::vector<Scalar> row_vals;
  std::vector<const void*> direct;  // per register: its values read in place from an input, or null
  std::vector<int64_t> row_base, coord, seg_off;
  std::vector<int> seg_dst, seg_len;
};
thread_local WorkerState t_worker;

class Worker {
 public:
  Worker(const FusedPlan& plan, const FusedLayout& layout)
      : plan_(plan), f_(*plan.fused), lay_(layout),
        tiles_(t_scratch.get(static_cast<size_t>(std::max(1, plan.num_slots)) * kTileBytes)),
        row_vals_(t_worker.row_vals), direct_(t_worker.direct), row_base_(t_worker.row_base), coord_(t_worker.coord),
        seg_off_(t_worker.seg_off), seg_dst_(t_worker.seg_dst), seg_len_(t_worker.seg_len) {
    row_vals_.assign(f_.instrs.size(), Scalar{});
    direct_.assign(f_.instrs.size(), nullptr);
    row_base_.assign(static_cast<size_t>(layout.num_streams), 0);
    coord_.assign(layout.tiles.dims.size(), 0);
  }

  // Evaluates row `row` over tile-space elements [begin, end) (the whole row when reducing).
  void run_row(int64_t row, int64_t begin, int64_t end) {
    set_row_base(row);
    const int32_t n = static_cast<int32_t>(f_.instrs.size());
    const int splat_n = static_cast<int>(std::min<int64_t>(kTile, end - begin));
    for (int32_t r = 0; r < n; ++r) {
      if (!plan_.row_level[r]) continue;
      const rt::Instr& in = f_.instrs[r];
      void* dst = &row_vals_[r];
      if (in.op == EwOp::kConst) {
        const_value(in.dtype, in.imm, dst);
      } else if (plan_.pass_of[r] >= 0) {
        const FusedPass& pass = plan_.passes[plan_.pass_of[r]];
        Scalar acc;
        reduce_init(in.op, plan_.operand_kind[r], acc);
        for (int64_t t = begin; t < end; t += kTile) {
          int len = static_cast<int>(std::min<int64_t>(kTile, end - t));
          run_pass(pass, t, len);
          reduce_tile(in.op, plan_.operand_kind[r], values(pass, in.a), len, acc);
        }
        reduce_finish(plan_.kind[r], in.dtype, acc, dst);
      } else {
        apply_op(in, plan_.operand_kind[r], 1, dst, &row_vals_[in.a],
                 in.b >= 0 ? &row_vals_[in.b] : nullptr, in.c >= 0 ? &row_vals_[in.c] : nullptr);
      }
      if (plan_.row_slot[r] >= 0) splat_span(plan_.kind[r], dst, splat_n, tile(plan_.row_slot[r]));
    }
    const FusedPass& final_pass = plan_.passes.back();
    for (int64_t t = begin; t < end; t += kTile) {
      int len = static_cast<int>(std::min<int64_t>(kTile, end - t));
      run_pass(final_pass, t, len);
      const int64_t out_at = row * lay_.tiles.numel + t;
      for (size_t o = 0; o < plan_.outputs.size(); ++o) {
        const FusedOutput& fo = plan_.outputs[o];
        if (!fo.row_level)
          store_span(f_.instrs[fo.reg].dtype, lay_.out[o], out_at, values(final_pass, fo.reg), len);
      }
    }
    for (size_t o = 0; o < plan_.outputs.size(); ++o) {
      const FusedOutput& fo = plan_.outputs[o];
      if (fo.row_level) store_span(f_.instrs[fo.reg].dtype, lay_.out[o], row, &row_vals_[fo.reg], 1);
    }
  }

 private:
  uint8_t* tile(int32_t slot) { return tiles_ + static_cast<size_t>(slot) * kTileBytes; }

  // Register `r`'s values for the current tile of `pass`: in place in its input, or its tile.
  const void* values(const FusedPass& pass, int32_t r) {
    return direct_[r] != nullptr ? direct_[r] : tile(pass.slot[r]);
  }

  // Whether a contiguous load of `dtype` is its compute kind's bytes as they are (load_span would
  // only copy them): such a register is read in place instead of copied into its tile.
  static bool loads_in_place(DType dtype) {
    return dtype == DType::kFloat32 || dtype == DType::kInt32 || dtype == DType::kInt64;
  }

  void set_row_base(int64_t row) {
    const AxisGroup& g = lay_.rows;
    const size_t m = g.dims.size();
    std::fill(row_base_.begin(), row_base_.end(), 0);
    for (size_t j = m; j-- > 0;) {
      int64_t c = row % g.dims[j];
      row /= g.dims[j];
      for (int s = 0; s < lay_.num_streams; ++s) row_base_[s] += c * g.strides[s * m + j];
    }
  }

  // Splits tile [t, t + len) into runs along the innermost coalesced axis.
  void make_segments(int64_t t, int len) {
    const AxisGroup& g = lay_.tiles;
    const size_t m = g.dims.size();
    const int S = lay_.num_streams;
    seg_dst_.clear();
    seg_len_.clear();
    seg_off_.clear();
    const int64_t inner = g.dims[m - 1];
    for (int64_t p = t; p < t + len;) {
      int64_t c_in = p % inner, q = p / inner;
      int64_t run = std::min(inner - c_in, t + len - p);
      for (size_t j = m - 1; j-- > 0;) {
        coord_[j] = q % g.dims[j];
        q /= g.dims[j];
      }
      seg_dst_.push_back(static_cast<int>(p - t));
      seg_len_.push_back(static_cast<int>(run));
      for (int s = 0; s < S; ++s) {
        int64_t off = row_base_[s] + c_in * g.strides[s * m + m - 1];
        for (size_t j = 0; j + 1 < m; ++j) off += coord_[j] * g.strides[s * m + j];
        seg_off_.push_back(off);
      }
      p += run;
    }
  }

  void run_pass(const FusedPass& pass, int64_t t, int len) {
    bool segments_ready = false;
    const int S = lay_.num_streams;
    const size_t m = lay_.tiles.dims.size();
    for (int32_t r : pass.instrs) {
      const rt::Instr& in = f_.instrs[r];
      uint8_t* dst = tile(pass.slot[r]);
      direct_[r] = nullptr;
      if (in.op == EwOp::kLoad || in.op == EwOp::kIota) {
        const int s = plan_.stream_of[r];
        const int64_t inner_stride = lay_.tiles.strides[s * m + m - 1];
        if (m == 1) {  // fully coalesced tile space: the tile is one run (the common case)
          const int64_t off = row_base_[s] + t * inner_stride;
          if (in.op == EwOp::kLoad && inner_stride == 1 && loads_in_place(in.dtype))
            direct_[r] = static_cast<const uint8_t*>(lay_.base[s]) + off * dtype_size(in.dtype);
          else if (in.op == EwOp::kLoad) load_span(in.dtype, lay_.base[s], off, inner_stride, len, dst);
          else iota_span(plan_.kind[r], off, inner_stride, len, dst);
          continue;
        }
        if (!segments_ready) make_segments(t, len);
        segments_ready = true;
        const int esize = ckind_size(plan_.kind[r]);
        for (size_t k = 0; k < seg_dst_.size(); ++k) {
          uint8_t* d = dst + static_cast<size_t>(seg_dst_[k]) * esize;
          if (in.op == EwOp::kLoad)
            load_span(in.dtype, lay_.base[s], seg_off_[k * S + s], inner_stride, seg_len_[k], d);
          else
            iota_span(plan_.kind[r], seg_off_[k * S + s], inner_stride, seg_len_[k], d);
        }
        continue;
      }
      auto operand = [&](int32_t o) -> const void* { return o >= 0 ? values(pass, o) : nullptr; };
      apply_op(in, plan_.operand_kind[r], len, dst, operand(in.a), operand(in.b), operand(in.c));
    }
  }

  const FusedPlan& plan_;
  const rt::FusedProgram& f_;
  const FusedLayout& lay_;
  uint8_t* tiles_;
  std::vector<Scalar>& row_vals_;
  std::vector<const void*>& direct_;
  std::vector<int64_t>& row_base_;
  std::vector<int64_t>& coord_;
  std::vector<int64_t>& seg_off_;
  std::vector<int>& seg_dst_;
  std::vector<int>& seg_len_;
};

// Below this many element-instructions a kernel runs on the calling thread.
constexpr int64_t kParallelWork = 1 << 17;

// The layout of a run with these sizes (args.slots), checked against the plan: everything but
// the data pointers, which change from run to run.
Status plan_layout(const KernelArgs& args, FusedPlan& plan) {
  const rt::FusedProgram& f = *plan.fused;
  const int rank = plan.rank;
  std::vector<int64_t> dom(rank);
  for (int a = 0; a < rank; ++a) dom[a] = args.slot(f.domain[a]);

  // Stream strides over the domain (inputs, then iota axes).
  FusedLayout lay;
  lay.num_streams = plan.num_inputs + static_cast<int>(plan.iota_axes.size());
  std::vector<int64_t> strides(static_cast<size_t>(lay.num_streams) * rank, 0);
  std::vector<int64_t> offsets;
  for (int i = 0; i < plan.num_inputs; ++i) {
    const View& v = *args.inputs[i];
    const auto& axes = f.input_axes[i];
    if (v.shape.size() != axes.size())
      return kernel_error(args, "input " + std::to_string(i) + " has rank " +
                                    std::to_string(v.shape.size()) + ", expected " +
                                    std::to_string(axes.size()), StatusCode::kInternal);
    // A slice read in place: its extent runs along the domain with the buffer's strides.
    const rt::FusedInputView w = rt::fused_input_view(*args.program, *args.kernel, static_cast<size_t>(i), *args.slots);
    for (size_t d = v.shape.size(); d-- > 0;) {
      int ax = axes[d];
      if (w.sizes[d] == dom[ax]) strides[i * rank + ax] += w.strides[d];
      else if (w.sizes[d] != 1)
        return kernel_error(args, "input " + std::to_string(i) + " dim " + std::to_string(d) +
                                      " has size " + std::to_string(w.sizes[d]) +
                                      " but the domain has " + std::to_string(dom[ax]));
    }
    offsets.push_back(w.offset * dtype_size(v.dtype));
  }
  for (size_t k = 0; k < plan.iota_axes.size(); ++k)
    strides[(plan.num_inputs + k) * rank + plan.iota_axes[k]] = 1;
  for (size_t r = 0; r < f.instrs.size(); ++r)
    if (f.instrs[r].op == EwOp::kLoad && args.inputs[f.instrs[r].a]->dtype != f.instrs[r].dtype)
      return kernel_error(args, "instruction %" + std::to_string(r) + " loads " +
                                    std::string(dtype_name(f.instrs[r].dtype)) + " from a " +
                                    std::string(dtype_name(args.inputs[f.instrs[r].a]->dtype)) +
                                    " buffer", StatusCode::kInternal);

  const int split = plan.has_reduction ? f.reduce_from : 0;
  lay.rows = coalesce(dom, strides, lay.num_streams, 0, split);
  lay.tiles = coalesce(dom, strides, lay.num_streams, split, rank);
  const int64_t rows = lay.rows.numel, row_len = lay.tiles.numel;
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    int64_t want = plan.outputs[o].row_level ? rows : rows * row_len;
    if (args.outputs[o]->numel() != want)
      return kernel_error(args, "output " + std::to_string(o) + " has " +
                                    std::to_string(args.outputs[o]->numel()) +
                                    " elements, the domain gives " + std::to_string(want),
                          StatusCode::kInternal);
  }
  lay.base.resize(static_cast<size_t>(plan.num_inputs));
  lay.out.resize(plan.outputs.size());
  plan.layout = std::move(lay);
  plan.layout_offsets = std::move(offsets);
  plan.layout_slots = *args.slots;
  plan.layout_valid = true;
  return ok_status();
}

}  // namespace

Status run_fused(const KernelArgs& args, KernelState& state) {
  FusedPlan& plan = static_cast<FusedPlan&>(state);
  if (!plan.layout_valid || plan.layout_slots != *args.slots) {
    plan.layout_valid = false;
    TRIPY_RETURN_IF_ERROR(plan_layout(args, plan));
  }
  FusedLayout& lay = plan.layout;
  for (int i = 0; i < plan.num_inputs; ++i)
    lay.base[static_cast<size_t>(i)] = static_cast<const uint8_t*>(args.inputs[i]->data) + plan.layout_offsets[i];
  for (size_t o = 0; o < plan.outputs.size(); ++o) lay.out[o] = args.outputs[o]->data;
  const int64_t rows = lay.rows.numel, row_len = lay.tiles.numel;
  if (rows == 0) return ok_status();

  const int64_t work = rows * std::max<int64_t>(row_len, 1) * plan.cost_per_element;
  if (plan.has_reduction) {
    auto body = [&](int64_t r0, int64_t r1) {
      Worker w(plan, lay);
      for (int64_t r = r0; r < r1; ++r) w.run_row(r, 0, row_len);
    };
    if (work < kParallelWork || rows == 1) body(0, rows);
    else parallel_for(rows, std::max<int64_t>(1, kParallelWork / (work / rows)), body);
  } else {
    // One row: split the elements into tile-aligned chunks.
    const int64_t ntiles = (row_len + kTile - 1) / kTile;
    auto body = [&](int64_t t0, int64_t t1) {
      Worker w(plan, lay);
      w.run_row(0, t0 * kTile, std::min(row_len, t1 * kTile));
    };
    if (work < kParallelWork) body(0, ntiles);
    else parallel_for(ntiles, std::max<int64_t>(1, kParallelWork / (plan.cost_per_element * kTile)), body);
  }
  return ok_status();
}

const CpuKernel kFusedKernel = {prepare_fused, [](const KernelArgs& args, KernelState* state) { return run_fused(args, *state); }};

}  // namespace tripy::cpu
