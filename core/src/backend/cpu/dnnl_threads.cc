#include "backend/cpu/dnnl_threads.h"

#include <dlfcn.h>

#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

// The OpenMP runtime that oneDNN loaded, found without linking it ourselves (absent: a oneDNN
// built on another runtime, whose threads this scope leaves alone).
struct OpenMp {
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
  OpenMp() {
    void* lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return;
    get_max_threads = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
    set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
    if (!get_max_threads || !set_num_threads) get_max_threads = nullptr;
  }
};

const OpenMp& openmp() {
  static const OpenMp api;
  return api;
}

}  // namespace

DnnlThreads::DnnlThreads(int threads) {
  ThreadPool::instance().quiet();  // the pool's spinning workers leave the cores to OpenMP's
  const OpenMp& omp = openmp();
  if (!omp.get_max_threads) return;
  const int want = threads > 0 ? threads : ThreadPool::instance().concurrency();
  const int have = omp.get_max_threads();
  if (have == want) return;
  saved_ = have;
  omp.set_num_threads(want);
}

DnnlThreads::~DnnlThreads() {
  if (saved_ > 0) openmp().set_num_threads(saved_);
}

}  // namespace tripy::cpu
