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
// The last version before optimization profiles (file_format.h): still read, as one profile.
constexpr uint64_t kOneProfileVersion = 3;

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
  if (version != Executable::kFormatVersion && version != kOneProfileVersion)
    return data_loss("This executable has file format version " + std::to_string(version) +
                     ", but this build of Tripy reads version " + std::to_string(Executable::kFormatVersion) +
                     " (and " + std::to_string(kOneProfileVersion) +
                     ") only. Recompile the model with this version of Tripy.");
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
  const json& sections = json_array(json_field(meta, "sections", "metadata"), "metadata.sections");
  // What each section holds: a constant's tensor, or an artifact's bytes.
  std::vector<Tensor> tensors(sections.size());
  std::vector<std::vector<uint8_t>> blobs(sections.size());
  std::vector<std::string> names(sections.size());
  std::vector<bool> is_constant(sections.size(), false);
  size_t constants = 0;
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
      if (name != "constant." + std::to_string(constants))
        return data_loss("Corrupt executable: " + at + " is named '" + name + "' but is constant " +
                         std::to_string(constants) + ".");
      ++constants;
      is_constant[i] = true;
      const DType dtype = json_dtype(json_field(s, "dtype", at), at + ".dtype");
      std::vector<int64_t> shape = json_int_list(json_field(s, "shape", at), at + ".shape");
      int64_t expect = 0;
      if (!checked_nbytes(shape, dtype, &expect) || expect != bytes)
        return data_loss("Corrupt executable: " + at + " holds " + plural(bytes, "byte") +
                         ", which does not match its dtype and shape.");
      if (keep_alive) {
        tensors[i] = Tensor::borrow(const_cast<uint8_t*>(begin), dtype, std::move(shape), Device{}, keep_alive);
      } else {
        Tensor t = Tensor::empty_host(dtype, std::move(shape));
        if (t.data() == nullptr) return Status(StatusCode::kResourceExhausted, "Cannot allocate memory for a constant.");
        std::memcpy(t.data(), begin, static_cast<size_t>(bytes));
        tensors[i] = std::move(t);
      }
    } else if (kind == "artifact") {
      blobs[i].assign(begin, begin + bytes);
    } else {
      return data_loss("Corrupt executable: " + at + " has unknown kind '" + kind + "'.");
    }
    if (std::find(names.begin(), names.begin() + static_cast<int64_t>(i), name) != names.begin() + static_cast<int64_t>(i))
      return data_loss("Corrupt executable: section '" + name + "' appears twice.");
    names[i] = name;
  }
  // The profile table. A version 3 file is one profile: "program", its constants in section order,
  // its artifacts by section name.
  json one_profile;
  const json* profiles = nullptr;
  std::string profiles_at = "metadata.profiles";
  if (version == kOneProfileVersion) {
    json table = {{"program", json_field(meta, "program", "metadata")}, {"constants", json::array()},
                  {"artifacts", json::object()}};
    for (size_t i = 0; i < sections.size(); ++i) {
      if (is_constant[i]) table["constants"].push_back(i);
      else table["artifacts"][names[i]] = i;
    }
    one_profile = json::array({std::move(table)});
    profiles = &one_profile;
    profiles_at = "metadata";
  } else {
    profiles = &json_array(json_field(meta, "profiles", "metadata"), "metadata.profiles");
    if (profiles->empty()) return data_loss("Corrupt executable: metadata.profiles is empty.");
  }
  std::vector<bool> used(sections.size(), false);
  // The section a profile names at `at`, which must be of the kind it expects.
  auto section_at = [&](const json& value, const std::string& at, bool constant) -> StatusOr<size_t> {
    const int64_t i = json_int(value, at);
    if (i < 0 || static_cast<uint64_t>(i) >= sections.size() || is_constant[static_cast<size_t>(i)] != constant)
      return data_loss("Corrupt executable: " + at + " is " + std::to_string(i) + ", which is not " +
                       (constant ? "a constant" : "an artifact") + " section (there are " +
                       plural(sections.size(), "section") + ").");
    used[static_cast<size_t>(i)] = true;
    return static_cast<size_t>(i);
  };
  std::vector<const Program*> programs;
  for (size_t p = 0; p < profiles->size(); ++p) {
    const std::string at = version == kOneProfileVersion ? std::string("metadata") : profiles_at + "[" + std::to_string(p) + "]";
    const json& entry = (*profiles)[p];
    auto program = std::make_shared<Program>();
    const json& constant_list = json_array(json_field(entry, "constants", at), at + ".constants");
    for (size_t c = 0; c < constant_list.size(); ++c) {
      TRIPY_ASSIGN_OR_RETURN(const size_t i, section_at(constant_list[c], at + ".constants[" + std::to_string(c) + "]", true));
      program->constants.push_back(tensors[i]);
    }
    const json& artifact_map = json_field(entry, "artifacts", at);
    if (!artifact_map.is_object()) return data_loss("Corrupt executable: " + at + ".artifacts is not an object.");
    Artifacts artifacts;
    for (auto it = artifact_map.begin(); it != artifact_map.end(); ++it) {
      TRIPY_ASSIGN_OR_RETURN(const size_t i, section_at(it.value(), at + ".artifacts." + it.key(), false));
      artifacts[it.key()] = blobs[i];
    }
    Status st = program_from_json(json_field(entry, "program", at), program.get());
    if (st.ok()) st = validate_program(*program);
    if (!st.ok()) return profiles->size() > 1 ? st.note("in optimization profile " + std::to_string(p)) : st;
    programs.push_back(program.get());
    out.profiles.push_back({std::move(program), std::move(artifacts)});
  }
  for (size_t i = 0; i < sections.size(); ++i)
    if (!used[i]) return data_loss("Corrupt executable: section '" + names[i] + "' belongs to no profile.");
  if (Status st = check_profiles_agree(programs); !st.ok()) return data_loss("Corrupt executable: " + st.message());
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

namespace {

// The sections of a file being written: where each one's bytes come from, and each profile's table.
class SectionPlan {
 public:
  // The section holding `constant` (equal bytes are written once: the profiles' shared weights).
  StatusOr<size_t> constant(const Tensor& constant) {
    TRIPY_ASSIGN_OR_RETURN(const Tensor host, copy_to(constant, Device{}));
    const uint64_t bytes = static_cast<uint64_t>(host.nbytes());
    const uint64_t sum = checksum64(host.data(), bytes);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (!e.tensor.defined() || e.size != bytes || e.checksum != sum || e.tensor.dtype() != host.dtype() ||
          e.tensor.shape() != host.shape())
        continue;
      if (e.tensor.data() == constant.data() && e.tensor.device() == constant.device()) return i;
      TRIPY_ASSIGN_OR_RETURN(const Tensor earlier, copy_to(e.tensor, Device{}));
      if (bytes == 0 || std::memcmp(earlier.data(), host.data(), static_cast<size_t>(bytes)) == 0) return i;
    }
    sections_.push_back({{"kind", "constant"}, {"name", "constant." + std::to_string(constants_++)},
                         {"offset", cursor_}, {"size", bytes}, {"checksum", hex64(sum)},
                         {"dtype", std::string(dtype_name(host.dtype()))}, {"shape", host.shape()}});
    entries_.push_back({constant, nullptr, bytes, sum});
    cursor_ = align_up(cursor_ + bytes);
    return entries_.size() - 1;
  }

  // The section holding artifact `name`'s bytes, named after it (made unique where another
  // profile's artifact of that name holds other bytes).
  size_t artifact(const std::string& name, const std::vector<uint8_t>& blob) {
    const uint64_t sum = checksum64(blob.data(), blob.size());
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].blob && *entries_[i].blob == blob) return i;
    std::string unique = name;
    for (int n = 1; std::any_of(sections_.begin(), sections_.end(), [&](const json& s) { return s["name"] == unique; }); ++n)
      unique = name + "." + std::to_string(n);
    sections_.push_back({{"kind", "artifact"}, {"name", unique}, {"offset", cursor_}, {"size", blob.size()},
                         {"checksum", hex64(sum)}});
    entries_.push_back({Tensor(), &blob, blob.size(), sum});
    cursor_ = align_up(cursor_ + blob.size());
    return entries_.size() - 1;
  }

  const json& sections() const { return sections_; }
  uint64_t data_bytes() const { return cursor_; }

  // Copies every section's bytes into the data region starting at `data`.
  Status write(uint8_t* data) const {
    for (size_t i = 0; i < entries_.size(); ++i) {
      uint8_t* at = data + sections_[i]["offset"].get<uint64_t>();
      if (entries_[i].blob) {
        if (!entries_[i].blob->empty()) std::memcpy(at, entries_[i].blob->data(), entries_[i].blob->size());
        continue;
      }
      // A constant shared from a device's memory is read back again rather than held since its
      // checksum: a host copy of every weight at once could be as large as the file.
      TRIPY_ASSIGN_OR_RETURN(const Tensor c, copy_to(entries_[i].tensor, Device{}));
      if (c.nbytes() > 0) std::memcpy(at, c.data(), static_cast<size_t>(c.nbytes()));
    }
    return ok_status();
  }

 private:
  struct Entry {
    Tensor tensor;                        // a constant's section
    const std::vector<uint8_t>* blob;     // an artifact's
    uint64_t size, checksum;
  };
  json sections_ = json::array();
  std::vector<Entry> entries_;
  size_t constants_ = 0;
  uint64_t cursor_ = 0;  // relative to the data region
};

}  // namespace

StatusOr<std::vector<uint8_t>> serialize_executable(const std::vector<ProfileParts>& profiles, const Device& device) {
  if (profiles.empty()) return internal_error("Cannot save an executable without a profile.");
  std::vector<const Program*> programs;
  for (const ProfileParts& profile : profiles) {
    Status valid = validate_program(*profile.program);
    if (!valid.ok()) return internal_error("Cannot save an invalid program: " + valid.message());
    programs.push_back(profile.program.get());
  }
  if (Status agree = check_profiles_agree(programs); !agree.ok())
    return internal_error("Cannot save the executable: " + agree.message());
  try {
    SectionPlan plan;
    json table = json::array();
    for (const ProfileParts& profile : profiles) {
      json constants = json::array(), artifacts = json::object();
      for (const Tensor& c : profile.program->constants) {
        TRIPY_ASSIGN_OR_RETURN(const size_t section, plan.constant(c));
        constants.push_back(section);
      }
      for (const auto& [name, blob] : profile.artifacts) artifacts[name] = plan.artifact(name, blob);
      table.push_back({{"program", program_to_json(*profile.program)}, {"constants", std::move(constants)},
                       {"artifacts", std::move(artifacts)}});
    }
    json meta = {{"device", device.str()}, {"profiles", std::move(table)}, {"sections", plan.sections()},
                 {"data_bytes", plan.data_bytes()}};
    std::string text;
    dump_readable(meta, 0, text);
    text += "\n";
    const uint64_t data_start = align_up(kHeaderBytes + text.size());
    std::vector<uint8_t> out(data_start + plan.data_bytes(), 0);
    std::memcpy(out.data(), kMagic, sizeof(kMagic));
    put_le(out.data() + 8, Executable::kFormatVersion, 4);
    put_le(out.data() + 16, text.size(), 8);
    put_le(out.data() + 24, checksum64(text.data(), text.size()), 8);
    std::memcpy(out.data() + kHeaderBytes, text.data(), text.size());
    TRIPY_RETURN_IF_ERROR(plan.write(out.data() + data_start));
    return out;
  } catch (const std::exception& e) {
    return internal_error(std::string("Cannot serialize the executable: ") + e.what());
  }
}

StatusOr<std::vector<uint8_t>> serialize_executable(const Program& program, const Artifacts& artifacts, const Device& device) {
  // The caller keeps `program` alive for the call: a non-owning pointer stands for it.
  std::shared_ptr<const Program> borrowed(&program, [](const Program*) {});
  return serialize_executable(std::vector<ProfileParts>{{borrowed, artifacts}}, device);
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
