// safetensors files (runtime/safetensors.h): what is written reads back bit for bit, borrowed from
// the mapped file; every kind of damage is refused with a message naming the file and the tensor;
// paths that are not regular files are refused without blocking. Files are built byte by byte
// here (length, JSON text, data) so the reader is checked against the format, not against our writer.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/safetensors.h"
#include "../common/scratch_dir.h"

namespace tripy::rt {
namespace {

// A file: the 8-byte little-endian length of `header`, `header`, then `data`.
std::string file_bytes(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + data;
}

StatusOr<SafetensorsContents> parse_text(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "model.safetensors", nullptr);
}

// The message of the error that parsing `bytes` gives ("" if it parses).
std::string error_of(const std::string& bytes) {
  StatusOr<SafetensorsContents> r = parse_text(bytes);
  return r.ok() ? "" : r.status().message();
}

Tensor host(DType dtype, std::vector<int64_t> shape, int seed) {
  Tensor t = Tensor::empty_host(dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.data());
  for (int64_t i = 0; i < t.nbytes(); ++i) p[i] = dtype == DType::kBool ? (i + seed) % 2 : static_cast<uint8_t>(i * 7 + seed);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(scratch_.ok()); }
  std::string at(const std::string& name) const { return scratch_.at(name); }
  void write(const std::string& name, const std::string& bytes) const { std::ofstream(at(name), std::ios::binary) << bytes; }
  tripy::testing::ScratchDir scratch_{"tripy_safetensors"};
};

TEST_F(Safetensors, round_trip_keeps_order_bytes_and_metadata_and_borrows_the_mapping) {
  // Mixed element sizes, in an order that would misalign the data if it were laid out as listed.
  std::vector<NamedTensor> tensors = {
      {"layers.0.mask", host(DType::kBool, {3}, 1)},     {"layers.0.wq.weight", host(DType::kBFloat16, {4, 4}, 2)},
      {"scale", host(DType::kFloat8E4M3, {5}, 3)},       {"ids", host(DType::kInt64, {2, 3}, 4)},
      {"w32", host(DType::kFloat32, {3, 1}, 5)},         {"h", host(DType::kFloat16, {7}, 6)},
      {"q", host(DType::kInt8, {9}, 7)},                 {"i32", host(DType::kInt32, {2}, 8)},
      {"empty", host(DType::kFloat32, {0, 3}, 9)},       {"scalar", host(DType::kFloat32, {}, 10)},
  };
  const SafetensorsMetadata metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  ASSERT_TRUE(write_safetensors(at("model.safetensors"), tensors, metadata).ok());
  const std::string bytes = tripy::testing::read_text(at("model.safetensors"));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u) << "the data region starts at a multiple of 8";
  EXPECT_EQ(bytes[8], '{');

  StatusOr<SafetensorsContents> read = read_safetensors(at("model.safetensors"));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->metadata, metadata);
  ASSERT_EQ(read->tensors.size(), tensors.size());
  const std::shared_ptr<void>& mapping = read->tensors[0].tensor.owner();
  ASSERT_NE(mapping, nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& got = read->tensors[i];
    EXPECT_EQ(got.name, tensors[i].name);
    EXPECT_TRUE(same_bytes(got.tensor, tensors[i].tensor)) << got.name;
    EXPECT_EQ(got.tensor.owner(), mapping) << got.name << " was copied, not borrowed";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got.tensor.data()) % dtype_size(got.tensor.dtype()), 0u) << got.name;
  }
  // serialize_safetensors gives the bytes write_safetensors wrote.
  StatusOr<std::vector<uint8_t>> serialized = serialize_safetensors(tensors, metadata);
  ASSERT_TRUE(serialized.ok());
  EXPECT_EQ(std::string(serialized->begin(), serialized->end()), bytes);
}

TEST_F(Safetensors, reads_a_file_written_byte_by_byte_and_copies_only_a_misaligned_tensor) {
  // Header of 45 bytes (not padded): the data starts at byte 53, so the int32 at offset 0 is
  // misaligned and must be copied; the int8 after it is borrowed.
  const std::string header = R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I8","shape":[1],"data_offsets":[8,9]}})";
  std::string data(9, '\0');
  const int32_t values[2] = {-7, 123456};
  std::memcpy(data.data(), values, 8);
  data[8] = static_cast<char>(-3);
  write("odd.safetensors", file_bytes(header, data));
  StatusOr<SafetensorsContents> read = read_safetensors(at("odd.safetensors"));
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->tensors.size(), 2u);
  const Tensor& a = read->tensors[0].tensor;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4, 0u);
  EXPECT_EQ(static_cast<const int32_t*>(a.data())[0], -7);
  EXPECT_EQ(static_cast<const int32_t*>(a.data())[1], 123456);
  EXPECT_EQ(static_cast<const int8_t*>(read->tensors[1].tensor.data())[0], -3);
  EXPECT_NE(a.owner(), read->tensors[1].tensor.owner());
  EXPECT_TRUE(read->metadata.empty());
}

TEST_F(Safetensors, writing_to_a_loaded_tensor_changes_private_pages_not_the_file) {
  std::vector<NamedTensor> tensors = {{"w", host(DType::kFloat32, {4}, 1)}};
  ASSERT_TRUE(write_safetensors(at("w.safetensors"), tensors, {}).ok());
  const std::string before = tripy::testing::read_text(at("w.safetensors"));
  {
    StatusOr<SafetensorsContents> read = read_safetensors(at("w.safetensors"));
    ASSERT_TRUE(read.ok());
    static_cast<float*>(read->tensors[0].tensor.data())[0] = 42.0f;  // what a donated input allows
    EXPECT_EQ(static_cast<float*>(read->tensors[0].tensor.data())[0], 42.0f);
  }
  EXPECT_EQ(tripy::testing::read_text(at("w.safetensors")), before);
}

// One malformed file per row: a fragment the error must contain. Every message names the file.
struct Damage {
  const char* what;
  std::string bytes;
  const char* expect;
};

std::vector<Damage> damages() {
  const std::string ok_entry = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::string eight(8, '\0');
  std::string huge_length(8, '\0');
  huge_length[5] = 1;  // 2**40 bytes
  std::string absurd = file_bytes("{}");
  absurd[3] = 0x10;  // 268 MB: over the cap, which is checked before the file's size
  return {
      {"too short", std::string("\x02\0\0", 3), "the file has 3 bytes, fewer than the 8"},
      {"empty", "", "the file has 0 bytes"},
      {"header past the end", file_bytes("{}").substr(0, 9), "runs past the end of the file"},
      {"absurd header length", huge_length + "{}", "is over the limit of 100000000"},
      {"absurd but short", absurd, "is over the limit"},
      {"not an object", file_bytes("[1]"), "does not start with '{'"},
      {"invalid JSON", file_bytes("{\"a\":"), "its header is not valid JSON"},
      {"data after the JSON", file_bytes("{} x"), "its header is not valid JSON"},
      {"NUL in the header", file_bytes(std::string("{}\0 x", 5)), "its header holds a NUL byte at offset 2"},
      {"invalid UTF-8 name", file_bytes("{\"\xff\":{}}"), "its header is not valid JSON"},
      {"entry not an object", file_bytes(R"({"w":[1]})"), "tensor 'w' is not an object of dtype, shape and data_offsets"},
      {"dtype not a string", file_bytes(R"({"w":{"dtype":5,"shape":[],"data_offsets":[0,0]}})"), "tensor 'w': its dtype is not a string"},
      {"shape not a list", file_bytes(R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})"), "tensor 'w': its shape is not a list"},
      {"shape of floats", file_bytes(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})"), "tensor 'w': its shape is not a list"},
      {"negative dim", file_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"), "tensor 'w': its shape is not a list of non-negative"},
      {"nested shape", file_bytes(R"({"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})"), "tensor 'w': its shape is not a list"},
      {"one offset", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", eight), "tensor 'w': its data_offsets are not a list of two"},
      {"three offsets", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", eight), "its data_offsets are not a list of two"},
      {"negative offset", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight), "its data_offsets are not"},
      {"missing field", file_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", eight), "tensor 'w' has no shape"},
      {"unknown field", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})", eight), "tensor 'w' has an unknown field 'strides'"},
      {"field twice", file_bytes(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight), "tensor 'w' has dtype twice"},
      {"duplicate name", file_bytes("{\"w\":{" + ok_entry + "},\"w\":{" + ok_entry + "}}", eight), "tensor 'w' appears twice"},
      {"metadata twice", file_bytes(R"({"__metadata__":{},"__metadata__":{}})"), "__metadata__ twice"},
      {"metadata not strings", file_bytes(R"({"__metadata__":{"n":1}})"), "its __metadata__ value for 'n' is not a string"},
      {"metadata not an object", file_bytes(R"({"__metadata__":"pt"})"), "its __metadata__ is not an object of strings"},
      {"metadata key twice", file_bytes(R"({"__metadata__":{"k":"a","k":"b"}})"), "its __metadata__ has the key 'k' twice"},
      {"unknown dtype", file_bytes(R"({"w":{"dtype":"XYZ","shape":[2],"data_offsets":[0,8]}})", eight), "tensor 'w' has dtype 'XYZ', which Tripy does not read"},
      {"float64", file_bytes(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight), "tensor 'w' has dtype 'F64'"},
      {"uint8", file_bytes(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", eight), "tensor 'w' has dtype 'U8'"},
      {"begin after end", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), "tensor 'w' has data_offsets [8, 0), which begin after they end"},
      {"past the data", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234"), "tensor 'w' has data_offsets [0, 8), past the end of the data (4 bytes"},
      {"size mismatch", file_bytes(R"({"layers.0.wq.weight":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,100]}})", std::string(100, '\0')),
       "tensor 'layers.0.wq.weight' has data_offsets [0, 100) but dtype BF16 and shape (4, 4) need 32 bytes"},
      {"size overflows", file_bytes(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})"), "tensor 'w' has dtype F32 and shape (4611686018427387904, 4611686018427387904), which need more than"},
      {"dim past int64", file_bytes(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})"), "tensor 'w' has a dim of 18446744073709551615"},
      {"overlap", file_bytes("{\"a\":{" + ok_entry + "},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", std::string(12, '\0')),
       "tensors 'a' [0, 8) and 'b' [4, 12) overlap in the data"},
      {"same bytes twice", file_bytes("{\"a\":{" + ok_entry + "},\"b\":{" + ok_entry + "}}", eight), "tensors 'a' [0, 8) and 'b' [0, 8) overlap"},
      {"gap", file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')), "bytes [0, 4) of the data belong to no tensor"},
      {"trailing bytes", file_bytes("{\"w\":{" + ok_entry + "}}", std::string(12, '\0')), "bytes [8, 12) at the end of the data belong to no tensor"},
      {"bool not 0 or 1", file_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\1\0\2", 3)), "tensor 'm' holds the byte 2 at element 2"},
      {"control bytes in a name", file_bytes("{\"a\\nb\":[]}"), "tensor 'a\\x0ab' is not an object"},
  };
}

TEST(SafetensorsDamage, every_defect_is_refused_naming_the_file_and_what_is_wrong) {
  for (const Damage& d : damages()) {
    StatusOr<SafetensorsContents> r = parse_text(d.bytes);
    ASSERT_FALSE(r.ok()) << d.what << " was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << d.what;
    const std::string& message = r.status().message();
    EXPECT_NE(message.find("Cannot load safetensors file 'model.safetensors': "), std::string::npos) << d.what << ": " << message;
    EXPECT_NE(message.find(d.expect), std::string::npos) << d.what << ": " << message;
  }
}

TEST(SafetensorsDamage, a_shape_of_more_than_64_dims_is_refused_while_reading) {
  std::string dims = "1";
  for (int i = 0; i < 64; ++i) dims += ",1";
  const std::string msg = error_of(file_bytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[0,4]}}", "1234"));
  EXPECT_NE(msg.find("tensor 'w' has a shape of more than 64 dims"), std::string::npos) << msg;
  // 64 dims are fine.
  EXPECT_EQ(error_of(file_bytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[" + dims.substr(2) + "],\"data_offsets\":[0,4]}}", "1234")), "");
}

TEST(SafetensorsDamage, deep_nesting_stops_at_the_first_level_the_format_lacks) {
  const std::string deep = "{\"w\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(error_of(file_bytes(deep)).find("tensor 'w' is not an object"), std::string::npos);
}

TEST(SafetensorsDamage, a_padded_header_and_empty_tensors_are_accepted) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"e":{"dtype":"F16","shape":[0],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  StatusOr<SafetensorsContents> r = parse_text(file_bytes(header + "     ", std::string(8, '\0')));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].tensor.shape(), std::vector<int64_t>{0});
  EXPECT_EQ(r->metadata, (SafetensorsMetadata{{"format", "pt"}}));
  EXPECT_TRUE(parse_text(file_bytes("{}")).ok());
}

TEST_F(Safetensors, paths_that_are_not_regular_files_are_refused_without_blocking) {
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(at("dir").c_str(), 0700), 0);
  ASSERT_EQ(::symlink("fifo", at("link_to_fifo").c_str()), 0);
  const std::pair<const char*, const char*> cases[] = {
      {"fifo", "it is a FIFO (named pipe), not a regular file"},
      {"link_to_fifo", "it is a FIFO (named pipe), not a regular file"},
      {"dir", "it is a directory, not a regular file"},
      {"missing", "No such file or directory"},
  };
  for (const auto& [name, expect] : cases) {
    StatusOr<SafetensorsContents> r = read_safetensors(at(name));
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find("Cannot load safetensors file '" + at(name) + "': " + expect), std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(read_safetensors(at("missing")).status().code(), StatusCode::kNotFound);
  StatusOr<SafetensorsContents> nul = read_safetensors(at("model.safetensors") + std::string("\0x", 2));
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.status().message().find("contains a NUL byte"), std::string::npos);
  write("empty.safetensors", "");
  EXPECT_NE(read_safetensors(at("empty.safetensors")).status().message().find("the file has 0 bytes"), std::string::npos);
}

TEST_F(Safetensors, a_link_to_a_file_is_followed) {
  ASSERT_TRUE(write_safetensors(at("real.safetensors"), {{"w", host(DType::kInt32, {3}, 1)}}, {}).ok());
  ASSERT_EQ(::symlink("real.safetensors", at("link.safetensors").c_str()), 0);
  StatusOr<SafetensorsContents> r = read_safetensors(at("link.safetensors"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tensors[0].name, "w");
}

TEST_F(Safetensors, writer_refuses_what_the_format_cannot_hold_and_replaces_only_regular_files) {
  auto error = [&](const std::vector<NamedTensor>& tensors, const SafetensorsMetadata& metadata, const std::string& path) {
    Status st = write_safetensors(path, tensors, metadata);
    return st.ok() ? std::string() : st.message();
  };
  const Tensor w = host(DType::kFloat32, {2}, 1);
  const std::string path = at("out.safetensors");
  EXPECT_NE(error({{"q", host(DType::kInt4, {2}, 1)}}, {}, path).find("tensor 'q' has dtype int4, which the safetensors format cannot hold"), std::string::npos);
  EXPECT_NE(error({{"__metadata__", w}}, {}, path).find("cannot be named '__metadata__'"), std::string::npos);
  EXPECT_NE(error({{"w", w}, {"w", w}}, {}, path).find("tensor 'w' appears twice"), std::string::npos);
  EXPECT_NE(error({{"w", w}}, {{"k", "a"}, {"k", "b"}}, path).find("the metadata key 'k' appears twice"), std::string::npos);
  EXPECT_NE(error({{"\xff", w}}, {}, path).find("is not valid UTF-8"), std::string::npos);
  EXPECT_NE(error({{"w", w}}, {}, path + std::string("\0", 1)).find("contains a NUL byte"), std::string::npos);
  EXPECT_TRUE(scratch_.entries().empty()) << "a refused write left a file";

  tripy::testing::ScratchDir& dir = scratch_;
  std::ofstream(at("victim"), std::ios::binary) << "precious";
  ASSERT_EQ(::symlink("victim", at("link.safetensors").c_str()), 0);
  EXPECT_NE(error({{"w", w}}, {}, at("link.safetensors")).find("a symbolic link"), std::string::npos);
  EXPECT_EQ(tripy::testing::read_text(at("victim")), "precious");
  ASSERT_EQ(::mkdir(at("sub").c_str(), 0700), 0);
  EXPECT_NE(error({{"w", w}}, {}, at("sub")).find("a directory"), std::string::npos);
  EXPECT_NE(error({{"w", w}}, {}, at("no/such/dir.safetensors")).find("No such file or directory"), std::string::npos);
  // A regular file is replaced whole.
  ASSERT_TRUE(write_safetensors(path, {{"w", w}}, {}).ok());
  ASSERT_TRUE(write_safetensors(path, {{"v", host(DType::kInt8, {1}, 1)}}, {}).ok());
  StatusOr<SafetensorsContents> r = read_safetensors(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "v");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"link.safetensors", "out.safetensors", "sub", "victim"}));
}

}  // namespace
}  // namespace tripy::rt
