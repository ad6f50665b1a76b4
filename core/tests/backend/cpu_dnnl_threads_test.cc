// DnnlThreads: inside the scope OpenMP (oneDNN's runtime) runs on the CPU backend's thread count,
// whatever the host application set; afterwards the application's setting is back.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "backend/cpu/dnnl_threads.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

TEST(DnnlThreads, RunsOnTheBackendsThreadsAndRestoresTheCallers) {
  void* lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) GTEST_SKIP() << "no OpenMP runtime loaded (oneDNN absent or built on another runtime)";
  auto get = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
  auto set = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
  ASSERT_TRUE(get && set);
  const int ours = ThreadPool::instance().concurrency();
  // What torch does on import when it counts one physical core; 3 when we would use 1.
  const int theirs = ours == 1 ? 3 : 1;
  set(theirs);
  {
    const DnnlThreads scope;
    EXPECT_EQ(get(), ours);
  }
  EXPECT_EQ(get(), theirs);
  set(ours);
  {
    const DnnlThreads scope;
    EXPECT_EQ(get(), ours);
  }
  EXPECT_EQ(get(), ours);
  dlclose(lib);
}

}  // namespace
}  // namespace tripy::cpu
