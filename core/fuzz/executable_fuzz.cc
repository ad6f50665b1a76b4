// libFuzzer harness: the executable loader (header, JSON metadata, sections, profile table, program
// validation) on arbitrary bytes; a file that loads is also run on zeros of each optimization
// profile's `opt` shapes when they are small, so the validator's promise (a valid program never reads or writes out of
// bounds) is fuzzed too. Checksums stop nearly every mutation at the door, so the first byte
// picks a mode: 0, the rest is a file as is; 1, a file whose metadata checksum is recomputed;
// 2, "METADATA-JSON \0 DATA-REGION" made into a file with every length and checksum right, so
// that mutations reach the JSON reader and the program validator.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/checksum.h"
#include "runtime/executable_impl.h"
#include "tripy/executable.h"

namespace {

using Bytes = std::vector<uint8_t>;
constexpr size_t kHeader = 32, kAlign = 64;

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Recomputes the metadata checksum of a file (file_format.h), trusting its metadata length.
void fix_meta_checksum(Bytes& f) {
  if (f.size() < kHeader) return;
  const uint64_t n = get_le64(f.data() + 16);
  if (n <= f.size() - kHeader) put_le64(f.data() + 24, tripy::rt::checksum64(f.data() + kHeader, n));
}

// Builds a file from "METADATA-JSON \0 DATA-REGION": the header, lengths, padding and every
// checksum (and the metadata's data_bytes) made to agree, so only the content is under test.
Bytes build_file(const Bytes& in) {
  const auto nul = std::find(in.begin(), in.end(), uint8_t{0});
  std::string text(in.begin(), nul);
  const Bytes data(nul == in.end() ? in.end() : nul + 1, in.end());
  nlohmann::json meta = nlohmann::json::parse(text, nullptr, false);
  if (!meta.is_discarded() && meta.is_object()) {
    if (meta.contains("data_bytes")) meta["data_bytes"] = data.size();
    if (meta.contains("sections") && meta["sections"].is_array()) {
      static const char kHex[] = "0123456789abcdef";
      for (auto& s : meta["sections"]) {
        if (!s.is_object() || !s.contains("offset") || !s.contains("size") || !s["offset"].is_number_unsigned() ||
            !s["size"].is_number_unsigned())
          continue;
        const uint64_t off = s["offset"].get<uint64_t>(), n = s["size"].get<uint64_t>();
        if (off > data.size() || n > data.size() - off) continue;
        uint64_t sum = tripy::rt::checksum64(data.data() + off, n);
        std::string hex(16, '0');
        for (int i = 15; i >= 0; --i, sum >>= 4) hex[static_cast<size_t>(i)] = kHex[sum & 15];
        s["checksum"] = hex;
      }
    }
    text = meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  Bytes f(kHeader, 0);
  std::memcpy(f.data(), "TRIPYEXE", 8);
  f[8] = static_cast<uint8_t>(tripy::Executable::kFormatVersion);
  put_le64(f.data() + 16, text.size());
  f.insert(f.end(), text.begin(), text.end());
  f.resize((f.size() + kAlign - 1) / kAlign * kAlign, 0);
  f.insert(f.end(), data.begin(), data.end());
  fix_meta_checksum(f);
  return f;
}

// Inputs for one run at the `opt` sizes, or false when they would be large.
bool opt_inputs(const std::vector<tripy::InputDesc>& descs, std::vector<tripy::Tensor>& inputs) {
  int64_t total = 0;
  for (const tripy::InputDesc& in : descs) {
    if (in.kind == tripy::InputDesc::Kind::kShapeValue) {
      if (in.value_opt > 64) return false;
      inputs.push_back(tripy::Tensor::host_int64(in.value_opt));
      continue;
    }
    int64_t n = 1;
    for (int64_t d : in.dim_opt) {
      if (d < 0 || d > 4096 || (n *= d) > 4096) return false;
    }
    total += n;
    if (total > 16384) return false;
    auto t = tripy::Tensor::try_empty_host(in.dtype, in.dim_opt, "a fuzz input");
    if (!t.ok()) return false;
    std::memset(t->data(), 0, static_cast<size_t>(t->nbytes()));
    inputs.push_back(std::move(t).value());
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 20)) return 0;
  const int mode = data[0] % 3;
  Bytes file(data + 1, data + size);
  if (mode == 1) fix_meta_checksum(file);
  if (mode == 2) file = build_file(file);
  tripy::StatusOr<tripy::Executable> exe = tripy::Executable::deserialize(file.data(), file.size());
  if (!exe.ok() || exe->device().kind != tripy::Device::Kind::kCpu) return 0;
  for (size_t profile = 0; profile < exe->num_profiles(); ++profile) {
    std::vector<tripy::Tensor> inputs;
    if (!opt_inputs(exe->profile_inputs(profile), inputs)) continue;
    // The profile that runs is the first that holds these sizes, not necessarily this one.
    tripy::StatusOr<size_t> runs = exe->select_profile(inputs);
    if (!runs.ok()) continue;
    // Runs that would touch much memory or time (a valid program may ask for gigabytes) are
    // skipped: the fuzzer looks for wrong accesses, and big ones are as wrong as small ones.
    const tripy::rt::Program& p = *exe->impl()->profiles[runs.value()].program;
    if (p.arena_bytes > (int64_t{16} << 20)) continue;
    std::vector<int64_t> slots;
    p.eval_shapes(inputs, slots);
    bool small = true;
    for (size_t b = 0; b < p.buffers.size() && small; ++b) {
      int64_t n = 1;
      for (int64_t d : p.buffer_shape(static_cast<int32_t>(b), slots)) {
        if (d < 0 || d > (int64_t{1} << 22) || (n *= d) > (int64_t{1} << 22)) small = false;
      }
    }
    if (small) (void)exe->run(inputs);
  }
  return 0;
}
