// Shared by the cache tests (cuda_cache_files_test.cc, cuda_tuning_cache_test.cc): a reader that
// blocks on a FIFO makes its test fail, not hang; and the name the caches once wrote through.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace tripy::rt::cuda::testing {

// Whether `read` returned within a few seconds. If it did not (blocked opening the FIFO at
// `fifo`, waiting for a writer), a writer is opened and closed so that it returns.
inline bool returns_without_blocking(const std::function<void()>& read, const std::string& fifo) {
  std::future<void> done = std::async(std::launch::async, read);
  if (done.wait_for(std::chrono::seconds(5)) == std::future_status::ready) return true;
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
  done.wait();
  return false;
}

// The temporary name the caches wrote `path` through before they made private ones: predictable,
// so another user could plant a link under it.
inline std::string predictable_temp_name(const std::string& path) {
  return path + ".tmp" + std::to_string(::getpid()) + "_" +
         std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
}

}  // namespace tripy::rt::cuda::testing
