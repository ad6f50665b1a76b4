// The CPU backend: always available, runs Programs on the host (oneDNN GEMMs when built with it,
// an interpreter over cache-sized tiles for fused elementwise/reduction groups).
#pragma once

#include "runtime/backend.h"

namespace tripy::rt {

// The process-wide CPU backend (never null).
Backend* cpu_backend();
// Builds nothing: CPU executables carry no artifacts.
Builder* cpu_builder();

}  // namespace tripy::rt
