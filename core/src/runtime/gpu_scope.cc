// A thread's GPU (see gpu_scope.h).
#include "runtime/gpu_scope.h"

namespace tripy::rt {
namespace {
thread_local int t_gpu = 0;
}  // namespace

int current_gpu() { return t_gpu; }

GpuScope::GpuScope(int index) : previous_(t_gpu) { t_gpu = index; }
GpuScope::~GpuScope() { t_gpu = previous_; }

}  // namespace tripy::rt
