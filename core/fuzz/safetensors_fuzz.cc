// libFuzzer harness: the safetensors reader (runtime/safetensors.h) on arbitrary bytes. Any result
// is fine except a crash, a sanitizer report, a tensor that borrows bytes outside the input, or a
// file that does not read back the same after the writer has written what was read. A mutated
// length prefix stops nearly every input at the door, so the first byte picks a mode: 0, the rest
// is a file as is; 1, the rest is "HEADER-JSON \0 DATA-REGION", made into a file with the right
// length, so that mutations reach the JSON reader and the offset checks.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/safetensors.h"

namespace {

using tripy::rt::NamedTensor;
using tripy::rt::SafetensorsContents;

std::vector<uint8_t> as_file(const uint8_t* data, size_t size) {
  if (size == 0 || data[0] != 1) return std::vector<uint8_t>(data + (size ? 1 : 0), data + size);
  const uint8_t* json = data + 1;
  const auto* nul = static_cast<const uint8_t*>(std::memchr(json, 0, size - 1));
  const size_t n = nul ? static_cast<size_t>(nul - json) : size - 1;
  std::vector<uint8_t> file(8);
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<uint8_t>(static_cast<uint64_t>(n) >> (8 * i));
  file.insert(file.end(), json, json + n);
  if (nul) file.insert(file.end(), nul + 1, data + size);
  return file;
}

bool same(const SafetensorsContents& a, const SafetensorsContents& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const tripy::Tensor &x = a.tensors[i].tensor, &y = b.tensors[i].tensor;
    if (a.tensors[i].name != b.tensors[i].name || x.dtype() != y.dtype() || x.shape() != y.shape() ||
        std::memcmp(x.data(), y.data(), static_cast<size_t>(x.nbytes())) != 0)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = as_file(data, size);
  tripy::StatusOr<SafetensorsContents> read =
      tripy::rt::parse_safetensors(file.data(), file.size(), "fuzz.safetensors", nullptr);
  if (!read.ok()) return 0;
  // Without a keep-alive, a borrowed tensor has no owner (a copied one owns its memory): whatever
  // it borrows must lie inside the file.
  const uintptr_t lo = reinterpret_cast<uintptr_t>(file.data()), hi = lo + file.size();
  for (const NamedTensor& t : read->tensors) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(t.tensor.data());
    if (t.tensor.owner() == nullptr && (p < lo || p > hi || static_cast<uint64_t>(t.tensor.nbytes()) > hi - p))
      std::abort();
  }
  // What was read is what a file may hold: the writer takes it, and the reader reads that back.
  tripy::StatusOr<std::vector<uint8_t>> written = tripy::rt::serialize_safetensors(read->tensors, read->metadata);
  if (!written.ok()) std::abort();
  tripy::StatusOr<SafetensorsContents> again =
      tripy::rt::parse_safetensors(written->data(), written->size(), "fuzz-again.safetensors", nullptr);
  if (!again.ok() || !same(read.value(), again.value())) std::abort();
  return 0;
}
