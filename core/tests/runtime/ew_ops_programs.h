// Programs of one elementwise op for the primitive table's tests (ew_ops_test.cc, and the CUDA
// generator's, backend/cuda/codegen/cuda_ew_table_test.cc).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "../backend/cpu_test_util.h"

namespace tripy::cpu::testing {

using rt::ComputeKind;
using rt::EwForm;

inline bool tiled(EwForm f) {
  return f == EwForm::kUnary || f == EwForm::kBinary || f == EwForm::kCompare || f == EwForm::kSelect;
}

// One dtype per compute kind (int64 too, through its own loop).
inline constexpr DType kKindDTypes[] = {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kBool};

// A one-instruction fused kernel: op over loads of `dtype` (select: a bool condition first).
inline Program one_op_program(rt::EwOp op, DType dtype, ProgramBuilder& b, std::vector<Tensor>& args) {
  const EwForm form = rt::ew_form(op);
  const int n = rt::ew_num_operands(op);
  std::vector<int32_t> ids;
  std::vector<Instr> instrs;
  for (int i = 0; i < n; ++i) {
    const DType t = form == EwForm::kSelect && i == 0 ? DType::kBool : dtype;
    Tensor x = Tensor::empty_host(t, {4});
    std::memset(x.data(), 1, static_cast<size_t>(x.nbytes()));  // nonzero everywhere (divisors)
    args.push_back(x);
    ids.push_back(b.input(t, {4}));
    instrs.push_back(ins(rt::EwOp::kLoad, t, i));
  }
  const DType out = form == EwForm::kCompare ? DType::kBool : dtype;
  instrs.push_back(ins(op, out, 0, n > 1 ? 1 : -1, n > 2 ? 2 : -1));
  Kernel& k = b.kernel(KernelKind::kFused, std::string("fused_") + rt::ew_op_name(op), ids, {b.output(out, {4})});
  k.fused.domain = b.dims({4});
  k.fused.reduce_from = 1;
  k.fused.input_axes.assign(ids.size(), {0});
  k.fused.instrs = instrs;
  k.fused.output_regs = {n};
  // What validate_program also needs: the input specs and the shape program of the one slot.
  Program p = b.program();
  p.shape_program = {{rt::ShapeInstr::Op::kConst, 4, 0}};
  for (const Tensor& t : args) {
    rt::InputSpec in;
    in.name = "x" + std::to_string(p.inputs.size());
    in.dtype = t.dtype();
    in.dim_min = in.dim_opt = in.dim_max = {4};
    p.inputs.push_back(in);
    p.input_shapes.push_back({0});
  }
  return p;
}

}  // namespace tripy::cpu::testing
