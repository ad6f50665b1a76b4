// The CUDA backend's entry point for the registry, and the stream controls the frontend needs
// (tp.Stream, tp.default_stream(), executable.stream). Streams are CUstream values as void*.
#pragma once

#include <string>
#include <vector>

#include "runtime/backend.h"

namespace tripy::rt {

// Always non-null in builds with CUDA headers; available() says whether a GPU can be used.
Backend* cuda_backend();

// A new stream (blocking: ordered with the legacy default stream other libraries use).
StatusOr<void*> cuda_create_stream();
Status cuda_destroy_stream(void* stream);
// Waits for all work enqueued on `stream` (nullptr: the default stream), then raises any error a
// finished gather or update_slice recorded (a host synchronisation point: cuda_error_record.h).
Status cuda_synchronize(void* stream);
// How often the host has waited for the GPU so far (for tests: a steady-state call never waits).
int64_t cuda_host_waits();
// The stream programs and copies use when none was set on them.
void* cuda_default_stream();
void cuda_set_default_stream(void* stream);
// The stream one loaded CUDA program runs on (nullptr: the default stream). kInvalidArgument if
// `program` is not a CUDA program.
Status cuda_set_program_stream(LoadedProgram* program, void* stream);
void* cuda_program_stream(const LoadedProgram* program);
// An uninitialised GPU tensor from the caching allocator (kResourceExhausted when out of memory).
StatusOr<Tensor> cuda_empty(DType dtype, std::vector<int64_t> shape);
// "NVIDIA H100 80GB HBM3 (sm_90)", or why no GPU can be used.
std::string cuda_device_description();

}  // namespace tripy::rt
