// A small persistent pool of worker threads for the CPU kernels. Eager mode launches many tiny
// kernels, so callers only come here when the work is large; small work runs inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tripy::cpu {

class ThreadPool {
 public:
  // The process-wide pool, sized to the machine (started on first use).
  static ThreadPool& instance();

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that take part in parallel_for, the caller included.
  int concurrency() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split in at most concurrency() contiguous chunks of at
  // least `grain` items; returns when all are done. Runs inline when one chunk suffices or when
  // called from inside a worker (no nested parallelism).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Workers waiting for the next job stop spinning and sleep: another runtime's threads (oneDNN's
  // OpenMP) are about to want the cores.
  void quiet() { quiet_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::mutex submit_mutex_;  // one parallel_for at a time
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  // Workers and the caller spin a while on these before they sleep on wake_ / done_: a kernel's
  // parallel_for follows the last one within microseconds in a compiled program's run, and a
  // sleeping thread's wake-up took about 50 us a call (two cores), more than a decode step's small
  // products compute. Changed under mutex_, so that a thread about to sleep sees them.
  std::atomic<int64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> quiet_{0};  // quiet()'s calls
};

// parallel_for on the shared pool.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tripy::cpu
