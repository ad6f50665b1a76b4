// A signature's CUDA graph (cuda_graph.h): when to use one, capture between staging copies,
// replay with patched copies, and the graph's lifetime.
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

// The byte-copy kernel's node parameters over `words` ({dst, src, bytes}).
CUDA_KERNEL_NODE_PARAMS copy_params(CUfunction copy_fn, int sm_count, void** params, int64_t bytes) {
  CUDA_KERNEL_NODE_PARAMS kp{};
  kp.func = copy_fn;
  kp.gridDimX = grid_for((bytes + 15) / 16, 256, sm_count);
  kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 256;
  kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = params;
  return kp;
}

}  // namespace

SignatureGraph::~SignatureGraph() {
  if (exec_) (void)TRIPY_CUDA(cuGraphExecDestroy(exec_));
  if (graph_) (void)TRIPY_CUDA(cuGraphDestroy(graph_));
}

bool SignatureGraph::wanted(CUstream stream, int64_t io_bytes, size_t io_count, size_t steps) {
  const int mode = graph_mode();
  const int64_t graph_limit = (int64_t{2} << 20) + (int64_t{512} << 10) * static_cast<int64_t>(steps);
  // Few steps over many staged tensors launch directly: one eager op, or an eager graph whose
  // weights are its inputs (a LayerNorm, a Linear and a GELU: two kernels, six copy nodes, each
  // patched by a driver call before the launch and run on the GPU).
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

  CUgraph inner = nullptr, outer = nullptr;
  TRIPY_CUDA_TRY(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  Status st = body(in_ptrs, out_ptrs);
  Status end = TRIPY_CUDA(cuStreamEndCapture(stream, &inner));
  TRIPY_RETURN_IF_ERROR(st);
  TRIPY_RETURN_IF_ERROR(end);

  st = TRIPY_CUDA(cuGraphCreate(&outer, 0));
  std::vector<CUgraphNode> in_nodes;
  copies_.clear();
  auto add_copy = [&](const GraphIo& b, CUdeviceptr dst, CUdeviceptr src, const CUgraphNode* deps, size_t ndeps) {
    const int64_t bytes = numel_of(b.shape) * dtype_size(b.dtype);
    copies_.push_back({b.input, b.index, nullptr, {static_cast<int64_t>(dst), static_cast<int64_t>(src), bytes}});
    void* params[] = {copies_.back().words.data()};
    const CUDA_KERNEL_NODE_PARAMS kp = copy_params(copy_fn_, sm_count_, params, bytes);
    return TRIPY_CUDA(cuGraphAddKernelNode(&copies_.back().node, outer, deps, ndeps, &kp));
  };
  // Input copies first (their sources are patched per call); bytes == 0 still gets a node so
  // that every staged input has one.
  for (size_t i = 0; st.ok() && i < io.size(); ++i) {
    if (!io[i].input || io[i].in_caller_memory) continue;
    st = add_copy(io[i], in_ptrs[io[i].index], 0, nullptr, 0);
    in_nodes.push_back(copies_.back().node);
  }
  CUgraphNode child = nullptr;
  if (st.ok()) st = TRIPY_CUDA(cuGraphAddChildGraphNode(&child, outer, in_nodes.data(), in_nodes.size(), inner));
  for (size_t i = 0; st.ok() && i < io.size(); ++i) {
    if (io[i].input || io[i].in_caller_memory) continue;
    st = add_copy(io[i], 0, out_ptrs[io[i].index], &child, 1);
  }
  if (st.ok()) st = TRIPY_CUDA(cuGraphInstantiateWithFlags(&exec_, outer, 0));
  if (graph_) (void)TRIPY_CUDA(cuGraphDestroy(graph_));
  graph_ = outer;  // the child node holds its own copy of the captured graph
  (void)TRIPY_CUDA(cuGraphDestroy(inner));
  return st;
}

Status SignatureGraph::patch(size_t node, CUdeviceptr dst, CUdeviceptr src) {
  std::vector<int64_t>& w = copies_[node].words;
  if (dst) w[0] = static_cast<int64_t>(dst);
  if (src) w[1] = static_cast<int64_t>(src);
  void* params[] = {w.data()};
  const CUDA_KERNEL_NODE_PARAMS kp = copy_params(copy_fn_, sm_count_, params, w[2]);
  return TRIPY_CUDA(cuGraphExecKernelNodeSetParams(exec_, copies_[node].node, &kp));
}

Status SignatureGraph::replay(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs,
                              CUstream stream) {
  for (size_t i = 0; i < copies_.size(); ++i) {
    const Copy& c = copies_[i];
    if (c.input) TRIPY_RETURN_IF_ERROR(patch(i, 0, inputs[c.index]));
    else TRIPY_RETURN_IF_ERROR(patch(i, outputs[c.index], 0));
  }
  return TRIPY_CUDA(cuGraphLaunch(exec_, stream));
}

}  // namespace tripy::rt::cuda
