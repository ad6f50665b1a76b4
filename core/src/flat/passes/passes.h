// FlatIR passes, each a function from graph to graph, run in this order by compile_graph:
// constant_fold -> sink_unit_reshapes -> simplify -> cse -> match_attention -> fold_attention_layouts
// -> unit_transposes_to_reshapes -> fold_update_windows -> split_dot_slices -> pad_dot_columns
// (GPU; constant_fold, simplify and cse again when either changed the graph) -> fold_conv_affine
// -> merge_conv_biases -> channels_last (GPU; simplify again when it changed the graph) ->
// quantized_dot -> weight_only_dot -> gated_weight_only_dot -> normed_weight_only_dot ->
// residual_weight_only_dot -> gate_weight_only_output -> dce -> sink_elementwise, then
// canonicalize_reductions before fusion planning.
// Every pass keeps origins; text-in/text-out tests live in core/tests/flat/. The passes rebuild
// graphs through rebuild.h's rewrite_ops.
#pragma once

#include <functional>
#include <optional>

#include "flat/ir.h"
#include "tripy/status.h"

namespace tripy::flat {

// Runs a graph without parameters and returns its one output. The compiler supplies it
// (compiler::evaluate_constant_graph: a Program on the CPU backend), so passes, which sit below the
// compiler and the backends, fold with the kernels that run the program.
using ConstantEvaluator = std::function<StatusOr<Tensor>(const Graph& graph)>;
// Evaluates ops whose operands are all constants through `evaluator`. Broadcasts of scalars stay
// (they are free splats in fused kernels), as do results much larger than their inputs.
StatusOr<Graph> constant_fold(const Graph& graph, const ConstantEvaluator& evaluator);
// Algebraic identities: x*1, x+0, converts/reshapes/broadcasts/transposes that change nothing,
// transpose∘transpose, reshape∘reshape, reductions over no dims.
Graph simplify(const Graph& graph);
// Common subexpressions: structurally equal ops (kind, fn, operands, attributes, small constant
// bytes) compute one value.
Graph cse(const Graph& graph);
// A dot (plus a constant bias) read only through static slices of its last axis (at most four),
// with a constant right operand, becomes one dot per slice over slices of that operand and bias (which constant
// folding then evaluates). nullopt when nothing matched.
std::optional<Graph> split_dot_slices(const Graph& graph);
// GPU only: a dot with a constant right operand of N >= min_columns columns whose rows are not
// 16-byte aligned reads that operand padded with zero columns and is read through a [.., :N]
// slice, so cuBLASLt runs its aligned kernels (only wide products: for a few columns the copy of
// a program output costs more than the slow GEMM). nullopt when nothing matched.
std::optional<Graph> pad_dot_columns(const Graph& graph, int64_t min_columns = 1024);
// Per-channel multiplies, divides, adds and subtracts by constants after a convolution with
// constant weights (inference BatchNorm) fold into its weights and one bias add. nullopt when
// nothing matched.
std::optional<Graph> fold_conv_affine(const Graph& graph);
// add(conv_a + bias_a, conv_b + bias_b) (ResNet's downsampling shortcut) becomes
// (conv_late + (bias_a + bias_b)) + conv_early, so the earlier convolution needs no epilogue and the
// later one takes the bias and the residual. nullopt when nothing matched.
std::optional<Graph> merge_conv_biases(const Graph& graph);
// Convolutions whose dtype `rule` lists run channels-last, NHWC activations and KRSC weights
// (constant weights re-laid out here), with the pooling and elementwise ops between them, so
// layouts change only at a chain's edges (one transpose in, one out). nullopt when fewer than
// `rule.min_convolutions` convolutions qualify.
struct ChannelsLastRule {
  std::vector<DType> dtypes = {DType::kFloat16, DType::kBFloat16};
  int min_convolutions = 1;
};
std::optional<Graph> channels_last(const Graph& graph, const ChannelsLastRule& rule = {});
// Hand-written attention (q @ k^T * scale, an optional -inf or additive mask, softmax over the
// last dim, @ v) becomes one attention op when nothing else reads its intermediates; then a bool
// mask that is a KV cache's `iota_keys <= iota_queries + pos` becomes a causal offset read at run
// time (rt::MaskKind::kCausalOffset), so kernels visit only the keys each query sees.
std::optional<Graph> match_attention(const Graph& graph);
// Transposes of an attention's operands, and a transpose that alone reads its result, become the
// attention's operand layouts (views, no copy kernels); k and v repeated along the heads are read
// unrepeated (grouped-query attention); a head split of a static slice of the last axis becomes a
// head window of the unsliced value. nullopt when nothing changed.
std::optional<Graph> fold_attention_layouts(const Graph& graph);
// A transpose that moves only dims of static size 1 (the operands of dots read as a flag, the last
// two dims swapped, excepted) becomes a reshape: no copy kernel. nullopt when none did.
std::optional<Graph> unit_transposes_to_reshapes(const Graph& graph);
// An update_slice whose update is a slice leaving each written row one contiguous run of the
// slice's operand (a KV-cache write of a head range of a projection) reads that operand directly:
// dims = [axis, offset of the rows in the operand's]. nullopt when nothing matched.
std::optional<Graph> fold_update_windows(const Graph& graph);
// Elementwise ops on a reshape that only inserts unit dims (a keepdim reduction's) run before it
// instead: ew(reshape(x), splat) -> reshape(ew(x, splat)), so the chain stays on the reduced row
// values and simplify folds the reshape into the broadcast that reads it. nullopt when nothing moved.
std::optional<Graph> sink_unit_reshapes(const Graph& graph);
// An elementwise op whose one reader is elementwise, with a GEMM (or another op fusion keeps
// apart) between them, moves down to just before it, so fusion's in-order sweep meets them
// together. nullopt when nothing moved.
std::optional<Graph> sink_elementwise(const Graph& graph);
// Which low-precision GEMMs the target runs (the backend says; the CPU runs every form).
struct QuantizedDotRules {
  bool int8 = true, float8 = true;
  // cuBLASLt's int8 and float8 kernels read the weight as [N, K] ("TN") and want K and N static
  // multiples of these; other dots keep the dequantize + GEMM.
  bool weight_nk = false;
  int64_t int8_multiple = 1, float8_multiple = 1;
  // int8 dots of at most these rows with a constant weight are left as they are, for
  // weight_only_dot (0: none; -1: any rows).
  int64_t int8_weight_only_rows = 0;
};
// dot(dequantize(qa, sa), dequantize(qb, sb)) with int8 (or float8) qa, qb and constant scales (sa
// per tensor; sb per tensor or per output column) becomes a dot of qa and qb accumulating in
// int32 (float32), rescaled by sa * sb in float32 and converted to the dequantized dtype. nullopt
// when nothing matched.
std::optional<Graph> quantized_dot(const Graph& graph, const QuantizedDotRules& rules = {});
// Whether the graph converts an int8 or float8 value (where quantized_dot may apply at all).
bool converts_low_precision(const Graph& graph);
// dot(x, dequantize(q)) with a float x, a constant int8 or int4 weight q and constant scales (and
// zero points) per group of K becomes one weight_only_dot kernel reading q packed
// (rt::WeightOnlyDotAttrs), where x has at most `max_rows` rows (-1: any; 0: none). Where x has
// more, the dequantization stays for the GEMM, rewritten by groups of K for one fused kernel that
// writes the float weight. nullopt when nothing matched.
std::optional<Graph> weight_only_dot(const Graph& graph, int64_t max_rows = -1);
// Where a backend's weight-only kernels form x (normalized, or a SwiGLU's gate) and add a residual
// (rt::PassRules::weight_only_fold; empty: everywhere).
using WeightOnlyFoldRule = std::function<bool(const rt::WeightOnlyFold&)>;
// The product `op` (a weight-only dot kernel of `graph`) as the rule sees it, with the folds it
// has; each pass sets the one it asks about.
rt::WeightOnlyFold weight_only_fold_case(const Graph& graph, const Op& op);
// weight_only_dot(rmsnorm(h, gamma, eps), ...) over h's last dim (tp.RMSNorm's lowering) reads h
// and gamma itself (rt::WeightOnlyDotAttrs::norm), where the rule allows. nullopt when nothing
// matched.
std::optional<Graph> normed_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies = {});
// weight_only_dot(mul(silu(y[..., :K]), y[..., K:]), ...) reads y itself (a SwiGLU's down
// projection, rt::WeightOnlyDotAttrs::gated), where the rule allows. nullopt when nothing matched.
std::optional<Graph> gated_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies = {});
// add(weight_only_dot(...), r) of a product read by that add alone becomes the product with r
// added (rt::WeightOnlyDotAttrs::residual), where the rule allows. nullopt when nothing matched.
std::optional<Graph> residual_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies = {});
// mul(silu(y[..., :H]), y[..., H:]) of a weight-only product y read by nothing else becomes that
// product with its output gated (a SwiGLU's gate_up product writing SiLU(gate) * up,
// rt::WeightOnlyDotAttrs::gate_output), where the rule allows. nullopt when nothing matched.
std::optional<Graph> gate_weight_only_output(const Graph& graph, const WeightOnlyFoldRule& applies = {});
// Drops ops that no output depends on (parameters always stay: they are the signature).
Graph dce(const Graph& graph);
// Rewrites reductions over non-trailing dims as a transpose then a trailing reduction, the only
// form fused kernels implement.
Graph canonicalize_reductions(const Graph& graph);

}  // namespace tripy::flat
