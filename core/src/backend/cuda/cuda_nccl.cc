// NCCL's table of entry points (dlopen) and the GPU's communicators.
#include "backend/cuda/cuda_nccl.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_device.h"

namespace tripy::rt::cuda {
namespace {

void* open_nccl(std::string& tried) {
  std::vector<std::string> paths;
  if (const char* lib = std::getenv("TRIPY_NCCL_LIBRARY")) paths.push_back(lib);
  if (const char* home = std::getenv("TRIPY_CUDA_HOME")) {
    paths.push_back(std::string(home) + "/lib64/libnccl.so.2");
    paths.push_back(std::string(home) + "/lib/libnccl.so.2");
  }
  paths.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  paths.push_back("libnccl.so.2");
  for (const std::string& p : paths) {
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : ", ") + p;
  }
  return nullptr;
}

// TRIPY_DEBUG=1 says which all-reduce a rank's small messages take.
void report_peers(bool one_shot, int rank, int world) {
  if (debug_level() >= 1)
    std::fprintf(stderr, "tripy: rank %d of %d: small collectives %s\n", rank, world,
                 one_shot ? "one-shot through peer memory" : "NCCL's (no peer memory)");
}

}  // namespace

const NcclApi& nccl() {
  static NcclApi* instance = [] {
    auto* a = new NcclApi();
    std::string tried;
    void* lib = open_nccl(tried);
    if (lib == nullptr) {
      a->why_unavailable = "NCCL (libnccl.so.2) was not found (tried " + tried +
                           "); set TRIPY_NCCL_LIBRARY to its path (pip's nvidia-nccl-cu13 puts it in "
                           "site-packages/nvidia/nccl/lib)";
      return a;
    }
    bool ok = true;
#define TRIPY_NCCL_LOAD(name) \
  ok = (a->name = reinterpret_cast<decltype(a->name)>(dlsym(lib, #name))) != nullptr && ok;
    TRIPY_NCCL_FUNCS(TRIPY_NCCL_LOAD)
#undef TRIPY_NCCL_LOAD
    a->ok = ok;
    if (!ok) a->why_unavailable = "libnccl.so.2 lacks an entry point Tripy needs (NCCL 2.18 or later is required)";
    return a;
  }();
  return *instance;
}

Status check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return ok_status();
  const char* text = nccl().ncclGetErrorString ? nccl().ncclGetErrorString(r) : "unknown";
  return Status(r == ncclInvalidArgument || r == ncclInvalidUsage ? StatusCode::kInvalidArgument : StatusCode::kUnavailable,
                std::string("NCCL call ") + call + " failed: " + text);
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int world) : comm_(comm), rank_(rank), world_(world) {
  watch_communicator(this, true);
}

NcclCommunicator::~NcclCommunicator() {
  watch_communicator(this, false);
  const ncclComm_t c = comm_.load();
  if (c != nullptr && nccl().ok) {
    if (aborted_) nccl().ncclCommAbort(c);
    else nccl().ncclCommDestroy(c);
  }
}

// The peer memory stays mapped until the communicator goes: a one-shot kernel may still run.
void NcclCommunicator::abort(const std::string&) {
  if (aborted_.exchange(true)) return;
  const ncclComm_t c = comm_.exchange(nullptr);
  if (c != nullptr) nccl().ncclCommAbort(c);
}

StatusOr<std::vector<std::shared_ptr<Communicator>>> nccl_communicators(const std::vector<int>& gpus) {
  if (!nccl().ok) return Status(StatusCode::kUnavailable, nccl().why_unavailable);
  const int world = static_cast<int>(gpus.size());
  std::vector<ncclComm_t> comms(static_cast<size_t>(world));
  std::vector<int> devices;  // CUDA ordinals
  for (int g : gpus) {
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* d, device(g));  // every one usable (and initialised)
    devices.push_back(static_cast<int>(d->device));
  }
  TRIPY_RETURN_IF_ERROR(make_current());
  TRIPY_NCCL_TRY(ncclCommInitAll(comms.data(), world, devices.data()));
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_shared<NcclCommunicator>(comms[static_cast<size_t>(r)], r, world));
  TRIPY_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<PeerMemory>> peers, PeerMemory::create_in_process(gpus));
  for (size_t r = 0; r < peers.size(); ++r) static_cast<NcclCommunicator&>(*out[r]).set_peers(std::move(peers[r]));
  for (int r = 0; r < world; ++r) report_peers(!peers.empty(), r, world);
  return out;
}

StatusOr<std::string> nccl_unique_id() {
  if (!nccl().ok) return Status(StatusCode::kUnavailable, nccl().why_unavailable);
  ncclUniqueId id;
  TRIPY_NCCL_TRY(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

StatusOr<std::shared_ptr<Communicator>> nccl_join(const std::string& unique_id, int rank, int world) {
  if (!nccl().ok) return Status(StatusCode::kUnavailable, nccl().why_unavailable);
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal))
    return invalid_argument("an NCCL unique id has " + std::to_string(sizeof(id.internal)) + " bytes, not " +
                            std::to_string(unique_id.size()));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  TRIPY_RETURN_IF_ERROR(make_current());
  ncclComm_t comm = nullptr;
  TRIPY_NCCL_TRY(ncclCommInitRank(&comm, world, id, rank));
  auto joined = std::make_shared<NcclCommunicator>(comm, rank, world);
  TRIPY_ASSIGN_OR_RETURN(std::unique_ptr<PeerMemory> peers, PeerMemory::create(comm, rank, world));
  report_peers(peers != nullptr, rank, world);
  joined->set_peers(std::move(peers));
  return std::shared_ptr<Communicator>(std::move(joined));
}

}  // namespace tripy::rt::cuda
