// The ranks' shared staging memory for the one-shot collectives (see cuda_peer_memory.h).
#include "backend/cuda/cuda_peer_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_nccl.h"
#include "runtime/gpu_scope.h"

namespace tripy::rt::cuda {
namespace {

// A rank's region: flags (u32 [kBlocks][kMaxRanks]), counters (u32 [kBlocks]), then at
// kStagingOffset the two staging buffers, then the epoch words: two buffers of a slot per sending
// rank, each 8 bytes of input taking 16.
constexpr int64_t kFlagsBytes = PeerMemory::kBlocks * PeerMemory::kMaxRanks * 4;
constexpr int64_t kCountersOffset = kFlagsBytes;
constexpr int64_t kStagingOffset = 4096;
constexpr int64_t kRegionBytes =
    kStagingOffset + 2 * PeerMemory::kCapacity + 2 * PeerMemory::kMaxRanks * 2 * PeerMemory::kEpochBytes;
static_assert(kCountersOffset + PeerMemory::kBlocks * 4 <= kStagingOffset, "flags and counters fit before the staging");
static_assert(PeerMemory::kWords == PeerMemory::kFirstWord + 5 + 2 * PeerMemory::kMaxRanks, "the words fill() writes");

bool turned_off() {
  const char* v = std::getenv("TRIPY_ONESHOT_COLLECTIVES");
  return v != nullptr && std::string(v) == "0";
}

// TRIPY_ONESHOT_EPOCH_BYTES, within [0, kEpochBytes] (the default where unset or not a number).
int64_t epoch_bytes_from_environment() {
  const char* v = std::getenv("TRIPY_ONESHOT_EPOCH_BYTES");
  char* end = nullptr;
  const long long n = v != nullptr ? std::strtoll(v, &end, 10) : -1;
  if (v == nullptr || end == v || *end != '\0' || n < 0) return PeerMemory::kEpochBytes;
  return std::min<int64_t>(n, PeerMemory::kEpochBytes);
}

// Runs an NCCL call on its own stream and waits for it (setup only, never inside a capture).
template <typename F>
Status run_and_wait(F&& call) {
  CUstream s = nullptr;
  TRIPY_CUDA_TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Status st = call(s);
  if (st.ok()) st = TRIPY_CUDA(cuStreamSynchronize(s));
  api().cuStreamDestroy(s);
  return st;
}

}  // namespace

StatusOr<std::unique_ptr<PeerMemory>> PeerMemory::create(ncclComm_t comm, int rank, int world) {
  if (world < 2 || world > kMaxRanks || turned_off()) return std::unique_ptr<PeerMemory>();
  TRIPY_RETURN_IF_ERROR(make_current());
  std::unique_ptr<PeerMemory> m(new PeerMemory(rank, world, current_gpu()));
  m->epoch_bytes_ = epoch_bytes_from_environment();
  m->bases_.assign(static_cast<size_t>(world), 0);
  // Every rank answers whether it mapped every other's region; NCCL's min is the ranks' verdict.
  CUdeviceptr scratch = 0;
  TRIPY_CUDA_TRY(cuMemAlloc(&scratch, sizeof(CUipcMemHandle) * static_cast<size_t>(world + 1) + 2 * sizeof(int32_t)));
  struct Scratch {
    CUdeviceptr p;
    ~Scratch() { api().cuMemFree(p); }
  } scratch_guard{scratch};
  CUipcMemHandle mine{};
  bool mapped = api().cuMemAlloc(&m->own_, kRegionBytes) == CUDA_SUCCESS &&
                api().cuMemsetD8Async(m->own_, 0, kRegionBytes, nullptr) == CUDA_SUCCESS &&
                api().cuCtxSynchronize() == CUDA_SUCCESS && api().cuIpcGetMemHandle(&mine, m->own_) == CUDA_SUCCESS;
  // Every rank takes part in the exchange (a rank that failed sends zeros and says no below).
  const CUdeviceptr handles = scratch + sizeof(CUipcMemHandle);
  TRIPY_CUDA_TRY(cuMemcpyHtoDAsync(scratch, &mine, sizeof(mine), nullptr));
  TRIPY_RETURN_IF_ERROR(run_and_wait([&](CUstream s) {
    return TRIPY_NCCL(ncclAllGather(reinterpret_cast<const void*>(scratch), reinterpret_cast<void*>(handles),
                                    sizeof(CUipcMemHandle), ncclInt8, comm, reinterpret_cast<cudaStream_t>(s)));
  }));
  std::vector<CUipcMemHandle> all(static_cast<size_t>(world));
  TRIPY_CUDA_TRY(cuMemcpyDtoHAsync(all.data(), handles, sizeof(CUipcMemHandle) * all.size(), nullptr));
  TRIPY_CUDA_TRY(cuCtxSynchronize());
  for (int r = 0; r < world && mapped; ++r) {
    if (r == rank) {
      m->bases_[static_cast<size_t>(r)] = m->own_;
      continue;
    }
    mapped = api().cuIpcOpenMemHandle(&m->bases_[static_cast<size_t>(r)], all[static_cast<size_t>(r)],
                                      CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS;
  }
  // With the verdict, the ranks' smallest epoch-word limit: every rank picks each collective's form alike.
  int32_t verdict[2] = {mapped ? 1 : 0, static_cast<int32_t>(m->epoch_bytes_)};
  const CUdeviceptr words = handles + sizeof(CUipcMemHandle) * static_cast<size_t>(world);
  TRIPY_CUDA_TRY(cuMemcpyHtoDAsync(words, verdict, sizeof(verdict), nullptr));
  TRIPY_CUDA_TRY(cuCtxSynchronize());
  TRIPY_RETURN_IF_ERROR(run_and_wait([&](CUstream s) {
    return TRIPY_NCCL(ncclAllReduce(reinterpret_cast<const void*>(words), reinterpret_cast<void*>(words), 2, ncclInt32,
                                    ncclMin, comm, reinterpret_cast<cudaStream_t>(s)));
  }));
  TRIPY_CUDA_TRY(cuMemcpyDtoHAsync(verdict, words, sizeof(verdict), nullptr));
  TRIPY_CUDA_TRY(cuCtxSynchronize());
  if (verdict[0] != 1) return std::unique_ptr<PeerMemory>();  // the destructor unmaps what was mapped
  m->epoch_bytes_ = verdict[1];
  return m;
}

StatusOr<std::vector<std::unique_ptr<PeerMemory>>> PeerMemory::create_in_process(const std::vector<int>& gpus) {
  std::vector<std::unique_ptr<PeerMemory>> out;
  const int world = static_cast<int>(gpus.size());
  if (world < 2 || world > kMaxRanks || turned_off()) return out;
  std::vector<const DeviceInfo*> devices;
  for (int g : gpus) {
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* d, device(g));
    devices.push_back(d);
  }
  for (const DeviceInfo* a : devices)
    for (const DeviceInfo* b : devices) {
      int reach = 0;
      if (a != b && (api().cuDeviceCanAccessPeer(&reach, a->device, b->device) != CUDA_SUCCESS || !reach)) return out;
    }
  std::vector<CUdeviceptr> bases;
  for (int r = 0; r < world; ++r) {
    GpuScope scope(gpus[static_cast<size_t>(r)]);
    TRIPY_RETURN_IF_ERROR(make_current());
    out.emplace_back(new PeerMemory(r, world, gpus[static_cast<size_t>(r)]));
    PeerMemory& m = *out.back();
    m.ipc_ = false;
    m.epoch_bytes_ = epoch_bytes_from_environment();  // one environment: every rank's alike
    bool ready = api().cuMemAlloc(&m.own_, kRegionBytes) == CUDA_SUCCESS &&
                 api().cuMemsetD8Async(m.own_, 0, kRegionBytes, nullptr) == CUDA_SUCCESS &&
                 api().cuCtxSynchronize() == CUDA_SUCCESS;
    // This GPU reaches every other's memory (an address of any GPU is one address in this process).
    for (const DeviceInfo* other : devices) {
      if (!ready || other == devices[static_cast<size_t>(r)]) continue;
      const CUresult e = api().cuCtxEnablePeerAccess(other->context, 0);
      ready = e == CUDA_SUCCESS || e == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    }
    if (!ready) {
      out.clear();  // NCCL's collectives, then (each region freed on its GPU)
      return out;
    }
    bases.push_back(m.own_);
  }
  for (auto& m : out) m->bases_ = bases;
  return out;
}

PeerMemory::~PeerMemory() {
  if (!api().driver_ok) return;
  GpuScope scope(gpu_);
  if (!make_current().ok()) return;
  for (int r = 0; r < world_ && ipc_; ++r)
    if (r != rank_ && bases_[static_cast<size_t>(r)] != 0) api().cuIpcCloseMemHandle(bases_[static_cast<size_t>(r)]);
  if (own_ != 0) api().cuMemFree(own_);
}

void PeerMemory::fill(std::vector<int64_t>& w) const {
  w[kFirstWord] = rank_;
  w[kFirstWord + 1] = world_;
  w[kFirstWord + 2] = static_cast<int64_t>(own_ + kCountersOffset);
  w[kFirstWord + 3] = kCapacity;
  w[kFirstWord + 4] = epoch_bytes_;
  for (int r = 0; r < kMaxRanks; ++r) {
    const CUdeviceptr base = r < world_ ? bases_[static_cast<size_t>(r)] : 0;
    w[kFirstWord + 5 + r] = static_cast<int64_t>(base);
    w[kFirstWord + 5 + kMaxRanks + r] = base ? static_cast<int64_t>(base + kStagingOffset) : 0;
  }
}

}  // namespace tripy::rt::cuda
