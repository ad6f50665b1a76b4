// The host communicator that the CPU's collective kernels use (runtime/collectives.h): sums,
// gathers and reduce-scatters among threads against a serial reference, every rank holding the same bits, an abort that
// wakes the ranks waiting, a timeout, sizes that differ, and run_ranks naming the rank that failed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "common/half.h"
#include "runtime/collectives.h"

namespace tripy::rt {
namespace {

// Runs fn(rank, communicator) on a thread per rank and returns each rank's status.
template <class Fn>
std::vector<Status> on_ranks(int world, Fn fn) {
  auto comms = make_host_communicators(world);
  std::vector<Status> out(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = fn(r, static_cast<HostCommunicator&>(*comms[static_cast<size_t>(r)])); });
  for (auto& t : threads) t.join();
  return out;
}

TEST(HostCommunicator, AllReduceSumsInRankOrderAndEveryRankHoldsTheSameValues) {
  const int world = 3;
  const int64_t n = 1000;
  std::vector<std::vector<float>> in(world, std::vector<float>(n)), out(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; ++i) in[r][i] = 0.1f * static_cast<float>(i) / static_cast<float>(r + 1);
  for (int repeat = 0; repeat < 3; ++repeat) {  // the barrier's generations carry over
    auto st = on_ranks(world, [&](int r, HostCommunicator& c) { return c.all_reduce(in[r].data(), out[r].data(), n, DType::kFloat32); });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  }
  for (int64_t i = 0; i < n; ++i) {
    const float want = (in[0][i] + in[1][i]) + in[2][i];
    for (int r = 0; r < world; ++r) EXPECT_EQ(out[r][i], want) << i;
  }
}

TEST(HostCommunicator, HalfPrecisionSumsInFloat32AndRoundsOnce) {
  const int world = 4;
  std::vector<uint16_t> in(world), out(world);
  // 1 + 3 * 2**-8: summed in bfloat16 each 1 + 2**-8 would round (to even) back to 1.
  for (int r = 0; r < world; ++r) in[r] = cpu::float_to_bfloat16(r == 0 ? 1.0f : 1.0f / 256);
  const uint16_t want = cpu::float_to_bfloat16(1.0f + 3.0f / 256);
  ASSERT_NE(want, cpu::float_to_bfloat16(1.0f));
  auto st = on_ranks(world, [&](int r, HostCommunicator& c) { return c.all_reduce(&in[r], &out[r], 1, DType::kBFloat16); });
  for (const Status& s : st) ASSERT_TRUE(s.ok());
  for (int r = 0; r < world; ++r) EXPECT_EQ(out[r], want);
}

TEST(HostCommunicator, AllGatherInterleavesTheRanksBlocks) {
  const int world = 2;
  // Each rank's input is 3 blocks of 2 int32s; the output puts rank j's block b at b * 2 + j.
  std::vector<std::vector<int32_t>> in = {{0, 1, 2, 3, 4, 5}, {10, 11, 12, 13, 14, 15}};
  std::vector<std::vector<int32_t>> out(world, std::vector<int32_t>(12));
  auto st = on_ranks(world, [&](int r, HostCommunicator& c) { return c.all_gather(in[r].data(), out[r].data(), 3, 8); });
  for (const Status& s : st) ASSERT_TRUE(s.ok());
  const std::vector<int32_t> want = {0, 1, 10, 11, 2, 3, 12, 13, 4, 5, 14, 15};
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(out[1], want);
}

TEST(HostCommunicator, ReduceScatterGivesEachRankItsPartOfEveryBlockOfTheSum) {
  const int world = 3;
  const int64_t outer = 2, part = 4;  // each rank's input: 2 blocks of 3 parts of 4
  std::vector<std::vector<int64_t>> in(world, std::vector<int64_t>(outer * world * part));
  std::vector<std::vector<int64_t>> out(world, std::vector<int64_t>(outer * part, -1));
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = static_cast<int64_t>(i) * (r + 1) + 100 * r;
  auto st = on_ranks(world, [&](int r, HostCommunicator& c) {
    return c.reduce_scatter(in[r].data(), out[r].data(), outer, part, DType::kInt64);
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  for (int r = 0; r < world; ++r)
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t i = 0; i < part; ++i) {
        int64_t want = 0;
        for (int q = 0; q < world; ++q) want += in[q][(b * world + r) * part + i];
        EXPECT_EQ(out[r][b * part + i], want) << "rank " << r << " block " << b << " element " << i;
      }
}

TEST(HostCommunicator, SizesThatDifferFailEveryRank) {
  std::vector<float> buf(8), out(8);
  auto st = on_ranks(2, [&](int r, HostCommunicator& c) { return c.all_reduce(buf.data(), out.data(), 4 + r, DType::kFloat32); });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("elements but rank"), std::string::npos) << s.message();
  }
}

TEST(HostCommunicator, AnAbortWakesTheRanksWaitingAndAResetRecovers) {
  auto comms = make_host_communicators(2);
  auto& waiting = static_cast<HostCommunicator&>(*comms[0]);
  float x = 1, y = 0;
  Status st;
  std::thread t([&] { st = waiting.all_reduce(&x, &y, 1, DType::kFloat32); });
  comms[1]->abort("rank 1 failed: a bad index");
  t.join();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "rank 1 failed: a bad index");
  for (auto& c : comms) c->reset();
  float a = 1, b = 2, oa = 0, ob = 0;
  std::thread u([&] { st = static_cast<HostCommunicator&>(*comms[1]).all_reduce(&b, &ob, 1, DType::kFloat32); });
  ASSERT_TRUE(waiting.all_reduce(&a, &oa, 1, DType::kFloat32).ok());
  u.join();
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(oa, 3.0f);
  EXPECT_EQ(ob, 3.0f);
}

TEST(HostCommunicator, ARankThatNeverArrivesTimesOut) {
  setenv("TRIPY_COLLECTIVE_TIMEOUT", "0.2", 1);
  auto comms = make_host_communicators(2);
  float x = 1, y = 0;
  Status st = static_cast<HostCommunicator&>(*comms[0]).all_reduce(&x, &y, 1, DType::kFloat32);
  unsetenv("TRIPY_COLLECTIVE_TIMEOUT");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 0 waited 0.2 s"), std::string::npos) << st.message();
}

TEST(HostCommunicator, ARankThatReturnedFailsTheCollectivesItSkippedAtOnce) {
  setenv("TRIPY_COLLECTIVE_TIMEOUT", "60", 1);
  auto comms = make_host_communicators(3);
  float x = 1, y = 0;
  // Ranks 0 and 1 wait; rank 2 returns from its program without arriving.
  std::vector<Status> st(2);
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r)
    waiting.emplace_back([&, r] { st[static_cast<size_t>(r)] = static_cast<HostCommunicator&>(*comms[static_cast<size_t>(r)]).all_reduce(&x, &y, 1, DType::kFloat32); });
  const auto start = std::chrono::steady_clock::now();
  comms[2]->finish();
  for (auto& t : waiting) t.join();
  unsetenv("TRIPY_COLLECTIVE_TIMEOUT");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // not the timeout
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("rank 2 of 3 returned from its program without reaching this collective"),
              std::string::npos) << s.message();
  }
  // A rank arriving later fails alike; after a reset the group runs again.
  EXPECT_FALSE(static_cast<HostCommunicator&>(*comms[0]).all_reduce(&x, &y, 1, DType::kFloat32).ok());
  for (auto& c : comms) c->reset();
  float in[3] = {1, 2, 4}, out[3] = {};
  std::vector<std::thread> all;
  for (int r = 0; r < 3; ++r)
    all.emplace_back([&, r] { (void)static_cast<HostCommunicator&>(*comms[static_cast<size_t>(r)]).all_reduce(&in[r], &out[r], 1, DType::kFloat32); });
  for (auto& t : all) t.join();
  for (float v : out) EXPECT_EQ(v, 7.0f);
}

TEST(HostCommunicator, ARankThatReturnsAfterTheLastCollectiveFailsNoOne) {
  auto comms = make_host_communicators(2);
  float in[2] = {1, 2}, out[2] = {};
  Status st;
  std::thread t([&] {
    st = static_cast<HostCommunicator&>(*comms[1]).all_reduce(&in[1], &out[1], 1, DType::kFloat32);
    comms[1]->finish();  // returned at once after its last collective, while rank 0 may still wait in it
  });
  Status st0 = static_cast<HostCommunicator&>(*comms[0]).all_reduce(&in[0], &out[0], 1, DType::kFloat32);
  t.join();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(st0.ok()) << st0.message();
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 3.0f);
}

TEST(Communicator, TheCallingThreadsCommunicatorIsTheScopes) {
  auto comms = make_host_communicators(2);
  EXPECT_EQ(current_communicator(), nullptr);
  {
    CommunicatorScope scope(comms[1].get());
    EXPECT_EQ(current_communicator(), comms[1].get());
    std::thread([] { EXPECT_EQ(current_communicator(), nullptr); }).join();  // per thread
  }
  EXPECT_EQ(current_communicator(), nullptr);
  CollectiveAttrs a;
  a.world_size = 4;
  EXPECT_NE(communicator_mismatch(nullptr, a).find("sharded over 4 ranks"), std::string::npos);
  EXPECT_NE(communicator_mismatch(comms[0].get(), a).find("mesh of 4 ranks, but runs with a communicator of 2"),
            std::string::npos);
  a.world_size = 2;
  EXPECT_EQ(communicator_mismatch(comms[0].get(), a), "");
}

}  // namespace
}  // namespace tripy::rt
