// Which GPU a thread's work goes to. A process drives gpu:0 unless told otherwise: a sharded
// executable's ranks on several GPUs of this process (one thread each) and each copy to or from
// gpu:N set a GpuScope for the work they do, and the GPU backend reads current_gpu() wherever no
// tensor or program says which (new tensors, streams, loads).
#pragma once

namespace tripy::rt {

// This thread's GPU index (gpu:N's N): the innermost GpuScope's, else 0.
int current_gpu();

class GpuScope {
 public:
  explicit GpuScope(int index);
  ~GpuScope();
  GpuScope(const GpuScope&) = delete;
  GpuScope& operator=(const GpuScope&) = delete;

 private:
  int previous_;
};

}  // namespace tripy::rt
