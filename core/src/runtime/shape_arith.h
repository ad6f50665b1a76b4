// Overflow-safe size arithmetic shared by the shape program, the program validator, the file
// loader and input validation: values may come from a hostile file and must never cause UB.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/program.h"
#include "tripy/dtype.h"

namespace tripy::rt {

// No buffer, constant or section may exceed this (1 TiB): far beyond any model, and small enough
// that sums and products of a few such values cannot overflow int64.
inline constexpr int64_t kMaxBytes = int64_t{1} << 40;

// One binary instruction of the shape program. Division by zero gives 0 and results saturate at
// the int64 range, so evaluation never traps; the runtime rejects the absurd sizes that follow.
int64_t apply_shape_op(ShapeInstr::Op op, int64_t a, int64_t b);

// Byte size of a dense tensor; false when a dim is negative or the size exceeds kMaxBytes.
bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, int64_t* bytes);

}  // namespace tripy::rt
