// format_error: the exact text users see for a Status (code lines, carets, notes, extra frames).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "tripy/status.h"

namespace tripy {
namespace {

class FormatErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tripy_format_error_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/example.py";
    std::ofstream(path_) << "import tripy as tp\n"
                            "\n"
                            "\n"
                            "def add(a, b):\n"
                            "    return a + b   \n"
                            "\n"
                            "\n"
                            "def main():\n"
                            "\tprint(add(a, b))\n"
                            "    a = tp.ones((3, 4))\n";
    unsetenv("TRIPY_EXTRA_ERROR_INFORMATION");
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
    unsetenv("TRIPY_EXTRA_ERROR_INFORMATION");
  }
  SourceRef frames(std::initializer_list<SourceFrame> f) { return std::make_shared<SourceInfo>(f); }
  SourceFrame frame(int line, const char* fn, int col, int end_col) {
    return SourceFrame{path_, line, fn, col, end_col};
  }
  std::string dir_, path_;
};

TEST_F(FormatErrorTest, ok_status_formats_as_empty) { EXPECT_EQ(format_error(Status()), ""); }

TEST_F(FormatErrorTest, message_without_location_is_the_message) {
  EXPECT_EQ(format_error(invalid_argument("bad thing")), "bad thing");
}

TEST_F(FormatErrorTest, shows_code_line_with_carets_and_strips_trailing_blanks) {
  Status st = invalid_argument("Shapes do not match.", frames({frame(5, "add", 11, 16)}));
  EXPECT_EQ(format_error(st),
            "--> " + path_ + ":5 in add()\n"
            "      |\n"
            "    5 |     return a + b\n"
            "      |            ^^^^^\n"
            "\n"
            "Shapes do not match.");
}

TEST_F(FormatErrorTest, unknown_columns_give_no_caret_line) {
  Status st = invalid_argument("msg", frames({frame(5, "add", -1, -1)}));
  EXPECT_EQ(format_error(st), "--> " + path_ + ":5 in add()\n      |\n    5 |     return a + b\n\nmsg");
}

TEST_F(FormatErrorTest, carets_keep_tabs_and_are_clamped_to_the_line) {
  Status st = invalid_argument("msg", frames({frame(9, "main", 7, 400)}));
  EXPECT_EQ(format_error(st),
            "--> " + path_ + ":9 in main()\n      |\n    9 | \tprint(add(a, b))\n      | \t      ^^^^^^^^^^\n\nmsg");
}

TEST_F(FormatErrorTest, missing_file_shows_only_the_header) {
  Status st = invalid_argument("msg", frames({SourceFrame{"/nonexistent/x.py", 3, "f", 0, 2}}));
  EXPECT_EQ(format_error(st), "--> /nonexistent/x.py:3 in f()\n\nmsg");
}

TEST_F(FormatErrorTest, line_past_end_of_file_shows_only_the_header) {
  Status st = invalid_argument("msg", frames({frame(99, "f", 0, 2)}));
  EXPECT_EQ(format_error(st), "--> " + path_ + ":99 in f()\n\nmsg");
}

TEST_F(FormatErrorTest, notes_follow_with_their_own_code) {
  Status st = invalid_argument("Broadcast failed.", frames({frame(5, "add", 11, 16)}));
  st.note("Note: This originated from the following expression:", frames({frame(10, "main", 8, 23)}));
  st.note("Plain note.");
  EXPECT_EQ(format_error(st),
            "--> " + path_ + ":5 in add()\n"
            "      |\n"
            "    5 |     return a + b\n"
            "      |            ^^^^^\n"
            "\n"
            "Broadcast failed.\n"
            "\n"
            "Note: This originated from the following expression:\n"
            "--> " + path_ + ":10 in main()\n"
            "      |\n"
            "   10 |     a = tp.ones((3, 4))\n"
            "      |         ^^^^^^^^^^^^^^^\n"
            "\n"
            "Plain note.");
}

TEST_F(FormatErrorTest, outer_frames_only_with_extra_error_information) {
  Status st = invalid_argument("msg", frames({frame(5, "add", 11, 16), frame(9, "main", -1, -1)}));
  const std::string inner = "--> " + path_ + ":5 in add()\n      |\n    5 |     return a + b\n      |            ^^^^^\n";
  EXPECT_EQ(format_error(st), inner + "\nmsg");
  setenv("TRIPY_EXTRA_ERROR_INFORMATION", "", 1);
  EXPECT_EQ(format_error(st), inner + "\nmsg");
  setenv("TRIPY_EXTRA_ERROR_INFORMATION", "all", 1);
  EXPECT_EQ(format_error(st),
            inner + "--> " + path_ + ":9 in main()\n      |\n    9 | \tprint(add(a, b))\n\nmsg");
}

TEST_F(FormatErrorTest, wide_line_numbers_widen_the_gutter) {
  std::string big = dir_ + "/big.py";
  {
    std::ofstream out(big);
    for (int i = 1; i <= 123456; ++i) out << (i == 123456 ? "x = y\n" : "\n");
  }
  Status st = invalid_argument("msg", frames({SourceFrame{big, 123456, "", 4, 5}}));
  EXPECT_EQ(format_error(st), "--> " + big + ":123456\n       |\n123456 | x = y\n       |     ^\n\nmsg");
  std::remove(big.c_str());
}

TEST_F(FormatErrorTest, message_lines_lose_trailing_blanks) {
  EXPECT_EQ(format_error(invalid_argument("a  \nb\t")), "a\nb");
}

}  // namespace
}  // namespace tripy
