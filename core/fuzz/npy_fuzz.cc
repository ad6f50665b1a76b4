// libFuzzer harness: tripy-run's .npy reader on arbitrary bytes. Any result is fine except a
// crash, a sanitizer report, or a tensor that disagrees with the bytes it was read from.
#include <cstdlib>

#include "npy_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tripy::StatusOr<tripy::Tensor> t = tripy::npy::parse_npy(data, size, "fuzz.npy");
  // A tensor read must be exactly as large as the data after the header.
  if (t.ok() && static_cast<size_t>(t->nbytes()) > size) std::abort();
  return 0;
}
