// The executable file: exact round trips, checksums that catch any flipped byte, and clean
// rejection of damaged or foreign files (including a fuzz-style sweep of truncations and random
// byte flips).
#include "runtime/file_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "runtime/checksum.h"
#include "runtime/executable_impl.h"
#include "runtime/fields_text.h"
#include "runtime/program_json.h"
#include "test_programs.h"
#include "tripy/executable.h"

namespace tripy::rt {
namespace {

using nlohmann::json;

void expect_same_tensor(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << "constants are 64-byte aligned";
}

void expect_same_program(const Program& a, const Program& b) {
  ASSERT_EQ(a.shape_program.size(), b.shape_program.size());
  for (size_t i = 0; i < a.shape_program.size(); ++i) {
    EXPECT_EQ(a.shape_program[i].op, b.shape_program[i].op);
    EXPECT_EQ(a.shape_program[i].a, b.shape_program[i].a);
    EXPECT_EQ(a.shape_program[i].b, b.shape_program[i].b);
  }
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].dtype, b.inputs[i].dtype);
    EXPECT_EQ(a.inputs[i].dim_min, b.inputs[i].dim_min);
    EXPECT_EQ(a.inputs[i].dim_opt, b.inputs[i].dim_opt);
    EXPECT_EQ(a.inputs[i].dim_max, b.inputs[i].dim_max);
    EXPECT_EQ(a.inputs[i].dim_names, b.inputs[i].dim_names);
  }
  EXPECT_EQ(a.input_shapes, b.input_shapes);
  ASSERT_EQ(a.checks.size(), b.checks.size());
  for (size_t i = 0; i < a.checks.size(); ++i) {
    EXPECT_EQ(a.checks[i].kind, b.checks[i].kind);
    EXPECT_EQ(a.checks[i].a, b.checks[i].a);
    EXPECT_EQ(a.checks[i].b, b.checks[i].b);
    EXPECT_EQ(a.checks[i].message, b.checks[i].message);
    EXPECT_EQ(a.checks[i].source, b.checks[i].source);
  }
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_EQ(a.buffers[i].kind, b.buffers[i].kind);
    EXPECT_EQ(a.buffers[i].index, b.buffers[i].index);
    EXPECT_EQ(a.buffers[i].dtype, b.buffers[i].dtype);
    EXPECT_EQ(a.buffers[i].shape, b.buffers[i].shape);
    EXPECT_EQ(a.buffers[i].offset, b.buffers[i].offset);
    EXPECT_EQ(a.buffers[i].max_bytes, b.buffers[i].max_bytes);
  }
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.output_names, b.output_names);
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const Kernel &x = a.kernels[i], &y = b.kernels[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.outputs, y.outputs);
    EXPECT_EQ(x.fused.domain, y.fused.domain);
    EXPECT_EQ(x.fused.reduce_from, y.fused.reduce_from);
    EXPECT_EQ(x.fused.input_axes, y.fused.input_axes);
    ASSERT_EQ(x.fused.instrs.size(), y.fused.instrs.size());
    for (size_t j = 0; j < x.fused.instrs.size(); ++j) {
      const Instr &p = x.fused.instrs[j], &q = y.fused.instrs[j];
      EXPECT_EQ(p.op, q.op);
      EXPECT_EQ(p.dtype, q.dtype);
      EXPECT_EQ(p.a, q.a);
      EXPECT_EQ(p.b, q.b);
      EXPECT_EQ(p.c, q.c);
      EXPECT_TRUE(p.imm == q.imm || (std::isnan(p.imm) && std::isnan(q.imm))) << p.imm << " vs " << q.imm;
    }
    EXPECT_EQ(x.fused.output_regs, y.fused.output_regs);
    // Every kind's attributes, field by field (NaN immediates print alike).
    auto text = [](const Kernel& k) { return visit_kind_attrs(k, [](const auto& a) { return field_text(a); }); };
    EXPECT_EQ(text(x), text(y));
    EXPECT_EQ(x.source, y.source);
  }
  ASSERT_EQ(a.constants.size(), b.constants.size());
  for (size_t i = 0; i < a.constants.size(); ++i) expect_same_tensor(a.constants[i], b.constants[i]);
  EXPECT_EQ(a.arena_bytes, b.arena_bytes);
  ASSERT_EQ(a.sources.size(), b.sources.size());
  for (size_t i = 0; i < a.sources.size(); ++i) {
    ASSERT_EQ(a.sources[i].size(), b.sources[i].size());
    for (size_t j = 0; j < a.sources[i].size(); ++j) {
      const SourceFrame &p = a.sources[i][j], &q = b.sources[i][j];
      EXPECT_EQ(p.file, q.file);
      EXPECT_EQ(p.line, q.line);
      EXPECT_EQ(p.function, q.function);
      EXPECT_EQ(p.col, q.col);
      EXPECT_EQ(p.end_col, q.end_col);
    }
  }
}

Artifacts some_artifacts() {
  return {{"cuda.cubin", std::vector<uint8_t>(100, 0xAB)}, {"cuda.meta", {'{', '}'}}, {"empty", {}}};
}

std::vector<uint8_t> serialized(const Program& p, const Artifacts& a = some_artifacts(), Device d = {Device::Kind::kGpu, 1}) {
  auto bytes = serialize_executable(p, a, d);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? bytes.value() : std::vector<uint8_t>{};
}

constexpr size_t kHeader = 32;

uint64_t metadata_bytes(const std::vector<uint8_t>& file) {
  uint64_t len = 0;
  std::memcpy(&len, file.data() + 16, 8);
  return len;
}

// Stores the checksum of the metadata as it now is, as a writer that changed it would.
void resign(std::vector<uint8_t>& file) {
  const uint64_t sum = checksum64(file.data() + kHeader, metadata_bytes(file));
  std::memcpy(file.data() + 24, &sum, 8);
}

json metadata(const std::vector<uint8_t>& file) {
  return json::parse(file.begin() + kHeader, file.begin() + static_cast<int64_t>(kHeader + metadata_bytes(file)));
}

// Rewrites (and re-signs) the metadata of a serialized file, keeping its data region: edits
// reach the checks behind the checksum.
std::vector<uint8_t> with_metadata(const std::vector<uint8_t>& file, const std::function<void(json&)>& edit) {
  const uint64_t len = metadata_bytes(file);
  json meta = metadata(file);
  edit(meta);
  const std::string text = meta.dump();
  const size_t old_start = (kHeader + len + 63) / 64 * 64, new_start = (kHeader + text.size() + 63) / 64 * 64;
  std::vector<uint8_t> out(new_start, 0);
  std::memcpy(out.data(), file.data(), 16);
  const uint64_t n = text.size();
  std::memcpy(out.data() + 16, &n, 8);
  std::memcpy(out.data() + kHeader, text.data(), text.size());
  out.insert(out.end(), file.begin() + static_cast<int64_t>(old_start), file.end());
  resign(out);
  return out;
}

// Where section i's bytes start in the file.
size_t section_start(const std::vector<uint8_t>& file, size_t i) {
  const size_t data_start = (kHeader + metadata_bytes(file) + 63) / 64 * 64;
  return data_start + metadata(file)["sections"][i]["offset"].get<size_t>();
}

Status load_status(const std::vector<uint8_t>& bytes) { return deserialize_executable(bytes.data(), bytes.size()).status(); }

void expect_data_loss(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  Status st = load_status(bytes);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
}

TEST(FileFormat, round_trip_keeps_every_field) {
  Program p = testing::rich_program();
  p.kernels[0].fused.instrs[7].imm = std::nan("");
  p.kernels[0].fused.instrs[1] = {EwOp::kLoad, DType::kFloat32, 1, -1, -1, 1e-300};
  auto bytes = serialized(p);
  EXPECT_EQ(std::memcmp(bytes.data(), "TRIPYEXE", 8), 0);
  auto loaded = deserialize_executable(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  expect_same_program(p, *loaded->profiles[0].program);
  EXPECT_EQ(loaded->profiles[0].artifacts, some_artifacts());
  EXPECT_EQ(loaded->device, (Device{Device::Kind::kGpu, 1}));
  // Saving what was loaded gives the same bytes: the format is deterministic.
  EXPECT_EQ(serialized(*loaded->profiles[0].program, loaded->profiles[0].artifacts, loaded->device), bytes);
}

TEST(FileFormat, file_round_trip_borrows_constants_from_the_read_buffer) {
  const std::string path = ::testing::TempDir() + "/rich.tpy";
  Program p = testing::rich_program();
  ASSERT_TRUE(write_executable_file(path, serialized(p, {}, Device{})).ok());
  auto loaded = read_executable_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  expect_same_program(p, *loaded->profiles[0].program);
  EXPECT_TRUE(loaded->profiles[0].artifacts.empty());
  EXPECT_EQ(loaded->device, Device{});
  std::remove(path.c_str());
}

TEST(FileFormat, metadata_is_readable_json) {
  auto bytes = serialized(testing::affine_program());
  const std::string text(bytes.begin() + kHeader, bytes.end());
  EXPECT_NE(text.find("\"fused_mul_add\""), std::string::npos);
  EXPECT_NE(text.find("\"mul\""), std::string::npos);
  EXPECT_NE(text.find("\"device\": \"gpu:1\""), std::string::npos);
}

TEST(FileFormat, missing_file_is_not_found) {
  auto st = read_executable_file("/nonexistent/dir/model.tpy").status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/dir/model.tpy"), std::string::npos);
}

TEST(FileFormat, refuses_to_save_invalid_programs) {
  Program p = testing::affine_program();
  p.outputs = {0};
  EXPECT_EQ(serialize_executable(p, {}, Device{}).status().code(), StatusCode::kInternal);
}

TEST(FileFormat, rejects_foreign_and_damaged_headers) {
  auto good = serialized(testing::affine_program());
  expect_data_loss({}, "fewer than its 32-byte header");
  auto bad_magic = good;
  bad_magic[0] = 'X';
  expect_data_loss(bad_magic, "does not start with \"TRIPYEXE\"");
  auto reserved = good;
  reserved[13] = 1;
  expect_data_loss(reserved, "reserved header field");
  auto too_long = good;
  too_long[23] = 0x7f;
  expect_data_loss(too_long, "bytes of metadata");
  auto appended = good;
  appended.push_back(0);
  expect_data_loss(appended, "should have");
  auto garbage = with_metadata(good, [](json& m) { m = json::array(); });
  garbage[kHeader] = '{';
  resign(garbage);
  expect_data_loss(garbage, "not valid JSON");
}

TEST(FileFormat, unknown_version_names_both_versions) {
  auto bytes = serialized(testing::affine_program());
  bytes[8] = 7;
  Status st = load_status(bytes);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("version 7"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("reads version " + std::to_string(Executable::kFormatVersion)), std::string::npos);
}

TEST(FileFormat, version_1_files_without_checksums_are_refused) {
  auto bytes = serialized(testing::affine_program());
  bytes[8] = 1;
  expect_data_loss(bytes, "file format version 1, but this build of Tripy reads version " + std::to_string(Executable::kFormatVersion) + " (and 3) only");
}

// Published XXH64 values (seed 0): the first two are xxHash's own examples, the rest were
// computed with the reference library (libxxhash 0.8.1); the lengths reach every path (lanes,
// 8-byte, 4-byte and 1-byte tails).
TEST(Checksum, matches_reference_xxh64) {
  EXPECT_EQ(checksum64(nullptr, 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(checksum64("abc", 3), 0x44bc2cf5ad770999ull);
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(checksum64(fox.data(), fox.size()), 0x0b242d361fda71bcull);
  std::vector<uint8_t> k(1000);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::pair<size_t, uint64_t> known[] = {{5, 0xc7608efddb7051feull},   {8, 0xdab99d95c6f90092ull},
                                               {31, 0xa2aa5f33cc4a6119ull},  {32, 0x23c3c17ef790fd97ull},
                                               {33, 0x50a7cfc7ba588784ull},  {100, 0xa61f8d4c170fe531ull},
                                               {1000, 0x5f235fa033f1a3fbull}};
  for (const auto& [n, h] : known) EXPECT_EQ(checksum64(k.data(), n), h) << n << " bytes";
}

TEST(Checksum, every_single_bit_flip_and_every_length_changes_it) {
  std::vector<uint8_t> buf(1024);
  std::mt19937 rng(5);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint64_t base = checksum64(buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_NE(checksum64(buf.data(), buf.size()), base) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  // Zeros of every length: only the length tells them apart.
  const std::vector<uint8_t> zeros(1024, 0);
  std::vector<uint64_t> sums;
  for (size_t n = 0; n <= zeros.size(); ++n) sums.push_back(checksum64(zeros.data(), n));
  std::sort(sums.begin(), sums.end());
  EXPECT_EQ(std::adjacent_find(sums.begin(), sums.end()), sums.end());
  // Unaligned input reads the same bytes.
  std::vector<uint8_t> shifted(buf.size() + 3);
  std::memcpy(shifted.data() + 3, buf.data(), buf.size());
  EXPECT_EQ(checksum64(shifted.data() + 3, buf.size()), base);
}

TEST(FileFormat, flipped_constant_byte_names_the_section) {
  auto bytes = serialized(testing::rich_program());
  bytes[section_start(bytes, 1) + 5] ^= 0x10;
  expect_data_loss(bytes, "section 'constant.1' checksum mismatch");
}

TEST(FileFormat, flipped_artifact_byte_names_the_section) {
  auto bytes = serialized(testing::rich_program());
  ASSERT_EQ(metadata(bytes)["sections"][2]["name"], "cuda.cubin");
  bytes[section_start(bytes, 2) + 99] ^= 0x01;
  expect_data_loss(bytes, "section 'cuda.cubin' checksum mismatch");
}

TEST(FileFormat, flipped_metadata_byte_is_a_metadata_checksum_mismatch) {
  auto bytes = serialized(testing::rich_program());
  const std::string text(bytes.begin() + kHeader, bytes.begin() + static_cast<int64_t>(kHeader + metadata_bytes(bytes)));
  // A flip that keeps the JSON valid and plausible: one digit of the arena size.
  const size_t at = text.find("\"arena_bytes\": ") + std::strlen("\"arena_bytes\": ");
  ASSERT_NE(at, std::string::npos);
  bytes[kHeader + at] ^= 0x01;
  expect_data_loss(bytes, "metadata checksum mismatch");
  auto sum = serialized(testing::rich_program());
  sum[24] ^= 0x80;  // the stored checksum itself
  expect_data_loss(sum, "metadata checksum mismatch");
}

TEST(FileFormat, nonzero_padding_is_rejected) {
  auto bytes = serialized(testing::rich_program());
  // Constant 0 is 16 bytes: the rest of its 64-byte slot is padding.
  bytes[section_start(bytes, 0) + 40] = 1;
  expect_data_loss(bytes, "padding byte at offset " + std::to_string(section_start(bytes, 0) + 40) + " is not zero");
  auto after_json = serialized(testing::rich_program());
  const size_t meta_end = kHeader + metadata_bytes(after_json);
  ASSERT_NE(meta_end % 64, 0u) << "the test needs padding after the JSON";
  after_json[meta_end] = ' ';
  expect_data_loss(after_json, "padding byte at offset " + std::to_string(meta_end));
}

TEST(FileFormat, rejects_missing_or_malformed_section_checksums) {
  auto good = serialized(testing::rich_program());
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0].erase("checksum"); }), "sections[0].checksum is missing");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][1]["checksum"] = "12"; }), "not 16 lowercase hex digits");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][1]["checksum"] = "0123456789ABCDEF"; }), "not 16 lowercase hex digits");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][1]["checksum"] = 7; }), "sections[1].checksum");
  // A section pointed at other bytes fails its checksum, whatever the bytes are.
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][3]["offset"] = m["sections"][2]["offset"]; }),
                   "section 'cuda.meta' checksum mismatch");
}

// The checksums' promise: no single damaged byte anywhere in the file loads.
TEST(FileFormat, every_single_byte_flip_is_rejected) {
  const auto bytes = serialized(testing::rich_program(), some_artifacts(), Device{});
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] ^= static_cast<uint8_t>(1u << (i % 8));
    Status st = load_status(damaged);
    ASSERT_FALSE(st.ok()) << "a flip at byte " << i << " of " << bytes.size() << " loaded";
    ASSERT_EQ(st.code(), StatusCode::kDataLoss) << st.message();
  }
}

TEST(FileFormat, rejects_bad_metadata_with_the_field_named) {
  auto good = serialized(testing::rich_program());
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"].erase("kernels"); }), "program.kernels is missing");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["arena_bytes"] = "big"; }), "program.arena_bytes is not an integer");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["kernels"][0]["attrs"]["instrs"][2]["op"] = "mull"; }),
                   "program.kernels[0].attrs.instrs[2].op: unknown op 'mull'");
  // Attributes are read from their field lists: an unknown one, a wrong type or an out-of-range
  // integer names the field.
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["kernels"][0]["attrs"]["scale"] = 2; }),
                   "program.kernels[0].attrs has an unknown field 'scale'");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["kernels"][0]["attrs"]["reduce_from"] = "one"; }),
                   "program.kernels[0].attrs.reduce_from is not an integer");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["kernels"][0]["attrs"]["reduce_from"] = int64_t{1} << 40; }),
                   "program.kernels[0].attrs.reduce_from is out of range");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["kernels"][0]["kind"] = "conv"; }),
                   "program.kernels[0].kind: unknown name 'conv'");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["buffers"][3]["dtype"] = "float64"; }), "unknown dtype 'float64'");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["buffers"][3]["index"] = 1e30; }), "is not an integer");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["buffers"][3]["index"] = int64_t{1} << 40; }), "out of range for a 32-bit index");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["outputs"] = {18446744073709551615ull}; }), "too large");
  expect_data_loss(with_metadata(good, [](json& m) { m["device"] = "tpu"; }), "Unknown device: 'tpu'");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["offset"] = 1 << 20; }), "sections[0] spans");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["offset"] = 1; }), "sections[0] spans");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["size"] = -1; }), "sections[0] spans");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["shape"] = {3}; }), "does not match its dtype and shape");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["shape"] = {int64_t{1} << 62, 4}; }), "does not match its dtype and shape");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][3]["name"] = "cuda.cubin"; }), "appears twice");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][0]["kind"] = "blob"; }), "unknown kind 'blob'");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"].erase(1); }), "constants[1] is 1, which is not a constant section");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][1]["name"] = "constant.0"; }), "is named 'constant.0' but is constant 1");
  expect_data_loss(with_metadata(good, [](json& m) { m["sections"][1].erase("name"); }), "sections[1].name is missing");
  expect_data_loss(with_metadata(good, [](json& m) { m["profiles"][0]["program"]["shape_program"][4][1] = 6; }), "only earlier slots");
}

// Every load of a damaged file either fails cleanly or yields a program that passes validation
// and that runs, or refuses to run, without crashing (the run-time checks' share of the defence).
void expect_clean(const std::vector<uint8_t>& bytes, int* loaded) {
  auto result = deserialize_executable(bytes.data(), bytes.size());
  if (!result.ok()) {
    EXPECT_FALSE(result.status().message().empty());
    EXPECT_TRUE(result.status().code() == StatusCode::kDataLoss || result.status().code() == StatusCode::kResourceExhausted)
        << result.status().message();
    return;
  }
  ++*loaded;
  EXPECT_TRUE(validate_program(*result->profiles[0].program).ok());
  if (result->device != Device{}) return;
  Executable exe = make_executable(result->profiles[0].program, result->profiles[0].artifacts, result->device);
  for (int64_t batch : {1, 3}) {
    std::vector<Tensor> inputs;
    for (const InputDesc& in : exe.inputs()) {
      std::vector<int64_t> shape = in.dim_opt;
      if (!shape.empty()) shape[0] = std::clamp(batch, in.dim_min[0], in.dim_max[0]);
      Tensor t = Tensor::empty_host(in.dtype, shape);
      if (t.nbytes() > 0) std::memset(t.data(), 0x3c, static_cast<size_t>(t.nbytes()));
      inputs.push_back(t);
    }
    (void)exe.run(inputs);
  }
}

TEST(FileFormatFuzz, every_truncation_fails_cleanly) {
  auto bytes = serialized(testing::rich_program());
  int loaded = 0;
  const size_t step = std::max<size_t>(1, bytes.size() / 3000);
  for (size_t n = 0; n < bytes.size(); n += step) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<int64_t>(n));
    expect_clean(cut, &loaded);
  }
  EXPECT_EQ(loaded, 0) << "a truncated file must never load";
}

TEST(FileFormatFuzz, random_byte_flips_fail_cleanly) {
  auto bytes = serialized(testing::rich_program(), {}, Device{});
  std::mt19937 rng(20240611);
  int loaded = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto damaged = bytes;
    const int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f) {
      // Half the flips land in the header and metadata, where structure lives.
      const size_t limit = trial % 2 ? damaged.size() : std::min<size_t>(damaged.size(), kHeader + 4096);
      damaged[rng() % limit] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    if (damaged == bytes) continue;  // two flips of one bit cancel
    expect_clean(damaged, &loaded);
  }
  EXPECT_EQ(loaded, 0) << "the checksums catch every flip, in constants too";
}

// Structured fuzzing: small integers written into random numeric fields of the (re-signed)
// metadata reach the validator and the run-time checks, which the checksums keep flipped bits from.
void collect_ints(json& j, std::vector<json*>& out) {
  if (j.is_number_integer()) out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect_ints(child, out);
}

// TRIPY_FUZZ_TRIALS=100000 TRIPY_FUZZ_SEED=n runs a longer hunt (best under ASan).
TEST(FileFormatFuzz, small_integers_in_metadata_fail_cleanly_or_run) {
  const auto bytes = serialized(testing::rich_program(), {}, Device{});
  const char* trials_env = std::getenv("TRIPY_FUZZ_TRIALS");
  const char* seed_env = std::getenv("TRIPY_FUZZ_SEED");
  const int trials = trials_env ? std::atoi(trials_env) : 2000;
  std::mt19937 rng(seed_env ? static_cast<unsigned>(std::atoi(seed_env)) : 7u);
  int loaded = 0;
  for (int trial = 0; trial < trials; ++trial) {
    auto damaged = with_metadata(bytes, [&](json& m) {
      std::vector<json*> ints;
      collect_ints(m["profiles"][0]["program"], ints);
      for (int k = 0; k < 1 + trial % 3; ++k) *ints[rng() % ints.size()] = static_cast<int64_t>(rng() % 13) - 2;
    });
    expect_clean(damaged, &loaded);
  }
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace tripy::rt
