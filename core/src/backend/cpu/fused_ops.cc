// Tile loops for every EwOp, dispatched by one switch per operand class. The loops are plain
// indexed loops over restrict pointers so the compiler vectorises them; semantics follow numpy.

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

template <class T, class F>
inline void map1(int n, T* __restrict o, const T* __restrict a, F f) {
  for (int i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <class R, class T, class F>
inline void map2(int n, R* __restrict o, const T* __restrict a, const T* __restrict b, F f) {
  for (int i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}

void unary_f32(EwOp op, int n, float* o, const float* a) {
  switch (op) {
    case EwOp::kNeg: return map1(n, o, a, [](float x) { return -x; });
    case EwOp::kAbs: return map1(n, o, a, [](float x) { return std::fabs(x); });
    case EwOp::kExp: return map1(n, o, a, exp_f32);
    case EwOp::kLog: return map1(n, o, a, [](float x) { return std::log(x); });
    case EwOp::kSqrt: return map1(n, o, a, [](float x) { return std::sqrt(x); });
    case EwOp::kRsqrt: return map1(n, o, a, [](float x) { return 1.0f / std::sqrt(x); });
    case EwOp::kTanh: return map1(n, o, a, tanh_f32);
    case EwOp::kSigmoid: return map1(n, o, a, [](float x) { return 1.0f / (1.0f + exp_f32(-x)); });
    case EwOp::kErf: return map1(n, o, a, erf_f32);
    case EwOp::kSin: return map1(n, o, a, [](float x) { return std::sin(x); });
    case EwOp::kCos: return map1(n, o, a, [](float x) { return std::cos(x); });
    case EwOp::kFloor: return map1(n, o, a, [](float x) { return std::floor(x); });
    case EwOp::kCeil: return map1(n, o, a, [](float x) { return std::ceil(x); });
    case EwOp::kRound: return map1(n, o, a, [](float x) { return std::nearbyint(x); });
    case EwOp::kSign:
      return map1(n, o, a, [](float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); });
    default: return;
  }
}

template <class T>
void unary_int(EwOp op, int n, T* o, const T* a) {
  switch (op) {
    case EwOp::kNeg: return map1(n, o, a, [](T x) { return wrap_sub<T>(0, x); });
    case EwOp::kAbs: return map1(n, o, a, [](T x) { return x < 0 ? wrap_sub<T>(0, x) : x; });
    case EwOp::kSign: return map1(n, o, a, [](T x) { return T((x > 0) - (x < 0)); });
    case EwOp::kNot: return map1(n, o, a, [](T x) { return T(~x); });
    case EwOp::kFloor: case EwOp::kCeil: case EwOp::kRound:
      return map1(n, o, a, [](T x) { return x; });
    default: return;
  }
}

void unary_bool(EwOp op, int n, uint8_t* o, const uint8_t* a) {
  switch (op) {
    case EwOp::kNot: return map1(n, o, a, [](uint8_t x) { return uint8_t(x ^ 1); });
    case EwOp::kAbs: case EwOp::kFloor: case EwOp::kCeil: case EwOp::kRound: case EwOp::kSign:
      return map1(n, o, a, [](uint8_t x) { return x; });
    default: return;
  }
}

template <class T>
void compare(EwOp op, int n, uint8_t* o, const T* a, const T* b) {
  switch (op) {
    case EwOp::kEq: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x == y); });
    case EwOp::kNe: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x != y); });
    case EwOp::kLt: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x < y); });
    case EwOp::kLe: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x <= y); });
    case EwOp::kGt: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x > y); });
    case EwOp::kGe: return map2(n, o, a, b, [](T x, T y) { return uint8_t(x >= y); });
    default: return;
  }
}

void binary_f32(EwOp op, int n, float* o, const float* a, const float* b) {
  switch (op) {
    case EwOp::kAdd: return map2(n, o, a, b, [](float x, float y) { return x + y; });
    case EwOp::kSub: return map2(n, o, a, b, [](float x, float y) { return x - y; });
    case EwOp::kMul: return map2(n, o, a, b, [](float x, float y) { return x * y; });
    case EwOp::kDiv: return map2(n, o, a, b, [](float x, float y) { return x / y; });
    case EwOp::kPow: return map2(n, o, a, b, [](float x, float y) { return std::pow(x, y); });
    // NaN-propagating like numpy.maximum / minimum.
    case EwOp::kMax: return map2(n, o, a, b, [](float x, float y) { return (x > y || x != x) ? x : y; });
    case EwOp::kMin: return map2(n, o, a, b, [](float x, float y) { return (x < y || x != x) ? x : y; });
    case EwOp::kRem: return map2(n, o, a, b, rem_f32);
    case EwOp::kFloorDiv: return map2(n, o, a, b, floordiv_f32);
    default: return;
  }
}

template <class T>
void binary_int(EwOp op, int n, T* o, const T* a, const T* b) {
  switch (op) {
    case EwOp::kAdd: return map2(n, o, a, b, wrap_add<T>);
    case EwOp::kSub: return map2(n, o, a, b, wrap_sub<T>);
    case EwOp::kMul: return map2(n, o, a, b, wrap_mul<T>);
    case EwOp::kPow: return map2(n, o, a, b, pow_int<T>);
    case EwOp::kMax: return map2(n, o, a, b, [](T x, T y) { return x > y ? x : y; });
    case EwOp::kMin: return map2(n, o, a, b, [](T x, T y) { return x < y ? x : y; });
    case EwOp::kRem: return map2(n, o, a, b, rem_int<T>);
    case EwOp::kFloorDiv: return map2(n, o, a, b, floordiv_int<T>);
    case EwOp::kAnd: return map2(n, o, a, b, [](T x, T y) { return T(x & y); });
    case EwOp::kOr: return map2(n, o, a, b, [](T x, T y) { return T(x | y); });
    case EwOp::kXor: return map2(n, o, a, b, [](T x, T y) { return T(x ^ y); });
    default: return;
  }
}

// bool arithmetic as numpy: + is or, * is and, max is or, min is and.
void binary_bool(EwOp op, int n, uint8_t* o, const uint8_t* a, const uint8_t* b) {
  switch (op) {
    case EwOp::kAdd: case EwOp::kOr: case EwOp::kMax:
      return map2(n, o, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x | y); });
    case EwOp::kMul: case EwOp::kAnd: case EwOp::kMin:
      return map2(n, o, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x & y); });
    case EwOp::kXor: case EwOp::kNe:
      return map2(n, o, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x ^ y); });
    default: return;
  }
}

template <class T>
void select(int n, T* __restrict o, const uint8_t* __restrict c, const T* __restrict a,
            const T* __restrict b) {
  for (int i = 0; i < n; ++i) o[i] = c[i] ? a[i] : b[i];
}

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

bool is_unary(EwOp op) { return op >= EwOp::kNeg && op <= EwOp::kNot; }
bool is_binary(EwOp op) { return op >= EwOp::kAdd && op <= EwOp::kXor; }
bool is_compare(EwOp op) { return op >= EwOp::kEq && op <= EwOp::kGe; }

}  // namespace

std::string check_op(const rt::Instr& in, CKind k) {
  const EwOp op = in.op;
  if (op == EwOp::kSelect || op == EwOp::kConvert || op == EwOp::kLoad || op == EwOp::kConst ||
      op == EwOp::kIota || is_compare(op))
    return "";
  if (op >= EwOp::kReduceSum && op <= EwOp::kReduceMin) return "";
  const bool flt = k == CKind::kF32, boolean = k == CKind::kBool;
  if (is_unary(op)) {
    if (op == EwOp::kNot) return flt ? "kNot needs a bool or integer operand" : "";
    bool int_ok = op == EwOp::kNeg || op == EwOp::kAbs || op == EwOp::kSign || op == EwOp::kFloor ||
                  op == EwOp::kCeil || op == EwOp::kRound;
    if (flt || (int_ok && !boolean) ||
        (boolean && (op == EwOp::kAbs || op == EwOp::kSign || op == EwOp::kFloor ||
                     op == EwOp::kCeil || op == EwOp::kRound)))
      return "";
    return "needs a floating-point operand";
  }
  if (is_binary(op)) {
    if (op == EwOp::kAnd || op == EwOp::kOr || op == EwOp::kXor)
      return flt ? "needs bool or integer operands" : "";
    if (op == EwOp::kDiv && !flt) return "kDiv on integers is undefined (use kFloorDiv)";
    if (boolean && !(op == EwOp::kAdd || op == EwOp::kMul || op == EwOp::kMax || op == EwOp::kMin))
      return "is not defined on bool operands";
    return "";
  }
  return "unknown instruction";
}

void apply_op(const rt::Instr& in, CKind k, int n, void* out, const void* a, const void* b,
              const void* c) {
  const EwOp op = in.op;
  if (is_unary(op)) {
    switch (k) {
      case CKind::kF32: return unary_f32(op, n, static_cast<float*>(out), static_cast<const float*>(a));
      case CKind::kI32: return unary_int(op, n, static_cast<int32_t*>(out), static_cast<const int32_t*>(a));
      case CKind::kI64: return unary_int(op, n, static_cast<int64_t*>(out), static_cast<const int64_t*>(a));
      case CKind::kBool: return unary_bool(op, n, static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a));
    }
  }
  if (is_binary(op)) {
    switch (k) {
      case CKind::kF32:
        return binary_f32(op, n, static_cast<float*>(out), static_cast<const float*>(a), static_cast<const float*>(b));
      case CKind::kI32:
        return binary_int(op, n, static_cast<int32_t*>(out), static_cast<const int32_t*>(a), static_cast<const int32_t*>(b));
      case CKind::kI64:
        return binary_int(op, n, static_cast<int64_t*>(out), static_cast<const int64_t*>(a), static_cast<const int64_t*>(b));
      case CKind::kBool:
        return binary_bool(op, n, static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b));
    }
  }
  auto* o8 = static_cast<uint8_t*>(out);
  if (is_compare(op)) {
    switch (k) {
      case CKind::kF32: return compare(op, n, o8, static_cast<const float*>(a), static_cast<const float*>(b));
      case CKind::kI32: return compare(op, n, o8, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b));
      case CKind::kI64: return compare(op, n, o8, static_cast<const int64_t*>(a), static_cast<const int64_t*>(b));
      case CKind::kBool: return compare(op, n, o8, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b));
    }
  }
  if (op == EwOp::kSelect) {
    auto* cond = static_cast<const uint8_t*>(a);
    switch (k) {
      case CKind::kF32: return select(n, static_cast<float*>(out), cond, static_cast<const float*>(b), static_cast<const float*>(c));
      case CKind::kI32: return select(n, static_cast<int32_t*>(out), cond, static_cast<const int32_t*>(b), static_cast<const int32_t*>(c));
      case CKind::kI64: return select(n, static_cast<int64_t*>(out), cond, static_cast<const int64_t*>(b), static_cast<const int64_t*>(c));
      case CKind::kBool: return select(n, o8, cond, static_cast<const uint8_t*>(b), static_cast<const uint8_t*>(c));
    }
  }
  if (op == EwOp::kConvert) {
    const CKind to = compute_kind(in.dtype);
    switch (k) {
      case CKind::kF32: convert_from(to, n, out, static_cast<const float*>(a)); break;
      case CKind::kI32: convert_from(to, n, out, static_cast<const int32_t*>(a)); break;
      case CKind::kI64: convert_from(to, n, out, static_cast<const int64_t*>(a)); break;
      case CKind::kBool: convert_from(to, n, out, static_cast<const uint8_t*>(a)); break;
    }
    narrow_span(in.dtype, n, out);
  }
}

// ---- reductions ----

void reduce_init(EwOp op, CKind kind, Scalar& acc) {
  if (kind == CKind::kF32) {
    acc.f = op == EwOp::kReduceSum ? 0.0f
          : op == EwOp::kReduceProd ? 1.0f
          : op == EwOp::kReduceMax ? -INFINITY : INFINITY;
  } else {
    acc.i64 = op == EwOp::kReduceSum ? 0
            : op == EwOp::kReduceProd ? 1
            : op == EwOp::kReduceMax ? INT64_MIN : INT64_MAX;
    if (kind == CKind::kBool && op == EwOp::kReduceMax) acc.i64 = 0;
    if (kind == CKind::kBool && op == EwOp::kReduceMin) acc.i64 = 1;
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
void reduce_int(EwOp op, const T* a, int n, int64_t& acc) {
  int64_t r = acc;
  switch (op) {
    case EwOp::kReduceSum: for (int i = 0; i < n; ++i) r = wrap_add<int64_t>(r, a[i]); break;
    case EwOp::kReduceProd: for (int i = 0; i < n; ++i) r = wrap_mul<int64_t>(r, a[i]); break;
    case EwOp::kReduceMax: for (int i = 0; i < n; ++i) r = r > a[i] ? r : a[i]; break;
    case EwOp::kReduceMin: for (int i = 0; i < n; ++i) r = r < a[i] ? r : a[i]; break;
    default: break;
  }
  acc = r;
}
}  // namespace

void reduce_tile(EwOp op, CKind kind, const void* src, int n, Scalar& acc) {
  switch (kind) {
    case CKind::kF32: {
      auto* a = static_cast<const float*>(src);
      auto add = [](float x, float y) { return x + y; };
      auto mul = [](float x, float y) { return x * y; };
      auto mx = [](float x, float y) { return (x > y || x != x) ? x : y; };
      auto mn = [](float x, float y) { return (x < y || x != x) ? x : y; };
      if (op == EwOp::kReduceSum) acc.f += reduce_lanes_f32(a, n, 0.0f, add);
      else if (op == EwOp::kReduceProd) acc.f *= reduce_lanes_f32(a, n, 1.0f, mul);
      else if (op == EwOp::kReduceMax) acc.f = mx(acc.f, reduce_lanes_f32(a, n, -INFINITY, mx));
      else acc.f = mn(acc.f, reduce_lanes_f32(a, n, INFINITY, mn));
      return;
    }
    case CKind::kI32: return reduce_int(op, static_cast<const int32_t*>(src), n, acc.i64);
    case CKind::kI64: return reduce_int(op, static_cast<const int64_t*>(src), n, acc.i64);
    case CKind::kBool: return reduce_int(op, static_cast<const uint8_t*>(src), n, acc.i64);
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
