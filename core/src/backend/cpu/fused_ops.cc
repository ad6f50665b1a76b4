// The CPU's emitter table: one row per EwOp giving its tile loop for each compute kind (float32,
// int32, int64, bool), or nullptr where the primitive table (ew_ops.def) says the op is undefined.
// A static_assert checks the rows against that table, so a new op cannot miss its CPU loop. The
// loops are plain indexed loops over restrict pointers so the compiler vectorises them; semantics
// follow numpy.

// The tile loops select between values (clamps, NaN-propagating max, exp's range handling);
// GCC if-converts such selects only when it may assume floating point does not trap, which is
// true here (Tripy never enables FP exceptions). Without this, those loops stay scalar (~8x).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cpu/fused_ops.h"
#include "backend/cpu/vec_math.h"

namespace tripy::cpu {
namespace {

using rt::EwOp;

// numpy's floor_divide and remainder for floats (divmod-based, exact for representable cases).
inline float floordiv_f32(float a, float b) {
  if (b == 0) return a / b;
  float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(0.0f, a / b);
  float fl = std::floor(div);
  return div - fl > 0.5f ? fl + 1 : fl;
}
inline float rem_f32(float a, float b) {
  float r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r == 0 ? std::copysign(0.0f, b) : r;
}

// Integer ops: wrap-around arithmetic without undefined behaviour; division by zero gives 0 (as
// numpy does, minus the warning); floor division and modulo take the sign of the divisor.
template <class T>
inline T wrap_add(T a, T b) { return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b)); }
template <class T>
inline T wrap_sub(T a, T b) { return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b)); }
template <class T>
inline T wrap_mul(T a, T b) { return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b)); }
template <class T>
inline T floordiv_int(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub<T>(0, a);
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <class T>
inline T rem_int(T a, T b) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class T>
inline T pow_int(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp & 1) ? -1 : 1) : 0;
  T result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return result;
}


// ---- scalar functions, one per op and kind (the table below turns them into tile loops) ----

inline float neg_f(float x) { return -x; }
inline float abs_f(float x) { return std::fabs(x); }
inline float log_f(float x) { return std::log(x); }
inline float sqrt_f(float x) { return std::sqrt(x); }
inline float rsqrt_f(float x) { return 1.0f / std::sqrt(x); }
inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f32(-x)); }
inline float sin_f(float x) { return std::sin(x); }
inline float cos_f(float x) { return std::cos(x); }
inline float floor_f(float x) { return std::floor(x); }
inline float ceil_f(float x) { return std::ceil(x); }
inline float round_f(float x) { return std::nearbyint(x); }
inline float sign_f(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }
inline float add_f(float x, float y) { return x + y; }
inline float sub_f(float x, float y) { return x - y; }
inline float mul_f(float x, float y) { return x * y; }
inline float div_f(float x, float y) { return x / y; }
inline float pow_f(float x, float y) { return std::pow(x, y); }
// NaN-propagating like numpy.maximum / minimum.
inline float max_f(float x, float y) { return (x > y || x != x) ? x : y; }
inline float min_f(float x, float y) { return (x < y || x != x) ? x : y; }

template <class T> inline T neg_i(T x) { return wrap_sub<T>(0, x); }
template <class T> inline T abs_i(T x) { return x < 0 ? wrap_sub<T>(0, x) : x; }
template <class T> inline T sign_i(T x) { return T((x > 0) - (x < 0)); }
template <class T> inline T not_i(T x) { return T(~x); }
template <class T> inline T same(T x) { return x; }  // floor, ceil, round of an integer
template <class T> inline T max_i(T x, T y) { return x > y ? x : y; }
template <class T> inline T min_i(T x, T y) { return x < y ? x : y; }
template <class T> inline T and_i(T x, T y) { return T(x & y); }
template <class T> inline T or_i(T x, T y) { return T(x | y); }
template <class T> inline T xor_i(T x, T y) { return T(x ^ y); }

// bool as numpy: + and max are or, * and min are and.
inline uint8_t not_b(uint8_t x) { return uint8_t(x ^ 1); }

template <class T> inline uint8_t eq(T x, T y) { return uint8_t(x == y); }
template <class T> inline uint8_t ne(T x, T y) { return uint8_t(x != y); }
template <class T> inline uint8_t lt(T x, T y) { return uint8_t(x < y); }
template <class T> inline uint8_t le(T x, T y) { return uint8_t(x <= y); }
template <class T> inline uint8_t gt(T x, T y) { return uint8_t(x > y); }
template <class T> inline uint8_t ge(T x, T y) { return uint8_t(x >= y); }

// ---- tile loops ----

// n results into `o` from operands a, b, c (those the op reads); o never aliases an operand.
using TileFn = void (*)(int n, void* o, const void* a, const void* b, const void* c);

template <class T, T (*F)(T)>
void unary_tile(int n, void* o, const void* a, const void*, const void*) {
  T* __restrict out = static_cast<T*>(o);
  const T* __restrict x = static_cast<const T*>(a);
  for (int i = 0; i < n; ++i) out[i] = F(x[i]);
}
template <class R, class T, R (*F)(T, T)>
void binary_tile(int n, void* o, const void* a, const void* b, const void*) {
  R* __restrict out = static_cast<R*>(o);
  const T* __restrict x = static_cast<const T*>(a);
  const T* __restrict y = static_cast<const T*>(b);
  for (int i = 0; i < n; ++i) out[i] = F(x[i], y[i]);
}
template <class T>
void select_tile(int n, void* o, const void* a, const void* b, const void* c) {
  T* __restrict out = static_cast<T*>(o);
  const uint8_t* __restrict cond = static_cast<const uint8_t*>(a);
  const T* __restrict x = static_cast<const T*>(b);
  const T* __restrict y = static_cast<const T*>(c);
  for (int i = 0; i < n; ++i) out[i] = cond[i] ? x[i] : y[i];
}

struct CpuRow {
  EwOp op;
  TileFn f32, i32, i64, b;  // per operand compute kind; nullptr: undefined there
};

// Cells: one kind, both integer kinds, or all four (comparisons, select).
#define UF(fn) unary_tile<float, fn>
#define UI(fn) unary_tile<int32_t, fn<int32_t>>, unary_tile<int64_t, fn<int64_t>>
#define UB(fn) unary_tile<uint8_t, fn>
#define BF(fn) binary_tile<float, float, fn>
#define BI(fn) binary_tile<int32_t, int32_t, fn<int32_t>>, binary_tile<int64_t, int64_t, fn<int64_t>>
#define BB(fn) binary_tile<uint8_t, uint8_t, fn<uint8_t>>
#define CMP(fn)                                                                                     \
  binary_tile<uint8_t, float, fn<float>>, binary_tile<uint8_t, int32_t, fn<int32_t>>,                \
      binary_tile<uint8_t, int64_t, fn<int64_t>>, binary_tile<uint8_t, uint8_t, fn<uint8_t>>
#define NONE nullptr
#define NONE_I nullptr, nullptr

// Load, const, iota (the interpreter's streams), convert (by target dtype, below) and the
// reductions (reduce_tile) have no tile loop here.
constexpr CpuRow kRows[] = {
    {EwOp::kLoad, NONE, NONE_I, NONE},
    {EwOp::kConst, NONE, NONE_I, NONE},
    {EwOp::kIota, NONE, NONE_I, NONE},
    {EwOp::kNeg, UF(neg_f), UI(neg_i), NONE},
    {EwOp::kAbs, UF(abs_f), UI(abs_i), UB(same<uint8_t>)},
    {EwOp::kExp, UF(exp_f32), NONE_I, NONE},
    {EwOp::kLog, UF(log_f), NONE_I, NONE},
    {EwOp::kSqrt, UF(sqrt_f), NONE_I, NONE},
    {EwOp::kRsqrt, UF(rsqrt_f), NONE_I, NONE},
    {EwOp::kTanh, UF(tanh_f32), NONE_I, NONE},
    {EwOp::kSigmoid, UF(sigmoid_f), NONE_I, NONE},
    {EwOp::kErf, UF(erf_f32), NONE_I, NONE},
    {EwOp::kSin, UF(sin_f), NONE_I, NONE},
    {EwOp::kCos, UF(cos_f), NONE_I, NONE},
    {EwOp::kFloor, UF(floor_f), UI(same), UB(same<uint8_t>)},
    {EwOp::kCeil, UF(ceil_f), UI(same), UB(same<uint8_t>)},
    {EwOp::kRound, UF(round_f), UI(same), UB(same<uint8_t>)},
    {EwOp::kSign, UF(sign_f), UI(sign_i), UB(same<uint8_t>)},
    {EwOp::kNot, NONE, UI(not_i), UB(not_b)},
    {EwOp::kAdd, BF(add_f), BI(wrap_add), BB(or_i)},
    {EwOp::kSub, BF(sub_f), BI(wrap_sub), NONE},
    {EwOp::kMul, BF(mul_f), BI(wrap_mul), BB(and_i)},
    {EwOp::kDiv, BF(div_f), NONE_I, NONE},
    {EwOp::kPow, BF(pow_f), BI(pow_int), NONE},
    {EwOp::kMax, BF(max_f), BI(max_i), BB(or_i)},
    {EwOp::kMin, BF(min_f), BI(min_i), BB(and_i)},
    {EwOp::kRem, BF(rem_f32), BI(rem_int), NONE},
    {EwOp::kFloorDiv, BF(floordiv_f32), BI(floordiv_int), NONE},
    {EwOp::kAnd, NONE, BI(and_i), BB(and_i)},
    {EwOp::kOr, NONE, BI(or_i), BB(or_i)},
    {EwOp::kXor, NONE, BI(xor_i), BB(xor_i)},
    {EwOp::kEq, CMP(eq)},
    {EwOp::kNe, CMP(ne)},
    {EwOp::kLt, CMP(lt)},
    {EwOp::kLe, CMP(le)},
    {EwOp::kGt, CMP(gt)},
    {EwOp::kGe, CMP(ge)},
    {EwOp::kSelect, select_tile<float>, select_tile<int32_t>, select_tile<int64_t>, select_tile<uint8_t>},
    {EwOp::kConvert, NONE, NONE_I, NONE},
    {EwOp::kReduceSum, NONE, NONE_I, NONE},
    {EwOp::kReduceProd, NONE, NONE_I, NONE},
    {EwOp::kReduceMax, NONE, NONE_I, NONE},
    {EwOp::kReduceMin, NONE, NONE_I, NONE},
    {EwOp::kGelu, UF(gelu_f32), NONE_I, NONE},
    {EwOp::kSilu, UF(silu_f32), NONE_I, NONE},
    {EwOp::kExpm1, UF(expm1_f32), NONE_I, NONE},
};
#undef UF
#undef UI
#undef UB
#undef BF
#undef BI
#undef BB
#undef CMP
#undef NONE
#undef NONE_I

// Every op has a row, in enum order, with a loop exactly for the kinds its table row allows (the
// forms without tile loops have none).
static_assert(sizeof(kRows) / sizeof(kRows[0]) == rt::kNumEwOps, "every EwOp needs a row in the CPU table");
constexpr bool cpu_rows_match_table() {
  for (size_t i = 0; i < rt::kNumEwOps; ++i) {
    const CpuRow& r = kRows[i];
    const rt::EwOpInfo& info = rt::kEwOps[i];
    if (static_cast<size_t>(r.op) != i) return false;
    const rt::EwForm form = info.form;
    const bool tiled = form == rt::EwForm::kUnary || form == rt::EwForm::kBinary || form == rt::EwForm::kCompare ||
                       form == rt::EwForm::kSelect;
    const bool f = tiled && (info.kinds & rt::ew_kinds::F), in = tiled && (info.kinds & rt::ew_kinds::I),
               b = tiled && (info.kinds & rt::ew_kinds::B);
    if ((r.f32 != nullptr) != f || (r.i32 != nullptr) != in || (r.i64 != nullptr) != in || (r.b != nullptr) != b)
      return false;
  }
  return true;
}
// Sanitizer builds instrument function addresses, which GCC then no longer compares at compile
// time; the ordinary build checks the same table.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static_assert(cpu_rows_match_table(), "the CPU table must define each op exactly on the kinds ew_ops.def allows");
#endif

template <class To, class From>
void convert_loop(int n, To* __restrict o, const From* __restrict a) {
  for (int i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, uint8_t>) o[i] = a[i] != 0;
    else o[i] = static_cast<To>(a[i]);
  }
}

template <class From>
void convert_from(CKind to, int n, void* o, const From* a) {
  switch (to) {
    case CKind::kF32: return convert_loop(n, static_cast<float*>(o), a);
    case CKind::kI32: return convert_loop(n, static_cast<int32_t*>(o), a);
    case CKind::kI64: return convert_loop(n, static_cast<int64_t*>(o), a);
    case CKind::kBool: return convert_loop(n, static_cast<uint8_t*>(o), a);
  }
}

}  // namespace

void apply_op(const rt::Instr& in, CKind k, int n, void* out, const void* a, const void* b,
              const void* c) {
  if (in.op == EwOp::kConvert) {
    const CKind to = compute_kind(in.dtype);
    switch (k) {
      case CKind::kF32: convert_from(to, n, out, static_cast<const float*>(a)); break;
      case CKind::kI32: convert_from(to, n, out, static_cast<const int32_t*>(a)); break;
      case CKind::kI64: convert_from(to, n, out, static_cast<const int64_t*>(a)); break;
      case CKind::kBool: convert_from(to, n, out, static_cast<const uint8_t*>(a)); break;
    }
    narrow_span(in.dtype, n, out);
    return;
  }
  // The shared analysis (fused_analysis.h) admitted only ops defined on `k`: the loop exists.
  const CpuRow& row = kRows[static_cast<size_t>(in.op)];
  const TileFn fn = k == CKind::kF32 ? row.f32 : k == CKind::kI32 ? row.i32 : k == CKind::kI64 ? row.i64 : row.b;
  fn(n, out, a, b, c);
}

// ---- reductions: what each combines is the table's `reduce` column ----

void reduce_init(EwOp op, CKind kind, Scalar& acc) {
  const bool flt = kind == CKind::kF32, boolean = kind == CKind::kBool;
  switch (rt::ew_info(op).reduce) {
    case rt::ReduceKind::kSum: flt ? void(acc.f = 0.0f) : void(acc.i64 = 0); return;
    case rt::ReduceKind::kProd: flt ? void(acc.f = 1.0f) : void(acc.i64 = 1); return;
    case rt::ReduceKind::kMax: flt ? void(acc.f = -INFINITY) : void(acc.i64 = boolean ? 0 : INT64_MIN); return;
    case rt::ReduceKind::kMin: flt ? void(acc.f = INFINITY) : void(acc.i64 = boolean ? 1 : INT64_MAX); return;
    case rt::ReduceKind::kNone: return;  // not a reduction: the analysis never lets one here
  }
}

namespace {
// Eight independent lanes: vectorisable and more accurate than one running sum.
template <class F>
float reduce_lanes_f32(const float* a, int n, float init, F f) {
  float lanes[8];
  for (float& l : lanes) l = init;
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] = f(lanes[j], a[i + j]);
  for (; i < n; ++i) lanes[0] = f(lanes[0], a[i]);
  float r = init;
  for (float l : lanes) r = f(r, l);
  return r;
}

template <class T>
void reduce_int(rt::ReduceKind how, const T* a, int n, int64_t& acc) {
  int64_t r = acc;
  switch (how) {
    case rt::ReduceKind::kSum: for (int i = 0; i < n; ++i) r = wrap_add<int64_t>(r, a[i]); break;
    case rt::ReduceKind::kProd: for (int i = 0; i < n; ++i) r = wrap_mul<int64_t>(r, a[i]); break;
    case rt::ReduceKind::kMax: for (int i = 0; i < n; ++i) r = r > a[i] ? r : a[i]; break;
    case rt::ReduceKind::kMin: for (int i = 0; i < n; ++i) r = r < a[i] ? r : a[i]; break;
    case rt::ReduceKind::kNone: break;
  }
  acc = r;
}
}  // namespace

void reduce_tile(EwOp op, CKind kind, const void* src, int n, Scalar& acc) {
  const rt::ReduceKind how = rt::ew_info(op).reduce;
  switch (kind) {
    case CKind::kF32: {
      auto* a = static_cast<const float*>(src);
      switch (how) {
        case rt::ReduceKind::kSum: acc.f += reduce_lanes_f32(a, n, 0.0f, add_f); return;
        case rt::ReduceKind::kProd: acc.f *= reduce_lanes_f32(a, n, 1.0f, mul_f); return;
        case rt::ReduceKind::kMax: acc.f = max_f(acc.f, reduce_lanes_f32(a, n, -INFINITY, max_f)); return;
        case rt::ReduceKind::kMin: acc.f = min_f(acc.f, reduce_lanes_f32(a, n, INFINITY, min_f)); return;
        case rt::ReduceKind::kNone: return;
      }
      return;
    }
    case CKind::kI32: return reduce_int(how, static_cast<const int32_t*>(src), n, acc.i64);
    case CKind::kI64: return reduce_int(how, static_cast<const int64_t*>(src), n, acc.i64);
    case CKind::kBool: return reduce_int(how, static_cast<const uint8_t*>(src), n, acc.i64);
  }
}

void reduce_finish(CKind kind, DType dtype, const Scalar& acc, void* dst) {
  switch (kind) {
    case CKind::kF32: *static_cast<float*>(dst) = acc.f; break;
    case CKind::kI32: *static_cast<int32_t*>(dst) = static_cast<int32_t>(acc.i64); break;
    case CKind::kI64: *static_cast<int64_t*>(dst) = acc.i64; break;
    case CKind::kBool: *static_cast<uint8_t*>(dst) = acc.i64 != 0; break;
  }
  narrow_span(dtype, 1, dst);
}

}  // namespace tripy::cpu
