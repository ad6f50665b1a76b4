// kAttention on the CPU: flash-style tiling. Each work item is (batch, head, block of kBlockQ
// queries); it walks the keys in blocks of kBlockK with an online softmax (running max and sum
// per query, the accumulator rescaled when the max grows), so memory holds kBlockQ x kBlockK
// scores at a time however long the sequences are. Everything computes in float32 (float16 and
// bfloat16 are widened on load), operands are read through their layouts (strides), and causal
// key blocks past a query block's diagonal are never visited; under a causal offset (a KV cache's
// rows written so far) neither are the keys past the block's last visible one.
#pragma GCC optimize("no-trapping-math")  // lets the selects in the exp loops if-convert

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/fused_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec_math.h"

namespace tripy::cpu {
namespace {

using rt::AttentionAttrs;
using rt::AttentionOperand;

constexpr int64_t kBlockQ = 32, kBlockK = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 64 floats as four 16-wide vectors (GCC's vector extension: four AVX-512 registers here, more and
// narrower ones elsewhere), so the score and accumulator tiles live in registers: as arrays, the
// compiler kept them on the stack and stored them back on every step.
using V16 = float __attribute__((vector_size(64)));
using V16u = float __attribute__((vector_size(64), aligned(4), may_alias));  // the same, at any float address
struct Tile64 {
  V16 x0 = {}, x1 = {}, x2 = {}, x3 = {};
  static V16 at(const float* p, int r) { return *reinterpret_cast<const V16u*>(p + 16 * r); }
  void load(const float* p) { x0 = at(p, 0), x1 = at(p, 1), x2 = at(p, 2), x3 = at(p, 3); }
  void store(float* p) const {
    V16u* q = reinterpret_cast<V16u*>(p);
    q[0] = x0, q[1] = x1, q[2] = x2, q[3] = x3;
  }
  void scale(float a) { x0 *= a, x1 *= a, x2 *= a, x3 *= a; }
  void fma(float a, const float* p) {  // x += a * p[0..64)
    x0 += a * at(p, 0), x1 += a * at(p, 1), x2 += a * at(p, 2), x3 += a * at(p, 3);
  }
};
static_assert(sizeof(Tile64) == kBlockK * sizeof(float), "a score tile holds one key block");
struct Operand {
  const View* view = nullptr;
  AttentionOperand o;
  // Element offset of (b, h, i, 0).
  int64_t at(int64_t b, int64_t h, int64_t i) const {
    return o.offset + b * o.stride[0] + h * o.stride[1] + i * o.stride[2];
  }
};

// One work item's scratch: widened queries, a transposed key block, a value block, scores.
struct Scratch {
  std::vector<float> q, kt, v, s, acc, m, l;
  std::vector<uint8_t> keep;
};

// kCausalOffset: the offset's value and its dtype's largest value (rt::causal_offset_keys).
struct CausalOffset {
  bool on = false;
  int64_t value = 0, max = 0;
};

class AttentionRun {
 public:
  AttentionRun(const AttentionAttrs& a, Operand q, Operand k, Operand v, const Operand* mask, CausalOffset offset,
               Operand out)
      : a_(a), q_(q), k_(k), v_(v), mask_(mask), offset_(offset), out_(out) {
    D_ = q.o.size[3];
    Dv_ = v.o.size[3];
    L_ = q.o.size[2];
    S_ = k.o.size[2];
    group_ = q.o.size[1] / k.o.size[1];
  }

  // Queries [i0, i1) of head h in batch b.
  void block(int64_t b, int64_t h, int64_t i0, int64_t i1, Scratch& w) const {
    const int64_t nq = i1 - i0, hk = h / group_;
    w.q.resize(static_cast<size_t>(nq * D_));
    w.acc.assign(static_cast<size_t>(nq * Dv_), 0.0f);
    w.m.assign(static_cast<size_t>(nq), kNegInf);
    w.l.assign(static_cast<size_t>(nq), 0.0f);
    w.kt.resize(static_cast<size_t>(D_ * kBlockK));
    w.v.resize(static_cast<size_t>(kBlockK * Dv_));
    w.s.resize(static_cast<size_t>(nq * kBlockK));
    w.keep.resize(static_cast<size_t>(kBlockK));
    const float scale = static_cast<float>(a_.scale);
    for (int64_t i = 0; i < nq; ++i) {
      float* row = w.q.data() + i * D_;
      load_row(q_, q_.at(b, h, i0 + i), q_.o.stride[3], D_, row);
      for (int64_t d = 0; d < D_; ++d) row[d] *= scale;
    }
    // Causal: the block's last query sees keys up to its own index; a causal offset: the keys
    // its rows see, at most (the count grows with the row until the offset's sum wraps).
    int64_t s_end = a_.causal ? std::min(S_, i1) : S_;
    if (offset_.on) {
      s_end = 0;
      for (int64_t i = i0; i < i1; ++i) s_end = std::max(s_end, visible(i));
    }
    for (int64_t j0 = 0; j0 < s_end; j0 += kBlockK) {
      const int64_t nk = std::min(kBlockK, s_end - j0);
      load_keys(b, hk, j0, nk, w);
      scores(nq, w);
      mask_scores(b, h, i0, nq, j0, nk, w);
      accumulate(nq, nk, w);
    }
    for (int64_t i = 0; i < nq; ++i) {
      // l == 0: every key hidden; 0 * (1 / 0) gives the NaN that softmax over no values is.
      const float inv = 1.0f / w.l[static_cast<size_t>(i)];
      float* acc = w.acc.data() + i * Dv_;
      for (int64_t d = 0; d < Dv_; ++d) acc[d] *= inv;
      store_row(out_, out_.at(b, h, i0 + i), out_.o.stride[3], Dv_, acc);
    }
  }

 static void load_row(const Operand& x, int64_t offset, int64_t stride, int64_t n, float* dst) {
    for (int64_t d = 0; d < n; d += kTile)
      load_span(x.view->dtype, x.view->data, offset + d * stride, stride, static_cast<int>(std::min<int64_t>(kTile, n - d)), dst + d);
  }
  static void store_row(const Operand& x, int64_t offset, int64_t stride, int64_t n, const float* src) {
    if (stride == 1) {
      for (int64_t d = 0; d < n; d += kTile)
        store_span(x.view->dtype, x.view->data, offset + d, src + d, static_cast<int>(std::min<int64_t>(kTile, n - d)));
      return;
    }
    for (int64_t d = 0; d < n; ++d) store_span(x.view->dtype, x.view->data, offset + d * stride, src + d, 1);
  }

 private:
  // K block transposed to (D, nk) so the score loop streams along keys; V block as (nk, Dv).
  void load_keys(int64_t b, int64_t hk, int64_t j0, int64_t nk, Scratch& w) const {
    std::vector<float>& row = w.s;  // borrowed until scores() overwrites it
    if (row.size() < static_cast<size_t>(D_)) row.resize(static_cast<size_t>(D_));
    for (int64_t j = 0; j < nk; ++j) {
      load_row(k_, k_.at(b, hk, j0 + j), k_.o.stride[3], D_, row.data());
      for (int64_t d = 0; d < D_; ++d) w.kt[static_cast<size_t>(d * kBlockK + j)] = row[static_cast<size_t>(d)];
      load_row(v_, v_.at(b, hk, j0 + j), v_.o.stride[3], Dv_, w.v.data() + j * Dv_);
    }
    // scores() runs over whole blocks: a short last block's missing keys score 0 (then unused).
    if (nk < kBlockK)
      for (int64_t d = 0; d < D_; ++d) std::fill_n(w.kt.data() + d * kBlockK + nk, kBlockK - nk, 0.0f);
  }

  // A query's kBlockK scores stay in registers over the whole head dim and are stored once, a
  // whole row (past the block's last key they are the zero-padded keys' zeros, never read).
  void scores(int64_t nq, Scratch& w) const {
    for (int64_t i = 0; i < nq; ++i) {
      Tile64 acc;
      const float* q = w.q.data() + i * D_;
      for (int64_t d = 0; d < D_; ++d) acc.fma(q[d], w.kt.data() + d * kBlockK);
      acc.store(w.s.data() + i * kBlockK);
    }
  }

  void mask_scores(int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t nk, Scratch& w) const {
    for (int64_t i = 0; i < nq; ++i) {
      float* s = w.s.data() + i * kBlockK;
      const int64_t qi = i0 + i;
      if (a_.causal || offset_.on)
        for (int64_t j = std::max<int64_t>(0, (offset_.on ? visible(qi) : qi + 1) - j0); j < nk; ++j) s[j] = kNegInf;
      if (!mask_) continue;
      const AttentionOperand& m = mask_->o;
      const int64_t off = m.offset + (m.size[0] == 1 ? 0 : b * m.stride[0]) + (m.size[1] == 1 ? 0 : h * m.stride[1]) +
                          (m.size[2] == 1 ? 0 : qi * m.stride[2]);
      const int64_t sj = m.size[3] == 1 ? 0 : m.stride[3];
      if (a_.mask == rt::MaskKind::kBool) {
        const uint8_t* keep = static_cast<const uint8_t*>(mask_->view->data) + off + j0 * sj;
        for (int64_t j = 0; j < nk; ++j) s[j] = keep[j * sj] ? s[j] : kNegInf;
      } else {
        float tile[kBlockK];
        load_span(mask_->view->dtype, mask_->view->data, off + j0 * sj, sj, static_cast<int>(nk), tile);
        for (int64_t j = 0; j < nk; ++j) s[j] += tile[j];
      }
    }
  }

  // Online softmax: p = exp(s - m_new), the running sum and accumulator rescaled by exp(m - m_new).
  void accumulate(int64_t nq, int64_t nk, Scratch& w) const {
    for (int64_t i = 0; i < nq; ++i) {
      float* s = w.s.data() + i * kBlockK;
      float mx = kNegInf;
      for (int64_t j = 0; j < nk; ++j) mx = s[j] > mx ? s[j] : mx;
      float& m = w.m[static_cast<size_t>(i)];
      float& l = w.l[static_cast<size_t>(i)];
      const float m_new = mx > m ? mx : m;
      if (m_new == kNegInf) continue;  // nothing visible yet: p is all zeros
      const float corr = exp_f32(m - m_new);  // m == -inf: 0, and acc and l are 0 anyway
      float sum = 0.0f;
      for (int64_t j = 0; j < nk; ++j) {
        const float p = exp_f32(s[j] - m_new);
        s[j] = p;
        sum += p;
      }
      l = l * corr + sum;
      m = m_new;
      float* acc = w.acc.data() + i * Dv_;
      // Register tiles of 64 value columns over all the block's keys, then the tail.
      int64_t d0 = 0;
      for (; d0 + kBlockK <= Dv_; d0 += kBlockK) {
        Tile64 a;
        a.load(acc + d0);
        a.scale(corr);
        for (int64_t j = 0; j < nk; ++j) a.fma(s[j], w.v.data() + j * Dv_ + d0);
        a.store(acc + d0);
      }
      for (int64_t d = d0; d < Dv_; ++d) {
        float x = acc[d] * corr;
        for (int64_t j = 0; j < nk; ++j) x += s[j] * w.v[static_cast<size_t>(j * Dv_ + d)];
        acc[d] = x;
      }
    }
  }

  int64_t visible(int64_t row) const { return rt::causal_offset_keys(offset_.value, offset_.max, row, S_); }

  const AttentionAttrs& a_;
  Operand q_, k_, v_;
  const Operand* mask_;
  CausalOffset offset_;
  Operand out_;
  int64_t D_ = 0, Dv_ = 0, L_ = 0, S_ = 0, group_ = 1;
};

}  // namespace

Status run_attention(const KernelArgs& args) {
  const rt::Kernel& kn = *args.kernel;
  const AttentionAttrs& a = kn.attention;
  const bool masked = a.mask != rt::MaskKind::kNone;
  if (args.inputs.size() != (masked ? 4u : 3u) || args.outputs.size() != 1)
    return kernel_error(args, "attention takes q, k, v[, mask] and one output", StatusCode::kInternal);
  std::vector<std::vector<int64_t>> shapes;
  for (const View* v : args.inputs) shapes.push_back(v->shape);
  shapes.push_back(args.outputs[0]->shape);
  // validate_program and the run checks guarantee this; checking again costs nothing here.
  const std::string why = rt::attention_shape_error(a, shapes);
  if (!why.empty()) return kernel_error(args, "attention " + why, StatusCode::kInternal);
  auto operand = [&](int x, const View* v) { return Operand{v, rt::attention_operand(a, x, v->shape)}; };
  const Operand q = operand(AttentionAttrs::kQ, args.inputs[0]), k = operand(AttentionAttrs::kK, args.inputs[1]);
  const Operand v = operand(AttentionAttrs::kV, args.inputs[2]), out = operand(AttentionAttrs::kOut, args.outputs[0]);
  Operand mask;
  if (masked) mask = operand(AttentionAttrs::kMask, args.inputs[3]);
  const int64_t B = q.o.size[0], H = q.o.size[1], L = q.o.size[2], S = k.o.size[2], Dv = v.o.size[3];
  if (B * H * L * Dv == 0) return ok_status();
  if (S == 0) {
    // No keys: the product with an empty value matrix is zero (as q k^T @ v computes it).
    std::vector<float> zeros(static_cast<size_t>(Dv), 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i) AttentionRun::store_row(out, out.at(b, h, i), out.o.stride[3], Dv, zeros.data());
    return ok_status();
  }
  CausalOffset offset;
  if (a.mask == rt::MaskKind::kCausalOffset) {
    const View& o = *args.inputs[3];
    offset.on = true;
    if (o.dtype == DType::kInt64) {
      std::memcpy(&offset.value, o.data, sizeof(int64_t));
      offset.max = std::numeric_limits<int64_t>::max();
    } else {
      int32_t v32;
      std::memcpy(&v32, o.data, sizeof(int32_t));
      offset.value = v32;
      offset.max = std::numeric_limits<int32_t>::max();
    }
  }
  const bool bool_or_additive = masked && !offset.on;
  AttentionRun run(a, q, k, v, bool_or_additive ? &mask : nullptr, offset, out);
  const int64_t qblocks = (L + kBlockQ - 1) / kBlockQ, items = B * H * qblocks;
  auto body = [&](int64_t t0, int64_t t1) {
    Scratch w;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t qb = t % qblocks, bh = t / qblocks;
      const int64_t i0 = qb * kBlockQ;
      run.block(bh / H, bh % H, i0, std::min(L, i0 + kBlockQ), w);
    }
  };
  // Work per item ~ kBlockQ x S x (D + Dv) multiply-adds; small problems run inline.
  const int64_t per_item = kBlockQ * S * (q.o.size[3] + Dv);
  if (items == 1 || items * per_item < (1 << 17)) body(0, items);
  else parallel_for(items, std::max<int64_t>(1, (1 << 17) / per_item), body);
  return ok_status();
}

const CpuKernel kAttentionKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_attention(args); }};

}  // namespace tripy::cpu
