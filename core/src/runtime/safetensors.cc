// Reading safetensors files (safetensors.h). The header is parsed as a stream of events (nlohmann's
// SAX interface) straight into one entry per tensor, so its shape is checked as it is read: a value
// of the wrong type, a duplicate or unknown key, or nesting the format does not have stops the
// parse at once, and a hostile header never becomes a deep or huge JSON tree in memory. Then every
// entry is checked against the data region before a tensor is made.
#include "runtime/safetensors.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_set>

#include "common/safe_file.h"
#include "runtime/shape_arith.h"

namespace tripy::rt {
namespace {

struct DtypeName {
  const char* name;
  DType dtype;
};
// The format's names of the dtypes Tripy has. Others (F64, U8, I16, F8_E5M2, ...) are refused by name.
constexpr DtypeName kDtypes[] = {{"F32", DType::kFloat32}, {"F16", DType::kFloat16},  {"BF16", DType::kBFloat16},
                                 {"F8_E4M3", DType::kFloat8E4M3}, {"I8", DType::kInt8}, {"I32", DType::kInt32},
                                 {"I64", DType::kInt64},    {"BOOL", DType::kBool}};
constexpr const char* kReadDtypes = "F32, F16, BF16, F8_E4M3, I8, I32, I64 and BOOL";
constexpr const char* kMetadataKey = "__metadata__";

std::string plural(uint64_t n, const char* unit) { return std::to_string(n) + " " + unit + (n == 1 ? "" : "s"); }

// The fields of a tensor's entry, in the order errors name them.
enum Field { kDtype = 0, kShape = 1, kOffsets = 2, kNumFields = 3 };
constexpr const char* kFieldNames[kNumFields] = {"dtype", "shape", "data_offsets"};

// One tensor's entry as the header gives it, before it is checked against the data.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;
  bool seen[kNumFields] = {};
};

// Builds the entries from the header's JSON events. Any event the format does not allow where it
// comes stops the parse with `error` saying what was expected there.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<Entry> entries;
  SafetensorsMetadata metadata;
  std::string error;

  bool null() override { return wrong_type(); }
  bool boolean(bool) override { return wrong_type(); }
  // nlohmann reports non-negative integers as unsigned: this one is negative.
  bool number_integer(number_integer_t) override { return wrong_type(); }
  bool number_float(number_float_t, const string_t&) override { return wrong_type(); }
  bool binary(binary_t&) override { return wrong_type(); }

  bool number_unsigned(number_unsigned_t v) override {
    if (at_ != At::kList) return wrong_type();
    std::vector<uint64_t>& list = field_ == kShape ? entries.back().shape : entries.back().offsets;
    if (field_ == kShape && list.size() == kSafetensorsMaxRank)
      return fail(tensor() + " has a shape of more than " + std::to_string(kSafetensorsMaxRank) + " dims");
    if (field_ == kOffsets && list.size() == 2) return wrong_type();
    list.push_back(v);
    return true;
  }

  bool string(string_t& s) override {
    if (at_ == At::kEntry && field_ == kDtype) {
      entries.back().dtype = std::move(s);
      return true;
    }
    if (at_ == At::kMetadata) {
      metadata.back().second = std::move(s);
      return true;
    }
    return wrong_type();
  }

  bool start_object(std::size_t) override {
    if (at_ == At::kStart) return enter(At::kTop);
    if (at_ == At::kTop) return enter(in_metadata_ ? At::kMetadata : At::kEntry);
    return wrong_type();
  }

  bool key(string_t& k) override {
    if (at_ == At::kTop) {
      if (!top_keys_.insert(k).second)
        return fail(k == kMetadataKey ? std::string("its header has __metadata__ twice")
                                      : "tensor " + quoted_header_string(k) + " appears twice in its header");
      in_metadata_ = k == kMetadataKey;
      if (!in_metadata_) entries.push_back(Entry{k, {}, {}, {}, {}});
      return true;
    }
    if (at_ == At::kMetadata) {
      if (!metadata_keys_.insert(k).second) return fail("its __metadata__ has the key " + quoted_header_string(k) + " twice");
      metadata.emplace_back(k, std::string());
      return true;
    }
    Entry& e = entries.back();  // at_ == kEntry: keys come only inside objects
    for (int f = 0; f < kNumFields; ++f) {
      if (k != kFieldNames[f]) continue;
      if (e.seen[f]) return fail(tensor() + " has " + k + " twice");
      e.seen[f] = true;
      field_ = static_cast<Field>(f);
      return true;
    }
    return fail(tensor() + " has an unknown field " + quoted_header_string(k) + " (a tensor has dtype, shape and data_offsets)");
  }

  bool end_object() override {
    if (at_ == At::kEntry)
      for (int f = 0; f < kNumFields; ++f)
        if (!entries.back().seen[f]) return fail(tensor() + " has no " + kFieldNames[f]);
    return enter(at_ == At::kTop ? At::kDone : At::kTop);
  }

  bool start_array(std::size_t) override {
    if (at_ == At::kEntry && (field_ == kShape || field_ == kOffsets)) return enter(At::kList);
    return wrong_type();
  }

  bool end_array() override {  // only a tensor's shape or data_offsets gets here
    if (field_ == kOffsets && entries.back().offsets.size() != 2) return wrong_type();
    return enter(At::kEntry);
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(std::string("its header is not valid JSON (") + e.what() + ")");
  }

 private:
  // Where in the header the next event is: before it, in the top object, in a tensor's entry, in
  // its shape or data_offsets list, in __metadata__, after it.
  enum class At { kStart, kTop, kEntry, kList, kMetadata, kDone };

  bool enter(At at) {
    at_ = at;
    return true;
  }
  bool fail(std::string why) {
    error = std::move(why);
    return false;
  }
  std::string tensor() const { return "tensor " + quoted_header_string(entries.back().name); }

  // What the value that just came should have been.
  bool wrong_type() {
    switch (at_) {
      case At::kStart: return fail("its header is not a JSON object");
      case At::kTop:
        return fail(in_metadata_ ? std::string("its __metadata__ is not an object of strings")
                                 : tensor() + " is not an object of dtype, shape and data_offsets");
      case At::kMetadata:
        return fail("its __metadata__ value for " + quoted_header_string(metadata.back().first) + " is not a string");
      case At::kEntry:
      case At::kList:
        if (field_ == kDtype) return fail(tensor() + ": its dtype is not a string");
        if (field_ == kShape) return fail(tensor() + ": its shape is not a list of non-negative integers");
        return fail(tensor() + ": its data_offsets are not a list of two non-negative integers [begin, end]");
      case At::kDone: break;
    }
    return fail("its header has data after its end");
  }

  At at_ = At::kStart;
  Field field_ = kDtype;
  bool in_metadata_ = false;
  std::unordered_set<std::string> top_keys_;
  std::unordered_set<std::string> metadata_keys_;
};

uint64_t get_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The body of parse_safetensors, which catches what may be thrown (allocation failures).
StatusOr<SafetensorsContents> parse(const uint8_t* data, size_t size, const std::string& file,
                                    const std::shared_ptr<void>& keep_alive) {
  auto fail = [&](const std::string& why) { return data_loss("Cannot load safetensors file '" + file + "': " + why + "."); };
  if (size < 8)
    return fail("the file has " + plural(size, "byte") + ", fewer than the 8 that give its header's length");
  const uint64_t header_bytes = get_le64(data);
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    return fail("its header length, " + plural(header_bytes, "byte") + ", is over the limit of " +
                std::to_string(kSafetensorsMaxHeaderBytes) + " (the file is damaged, or not a safetensors file)");
  if (header_bytes > size - 8)
    return fail("its header length, " + plural(header_bytes, "byte") + ", runs past the end of the file (" +
                plural(size - 8, "byte") + " follow the length; is it truncated?)");
  if (header_bytes == 0 || data[8] != '{')
    return fail("its header does not start with '{' (is it a safetensors file?)");

  const uint8_t* header = data + 8;
  // nlohmann takes a NUL byte for the end of its input, which would hide what follows it; JSON
  // text never holds one (a string spells it \u0000).
  if (const void* nul = std::memchr(header, 0, static_cast<size_t>(header_bytes)))
    return fail("its header holds a NUL byte at offset " +
                std::to_string(static_cast<const uint8_t*>(nul) - header) + ", which JSON text cannot");
  HeaderReader reader;
  if (!nlohmann::json::sax_parse(header, header + header_bytes, &reader, nlohmann::json::input_format_t::json,
                                 /*strict=*/true))
    return fail(reader.error);

  const uint8_t* region = header + header_bytes;
  const uint64_t region_bytes = size - 8 - header_bytes;
  struct Checked {
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Checked> checked;
  checked.reserve(reader.entries.size());
  for (const Entry& e : reader.entries) {
    const std::string who = "tensor " + quoted_header_string(e.name);
    const std::optional<DType> dtype = safetensors_dtype(e.dtype);
    if (!dtype)
      return fail(who + " has dtype " + quoted_header_string(e.dtype) + ", which Tripy does not read (it reads " +
                  kReadDtypes + ")");
    std::vector<int64_t> shape;
    for (uint64_t d : e.shape) {
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(who + " has a dim of " + std::to_string(d) + ", larger than any size");
      shape.push_back(static_cast<int64_t>(d));
    }
    int64_t need = 0;
    if (!checked_nbytes(shape, *dtype, &need))
      return fail(who + " has dtype " + e.dtype + " and shape " + dims_str(shape) + ", which need more than " +
                  plural(static_cast<uint64_t>(kMaxBytes), "byte"));
    const uint64_t begin = e.offsets[0], end = e.offsets[1];
    const std::string offsets = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
    if (begin > end) return fail(who + " has " + offsets + ", which begin after they end");
    if (end > region_bytes)
      return fail(who + " has " + offsets + ", past the end of the data (" + plural(region_bytes, "byte") +
                  "; is the file truncated?)");
    if (end - begin != static_cast<uint64_t>(need))
      return fail(who + " has " + offsets + " but dtype " + e.dtype + " and shape " + dims_str(shape) + " need " +
                  plural(static_cast<uint64_t>(need), "byte"));
    checked.push_back({*dtype, std::move(shape), begin, end});
  }

  // The tensors must cover the data exactly: an overlap would alias two weights, and bytes that no
  // tensor claims could hide another file's contents (the format forbids both).
  std::vector<size_t> by_offset(checked.size());
  for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
  std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) {
    return std::tie(checked[a].begin, checked[a].end) < std::tie(checked[b].begin, checked[b].end);
  });
  uint64_t cursor = 0;
  size_t last = 0;  // the tensor whose end is `cursor` (meaningful once cursor > 0)
  for (size_t i : by_offset) {
    const Checked& c = checked[i];
    if (c.begin < cursor) {
      const Checked& p = checked[last];
      return fail("tensors " + quoted_header_string(reader.entries[last].name) + " [" + std::to_string(p.begin) + ", " +
                  std::to_string(p.end) + ") and " + quoted_header_string(reader.entries[i].name) + " [" +
                  std::to_string(c.begin) + ", " + std::to_string(c.end) + ") overlap in the data");
    }
    if (c.begin > cursor)
      return fail("bytes [" + std::to_string(cursor) + ", " + std::to_string(c.begin) +
                  ") of the data belong to no tensor (the format allows no gaps)");
    if (c.end > c.begin) last = i;
    cursor = c.end;
  }
  if (cursor != region_bytes)
    return fail("bytes [" + std::to_string(cursor) + ", " + std::to_string(region_bytes) +
                ") at the end of the data belong to no tensor (the format allows no gaps)");

  SafetensorsContents out;
  out.metadata = std::move(reader.metadata);
  out.tensors.reserve(checked.size());
  for (size_t i = 0; i < checked.size(); ++i) {
    Checked& c = checked[i];
    std::string& name = reader.entries[i].name;
    const uint8_t* bytes = region + c.begin;
    const uint64_t n = c.end - c.begin;
    // Kernels read bool as 0 or 1; any other byte would make comparisons and casts disagree.
    if (c.dtype == DType::kBool)
      for (uint64_t k = 0; k < n; ++k)
        if (bytes[k] > 1)
          return fail("tensor " + quoted_header_string(name) + " holds the byte " + std::to_string(bytes[k]) +
                      " at element " + std::to_string(k) + ", which is not a bool (0 or 1)");
    Tensor tensor;
    if (reinterpret_cast<uintptr_t>(bytes) % static_cast<uintptr_t>(dtype_size(c.dtype)) == 0) {
      tensor = Tensor::borrow(const_cast<uint8_t*>(bytes), c.dtype, std::move(c.shape), Device{}, keep_alive);
    } else {
      // Misaligned elements are undefined behaviour to read: this tensor alone is copied.
      TRIPY_ASSIGN_OR_RETURN(tensor, Tensor::try_empty_host(c.dtype, std::move(c.shape), "tensor " + quoted_header_string(name)));
      if (n > 0) std::memcpy(tensor.data(), bytes, static_cast<size_t>(n));
    }
    out.tensors.push_back({std::move(name), std::move(tensor)});
  }
  return out;
}

}  // namespace

std::optional<DType> safetensors_dtype(const std::string& name) {
  for (const DtypeName& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

const char* safetensors_dtype_name(DType dtype) {
  for (const DtypeName& d : kDtypes)
    if (dtype == d.dtype) return d.name;
  return nullptr;
}

std::string quoted_header_string(const std::string& name) {
  constexpr size_t kShown = 200;
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (name.size() > kShown) out += " (shortened from " + plural(name.size(), "byte") + ")";
  return out;
}

StatusOr<SafetensorsContents> parse_safetensors(const uint8_t* data, size_t size, const std::string& file,
                                                std::shared_ptr<void> keep_alive) {
  static const uint8_t kEmpty = 0;
  try {
    return parse(data != nullptr ? data : &kEmpty, data != nullptr ? size : 0, file, keep_alive);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "Out of memory while loading safetensors file '" + file + "'.");
  } catch (const std::exception& e) {
    return data_loss("Cannot load safetensors file '" + file + "': " + e.what() + ".");
  }
}

StatusOr<SafetensorsContents> read_safetensors(const std::string& path) {
  const std::string what = "Cannot load safetensors file '" + path + "'";
  // The C library reads a path up to its first NUL byte, so "a\0b" would open "a": refused.
  if (path.find('\0') != std::string::npos)
    return invalid_argument("Cannot load a safetensors file: its path contains a NUL byte, which no file name can hold.");
  // A FIFO or device is refused without blocking or reading (common/safe_file.h); a link is
  // followed, as loading through one is ordinary (Hugging Face's cache is made of them).
  RegularFile file = open_regular_file(path, /*follow_links=*/true);
  if (file.not_regular()) return invalid_argument(what + ": it is " + file_kind(file.info.st_mode) + ", not a regular file.");
  if (!file.opened())
    return Status(file.error == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  what + ": " + std::strerror(file.error) + ".");
  const uint64_t size = static_cast<uint64_t>(file.info.st_size);
  if (size == 0) return parse_safetensors(nullptr, 0, path, nullptr);  // mmap cannot map nothing
  // Private and writable: pages are copied only if a program writes to a tensor (see the header).
  void* addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd.get(), 0);
  if (addr == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted,
                  what + ": cannot map its " + plural(size, "byte") + " (" + std::strerror(errno) + ").");
  std::shared_ptr<void> mapping(addr, [size](void* p) { ::munmap(p, static_cast<size_t>(size)); });
  return parse_safetensors(static_cast<const uint8_t*>(addr), static_cast<size_t>(size), path, std::move(mapping));
}

}  // namespace tripy::rt
