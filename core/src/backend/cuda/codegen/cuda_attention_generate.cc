// Which attention variant a kernel compiles to: its macros before the shared body
// (kernels/attention.cuh, kernels/attention_split.cuh), from the sizes the kernel's inputs
// allow (cuda_attention.h's helpers, which the launch shares).
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_attention.h"

namespace tripy::rt::cuda {
namespace {

// Whether a run may take the generic kernel, which only serves what the module's other kernels
// cannot (each costs NVRTC time: the generic one is ~0.2 s of a flash module's ~0.65 s on the
// build machine, and it took most of a dynamic GPT-2's 2.9 s attention module on an H200).
// Whether flash or split-KV serves a run depends on the head size (fixed), the rows per kv head
// and how strides and offsets align, which sizes spread over their ranges show
// (Program::sample_inputs): a decode step's module, which split-KV serves at every size, has no
// generic kernel. Should a run need it after all (TRIPY_ATTENTION_SPLIT=0 at run time, say), the
// launch fails with an error naming the kernel, not a wrong result.
bool generic_reachable(const Program& program, const Kernel& k, bool flash, bool split1, bool split16) {
  if (!flash && !split1 && !split16) return true;
  // Only which entry points exist matters to the plan, not their addresses.
  static char present;
  CUfunc_st* const exists = reinterpret_cast<CUfunc_st*>(&present);
  AttentionFunctions fns;
  if (flash) fns.flash = exists;
  if (split1) fns.split1 = exists;
  if (split16) fns.split16 = exists;
  std::vector<int64_t> slots;
  for (const std::vector<Tensor>& inputs : program.sample_inputs(Device{Device::Kind::kGpu, 0})) {
    program.eval_shapes(inputs, slots);
    for (int sms : {1, 1 << 16}) {
      const StatusOr<AttentionLaunch> l = plan_attention_words(program, k, fns, slots, sms);
      if (!l.ok() || l->path == AttentionLaunch::Path::kGeneric) return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<GeneratedKernel> generate_attention(const Program& program, const Kernel& k) {
  if (k.inputs.size() < 3 || k.outputs.size() != 1) return internal_error("attention kernel '" + k.name + "' has the wrong arity");
  const DType t = program.buffers[static_cast<size_t>(k.inputs[0])].dtype;
  const int64_t d = static_head(program, k, AttentionAttrs::kQ, k.inputs[0]);
  const int64_t dv = static_head(program, k, AttentionAttrs::kV, k.inputs[2]);
  const bool narrow = t == DType::kFloat16 || t == DType::kBFloat16;
  // Split-KV serves up to kAttentionSplitRows rows per kv head: split1 where a size gives one row,
  // split16 where every size gives at most 16 (GQA decode), the flash kernel where some size gives
  // more (each kernel costs NVRTC time, so a module holds those its sizes can use).
  const auto [rows_lo, rows_hi] = split_row_range(program, k);
  const bool heads_fit = d <= kSplitHeadMax && dv <= kSplitHeadMax;  // dynamic heads (-1): checked per run
  bool split1 = split_enabled() && heads_fit && rows_lo <= 1;
  const bool split16 = split_enabled() && heads_fit && rows_hi > 1 && rows_hi <= kAttentionSplitRows;
  const bool flash = narrow && d == dv && (d == 64 || d == 128) && !(split16 || (split1 && rows_hi <= 1));
  // Where the flash kernel is there for the longer queries, a one-row run takes it too (correct,
  // if slower than split-KV over many keys), so split1 stays out unless it splits something (some
  // run has more keys than one split-KV block takes) at sizes the compile is tuned for (the opt
  // size has one row per kv head): a prefill's module, for prompts of any length, leaves one-token
  // prompts to the flash kernel and decoding to the decode step's module. (A dynamic GPT-2's
  // module with split1 took 2.3 s of NVRTC on an H200 machine, its flash kernel alone 1.0 s in the
  // same run; with a 1024-token KV cache, 3.5 s.)
  if (split1 && flash &&
      (attention_keys_hi(program, k) <= split_min_keys() || attention_rows_at_opt(program, k) > 1))
    split1 = false;
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
  if (k.attention.mask == MaskKind::kCausalOffset) {  // the offset's dtype (validate_program: int32 or int64)
    const bool wide = k.inputs.size() > 3 && program.buffers[static_cast<size_t>(k.inputs[3])].dtype == DType::kInt64;
    def("OFFSET_T", wide ? "long long" : "int");
    def("OFFSET_MAX", wide ? "0x7fffffffffffffffLL" : "0x7fffffffLL");
  }
  def("HAS_FLASH", flash ? "1" : "0");
  def("HAS_GENERIC", generic_reachable(program, k, flash, split1, split16) ? "1" : "0");
  def("HAS_SPLIT1", split1 ? "1" : "0");
  def("HAS_SPLIT16", split16 ? "1" : "0");
  if (split16) def("SPLIT_RM", std::to_string(attention_split_capacity(program, k)));
  // The split kernels' tensor-core path: float16/bfloat16 with one fixed head of 64 or 128.
  def("SPLIT_TC_HD", (split1 || split16) && narrow && d == dv && (d == 64 || d == 128) ? std::to_string(d) : "0");
  if (flash) {
    def("HD", std::to_string(d));
    def("WM", std::to_string(flash_wm(program, k, d)));
  }
  GeneratedKernel g;
  g.function = "tripy_attention";
  g.source = device_prelude() + "\n" + m + attention_source_body() + attention_split_source();
  return g;
}

}  // namespace tripy::rt::cuda
