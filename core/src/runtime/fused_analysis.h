// The one analysis of a fused kernel's program (rt::FusedProgram): whether it is well formed
// (indices, operand dtypes, the kinds each op is defined on, output ranks) and the per-register
// facts every consumer needs. The Program validator, the CPU interpreter's planner and the CUDA
// code generator all call it, so they accept the same programs and word errors alike.
#pragma once

#include <string>
#include <vector>

#include "runtime/program.h"

namespace tripy::rt {

struct FusedAnalysis {
  // Per register (instruction).
  std::vector<ComputeKind> kind;          // of its result
  std::vector<ComputeKind> operand_kind;  // of a and b (kSelect: b and c); the result's without operands
  // 1: one value per row (domain[0, reduce_from)): reductions, constants and ops on those only.
  std::vector<uint8_t> row_level;
  std::vector<int32_t> phase;  // how many reductions, one after another, it waits for
  int32_t num_phases = 0;
  bool has_reduction = false, has_iota = false;
  // Per output: whether it is row-level (a reduction's per-row result, in a buffer of rank
  // reduce_from); element-level outputs have the domain's shape.
  std::vector<uint8_t> output_row_level;
  std::vector<DType> input_dtype;  // per kernel input
};

// Analyses kFused kernel `k` of `p`. An error's message says what is wrong, naming the
// instruction ("instruction 3 (mul) reads operands of different dtypes: float32 and int32");
// callers prefix the kernel and choose the status code.
StatusOr<FusedAnalysis> analyze_fused_program(const Program& p, const Kernel& k);

}  // namespace tripy::rt
