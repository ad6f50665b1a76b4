// The modules every GPU program may use, from kernels/ (cuda_kernel_files.h): the device helpers
// each generated source starts with, the layout module (copies, GELU), the index module (the
// gathers and update_slices its program launches, entry points written here) and the tuner's fill
// module.
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"

#include <set>

namespace tripy::rt::cuda {

const std::string& device_prelude() {
  static const std::string kPrelude = kernels::kDevicePrelude;
  return kPrelude;
}

const std::string& layout_module_source() {
  static const std::string kSource = device_prelude() + kernels::kLayoutCopies;
  return kSource;
}

// The index half of the layout functions (gathers, update_slices): a module of its own, holding
// only the functions its program launches (all sixteen took NVRTC ~1.6 s on the H100's host, the
// longest module of a GPT-2 build); load() looks layout functions up in every module.
std::string index_module_source(const std::vector<IndexFunction>& functions) {
  static const std::string kBodies = device_prelude() + kernels::kLayoutIndex;
  std::string out = kBodies;
  std::set<std::string> seen;
  for (const IndexFunction& f : functions) {
    const char* element = f.elem_size == 1   ? "unsigned char"
                          : f.elem_size == 2 ? "unsigned short"
                          : f.elem_size == 4 ? "unsigned"
                          : f.elem_size == 8 ? "u64"
                                             : nullptr;
    const std::string name = f.update ? update_function(f.elem_size, f.index) : gather_function(f.elem_size, f.index);
    if (!element || !seen.insert(name).second) continue;  // no such function: the launch says so
    out += "extern \"C\" __global__ void " + name +
           (f.update ? "(const UpdateArgs a) { enter_after_previous(); update_body<"
                     : "(const GatherArgs a) { enter_after_previous(); gather_body<") + element +
           (f.index == DType::kInt64 ? ", i64>(a); }\n" : ", int>(a); }\n");
  }
  return out;
}

// Build-time only: tuning fills its scratch operands with these. A module of its own, so the
// tuner can start after compiling three small kernels instead of the whole layout module (which
// then compiles beside the tuning, with the program's other modules).
const std::string& fill_module_source() {
  static const std::string kSource = device_prelude() + kernels::kTuningFill;
  return kSource;
}

std::string fill_function(DType t) {
  return std::string("tripy_fill_") + float_suffix(t);
}

}  // namespace tripy::rt::cuda
