// Pass tests, text in and text out: FlatIR text parsed and verified, a pass or fusion planning run
// on it, the result printed; and the edits by which a test derives one graph from another.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"

namespace tripy::flat {

// `text` with its first `from` replaced by `to`; the test fails where `from` is missing.
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `text` with each `{CONV}` the attributes of a convolution of stride 1 without padding.
inline std::string with_conv(std::string text) {
  constexpr const char* kConv =
      "{stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}";
  for (size_t at; (at = text.find("{CONV}")) != std::string::npos;) text.replace(at, 6, kConv);
  return text;
}

// The graph of `text`, parsed and verified; an empty graph, and a failed test, where it is not.
inline Graph parsed(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return Graph();
  Status st = verify(*g);
  EXPECT_TRUE(st.ok()) << st.message();
  return std::move(g.value());
}

// Why the graph of `text` is rejected: the verifier's message, or "parse error: ..." where it does
// not parse, or "verifies" where it is accepted (which a test expecting a message then fails on).
inline std::string verify_error(const std::string& text) {
  auto g = parse_graph(text);
  if (!g.ok()) return "parse error: " + g.status().message();
  Status st = verify(*g);
  return st.ok() ? std::string("verifies") : st.message();
}

// A pass's result printed: "unchanged" for nullopt, else the graph once it verifies and its text
// parses back to itself (what failed otherwise).
inline std::string result_text(const std::optional<Graph>& out) {
  if (!out) return "unchanged";
  if (Status st = verify(*out); !st.ok()) return "verify error after the pass: " + st.message() + "\n" + out->str();
  const std::string printed = out->str();
  auto again = parse_graph(printed);
  if (!again.ok() || again->str() != printed) return "does not round-trip:\n" + printed;
  return printed;
}

// `pass` (Graph -> std::optional<Graph>) run on the graph `text`: result_text of what it returns,
// or why `text` does not parse or verify.
template <class Pass>
std::string pass_on_text(const std::string& text, Pass&& pass) {
  auto g = parse_graph(text);
  if (!g.ok()) return "parse error: " + g.status().message();
  if (Status st = verify(*g); !st.ok()) return "verify error: " + st.message();
  return result_text(pass(*g));
}

// fold_attention_layouts, then DCE (of the transposes it folded) where its result verifies; where
// it does not, the result as it is, for result_text to say why.
inline std::optional<Graph> layouts_folded(const Graph& g) {
  std::optional<Graph> out = fold_attention_layouts(g);
  if (out && verify(*out).ok()) out = dce(*out);
  return out;
}

// The fusion plan of the graph `text` after canonicalize_reductions (the graph fusion plans). A
// graph that does not parse, verify or plan fails the test (a plan's text would otherwise just lack
// what a test looks for): the text says why.
inline std::string plan_of(const std::string& text) {
  auto failed = [](const std::string& why) {
    ADD_FAILURE() << why;
    return why;
  };
  auto g = parse_graph(text);
  if (!g.ok()) return failed("parse error: " + g.status().message());
  if (Status st = verify(*g); !st.ok()) return failed("verify error: " + st.message());
  const Graph c = canonicalize_reductions(*g);
  auto plan = plan_fusion(c);
  if (!plan.ok()) return failed("fusion error: " + plan.status().message());
  return fusion_plan_str(c, *plan);
}

}  // namespace tripy::flat
