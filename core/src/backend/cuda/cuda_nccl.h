// NCCL for the GPU's collectives, loaded with dlopen at run time like the other CUDA libraries
// (libnccl.so.2 from $TRIPY_NCCL_LIBRARY, $TRIPY_CUDA_HOME, /usr/local/cuda or the loader's path),
// so one build runs where NCCL is absent until a sharded program asks for it. A communicator is
// one rank's ncclComm_t; the collective kernels (cuda_collective.cc) read the calling thread's.
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_peer_memory.h"
#include "runtime/collectives.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

#define TRIPY_NCCL_FUNCS(X)                                                                      \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommInitAll) X(ncclCommDestroy) \
  X(ncclCommAbort) X(ncclGetErrorString) X(ncclCommGetAsyncError) X(ncclAllReduce)                \
  X(ncclAllGather) X(ncclReduceScatter)

struct NcclApi {
#define TRIPY_NCCL_DECLARE_FN(name) decltype(&::name) name = nullptr;
  TRIPY_NCCL_FUNCS(TRIPY_NCCL_DECLARE_FN)
#undef TRIPY_NCCL_DECLARE_FN
  bool ok = false;
  std::string why_unavailable;
};

// Loads NCCL once (thread-safe); check `ok`.
const NcclApi& nccl();
Status check(ncclResult_t r, const char* call);

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world);
  ~NcclCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  // ncclCommAbort: work that waits on this rank's peers ends, and the communicator is spent (a
  // sharded executable whose rank failed makes new ones).
  void abort(const std::string& why) override;
  ncclComm_t comm() const { return comm_.load(); }
  bool aborted() const { return aborted_.load(); }
  // The ranks' mapped staging memory for one-shot all-reduces, or null (NCCL serves them all).
  const PeerMemory* peers() const { return peers_.get(); }
  void set_peers(std::unique_ptr<PeerMemory> peers) { peers_ = std::move(peers); }

 private:
  std::atomic<ncclComm_t> comm_;  // atomics: the watchdog's thread may abort while a run reads them
  int rank_, world_;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<PeerMemory> peers_;
};

// The NCCL watchdog (cuda_nccl_watchdog.cc): a communicator registers itself while it lives;
// after each run of a program with collectives, watch_run marks the run's end on its stream (on an
// NCCL rank; elsewhere it does nothing), and a run still unfinished past TRIPY_COLLECTIVE_TIMEOUT
// aborts every communicator of the process; take_watchdog_error gives that reason once (every
// host synchronisation asks, through check_device_errors).
void watch_communicator(NcclCommunicator* c, bool live);
Status watch_run(CUstream stream);
Status take_watchdog_error();

// One process, rank r on gpu:`gpus[r]` (distinct): ncclCommInitAll, and the ranks' peer memory
// through peer access (PeerMemory::create_in_process; none where the GPUs cannot reach each other).
StatusOr<std::vector<std::shared_ptr<Communicator>>> nccl_communicators(const std::vector<int>& gpus);
// NCCL's bootstrap across processes: rank 0 makes the id, every rank joins with it.
StatusOr<std::string> nccl_unique_id();
StatusOr<std::shared_ptr<Communicator>> nccl_join(const std::string& unique_id, int rank, int world);

}  // namespace tripy::rt::cuda

#define TRIPY_NCCL(call) ::tripy::rt::cuda::check(::tripy::rt::cuda::nccl().call, #call)
#define TRIPY_NCCL_TRY(call) TRIPY_RETURN_IF_ERROR(TRIPY_NCCL(call))
