// Implementation of the CPU backend's persistent worker pool (fork-join over contiguous chunks).
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tripy::cpu {
namespace {
thread_local bool t_in_worker = false;  // inside a job's chunk: a nested parallel_for runs inline

// How long a thread spins for the next job (a worker) or the job's end (the caller) before it
// sleeps: longer than the gaps between a compiled program's kernels, short enough that an idle
// process gives its cores back at once.
constexpr auto kSpin = std::chrono::microseconds(200);

// Spins until done() or kSpin passes; whether done() held.
template <class Done>
bool spin_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
}

void chunk_range(int64_t n, int chunks, int index, int64_t& begin, int64_t& end) {
  begin = n * index / chunks;
  end = n * (index + 1) / chunks;
}
}  // namespace

ThreadPool& ThreadPool::instance() {
  // Leaked on purpose: joining threads during static destruction races with other teardown.
  static ThreadPool* pool = new ThreadPool(
      std::max(1, static_cast<int>(std::thread::hardware_concurrency())) - 1);
  return *pool;
}

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  t_in_worker = true;
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    const int64_t quiet = quiet_.load(std::memory_order_relaxed);
    if (!spin_until([&] { return ready() || quiet_.load(std::memory_order_relaxed) != quiet; }) || !ready()) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, ready);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);  // the job's fields are written under it
      if (stop_.load()) return;
      seen = generation_.load();
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    // Chunk 0 belongs to the caller; worker i takes chunk i + 1 when there is one.
    if (index + 1 < chunks) {
      int64_t b, e;
      chunk_range(n, chunks, index + 1, b, e);
      (*job)(b, e);
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // a caller about to sleep checks pending_ under it
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int chunks = static_cast<int>(std::min<int64_t>(concurrency(), (n + grain - 1) / grain));
  if (chunks <= 1 || t_in_worker || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  int64_t b, e;
  chunk_range(n, chunks, 0, b, e);
  {
    // A parallel_for inside the caller's own chunk runs inline too (it would wait on this one).
    struct InJob {
      InJob() { t_in_worker = true; }
      ~InJob() { t_in_worker = false; }
    } in_job;
    fn(b, e);
  }
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(finished)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, finished);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::instance().parallel_for(n, grain, fn);
}

}  // namespace tripy::cpu
