// libFuzzer harness: the FlatIR text parser (the form pass tests are written in) and the
// verifier behind it. Whatever parses and verifies must print and parse back to the same text.
#include <cstdlib>
#include <string_view>

#include "flat/ir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // lines, not volume, are what the parser's logic is about
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tripy::StatusOr<tripy::flat::Graph> g = tripy::flat::parse_graph(text);
  if (!g.ok() || !tripy::flat::verify(*g).ok()) return 0;
  const std::string printed = g->str();
  tripy::StatusOr<tripy::flat::Graph> again = tripy::flat::parse_graph(printed);
  if (!again.ok() || again->str() != printed) std::abort();
  return 0;
}
