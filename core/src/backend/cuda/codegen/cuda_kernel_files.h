// The CUDA C++ under kernels/, compiled into this library at build time (core/cmake/
// embed_sources.cmake): each file's text without its opening comment, as NVRTC compiles it. The
// functions of cuda_sources.h put modules together from these and generated text (macros, entry
// points).
#pragma once

#include <cstddef>

namespace tripy::rt::cuda::kernels {

extern const char kDevicePrelude[];  // device_prelude.cuh: the helpers every module starts with
extern const char kLayoutCopies[];   // layout_copies.cuh: the layout module (copies, GELU)
extern const char kLayoutIndex[];    // layout_index.cuh: the index module's gathers and update_slices
extern const char kTuningFill[];     // tuning_fill.cuh: the tuner's fill and spin kernels
extern const char kConvDirect[];     // conv_direct.cuh: the convolution module (direct, epilogue)
extern const char kPool[];           // pool.cuh: the pooling module
extern const char kPluginPrelude[];  // plugin_prelude.cuh: PluginArgs, before a plugin's source
extern const char kAttention[];      // attention.cuh: AttnArgs, the generic and flash kernels
extern const char kAttentionSplit[];  // attention_split.cuh: the split-KV kernels
extern const char kSample[];         // sample.cuh: the sampling module
extern const char kGemv[];           // gemv.cuh: the few-row matrix products (kDot)

// Every embedded file (the build's list of kernels/*.cuh), for the test that each reaches a module.
struct EmbeddedFile {
  const char* name;  // "device_prelude.cuh"
  const char* text;
};
extern const EmbeddedFile kFiles[];
extern const size_t kFileCount;

}  // namespace tripy::rt::cuda::kernels
