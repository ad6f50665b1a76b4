// A signature's CUDA graph: from its second call on, a program's launches for one input-shape
// signature are replayed as one graph (about 7 us a call from C++ on an H200 for the seeds' MLP).
//
// Graphs bake in addresses. Inputs and outputs change address every call, so the graph reads its
// inputs from staging buffers and writes its outputs to staging buffers. A replay launches one
// byte copy per input (the caller's tensor -> staging) on the stream, the graph, then one byte
// copy per output (staging -> the fresh output): the graph itself never changes, so no launch
// waits for an updated graph to reach the GPU (copy nodes inside it, patched each call, left an
// H200 idle 35-44 us between 8B decode steps; 8-11 us this way). The copies cost bandwidth, so
// programs whose inputs and outputs are large (where launches are cheap next to the work) run
// without a graph.
//
// Donated inputs (a KV cache updated in place) are the exception: staging them would copy the
// whole cache twice per call. The graph uses their own addresses instead, and is captured again
// when a call passes donated tensors at other addresses (a decode loop passes the same ones).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "tripy/tensor.h"

namespace tripy::rt::cuda {

// One program input or output as the graph sees it; a program lists them in buffer order.
struct GraphIo {
  bool input = false;  // else an output
  int32_t index = 0;   // the input's or the output's number
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  // A donated input, or an output that lives in one: the graph uses the caller's memory, no copy.
  bool in_caller_memory = false;
};

class SignatureGraph {
 public:
  SignatureGraph() = default;
  SignatureGraph(const SignatureGraph&) = delete;
  SignatureGraph& operator=(const SignatureGraph&) = delete;
  ~SignatureGraph();

  // Counts a call of the signature and says whether it goes through the graph: from the second
  // call on a stream, unless capture failed before or TRIPY_CUDA_GRAPHS=0; and, unless
  // TRIPY_CUDA_GRAPHS=1, only for two steps or more whose staged inputs and outputs (a copy
  // each) are at most two a step (`io_count`) and whose bytes (`io_bytes`) are small next to the
  // launches that `steps` saves.
  bool wanted(CUstream stream, int64_t io_bytes, size_t io_count, size_t steps);
  // Whether an instantiated graph is there to replay.
  bool ready() const { return exec_ != nullptr; }
  // Drops the instantiated graph (an address it holds changed: the arena, the workspace, the
  // counters); the next call that wants it captures again.
  void invalidate();
  // Drops it too where the donated inputs (in buffer order) are not those it was captured with.
  void check_donated(const std::vector<CUdeviceptr>& donated);

  // Enqueues the program's launches on the stream being captured, reading the inputs and writing
  // the outputs at these addresses.
  using Body = std::function<Status(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs)>;
  // Allocates the staging buffers, captures `body` on `stream` reading and writing them and
  // instantiates the graph. `inputs`/`outputs`: this call's addresses (donated ones enter the
  // graph); `copy_fn`: the layout module's tripy_copy_bytes. Capture is an optimisation: on
  // failure the signature launches directly from then on (wanted() is false).
  Status capture(const std::vector<GraphIo>& io, const std::vector<CUdeviceptr>& inputs,
                 const std::vector<CUdeviceptr>& outputs, CUfunction copy_fn, int sm_count, CUstream stream,
                 const Body& body);
  // Copies this call's inputs into the staging buffers, launches the graph and copies the
  // staged outputs to this call's outputs, all on `stream`.
  Status replay(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs, CUstream stream);

 private:
  Status build(const std::vector<GraphIo>& io, const std::vector<CUdeviceptr>& inputs,
               const std::vector<CUdeviceptr>& outputs, CUstream stream, const Body& body);
  Status copy(std::vector<int64_t>& words, CUstream stream) const;

  int calls_ = 0;
  bool failed_ = false;
  CUgraphExec exec_ = nullptr;
  CUfunction copy_fn_ = nullptr;
  int sm_count_ = 1;
  std::vector<Tensor> staging_;  // per staged input, then per staged output
  // Per staged input or output: which one it is and its copy's words {dst, src, bytes} (the
  // staging side fixed, the caller's side set each call).
  struct Copy {
    bool input = false;
    int32_t index = 0;
    std::vector<int64_t> words;
  };
  std::vector<Copy> copies_;
  std::vector<CUdeviceptr> donated_;  // the donated inputs' addresses the graph was captured with
};

}  // namespace tripy::rt::cuda
