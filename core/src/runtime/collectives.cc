// The ranks' communicators: the calling thread's (CommunicatorScope), the host communicator that
// the CPU's collective kernels use, and run_ranks, which runs one program per rank on its own thread
// (threads kept between calls).
#include "runtime/collectives.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "common/half.h"
#include "tripy/executable.h"

namespace tripy::rt {
namespace {

thread_local Communicator* t_current = nullptr;

// Sums `n` ranks' arrays of T into out, rank 0 first, in Acc.
template <class T, class Acc, class Load, class Store>
void sum_ranks(const std::vector<const void*>& ins, void* out, int64_t count, Load load, Store store) {
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < count; ++i) {
    Acc acc = load(static_cast<const T*>(ins[0])[i]);
    for (size_t r = 1; r < ins.size(); ++r) acc = acc + load(static_cast<const T*>(ins[r])[i]);
    o[i] = store(acc);
  }
}

// out = the sum of `count` elements of dtype at each of ins (rank order).
Status sum_into(const std::vector<const void*>& ins, void* out, int64_t count, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      sum_ranks<float, float>(ins, out, count, [](float v) { return v; }, [](float v) { return v; });
      break;
    case DType::kFloat16:
      sum_ranks<uint16_t, float>(ins, out, count, cpu::half_to_float, cpu::float_to_half);
      break;
    case DType::kBFloat16:
      sum_ranks<uint16_t, float>(ins, out, count, cpu::bfloat16_to_float, cpu::float_to_bfloat16);
      break;
    case DType::kInt32:  // wrapping sums, as the GPU's
      sum_ranks<int32_t, uint32_t>(ins, out, count, [](int32_t v) { return static_cast<uint32_t>(v); },
                                   [](uint32_t v) { return static_cast<int32_t>(v); });
      break;
    case DType::kInt64:
      sum_ranks<int64_t, uint64_t>(ins, out, count, [](int64_t v) { return static_cast<uint64_t>(v); },
                                   [](uint64_t v) { return static_cast<int64_t>(v); });
      break;
    default:
      return internal_error("a sum of an unsupported dtype");
  }
  return ok_status();
}

// Spins (yielding the core) until ready() or for 50 us, whichever is first: the ranks' threads hand
// over to each other many times a call, and a wake-up through a condition variable costs tens of
// microseconds, as long as a small program's whole run.
template <class Ready>
void spin_briefly(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (!ready() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

// Counts down the tasks of one run_ranks call; the caller waits for zero.
class Latch {
 public:
  explicit Latch(size_t n) : left_(n) {}
  void count_down() {
    std::lock_guard<std::mutex> lock(mu_);  // notified under the lock: the waiter may destroy this after
    if (left_.fetch_sub(1) == 1) cv_.notify_all();
  }
  void wait() {
    spin_briefly([&] { return left_.load() == 0; });
    std::unique_lock<std::mutex> lock(mu_);  // taken even after the spin: count_down may still hold it
    cv_.wait(lock, [&] { return left_.load() == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<size_t> left_;
};

// The threads that run the ranks after the first of run_ranks' calls, kept between calls (a
// sharded decode step calls once a token). A task goes to an idle thread, or to a new one when
// none is idle, so the ranks of concurrent calls (other meshes) always run at once: they wait for
// each other at their collectives. The threads live as long as the process.
class RankThreads {
 public:
  static void run(std::function<void()> task, Latch& done) {
    static RankThreads* pool = new RankThreads();  // never destroyed: its threads may outlive main
    Worker* w = nullptr;
    {
      std::lock_guard<std::mutex> lock(pool->mu_);
      if (!pool->idle_.empty()) {
        w = pool->idle_.back();
        pool->idle_.pop_back();
      }
    }
    if (w == nullptr) {
      w = new Worker();
      std::thread([w] { pool->loop(w); }).detach();
    }
    std::lock_guard<std::mutex> lock(w->mu);
    w->task = std::move(task);
    w->done.store(&done);
    w->cv.notify_one();
  }

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> task;
    std::atomic<Latch*> done{nullptr};
  };

  void loop(Worker* w) {
    for (;;) {
      std::function<void()> task;
      Latch* done = nullptr;
      spin_briefly([&] { return w->done.load() != nullptr; });
      {
        std::unique_lock<std::mutex> lock(w->mu);
        w->cv.wait(lock, [&] { return w->done.load() != nullptr; });
        task = std::move(w->task);
        done = w->done.exchange(nullptr);
      }
      task();
      task = nullptr;  // the caller's captures released before it resumes
      {
        std::lock_guard<std::mutex> lock(mu_);
        idle_.push_back(w);
      }
      done->count_down();
    }
  }

  std::mutex mu_;
  std::vector<Worker*> idle_;
};

}  // namespace

Communicator* current_communicator() { return t_current; }

CommunicatorScope::CommunicatorScope(Communicator* c) : previous_(t_current) { t_current = c; }
CommunicatorScope::~CommunicatorScope() { t_current = previous_; }

double collective_timeout_seconds() {
  if (const char* s = std::getenv("TRIPY_COLLECTIVE_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && v > 0) return v;
  }
  return 300.0;
}

std::string communicator_mismatch(const Communicator* c, const CollectiveAttrs& a) {
  const std::string n = std::to_string(a.world_size);
  if (c == nullptr)
    return "this program is one rank of a program sharded over " + n +
           " ranks (tp.compile with a tp.DeviceMesh): run it through that sharded executable, which gives each rank "
           "its communicator";
  if (c->world_size() != a.world_size)
    return "this program was compiled for a mesh of " + n + " ranks, but runs with a communicator of " +
           std::to_string(c->world_size()) + " ranks";
  return "";
}

// The shared state of one process's ranks: what each rank publishes for the collective under way,
// and a barrier that counts arrivals by generation.
class HostCommunicatorGroup {
 public:
  explicit HostCommunicatorGroup(int world) : ins_(world), sizes_(world), world_(world) {}
  int world() const { return world_; }

  // Waits until every rank has arrived (or the group is aborted, a rank has returned without
  // arriving, or the wait times out).
  Status barrier(int rank) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t gen = generation_;
    if (aborted_.empty() && finished_ < 0 && ++arrived_ == world_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return ok_status();
    }
    lock.unlock();
    spin_briefly([&] { return generation_.load() != gen; });
    lock.lock();
    const double timeout = collective_timeout_seconds();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    while (generation_ == gen && aborted_.empty() && finished_ < 0) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == gen && aborted_.empty() &&
          finished_ < 0) {
        char seconds[32];
        std::snprintf(seconds, sizeof(seconds), "%g", timeout);
        aborted_ = "rank " + std::to_string(rank) + " waited " + seconds +
                   " s (TRIPY_COLLECTIVE_TIMEOUT) at a collective for the other ranks of " + std::to_string(world_) +
                   ", which did not arrive";
        cv_.notify_all();
      }
    }
    if (generation_ != gen) return ok_status();
    // A rank that returned never arrives: every barrier after its last one fails, for every rank.
    if (aborted_.empty())
      aborted_ = "rank " + std::to_string(finished_) + " of " + std::to_string(world_) +
                 " returned from its program without reaching this collective, which the other ranks wait at: "
                 "the ranks' programs do not run the same collectives";
    return Status(StatusCode::kUnavailable, aborted_);
  }

  void abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = why;
    cv_.notify_all();
  }

  void finish(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ < 0) finished_ = rank;
    cv_.notify_all();
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.clear();
    arrived_ = 0;
    finished_ = -1;
  }

  // Published by each rank between the two barriers of a collective.
  std::vector<const void*> ins_;
  std::vector<int64_t> sizes_;

 private:
  const int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::atomic<int64_t> generation_{0};  // read without the lock while a rank spins
  std::string aborted_;
  int finished_ = -1;  // the first rank whose program returned in this run, or -1
};

HostCommunicator::HostCommunicator(std::shared_ptr<HostCommunicatorGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

int HostCommunicator::world_size() const { return group_->world(); }
void HostCommunicator::abort(const std::string& why) { group_->abort(why); }
void HostCommunicator::reset() { group_->reset(); }
void HostCommunicator::finish() { group_->finish(rank_); }

// Every rank publishes its input and its size, then checks that every rank's is the same ("what:
// rank 0 sums 4 elements but rank 1 sums 8").
Status HostCommunicator::publish(const char* what, const char* verb, const void* in, int64_t size, const char* unit) {
  HostCommunicatorGroup& g = *group_;
  g.ins_[static_cast<size_t>(rank_)] = in;
  g.sizes_[static_cast<size_t>(rank_)] = size;
  TRIPY_RETURN_IF_ERROR(g.barrier(rank_));  // every rank's input is published
  for (int r = 0; r < g.world(); ++r)
    if (g.sizes_[static_cast<size_t>(r)] != size)
      return invalid_argument(std::string(what) + ": rank " + std::to_string(rank_) + " " + verb + " " +
                              std::to_string(size) + " " + unit + " but rank " + std::to_string(r) + " " + verb + " " +
                              std::to_string(g.sizes_[static_cast<size_t>(r)]));
  return ok_status();
}

Status HostCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype) {
  TRIPY_RETURN_IF_ERROR(publish("all_reduce", "sums", in, count, "elements"));
  TRIPY_RETURN_IF_ERROR(sum_into(group_->ins_, out, count, dtype));
  return group_->barrier(rank_);  // no rank reuses its input before every rank has read it
}

Status HostCommunicator::reduce_scatter(const void* in, void* out, int64_t outer, int64_t part, DType dtype) {
  const int world = group_->world();
  TRIPY_RETURN_IF_ERROR(publish("reduce_scatter", "sums", in, outer * part * world, "elements"));
  const int64_t bytes = dtype_size(dtype);
  std::vector<const void*> ins(static_cast<size_t>(world));
  for (int64_t o = 0; o < outer; ++o) {  // this rank's part of block o of every rank's input
    for (int r = 0; r < world; ++r)
      ins[static_cast<size_t>(r)] =
          static_cast<const uint8_t*>(group_->ins_[static_cast<size_t>(r)]) + ((o * world + rank_) * part) * bytes;
    TRIPY_RETURN_IF_ERROR(sum_into(ins, static_cast<uint8_t*>(out) + o * part * bytes, part, dtype));
  }
  return group_->barrier(rank_);
}

Status HostCommunicator::all_gather(const void* in, void* out, int64_t outer, int64_t chunk_bytes) {
  HostCommunicatorGroup& g = *group_;
  const int world = g.world();
  TRIPY_RETURN_IF_ERROR(publish("all_gather", "gathers", in, outer * chunk_bytes, "bytes"));
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < outer; ++b)
    for (int r = 0; r < world; ++r)
      std::memcpy(o + (b * world + r) * chunk_bytes,
                  static_cast<const uint8_t*>(g.ins_[static_cast<size_t>(r)]) + b * chunk_bytes,
                  static_cast<size_t>(chunk_bytes));
  return g.barrier(rank_);
}

std::vector<std::shared_ptr<Communicator>> make_host_communicators(int world_size) {
  auto group = std::make_shared<HostCommunicatorGroup>(world_size);
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < world_size; ++r) out.push_back(std::make_shared<HostCommunicator>(group, r));
  return out;
}

StatusOr<std::vector<std::vector<Tensor>>> run_ranks(const std::vector<const Executable*>& programs,
                                                     const std::vector<std::vector<Tensor>>& inputs,
                                                     const std::vector<std::shared_ptr<Communicator>>& communicators) {
  const size_t n = programs.size();
  if (inputs.size() != n || communicators.size() != n)
    return internal_error("run_ranks takes a program, inputs and a communicator per rank");
  for (auto& c : communicators) c->reset();
  std::vector<StatusOr<std::vector<Tensor>>> results(n, StatusOr<std::vector<Tensor>>(internal_error("not run")));
  std::mutex mu;
  int first_failure = -1;
  auto run_one = [&](size_t r) {
    CommunicatorScope scope(communicators[r].get());
    try {
      results[r] = programs[r]->run(inputs[r]);
    } catch (const std::exception& e) {
      results[r] = internal_error(std::string("the rank's run raised an exception: ") + e.what());
    } catch (...) {
      results[r] = internal_error("the rank's run raised an exception");
    }
    if (results[r].ok()) {
      communicators[r]->finish();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_failure < 0) first_failure = static_cast<int>(r);
    }
    communicators[r]->abort("rank " + std::to_string(communicators[r]->rank()) + " failed: " + results[r].status().message());
  };
  Latch others(n > 0 ? n - 1 : 0);
  for (size_t r = 1; r < n; ++r) RankThreads::run([&run_one, r] { run_one(r); }, others);
  if (n > 0) run_one(0);
  others.wait();
  if (first_failure >= 0) {
    // The rank that failed first is the cause; the others were aborted by it (or, after a timeout,
    // every rank failed at once and the first to notice names the others).
    const Status& st = results[static_cast<size_t>(first_failure)].status();
    const Communicator& c = *communicators[static_cast<size_t>(first_failure)];
    Status named(st.code(), "rank " + std::to_string(c.rank()) + " of " + std::to_string(c.world_size()) + ": " + st.message(),
                 st.where());
    for (const ErrorNote& note : st.notes()) named.note(note.text, note.where);
    return named;
  }
  std::vector<std::vector<Tensor>> out;
  for (auto& r : results) out.push_back(std::move(r).value());
  return out;
}

}  // namespace tripy::rt
