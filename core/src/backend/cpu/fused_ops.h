// The fused interpreter's instruction set on tiles: how each EwOp computes over n contiguous
// values of a compute type, plus the conversions between memory dtypes and compute types.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/program.h"

namespace tripy::cpu {

// Elements per tile: a few registers of a tile stay in L1 while each instruction streams over it.
inline constexpr int kTile = 512;
// Bytes reserved for one register's tile (the widest compute type is 8 bytes).
inline constexpr int kTileBytes = kTile * 8;

// The type a register is held in while computing: narrow floats widen to float32, narrow ints to
// int32, bool is one byte holding 0 or 1.
using CKind = rt::ComputeKind;
using rt::compute_kind;

// One scalar of any compute kind (row-level registers and reduction accumulators).
union Scalar {
  float f;
  int32_t i32;
  int64_t i64;
  uint8_t b;
};

// Computes n results of a non-load, non-reduction instruction. `operand` is the kind of a and b
// (for kSelect: of b and c; a is bool), one the op is defined on (rt::analyze_fused_program
// checks that). out never aliases an operand.
void apply_op(const rt::Instr& instr, CKind operand, int n, void* out, const void* a,
              const void* b, const void* c);

// Reductions over tiles: float kinds accumulate in float32, the others in int64.
void reduce_init(rt::EwOp op, CKind kind, Scalar& acc);
void reduce_tile(rt::EwOp op, CKind kind, const void* src, int n, Scalar& acc);
// Writes the accumulator as one value of `kind` (and rounds it to `dtype`).
void reduce_finish(CKind kind, DType dtype, const Scalar& acc, void* dst);

// Memory <-> compute conversions. `stride` is in elements: 1 contiguous, 0 splat, else gather.
void load_span(DType src_dtype, const void* base, int64_t offset, int64_t stride, int n,
               void* dst);
void store_span(DType dst_dtype, void* base, int64_t offset, const void* src, int n);
// Index values start, start + stride, ... as `kind`.
void iota_span(CKind kind, int64_t start, int64_t stride, int n, void* dst);
void splat_span(CKind kind, const void* scalar, int n, void* dst);
// Rounds values held in compute kind to what `dtype` can represent (float16 precision, int8 wrap).
void narrow_span(DType dtype, int n, void* data);
// kConst: the immediate as one value of `dtype`'s compute kind.
void const_value(DType dtype, double imm, void* dst);

inline int ckind_size(CKind k) {
  return k == CKind::kI64 ? 8 : k == CKind::kBool ? 1 : 4;
}

}  // namespace tripy::cpu
