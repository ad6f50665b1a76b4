// Folding an all-reduce into the fused kernel after it (see cuda_fold.h).
#include "backend/cuda/cuda_fold.h"

#include "backend/cuda/cuda_nccl.h"
#include "backend/cuda/cuda_peer_memory.h"
#include "runtime/collectives.h"

namespace tripy::rt::cuda {

std::optional<FoldedAllReduce> folded_all_reduce(const Program& p, int32_t kernel) {
  if (kernel < 1 || static_cast<size_t>(kernel) >= p.kernels.size()) return std::nullopt;
  const Kernel& k = p.kernels[static_cast<size_t>(kernel)];
  const Kernel& c = p.kernels[static_cast<size_t>(kernel) - 1];
  if (k.kind != KernelKind::kFused || k.fused.reduce_from >= static_cast<int32_t>(k.fused.domain.size()) ||
      c.kind != KernelKind::kCollective || c.collective.op != CollectiveAttrs::Op::kAllReduce ||
      c.collective.world_size < 2)
    return std::nullopt;
  const int32_t sum = c.outputs.at(0);
  const BufferDesc& d = p.buffers[static_cast<size_t>(sum)];
  if (d.kind != BufferDesc::Kind::kTemp ||
      (d.dtype != DType::kFloat32 && d.dtype != DType::kFloat16 && d.dtype != DType::kBFloat16))
    return std::nullopt;
  for (const BufferDesc& b : p.buffers)
    if (b.kind == BufferDesc::Kind::kAlias && b.index == sum) return std::nullopt;
  FoldedAllReduce f{kernel - 1, -1};
  int readers = 0;
  for (const Kernel& other : p.kernels)
    for (size_t i = 0; i < other.inputs.size(); ++i)
      if (other.inputs[i] == sum) {
        ++readers;
        if (&other == &k) f.input = static_cast<int>(i);
      }
  if (readers != 1 || f.input < 0) return std::nullopt;
  return f;
}

StatusOr<std::optional<Launch>> plan_fold(PlanContext& c, const Kernel& k, const Step& step, CUfunction fold_fn) {
  const std::optional<Launch> none;
  if (fold_fn == nullptr || step.launches.size() != 1) return none;
  const Launch& plain = step.launches[0];
  if (plain.grid != 1 || (plain.vector_word >= 0 && (plain.vector_grid != 1 || plain.scalar_grid != 1))) return none;
  const std::optional<FoldedAllReduce> f = folded_all_reduce(c.program, step.kernel);
  if (!f) return none;
  // This rank's communicator decides, as the one-shot kernel's does: every rank's the same way.
  const Kernel& all_reduce = c.program.kernels[static_cast<size_t>(f->collective)];
  auto* rank = dynamic_cast<NcclCommunicator*>(current_communicator());
  const PeerMemory* peers = rank != nullptr && !rank->aborted() ? rank->peers() : nullptr;
  if (peers == nullptr || !peers->folds() || !communicator_mismatch(rank, all_reduce.collective).empty()) return none;
  const int32_t in = all_reduce.inputs.at(0), sum = all_reduce.outputs.at(0);
  const DType t = c.program.buffers[static_cast<size_t>(sum)].dtype;
  const int64_t count = numel_of(c.shapes[static_cast<size_t>(sum)]);
  if (count == 0 || count * dtype_size(t) > peers->epoch_bytes()) return none;
  // The kernel reads its input while it writes the sum: they must not share bytes.
  const BufferDesc* di = &c.program.buffers[static_cast<size_t>(in)];
  while (di->kind == BufferDesc::Kind::kAlias) di = &c.program.buffers[static_cast<size_t>(di->index)];
  const BufferDesc& ds = c.program.buffers[static_cast<size_t>(sum)];
  if (di->kind == BufferDesc::Kind::kTemp && di->offset < ds.offset + count * dtype_size(t) &&
      ds.offset < di->offset + count * dtype_size(t))
    return none;
  TRIPY_ASSIGN_OR_RETURN(ErrorRecord * errors, c.error_record());
  Launch l = plain;
  l.fn = fold_fn;
  const size_t at = l.words.size();
  l.words.resize(at + PeerMemory::kFoldWords, 0);
  l.ptrs.push_back({static_cast<int32_t>(at), in, 0, /*any_alignment=*/true});
  l.ptrs.push_back({static_cast<int32_t>(at + 1), sum, 0, /*any_alignment=*/true});
  l.words[at + 2] = count;
  l.words[at + 3] = static_cast<int64_t>(errors->record());
  l.words[at + 4] = static_cast<int64_t>(f->collective) + 1;  // a wait past the timeout names the all-reduce
  l.words[at + 5] = static_cast<int64_t>(errors->claim());
  l.words[at + 6] = static_cast<int64_t>(collective_timeout_seconds() * 1e9);
  peers->fill_fold(l.words, at + PeerMemory::kFoldFirstWord);
  return std::optional<Launch>(std::move(l));
}

}  // namespace tripy::rt::cuda
