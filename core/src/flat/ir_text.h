// Spellings shared by the FlatIR printer and parser: dtype short names and op names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flat/ir.h"

namespace tripy::flat {

// "f32", "f16", "bf16", "f8", "i4", "i8", "i32", "i64", "i1".
const char* dtype_short_name(DType t);
std::optional<DType> dtype_from_short_name(std::string_view name);
// The op's name in text: the kind ("broadcast"), or its fn for elementwise/reduce ops ("add",
// "reduce_sum").
std::string op_text_name(const Op& op);
// Inverse of op_text_name: sets op.kind and op.fn; false for an unknown name.
bool op_from_text_name(std::string_view name, Op& op);
// A number as the printer writes it: integers without a fraction, floats round-trippable.
std::string number_text(double v);

}  // namespace tripy::flat
