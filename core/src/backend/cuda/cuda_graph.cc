// A signature's CUDA graph (cuda_graph.h): when to use one, capture over staging buffers, replay
// between staging copies, and the graph's lifetime.
#include "backend/cuda/cuda_graph.h"

#include <cstdlib>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_launch.h"

namespace tripy::rt::cuda {
namespace {

// TRIPY_CUDA_GRAPHS=0 never replays graphs, =1 always does, unset: when inputs+outputs are small.
int graph_mode() {
  const char* v = std::getenv("TRIPY_CUDA_GRAPHS");
  return v == nullptr ? -1 : std::atoi(v);
}

}  // namespace

SignatureGraph::~SignatureGraph() {
  if (exec_) (void)TRIPY_CUDA(cuGraphExecDestroy(exec_));
}

bool SignatureGraph::wanted(CUstream stream, int64_t io_bytes, size_t io_count, size_t steps) {
  const int mode = graph_mode();
  const int64_t graph_limit = (int64_t{2} << 20) + (int64_t{512} << 10) * static_cast<int64_t>(steps);
  // Few steps over many staged tensors launch directly: one eager op, or an eager graph whose
  // weights are its inputs (a LayerNorm, a Linear and a GELU: two kernels, six copies around the
  // graph).
  return mode != 0 && !failed_ && stream != nullptr && ++calls_ >= 2 &&
         (mode == 1 || (steps >= 2 && io_count <= 2 * steps && io_bytes <= graph_limit));
}

void SignatureGraph::invalidate() {
  if (exec_) (void)TRIPY_CUDA(cuGraphExecDestroy(exec_));
  exec_ = nullptr;
}

void SignatureGraph::check_donated(const std::vector<CUdeviceptr>& donated) {
  if (exec_ && donated != donated_) invalidate();
}

Status SignatureGraph::capture(const std::vector<GraphIo>& io, const std::vector<CUdeviceptr>& inputs,
                               const std::vector<CUdeviceptr>& outputs, CUfunction copy_fn, int sm_count,
                               CUstream stream, const Body& body) {
  copy_fn_ = copy_fn;
  sm_count_ = sm_count;
  Status st = build(io, inputs, outputs, stream, body);
  if (!st.ok()) {
    failed_ = true;
    invalidate();
  }
  return st;
}

Status SignatureGraph::build(const std::vector<GraphIo>& io, const std::vector<CUdeviceptr>& caller_in,
                             const std::vector<CUdeviceptr>& caller_out, CUstream stream, const Body& body) {
  // Staging buffers stand in for the inputs and outputs inside the graph; donated ones are used
  // where they are.
  std::vector<CUdeviceptr> in_ptrs(caller_in.size(), 0), out_ptrs(caller_out.size(), 0);
  staging_.clear();
  donated_.clear();
  for (const GraphIo& b : io) {
    std::vector<CUdeviceptr>& ptrs = b.input ? in_ptrs : out_ptrs;
    if (b.in_caller_memory) {
      ptrs[b.index] = (b.input ? caller_in : caller_out)[b.index];
      if (b.input) donated_.push_back(ptrs[b.index]);
      continue;
    }
    TRIPY_ASSIGN_OR_RETURN(Tensor t, empty_device(b.dtype, b.shape, stream));
    ptrs[b.index] = reinterpret_cast<CUdeviceptr>(t.data());
    staging_.push_back(std::move(t));
  }

  copies_.clear();
  for (const GraphIo& b : io) {  // the staging side of each copy; the caller's is set per call
    if (b.in_caller_memory) continue;
    const int64_t bytes = numel_of(b.shape) * dtype_size(b.dtype);
    const auto staged = static_cast<int64_t>((b.input ? in_ptrs : out_ptrs)[b.index]);
    copies_.push_back({b.input, b.index, {b.input ? staged : 0, b.input ? 0 : staged, bytes}});
  }

  CUgraph graph = nullptr;
  TRIPY_CUDA_TRY(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  Status st = body(in_ptrs, out_ptrs);
  Status end = TRIPY_CUDA(cuStreamEndCapture(stream, &graph));
  TRIPY_RETURN_IF_ERROR(st);
  TRIPY_RETURN_IF_ERROR(end);
  st = TRIPY_CUDA(cuGraphInstantiateWithFlags(&exec_, graph, 0));
  (void)TRIPY_CUDA(cuGraphDestroy(graph));  // the instantiated graph needs it no more
  return st;
}

// One byte copy ({dst, src, bytes}) launched on the stream; an empty one launches nothing.
Status SignatureGraph::copy(std::vector<int64_t>& words, CUstream stream) const {
  if (words[2] == 0) return ok_status();
  void* params[] = {words.data()};
  const unsigned grid = grid_for((words[2] + 15) / 16, 256, sm_count_);
  return TRIPY_CUDA(cuLaunchKernel(copy_fn_, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
}

Status SignatureGraph::replay(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs,
                              CUstream stream) {
  for (Copy& c : copies_) {
    if (!c.input) continue;
    c.words[1] = static_cast<int64_t>(inputs[c.index]);
    TRIPY_RETURN_IF_ERROR(copy(c.words, stream));
  }
  TRIPY_RETURN_IF_ERROR(TRIPY_CUDA(cuGraphLaunch(exec_, stream)));
  for (Copy& c : copies_) {
    if (c.input) continue;
    c.words[0] = static_cast<int64_t>(outputs[c.index]);
    TRIPY_RETURN_IF_ERROR(copy(c.words, stream));
  }
  return ok_status();
}

}  // namespace tripy::rt::cuda
