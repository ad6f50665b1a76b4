#include "common/random.h"

#include <cmath>

namespace tripy {
namespace {

// The round's multipliers and the key's increments (the golden ratio's and sqrt(3) - 1's bits).
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

std::array<uint32_t, 4> round(const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0], p1 = uint64_t{kM1} * c[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

// 24 bits of a word as a multiple of 2^-24 in [0, 1), or with `open_low` in (0, 1].
double unit(uint32_t word, bool open_low = false) { return ((word >> 8) + (open_low ? 1 : 0)) * 0x1p-24; }

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) key = {key[0] + kW0, key[1] + kW1};
    counter = round(counter, key);
  }
  return counter;
}

std::array<double, 4> random_block(RandomKind kind, uint64_t seed, uint64_t b) {
  // The kind is the counter's third word: a seed's uniform and normal streams are unrelated.
  const std::array<uint32_t, 4> w = philox4x32_10(
      {static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), static_cast<uint32_t>(kind), 0u},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  if (kind == RandomKind::kUniform) return {unit(w[0]), unit(w[1]), unit(w[2]), unit(w[3])};
  std::array<double, 4> out{};
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int pair = 0; pair < 2; ++pair) {
    const double r = std::sqrt(-2.0 * std::log(unit(w[2 * pair], true)));
    const double angle = kTwoPi * unit(w[2 * pair + 1]);
    out[2 * pair] = r * std::cos(angle), out[2 * pair + 1] = r * std::sin(angle);
  }
  return out;
}

}  // namespace tripy
