// Threads sharing Tripy objects: 8 threads evaluating one lazy tensor (and overlapping parts of
// one graph), and one executable called from 8 threads. Run under TSan by `make test-tsan`.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "compiler/eager.h"
#include "trace/op_def.h"

namespace tripy::compiler {
namespace {

using trace::make_data_node;
using trace::make_input_node;
using trace::make_node;
using trace::NodeRef;

constexpr int kThreads = 8;

SourceRef here() { return std::make_shared<SourceInfo>(SourceInfo{{"user.py", 1, "main", -1, -1}}); }

NodeRef data(std::vector<float> values) {
  Tensor t = Tensor::empty_host(DType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) static_cast<float*>(t.data())[i] = values[i];
  return make_data_node(t, here());
}

NodeRef op(const std::string& name, std::vector<NodeRef> in) {
  auto n = make_node(name, std::move(in), {}, here());
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.value();
}

CompileOptions cpu() {
  CompileOptions o;
  o.optimization_level = 0;
  return o;
}

float at(const NodeRef& n, int i) { return static_cast<const float*>(n->value.data())[i]; }

TEST(Concurrency, EightThreadsEvaluateOneLazyTensor) {
  for (int round = 0; round < 20; ++round) {
    NodeRef x = data({1, 2, 3, 4});
    NodeRef y = op("add", {op("mul", {op("exp", {x}), x}), x});  // x * e^x + x
    std::vector<std::thread> threads;
    std::vector<Status> results(kThreads);
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] { results[t] = evaluate(y, cpu()); });
    for (auto& th : threads) th.join();
    for (const Status& st : results) ASSERT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(at(y, i), (i + 1) * std::exp(i + 1.0f) + (i + 1), 1e-3);
  }
}

TEST(Concurrency, EightThreadsEvaluateOverlappingPartsOfOneGraph) {
  for (int round = 0; round < 20; ++round) {
    NodeRef x = data({1, 2, 3});
    std::vector<NodeRef> chain = {x};
    for (int i = 0; i < kThreads; ++i) chain.push_back(op(i % 2 ? "mul" : "add", {chain.back(), x}));
    std::vector<std::thread> threads;
    std::vector<Status> results(kThreads);
    // Thread t evaluates link t + 1 while others evaluate (and detach) the links it depends on.
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] { results[t] = evaluate(chain[kThreads - t], cpu()); });
    for (auto& th : threads) th.join();
    for (const Status& st : results) ASSERT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < 3; ++i) {
      float v = static_cast<float>(i + 1), want = v;
      for (int k = 0; k < kThreads; ++k) want = k % 2 ? want * v : want + v;
      EXPECT_FLOAT_EQ(at(chain.back(), i), want);
    }
  }
}

TEST(Concurrency, OneExecutableCalledFromEightThreads) {
  auto table = std::make_shared<SymbolTable>();
  const int s = table->add("n", 1, 4, 64);
  NodeRef in = make_input_node(0, "x", DType::kFloat32, {Dim::symbol(s)}, Device{}, table, here());
  NodeRef out = op("add", {op("mul", {in, in}), in});
  auto exe = compile_trace({out}, {in}, {"return"}, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call) {
        const int64_t n = 1 + (t * 7 + call) % 64;
        Tensor x = Tensor::empty_host(DType::kFloat32, {n});
        for (int64_t i = 0; i < n; ++i) static_cast<float*>(x.data())[i] = static_cast<float>(t * 1000 + i);
        auto r = exe->run({x});
        if (!r.ok() || (*r)[0].shape() != std::vector<int64_t>{n}) {
          ++mismatches[t];
          continue;
        }
        for (int64_t i = 0; i < n; ++i) {
          const float v = static_cast<float>(t * 1000 + i);
          if (static_cast<const float*>((*r)[0].data())[i] != v * v + v) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace tripy::compiler
