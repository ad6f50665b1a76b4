// The GPU benchmark's Tripy side without the Python frontend: the same models as gpu_bench.py,
// built as Programs by hand and run through the CUDA backend (build = NVRTC + GEMM tuning, then
// load and run). Prints one JSON object per case; gpu_bench.py --native times torch on the same
// shapes and prints the table. Built by gpu_bench.py with g++ against libtripy_runtime.a.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/codegen/cuda_builder.h"
#include "backend/cuda/cuda_backend.h"
#include "runtime/backend.h"
#include "runtime/program.h"

using namespace tripy;
using namespace tripy::rt;

namespace {

uint16_t to_half(float f) {  // round to nearest even, finite inputs of modest size
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a < 0x38800000u) return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(std::fabs(f) * 16777216.0f)));
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

Tensor random_host(DType dt, std::vector<int64_t> shape, float scale, uint32_t seed) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = n(rng);
    if (dt == DType::kFloat16) static_cast<uint16_t*>(t.data())[i] = to_half(v);
    else static_cast<float*>(t.data())[i] = v;
  }
  return t;
}

// Slots are constants: a static-shape program, like tp.compile with static InputInfo.
struct Builder {
  Program p;
  std::vector<int64_t> slots;
  int64_t arena = 0;
  Slot slot(int64_t v) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i] == v) return static_cast<Slot>(i);
    slots.push_back(v);
    p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
    return static_cast<Slot>(slots.size() - 1);
  }
  std::vector<Slot> dims(const std::vector<int64_t>& s) {
    std::vector<Slot> out;
    for (int64_t d : s) out.push_back(slot(d));
    return out;
  }
  int32_t add(BufferDesc::Kind kind, int32_t index, DType dt, const std::vector<int64_t>& shape, int64_t offset = 0) {
    BufferDesc b;
    b.kind = kind;
    b.index = index;
    b.dtype = dt;
    b.shape = dims(shape);
    b.offset = offset;
    p.buffers.push_back(b);
    return static_cast<int32_t>(p.buffers.size() - 1);
  }
  int32_t input(DType dt, const std::vector<int64_t>& shape) {
    InputSpec s;
    s.name = "x" + std::to_string(p.inputs.size());
    s.dtype = dt;
    s.dim_min = s.dim_opt = s.dim_max = shape;
    s.dim_names.assign(shape.size(), "");
    p.inputs.push_back(s);
    std::vector<Slot> in_slots;
    for (size_t d = 0; d < shape.size(); ++d) in_slots.push_back(slot(shape[d]));
    p.input_shapes.push_back(in_slots);
    return add(BufferDesc::Kind::kInput, static_cast<int32_t>(p.inputs.size() - 1), dt, shape);
  }
  int32_t constant(Tensor t) {
    p.constants.push_back(t);
    return add(BufferDesc::Kind::kConstant, static_cast<int32_t>(p.constants.size() - 1), t.dtype(), t.shape());
  }
  int32_t temp(DType dt, const std::vector<int64_t>& shape) {
    int64_t bytes = dtype_size(dt);
    for (int64_t d : shape) bytes *= d;
    int32_t b = add(BufferDesc::Kind::kTemp, 0, dt, shape, arena);
    arena += (bytes + 255) / 256 * 256;
    p.arena_bytes = arena;
    return b;
  }
  int32_t output(DType dt, const std::vector<int64_t>& shape) {
    int32_t b = add(BufferDesc::Kind::kOutput, static_cast<int32_t>(p.outputs.size()), dt, shape);
    p.outputs.push_back(b);
    p.output_names.push_back("out");
    return b;
  }
  Kernel& kernel(KernelKind kind, const std::string& name, std::vector<int32_t> in, std::vector<int32_t> out) {
    Kernel k;
    k.kind = kind;
    k.name = name;
    k.inputs = std::move(in);
    k.outputs = std::move(out);
    p.kernels.push_back(std::move(k));
    return p.kernels.back();
  }
  void dot(int32_t x, int32_t w, int32_t b, int32_t out, Activation act) {
    kernel(KernelKind::kDot, "linear", {x, w, b}, {out}).dot = {false, true, true, act};
  }
};

Instr ins(EwOp op, DType dt, int32_t a = -1, int32_t b = -1, int32_t c = -1, double imm = 0) {
  Instr i;
  i.op = op;
  i.dtype = dt;
  i.a = a;
  i.b = b;
  i.c = c;
  i.imm = imm;
  return i;
}

Program mlp(int64_t d, int64_t hidden, int64_t batch, DType dt) {
  Builder b;
  int32_t x = b.input(dt, {batch, d});
  int32_t w1 = b.constant(random_host(dt, {hidden, d}, 1.0f / std::sqrt(float(d)), 1));
  int32_t b1 = b.constant(random_host(dt, {hidden}, 0.1f, 2));
  int32_t w2 = b.constant(random_host(dt, {d, hidden}, 1.0f / std::sqrt(float(hidden)), 3));
  int32_t b2 = b.constant(random_host(dt, {d}, 0.1f, 4));
  int32_t h = b.temp(dt, {batch, hidden}), o = b.output(dt, {batch, d});
  b.dot(x, w1, b1, h, Activation::kGelu);
  b.dot(h, w2, b2, o, Activation::kNone);
  return b.p;
}

// proj = x W^T + b; out = proj[:, :n] * gelu(proj[:, n:]) (split as two slices, then one fused kernel).
Program geglu(int64_t d, int64_t n, int64_t batch, DType dt) {
  Builder b;
  int32_t x = b.input(dt, {batch, d});
  int32_t w = b.constant(random_host(dt, {2 * n, d}, 1.0f / std::sqrt(float(d)), 5));
  int32_t bias = b.constant(random_host(dt, {2 * n}, 0.1f, 6));
  int32_t proj = b.temp(dt, {batch, 2 * n}), a = b.temp(dt, {batch, n}), g = b.temp(dt, {batch, n});
  int32_t o = b.output(dt, {batch, n});
  b.dot(x, w, bias, proj, Activation::kNone);
  Kernel& s0 = b.kernel(KernelKind::kSlice, "split0", {proj}, {a});
  s0.slice.starts = {b.slot(0), b.slot(0)};
  s0.slice.steps = {b.slot(1), b.slot(1)};
  Kernel& s1 = b.kernel(KernelKind::kSlice, "split1", {proj}, {g});
  s1.slice.starts = {b.slot(0), b.slot(n)};
  s1.slice.steps = {b.slot(1), b.slot(1)};
  Kernel& f = b.kernel(KernelKind::kFused, "fused_mul_gelu", {a, g}, {o});
  f.fused.domain = b.dims({batch, n});
  f.fused.reduce_from = 2;
  f.fused.input_axes = {{0, 1}, {0, 1}};
  f.fused.instrs = {ins(EwOp::kLoad, dt, 0), ins(EwOp::kLoad, dt, 1),
                    ins(EwOp::kConst, dt, -1, -1, -1, 0.7071067811865476), ins(EwOp::kMul, dt, 1, 2),
                    ins(EwOp::kErf, dt, 3), ins(EwOp::kConst, dt, -1, -1, -1, 1.0), ins(EwOp::kAdd, dt, 4, 5),
                    ins(EwOp::kMul, dt, 1, 6), ins(EwOp::kConst, dt, -1, -1, -1, 0.5), ins(EwOp::kMul, dt, 7, 8),
                    ins(EwOp::kMul, dt, 0, 9)};
  f.fused.output_regs = {10};
  return b.p;
}

// softmax(layernorm(x) * gamma + beta) over the last axis, as one fused kernel.
Program ln_softmax(int64_t rows, int64_t dim, DType dt) {
  Builder b;
  const DType F = dt;
  int32_t x = b.input(dt, {rows, dim});
  int32_t gamma = b.constant(random_host(dt, {dim}, 0.1f, 7)), beta = b.constant(random_host(dt, {dim}, 0.1f, 8));
  int32_t o = b.output(dt, {rows, dim});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_layernorm_softmax", {x, gamma, beta}, {o});
  k.fused.domain = b.dims({rows, dim});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}, {1}, {1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceSum, F, 0),
                    ins(EwOp::kConst, F, -1, -1, -1, 1.0 / double(dim)), ins(EwOp::kMul, F, 1, 2),
                    ins(EwOp::kSub, F, 0, 3), ins(EwOp::kMul, F, 4, 4), ins(EwOp::kReduceSum, F, 5),
                    ins(EwOp::kMul, F, 6, 2), ins(EwOp::kConst, F, -1, -1, -1, 1e-5), ins(EwOp::kAdd, F, 7, 8),
                    ins(EwOp::kRsqrt, F, 9), ins(EwOp::kMul, F, 4, 10), ins(EwOp::kLoad, F, 1),
                    ins(EwOp::kMul, F, 11, 12), ins(EwOp::kLoad, F, 2), ins(EwOp::kAdd, F, 13, 14),
                    ins(EwOp::kReduceMax, F, 15), ins(EwOp::kSub, F, 15, 16), ins(EwOp::kExp, F, 17),
                    ins(EwOp::kReduceSum, F, 18), ins(EwOp::kDiv, F, 18, 19)};
  k.fused.output_regs = {20};
  return b.p;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_case(const std::string& name, const Program& prog, double flops, double budget_s) {
  Backend* be = cuda_backend();
  auto t0 = std::chrono::steady_clock::now();
  auto art = cuda_builder()->build(prog, BuildOptions{3});
  if (!art.ok()) return std::printf("{\"name\": \"%s\", \"error\": \"build\"}\n", name.c_str()), 1;
  double build_s = seconds_since(t0);
  auto lp = be->load(std::make_shared<Program>(prog), *art);
  if (!lp.ok()) return std::printf("{\"name\": \"%s\", \"error\": \"load\"}\n", name.c_str()), 1;
  std::vector<Tensor> inputs;
  for (const InputSpec& in : prog.inputs) {
    auto d = be->copy_from_host(random_host(in.dtype, in.dim_opt, 1.0f, 9));
    if (!d.ok()) return 1;
    inputs.push_back(*d);
  }
  std::vector<int64_t> slots;
  prog.eval_shapes(inputs, slots);
  auto call = [&] { return (*lp)->run(inputs, slots).ok(); };
  for (int i = 0; i < 3; ++i)
    if (!call()) return std::printf("{\"name\": \"%s\", \"error\": \"run\"}\n", name.c_str()), 1;
  (void)cuda_synchronize(nullptr);
  t0 = std::chrono::steady_clock::now();
  call();
  (void)cuda_synchronize(nullptr);
  double one = std::max(seconds_since(t0), 1e-7);
  int number = std::max(1, int(0.02 / one)), repeats = std::max(5, std::min(50, int(budget_s / (one * number))));
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < number; ++i) call();
    (void)cuda_synchronize(nullptr);
    samples.push_back(seconds_since(t0) / number);
  }
  std::sort(samples.begin(), samples.end());
  std::printf("{\"name\": \"%s\", \"tripy_s\": %.9g, \"build_s\": %.4g, \"flops\": %.6g}\n", name.c_str(),
              samples[samples.size() / 2], build_s, flops);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!cuda_backend()->available()) {
    std::printf("{\"error\": \"%s\"}\n", cuda_device_description().c_str());
    return 1;
  }
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int64_t M = quick ? 1024 : 8192, D = quick ? 2048 : 4096;
  const double budget = quick ? 0.3 : 1.5;
  const DType H = DType::kFloat16, F = DType::kFloat32;
  int bad = 0;
  bad += run_case("quickstart_mlp", mlp(2, 8, 1, F), 2.0 * 1 * 2 * 8 * 2, budget);
  bad += run_case("quickstart_geglu", geglu(2, 1, 1, F), 2.0 * 1 * 2 * 2, budget);
  bad += run_case("llm_mlp", mlp(D, 4 * D, M, H), 2.0 * M * D * 4 * D * 2, budget);
  bad += run_case("llm_geglu", geglu(D, D, M, H), 2.0 * M * D * 2 * D, budget);
  bad += run_case("ln_softmax_big", ln_softmax(M, D, H), 0, budget);
  bad += run_case("ln_softmax_small", ln_softmax(64, 256, F), 0, budget);
  return bad;
}
