// Optimization profiles: an executable holding one program per profile picks the first profile
// whose ranges hold a call, refuses a call none holds with every profile's ranges, keeps its
// profiles through save and load (sharing equal sections), and refuses corrupt profile tables.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/checksum.h"
#include "runtime/executable_impl.h"
#include "runtime/file_format.h"
#include "test_programs.h"
#include "tripy/executable.h"

namespace tripy::rt {
namespace {

using nlohmann::json;
using testing::f32;

// out = x * scale + 1 for x: float32 [n], n in [lo, hi].
std::shared_ptr<const Program> affine(int64_t lo, int64_t hi, double scale) {
  Program p = testing::affine_program();
  p.inputs[0].dim_min = {lo};
  p.inputs[0].dim_opt = {lo};
  p.inputs[0].dim_max = {hi};
  p.kernels[0].fused.instrs[1].imm = scale;
  return std::make_shared<const Program>(std::move(p));
}

// Profile 0: n in [1, 4], x * 2 + 1; profile 1: n in [3, 16], x * 3 + 1 (a program that tells
// which profile ran). Sizes 3 and 4 are in both: the first profile wins.
Executable two_profiles() {
  auto exe = make_executable({{affine(1, 4, 2.0), {}}, {affine(3, 16, 3.0), {}}}, Device{});
  EXPECT_TRUE(exe.ok()) << exe.status().message();
  return std::move(exe).value();
}

std::vector<float> run_values(const Executable& exe, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  auto out = exe.run({f32({n}, x)});
  EXPECT_TRUE(out.ok()) << format_error(out.status());
  if (!out.ok()) return {};
  const float* p = static_cast<const float*>((*out)[0].data());
  return std::vector<float>(p, p + (*out)[0].numel());
}

size_t selected(const Executable& exe, int64_t n) {
  auto chosen = exe.select_profile({f32({n}, std::vector<float>(static_cast<size_t>(n)))});
  EXPECT_TRUE(chosen.ok()) << chosen.status().message();
  return chosen.ok() ? chosen.value() : 99;
}

TEST(Profiles, the_first_profile_that_holds_the_call_runs) {
  Executable exe = two_profiles();
  ASSERT_EQ(exe.num_profiles(), 2u);
  EXPECT_EQ(exe.profile_inputs(1)[0].dim_min, (std::vector<int64_t>{3}));
  EXPECT_EQ(exe.inputs()[0].dim_max, (std::vector<int64_t>{4}));  // profile 0's
  for (int64_t n : {1, 3, 4}) EXPECT_EQ(selected(exe, n), 0u) << n;
  for (int64_t n : {5, 16}) EXPECT_EQ(selected(exe, n), 1u) << n;
  EXPECT_EQ(run_values(exe, 4), (std::vector<float>{1, 3, 5, 7}));
  EXPECT_EQ(run_values(exe, 5), (std::vector<float>{1, 4, 7, 10, 13}));
  EXPECT_EQ(run_values(exe, 2), (std::vector<float>{1, 3}));  // back to profile 0
}

TEST(Profiles, a_call_no_profile_holds_names_every_range) {
  Executable exe = two_profiles();
  Status st = exe.run({f32({17}, std::vector<float>(17))}).status();
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(),
            "No optimization profile of this executable covers this call (a call runs the first profile, in order, "
            "whose ranges hold every argument):\n"
            "    profile 0: x: (1..4,)\n"
            "        Argument 'x': dimension 0 has size 17, which is outside the range [1, 4] of profile 0.\n"
            "    profile 1: x: (3..16,)\n"
            "        Argument 'x': dimension 0 has size 17, which is outside the range [3, 16] of profile 1.");
  EXPECT_EQ(exe.select_profile({f32({17}, std::vector<float>(17))}).status().message(), st.message());
  // What no profile can change is reported as it is: a dtype.
  int32_t ints[2] = {1, 2};
  EXPECT_EQ(exe.run({testing::host_tensor(DType::kInt32, {2}, ints)}).status().message(),
            "Argument 'x' has dtype int32, but this executable was compiled for float32.");
}

TEST(Profiles, profiles_must_take_the_same_inputs) {
  Program renamed = *affine(5, 8, 2.0);
  renamed.inputs[0].name = "y";
  auto exe = make_executable({{affine(1, 4, 2.0), {}}, {std::make_shared<const Program>(renamed), {}}}, Device{});
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exe.status().message().find("Optimization profile 1 names input 0 'y', profile 0 'x'"), std::string::npos)
      << exe.status().message();
  Program wider = *affine(5, 8, 2.0);
  wider.inputs[0].dtype = DType::kFloat16;
  EXPECT_FALSE(make_executable({{affine(1, 4, 2.0), {}}, {std::make_shared<const Program>(wider), {}}}, Device{}).ok());
}

// --- the file ---

constexpr size_t kHeader = 32;

uint64_t metadata_bytes(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data() + 16, 8);
  return n;
}

json metadata(const std::vector<uint8_t>& file) {
  return json::parse(file.begin() + kHeader, file.begin() + static_cast<int64_t>(kHeader + metadata_bytes(file)));
}

// The file with its metadata edited (and the header's length and checksum made to agree).
std::vector<uint8_t> with_metadata(const std::vector<uint8_t>& file, const std::function<void(json&)>& edit) {
  json meta = metadata(file);
  edit(meta);
  const std::string text = meta.dump();
  const size_t old_start = (kHeader + metadata_bytes(file) + 63) / 64 * 64;
  std::vector<uint8_t> out((kHeader + text.size() + 63) / 64 * 64, 0);
  std::memcpy(out.data(), file.data(), 16);
  const uint64_t n = text.size(), sum = checksum64(text.data(), text.size());
  std::memcpy(out.data() + 16, &n, 8);
  std::memcpy(out.data() + 24, &sum, 8);
  std::memcpy(out.data() + kHeader, text.data(), text.size());
  out.insert(out.end(), file.begin() + static_cast<int64_t>(old_start), file.end());
  return out;
}

void expect_data_loss(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  Status st = deserialize_executable(bytes.data(), bytes.size()).status();
  ASSERT_FALSE(st.ok()) << "loaded, expected: " << fragment;
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  std::string text = st.message();
  for (const ErrorNote& note : st.notes()) text += "\n" + note.text;
  EXPECT_NE(text.find(fragment), std::string::npos) << text;
}

TEST(ProfilesFile, round_trip_keeps_each_profile_and_its_selection) {
  Executable exe = two_profiles();
  auto bytes = exe.serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto loaded = Executable::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->num_profiles(), 2u);
  EXPECT_EQ(loaded->profile_inputs(1)[0].dim_max, (std::vector<int64_t>{16}));
  EXPECT_EQ(run_values(*loaded, 3), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(run_values(*loaded, 6), (std::vector<float>{1, 4, 7, 10, 13, 16}));
  EXPECT_EQ(loaded->serialize().value(), bytes.value()) << "the format is deterministic";
}

TEST(ProfilesFile, equal_constants_and_artifacts_are_written_once) {
  auto p = std::make_shared<const Program>(testing::rich_program());
  Artifacts a = {{"cuda.cubin", std::vector<uint8_t>(100, 0xAB)}, {"cuda.meta", {'{', '}'}}};
  Artifacts b = {{"cuda.cubin", std::vector<uint8_t>(100, 0xCD)}, {"cuda.meta", {'{', '}'}}};
  auto bytes = serialize_executable({{p, a}, {p, b}}, Device{Device::Kind::kGpu, 0});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  const json meta = metadata(*bytes);
  std::vector<std::string> names;
  for (const json& s : meta["sections"]) names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"constant.0", "constant.1", "cuda.cubin", "cuda.meta", "cuda.cubin.1"}));
  EXPECT_EQ(meta["profiles"][1]["constants"], json::array({0, 1}));
  EXPECT_EQ(meta["profiles"][1]["artifacts"], json({{"cuda.cubin", 4}, {"cuda.meta", 3}}));
  auto loaded = deserialize_executable(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->profiles.size(), 2u);
  EXPECT_EQ(loaded->profiles[0].artifacts, a);
  EXPECT_EQ(loaded->profiles[1].artifacts, b);
  // One copy of each weight in memory too.
  EXPECT_EQ(loaded->profiles[0].program->constants[1].data(), loaded->profiles[1].program->constants[1].data());
}

TEST(ProfilesFile, corrupt_profile_tables_are_refused) {
  auto bytes = two_profiles().serialize().value();
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"] = json::array(); }), "metadata.profiles is empty");
  expect_data_loss(with_metadata(bytes, [](json& m) { m.erase("profiles"); }), "metadata.profiles is missing");
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"] = 3; }), "metadata.profiles");
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"][1].erase("program"); }),
                   "metadata.profiles[1].program is missing");
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"][1]["artifacts"] = json::array(); }),
                   "metadata.profiles[1].artifacts is not an object");
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"][1]["program"]["inputs"][0]["name"] = "z"; }),
                   "Optimization profile 1 names input 0 'z', profile 0 'x'");
  expect_data_loss(with_metadata(bytes, [](json& m) { m["profiles"][1]["program"]["kernels"][0]["inputs"] = {7}; }),
                   "in optimization profile 1");

  auto p = std::make_shared<const Program>(testing::rich_program());
  auto rich = serialize_executable({{p, {{"a", {1}}}}, {p, {{"b", {2}}}}}, Device{}).value();
  ASSERT_EQ(metadata(rich)["profiles"][1]["artifacts"]["b"], 3);
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["constants"][0] = 99; }),
                   "metadata.profiles[1].constants[0] is 99, which is not a constant section (there are 4 sections)");
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["constants"][0] = 2; }),
                   "constants[0] is 2, which is not a constant section");
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["artifacts"]["b"] = 0; }),
                   "metadata.profiles[1].artifacts.b is 0, which is not an artifact section");
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["artifacts"]["b"] = -1; }), "is -1");
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["artifacts"]["b"] = "3"; }),
                   "artifacts.b is not an integer");
  // Section 3 ('b') left to no profile: bytes nothing reads are damage too.
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["artifacts"] = json::object({{"b", 2}}); }),
                   "section 'b' belongs to no profile");
  expect_data_loss(with_metadata(rich, [](json& m) { m["profiles"][1]["constants"] = json::array({0}); }),
                   "in optimization profile 1");  // the program reads a constant 1 it no longer has
}

// Version 3 (one program, before profiles) still loads, as one profile.
TEST(ProfilesFile, version_3_files_load_as_one_profile) {
  auto p = testing::rich_program();
  auto bytes = serialize_executable(p, {{"cuda.meta", {'{', '}'}}}, Device{}).value();
  auto v3 = with_metadata(bytes, [](json& m) {
    m["program"] = m["profiles"][0]["program"];
    m.erase("profiles");
  });
  v3[8] = 3;
  auto loaded = deserialize_executable(v3.data(), v3.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->profiles.size(), 1u);
  EXPECT_EQ(loaded->profiles[0].program->constants.size(), 2u);
  EXPECT_EQ(loaded->profiles[0].artifacts, (Artifacts{{"cuda.meta", {'{', '}'}}}));
  // A version 3 file has no profile table, and a version 4 file needs one.
  auto mixed = bytes;
  mixed[8] = 3;
  expect_data_loss(mixed, "metadata.program is missing");
}

}  // namespace
}  // namespace tripy::rt
