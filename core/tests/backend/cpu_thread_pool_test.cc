// The CPU backend's worker pool: every index of [0, n) is visited once per call, whether the
// workers are still spinning from the call before (back to back) or asleep (after a pause longer
// than their spin), from several calling threads at once, and inline from inside a job's chunk.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

// Runs parallel_for over n indices `calls` times, sleeping `pause` between calls; each index's
// visits counted.
std::vector<int> visits(ThreadPool& pool, int64_t n, int calls, std::chrono::microseconds pause) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  for (int c = 0; c < calls; ++c) {
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  std::vector<int> out;
  for (auto& s : seen) out.push_back(s.load());
  return out;
}

TEST(CpuThreadPool, EveryIndexOncePerCallBackToBackAndAfterTheWorkersSleep) {
  ThreadPool pool(3);
  for (auto pause : {std::chrono::microseconds(0), std::chrono::microseconds(2000)}) {
    SCOPED_TRACE(pause.count());
    const int calls = pause.count() ? 20 : 2000;
    EXPECT_EQ(visits(pool, 37, calls, pause), std::vector<int>(37, calls));
    pool.quiet();  // workers told to sleep still take the next job
    EXPECT_EQ(visits(pool, 5, 3, pause), std::vector<int>(5, 3));
  }
}

TEST(CpuThreadPool, CallersOnSeveralThreadsEachGetTheirOwnJob) {
  ThreadPool pool(2);
  std::vector<std::vector<int>> got(4);
  std::vector<std::thread> callers;
  for (size_t t = 0; t < got.size(); ++t)
    callers.emplace_back([&, t] { got[t] = visits(pool, 100 + static_cast<int64_t>(t), 200, {}); });
  for (auto& c : callers) c.join();
  for (size_t t = 0; t < got.size(); ++t) EXPECT_EQ(got[t], std::vector<int>(100 + t, 200)) << t;
}

TEST(CpuThreadPool, AParallelForInsideAJobsChunkRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(3, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, 1, [&](int64_t ib, int64_t ie) { inner.fetch_add(static_cast<int>(ie - ib)); });
  });
  // Every chunk's nested call runs inline, the caller's too (it holds the pool): no deadlock, each
  // index once.
  EXPECT_EQ(inner.load(), 30);
}

}  // namespace
}  // namespace tripy::cpu
