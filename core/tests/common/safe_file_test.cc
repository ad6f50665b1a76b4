// common/safe_file.h on its own: what open_regular_file opens and refuses (links only when asked
// to follow them, FIFOs without blocking), and replace_file leaving the target and nothing else.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/safe_file.h"
#include "scratch_dir.h"

namespace tripy {
namespace {

class SafeFile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    std::ofstream(dir_ + "/file") << "data";
  }
  std::vector<std::string> entries() const { return scratch_.entries(); }
  std::string read(const std::string& name, bool follow_links) const {
    RegularFile f = open_regular_file(dir_ + "/" + name, follow_links);
    if (!f.opened()) return f.not_regular() ? "<not regular>" : "<error>";
    std::string out(static_cast<size_t>(f.info.st_size), '\0');
    return read_fully(f.fd.get(), out.data(), out.size()) == static_cast<ssize_t>(out.size()) ? out : "<short>";
  }
  tripy::testing::ScratchDir scratch_{"tripy_safe_file"};
  std::string dir_;
};

TEST_F(SafeFile, opens_regular_files_and_follows_links_only_when_asked) {
  ASSERT_EQ(::symlink("file", (dir_ + "/link").c_str()), 0);
  EXPECT_EQ(read("file", false), "data");
  EXPECT_EQ(read("link", true), "data");
  EXPECT_EQ(read("link", false), "<not regular>");
  EXPECT_EQ(read("missing", false), "<error>");
  EXPECT_EQ(open_regular_file(dir_ + "/missing", false).error, ENOENT);
}

TEST_F(SafeFile, refuses_a_fifo_or_directory_without_blocking) {
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir((dir_ + "/sub").c_str(), 0700), 0);
  for (bool follow : {false, true}) {
    RegularFile fifo = open_regular_file(dir_ + "/fifo", follow);
    EXPECT_TRUE(fifo.not_regular());
    EXPECT_TRUE(S_ISFIFO(fifo.info.st_mode));
    EXPECT_EQ(read("sub", follow), "<not regular>");
  }
}

TEST_F(SafeFile, replace_file_replaces_a_link_not_its_target_and_leaves_no_temporary_file) {
  ASSERT_EQ(::symlink("file", (dir_ + "/link").c_str()), 0);
  ASSERT_TRUE(replace_file(dir_ + "/link", "new", 3, /*durable=*/true));
  ASSERT_TRUE(replace_file(dir_ + "/other", "x", 1, /*durable=*/false));
  EXPECT_EQ(read("file", false), "data");
  EXPECT_EQ(read("link", false), "new");
  EXPECT_EQ(read("other", false), "x");
  EXPECT_EQ(entries().size(), 3u);
  EXPECT_FALSE(replace_file(dir_ + "/missing_dir/file", "x", 1, false));
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace tripy
