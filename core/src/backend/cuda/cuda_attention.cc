// kAttention on the GPU, host side: which variant a kernel compiles to (its macros before the
// shared body), and the launch for one set of sizes (argument words, grid, flash or generic).
#include "backend/cuda/cuda_attention.h"

#include "backend/cuda/cuda_launch.h"

#include <cstring>
#include <limits>

namespace tripy::rt::cuda {
namespace {

// Query rows per flash CTA are 64 * WM (4 warps of 16 * WM rows): 32 rows per warp reuse each K/V
// fragment twice at head size 64; at 128 the accumulators of 32 rows would not fit in registers.
int flash_wm(int64_t head) { return head == 64 ? 2 : 1; }

// A size fixed at compile time (a constant slot), or -1.
int64_t static_size(const Program& p, Slot s) {
  if (s < 0 || static_cast<size_t>(s) >= p.shape_program.size()) return -1;
  const ShapeInstr& in = p.shape_program[static_cast<size_t>(s)];
  return in.op == ShapeInstr::Op::kConst ? in.a : -1;
}

int64_t static_head(const Program& p, const Kernel& k, int operand, int32_t buffer) {
  const BufferDesc& b = p.buffers[static_cast<size_t>(buffer)];
  const int d = k.attention.perms[static_cast<size_t>(operand)][3];
  return static_cast<size_t>(d) < b.shape.size() ? static_size(p, b.shape[static_cast<size_t>(d)]) : -1;
}

// Word indices of AttnArgs (cuda_attention_source.cc).
enum Word : int {
  kPtrQ = 0, kPtrK, kPtrV, kPtrMask, kPtrOut,
  kB, kHq, kHkv, kL, kS, kD, kDv,
  kStrides,                  // 5 operands x 4 dims
  kScaleLog2 = kStrides + 20,
  kBlocks, kChunks, kVec, kWords
};

}  // namespace

StatusOr<GeneratedKernel> generate_attention(const Program& program, const Kernel& k) {
  if (k.inputs.size() < 3 || k.outputs.size() != 1) return internal_error("attention kernel '" + k.name + "' has the wrong arity");
  const DType t = program.buffers[static_cast<size_t>(k.inputs[0])].dtype;
  const int64_t d = static_head(program, k, AttentionAttrs::kQ, k.inputs[0]);
  const int64_t dv = static_head(program, k, AttentionAttrs::kV, k.inputs[2]);
  const bool narrow = t == DType::kFloat16 || t == DType::kBFloat16;
  const bool flash = narrow && d == dv && (d == 64 || d == 128);
  std::string m;
  auto def = [&](const std::string& name, const std::string& value) { m += "#define " + name + " " + value + "\n"; };
  if (t == DType::kFloat32) {
    def("ST", "float");
    def("LOAD_T(x)", "(x)");
    def("STORE_T(x)", "(x)");
  } else if (narrow) {
    const bool bf = t == DType::kBFloat16;
    def("ST", "unsigned short");
    def("LOAD_T(x)", bf ? "b2f(x)" : "h2f(x)");
    def("STORE_T(x)", bf ? "f2b(x)" : "f2h(x)");
    def("MMA_T", bf ? "\"bf16\"" : "\"f16\"");
  } else {
    return internal_error("attention kernel '" + k.name + "' has dtype " + std::string(dtype_name(t)));
  }
  def("CAUSAL", k.attention.causal ? "1" : "0");
  def("SCALE_POS", k.attention.scale > 0 ? "1" : "0");
  def("MASK_KIND", std::to_string(static_cast<int>(k.attention.mask)));
  def("HAS_FLASH", flash ? "1" : "0");
  if (flash) {
    def("HD", std::to_string(d));
    def("WM", std::to_string(flash_wm(d)));
  }
  GeneratedKernel g;
  g.function = "tripy_attention";
  g.source = device_prelude() + "\n" + m + attention_source_body();
  return g;
}

StatusOr<AttentionLaunch> plan_attention_words(const Program& p, const Kernel& k, bool has_flash,
                                               const std::vector<int64_t>& slots) {
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

  const int64_t elem = dtype_size(p.buffers[static_cast<size_t>(k.outputs[0])].dtype);
  for (int x = 0; x < 5; ++x) l.byte_offsets[static_cast<size_t>(x)] = ops[static_cast<size_t>(x)].offset * elem;

  // The flash kernel reads rows of 8-element (16-byte) chunks: unit stride along the head and
  // every other stride (and a head window's start) a multiple of 8 elements.
  l.flash = has_flash && D == Dv && (D == 64 || D == 128);
  for (const AttentionOperand* x : {&q, &kk, &v, &o}) {
    l.flash = l.flash && x->stride[3] == 1 && x->offset % 8 == 0;
    for (int d = 0; d < 3; ++d) l.flash = l.flash && x->stride[d] % 8 == 0;
  }
  int64_t blocks;
  if (l.flash) {
    const int64_t bm = 64 * flash_wm(D);
    l.words[kBlocks] = (L + bm - 1) / bm;
    blocks = l.words[kBlocks] * B * Hq;
    l.vec_word = kVec;  // cp.async needs 16-byte aligned addresses; else plain loads
  } else {
    l.words[kBlocks] = (L + 3) / 4;
    l.words[kChunks] = (Dv + 255) / 256;
    blocks = l.words[kBlocks] * l.words[kChunks] * B * Hq;
  }
  if (blocks > std::numeric_limits<int32_t>::max())
    return kernel_failure(p, k, "attention over " + std::to_string(blocks) + " blocks exceeds the GPU's grid",
                          StatusCode::kResourceExhausted);
  l.grid = static_cast<unsigned>(blocks);
  return l;
}

StatusOr<std::vector<Launch>> plan_attention(const Program& p, const Kernel& k, CUfunction flash, CUfunction generic,
                                             const std::vector<int64_t>& slots) {
  TRIPY_ASSIGN_OR_RETURN(AttentionLaunch a, plan_attention_words(p, k, flash != nullptr, slots));
  if (a.grid == 0) return std::vector<Launch>{};
  Launch l;
  l.fn = a.flash ? flash : generic;
  if (l.fn == nullptr) return kernel_failure(p, k, "the generic attention kernel is missing");
  l.words = std::move(a.words);
  const auto& off = a.byte_offsets;
  l.ptrs = {{kPtrQ, k.inputs[0], off[AttentionAttrs::kQ]},
            {kPtrK, k.inputs[1], off[AttentionAttrs::kK]},
            {kPtrV, k.inputs[2], off[AttentionAttrs::kV]},
            {kPtrOut, k.outputs[0], off[AttentionAttrs::kOut]}};
  if (k.attention.mask != MaskKind::kNone) l.ptrs.push_back({kPtrMask, k.inputs[3], off[AttentionAttrs::kMask]});
  l.block_x = 128;
  l.vector_word = a.vec_word;
  l.grid = l.scalar_grid = l.vector_grid = a.grid;
  return std::vector<Launch>{std::move(l)};
}

}  // namespace tripy::rt::cuda
