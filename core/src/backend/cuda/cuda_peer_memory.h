// Memory that every rank of an NCCL communicator maps: each rank's flags, epoch counters and two
// staging buffers for the one-shot all-reduce and all-gather (codegen/kernels/one_shot_collective.cuh),
// which read the other ranks' staging buffers directly instead of running NCCL's: one kernel of a
// few microseconds for a decode step's activations.
//
// One process per GPU: made when a rank joins its communicator, through NCCL itself (an all-gather
// of the CUDA IPC handles), and used only if every rank mapped every other's (an all-reduce of that
// answer), so the ranks always agree on which algorithm a collective takes. One process driving
// several GPUs: every rank's region made on its GPU and reached by the others through peer access
// (one address space), or none where a pair of the GPUs cannot reach each other.
// TRIPY_ONESHOT_COLLECTIVES=0 turns it off.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

class PeerMemory {
 public:
  static constexpr int kBlocks = 32, kThreads = 512;  // the kernel's grid, fixed (see its flags)
  static constexpr int kMaxRanks = 8;                 // TRIPY_AR_RANKS of the kernel
  static constexpr int64_t kCapacity = 1 << 20;       // bytes per staging buffer: a rank's largest input
  // A rank's largest input sent with its epoch (the form without a barrier), unless
  // TRIPY_ONESHOT_EPOCH_BYTES says less on any rank (0: every one-shot collective staged).
  static constexpr int64_t kEpochBytes = 64 << 10;
  // The kernel's OneShotArgs as launch words: in and out (addresses), then those the plan sets
  // (cuda_collective.cc), then from kFirstWord those fill() sets.
  enum Word : int { kCount = 2, kErr, kTag, kClaim, kTimeout, kGatherBlock, kFirstWord };
  static constexpr int kWords = 29;

  // nullptr (and ok) where the one-shot cannot serve: one rank, more than kMaxRanks, turned off, or
  // a rank that could not map another's memory.
  static StatusOr<std::unique_ptr<PeerMemory>> create(ncclComm_t comm, int rank, int world);
  // Each rank's, for ranks on gpu:gpus[rank] of this process (empty where the one-shot cannot serve).
  static StatusOr<std::vector<std::unique_ptr<PeerMemory>>> create_in_process(const std::vector<int>& gpus);
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  // Writes rank, world, counters, capacity, epoch_bytes, flags[] and data[] into a launch's words.
  void fill(std::vector<int64_t>& words) const;

 private:
  PeerMemory(int rank, int world, int gpu) : rank_(rank), world_(world), gpu_(gpu) {}
  int rank_, world_;
  int gpu_;             // the GPU own_ is on
  bool ipc_ = true;     // the other ranks' regions are IPC mappings (else this process's own)
  int64_t epoch_bytes_ = kEpochBytes;
  CUdeviceptr own_ = 0;
  std::vector<CUdeviceptr> bases_;  // every rank's region in this process (own_ at rank_)
};

}  // namespace tripy::rt::cuda
