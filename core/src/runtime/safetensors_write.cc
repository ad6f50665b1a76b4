// Writing safetensors files (safetensors.h): the header is made first (it says where every
// tensor's bytes go), then the file is written as the header followed by each tensor's own memory,
// so a checkpoint is never copied into one buffer on its way to the disk.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "common/safe_file.h"
#include "runtime/safetensors.h"

namespace tripy::rt {
namespace {

// The header (its length, the JSON, the spaces that pad it) and the order of the tensors' data.
struct Layout {
  std::string header;
  std::vector<size_t> data_order;
};

// Appends `s` as a JSON string; false when it is not UTF-8 (which JSON text must be).
bool append_json(std::string& out, const std::string& s) {
  try {
    out += nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

Status not_utf8(const std::string& what, const std::string& whose) {
  return invalid_argument(what + ": " + whose + " is not valid UTF-8, which the JSON header requires.");
}

StatusOr<Layout> layout(const std::vector<NamedTensor>& tensors, const SafetensorsMetadata& metadata, const std::string& what) {
  Layout out;
  std::string json = "{";
  if (!metadata.empty()) {
    std::unordered_set<std::string> keys;
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      const auto& [key, value] = metadata[i];
      const std::string who = "the metadata key " + quoted_header_string(key);
      if (!keys.insert(key).second) return invalid_argument(what + ": " + who + " appears twice.");
      json += i ? "," : "";
      if (!append_json(json, key)) return not_utf8(what, who);
      json += ":";
      if (!append_json(json, value)) return not_utf8(what, "the value of " + who);
    }
    json += "}";
  }

  // Largest elements first: the data region starts at a multiple of 8, so each tensor then starts
  // at a multiple of its element size and is borrowed in place when the file is mapped.
  out.data_order.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) out.data_order[i] = i;
  std::stable_sort(out.data_order.begin(), out.data_order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].tensor.dtype()) > dtype_size(tensors[b].tensor.dtype());
  });
  std::vector<uint64_t> begin(tensors.size());
  uint64_t cursor = 0;
  for (size_t i : out.data_order) {
    begin[i] = cursor;
    cursor += static_cast<uint64_t>(tensors[i].tensor.nbytes());
  }

  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    const std::string who = "tensor " + quoted_header_string(tensors[i].name);
    if (tensors[i].name == "__metadata__")
      return invalid_argument(what + ": a tensor cannot be named '__metadata__', the format's key for metadata.");
    if (!names.insert(tensors[i].name).second) return invalid_argument(what + ": " + who + " appears twice.");
    if (t.device().kind != Device::Kind::kCpu)
      return invalid_argument(what + ": " + who + " is on " + t.device().str() + "; only host tensors are written.");
    const char* dtype = safetensors_dtype_name(t.dtype());
    if (dtype == nullptr)
      return invalid_argument(what + ": " + who + " has dtype " + std::string(dtype_name(t.dtype())) +
                              ", which the safetensors format cannot hold.");
    json += json.size() > 1 ? "," : "";
    if (!append_json(json, tensors[i].name)) return not_utf8(what, "the name of tensor " + std::to_string(i));
    json += std::string(":{\"dtype\":\"") + dtype + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape().size(); ++d) json += (d ? "," : "") + std::to_string(t.shape()[d]);
    json += "],\"data_offsets\":[" + std::to_string(begin[i]) + "," +
            std::to_string(begin[i] + static_cast<uint64_t>(t.nbytes())) + "]}";
  }
  json += "}";
  // Spaces after the JSON (the format allows them) bring the data region to a multiple of 8.
  json.append((8 - (8 + json.size()) % 8) % 8, ' ');
  if (json.size() > kSafetensorsMaxHeaderBytes)
    return invalid_argument(what + ": its header would take " + std::to_string(json.size()) +
                            " bytes, over the format's limit of " + std::to_string(kSafetensorsMaxHeaderBytes) + ".");
  out.header.resize(8);
  for (int b = 0; b < 8; ++b) out.header[static_cast<size_t>(b)] = static_cast<char>(static_cast<uint64_t>(json.size()) >> (8 * b));
  out.header += json;
  return out;
}

StatusOr<Layout> guarded_layout(const std::vector<NamedTensor>& tensors, const SafetensorsMetadata& metadata,
                                const std::string& what) {
  try {
    return layout(tensors, metadata, what);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, what + ": out of memory.");
  }
}

}  // namespace

StatusOr<std::vector<uint8_t>> serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                                     const SafetensorsMetadata& metadata) {
  TRIPY_ASSIGN_OR_RETURN(Layout l, guarded_layout(tensors, metadata, "Cannot write a safetensors file"));
  try {
    std::vector<uint8_t> out(l.header.begin(), l.header.end());
    for (size_t i : l.data_order) {
      const auto* data = static_cast<const uint8_t*>(tensors[i].tensor.data());
      out.insert(out.end(), data, data + tensors[i].tensor.nbytes());
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "Cannot write a safetensors file: out of memory.");
  }
}

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const SafetensorsMetadata& metadata) {
  if (path.find('\0') != std::string::npos)
    return invalid_argument("Cannot save a safetensors file: its path contains a NUL byte, which no file name can hold.");
  const std::string what = "Cannot save safetensors file '" + path + "'";
  if (path.empty() || path.back() == '/') return invalid_argument(what + ": the path names no file.");
  // Only a regular file is replaced: never a link (lstat does not follow it), a FIFO or a directory.
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return invalid_argument(what + ": something other than a regular file is there (" +
                            (S_ISLNK(info.st_mode) ? "a symbolic link" : S_ISDIR(info.st_mode) ? "a directory" : "a special file") +
                            "), which is not replaced.");
  TRIPY_ASSIGN_OR_RETURN(Layout l, guarded_layout(tensors, metadata, what));
  std::vector<FilePart> parts{{l.header.data(), l.header.size()}};
  for (size_t i : l.data_order) parts.push_back({tensors[i].tensor.data(), static_cast<size_t>(tensors[i].tensor.nbytes())});
  if (!replace_file(path, parts, /*durable=*/true)) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  what + ": " + std::strerror(err) + ".");
  }
  return ok_status();
}

}  // namespace tripy::rt
