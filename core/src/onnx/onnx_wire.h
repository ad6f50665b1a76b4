// The protobuf wire format, read without a schema compiler: the ONNX reader (onnx_parse.cc) walks
// a message as (field number, wire type, value) records over the file's bytes. Nothing is copied
// here and every length is checked against the bytes left, so a truncated or hostile message is an
// error string, never a read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tripy::onnx {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// A view of `size` bytes (a message, a string or a packed list) inside the file.
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string str() const { return std::string(reinterpret_cast<const char*>(data), size); }
};

// One record of a message: its field number, wire type and value (the varint or fixed value in
// `number`, the bytes of a length-delimited one in `bytes`).
struct Field {
  uint32_t tag = 0;
  WireType type = WireType::kVarint;
  uint64_t number = 0;
  Bytes bytes;
};

// Reads the records of one message in order. next() returns false at the end or at damage; then
// error() says which (empty at a clean end).
class WireReader {
 public:
  explicit WireReader(Bytes message) : p_(message.data), end_(message.data + message.size) {}

  bool next(Field& f) {
    if (p_ == end_ || !error_.empty()) return false;
    uint64_t key = 0;
    if (!varint(key)) return false;
    f.tag = static_cast<uint32_t>(key >> 3);
    if (f.tag == 0 || (key >> 3) > 0x1fffffff) return fail("a field number of 0 or past 2^29");
    switch (key & 7) {
      case 0:
        f.type = WireType::kVarint;
        return varint(f.number);
      case 1:
        f.type = WireType::kFixed64;
        return fixed(f.number, 8);
      case 2: {
        f.type = WireType::kBytes;
        uint64_t n = 0;
        if (!varint(n)) return false;
        if (n > static_cast<uint64_t>(end_ - p_)) return fail("a length past the end of its message");
        f.bytes = Bytes{p_, static_cast<size_t>(n)};
        p_ += n;
        return true;
      }
      case 5:
        f.type = WireType::kFixed32;
        return fixed(f.number, 4);
      default:  // 3 and 4 (groups) are not in proto3 messages; 6 and 7 do not exist
        return fail("a record of wire type " + std::to_string(key & 7) + ", which ONNX messages do not have");
    }
  }

  const std::string& error() const { return error_; }

 private:
  bool varint(uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return fail("a number cut off by the end of its message");
      const uint8_t b = *p_++;
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return fail("a number of more than 10 bytes");
  }
  bool fixed(uint64_t& out, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return fail("a number cut off by the end of its message");
    out = 0;
    for (size_t i = 0; i < n; ++i) out |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += n;
    return true;
  }
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  std::string error_;
};

}  // namespace tripy::onnx
