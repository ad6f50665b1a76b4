// Tensor's host allocation: 64-byte aligned memory of the size asked for, whether fresh or a
// small buffer recycled from an earlier tensor of this thread or another.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "tripy/tensor.h"

namespace tripy {
namespace {

bool aligned_64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(TensorHost, SmallBuffersAreRecycledAlignedAndWholeForEverySize) {
  // Every size up to past the largest recycled class (4 KiB), twice: the second round reuses the
  // first round's buffers, which must still be aligned and hold the whole tensor.
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {0, 1, 6, 16, 17, 100, 1000, 1024, 1025, 3000}) {
      Tensor t = Tensor::empty_host(DType::kFloat32, {n});
      ASSERT_TRUE(aligned_64(t.data())) << n;
      std::memset(t.data(), 0x5a, static_cast<size_t>(n) * 4);  // ASan: every byte is ours
    }
  }
}

TEST(TensorHost, LiveTensorsNeverShareARecycledBuffer) {
  std::vector<Tensor> live;
  std::set<void*> seen;
  for (int i = 0; i < 40; ++i) {
    live.push_back(Tensor::empty_host(DType::kFloat32, {2, 3}));
    EXPECT_TRUE(seen.insert(live.back().data()).second) << "buffer handed out twice";
  }
  live.clear();  // more than are kept: the rest are freed
  for (int i = 0; i < 40; ++i) live.push_back(Tensor::empty_host(DType::kInt64, {3}));
  std::set<void*> again;
  for (const Tensor& t : live) EXPECT_TRUE(again.insert(t.data()).second) << "buffer handed out twice";
}

TEST(TensorHost, ABufferFreedOnAnotherThreadStaysUsable) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {8});
  std::thread([moved = std::move(t)]() mutable { moved = Tensor(); }).join();  // freed there
  std::thread([] {
    // A thread's kept buffers go when it ends; tensors it made outlive it.
    Tensor inner = Tensor::empty_host(DType::kFloat32, {8});
    std::memset(inner.data(), 1, 32);
  }).join();
  Tensor u = Tensor::empty_host(DType::kFloat32, {8});
  std::memset(u.data(), 2, 32);
  EXPECT_TRUE(aligned_64(u.data()));
}

}  // namespace
}  // namespace tripy
