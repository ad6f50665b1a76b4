// Launch planning for fused and layout kernels: sizes and strides from the slot vector, axes
// merged where every operand steps evenly (fewer index divisions), grids sized to the GPU.
#include "backend/cuda/cuda_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_device.h"

namespace tripy::rt::cuda {
namespace {

// One part of the domain after merging: sizes and per-stream strides, outermost first.
struct Merged {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // [stream][axis]
};

// Drops size-1 axes and merges neighbours that step evenly in every stream (unless `keep_all`).
Merged merge_axes(const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& st,
                  int from, int to, bool keep_all) {
  Merged m;
  m.strides.resize(st.size());
  for (int a = from; a < to; ++a) {
    if (!keep_all && dims[a] == 1) continue;
    bool merge = !keep_all && !m.sizes.empty();
    for (size_t s = 0; merge && s < st.size(); ++s) merge = m.strides[s].back() == st[s][a] * dims[a];
    if (merge) {
      m.sizes.back() *= dims[a];
      for (size_t s = 0; s < st.size(); ++s) m.strides[s].back() = st[s][a];
    } else {
      m.sizes.push_back(dims[a]);
      for (size_t s = 0; s < st.size(); ++s) m.strides[s].push_back(st[s][a]);
    }
  }
  if (m.sizes.empty() && to > from) {  // all size 1: one trivial axis keeps the loops uniform
    m.sizes.push_back(1);
    for (auto& v : m.strides) v.push_back(0);
  }
  return m;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// Whether an elementwise kernel may take its vector path: wide loads along the innermost merged
// axis, which every input reads contiguously (stride 1) or as one value (stride 0). Over one axis
// a tail of scalars finishes what the wide loads leave; over several, the innermost axis holds
// whole wide loads and each input that reads it contiguously keeps every other stride a multiple
// of the width, so each wide load stays 16-byte aligned (a split's halves, heads in a window); the
// kernel then decomposes vector indices in 32 bits (fewer than 2^31 elements).
bool vector_elementwise(const FusedLayout& L, const Merged& m, int64_t n) {
  const int64_t V = L.vec_width;
  if (V <= 0 || m.sizes.empty()) return false;
  const bool one_axis = m.sizes.size() == 1;
  if (!one_axis && (m.sizes.back() % V != 0 || n >= (int64_t{1} << 31))) return false;
  for (int i = 0; i < L.num_inputs; ++i) {
    const std::vector<int64_t>& s = m.strides[i];
    if (s.back() != 0 && s.back() != 1) return false;
    if (s.back() == 1)  // a contiguous input: its other strides keep the wide loads aligned
      for (size_t a = 0; a + 1 < s.size(); ++a)
        if (s[a] % V != 0) return false;
  }
  return true;
}

// A row reduction's block shape and path: rows of row_len elements as `units` (wide loads when
// every operand steps by 0 or 1 along one merged reduced axis and rows start 16-byte aligned),
// spread over the fewest threads (a warp at least, kReduceBlock at most) that keep each thread's
// share in registers, several rows per block when a row needs fewer threads than a block holds.
// Rows too long for registers take kReduceBlock threads and stream through memory.
void plan_rows(const FusedLayout& L, const Merged& rows_part, const Merged& red_part, int64_t rows,
               int64_t row_len, int sm_count, Launch& l) {
  const int64_t V = L.vec_width;
  bool vec = V > 0 && red_part.sizes.size() <= 1 && row_len % V == 0;
  for (int i = 0; vec && i < L.num_inputs; ++i) {
    int64_t s = red_part.strides[i].empty() ? 0 : red_part.strides[i].back();
    vec = s == 0 || s == 1;
    for (int64_t rs : rows_part.strides[i]) vec = vec && (s == 0 || rs % V == 0);
  }
  const int64_t per = vec ? FusedLayout::kRowCacheVector : FusedLayout::kRowCacheScalar;
  const int64_t units = vec ? row_len / V : row_len;
  // Wide loads: two a thread where a block's threads allow (up to four where they do not). Under
  // four blocks an SM (64 registers) four slots of a residual add + RMSNorm's inputs and handed-over
  // sums spilled: (2048, 4096) bfloat16 took 53 us with four, 30 us with two (H200).
  const int64_t aim = vec ? 2 : per;
  int64_t threads = 32;
  while (threads < FusedLayout::kReduceBlock && threads * aim < units) threads *= 2;
  // Few rows leave most SMs idle, and a row's time is its threads' serial chain of loads and
  // shuffles: spread it over more threads (fewer elements each) while all rows still fit in about
  // half a block per SM. GPT-2's 128 rows of 768 took 4.3 us a LayerNorm at 32 threads a row.
  while (threads < FusedLayout::kReduceBlock && threads < units &&
         rows * threads * 2 <= int64_t{std::max(1, sm_count)} * FusedLayout::kReduceBlock)
    threads *= 2;
  l.block_x = static_cast<unsigned>(threads);
  l.block_y = static_cast<unsigned>(std::min<int64_t>(FusedLayout::kMaxRowsPerBlock, FusedLayout::kReduceBlock / threads));
  const int64_t blocks = (rows + l.block_y - 1) / l.block_y;
  // Enough blocks for every SM to hold several at once; a grid-stride loop takes the rest.
  l.grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{std::max(1, sm_count)} * 8));
  if (vec) {
    l.vector_word = L.misc_word(FusedLayout::kMiscVector);
    l.vector_grid = l.scalar_grid = l.grid;
  }
}

}  // namespace

Status kernel_failure(const Program& p, const Kernel& k, const std::string& message, StatusCode code) {
  SourceRef where;
  if (k.source >= 0 && static_cast<size_t>(k.source) < p.sources.size())
    where = std::make_shared<SourceInfo>(p.sources[k.source]);
  return Status(code, "kernel '" + k.name + "' (CUDA): " + message, std::move(where));
}

namespace {
std::atomic<bool> g_overlap_refused{false};
}  // namespace

// Whether Launch::overlaps takes effect: on sm_90 and later (programmatic dependent launch),
// unless TRIPY_OVERLAP_LAUNCHES=0 launches every kernel plainly (for comparison) or the driver
// refused such a launch once (a configuration without it: every launch is then plain).
bool overlap_launches() {
  static const bool on = [] {
    const char* v = std::getenv("TRIPY_OVERLAP_LAUNCHES");
    if (v != nullptr && std::string(v) == "0") return false;
    StatusOr<const DeviceInfo*> d = device();
    return d.ok() && (*d)->arch >= 90;
  }();
  return on && !g_overlap_refused.load(std::memory_order_relaxed);
}

unsigned grid_for(int64_t n, int block, int sm_count) {
  int64_t blocks = (n + block - 1) / block;
  int64_t cap = static_cast<int64_t>(std::max(1, sm_count)) * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

Status encode_tensor_map(Launch& l) {
  const Launch::TensorMap& t = l.tensor_map;
  static_assert(sizeof(CUtensorMap) == 16 * sizeof(int64_t), "a tensor map is 16 words");
  if (t.word < 0 || static_cast<size_t>(t.word) + 16 > l.words.size() || t.word % 8 != 0)
    return Status(StatusCode::kInternal, "a launch's tensor map has no 64-byte aligned place in its words");
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.row_bytes), static_cast<cuuint64_t>(t.rows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(t.row_bytes)};
  cuuint32_t box[2] = {t.box_bytes, t.box_rows}, unit[2] = {1, 1};
  void* base = reinterpret_cast<void*>(static_cast<uintptr_t>(l.words[static_cast<size_t>(t.address_word)]));
  return TRIPY_CUDA(cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(&l.words[static_cast<size_t>(t.word)]),
                                           CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, unit,
                                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

Status launch(Launch& l, const std::vector<CUdeviceptr>& base, CUstream stream) {
  bool aligned = true;
  for (const PtrWord& p : l.ptrs) {
    CUdeviceptr addr = base[p.buffer] + static_cast<CUdeviceptr>(p.byte_offset);
    l.words[p.word] = static_cast<int64_t>(addr);
    aligned &= p.any_alignment || (addr & 15) == 0;
  }
  CUfunction fn = l.fn;
  if (l.vector_word >= 0) {
    l.words[l.vector_word] = aligned ? 1 : 0;
    l.grid = aligned ? l.vector_grid : l.scalar_grid;
    if (aligned && l.vector_fn) fn = l.vector_fn;
  }
  if (fn == l.vector_fn && l.tensor_map.word >= 0) TRIPY_RETURN_IF_ERROR(encode_tensor_map(l));
  void* params[] = {l.words.data()};
  const unsigned block_x = fn == l.vector_fn && l.vector_block_x != 0 ? l.vector_block_x : l.block_x;
  if (l.overlaps) return launch_overlapping(fn, l.grid, block_x, l.block_y, params, stream);
  return TRIPY_CUDA(cuLaunchKernel(fn, l.grid, 1, 1, block_x, l.block_y, 1, 0, stream, params, nullptr));
}

Status launch_lead(CUfunction lead, CUstream stream) {
  if (!lead || !overlap_launches()) return ok_status();
  int64_t ns = 4000;  // about a decode step's norm or attention
  void* params[] = {&ns};
  return TRIPY_CUDA(cuLaunchKernel(lead, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr));
}

Status launch_overlapping(CUfunction fn, unsigned grid, unsigned block_x, unsigned block_y, void** params,
                          CUstream stream) {
  if (overlap_launches()) {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = block_x;
    config.blockDimY = block_y;
    config.blockDimZ = 1;
    config.hStream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
    const CUresult r = api().cuLaunchKernelEx(&config, fn, params, nullptr);
    if (r != CUDA_ERROR_NOT_SUPPORTED) return check(r, "cuLaunchKernelEx");
    g_overlap_refused = true;  // this and every later launch go plainly
  }
  return TRIPY_CUDA(cuLaunchKernel(fn, grid, 1, 1, block_x, block_y, 1, 0, stream, params, nullptr));
}

bool always_aligned(const Program& p, const Launch& l) {
  for (const PtrWord& ptr : l.ptrs) {
    if (ptr.any_alignment) continue;
    if (ptr.byte_offset % 16 != 0) return false;
    const BufferDesc& d = p.buffers[static_cast<size_t>(p.alias_root(ptr.buffer))];
    const bool ours = d.kind == BufferDesc::Kind::kTemp ? d.offset % 16 == 0
                      : d.kind == BufferDesc::Kind::kOutput ? d.donor < 0
                                                            : d.kind == BufferDesc::Kind::kConstant;
    if (!ours) return false;
  }
  return true;
}

StatusOr<std::vector<Launch>> plan_fused(const Program& p, const Kernel& k, const FusedLayout& L,
                                         CUfunction fn, const std::vector<int64_t>& slots,
                                         int sm_count) {
  const FusedProgram& f = k.fused;
  const int R = L.rank, RF = L.has_reduction ? L.reduce_from : R;
  std::vector<int64_t> dom(R);
  for (int d = 0; d < R; ++d) {
    Slot s = f.domain[d];
    if (s < 0 || static_cast<size_t>(s) >= slots.size()) return kernel_failure(p, k, "domain slot out of range");
    dom[d] = slots[s];
  }
  std::vector<std::vector<int64_t>> st(L.num_inputs, std::vector<int64_t>(R, 0));
  std::vector<int64_t> input_offsets(L.num_inputs, 0);
  for (int i = 0; i < L.num_inputs; ++i) {
    // A slice read in place: its extent runs along the domain with the buffer's strides.
    const FusedInputView view = fused_input_view(p, k, static_cast<size_t>(i), slots);
    const std::vector<int64_t>& shape = view.sizes;
    const std::vector<int64_t>& dense = view.strides;
    input_offsets[i] = view.offset * dtype_size(p.buffers[k.inputs[i]].dtype);
    for (size_t j = 0; j < shape.size(); ++j) {
      int32_t ax = f.input_axes[i][j];
      if (shape[j] == dom[ax]) {
        if (dom[ax] != 1) st[i][ax] += dense[j];
      } else if (shape[j] != 1) {
        return kernel_failure(p, k, "input " + std::to_string(i) + " of shape " + dims_str(shape) +
                                        " does not broadcast to the domain " + dims_str(dom));
      }
    }
  }
  const int64_t rows = product(std::vector<int64_t>(dom.begin(), dom.begin() + RF));
  const int64_t row_len = product(std::vector<int64_t>(dom.begin() + RF, dom.end()));
  for (int o = 0; o < L.num_outputs; ++o) {
    int64_t want = L.output_row_level[o] ? rows : rows * row_len;
    if (product(p.buffer_shape(k.outputs[o], slots)) != want)
      return kernel_failure(p, k, "output " + std::to_string(o) + " has the wrong number of elements");
  }
  std::vector<Launch> out;
  if (rows == 0 || (!L.has_reduction && row_len == 0)) return out;

  Launch l;
  l.fn = fn;
  l.overlaps = true;
  l.words.assign(L.word_count(), 0);
  for (int o = 0; o < L.num_outputs; ++o) l.ptrs.push_back({o, k.outputs[o], 0});
  for (int i = 0; i < L.num_inputs; ++i) l.ptrs.push_back({L.num_outputs + i, k.inputs[i], input_offsets[i]});
  auto place = [&](int from, int to, int lo_word) {
    Merged m = merge_axes(dom, st, from, to, L.has_iota);
    const int first = to - static_cast<int>(m.sizes.size());
    for (size_t a = 0; a < m.sizes.size(); ++a) {
      l.words[L.size_word(first + static_cast<int>(a))] = m.sizes[a];
      for (int i = 0; i < L.num_inputs; ++i)
        l.words[L.stride_word(i, first + static_cast<int>(a))] = m.strides[i][a];
    }
    l.words[L.misc_word(lo_word)] = to > from ? first : from;
    return m;
  };
  Merged rows_part = place(0, RF, FusedLayout::kMiscRowLo);
  Merged red_part = place(RF, R, FusedLayout::kMiscRedLo);
  l.words[L.misc_word(FusedLayout::kMiscRows)] = rows;
  l.words[L.misc_word(FusedLayout::kMiscRowLen)] = row_len;

  if (!L.has_reduction) {
    l.block_x = 256;
    l.scalar_grid = l.grid = grid_for(rows, 256, sm_count);
    int64_t reach = rows + static_cast<int64_t>(l.grid) * 256;
    l.words[L.misc_word(FusedLayout::kMiscSmall)] = reach < (int64_t{1} << 31) ? 1 : 0;
    if (vector_elementwise(L, rows_part, rows)) {
      l.vector_word = L.misc_word(FusedLayout::kMiscVector);
      l.vector_grid = grid_for((rows + L.vec_width - 1) / L.vec_width, 256, sm_count);
    }
  } else {
    plan_rows(L, rows_part, red_part, rows, row_len, sm_count, l);
  }
  out.push_back(std::move(l));
  return out;
}

namespace {

// dst[...] = src[...] over `sizes` with element strides, as one launch of tripy_copy_<es> (or a
// byte copy when both sides are contiguous).
StatusOr<Launch> strided_copy(const Program& p, const Kernel& k, const LayoutFunctions& fns, int es,
                              int32_t dst_buf, int64_t dst_off, int32_t src_buf, int64_t src_off,
                              const std::vector<int64_t>& sizes, const std::vector<int64_t>& sst,
                              const std::vector<int64_t>& dst, int sm_count) {
  Merged m = merge_axes(sizes, {sst, dst}, 0, static_cast<int>(sizes.size()), false);
  const int64_t n = product(m.sizes);
  if (m.sizes.size() <= 1 && (m.sizes.empty() || (m.strides[0][0] == 1 && m.strides[1][0] == 1)))
    return plan_byte_copy(fns, dst_buf, src_buf, n * es, sm_count, dst_off, src_off);
  if (m.sizes.size() > 8) return kernel_failure(p, k, "more than 8 non-mergeable axes");
  auto it = fns.find(copy_function(es));
  if (it == fns.end()) return kernel_failure(p, k, "no copy kernel for " + std::to_string(es) + "-byte elements");
  Launch l;
  l.fn = it->second;
  l.overlaps = true;
  l.words.assign(4 + 24, 0);
  const int lo = 8 - static_cast<int>(m.sizes.size());
  l.words[2] = n;
  l.words[3] = lo;
  for (size_t a = 0; a < m.sizes.size(); ++a) {
    l.words[4 + lo + a] = m.sizes[a];
    l.words[12 + lo + a] = m.strides[0][a];
    l.words[20 + lo + a] = m.strides[1][a];
  }
  l.ptrs = {{0, dst_buf, dst_off}, {1, src_buf, src_off}};
  l.grid = grid_for(n, 256, sm_count);
  return l;
}

}  // namespace

StatusOr<Launch> plan_byte_copy(const LayoutFunctions& fns, int32_t dst_buffer, int32_t src_buffer,
                                int64_t bytes, int sm_count, int64_t dst_offset, int64_t src_offset) {
  auto it = fns.find("tripy_copy_bytes");
  if (it == fns.end()) return internal_error("the CUDA layout module lacks tripy_copy_bytes");
  Launch l;
  l.fn = it->second;
  l.overlaps = true;
  l.words = {0, 0, bytes};
  l.ptrs = {{0, dst_buffer, dst_offset}, {1, src_buffer, src_offset}};
  l.grid = grid_for((bytes + 15) / 16, 256, sm_count);
  return l;
}

StatusOr<Launch> plan_byte_zero(const LayoutFunctions& fns, int32_t dst_buffer, int64_t bytes, int sm_count) {
  auto it = fns.find("tripy_zero_bytes");
  if (it == fns.end()) return internal_error("the CUDA layout module lacks tripy_zero_bytes");
  Launch l;
  l.fn = it->second;
  l.overlaps = true;
  l.words = {0, 0, bytes};
  l.ptrs = {{0, dst_buffer, 0}};
  l.grid = grid_for((bytes + 15) / 16, 256, sm_count);
  return l;
}

namespace {

// What every layout kind checks and computes first: one output (its buffer, shape, dense strides
// and element size; `empty` when it has no elements, so nothing is launched) and inputs of its
// dtype, but for the inputs `own_dtype` exempts (a gather's, update_slice's start).
struct LayoutOutput {
  int32_t buffer = 0;
  std::vector<int64_t> shape, strides;
  int es = 0;
  bool empty = false;
};

StatusOr<LayoutOutput> layout_output(const Program& p, const Kernel& k, const std::vector<int64_t>& slots,
                                     bool (*own_dtype)(size_t input) = nullptr) {
  if (k.outputs.size() != 1 || k.inputs.empty()) return kernel_failure(p, k, "bad input/output count");
  LayoutOutput o;
  o.buffer = k.outputs[0];
  o.shape = p.buffer_shape(o.buffer, slots);
  const DType dt = p.buffers[o.buffer].dtype;
  o.es = dtype_size(dt);
  if (product(o.shape) == 0) {
    o.empty = true;
    return o;
  }
  o.strides = dense_strides(o.shape);
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (p.buffers[k.inputs[i]].dtype != dt && !(own_dtype && own_dtype(i)))
      return kernel_failure(p, k, "input and output dtypes differ");
  return o;
}

}  // namespace

StatusOr<std::vector<Launch>> plan_copy(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                        const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots));
  if (o.empty) return out;
  if (product(p.buffer_shape(k.inputs[0], slots)) != product(o.shape)) return kernel_failure(p, k, "copy sizes differ");
  TRIPY_ASSIGN_OR_RETURN(Launch l, plan_byte_copy(fns, o.buffer, k.inputs[0], product(o.shape) * o.es, sm_count));
  out.push_back(std::move(l));
  return out;
}

StatusOr<std::vector<Launch>> plan_transpose(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                             const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots));
  if (o.empty) return out;
  const std::vector<int64_t>& oshape = o.shape;
  std::vector<int64_t> is = p.buffer_shape(k.inputs[0], slots), ist = dense_strides(is), sst(oshape.size());
  if (k.transpose.perm.size() != is.size() || oshape.size() != is.size())
    return kernel_failure(p, k, "permutation does not match the rank");
  std::vector<uint8_t> seen(is.size(), 0);
  for (size_t i = 0; i < is.size(); ++i) {
    int64_t pi = k.transpose.perm[i];
    if (pi < 0 || pi >= static_cast<int64_t>(is.size()) || seen[pi]++ || oshape[i] != is[pi])
      return kernel_failure(p, k, "invalid permutation for " + dims_str(is));
    sst[i] = ist[pi];
  }
  TRIPY_ASSIGN_OR_RETURN(Launch l,
                         strided_copy(p, k, fns, o.es, o.buffer, 0, k.inputs[0], 0, oshape, sst, o.strides, sm_count));
  out.push_back(std::move(l));
  return out;
}

StatusOr<std::vector<Launch>> plan_slice(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                         const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots));
  if (o.empty) return out;
  const std::vector<int64_t>& oshape = o.shape;
  std::vector<int64_t> is = p.buffer_shape(k.inputs[0], slots), ist = dense_strides(is), sst(is.size());
  if (k.slice.starts.size() != is.size() || k.slice.steps.size() != is.size() || oshape.size() != is.size())
    return kernel_failure(p, k, "slice attributes do not match the input's rank");
  int64_t offset = 0;
  for (size_t d = 0; d < is.size(); ++d) {
    Slot s0 = k.slice.starts[d], s1 = k.slice.steps[d];
    if (s0 < 0 || s1 < 0 || static_cast<size_t>(s0) >= slots.size() || static_cast<size_t>(s1) >= slots.size())
      return kernel_failure(p, k, "slice slot out of range");
    const int64_t start = slots[s0], step = slots[s1], last = start + (oshape[d] - 1) * step;
    if (start < 0 || start >= is[d] || last < 0 || last >= is[d])
      return kernel_failure(p, k, "slice of dim " + std::to_string(d) + " (size " + std::to_string(is[d]) +
                                      ") from " + std::to_string(start) + " by " + std::to_string(step) + " for " +
                                      std::to_string(oshape[d]) + " elements reads out of bounds",
                            StatusCode::kInvalidArgument);
    offset += start * ist[d];
    sst[d] = step * ist[d];
  }
  TRIPY_ASSIGN_OR_RETURN(Launch l, strided_copy(p, k, fns, o.es, o.buffer, 0, k.inputs[0], offset * o.es, oshape, sst,
                                                o.strides, sm_count));
  out.push_back(std::move(l));
  return out;
}

StatusOr<std::vector<Launch>> plan_concatenate(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                               const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots));
  if (o.empty) return out;
  const std::vector<int64_t>& oshape = o.shape;
  const int64_t axis = k.concatenate.axis, rank = static_cast<int64_t>(oshape.size());
  if (axis < 0 || axis >= rank) return kernel_failure(p, k, "concat axis out of range");
  int64_t at = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    std::vector<int64_t> is = p.buffer_shape(k.inputs[i], slots);
    bool ok = static_cast<int64_t>(is.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || is[d] == oshape[d];
    if (!ok)
      return kernel_failure(p, k, "cannot concatenate " + dims_str(is) + " into " + dims_str(oshape),
                            StatusCode::kInvalidArgument);
    if (product(is) > 0) {
      TRIPY_ASSIGN_OR_RETURN(Launch l, strided_copy(p, k, fns, o.es, o.buffer, at * o.strides[axis] * o.es,
                                                    k.inputs[i], 0, is, dense_strides(is), o.strides, sm_count));
      out.push_back(std::move(l));
    }
    at += is[axis];
  }
  if (at != oshape[axis]) return kernel_failure(p, k, "concatenated sizes do not sum to the output's");
  return out;
}

StatusOr<std::vector<Launch>> plan_gather(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                          const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots, [](size_t) { return true; }));
  if (o.empty) return out;
  const std::vector<int64_t>& oshape = o.shape;
  if (k.inputs.size() != 2) return kernel_failure(p, k, "gather takes data and indices");
  std::vector<int64_t> ds = p.buffer_shape(k.inputs[0], slots), is = p.buffer_shape(k.inputs[1], slots);
  const DType it = p.buffers[k.inputs[1]].dtype;
  if (it != DType::kInt32 && it != DType::kInt64)
    return kernel_failure(p, k, "gather indices must be int32 or int64", StatusCode::kInvalidArgument);
  const int64_t axis = k.gather.axis, rank = static_cast<int64_t>(ds.size());
  if (axis < 0 || axis >= rank) return kernel_failure(p, k, "gather axis out of range");
  std::vector<int64_t> want(ds.begin(), ds.begin() + axis);
  want.insert(want.end(), is.begin(), is.end());
  want.insert(want.end(), ds.begin() + axis + 1, ds.end());
  if (want != oshape)
    return kernel_failure(p, k, "gather output shape " + dims_str(oshape) + " should be " + dims_str(want));
  auto fit = fns.find(gather_function(o.es, it));
  if (fit == fns.end()) return kernel_failure(p, k, "no gather kernel for " + std::to_string(o.es) + "-byte elements");
  Launch l;
  l.fn = fit->second;
  l.overlaps = true;
  int64_t outer = product(std::vector<int64_t>(ds.begin(), ds.begin() + axis));
  int64_t inner = product(std::vector<int64_t>(ds.begin() + axis + 1, ds.end()));
  l.words = {0, 0, 0, outer, product(is), inner, ds[axis], 0, 0, 0};  // the program sets err, tag, claim
  l.ptrs = {{0, o.buffer, 0}, {1, k.inputs[0], 0}, {2, k.inputs[1], 0}};
  l.grid = grid_for(product(oshape), 256, sm_count);
  out.push_back(std::move(l));
  return out;
}

StatusOr<std::vector<Launch>> plan_update_slice(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                                const std::vector<int64_t>& slots, int sm_count) {
  std::vector<Launch> out;
  TRIPY_ASSIGN_OR_RETURN(LayoutOutput o, layout_output(p, k, slots, [](size_t i) { return i == 2; }));
  if (o.empty) return out;
  const std::vector<int64_t>& oshape = o.shape;
  if (k.inputs.size() != 3) return kernel_failure(p, k, "update_slice takes an operand, an update and a start");
  const std::vector<int64_t> us = p.buffer_shape(k.inputs[1], slots);
  const DType st = p.buffers[k.inputs[2]].dtype;
  const int64_t axis = k.update_slice.axis, rank = static_cast<int64_t>(oshape.size());
  if (axis < 0 || axis >= rank || p.buffer_shape(k.inputs[0], slots) != oshape ||
      static_cast<int64_t>(us.size()) != rank || product(p.buffer_shape(k.inputs[2], slots)) != 1 ||
      (st != DType::kInt32 && st != DType::kInt64))
    return kernel_failure(p, k, "update_slice operands do not fit");
  // Not in place (the operand is still read elsewhere): the output starts as a copy of it.
  if (!update_in_place(p, k)) {
    TRIPY_ASSIGN_OR_RETURN(Launch c, plan_byte_copy(fns, o.buffer, k.inputs[0], product(oshape) * o.es, sm_count));
    out.push_back(std::move(c));
  }
  auto fit = fns.find(update_function(o.es, st));
  if (fit == fns.end()) return kernel_failure(p, k, "no update kernel for " + std::to_string(o.es) + "-byte elements");
  Launch l;
  l.fn = fit->second;
  l.overlaps = true;
  const int64_t outer = product(std::vector<int64_t>(oshape.begin(), oshape.begin() + axis));
  const int64_t inner = product(std::vector<int64_t>(oshape.begin() + axis + 1, oshape.end()));
  const int64_t src_row = product(std::vector<int64_t>(us.begin() + axis + 1, us.end()));
  const std::string misfit = update_slice_shape_error(k.update_slice, oshape, us);
  if (!misfit.empty()) return kernel_failure(p, k, "update_slice " + misfit);
  l.words.assign(kUpWords, 0);  // the program sets err, tag, claim
  l.words[kUpOuter] = outer, l.words[kUpRows] = us[axis], l.words[kUpInner] = inner, l.words[kUpDim] = oshape[axis];
  l.words[kUpSrcRow] = src_row, l.words[kUpRowOffset] = k.update_slice.row_offset;
  l.ptrs = {{kUpDst, o.buffer, 0}, {kUpSrc, k.inputs[1], 0}, {kUpStart, k.inputs[2], 0}};
  l.grid = grid_for(std::max<int64_t>(1, outer * us[axis] * inner), 256, sm_count);
  out.push_back(std::move(l));
  return out;
}

}  // namespace tripy::rt::cuda
