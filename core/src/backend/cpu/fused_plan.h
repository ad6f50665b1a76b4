// The load-time analysis of a FusedProgram: which registers are per row or per element, which
// element instructions each pass (one per reduction, one final) recomputes, and which tile slot
// holds each register, so a run does no analysis beyond shapes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/fused_ops.h"
#include "backend/cpu/kernels.h"

namespace tripy::cpu {

// One walk over a row's elements in tiles, computing `instrs` (element-level, in order).
struct FusedPass {
  std::vector<int32_t> instrs;
  // Per register: its tile slot during this pass (-1 when the pass does not read it). Row-level
  // registers that element code reads have fixed slots, splatted once per row.
  std::vector<int32_t> slot;
  int32_t num_slots = 0;  // tile slots this pass needs beyond the row slots
};

struct FusedOutput {
  int32_t reg = 0;
  bool row_level = false;  // stored once per row, else once per element
};

// Strides of every stream (kernel inputs, then one per iota axis) over a coalesced group of
// domain axes: size-1 axes are dropped and neighbours that step evenly in all streams merged.
struct AxisGroup {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // [stream * dims.size() + axis]
  int64_t numel = 1;
};

// How a run walks the domain: rows (the non-reduced axes) and the tiles of a row.
struct FusedLayout {
  AxisGroup rows, tiles;
  int num_streams = 0;
  std::vector<const void*> base;  // per input stream
  std::vector<void*> out;         // per output
};

class FusedPlan final : public KernelState {
 public:
  const rt::FusedProgram* fused = nullptr;
  int32_t rank = 0;
  bool has_reduction = false;
  int32_t num_inputs = 0;
  std::vector<CKind> kind;           // per register: its compute kind
  std::vector<CKind> operand_kind;   // per register: the kind its operands are computed in
  std::vector<uint8_t> row_level;    // per register
  std::vector<int32_t> pass_of;      // per reduction register: index into passes, else -1
  std::vector<FusedPass> passes;     // one per reduction, in order, then the final pass
  std::vector<int32_t> row_slot;     // per row-level register read by element code, else -1
  int32_t num_slots = 0;             // row slots + the largest pass
  std::vector<FusedOutput> outputs;
  std::vector<int32_t> iota_axes;    // domain axes some kIota reads (each becomes a stream)
  std::vector<int32_t> stream_of;    // per register: stream index for kLoad/kIota, else -1
  int64_t cost_per_element = 1;      // instructions evaluated per element, for threading

  // The last run's layout, for its sizes (`layout_slots`): a run with the same sizes (each call of
  // an eager program, of a compiled one at one shape) only sets the data pointers. Runs of one
  // loaded program take turns (CpuLoadedProgram's lock), so they share it without one of their own.
  bool layout_valid = false;
  std::vector<int64_t> layout_slots;
  std::vector<int64_t> layout_offsets;  // per input: its window's byte offset
  FusedLayout layout;
};

}  // namespace tripy::cpu
