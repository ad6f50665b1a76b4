// .npy: magic, version, header length, a Python-dict header, then the raw data.
#include "npy_reader.h"

#include <climits>
#include <cstring>
#include <exception>
#include <map>
#include <sstream>
#include <vector>

#include <sys/stat.h>

#include "common/safe_file.h"

namespace tripy::npy {

StatusOr<Tensor> parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  auto bad = [&](const std::string& why) { return invalid_argument("Cannot read '" + name + "': " + why + "."); };
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) return bad("unsupported .npy version " + std::to_string(major));
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return bad("truncated header");
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  if (header_len > bytes.size() - 8 - len_bytes) return bad("truncated header");
  const size_t data_at = 8 + len_bytes + header_len;
  const std::string header(bytes.substr(8 + len_bytes, header_len));

  static const std::map<std::string, DType> kDescr = {{"<f4", DType::kFloat32}, {"<f2", DType::kFloat16},
                                                      {"<i4", DType::kInt32},   {"<i8", DType::kInt64},
                                                      {"|b1", DType::kBool},    {"|i1", DType::kInt8}};
  const size_t d = header.find("'descr':");
  const size_t q1 = d == std::string::npos ? d : header.find('\'', d + 8);
  const size_t q2 = q1 == std::string::npos ? q1 : header.find('\'', q1 + 1);
  if (q2 == std::string::npos || !kDescr.count(header.substr(q1 + 1, q2 - q1 - 1)))
    return bad("unsupported dtype (little-endian float32/float16/int32/int64/int8/bool only)");
  if (header.find("'fortran_order': False") == std::string::npos) return bad("Fortran-ordered arrays are not supported");
  const size_t s = header.find("'shape':");
  const size_t open = s == std::string::npos ? s : header.find('(', s);
  const size_t close = open == std::string::npos ? open : header.find(')', open);
  if (close == std::string::npos) return bad("no shape");
  // Dims are checked before anything is allocated: the data must fill the rest of the file exactly.
  std::vector<int64_t> shape;
  int64_t numel = 1;
  bool overflow = false;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(dims, item, ',');) {
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    if (first == std::string::npos) continue;  // the empty item after a trailing comma
    const std::string digits = item.substr(first, last - first + 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return bad("the shape has a dim '" + digits + "'");
    if (digits.size() > 18) return bad("the shape has a dim too large (" + digits + ")");
    const int64_t dim = std::stoll(digits);  // at most 18 digits: fits
    overflow = overflow || (dim != 0 && numel > INT64_MAX / dim);
    numel = overflow ? numel : numel * dim;
    shape.push_back(dim);
  }
  if (shape.size() > 64) return bad("the shape has " + std::to_string(shape.size()) + " dims (at most 64)");
  const DType dtype = kDescr.at(header.substr(q1 + 1, q2 - q1 - 1));
  const size_t data_bytes = bytes.size() - data_at;
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  // In 128 bits: numel * elem can pass 2**63 even when numel does not (found by fuzz_npy).
  const __int128 need = static_cast<__int128>(numel) * elem;
  if (overflow || need != static_cast<__int128>(data_bytes))
    return bad("the data has " + std::to_string(data_bytes) + " bytes, the shape " + dims_str(shape) + " needs " +
               (overflow || need > INT64_MAX ? "more than 2**63" : std::to_string(static_cast<int64_t>(need))));
  TRIPY_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty_host(dtype, shape, "the data of '" + name + "'"));
  if (data_bytes > 0) std::memcpy(t.data(), bytes.data() + data_at, data_bytes);
  if (dtype == DType::kBool)  // numpy writes 0 and 1; any other byte is read as true
    for (size_t i = 0; i < data_bytes; ++i) static_cast<uint8_t*>(t.data())[i] = static_cast<uint8_t*>(t.data())[i] != 0;
  return t;
}

StatusOr<Tensor> read_npy(const std::string& path) {
  // Opened first and checked on what was opened (fstat), so the file cannot turn into a FIFO or a
  // device between a check and the open.
  RegularFile file = open_regular_file(path, /*follow_links=*/true);
  if (file.not_regular()) return invalid_argument("Cannot read '" + path + "': it is not a regular file.");
  if (!file.opened()) return invalid_argument("Cannot read '" + path + "': cannot open the file.");
  if (file.info.st_size < 0) return invalid_argument("Cannot read '" + path + "': a read error.");
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(file.info.st_size));
  } catch (const std::exception&) {
    return Status(StatusCode::kResourceExhausted,
                  "Cannot read '" + path + "': no memory for its " + std::to_string(file.info.st_size) + " bytes.");
  }
  const ssize_t got = read_fully(file.fd.get(), bytes.data(), bytes.size());
  if (got < 0) return invalid_argument("Cannot read '" + path + "': a read error.");
  bytes.resize(static_cast<size_t>(got));  // a file cut short while read is read as it now is
  return parse_npy(bytes.data(), bytes.size(), path);
}

}  // namespace tripy::npy
