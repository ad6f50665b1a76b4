// kDot's problem shapes from slots (batch dims merged or folded into M) and the row-phase split.
#include "backend/cuda/cuda_gemm_shape.h"

namespace tripy::rt::cuda {

std::string DotProblem::key() const {
  std::string s = std::to_string(static_cast<int>(dtype)) + "/" + std::to_string(static_cast<int>(operand)) + ":" +
                  std::to_string(trans_a) +
                  std::to_string(trans_b) + ":" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                  std::to_string(k) + ":" + std::to_string(batch) + "," + std::to_string(stride_a) + "," +
                  std::to_string(stride_b) + ":" + std::to_string(bias) + std::to_string(static_cast<int>(activation)) +
                  std::to_string(residual) + (constant_weight ? ":c" : "");
  return s;
}

LowPrecisionGemms low_precision_gemms_for(int arch) {
  LowPrecisionGemms g;
  g.int8 = arch >= 80;
  g.float8 = arch >= 89;
  g.weight_nk = true;
  g.int8_multiple = 4;
  g.float8_multiple = 16;
  g.int8_weight_only_rows = 32;  // the weight-only product's decode tiles (cuda_weight_only_dot.h)
  return g;
}

StatusOr<DotProblem> dot_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  auto bad = [&](const std::string& msg) {
    SourceRef where;
    if (k.source >= 0 && static_cast<size_t>(k.source) < p.sources.size())
      where = std::make_shared<SourceInfo>(p.sources[k.source]);
    return Status(StatusCode::kInvalidArgument, "kernel '" + k.name + "' (CUDA dot): " + msg, where);
  };
  if (k.inputs.size() != (k.dot.has_bias ? 3u : 2u) || k.outputs.size() != 1) return bad("wrong operand count");
  DotProblem pr;
  pr.dtype = p.buffers[k.outputs[0]].dtype;
  pr.operand = p.buffers[k.inputs[0]].dtype;
  if (pr.operand == DType::kInt8 || pr.operand == DType::kFloat8E4M3) {
    // The quantized dot: cuBLASLt's int8 and float8 kernels read the weight [N, K] ("TN"), and
    // flat::quantized_dot only makes this form; anything else is a broken program.
    if (!dot_kernel_writes(pr.operand, pr.dtype) || pr.dtype == pr.operand ||
        p.buffers[k.inputs[1]].dtype != pr.operand || k.dot.has_bias || k.dot.activation != Activation::kNone)
      return bad("a quantized dot writes its accumulator (int8 -> int32, float8 -> float32, or float8's scaled sum "
                 "in float16 or bfloat16) without an epilogue");
    if (!k.dot.transpose_rhs || k.dot.transpose_lhs)
      return bad("cuBLASLt multiplies int8 and float8 matrices only with the weight stored [N, K]");
  } else {
    if (pr.dtype != DType::kFloat32 && pr.dtype != DType::kFloat16 && pr.dtype != DType::kBFloat16)
      return bad(std::string("the CUDA backend multiplies float32, float16 and bfloat16 matrices, not ") +
                 std::string(dtype_name(pr.dtype)));
    for (int32_t b : k.inputs)
      if (p.buffers[b].dtype != pr.dtype) return bad("operands must share the output's dtype");
  }
  std::vector<int64_t> ls = p.buffer_shape(k.inputs[0], slots), rs = p.buffer_shape(k.inputs[1], slots);
  std::vector<int64_t> os = p.buffer_shape(k.outputs[0], slots);
  if (ls.size() < 2 || rs.size() < 2 || os.size() < 2) return bad("operands need at least 2 dims");
  const bool tl = k.dot.transpose_lhs, tr = k.dot.transpose_rhs;
  const int64_t M = tl ? ls.back() : ls[ls.size() - 2], K = tl ? ls[ls.size() - 2] : ls.back();
  const int64_t K2 = tr ? rs.back() : rs[rs.size() - 2], N = tr ? rs[rs.size() - 2] : rs.back();
  if (K != K2 || os[os.size() - 2] != M || os.back() != N) return bad("matrix shapes do not agree");
  if (k.dot.has_bias) {
    std::vector<int64_t> bs = p.buffer_shape(k.inputs[2], slots);
    if (bs.size() != 1 || bs[0] != N) return bad("bias must have shape (N,)");
  }
  // Batch dims, aligned from the right; strides 0 where an operand broadcasts.
  const size_t nb = os.size() - 2;
  std::vector<int64_t> bsize(nb);
  std::vector<std::vector<int64_t>> st(3, std::vector<int64_t>(nb, 0));
  const std::vector<int64_t> lst = dense_strides(ls), rst = dense_strides(rs), ost = dense_strides(os);
  for (size_t d = 0; d < nb; ++d) {
    bsize[d] = os[d];
    st[2][d] = ost[d];
    for (int side = 0; side < 2; ++side) {
      const std::vector<int64_t>& s = side == 0 ? ls : rs;
      const std::vector<int64_t>& sst = side == 0 ? lst : rst;
      const int64_t sb = static_cast<int64_t>(s.size()) - 2;
      const int64_t j = static_cast<int64_t>(d) - static_cast<int64_t>(nb) + sb;
      if (j < 0) continue;
      if (s[j] == os[d]) st[side][d] = os[d] == 1 ? 0 : sst[j];
      else if (s[j] != 1) return bad("batch dims do not broadcast");
    }
  }
  for (int side = 0; side < 2; ++side) {
    const std::vector<int64_t>& s = side == 0 ? ls : rs;
    if (s.size() - 2 > nb) return bad("an operand has more batch dims than the output");
  }
  // Merge batch dims that step evenly for all three.
  std::vector<int64_t> ms;
  std::vector<std::vector<int64_t>> mst(3);
  for (size_t d = 0; d < nb; ++d) {
    if (bsize[d] == 1) continue;
    bool merge = !ms.empty();
    for (int s = 0; merge && s < 3; ++s) merge = mst[s].back() == st[s][d] * bsize[d];
    if (merge) {
      ms.back() *= bsize[d];
      for (int s = 0; s < 3; ++s) mst[s].back() = st[s][d];
    } else {
      ms.push_back(bsize[d]);
      for (int s = 0; s < 3; ++s) mst[s].push_back(st[s][d]);
    }
  }
  pr.trans_a = tr;
  pr.trans_b = tl;
  pr.m = N;
  pr.n = M;
  pr.k = K;
  pr.bias = k.dot.has_bias;
  pr.activation = k.dot.activation;
  pr.scale = k.dot.scale;
  pr.constant_weight = p.is_constant(k.inputs[1]);
  if (!ms.empty() && ms.size() == 1 && mst[1][0] == 0 && !tl && mst[0][0] == M * K) {
    pr.n = M * ms[0];  // rhs shared by every batch: one GEMM with the batch folded into M
    return pr;
  }
  if (ms.empty()) return pr;
  const size_t inner = ms.size() - 1;
  pr.batch = ms[inner];
  pr.stride_b = mst[0][inner];
  pr.stride_a = mst[1][inner];
  pr.stride_c = mst[2][inner];
  int64_t outer = 1;
  for (size_t d = 0; d < inner; ++d) outer *= ms[d];
  pr.offset_a.assign(outer, 0);
  pr.offset_b.assign(outer, 0);
  pr.offset_c.assign(outer, 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t q = o;
    for (size_t d = inner; d-- > 0;) {
      int64_t c = q % ms[d];
      q /= ms[d];
      pr.offset_b[o] += c * mst[0][d];
      pr.offset_a[o] += c * mst[1][d];
      pr.offset_c[o] += c * mst[2][d];
    }
  }
  return pr;
}

std::vector<GemmCall> row_phase_calls(const DotProblem& pr) {
  const int64_t es = dtype_size(pr.dtype), P = 16 / es;
  if (pr.quantized()) return {};  // aligned by construction (flat::quantized_dot checks N)
  if (pr.batch != 1 || pr.offset_a.size() != 1 || pr.offset_a[0] || pr.offset_b[0] || pr.offset_c[0]) return {};
  if (pr.bias || pr.residual || !pr.trans_a || pr.trans_b) return {};
  if ((pr.m * es) % 16 == 0 || (pr.k * es) % 16 != 0 || pr.m <= P || pr.n < 2 * P) return {};
  std::vector<GemmCall> calls;
  // Columns [0, P) of every row in place: leading dimension m (any alignment), P columns only.
  calls.push_back({P, pr.n, pr.k, pr.k, pr.m, 0, 0, 0});
  for (int64_t r = 0; r < P; ++r) {
    const int64_t t = (P - (r * pr.m) % P) % P;  // row r's first 16-byte boundary
    const int64_t rows = (pr.n - r + P - 1) / P;
    calls.push_back({pr.m - t, rows, pr.k, P * pr.k, P * pr.m, t * pr.k, r * pr.k, r * pr.m + t});
  }
  return calls;
}

}  // namespace tripy::rt::cuda
