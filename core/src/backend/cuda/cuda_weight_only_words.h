// The words of a weight-only launch (weight_only_frag.cuh's WoArgs, then a folded product's
// WoFold), and the fold entry points' name suffixes: shared by the launches of
// cuda_weight_only_dot.cc and the folded products' of cuda_weight_only_fold.cc.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda::weight_only_words {

enum {
  kWordOut, kWordX, kWordW, kWordScale, kWordZero, kWordRows, kWordN, kWordK, kWordRowBytes, kWordGroups,
  kWordGroup, kWordSplit, kWordNBlocks, kWordVec, kWordMmaSplit, kWordMmaBlocks, kWords
};
// A folded product's words after the problem's (weight_only_frag.cuh's WoFold).
enum { kWordGamma = kWords, kWordResidual, kWordGammaF32, kWordEps, kWordGate, kFoldWords };
inline constexpr const char* kFoldSuffix = "_fold";
inline constexpr const char* kFoldRowsSuffix = "_fold_rows";
// The one-row K-sliced tile's fold entry points, one a fold (WO_FOLD_NORM, WO_FOLD_RESIDUAL,
// WO_FOLD_GATE; the norm's and the gate's together "_norm_gate").
inline constexpr const char* kFoldNormSuffix = "_norm";
inline constexpr const char* kFoldResidualSuffix = "_residual";
inline constexpr const char* kFoldGateSuffix = "_gate";
// Beside the split in kWordMmaSplit's low byte: the weight is a program constant, so the ring may
// copy its first steps before it waits for the previous kernel (weight_only_dot.cuh's wo_early).
inline constexpr int64_t kMmaSplitEarly = int64_t{1} << 8;

}  // namespace tripy::rt::cuda::weight_only_words
