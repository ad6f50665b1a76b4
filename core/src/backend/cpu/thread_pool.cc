// Implementation of the CPU backend's persistent worker pool (fork-join over contiguous chunks).
#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace tripy::cpu {
namespace {
thread_local bool t_in_worker = false;

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
    stop_ = true;
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
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
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
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  int64_t b, e;
  chunk_range(n, chunks, 0, b, e);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::instance().parallel_for(n, grain, fn);
}

}  // namespace tripy::cpu
