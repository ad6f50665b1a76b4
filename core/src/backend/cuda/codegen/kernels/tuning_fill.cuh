// The tuner's module (fill_module_source() in cuda_prelude.cc, after device_prelude.cuh; build time
// only): deterministic values for scratch operands, and the spin kernel that timed calls queue
// behind.

// Deterministic pseudo-random values in [-1, 1): GEMM timing must not run on zeros.
struct FillArgs { i64 ptr, n, seed; };
DEVI float hash_unit(u64 x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
extern "C" __global__ void tripy_fill_f32(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((float*)a.ptr)[i] = hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL));
}
extern "C" __global__ void tripy_fill_f16(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((unsigned short*)a.ptr)[i] = f2h(hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL)));
}
extern "C" __global__ void tripy_fill_bf16(const FillArgs a) {
  const i64 step = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step)
    ((unsigned short*)a.ptr)[i] = f2b(hash_unit((u64)(i + a.seed * 0x9e3779b97f4a7c15LL)));
}
// Spins for `ns` nanoseconds of the GPU's clock.
DEVI void spin_for(const i64 ns) {
  u64 start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while ((i64)(now - start) < ns);
}
// Holds the stream for `ns` nanoseconds, so the timed calls queued behind it run back to back:
// the timing then measures the GPU's work, not how fast the host enqueues it.
extern "C" __global__ void tripy_spin(const i64 ns) { spin_for(ns); }
// One block that lets the next kernel launch at once (sm_90 and later) and then holds its
// multiprocessor for `ns` nanoseconds: the kernel before a decode step's product as the product
// sees it (a norm or attention on a few multiprocessors, the product's launch and its reads before
// its wait overlapping it), so that a tactic is timed as it runs in the step.
extern "C" __global__ void tripy_lead(const i64 ns) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  spin_for(ns);
}
