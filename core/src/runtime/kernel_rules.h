// Each kernel kind's rules on its buffers, in one place (kernel_rules.cc): validate_program asks
// for the static half once, at load; check_run_shapes for the half that needs the input shapes,
// on every run. A new kind writes both, side by side, there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.h"

namespace tripy::rt {

// Why kernel `k` breaks its kind's static rule (arity, ranks, dtypes, attribute ranges; an enum
// field without a name, for every kind from its field list), or "". Assumes the kernel's kind is
// valid and its buffer ids are in range.
std::string kernel_load_error(const Program& p, const Kernel& k);
// Why kernel `k` cannot run at these buffer shapes and slot values, or "". Assumes
// kernel_load_error(p, k) was "".
std::string kernel_run_error(const Program& p, const Kernel& k, const std::vector<std::vector<int64_t>>& shapes,
                             const std::vector<int64_t>& slots);

}  // namespace tripy::rt
