// The CUDA C++ under kernels/, compiled into this library at build time (core/cmake/
// embed_sources.cmake): each file's text without its opening comment, as NVRTC compiles it. The
// functions of cuda_sources.h put modules together from these and generated text (macros, entry
// points).
#pragma once

#include <cstddef>

// kDevicePrelude (device_prelude.cuh), kSample (sample.cuh), ...: one array per file, declared by
// the build from the list of kernels/*.cuh (each file's opening comment says what it holds).
#include "embedded_files.h"

namespace tripy::rt::cuda::kernels {

// Every embedded file (the build's list of kernels/*.cuh), for the test that each reaches a module.
struct EmbeddedFile {
  const char* name;  // "device_prelude.cuh"
  const char* text;
};
extern const EmbeddedFile kFiles[];
extern const size_t kFileCount;

}  // namespace tripy::rt::cuda::kernels
