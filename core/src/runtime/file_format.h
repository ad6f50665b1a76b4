// The executable file: one file holding the Program, its constants, backend artifacts and the
// target device. Layout (all integers little-endian):
//
//   0   char[8]  magic "TRIPYEXE"
//   8   u32      format version (Executable::kFormatVersion)
//   12  u32      reserved, 0
//   16  u64      metadata length L
//   24  u64      checksum64 (checksum.h) of the L metadata bytes
//   32  L bytes  JSON metadata: {"device", "profiles": [...], "sections": [...], "data_bytes": the
//                exact size of the data region}
//   ... zero padding to the next multiple of 64: the start of the data region, D
//   D+  sections, each at a 64-aligned offset relative to D (so the JSON, written before the
//       sections' absolute positions are known, can still say where they are), zero padding
//       between them
//
// A section entry is {"kind": "constant", "name": "constant.<k>" (the k-th constant section),
// "offset", "size", "checksum", "dtype", "shape"} or {"kind": "artifact", "name" (unique), "offset",
// "size", "checksum"} (a backend artifact's bytes). "checksum" is the checksum64 of the section's
// bytes as 16 lowercase hex digits (a string: JSON readers in other languages lose 64-bit integers).
//
// Each optimization profile is {"program" (program_json.h), "constants": [the section of each of
// the program's constants, in order], "artifacts": {artifact name: its section}}, sections named
// by their index. Profiles share the sections whose bytes are equal (the weights, typically), and
// every section belongs to at least one profile; the profiles take the same inputs
// (check_profiles_agree).
//
// Every byte is checked on load: header fields exactly, the metadata and each section by checksum,
// padding for zero; so a flipped byte anywhere is rejected. Version 1 had no checksums and a
// 24-byte header; version 2 added both. Version 3 held one program: "program" where version 4 has
// "profiles", constant sections in the program's order and artifacts named as the backend named
// them; it still loads, as an executable of one profile.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::rt {

struct ExecutableContents {
  std::vector<ProfileParts> profiles;  // at least one
  Device device;
};

// Validates each program first (and that the profiles agree), so that whatever is written can be
// loaded back. Constants and artifacts whose bytes are equal are written once.
StatusOr<std::vector<uint8_t>> serialize_executable(const std::vector<ProfileParts>& profiles, const Device& device);
// An executable of one profile.
StatusOr<std::vector<uint8_t>> serialize_executable(const Program& program, const Artifacts& artifacts,
                                                    const Device& device);

// Checks everything (magic, version, every offset and size, every checksum and padding byte, the
// JSON, the profile table, then validate_program of each profile and check_profiles_agree).
// Any defect, including a format version this build cannot read, is kDataLoss; never throws.
// Constants are copied out of `data`.
StatusOr<ExecutableContents> deserialize_executable(const uint8_t* data, size_t size);

// Reads a file; its constants borrow the one buffer the file is read into (no second copy). What is
// not a regular file (a FIFO, a device, a directory) is refused without waiting on it, and a path
// holding a NUL byte is refused rather than cut short (kInvalidArgument, naming the path).
StatusOr<ExecutableContents> read_executable_file(const std::string& path);
// Writes a private temporary file beside `path` (created exclusively, so no planted file or link
// is opened), syncs it and renames it over `path`: the name holds the old file or the whole new
// one, never a part. Only a regular file is replaced: a symbolic link, FIFO, device or directory
// at `path` is refused, as is a path holding a NUL byte.
Status write_executable_file(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace tripy::rt
