// kCollective on the CPU: all_reduce, all_gather and reduce_scatter among the ranks of one process,
// through the calling thread's host communicator (runtime/collectives.h): each rank's thread runs
// its program, and the kernel meets the other ranks' kernels in shared memory.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "runtime/collectives.h"

namespace tripy::cpu {
namespace {

Status run_collective(const KernelArgs& args) {
  const rt::CollectiveAttrs& a = args.kernel->collective;
  const View& in = *args.inputs[0];
  const View& out = *args.outputs[0];
  rt::Communicator* comm = rt::current_communicator();
  if (a.world_size == 1 && comm == nullptr) {  // one rank: the collective is its input
    if (out.data != in.data) std::memcpy(out.data, in.data, static_cast<size_t>(in.numel() * dtype_size(in.dtype)));
    return ok_status();
  }
  const std::string mismatch = rt::communicator_mismatch(comm, a);
  if (!mismatch.empty()) return kernel_error(args, mismatch, StatusCode::kUnavailable);
  auto* host = dynamic_cast<rt::HostCommunicator*>(comm);
  if (host == nullptr)
    return kernel_error(args, "this rank's communicator is not the CPU's (a program for the CPU runs its collectives in host memory)",
                        StatusCode::kUnavailable);
  const int64_t bytes = in.numel() * dtype_size(in.dtype);
  const auto* lo = static_cast<const uint8_t*>(in.data);
  const auto* olo = static_cast<const uint8_t*>(out.data);
  const int64_t out_bytes = out.numel() * dtype_size(out.dtype);
  if (bytes > 0 && out_bytes > 0 && lo < olo + out_bytes && olo < lo + bytes)
    return kernel_error(args, "the collective's input and output overlap", StatusCode::kInternal);
  int64_t outer = 1;  // the blocks before the axis that all_gather joins or reduce_scatter splits
  for (int64_t d = 0; d < a.axis; ++d) outer *= in.shape[static_cast<size_t>(d)];
  Status st;
  if (a.op == rt::CollectiveAttrs::Op::kAllReduce) {
    st = host->all_reduce(in.data, out.data, in.numel(), in.dtype);
  } else if (a.op == rt::CollectiveAttrs::Op::kAllGather) {
    st = host->all_gather(in.data, out.data, outer, outer == 0 ? 0 : bytes / outer);
  } else {
    st = host->reduce_scatter(in.data, out.data, outer, outer == 0 ? 0 : out.numel() / outer, in.dtype);
  }
  if (!st.ok()) return kernel_error(args, st.message(), st.code());
  return ok_status();
}

}  // namespace

const CpuKernel kCollectiveKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_collective(args); }};

}  // namespace tripy::cpu
