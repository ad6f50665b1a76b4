// Lowers symbolic dims into the Program's shape program, one slot per distinct expression.
#include "compiler/shape_slots.h"

namespace tripy::compiler {

using Op = rt::ShapeInstr::Op;

rt::Slot ShapeSlots::emit(Op op, int64_t a, int64_t b) {
  program_.push_back(rt::ShapeInstr{op, a, b});
  return static_cast<rt::Slot>(program_.size() - 1);
}

rt::Slot ShapeSlots::bind(int id, rt::Slot s) {
  const size_t i = static_cast<size_t>(id);
  if (id < 0 || i >= symbol_slot_.size()) return -1;
  if (symbol_slot_[i] >= 0) return symbol_slot_[i];
  symbol_slot_[i] = s;
  const Dim dim = Dim::symbol(id);
  memo_[dim.hash()].emplace_back(dim, s);
  return -1;
}

rt::Slot ShapeSlots::input_dim(int input, int d, const Dim& dim, rt::Slot* bound_before) {
  rt::Slot s = emit(Op::kInputDim, input, d);
  *bound_before = dim.op() == DimOp::kSym ? bind(dim.symbol_id(), s) : -1;
  return s;
}

rt::Slot ShapeSlots::input_value(int input, int symbol, rt::Slot* bound_before) {
  rt::Slot s = emit(Op::kInputValue, input, 0);
  *bound_before = bind(symbol, s);
  return s;
}

StatusOr<rt::Slot> ShapeSlots::slot(const Dim& d) {
  auto& bucket = memo_[d.hash()];
  for (const auto& [dim, s] : bucket) {
    if (dim.same_as(d)) return s;
  }
  rt::Slot s;
  switch (d.op()) {
    case DimOp::kConst: s = emit(Op::kConst, d.static_value(), 0); break;
    case DimOp::kSym: {
      size_t id = static_cast<size_t>(d.symbol_id());
      if (id >= symbol_slot_.size() || symbol_slot_[id] < 0) {
        return internal_error("dynamic dim '" + d.str(&symbols_) +
                              "' is neither the size of an input dim nor a shape value, so it cannot be computed "
                              "at run time");
      }
      s = symbol_slot_[id];
      break;
    }
    default: {
      TRIPY_ASSIGN_OR_RETURN(rt::Slot a, slot(d.lhs()));
      TRIPY_ASSIGN_OR_RETURN(rt::Slot b, slot(d.rhs()));
      static const Op kOps[] = {Op::kConst, Op::kInputDim, Op::kAdd, Op::kSub, Op::kMul,
                                Op::kFloorDiv, Op::kCeilDiv, Op::kMod, Op::kMax, Op::kMin};
      s = emit(kOps[static_cast<int>(d.op())], a, b);
      break;
    }
  }
  memo_[d.hash()].emplace_back(d, s);
  return s;
}

StatusOr<std::vector<rt::Slot>> ShapeSlots::slots(const Shape& s) {
  std::vector<rt::Slot> out;
  out.reserve(s.size());
  for (const Dim& d : s) {
    TRIPY_ASSIGN_OR_RETURN(rt::Slot x, slot(d));
    out.push_back(x);
  }
  return out;
}

}  // namespace tripy::compiler
