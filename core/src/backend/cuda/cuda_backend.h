// The CUDA backend's entry point for the registry. Everything else the frontend needs of the GPU
// (streams, a program's stream, empty tensors, the device's description) is the Backend and
// LoadedProgram interface's (runtime/backend.h); the two functions below serve C++ programs that
// link the backend directly (its tests, bench/gpu_bench_native.cc).
#pragma once

#include <string>

#include "runtime/backend.h"

namespace tripy::rt {

// Always non-null in builds with CUDA headers; available() says whether a GPU can be used.
Backend* cuda_backend();

// cuda_backend()->synchronize(stream): waits for all work enqueued on `stream` (nullptr: the
// default stream), then raises any error a finished gather or update_slice recorded (a host
// synchronisation point: cuda_error_record.h).
Status cuda_synchronize(void* stream);
// cuda_backend()->device_description(): "NVIDIA H100 80GB HBM3 (sm_90)", or why no GPU can be used.
std::string cuda_device_description();

}  // namespace tripy::rt
