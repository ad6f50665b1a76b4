// oneDNN, built on OpenMP here, runs a primitive on as many threads as the calling thread's
// OpenMP setting allows, and other libraries in the process change that setting: importing torch
// sets it to torch's intra-op thread count (1 on a 2-core machine), which halved Tripy's ResNet-50
// speed. A DnnlThreads scope runs Tripy's primitives on the CPU backend's own thread count and
// restores the caller's setting when it ends.
#pragma once

namespace tripy::cpu {

class DnnlThreads {
 public:
  // `threads`: how many (0: the backend's count).
  explicit DnnlThreads(int threads = 0);
  ~DnnlThreads();
  DnnlThreads(const DnnlThreads&) = delete;
  DnnlThreads& operator=(const DnnlThreads&) = delete;

 private:
  int saved_ = 0;  // 0: nothing to restore
};

}  // namespace tripy::cpu
