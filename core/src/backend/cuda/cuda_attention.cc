// kAttention on the GPU, host side: the launch for one set of sizes (argument words, grid, split,
// flash or generic), and the facts about a kernel that the compiler side's choice of variant shares
// (codegen/cuda_attention_generate.cc).
#include "backend/cuda/cuda_attention.h"

#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_launch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tripy::rt::cuda {

namespace {

// A size fixed at compile time (a constant slot), or -1.
int64_t static_size(const Program& p, Slot s) {
  if (s < 0 || static_cast<size_t>(s) >= p.shape_program.size()) return -1;
  const ShapeInstr& in = p.shape_program[static_cast<size_t>(s)];
  return in.op == ShapeInstr::Op::kConst ? in.a : -1;
}

}  // namespace

int64_t static_head(const Program& p, const Kernel& k, int operand, int32_t buffer) {
  const BufferDesc& b = p.buffers[static_cast<size_t>(buffer)];
  const int d = k.attention.perms[static_cast<size_t>(operand)][3];
  return static_cast<size_t>(d) < b.shape.size() ? static_size(p, b.shape[static_cast<size_t>(d)]) : -1;
}

namespace {

// Word indices of AttnArgs (codegen/kernels/attention.cuh).
enum Word : int {
  kPtrQ = 0, kPtrK, kPtrV, kPtrMask, kPtrOut,
  kB, kHq, kHkv, kL, kS, kD, kDv,
  kStrides,                  // 5 operands x 4 dims
  kScaleLog2 = kStrides + 20,
  kBlocks, kChunks, kVec,
  kSplits, kSplitChunk, kPtrWork, kPtrCounters, kSplitVecV, kSplitMinKeys,
  kPtrAppK, kPtrAppV, kPtrAppStart, kApp64, kAppRows, kAppKs, kAppVs = kAppKs + 4,
  kAppErr = kAppVs + 4, kAppTag, kAppClaim,
  kWords
};

// Split-KV: heads up to kSplitHeadMax (cuda_attention.h), chunks of at least kMinKeys keys in
// multiples of 32 (also the kernel's rule under a causal offset), at most kSplitMax chunks (the
// merge's weights fit in shared memory), and about kSplitWaves blocks per SM.
constexpr int64_t kMinKeys = 256, kSplitMax = 128, kSplitWaves = 2;

}  // namespace

// kMinKeys, or TRIPY_ATTENTION_SPLIT_MIN_KEYS (a multiple of 32) to compare others.
int64_t split_min_keys() {
  const char* v = std::getenv("TRIPY_ATTENTION_SPLIT_MIN_KEYS");
  const int64_t n = v ? std::atoll(v) : 0;
  return n >= 32 && n % 32 == 0 ? n : kMinKeys;
}

unsigned attention_split_tc_threads(int64_t groups, int sm_count) { return 4 * groups <= sm_count ? 256 : 128; }

bool split_enabled() {
  const char* v = std::getenv("TRIPY_ATTENTION_SPLIT");
  return v == nullptr || std::atoi(v) != 0;
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The query length's and the keys' largest values and the query rows per kv head ((Hq / Hkv) * L)
// at the inputs' smallest and largest sizes.
struct QueryExtent {
  int64_t rows_lo = std::numeric_limits<int64_t>::max(), rows_hi = 0, length_hi = 0, keys_hi = 0;
};

QueryExtent query_extent(const Program& p, const Kernel& k) {
  QueryExtent e;
  for (bool at_max : {false, true}) {
    std::vector<Tensor> inputs;
    for (const InputSpec& in : p.inputs)
      inputs.push_back(in.kind == InputSpec::Kind::kShapeValue
                           ? Tensor::host_int64(at_max ? in.value_max : in.value_min)
                           : Tensor::borrow(nullptr, in.dtype, at_max ? in.dim_max : in.dim_min, Device{}, nullptr));
    std::vector<int64_t> slots;
    p.eval_shapes(inputs, slots);
    const AttentionOperand q = attention_operand(k.attention, AttentionAttrs::kQ, p.buffer_shape(k.inputs[0], slots));
    const AttentionOperand kv = attention_operand(k.attention, AttentionAttrs::kK, p.buffer_shape(k.inputs[1], slots));
    const int64_t rows = q.size[1] / std::max<int64_t>(kv.size[1], 1) * q.size[2];
    e.rows_lo = std::min(e.rows_lo, rows);
    e.rows_hi = std::max(e.rows_hi, rows);
    e.length_hi = std::max(e.length_hi, q.size[2]);
    e.keys_hi = std::max(e.keys_hi, kv.size[2]);
  }
  return e;
}
}  // namespace

// Which split kernels a module needs. (Sizes outside this range still run: the plan falls back to
// the kernels the module has.)
std::pair<int64_t, int64_t> split_row_range(const Program& p, const Kernel& k) {
  const QueryExtent e = query_extent(p, k);
  return {e.rows_lo, e.rows_hi};
}

int64_t attention_keys_hi(const Program& p, const Kernel& k) { return query_extent(p, k).keys_hi; }

int64_t attention_rows_at_opt(const Program& p, const Kernel& k) {
  std::vector<int64_t> slots;
  p.eval_shapes(p.opt_inputs(Device{Device::Kind::kGpu, 0}), slots);
  const AttentionOperand q = attention_operand(k.attention, AttentionAttrs::kQ, p.buffer_shape(k.inputs[0], slots));
  const AttentionOperand kv = attention_operand(k.attention, AttentionAttrs::kK, p.buffer_shape(k.inputs[1], slots));
  return q.size[1] / std::max<int64_t>(kv.size[1], 1) * q.size[2];
}

// Query rows per flash CTA are 64 * WM (4 warps of 16 * WM rows): 32 rows per warp reuse each K/V
// fragment twice at head size 64 (where the queries are many enough to fill the GPU anyway); at
// 128 the accumulators of 32 rows would not fit in registers.
int flash_wm(const Program& p, const Kernel& k, int64_t head) {
  return head == 64 && query_extent(p, k).length_hi > kFlashShortQueries ? 2 : 1;
}

int64_t attention_split_capacity(const Program& program, const Kernel& k) {
  const int64_t rows_hi = split_row_range(program, k).second;
  int64_t capacity = 2;
  while (capacity < rows_hi && capacity < kAttentionSplitRows) capacity *= 2;
  return capacity;
}

StatusOr<AttentionLaunch> plan_attention_words(const Program& p, const Kernel& k, const AttentionFunctions& fns,
                                               const std::vector<int64_t>& slots, int sm_count) {
  const AttentionAttrs& a = k.attention;
  const bool masked = a.mask != MaskKind::kNone;
  std::vector<std::vector<int64_t>> shapes;
  for (int32_t b : k.inputs) shapes.push_back(p.buffer_shape(b, slots));
  shapes.push_back(p.buffer_shape(k.outputs[0], slots));
  const std::string why = attention_shape_error(a, shapes);
  if (!why.empty()) return kernel_failure(p, k, "attention " + why);
  std::vector<AttentionOperand> ops;  // q, k, v, mask, out
  const int order[] = {AttentionAttrs::kQ, AttentionAttrs::kK, AttentionAttrs::kV, AttentionAttrs::kMask};
  for (size_t i = 0; i < k.inputs.size(); ++i) ops.push_back(attention_operand(a, order[i], shapes[i]));
  if (!masked) ops.push_back(AttentionOperand{});
  ops.push_back(attention_operand(a, AttentionAttrs::kOut, shapes.back()));
  const AttentionOperand &q = ops[0], &kk = ops[1], &v = ops[2], &o = ops[4];
  const int64_t B = q.size[0], Hq = q.size[1], L = q.size[2], D = q.size[3], S = kk.size[2], Dv = v.size[3];
  AttentionLaunch l;
  if (B * Hq * L * Dv == 0) return l;
  l.words.assign(kWords, 0);
  const int64_t sizes[] = {B, Hq, kk.size[1], L, S, D, Dv};
  for (int i = 0; i < 7; ++i) l.words[kB + i] = sizes[i];
  for (int x = 0; x < 5; ++x)
    for (int d = 0; d < 4; ++d)
      // A mask dim of size 1 broadcasts: stride 0.
      l.words[kStrides + x * 4 + d] = x == 3 && ops[3].size[d] == 1 ? 0 : ops[static_cast<size_t>(x)].stride[d];
  const float scale_log2 = static_cast<float>(a.scale * 1.4426950408889634);
  int32_t bits;
  std::memcpy(&bits, &scale_log2, sizeof(bits));
  l.words[kScaleLog2] = bits;

  const int64_t Hkv = kk.size[1], rows = Hq / std::max<int64_t>(Hkv, 1) * L;
  const int64_t esize = dtype_size(p.buffers[static_cast<size_t>(k.inputs[0])].dtype);
  const int64_t ve = 16 / esize;  // elements per 16-byte piece
  // A bool mask has its own element size (a loaded file may give the mask a head window too).
  const int64_t mask_size = masked ? dtype_size(p.buffers[static_cast<size_t>(k.inputs[3])].dtype) : esize;
  for (int x = 0; x < 5; ++x)
    l.byte_offsets[static_cast<size_t>(x)] = ops[static_cast<size_t>(x)].offset * (x == 3 ? mask_size : esize);
  int64_t blocks;
  const bool one_row = rows <= 1 && fns.split1;
  CUfunc_st* split_fn = one_row                                                 ? fns.split1
                        : fns.split16 && rows <= attention_split_capacity(p, k) ? fns.split16
                                                                                : nullptr;
  if (split_fn && split_enabled() && S > 0 && D <= kSplitHeadMax && Dv <= kSplitHeadMax) {
    // Enough chunks for about kSplitWaves blocks per SM over all (batch, kv head) groups, none
    // shorter than kSplitMinKeys keys. Causal keys past the last query row are never visible.
    l.path = AttentionLaunch::Path::kSplit;
    const int64_t groups = B * Hkv, keys = a.causal ? std::min(S, L) : S;
    l.split_fn = split_fn;
    int64_t splits = ceil_div(kSplitWaves * std::max(sm_count, 1), groups);
    const int64_t min_keys = split_min_keys();
    splits = std::clamp<int64_t>(splits, 1, std::min(kSplitMax, ceil_div(keys, min_keys)));
    const int64_t chunk = ceil_div(ceil_div(keys, splits), 32) * 32;
    splits = ceil_div(keys, chunk);
    l.words[kSplits] = splits;
    l.words[kSplitChunk] = chunk;
    l.words[kSplitMinKeys] = min_keys;
    l.split_rows = rows;
    l.splits = splits;
    l.workspace_bytes = groups * splits * rows * (Dv + 2) * 4;
    l.counters = groups;
    blocks = groups * splits;
    // K rows read in 16-byte pieces: unit stride along the head, rows starting 16 bytes apart.
    bool vec = kk.stride[3] == 1 && D % ve == 0 && kk.offset % ve == 0;
    for (int d = 0; d < 3; ++d) vec = vec && kk.stride[d] % ve == 0;
    if (vec) l.vec_word = kVec;
    // V rows likewise (split1 reads them in pieces; the addresses are checked with K's).
    bool vvec = v.stride[3] == 1 && Dv % ve == 0 && v.offset % ve == 0;
    for (int d = 0; d < 3; ++d) vvec = vvec && v.stride[d] % ve == 0;
    l.words[kSplitVecV] = vvec ? 1 : 0;
    // The tensor-core form where K and V rows allow it and the module has it (its head, 16-bit).
    if (vec && vvec && D == Dv && (D == 64 || D == 128))
      l.split_tc_fn = one_row ? fns.split1_tc : fns.split16_tc;
    l.split_tc_threads = attention_split_tc_threads(groups, sm_count);
  } else {
    // The flash kernel reads rows of 8-element (16-byte) chunks: unit stride along the head and
    // every other stride (and a head window's start) a multiple of 8 elements.
    l.flash = fns.flash != nullptr && D == Dv && (D == 64 || D == 128);
    for (const AttentionOperand* x : {&q, &kk, &v, &o}) {
      l.flash = l.flash && x->stride[3] == 1 && x->offset % 8 == 0;
      for (int d = 0; d < 3; ++d) l.flash = l.flash && x->stride[d] % 8 == 0;
    }
    if (l.flash) {
      l.path = AttentionLaunch::Path::kFlash;
      const int64_t bm = 64 * flash_wm(p, k, D);
      l.words[kBlocks] = (L + bm - 1) / bm;
      blocks = l.words[kBlocks] * B * Hq;
      l.vec_word = kVec;  // cp.async needs 16-byte aligned addresses; else plain loads
    } else {
      l.words[kBlocks] = (L + 3) / 4;
      l.words[kChunks] = (Dv + 255) / 256;
      blocks = l.words[kBlocks] * l.words[kChunks] * B * Hq;
    }
  }
  if (l.path != AttentionLaunch::Path::kSplit) {
    AttentionCudnnProblem c;
    c.dtype = p.buffers[static_cast<size_t>(k.inputs[0])].dtype;
    c.causal = a.causal;
    c.scale = static_cast<float>(a.scale);
    c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.L = L, c.S = S, c.D = D, c.Dv = Dv;
    const AttentionOperand* x4[] = {&q, &kk, &v, &o};
    for (size_t x = 0; x < 4; ++x)
      for (size_t d = 0; d < 4; ++d) c.strides[x][d] = x4[x]->stride[d];
    bool aligned = true;
    for (int x : {0, 1, 2, 4}) aligned = aligned && l.byte_offsets[static_cast<size_t>(x)] % 16 == 0;
    if (aligned && attention_cudnn_wanted(c, a.mask, nullptr)) l.cudnn = c;
  }
  if (blocks > std::numeric_limits<int32_t>::max())
    return kernel_failure(p, k, "attention over " + std::to_string(blocks) + " blocks exceeds the GPU's grid",
                          StatusCode::kResourceExhausted);
  l.grid = static_cast<unsigned>(blocks);
  return l;
}

StatusOr<std::vector<Launch>> plan_attention(const Program& p, const Kernel& k, const AttentionFunctions& fns,
                                             const std::vector<int64_t>& slots, int sm_count) {
  TRIPY_ASSIGN_OR_RETURN(AttentionLaunch a, plan_attention_words(p, k, fns, slots, sm_count));
  return attention_launches(p, k, fns, std::move(a));
}

StatusOr<std::vector<Launch>> attention_launches(const Program& p, const Kernel& k, const AttentionFunctions& fns,
                                                 AttentionLaunch a) {
  if (a.grid == 0) return std::vector<Launch>{};
  Launch l;
  switch (a.path) {
    case AttentionLaunch::Path::kSplit:
      l.fn = a.split_fn;
      l.workspace_word = kPtrWork;
      l.workspace_bytes = a.workspace_bytes;
      l.counters_word = kPtrCounters;
      l.counters = a.counters;
      break;
    case AttentionLaunch::Path::kFlash: l.fn = fns.flash; break;
    case AttentionLaunch::Path::kGeneric: l.fn = fns.generic; break;
  }
  if (l.fn == nullptr) {
    const char* path = a.path == AttentionLaunch::Path::kGeneric ? "generic" : a.path == AttentionLaunch::Path::kFlash ? "flash" : "split-KV";
    return kernel_failure(p, k, std::string("the executable has no ") + path + " attention kernel for these sizes");
  }
  l.overlaps = true;
  l.words = std::move(a.words);
  const auto& off = a.byte_offsets;
  l.ptrs = {{kPtrQ, k.inputs[0], off[AttentionAttrs::kQ]},
            {kPtrK, k.inputs[1], off[AttentionAttrs::kK]},
            {kPtrV, k.inputs[2], off[AttentionAttrs::kV]},
            {kPtrOut, k.outputs[0], off[AttentionAttrs::kOut]}};
  // A causal offset is one element, read alone: its address need not keep the 16-byte loads of
  // q, k and v off (a step's position is often a small temporary at any offset).
  if (k.attention.mask != MaskKind::kNone)
    l.ptrs.push_back({kPtrMask, k.inputs[3], off[AttentionAttrs::kMask], k.attention.mask == MaskKind::kCausalOffset});
  l.block_x = 128;
  if (a.split_tc_fn != nullptr) {
    l.vector_fn = a.split_tc_fn;
    l.vector_block_x = a.split_tc_threads;
  }
  l.vector_word = a.vec_word;
  l.grid = l.scalar_grid = l.vector_grid = a.grid;
  return std::vector<Launch>{std::move(l)};
}

// The module's entry points: the flash kernel exists only for the head sizes it serves, the
// generic one only where a run may take it; executables saved before the split kernels existed
// lack them.
Status load_attention(const Program& p, const Kernel& k, CUmodule module, const std::string& function,
                      KernelCode& code) {
  AttentionFunctions& f = code.attention;
  auto optional = [&](CUfunction* fn, const char* name) {
    if (api().cuModuleGetFunction(fn, module, name) != CUDA_SUCCESS) *fn = nullptr;
  };
  optional(&f.generic, kAttentionGeneric);
  optional(&f.flash, kAttentionFlash);
  optional(&f.split1, kAttentionSplit1);
  optional(&f.split16, kAttentionSplit16);
  optional(&f.split1_tc, kAttentionSplit1Tc);
  optional(&f.split16_tc, kAttentionSplit16Tc);
  return ok_status();
}

// cuDNN's fused attention where the launch offers it (long sequences) and cuDNN makes a plan,
// else (and as the fallback) our kernel.
StatusOr<bool> plan_attention_step(PlanContext& c, const Kernel& k, Step& step) {
  const Program& p = c.program;
  const AttentionFunctions& fns = c.code[static_cast<size_t>(step.kernel)].attention;
  TRIPY_ASSIGN_OR_RETURN(AttentionLaunch a, plan_attention_words(p, k, fns, c.slots, c.sm_count));
  const std::optional<AttentionCudnnProblem> cudnn = a.cudnn;
  const auto offsets = a.byte_offsets;
  TRIPY_ASSIGN_OR_RETURN(step.launches, attention_launches(p, k, fns, std::move(a)));
  for (const Launch& x : step.launches) {
    c.workspace = std::max(c.workspace, static_cast<size_t>(x.workspace_bytes));
    c.counters = std::max(c.counters, x.counters);
  }
  if (!cudnn || step.launches.empty()) return true;
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = AttentionCudnnPlan::create(*cudnn);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kResourceExhausted) return plan.status();
    if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN attention declined (%s); using our kernel\n",
                                         k.name.c_str(), plan.status().message().c_str());
    return true;
  }
  if (debug_level() >= 1)
    std::fprintf(stderr, "tripy: %s: attention through cuDNN (plan %.1f ms, workspace %zu bytes)\n", k.name.c_str(),
                 ms_since(t0), plan.value()->workspace_bytes());
  c.workspace = std::max(c.workspace, plan.value()->workspace_bytes());
  step.attention = std::move(plan.value());
  step.attention_offsets = offsets;
  step.attention_fallback = std::move(step.launches);
  step.launches.clear();
  return true;
}

Status run_attention_step(Step& step, const Kernel& k, const RunContext& c) {
  if (!step.attention) return ok_status();  // our kernel: step.launches
  auto at = [&](int operand, int32_t buffer) {
    return c.base[buffer] + static_cast<CUdeviceptr>(step.attention_offsets[static_cast<size_t>(operand)]);
  };
  Status st = step.attention->run(at(AttentionAttrs::kQ, k.inputs[0]), at(AttentionAttrs::kK, k.inputs[1]),
                                  at(AttentionAttrs::kV, k.inputs[2]), at(AttentionAttrs::kOut, k.outputs[0]),
                                  c.workspace, c.stream);
  if (st.ok() || st.code() == StatusCode::kResourceExhausted) return st;
  // cuDNN refused at run time (an address's alignment): our kernel from now on.
  if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN attention failed (%s); using our kernel\n",
                                       k.name.c_str(), st.message().c_str());
  step.attention.reset();
  step.launches = std::move(step.attention_fallback);
  return ok_status();
}

namespace {

// TRIPY_ATTENTION_APPEND=0 keeps a step's cache writes as launches of their own (to compare).
bool append_enabled() {
  const char* v = std::getenv("TRIPY_ATTENTION_APPEND");
  return v == nullptr || std::atoi(v) != 0;
}

// How many steps before an attention its cache writes may be (GPT-2's: the k write, v's slice,
// the v write).
constexpr size_t kFoldReach = 4;

// Where update launch `u` writes the rows [start, start + rows) of attention operand `x` (k or v:
// logical (B, Hkv, S, D) at the launch's strides), the element strides of those rows in the
// update's source (false where it does not): the cache's heads lie inside its rows (a Llama cache
// (B, S, Hkv, D) written along S: a row element's offset in the source's row is its offset in the
// cache's) or before its axis (GPT-2's (B, H, S, D): the update's outer rows are (batch, head)
// pairs). `vec`: the attention reads 16-byte rows, so the source's must be too (`ve` elements).
bool source_strides(const Launch& u, const Launch& l, int x, int64_t depth, bool vec, int64_t ve, int64_t* src) {
  const int64_t* st = &l.words[kStrides + x * 4];
  const int64_t outer = u.words[kUpOuter], inner = u.words[kUpInner], dim = u.words[kUpDim];
  const int64_t rows = u.words[kUpRows], row = u.words[kUpSrcRow], B = l.words[kB], Hkv = l.words[kHkv];
  if (dim != l.words[kS] || st[2] != inner || st[3] < 0 || (vec && row % ve != 0)) return false;
  if (outer == B && st[0] == dim * inner && st[1] >= 0 && (Hkv - 1) * st[1] + (depth - 1) * st[3] < inner) {
    src[0] = rows * row, src[1] = st[1];
  } else if (outer == B * Hkv && st[0] == Hkv * dim * inner && st[1] == dim * inner && (depth - 1) * st[3] < inner) {
    src[0] = Hkv * rows * row, src[1] = rows * row;
  } else {
    return false;
  }
  src[2] = row, src[3] = st[3];
  return true;
}

// Whether buffers `a` and `b` may be the same memory: one root, an output in place of its donated
// input, or temporaries whose ranges of the arena meet (a source whose last reader was its write
// may share the attention's output's).
bool may_share_memory(const Program& p, int32_t a, int32_t b) {
  const BufferDesc& x = p.buffers[static_cast<size_t>(p.alias_root(a))];
  const BufferDesc& y = p.buffers[static_cast<size_t>(p.alias_root(b))];
  using K = BufferDesc::Kind;
  if (&x == &y) return true;
  if (x.kind == K::kTemp && y.kind == K::kTemp)
    return x.offset < y.offset + y.max_bytes && y.offset < x.offset + x.max_bytes;
  auto donated = [](const BufferDesc& in, const BufferDesc& out) {
    return in.kind == K::kInput && out.kind == K::kOutput && out.donor == in.index;
  };
  return donated(x, y) || donated(y, x);
}

}  // namespace

void fold_cache_writes(const Program& p, const std::vector<KernelCode>& code, std::vector<Step>& steps) {
  if (!append_enabled()) return;
  auto root = [&](int32_t b) { return p.alias_root(b); };
  for (size_t ia = 0; ia < steps.size(); ++ia) {
    Step& at = steps[ia];
    const Kernel& ka = p.kernels[static_cast<size_t>(at.kernel)];
    if (ka.kind != KernelKind::kAttention || at.attention || at.launches.size() != 1) continue;
    Launch& l = at.launches[0];
    const AttentionFunctions& f = code[static_cast<size_t>(at.kernel)].attention;
    if (l.fn == nullptr || (l.fn != f.split1 && l.fn != f.split16) || l.words.size() != kWords) continue;
    const int32_t caches[2] = {root(ka.inputs[1]), root(ka.inputs[2])};
    if (caches[0] == caches[1]) continue;
    // The two writes, in either order, among the few steps before: k's cache's and v's. The steps
    // between a write and the attention (GPT-2's slice of v) are checked below.
    const Launch* w[2] = {nullptr, nullptr};
    Step* ws[2] = {nullptr, nullptr};
    size_t at_step[2] = {0, 0};
    for (size_t back = 1; back <= kFoldReach && back <= ia && !(w[0] && w[1]); ++back) {
      Step& s = steps[ia - back];
      const Kernel& ku = p.kernels[static_cast<size_t>(s.kernel)];
      const int32_t out = ku.outputs.empty() ? -1 : root(ku.outputs[0]);
      const int x = out == caches[0] ? 0 : out == caches[1] ? 1 : -1;
      if (ku.kind != KernelKind::kUpdateSlice || x < 0) continue;
      if (w[x] || s.launches.size() != 1 || !update_in_place(p, ku)) break;
      const Launch& u = s.launches[0];
      if (u.words.size() != kUpWords || u.ptrs.size() != 3 || u.ptrs[0].byte_offset != 0) break;
      w[x] = &u;
      ws[x] = &s;
      at_step[x] = ia - back;
    }
    if (!w[0] || !w[1]) continue;
    const Launch &uk = *w[0], &uv = *w[1];
    // One start and one count of rows for both (one check of the start, as each write's own).
    if (uk.words[kUpRows] != uv.words[kUpRows] || uk.words[kUpRows] < 1 ||
        root(uk.ptrs[2].buffer) != root(uv.ptrs[2].buffer) || uk.ptrs[2].byte_offset != uv.ptrs[2].byte_offset)
      continue;
    // A write's source is read until the attention ends: no step after the write, the attention's
    // output included, may write its memory (or the start's); and no step between the first write
    // and the attention may touch the caches (it would see rows not yet written).
    bool clear = !may_share_memory(p, uk.ptrs[1].buffer, ka.outputs[0]) &&
                 !may_share_memory(p, uv.ptrs[1].buffer, ka.outputs[0]);
    for (size_t j = std::min(at_step[0], at_step[1]) + 1; clear && j < ia; ++j) {
      if (j == at_step[0] || j == at_step[1]) continue;
      const Kernel& k = p.kernels[static_cast<size_t>(steps[j].kernel)];
      for (int32_t b : k.inputs) clear = clear && root(b) != caches[0] && root(b) != caches[1];
      for (int32_t b : k.outputs) {
        clear = clear && root(b) != caches[0] && root(b) != caches[1] && !may_share_memory(p, uk.ptrs[2].buffer, b);
        for (int x = 0; x < 2; ++x)
          clear = clear && !(j > at_step[x] && may_share_memory(p, w[x]->ptrs[1].buffer, b));
      }
    }
    if (!clear) continue;
    if (l.ptrs[kPtrK].byte_offset != 0 || l.ptrs[kPtrV].byte_offset != 0) continue;  // head windows of a cache
    const int64_t es = dtype_size(p.buffers[static_cast<size_t>(ka.inputs[1])].dtype), ve = 16 / es;
    const bool vec = l.vector_word >= 0;
    int64_t ks[4], vs[4];
    if (!source_strides(uk, l, 1, l.words[kD], vec, ve, ks) || !source_strides(uv, l, 2, l.words[kDv], vec, ve, vs))
      continue;
    l.words[kAppRows] = uk.words[kUpRows];
    l.words[kApp64] = p.buffers[static_cast<size_t>(uk.ptrs[2].buffer)].dtype == DType::kInt64 ? 1 : 0;
    std::copy(ks, ks + 4, &l.words[kAppKs]);
    std::copy(vs, vs + 4, &l.words[kAppVs]);
    for (int x = 0; x < 2; ++x) {
      const Launch& u = *w[x];
      const int64_t at = u.ptrs[1].byte_offset + u.words[kUpRowOffset] * es;
      l.ptrs.push_back({x == 0 ? kPtrAppK : kPtrAppV, u.ptrs[1].buffer, at});
    }
    l.ptrs.push_back({kPtrAppStart, uk.ptrs[2].buffer, uk.ptrs[2].byte_offset, /*any_alignment=*/true});
    for (int d = 0; d < 3; ++d) l.words[kAppErr + d] = uk.words[kGatherErrorWord + d];
    ws[0]->launches.clear();
    ws[1]->launches.clear();
    if (debug_level() >= 1)
      std::fprintf(stderr, "tripy: %s: writes '%s' and '%s' folded in\n", ka.name.c_str(),
                   p.kernels[static_cast<size_t>(ws[0]->kernel)].name.c_str(),
                   p.kernels[static_cast<size_t>(ws[1]->kernel)].name.c_str());
  }
}

}  // namespace tripy::rt::cuda
