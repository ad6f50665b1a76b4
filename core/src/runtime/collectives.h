// Communicators: how the ranks of a sharded program (one program per rank, tp.compile with a
// tp.DeviceMesh) reach each other when a collective kernel (KernelKind::kCollective) runs. Each
// rank runs its program on its own thread; the thread's communicator is the one a
// CommunicatorScope sets, which the backends' collective kernels read (a kernel has no other way to
// know its rank, and a program holds no rank: the same program object could serve any).
//
// The host communicator here is the CPU's: the ranks of one process meet in shared memory with a
// barrier. The GPU's (NCCL) is the CUDA backend's. Both abort: a rank that fails wakes every rank
// waiting for it with an error naming the failure, and a rank that waits past the timeout
// (TRIPY_COLLECTIVE_TIMEOUT seconds, 300 unless set) fails the collective for every rank, so a
// sharded run ends with an error, never a hang. On the host, a rank whose program returns without
// reaching a collective that the others wait at fails it at once (the ranks' programs differ).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/kernel_kinds.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy {
class Executable;
}

namespace tripy::rt {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Makes every rank's collective that waits, now or later, fail with `why` (kUnavailable), until
  // reset(). The first abort's reason is kept: it names the rank that failed.
  virtual void abort(const std::string& why) = 0;
  // Readies the communicator for the next run after an abort (every rank has returned).
  virtual void reset() {}
  // Says that this rank's program has returned (run_ranks calls it): it reaches no collective
  // any more, so a collective that waits for it can fail at once instead of at the timeout
  // (where the communicator can tell: the host's can, NCCL's cannot).
  virtual void finish() {}
};

// The communicator of the calling thread (set by CommunicatorScope), or null.
Communicator* current_communicator();

class CommunicatorScope {
 public:
  explicit CommunicatorScope(Communicator* c);
  ~CommunicatorScope();
  CommunicatorScope(const CommunicatorScope&) = delete;
  CommunicatorScope& operator=(const CommunicatorScope&) = delete;

 private:
  Communicator* previous_;
};

// How long a rank waits for the others at a collective: TRIPY_COLLECTIVE_TIMEOUT (seconds) or 300.
double collective_timeout_seconds();

// Why a collective kernel of `attrs` cannot run on communicator `c` (null: none set), or "".
std::string communicator_mismatch(const Communicator* c, const CollectiveAttrs& attrs);

// The ranks of one process meeting in host memory: a group of world_size communicators, one per
// rank, made together. Collectives read the other ranks' buffers directly (no copies but the
// result's); every rank computes its whole result in rank order, so all hold the same bits.
class HostCommunicatorGroup;
class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostCommunicatorGroup> group, int rank);
  int rank() const override { return rank_; }
  int world_size() const override;
  void abort(const std::string& why) override;
  void reset() override;
  void finish() override;
  // out = sum over ranks of in (count elements of dtype each), or the ranks' `in` joined: `outer`
  // blocks of `chunk_bytes` per rank, rank j's block o landing at out + (o * world + j) * chunk_bytes,
  // or this rank's share of the sum: of `outer` blocks of world * `part` elements, part number
  // `rank` of each. kUnavailable when a rank failed or the wait timed out, kInvalidArgument when
  // the ranks' sizes differ (every rank sees the same sizes, so every rank fails alike).
  Status all_reduce(const void* in, void* out, int64_t count, DType dtype);
  Status all_gather(const void* in, void* out, int64_t outer, int64_t chunk_bytes);
  Status reduce_scatter(const void* in, void* out, int64_t outer, int64_t part, DType dtype);

 private:
  Status publish(const char* what, const char* verb, const void* in, int64_t size, const char* unit);

  std::shared_ptr<HostCommunicatorGroup> group_;
  int rank_;
};

std::vector<std::shared_ptr<Communicator>> make_host_communicators(int world_size);

// Runs `programs[r]` on `inputs[r]` with `communicators[r]`, each rank on its own thread, and
// returns every rank's outputs. The first rank that fails aborts the others; the error returned
// is that rank's (named "rank r of n"), not the aborts it caused. A C++ exception out of a rank's
// run is that rank's failure (kInternal), not the process's end.
StatusOr<std::vector<std::vector<Tensor>>> run_ranks(const std::vector<const Executable*>& programs,
                                                     const std::vector<std::vector<Tensor>>& inputs,
                                                     const std::vector<std::shared_ptr<Communicator>>& communicators);

}  // namespace tripy::rt
