// Host allocation and views for tripy::Tensor.
#include "tripy/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace tripy {

std::string Device::str() const {
  return kind == Kind::kCpu ? "cpu" : "gpu:" + std::to_string(index);
}

StatusOr<Device> parse_device(std::string_view text) {
  if (text == "cpu" || text == "cpu:0") return Device{Device::Kind::kCpu, 0};
  if (text == "gpu") return Device{Device::Kind::kGpu, 0};
  const std::string_view digits = text.substr(std::min<size_t>(4, text.size()));
  if (text.substr(0, 4) == "gpu:" && !digits.empty() && digits.size() <= 4 &&
      digits.find_first_not_of("0123456789") == std::string_view::npos)
    return Device{Device::Kind::kGpu, std::stoi(std::string(digits))};
  return invalid_argument("Unknown device: '" + std::string(text) + "'. Expected 'cpu', 'gpu' or 'gpu:<index>'.");
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

int64_t Tensor::numel() const { return numel_of(shape_); }
int64_t Tensor::nbytes() const { return numel() * dtype_size(dtype_); }

namespace {

// Small host buffers are recycled per thread: aligned_alloc's search for an aligned chunk costs
// more than a whole eager step's kernel (a 2x3 result: a tenth of a microsecond), and eager mode
// allocates and frees one such buffer per op. Sizes of 64 << c bytes for c < kSmallClasses, at
// most kSmallKept of each per thread; a buffer freed on another thread joins that thread's list.
constexpr int kSmallClasses = 7;  // 64 B .. 4 KiB
constexpr int kSmallKept = 8;
struct SmallBuffers {
  void* kept[kSmallClasses][kSmallKept];
  int count[kSmallClasses] = {};
  ~SmallBuffers();
};
// Trivially destructible, so readable while a thread's other thread-locals are destroyed (a
// tensor freed after SmallBuffers went is freed directly).
thread_local bool t_small_gone = false;
thread_local SmallBuffers t_small;

SmallBuffers::~SmallBuffers() {
  for (int c = 0; c < kSmallClasses; ++c)
    for (int i = 0; i < count[c]; ++i) std::free(kept[c][i]);
  t_small_gone = true;
}

// The size class of a buffer of `bytes` (a multiple of 64), or -1 when it is not a small one.
int small_class(size_t bytes) {
  for (int c = 0; c < kSmallClasses; ++c)
    if (bytes == (size_t{64} << c)) return c;
  return -1;
}

struct SmallFree {
  int cls;
  void operator()(void* p) const {
    if (!t_small_gone && t_small.count[cls] < kSmallKept) {
      t_small.kept[cls][t_small.count[cls]++] = p;
      return;
    }
    std::free(p);
  }
};

}  // namespace

StatusOr<Tensor> Tensor::try_empty_host(DType dtype, std::vector<int64_t> shape, const std::string& what) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // Spelled out only on failure: every output of every run is allocated here.
  const auto of = [&] { return what + " (" + std::string(dtype_name(dtype)) + " " + dims_str(t.shape_) + ")"; };
  // Sizes that overflow cannot be allocated: report them like any failed allocation.
  int64_t count = 1;
  for (int64_t d : t.shape_)
    if (d < 0 || __builtin_mul_overflow(count, d, &count))
      return Status(StatusCode::kResourceExhausted, "Cannot allocate host memory for " + of() +
                                                        ": the size does not fit in 64 bits.");
  int64_t total = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(dtype_size(dtype)), &total) || total > (int64_t{1} << 56))
    return Status(StatusCode::kResourceExhausted, "Cannot allocate host memory for " + of() +
                                                      ": it needs more than 2**56 bytes.");
  // Round up so the size is a multiple of the alignment, as aligned_alloc requires; never 0.
  size_t bytes = static_cast<size_t>(total);
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  // Small sizes are rounded up to a power of two and recycled (SmallBuffers).
  const size_t small_bytes = bytes <= 64 ? 64 : size_t{1} << (64 - __builtin_clzll(bytes - 1));
  const int cls = small_class(small_bytes);
  if (cls >= 0 && !t_small_gone && t_small.count[cls] > 0) {
    t.data_ = t_small.kept[cls][--t_small.count[cls]];
    t.owner_ = std::shared_ptr<void>(t.data_, SmallFree{cls});
    return t;
  }
  if (cls >= 0) bytes = small_bytes;
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr)
    return Status(StatusCode::kResourceExhausted, "Out of host memory: cannot allocate " + std::to_string(total) +
                                                      " bytes for " + of() + ".");
  t.data_ = p;
  if (cls >= 0) t.owner_ = std::shared_ptr<void>(p, SmallFree{cls});
  else t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

Tensor Tensor::empty_host(DType dtype, std::vector<int64_t> shape) {
  StatusOr<Tensor> t = try_empty_host(dtype, std::move(shape), "");
  if (!t.ok()) throw std::bad_alloc();
  return std::move(t).value();
}

Tensor Tensor::host_int64(int64_t value) {
  Tensor t = empty_host(DType::kInt64, {});
  *static_cast<int64_t*>(t.data()) = value;
  return t;
}

Tensor Tensor::borrow(void* data, DType dtype, std::vector<int64_t> shape, Device device,
                      std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.device_ = device;
  t.owner_ = keep_alive ? std::move(keep_alive) : std::shared_ptr<void>(data, [](void*) {});
  return t;
}

}  // namespace tripy
