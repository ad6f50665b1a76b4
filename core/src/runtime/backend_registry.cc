// Which backend (and which builder) serves a device kind. The runtime asks here and nowhere else, so a build without a
// backend (or a machine without its device) degrades to a clear "unavailable" error upstream.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/backend.h"

namespace tripy::rt {
namespace {

constexpr size_t kKinds = 2;  // Device::Kind: kCpu, kGpu

size_t index_of(Device::Kind kind) { return kind == Device::Kind::kCpu ? 0 : 1; }

// Function-local, so registrations from other libraries' static initialisers find it built.
std::array<std::atomic<BackendFactory>, kKinds>& factories() {
  static std::array<std::atomic<BackendFactory>, kKinds> table{};
  return table;
}

std::array<std::atomic<BuilderFactory>, kKinds>& builder_factories() {
  static std::array<std::atomic<BuilderFactory>, kKinds> table{};
  return table;
}

}  // namespace

bool register_backend(Device::Kind kind, BackendFactory factory) {
  factories()[index_of(kind)].store(factory);
  return true;
}

Backend* backend_for(Device::Kind kind) {
  BackendFactory factory = factories()[index_of(kind)].load();
  Backend* backend = factory != nullptr ? factory() : nullptr;
  return backend != nullptr && backend->available() ? backend : nullptr;
}

bool register_builder(Device::Kind kind, BuilderFactory factory) {
  builder_factories()[index_of(kind)].store(factory);
  return true;
}

Builder* builder_for(Device::Kind kind) {
  BuilderFactory factory = builder_factories()[index_of(kind)].load();
  return factory != nullptr ? factory() : nullptr;
}

PassRules pass_rules_for(Device::Kind kind) {
  Builder* builder = builder_for(kind);
  PassRules rules = builder ? builder->pass_rules() : PassRules{};
  auto env_is = [](const char* name, const char* value) {
    const char* env = std::getenv(name);
    return env && std::strcmp(env, value) == 0;
  };
  if (env_is("TRIPY_CHANNELS_LAST", "0")) rules.channels_last_dtypes.clear();
  if (env_is("TRIPY_CHANNELS_LAST", "1")) {
    rules.channels_last_dtypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
    rules.channels_last_min_chain = 1;
  }
  if (env_is("TRIPY_QUANTIZED_DOT", "0")) rules.low_precision_gemms = [] { return LowPrecisionGemms{}; };
  if (env_is("TRIPY_WEIGHT_ONLY_DOT", "0")) rules.weight_only_dot_max_rows = 0;
  if (env_is("TRIPY_WEIGHT_ONLY_DOT", "1")) rules.weight_only_dot_max_rows = -1;
  if (env_is("TRIPY_WEIGHT_ONLY_FOLD", "0")) rules.weight_only_fold = [](const WeightOnlyFold&) { return false; };
  if (env_is("TRIPY_WEIGHT_ONLY_GATE", "0"))
    rules.weight_only_fold = [rule = rules.weight_only_fold](const WeightOnlyFold& f) {
      return !f.gated && !f.gate_output && (!rule || rule(f));
    };
  return rules;
}

}  // namespace tripy::rt
