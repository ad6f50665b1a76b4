// Writing and (defensively) reading the executable file described in file_format.h. Every number
// read from the file is checked against the file's size before it is used, and every byte is
// covered by a check or a checksum, so a truncated or corrupted file is a kDataLoss error, never a
// crash, a huge allocation or a model that runs on damaged weights.
#include "runtime/file_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

#include "common/safe_file.h"
#include "runtime/checksum.h"
#include "runtime/program_json.h"
#include "runtime/shape_arith.h"
#include "tripy/executable.h"

namespace tripy::rt {

using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'T', 'R', 'I', 'P', 'Y', 'E', 'X', 'E'};
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kAlign = 64;

// Callers pass values bounded by a file or buffer size, far below overflow.
uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Section checksums are JSON strings of 16 lowercase hex digits (see file_format.h).
std::string hex64(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}
bool parse_hex64(const std::string& s, uint64_t* v) {
  if (s.size() != 16) return false;
  *v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    *v = *v << 4 | static_cast<uint64_t>(d);
  }
  return true;
}

// Index of the first non-zero byte of [p, p + n), or n.
uint64_t first_nonzero(const uint8_t* p, uint64_t n) {
  return static_cast<uint64_t>(std::find_if(p, p + n, [](uint8_t b) { return b != 0; }) - p);
}

std::string plural(uint64_t n, const char* unit) { return std::to_string(n) + " " + unit + (n == 1 ? "" : "s"); }

// A 64-byte aligned host buffer, so constants can be borrowed in place.
std::shared_ptr<uint8_t> alloc_aligned(uint64_t bytes) {
  void* p = std::aligned_alloc(kAlign, align_up(bytes == 0 ? 1 : bytes));
  if (p == nullptr) return nullptr;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

// JSON one level per line, except that a value whose compact form fits in a line stays on one
// line: `"shape":[0,1]`, not four lines. Deterministic (nlohmann sorts object keys).
void dump_readable(const json& j, int indent, std::string& out) {
  constexpr size_t kLine = 100;
  std::string compact = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!j.is_structured() || j.empty() || compact.size() + static_cast<size_t>(indent) <= kLine) {
    out += compact;
    return;
  }
  const std::string pad(static_cast<size_t>(indent) + 1, ' ');
  out += j.is_object() ? "{\n" : "[\n";
  size_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    out += pad;
    if (j.is_object()) out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
    dump_readable(*it, indent + 1, out);
    out += i + 1 < j.size() ? ",\n" : "\n";
  }
  out += std::string(static_cast<size_t>(indent), ' ') + (j.is_object() ? "}" : "]");
}

// The body of deserialize: may throw JsonFieldError or nlohmann exceptions, caught by the caller.
// With `keep_alive`, constants borrow `data` (which must be 64-byte aligned); otherwise they copy.
StatusOr<ExecutableContents> parse(const uint8_t* data, uint64_t size, const std::shared_ptr<void>& keep_alive) {
  if (size < kHeaderBytes)
    return data_loss("Not a Tripy executable: the file has " + plural(size, "byte") + ", fewer than its " +
                     std::to_string(kHeaderBytes) + "-byte header.");
  if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0)
    return data_loss("Not a Tripy executable: the file does not start with \"TRIPYEXE\".");
  const uint64_t version = get_le(data + 8, 4);
  if (version != Executable::kFormatVersion)
    return data_loss("This executable has file format version " + std::to_string(version) +
                     ", but this build of Tripy reads version " + std::to_string(Executable::kFormatVersion) +
                     " only. Recompile the model with this version of Tripy.");
  if (get_le(data + 12, 4) != 0) return data_loss("Corrupt executable: the reserved header field is not zero.");
  const uint64_t meta_bytes = get_le(data + 16, 8);
  if (meta_bytes > size - kHeaderBytes)
    return data_loss("Corrupt executable: the header announces " + plural(meta_bytes, "byte") +
                     " of metadata, but the file has only " + plural(size - kHeaderBytes, "byte") +
                     " after its header (is it truncated?).");
  const uint64_t data_start = align_up(kHeaderBytes + meta_bytes);
  if (data_start > size) return data_loss("Corrupt executable: the file ends inside its metadata padding (is it truncated?).");
  const uint64_t data_bytes = size - data_start;
  // Before parsing, so a damaged JSON is reported as damage, not as a puzzling field error.
  if (checksum64(data + kHeaderBytes, meta_bytes) != get_le(data + 24, 8))
    return data_loss("Corrupt executable: metadata checksum mismatch (the JSON was changed after the file was written).");
  const uint64_t meta_end = kHeaderBytes + meta_bytes;
  if (uint64_t at = meta_end + first_nonzero(data + meta_end, data_start - meta_end); at < data_start)
    return data_loss("Corrupt executable: the padding byte at offset " + std::to_string(at) + " is not zero.");

  const json meta = json::parse(data + kHeaderBytes, data + kHeaderBytes + meta_bytes, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) return data_loss("Corrupt executable: the metadata is not valid JSON.");

  // The exact size of the data region: a file cut short inside the last section's padding, or
  // with bytes appended, is still a damaged file.
  const int64_t expect_data = json_int(json_field(meta, "data_bytes", "metadata"), "metadata.data_bytes");
  if (expect_data < 0 || static_cast<uint64_t>(expect_data) != data_bytes)
    return data_loss("Corrupt executable: its data region should have " + plural(static_cast<uint64_t>(expect_data), "byte") +
                     " but has " + plural(data_bytes, "byte") + " (is the file truncated?).");
  ExecutableContents out;
  StatusOr<Device> device = parse_device(json_string(json_field(meta, "device", "metadata"), "metadata.device"));
  if (!device.ok()) return data_loss(device.status().message());
  out.device = device.value();
  auto program = std::make_shared<Program>();
  const json& sections = json_array(json_field(meta, "sections", "metadata"), "metadata.sections");
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [offset, end) of each section, for the padding check
  for (size_t i = 0; i < sections.size(); ++i) {
    const std::string at = "metadata.sections[" + std::to_string(i) + "]";
    const json& s = sections[i];
    const std::string kind = json_string(json_field(s, "kind", at), at + ".kind");
    const std::string name = json_string(json_field(s, "name", at), at + ".name");
    const int64_t offset = json_int(json_field(s, "offset", at), at + ".offset");
    const int64_t bytes = json_int(json_field(s, "size", at), at + ".size");
    if (offset < 0 || bytes < 0 || offset % static_cast<int64_t>(kAlign) != 0 ||
        static_cast<uint64_t>(offset) > data_bytes || static_cast<uint64_t>(bytes) > data_bytes - static_cast<uint64_t>(offset))
      return data_loss("Corrupt executable: " + at + " spans [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                       ") but the data region has " + plural(data_bytes, "byte") + " (is the file truncated?).");
    const uint8_t* begin = data + data_start + offset;
    const std::string sum_text = json_string(json_field(s, "checksum", at), at + ".checksum");
    uint64_t sum = 0;
    if (!parse_hex64(sum_text, &sum))
      return data_loss("Corrupt executable: " + at + ".checksum '" + sum_text + "' is not 16 lowercase hex digits.");
    if (checksum64(begin, static_cast<size_t>(bytes)) != sum)
      return data_loss("Corrupt executable: section '" + name + "' checksum mismatch (its bytes were changed after the file was written).");
    spans.emplace_back(static_cast<uint64_t>(offset), static_cast<uint64_t>(offset + bytes));
    if (kind == "constant") {
      if (name != "constant." + std::to_string(program->constants.size()))
        return data_loss("Corrupt executable: " + at + " is named '" + name + "' but is constant " +
                         std::to_string(program->constants.size()) + ".");
      const DType dtype = json_dtype(json_field(s, "dtype", at), at + ".dtype");
      std::vector<int64_t> shape = json_int_list(json_field(s, "shape", at), at + ".shape");
      int64_t expect = 0;
      if (!checked_nbytes(shape, dtype, &expect) || expect != bytes)
        return data_loss("Corrupt executable: " + at + " holds " + plural(bytes, "byte") +
                         ", which does not match its dtype and shape.");
      if (keep_alive) {
        program->constants.push_back(Tensor::borrow(const_cast<uint8_t*>(begin), dtype, std::move(shape), Device{}, keep_alive));
      } else {
        Tensor t = Tensor::empty_host(dtype, std::move(shape));
        if (t.data() == nullptr) return Status(StatusCode::kResourceExhausted, "Cannot allocate memory for a constant.");
        std::memcpy(t.data(), begin, static_cast<size_t>(bytes));
        program->constants.push_back(std::move(t));
      }
    } else if (kind == "artifact") {
      if (out.artifacts.count(name)) return data_loss("Corrupt executable: artifact '" + name + "' appears twice.");
      out.artifacts[name] = std::vector<uint8_t>(begin, begin + bytes);
    } else {
      return data_loss("Corrupt executable: " + at + " has unknown kind '" + kind + "'.");
    }
  }
  TRIPY_RETURN_IF_ERROR(program_from_json(json_field(meta, "program", "metadata"), program.get()));
  TRIPY_RETURN_IF_ERROR(validate_program(*program));
  // What no section claims is alignment padding, written as zeros: checking it leaves no byte of
  // the file unchecked. Last, so that a missing section entry is reported as such.
  spans.emplace_back(data_bytes, data_bytes);  // the tail after the last section
  std::sort(spans.begin(), spans.end());
  uint64_t cursor = 0;
  for (const auto& [lo, hi] : spans) {
    if (lo > cursor) {
      if (uint64_t at = cursor + first_nonzero(data + data_start + cursor, lo - cursor); at < lo)
        return data_loss("Corrupt executable: the padding byte at offset " + std::to_string(data_start + at) + " is not zero.");
    }
    cursor = std::max(cursor, hi);
  }
  out.program = std::move(program);
  return out;
}

StatusOr<ExecutableContents> parse_guarded(const uint8_t* data, uint64_t size, const std::shared_ptr<void>& keep_alive) {
  try {
    return parse(data, size, keep_alive);
  } catch (const JsonFieldError& e) {
    return data_loss("Corrupt executable metadata: " + e.message + ".");
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "Out of memory while loading an executable.");
  } catch (const std::exception& e) {
    return data_loss(std::string("Corrupt executable: ") + e.what());
  }
}

Status io_error(const std::string& what, const std::string& path) {
  const int err = errno;
  return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                what + " '" + path + "': " + std::strerror(err) + ".");
}

// The C library reads a path up to its first NUL byte, so "a\0b.tpy" would open "a": refused.
Status check_path(const std::string& path, const std::string& what) {
  if (path.find('\0') == std::string::npos) return ok_status();
  std::string shown;
  for (char c : path) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
  return invalid_argument(what + ": the path '" + shown + "' contains a NUL byte, which no file name can hold.");
}

Status not_regular(const std::string& what, const std::string& path, mode_t mode) {
  return invalid_argument(what + " '" + path + "': it is " + file_kind(mode) + ", not a regular file.");
}

}  // namespace

StatusOr<std::vector<uint8_t>> serialize_executable(const Program& program, const Artifacts& artifacts, const Device& device) {
  Status valid = validate_program(program);
  if (!valid.ok()) return internal_error("Cannot save an invalid program: " + valid.message());
  try {
    json sections = json::array();
    uint64_t cursor = 0;  // relative to the data region
    // A constant shared from a device's memory is read back twice (for its checksum, then its
    // bytes) rather than held: a host copy of every weight at once could be as large as the file.
    for (const Tensor& device_or_host : program.constants) {
      TRIPY_ASSIGN_OR_RETURN(const Tensor c, copy_to(device_or_host, Device{}));
      const uint64_t bytes = static_cast<uint64_t>(c.nbytes());
      sections.push_back({{"kind", "constant"}, {"name", "constant." + std::to_string(sections.size())},
                          {"offset", cursor}, {"size", bytes}, {"checksum", hex64(checksum64(c.data(), bytes))},
                          {"dtype", std::string(dtype_name(c.dtype()))}, {"shape", c.shape()}});
      cursor = align_up(cursor + bytes);
    }
    for (const auto& [name, blob] : artifacts) {
      sections.push_back({{"kind", "artifact"}, {"name", name}, {"offset", cursor}, {"size", blob.size()},
                          {"checksum", hex64(checksum64(blob.data(), blob.size()))}});
      cursor = align_up(cursor + blob.size());
    }
    json meta = {{"device", device.str()}, {"program", program_to_json(program)}, {"sections", sections},
                 {"data_bytes", cursor}};
    std::string text;
    dump_readable(meta, 0, text);
    text += "\n";
    const uint64_t data_start = align_up(kHeaderBytes + text.size());
    std::vector<uint8_t> out(data_start + cursor, 0);
    std::memcpy(out.data(), kMagic, sizeof(kMagic));
    put_le(out.data() + 8, Executable::kFormatVersion, 4);
    put_le(out.data() + 16, text.size(), 8);
    put_le(out.data() + 24, checksum64(text.data(), text.size()), 8);
    std::memcpy(out.data() + kHeaderBytes, text.data(), text.size());
    for (size_t i = 0; i < program.constants.size(); ++i) {
      TRIPY_ASSIGN_OR_RETURN(const Tensor c, copy_to(program.constants[i], Device{}));
      if (c.nbytes() > 0) std::memcpy(out.data() + data_start + sections[i]["offset"].get<uint64_t>(), c.data(), static_cast<size_t>(c.nbytes()));
    }
    size_t i = program.constants.size();
    for (const auto& [name, blob] : artifacts) {
      if (!blob.empty()) std::memcpy(out.data() + data_start + sections[i]["offset"].get<uint64_t>(), blob.data(), blob.size());
      ++i;
    }
    return out;
  } catch (const std::exception& e) {
    return internal_error(std::string("Cannot serialize the executable: ") + e.what());
  }
}

StatusOr<ExecutableContents> deserialize_executable(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return data_loss("Corrupt executable: no data.");
  static const uint8_t kEmpty = 0;
  return parse_guarded(data ? data : &kEmpty, size, nullptr);
}

StatusOr<ExecutableContents> read_executable_file(const std::string& path) {
  const std::string what = "Cannot read executable file";
  TRIPY_RETURN_IF_ERROR(check_path(path, what));
  // A FIFO, a device or a directory is refused before a byte is read, without blocking on a FIFO
  // (common/safe_file.h). A link is followed: loading through one is ordinary.
  RegularFile file = open_regular_file(path, /*follow_links=*/true);
  if (file.not_regular()) return not_regular(what, path, file.info.st_mode);
  if (!file.opened()) {
    errno = file.error;
    return io_error("Cannot open executable file", path);
  }
  const uint64_t size = static_cast<uint64_t>(file.info.st_size);
  std::shared_ptr<uint8_t> buffer = alloc_aligned(size);
  if (!buffer) return Status(StatusCode::kResourceExhausted, "Cannot allocate " + plural(size, "byte") + " to read '" + path + "'.");
  const ssize_t got = read_fully(file.fd.get(), buffer.get(), static_cast<size_t>(size));
  if (got < 0) return io_error(what, path);
  if (static_cast<uint64_t>(got) < size) return data_loss(what + " '" + path + "': the file became shorter while it was read.");
  return parse_guarded(buffer.get(), size, buffer);
}

Status write_executable_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string what = "Cannot write executable file";
  TRIPY_RETURN_IF_ERROR(check_path(path, what));
  // Only a regular file is replaced: never a link (lstat does not follow it), a FIFO, a device or
  // a directory.
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) return not_regular(what, path, info.st_mode);
  if (path.empty() || path.back() == '/') return invalid_argument(what + " '" + path + "': the path names no file.");
  // Written to a private file beside the target, flushed to the disk, then renamed over it: a
  // failed save or a crash leaves the old file or the new one under the name, never part of one.
  // rename() replaces the name itself: a link or file that appeared there since lstat is neither
  // followed nor written to.
  if (!replace_file(path, bytes.data(), bytes.size(), /*durable=*/true)) return io_error(what, path);
  return ok_status();
}

}  // namespace tripy::rt
