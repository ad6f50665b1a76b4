// fold_update_windows (flat/passes/update_windows.cc): a KV-cache write of a head range of a
// projection reads the projection in place; slices whose rows are not one contiguous run stay.
#include "pass_text.h"

namespace tripy::flat {
namespace {

// A decode step's write of kv heads 4..5 of a (B, T, 6 heads, 16) projection into a (B, 64, 2, 16)
// cache at a position read at run time; B and T dynamic.
constexpr const char* kHeadWindow = R"(sym b [1, 2, 4]
sym t [1, 1, 8]
%0 : f32[b, 64, 2, 16] = parameter() {index = 0}
%1 : f32[b, t, 6, 16] = parameter() {index = 1}
%2 : i32[] = parameter() {index = 2}
%3 : f32[b, t, 2, 16] = slice(%1) {starts = [0, 0, 4, 0], limits = [b, t, 6, 16], steps = [1, 1, 1, 1]}
%4 : f32[b, 64, 2, 16] = update_slice(%0, %3, %2) {dims = [1]}
return %4
)";

TEST(FoldUpdateWindows, AHeadRangeOfAProjectionIsReadInPlace) {
  EXPECT_EQ(pass_on_text(kHeadWindow, fold_update_windows), R"(sym b [1, 2, 4]
sym t [1, 1, 8]
%0 : f32[b, 64, 2, 16] = parameter() {index = 0}
%1 : f32[b, t, 6, 16] = parameter() {index = 1}
%2 : i32[] = parameter() {index = 2}
%3 : f32[b, 64, 2, 16] = update_slice(%0, %1, %2) {dims = [1, 64]}
return %3
)");
}

TEST(FoldUpdateWindows, SlicesWhoseRowsAreNotOneRunStay) {
  // A window of the positions (the update's axis), a step, and a cut inside the head size (each
  // row two runs: the cache's 2 heads of 16 from 2 heads of 32) are left alone.
  struct Case {
    const char *x, *update, *starts, *limits, *steps;
  };
  for (const Case& c : {Case{"[2, 8, 6, 16]", "[2, 4, 2, 16]", "[0, 4, 4, 0]", "[2, 8, 6, 16]", "[1, 1, 1, 1]"},
                        Case{"[2, 8, 4, 16]", "[2, 8, 2, 16]", "[0, 0, 0, 0]", "[2, 8, 4, 16]", "[1, 1, 2, 1]"},
                        Case{"[2, 8, 2, 32]", "[2, 8, 2, 16]", "[0, 0, 0, 16]", "[2, 8, 2, 32]", "[1, 1, 1, 1]"}}) {
    const std::string text = std::string("%0 : f32[2, 64, 2, 16] = parameter() {index = 0}\n%1 : f32") + c.x +
                             " = parameter() {index = 1}\n%2 : i32[] = parameter() {index = 2}\n%3 : f32" + c.update +
                             " = slice(%1) {starts = " + c.starts + ", limits = " + c.limits + ", steps = " + c.steps +
                             "}\n%4 : f32[2, 64, 2, 16] = update_slice(%0, %3, %2) {dims = [1]}\nreturn %4\n";
    EXPECT_EQ(pass_on_text(text, fold_update_windows), "unchanged") << text;
  }
}

TEST(FoldUpdateWindows, VerifyRejectsAWindowPastTheRow) {
  EXPECT_EQ(pass_on_text(R"(%0 : f32[2, 64, 2, 16] = parameter() {index = 0}
%1 : f32[2, 1, 6, 16] = parameter() {index = 1}
%2 : i32[] = parameter() {index = 2}
%3 : f32[2, 64, 2, 16] = update_slice(%0, %1, %2) {dims = [1, 65]}
return %3
)",
                         fold_update_windows),
            "verify error: invalid FlatIR: %3 = update_slice: reads a window past the end of the update's rows");
}

}  // namespace
}  // namespace tripy::flat
