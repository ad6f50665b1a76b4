// Moving values between buffers (any storage dtype) and the interpreter's tiles (compute kinds):
// contiguous loads convert in one tight loop, stride-0 loads splat, others gather.
#include <cstring>

#include "backend/cpu/fused_ops.h"
#include "common/half.h"

namespace tripy::cpu {
namespace {


template <class S, class C, class Conv>
void load_typed(const void* base, int64_t offset, int64_t stride, int n, void* dst, Conv conv) {
  const S* src = static_cast<const S*>(base) + offset;
  C* __restrict out = static_cast<C*>(dst);
  if (stride == 1) {
    for (int i = 0; i < n; ++i) out[i] = conv(src[i]);
  } else if (stride == 0) {
    C v = conv(src[0]);
    for (int i = 0; i < n; ++i) out[i] = v;
  } else {
    for (int i = 0; i < n; ++i) out[i] = conv(src[i * stride]);
  }
}

template <class C, class S, class Conv>
void store_typed(void* base, int64_t offset, const void* src, int n, Conv conv) {
  S* __restrict out = static_cast<S*>(base) + offset;
  const C* in = static_cast<const C*>(src);
  for (int i = 0; i < n; ++i) out[i] = conv(in[i]);
}

template <class T>
T same(T v) { return v; }

template <class C>
void splat_typed(void* dst, const void* scalar, int n) {
  C v;
  std::memcpy(&v, scalar, sizeof(C));
  C* out = static_cast<C*>(dst);
  for (int i = 0; i < n; ++i) out[i] = v;
}

template <class C>
void iota_typed(int64_t start, int64_t stride, int n, void* dst) {
  C* out = static_cast<C*>(dst);
  for (int i = 0; i < n; ++i) out[i] = static_cast<C>(start + i * stride);
}

}  // namespace

void load_span(DType src_dtype, const void* base, int64_t offset, int64_t stride, int n,
               void* dst) {
  switch (src_dtype) {
    case DType::kFloat32: {
      if (stride == 1) {
        std::memcpy(dst, static_cast<const float*>(base) + offset, sizeof(float) * n);
        return;
      }
      return load_typed<float, float>(base, offset, stride, n, dst, same<float>);
    }
    case DType::kFloat16:
      return load_typed<uint16_t, float>(base, offset, stride, n, dst, half_to_float);
    case DType::kBFloat16:
      return load_typed<uint16_t, float>(base, offset, stride, n, dst, bfloat16_to_float);
    case DType::kFloat8E4M3:
      return load_typed<uint8_t, float>(base, offset, stride, n, dst, float8_to_float);
    case DType::kInt4: case DType::kInt8:
      return load_typed<int8_t, int32_t>(base, offset, stride, n, dst, [](int8_t v) { return int32_t(v); });
    case DType::kInt32:
      return load_typed<int32_t, int32_t>(base, offset, stride, n, dst, same<int32_t>);
    case DType::kInt64:
      return load_typed<int64_t, int64_t>(base, offset, stride, n, dst, same<int64_t>);
    case DType::kBool:
      return load_typed<uint8_t, uint8_t>(base, offset, stride, n, dst, [](uint8_t v) { return uint8_t(v != 0); });
  }
}

void store_span(DType dst_dtype, void* base, int64_t offset, const void* src, int n) {
  switch (dst_dtype) {
    case DType::kFloat32:
      std::memcpy(static_cast<float*>(base) + offset, src, sizeof(float) * n);
      return;
    case DType::kFloat16: return store_typed<float, uint16_t>(base, offset, src, n, float_to_half);
    case DType::kBFloat16: return store_typed<float, uint16_t>(base, offset, src, n, float_to_bfloat16);
    case DType::kFloat8E4M3: return store_typed<float, uint8_t>(base, offset, src, n, float_to_float8);
    case DType::kInt4:
      return store_typed<int32_t, int8_t>(base, offset, src, n, [](int32_t v) { return wrap_int4(v); });
    case DType::kInt8:
      return store_typed<int32_t, int8_t>(base, offset, src, n, [](int32_t v) { return int8_t(v); });
    case DType::kInt32:
      std::memcpy(static_cast<int32_t*>(base) + offset, src, sizeof(int32_t) * n);
      return;
    case DType::kInt64:
      std::memcpy(static_cast<int64_t*>(base) + offset, src, sizeof(int64_t) * n);
      return;
    case DType::kBool:
      std::memcpy(static_cast<uint8_t*>(base) + offset, src, n);
      return;
  }
}

void iota_span(CKind kind, int64_t start, int64_t stride, int n, void* dst) {
  switch (kind) {
    case CKind::kF32: return iota_typed<float>(start, stride, n, dst);
    case CKind::kI32: return iota_typed<int32_t>(start, stride, n, dst);
    case CKind::kI64: return iota_typed<int64_t>(start, stride, n, dst);
    case CKind::kBool: return iota_typed<uint8_t>(start, stride, n, dst);
  }
}

void splat_span(CKind kind, const void* scalar, int n, void* dst) {
  switch (kind) {
    case CKind::kF32: return splat_typed<float>(dst, scalar, n);
    case CKind::kI32: return splat_typed<int32_t>(dst, scalar, n);
    case CKind::kI64: return splat_typed<int64_t>(dst, scalar, n);
    case CKind::kBool: return splat_typed<uint8_t>(dst, scalar, n);
  }
}

void narrow_span(DType dtype, int n, void* data) {
  auto* f = static_cast<float*>(data);
  auto* i = static_cast<int32_t*>(data);
  switch (dtype) {
    case DType::kFloat16:
      for (int k = 0; k < n; ++k) f[k] = half_to_float(float_to_half(f[k]));
      return;
    case DType::kBFloat16:
      for (int k = 0; k < n; ++k) f[k] = bfloat16_to_float(float_to_bfloat16(f[k]));
      return;
    case DType::kFloat8E4M3:
      for (int k = 0; k < n; ++k) f[k] = float8_to_float(float_to_float8(f[k]));
      return;
    case DType::kInt8:
      for (int k = 0; k < n; ++k) i[k] = static_cast<int8_t>(i[k]);
      return;
    case DType::kInt4:
      for (int k = 0; k < n; ++k) i[k] = wrap_int4(i[k]);
      return;
    default:
      return;  // the compute kind already is the dtype
  }
}

void const_value(DType dtype, double imm, void* dst) {
  switch (compute_kind(dtype)) {
    case CKind::kF32: *static_cast<float*>(dst) = static_cast<float>(imm); break;
    case CKind::kI32: *static_cast<int32_t*>(dst) = rt::saturated_immediate<int32_t>(imm); break;
    case CKind::kI64: *static_cast<int64_t*>(dst) = rt::saturated_immediate<int64_t>(imm); break;
    case CKind::kBool: *static_cast<uint8_t*>(dst) = imm != 0; break;
  }
  narrow_span(dtype, 1, dst);
}

}  // namespace tripy::cpu
