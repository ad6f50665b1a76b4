// Data-movement kernels (transpose, slice, concat, gather, copy, update_slice) for any dtype. Transpose and
// slice both reduce to one strided copy whose axes are coalesced first, so the common cases end
// in memcpy runs or a cache-blocked 2-D transpose.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

// out (dense, row-major over dims) = in[sum idx_d * in_strides_d]; strides in elements.
template <class T>
void copy2d(T* out, const T* in, int64_t rows, int64_t cols, int64_t s_r, int64_t s_c) {
  if (s_c == 1) {
    for (int64_t i = 0; i < rows; ++i) std::memcpy(out + i * cols, in + i * s_r, cols * sizeof(T));
    return;
  }
  constexpr int64_t kBlock = 32;  // both sides of a block stay in L1
  for (int64_t ib = 0; ib < rows; ib += kBlock)
    for (int64_t jb = 0; jb < cols; jb += kBlock) {
      const int64_t ie = std::min(rows, ib + kBlock), je = std::min(cols, jb + kBlock);
      for (int64_t i = ib; i < ie; ++i)
        for (int64_t j = jb; j < je; ++j) out[i * cols + j] = in[i * s_r + j * s_c];
    }
}

template <class T>
void strided_copy_typed(T* out, const T* in, const std::vector<int64_t>& dims,
                        const std::vector<int64_t>& st) {
  const size_t m = dims.size();
  const int64_t rows = dims[m - 2], cols = dims[m - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 2 < m; ++d) outer *= dims[d];
  auto body = [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t off = 0, q = o;
      for (size_t d = m - 2; d-- > 0;) {
        off += (q % dims[d]) * st[d];
        q /= dims[d];
      }
      copy2d(out + o * rows * cols, in + off, rows, cols, st[m - 2], st[m - 1]);
    }
  };
  if (outer * rows * cols < (1 << 18)) body(0, outer);
  else parallel_for(outer, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, rows * cols)), body);
}


// Coalesces axes (drops size 1, merges evenly stepping neighbours), then copies by element size.
void strided_copy(void* out, const void* in, int es, std::vector<int64_t> dims,
                  std::vector<int64_t> st) {
  std::vector<int64_t> cd, cs;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!cd.empty() && cs.back() == st[d] * dims[d]) {
      cd.back() *= dims[d];
      cs.back() = st[d];
    } else {
      cd.push_back(dims[d]);
      cs.push_back(st[d]);
    }
  }
  while (cd.size() < 2) {  // pad to rank 2 for the 2-D kernel
    cd.insert(cd.begin(), 1);
    cs.insert(cs.begin(), 0);
  }
  if (cd.size() == 2 && cd[0] == 1 && cs[1] == 1) {
    std::memcpy(out, in, static_cast<size_t>(cd[1]) * es);
    return;
  }
  switch (es) {
    case 1: return strided_copy_typed(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(in), cd, cs);
    case 2: return strided_copy_typed(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(in), cd, cs);
    case 4: return strided_copy_typed(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(in), cd, cs);
    case 8: return strided_copy_typed(static_cast<uint64_t*>(out), static_cast<const uint64_t*>(in), cd, cs);
    default: return;
  }
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

Status run_transpose(const KernelArgs& args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return kernel_error(args, "transpose takes one input and one output", StatusCode::kInternal);
  const View& in = *args.inputs[0];
  const View& out = *args.outputs[0];
  const auto& perm = args.kernel->transpose.perm;
  const size_t rank = in.shape.size();
  if (perm.size() != rank || out.shape.size() != rank || in.dtype != out.dtype)
    return kernel_error(args, "transpose of " + dims_str(in.shape) + " to " +
                                  dims_str(out.shape) + " does not match its permutation",
                        StatusCode::kInternal);
  std::vector<uint8_t> seen(rank, 0);
  std::vector<int64_t> in_st = dense_strides(in.shape), st(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) || seen[perm[i]]++ ||
        out.shape[i] != in.shape[perm[i]])
      return kernel_error(args, "invalid permutation for " + dims_str(in.shape),
                          StatusCode::kInternal);
    st[i] = in_st[perm[i]];
  }
  if (out.numel() == 0) return ok_status();
  strided_copy(out.data, in.data, dtype_size(in.dtype), out.shape, st);
  return ok_status();
}

Status run_slice(const KernelArgs& args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return kernel_error(args, "slice takes one input and one output", StatusCode::kInternal);
  const View& in = *args.inputs[0];
  const View& out = *args.outputs[0];
  const size_t rank = in.shape.size();
  const auto& k = *args.kernel;
  if (k.slice.starts.size() != rank || k.slice.steps.size() != rank || out.shape.size() != rank ||
      in.dtype != out.dtype)
    return kernel_error(args, "slice attributes do not match the input's rank",
                        StatusCode::kInternal);
  if (out.numel() == 0) return ok_status();
  std::vector<int64_t> in_st = dense_strides(in.shape), st(rank);
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t start = args.slot(k.slice.starts[d]), step = args.slot(k.slice.steps[d]);
    const int64_t last = start + (out.shape[d] - 1) * step;
    if (start < 0 || start >= in.shape[d] || last < 0 || last >= in.shape[d])
      return kernel_error(args, "slice of dim " + std::to_string(d) + " (size " +
                                    std::to_string(in.shape[d]) + ") from " +
                                    std::to_string(start) + " by " + std::to_string(step) +
                                    " for " + std::to_string(out.shape[d]) +
                                    " elements reads out of bounds");
    offset += start * in_st[d];
    st[d] = step * in_st[d];
  }
  const int es = dtype_size(in.dtype);
  strided_copy(out.data, static_cast<const uint8_t*>(in.data) + offset * es, es, out.shape, st);
  return ok_status();
}

Status run_concat(const KernelArgs& args) {
  if (args.outputs.size() != 1 || args.inputs.empty())
    return kernel_error(args, "concat takes inputs and one output", StatusCode::kInternal);
  const View& out = *args.outputs[0];
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  const int64_t axis = args.kernel->concatenate.axis;
  if (axis < 0 || axis >= rank) return kernel_error(args, "concat axis out of range", StatusCode::kInternal);
  int64_t total = 0;
  for (const View* v : args.inputs) {
    bool ok = static_cast<int64_t>(v->shape.size()) == rank && v->dtype == out.dtype;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || v->shape[d] == out.shape[d];
    if (!ok)
      return kernel_error(args, "cannot concatenate " + dims_str(v->shape) + " into " +
                                    dims_str(out.shape) + " along axis " + std::to_string(axis));
    total += v->shape[axis];
  }
  if (total != out.shape[axis])
    return kernel_error(args, "concatenated sizes along axis " + std::to_string(axis) +
                                  " sum to " + std::to_string(total) + ", not " +
                                  std::to_string(out.shape[axis]));
  int64_t outer = 1, inner = dtype_size(out.dtype);
  for (int64_t d = 0; d < axis; ++d) outer *= out.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out.shape[d];
  auto* dst = static_cast<uint8_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    for (const View* v : args.inputs) {
      const int64_t run = v->shape[axis] * inner;
      std::memcpy(dst, static_cast<const uint8_t*>(v->data) + o * run, static_cast<size_t>(run));
      dst += run;
    }
  return ok_status();
}

Status run_gather(const KernelArgs& args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return kernel_error(args, "gather takes data, indices and one output", StatusCode::kInternal);
  const View& data = *args.inputs[0];
  const View& idx = *args.inputs[1];
  const View& out = *args.outputs[0];
  const int64_t rank = static_cast<int64_t>(data.shape.size()), axis = args.kernel->gather.axis;
  if (axis < 0 || axis >= rank) return kernel_error(args, "gather axis out of range", StatusCode::kInternal);
  if (idx.dtype != DType::kInt32 && idx.dtype != DType::kInt64)
    return kernel_error(args, "gather indices must be int32 or int64, not " +
                                  std::string(dtype_name(idx.dtype)));
  std::vector<int64_t> want(data.shape.begin(), data.shape.begin() + axis);
  want.insert(want.end(), idx.shape.begin(), idx.shape.end());
  want.insert(want.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (want != out.shape || out.dtype != data.dtype)
    return kernel_error(args, "gather output " + dims_str(out.shape) + " should be " +
                                  dims_str(want), StatusCode::kInternal);
  const int64_t dim = data.shape[axis], nidx = numel(idx.shape);
  int64_t outer = 1, inner = dtype_size(data.dtype);
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[d];
  // Validate (and normalise negative indices, numpy-style) before writing anything.
  std::vector<int64_t> pos(static_cast<size_t>(nidx));
  for (int64_t k = 0; k < nidx; ++k) {
    int64_t i = idx.dtype == DType::kInt32 ? static_cast<const int32_t*>(idx.data)[k]
                                           : static_cast<const int64_t*>(idx.data)[k];
    if (i < -dim || i >= dim)
      return kernel_error(args, "index " + std::to_string(i) + " is out of bounds for axis " +
                                    std::to_string(axis) + " with size " + std::to_string(dim));
    pos[k] = i < 0 ? i + dim : i;
  }
  auto* dst = static_cast<uint8_t*>(out.data);
  const auto* src = static_cast<const uint8_t*>(data.data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < nidx; ++k, dst += inner)
      std::memcpy(dst, src + (o * dim + pos[k]) * inner, static_cast<size_t>(inner));
  return ok_status();
}

Status run_copy(const KernelArgs& args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return kernel_error(args, "copy takes one input and one output", StatusCode::kInternal);
  const View& in = *args.inputs[0];
  const View& out = *args.outputs[0];
  if (in.numel() != out.numel() || in.dtype != out.dtype)
    return kernel_error(args, "copy of " + dims_str(in.shape) + " " +
                                  std::string(dtype_name(in.dtype)) + " into " +
                                  dims_str(out.shape) + " " + std::string(dtype_name(out.dtype)),
                        StatusCode::kInternal);
  if (in.data != out.data && in.numel() > 0)
    std::memmove(out.data, in.data, static_cast<size_t>(in.numel()) * dtype_size(in.dtype));
  return ok_status();
}

Status run_update_slice(const KernelArgs& args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return kernel_error(args, "update_slice takes an operand, an update, a start and one output", StatusCode::kInternal);
  const View& in = *args.inputs[0];
  const View& up = *args.inputs[1];
  const View& start_buf = *args.inputs[2];
  const View& out = *args.outputs[0];
  const int64_t axis = args.kernel->update_slice.axis, rank = static_cast<int64_t>(in.shape.size());
  const int64_t row_offset = args.kernel->update_slice.row_offset;
  if (axis < 0 || axis >= rank || out.shape != in.shape || up.shape.size() != in.shape.size() ||
      start_buf.numel() != 1)
    return kernel_error(args, "update_slice operands do not fit", StatusCode::kInternal);
  const int64_t start = start_buf.dtype == DType::kInt32 ? *static_cast<const int32_t*>(start_buf.data)
                                                         : *static_cast<const int64_t*>(start_buf.data);
  const int64_t rows = up.shape[axis], dim = in.shape[axis];
  if (start < 0 || start > dim - rows)
    return kernel_error(args, "writes " + std::to_string(rows) + " row(s) at " + std::to_string(start) +
                                  " along dimension " + std::to_string(axis) + ", but that dimension has size " +
                                  std::to_string(dim) + ": the start must lie in [0, " +
                                  std::to_string(dim - rows) + "]",
                        StatusCode::kOutOfRange);
  const std::string misfit = rt::update_slice_shape_error(args.kernel->update_slice, in.shape, up.shape);
  if (!misfit.empty()) return kernel_error(args, misfit, StatusCode::kInternal);
  const int64_t es = dtype_size(in.dtype);
  int64_t outer = 1, inner = es, up_inner = es;
  for (int64_t d = 0; d < axis; ++d) outer *= in.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= in.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) up_inner *= up.shape[d];
  if (out.data != in.data && in.numel() > 0)
    std::memcpy(out.data, in.data, static_cast<size_t>(in.numel() * es));
  auto* dst = static_cast<uint8_t*>(out.data) + start * inner;
  const auto* src = static_cast<const uint8_t*>(up.data) + row_offset * es;
  if (up_inner == inner) {  // whole rows: one run per outer index
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * dim * inner, src + o * rows * inner, static_cast<size_t>(rows * inner));
    return ok_status();
  }
  for (int64_t o = 0; o < outer; ++o)  // windows of longer rows
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + (o * dim + r) * inner, src + (o * rows + r) * up_inner, static_cast<size_t>(inner));
  return ok_status();
}

const CpuKernel kTransposeKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_transpose(args); }};
const CpuKernel kSliceKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_slice(args); }};
const CpuKernel kConcatenateKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_concat(args); }};
const CpuKernel kGatherKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_gather(args); }};
const CpuKernel kCopyKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_copy(args); }};
const CpuKernel kUpdateSliceKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_update_slice(args); }};

}  // namespace tripy::cpu
