// The NCCL watchdog (cuda_nccl.h): NCCL's collectives wait for every rank without a limit, so a
// rank that failed or stopped would leave the others' streams, and a host waiting for them,
// blocked for good. After each run of a program with collectives on an NCCL rank, an event marks
// the run's end on its stream; a thread checks the oldest unfinished mark ten times a second, and
// one still unfinished TRIPY_COLLECTIVE_TIMEOUT seconds (and a few more, past the one-shot
// kernels' own limit) after its run aborts every NCCL communicator of the process: NCCL's kernels
// then return, the waiting host wakes, and its next check of device errors raises the reason.
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_nccl.h"
#include "runtime/gpu_scope.h"

namespace tripy::rt::cuda {
namespace {

using Clock = std::chrono::steady_clock;

struct Mark {
  CUevent event;
  Clock::time_point start;
  int gpu;  // the GPU whose stream it was recorded on (gpu:index)
};

struct Watchdog {
  std::mutex mutex;
  std::deque<Mark> marks;                     // oldest first
  std::map<int, std::vector<CUevent>> spare;  // per GPU, events whose marks finished, for reuse
  std::set<NcclCommunicator*> live;           // every communicator of the process
  std::string error;                          // why the watchdog aborted, until a host check takes it
  bool started = false;
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread outlives static destructors
  return *w;
}

// The limit past a run's start: the one-shot kernels' own limit first, then this.
Clock::duration limit() {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(collective_timeout_seconds() + 5.0));
}

void watch_loop() {
  Watchdog& w = watchdog();
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(w.mutex);
    while (!w.marks.empty()) {
      const Mark m = w.marks.front();
      GpuScope on(m.gpu);
      if (!make_current().ok()) {  // no device to ask: nothing to watch
        w.marks.clear();
        break;
      }
      const CUresult r = api().cuEventQuery(m.event);
      if (r == CUDA_ERROR_NOT_READY) {
        if (Clock::now() - m.start < limit()) break;
        const double s = collective_timeout_seconds();
        w.error = "a collective of this rank waited more than " + std::to_string(static_cast<int64_t>(s)) +
                  " s for the other ranks (one failed, stopped or runs another program), so every NCCL "
                  "communicator of this process was aborted; TRIPY_COLLECTIVE_TIMEOUT sets the wait in seconds";
        for (NcclCommunicator* c : w.live) c->abort(w.error);
        w.marks.clear();  // their events stay: a finished kernel may still record them
        break;
      }
      w.marks.pop_front();
      w.spare[m.gpu].push_back(m.event);
    }
  }
}

}  // namespace

void watch_communicator(NcclCommunicator* c, bool live) {
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (live) w.live.insert(c);
  else w.live.erase(c);
}

Status watch_run(CUstream stream) {
  if (dynamic_cast<NcclCommunicator*>(current_communicator()) == nullptr) return ok_status();
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  const int gpu = current_gpu();
  std::vector<CUevent>& spare = w.spare[gpu];
  CUevent e = nullptr;
  if (!spare.empty()) {
    e = spare.back();
    spare.pop_back();
  } else {
    TRIPY_CUDA_TRY(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  }
  TRIPY_CUDA_TRY(cuEventRecord(e, stream));
  w.marks.push_back(Mark{e, Clock::now(), gpu});
  if (!w.started) {
    w.started = true;
    std::thread(watch_loop).detach();
  }
  return ok_status();
}

Status take_watchdog_error() {
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (w.error.empty()) return ok_status();
  Status st(StatusCode::kUnavailable, w.error);
  w.error.clear();
  return st;
}

}  // namespace tripy::rt::cuda
