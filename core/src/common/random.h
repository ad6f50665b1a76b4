// Seeded random values (tp.random): Philox4x32-10, the counter-based generator of Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3" (SC 2011). Value i of a stream depends on the
// seed, the stream's kind and i alone: any part of a tensor can be made without the rest, and
// every machine makes the same values.
#pragma once
#include <array>
#include <cstdint>

namespace tripy {

// The four words Philox4x32 (10 rounds) makes of `counter` under `key`.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

enum class RandomKind : uint8_t { kUniform, kNormal };
// Values 4 b to 4 b + 3 of stream (seed, kind): kUniform in [0, 1), 24 random bits each (exact in
// float32); kNormal standard normal, each pair by the Box-Muller transform of two such uniforms
// (the first in (0, 1]), in double.
std::array<double, 4> random_block(RandomKind kind, uint64_t seed, uint64_t b);

}  // namespace tripy
