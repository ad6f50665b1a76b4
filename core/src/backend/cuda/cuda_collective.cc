// kCollective on the GPU: NCCL's all-reduce, all-gather and reduce-scatter on the program's stream,
// so a CUDA graph captures them with the rest of the step; an all-reduce or all-gather whose input
// fits the ranks' mapped staging memory is instead our one-shot kernel (cuda_peer_memory.h,
// kernels/one_shot_collective.cuh). The communicator is the calling thread's (the rank's:
// runtime/collectives.h); a graph replays on the rank that captured it.
#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_nccl.h"

namespace tripy::rt::cuda {
namespace {

StatusOr<ncclDataType_t> nccl_sum_dtype(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    default: return invalid_argument("all_reduce of " + std::string(dtype_name(t)) + " is not supported");
  }
}

// `rows` rows of `width` bytes from src (a row every src_pitch bytes) to dst (every dst_pitch), on
// the stream: the collectives' blocks between their order and NCCL's.
Status copy_rows(CUdeviceptr dst, int64_t dst_pitch, CUdeviceptr src, int64_t src_pitch, int64_t width, int64_t rows,
                 CUstream stream) {
  CUDA_MEMCPY2D m{};
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = src;
  m.srcPitch = static_cast<size_t>(src_pitch);
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = dst;
  m.dstPitch = static_cast<size_t>(dst_pitch);
  m.WidthInBytes = static_cast<size_t>(width);
  m.Height = static_cast<size_t>(rows);
  return TRIPY_CUDA(cuMemcpy2DAsync(&m, stream));
}

}  // namespace

StatusOr<bool> plan_collective_step(PlanContext& c, const Kernel& k, Step& step) {
  const std::vector<int64_t>& x = c.shapes[static_cast<size_t>(k.inputs[0])];
  const int64_t elements = numel_of(x);
  if (elements == 0) return false;
  const CollectiveAttrs& a = k.collective;
  const bool reduce = a.op == CollectiveAttrs::Op::kAllReduce;
  int64_t blocks = 1;
  for (int64_t d = 0; !reduce && d < a.axis; ++d) blocks *= x[static_cast<size_t>(d)];
  // The one-shot launch, should this rank's communicator have peer memory when it runs, with the
  // program's error record (a rank that waits past the timeout names the rank it waited for).
  if (CUfunction fn = c.code[static_cast<size_t>(step.kernel)].fn) {
    TRIPY_ASSIGN_OR_RETURN(ErrorRecord * errors, c.error_record());
    Launch& l = step.one_shot;
    l.fn = fn;
    l.overlaps = true;
    l.grid = PeerMemory::kBlocks;
    l.block_x = PeerMemory::kThreads;
    l.words.assign(PeerMemory::kWords, 0);
    l.words[PeerMemory::kCount] = elements;
    l.words[PeerMemory::kErr] = static_cast<int64_t>(errors->record());
    l.words[PeerMemory::kTag] = static_cast<int64_t>(step.kernel) + 1;
    l.words[PeerMemory::kClaim] = static_cast<int64_t>(errors->claim());
    l.words[PeerMemory::kTimeout] = static_cast<int64_t>(collective_timeout_seconds() * 1e9);
    l.words[PeerMemory::kGatherBlock] = reduce ? 0 : elements / blocks;  // an all-gather's elements per outer block
    l.ptrs = {{0, k.inputs[0], 0}, {1, k.outputs[0], 0}};
  }
  if (reduce) {
    step.collective_count = elements;
    return true;
  }
  const int64_t bytes = elements * dtype_size(c.program.buffers[static_cast<size_t>(k.inputs[0])].dtype);
  step.collective_count = blocks;
  step.collective_block_bytes = bytes / blocks;  // the input's bytes per block
  // all_gather: gathered rank-major (NCCL's order), then interleaved into the output by blocks;
  // reduce_scatter: the input's blocks regrouped rank-major (each rank's parts together) first.
  const int64_t staged = a.op == CollectiveAttrs::Op::kAllGather ? bytes * a.world_size : bytes;
  if (blocks > 1) c.workspace = std::max(c.workspace, static_cast<size_t>(staged));
  return true;
}

namespace {

// This rank's share of the ranks' sum: NCCL's reduce-scatter splits a buffer into world_size
// consecutive parts, so an input of several blocks (dims before the axis) is regrouped first.
Status reduce_scatter(const Step& step, const CollectiveAttrs& a, CUdeviceptr in, CUdeviceptr out, DType dtype,
                      NcclCommunicator& rank, const RunContext& c, const SourceRef& where) {
  TRIPY_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_sum_dtype(dtype));
  const int64_t blocks = step.collective_count, n = a.world_size;
  const int64_t part = step.collective_block_bytes / n;  // bytes of one rank's part of a block
  const auto count = static_cast<size_t>(blocks * part / dtype_size(dtype));
  CUdeviceptr send = in;
  if (blocks > 1) {  // rank j's part of block b goes to workspace + (j * blocks + b) * part
    if (c.workspace_bytes < static_cast<size_t>(blocks * part * n))
      return internal_error("reduce_scatter's workspace is smaller than its plan asked", where);
    for (int64_t j = 0; j < n; ++j)
      TRIPY_RETURN_IF_ERROR(copy_rows(c.workspace + static_cast<CUdeviceptr>(j * blocks * part), part,
                                      in + static_cast<CUdeviceptr>(j * part), part * n, part, blocks, c.stream));
    send = c.workspace;
  }
  return TRIPY_NCCL(ncclReduceScatter(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(out), count, t, ncclSum,
                                      rank.comm(), reinterpret_cast<cudaStream_t>(c.stream)));
}

}  // namespace

Status run_collective_step(Step& step, const Kernel& k, const RunContext& c) {
  const CollectiveAttrs& a = k.collective;
  Communicator* comm = current_communicator();
  const CUdeviceptr in = c.base[static_cast<size_t>(k.inputs[0])];
  const CUdeviceptr out = c.base[static_cast<size_t>(k.outputs[0])];
  const SourceRef where = kernel_source(c.program, step.kernel);
  if (a.world_size == 1 && comm == nullptr) {  // one rank: the collective is its input
    const int64_t bytes = a.op == CollectiveAttrs::Op::kAllReduce
                              ? step.collective_count * dtype_size(c.program.buffers[static_cast<size_t>(k.inputs[0])].dtype)
                              : step.collective_count * step.collective_block_bytes;
    if (in != out) TRIPY_CUDA_TRY(cuMemcpyDtoDAsync(out, in, static_cast<size_t>(bytes), c.stream));
    return ok_status();
  }
  const std::string mismatch = communicator_mismatch(comm, a);
  if (!mismatch.empty()) return Status(StatusCode::kUnavailable, "kernel '" + k.name + "': " + mismatch, where);
  auto* rank = dynamic_cast<NcclCommunicator*>(comm);
  if (rank == nullptr || rank->aborted())
    return Status(StatusCode::kUnavailable,
                  "kernel '" + k.name + "': this rank has no NCCL communicator (a GPU program's collectives run through NCCL)",
                  where);
  auto* send = reinterpret_cast<const void*>(in);
  auto* recv = reinterpret_cast<void*>(out);
  const DType dtype = c.program.buffers[static_cast<size_t>(k.inputs[0])].dtype;
  const PeerMemory* peers = rank->peers();
  if (peers != nullptr && step.one_shot.fn != nullptr &&
      step.one_shot.words[PeerMemory::kCount] * dtype_size(dtype) <= PeerMemory::kCapacity) {  // this rank's input fits
    peers->fill(step.one_shot.words);
    return launch(step.one_shot, c.base, c.stream);
  }
  if (a.op == CollectiveAttrs::Op::kReduceScatter) return reduce_scatter(step, a, in, out, dtype, *rank, c, where);
  if (a.op == CollectiveAttrs::Op::kAllReduce) {
    TRIPY_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_sum_dtype(dtype));
    return TRIPY_NCCL(ncclAllReduce(send, recv, static_cast<size_t>(step.collective_count), t, ncclSum, rank->comm(),
                                    reinterpret_cast<cudaStream_t>(c.stream)));
  }
  const int64_t blocks = step.collective_count, block = step.collective_block_bytes;
  if (blocks == 1)
    return TRIPY_NCCL(ncclAllGather(send, recv, static_cast<size_t>(block), ncclInt8, rank->comm(),
                                    reinterpret_cast<cudaStream_t>(c.stream)));
  // Rank j's blocks land at workspace + j * blocks * block; its block b belongs at out + (b * n + j) * block.
  const int64_t n = a.world_size;
  if (c.workspace_bytes < static_cast<size_t>(blocks * block * n))
    return internal_error("all_gather's workspace is smaller than its plan asked", where);
  TRIPY_NCCL_TRY(ncclAllGather(send, reinterpret_cast<void*>(c.workspace), static_cast<size_t>(blocks * block), ncclInt8,
                               rank->comm(), reinterpret_cast<cudaStream_t>(c.stream)));
  for (int64_t j = 0; j < n; ++j)
    TRIPY_RETURN_IF_ERROR(copy_rows(out + static_cast<CUdeviceptr>(j * block), block * n,
                                    c.workspace + static_cast<CUdeviceptr>(j * blocks * block), block, block, blocks,
                                    c.stream));
  return ok_status();
}

}  // namespace tripy::rt::cuda
