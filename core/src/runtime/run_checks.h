// The per-run half of the runtime's defence against inconsistent programs: once the shape program
// has run, every buffer's and kernel's sizes are checked against each other, so backends (the
// CUDA one in particular, which cannot check inside a kernel cheaply) may trust them.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/program.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt {

// Assumes validate_program(program) passed and `inputs` were checked against program.inputs.
// A failure is kInternal: the program disagrees with itself (a compiler bug or a tampered file).
Status check_run_shapes(const Program& program, const std::vector<Tensor>& inputs,
                        const std::vector<int64_t>& slots);

}  // namespace tripy::rt
