// Symbolic dims to shape-program slots: each distinct sub-expression is computed once, symbols
// come from the input dims that carry them or from shape-value inputs.
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/dim.h"
#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::compiler {

class ShapeSlots {
 public:
  ShapeSlots(std::vector<rt::ShapeInstr>& program, const SymbolTable& symbols)
      : program_(program), symbols_(symbols), symbol_slot_(symbols.symbols.size(), -1) {}

  // Emits the slot holding dim `d` of input `input`; binds the symbol if `dim` is one and unbound.
  // Returns the slot, and in `bound_before` the slot the symbol already had (or -1).
  rt::Slot input_dim(int input, int d, const Dim& dim, rt::Slot* bound_before);
  // Emits the slot holding the value of shape-value input `input`; binds `symbol` as input_dim does.
  rt::Slot input_value(int input, int symbol, rt::Slot* bound_before);
  // The slot computing `d`; an error if `d` uses a symbol no input defines.
  StatusOr<rt::Slot> slot(const Dim& d);
  StatusOr<std::vector<rt::Slot>> slots(const Shape& s);

 private:
  rt::Slot emit(rt::ShapeInstr::Op op, int64_t a, int64_t b);
  // Binds symbol `id` to slot `s` unless it is bound already; returns the earlier slot or -1.
  rt::Slot bind(int id, rt::Slot s);

  std::vector<rt::ShapeInstr>& program_;
  const SymbolTable& symbols_;
  std::vector<rt::Slot> symbol_slot_;
  std::unordered_map<size_t, std::vector<std::pair<Dim, rt::Slot>>> memo_;  // by Dim::hash()
};

}  // namespace tripy::compiler
