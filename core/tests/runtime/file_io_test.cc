// The executable file on disk: save never writes through a link it did not make, never replaces
// anything but a regular file, and never leaves a partial file under the target's name; load never
// blocks on a FIFO; a path with a NUL byte is refused instead of being cut short.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/file_format.h"
#include "test_programs.h"
#include "../common/scratch_dir.h"

namespace tripy::rt {
namespace {

std::vector<uint8_t> some_executable() {
  auto bytes = serialize_executable(testing::affine_program(), {}, Device{});
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? bytes.value() : std::vector<uint8_t>{};
}

using tripy::testing::read_text;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A fresh, empty directory per test, so leftovers are easy to see.
class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
  }
  std::vector<std::string> entries() const { return scratch_.entries(); }
  std::string at(const std::string& name) const { return scratch_.at(name); }
  tripy::testing::ScratchDir scratch_{"tripy_file_io"};
  std::string dir_;
};

TEST_F(FileIo, save_does_not_write_through_a_link_named_like_its_temporary_file) {
  write_text(at("victim.txt"), "precious");
  ASSERT_EQ(::symlink("victim.txt", at("x.tpy.tmp").c_str()), 0);
  ASSERT_TRUE(write_executable_file(at("x.tpy"), some_executable()).ok());
  EXPECT_TRUE(read_text(at("victim.txt")) == "precious") << "the link's target was overwritten";
  struct stat info;
  ASSERT_EQ(::lstat(at("x.tpy").c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  ASSERT_EQ(::lstat(at("x.tpy.tmp").c_str(), &info), 0) << "the user's own x.tpy.tmp was removed";
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_TRUE(read_executable_file(at("x.tpy")).ok());
  // Nothing else is left behind: no temporary file.
  EXPECT_EQ(entries(), (std::vector<std::string>{"victim.txt", "x.tpy", "x.tpy.tmp"}));
}

TEST_F(FileIo, save_replaces_a_regular_file_and_leaves_no_temporary_file) {
  write_text(at("m.tpy"), "old");
  ASSERT_TRUE(write_executable_file(at("m.tpy"), some_executable()).ok());
  EXPECT_TRUE(read_executable_file(at("m.tpy")).ok());
  EXPECT_EQ(entries(), std::vector<std::string>{"m.tpy"});
}

TEST_F(FileIo, save_refuses_a_symbolic_link_fifo_or_directory_as_target) {
  write_text(at("victim.txt"), "precious");
  ASSERT_EQ(::symlink("victim.txt", at("link.tpy").c_str()), 0);
  ASSERT_EQ(::mkfifo(at("fifo.tpy").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(at("dir.tpy").c_str(), 0700), 0);
  for (const auto& [name, kind] : {std::pair<std::string, std::string>{"link.tpy", "symbolic link"},
                                   {"fifo.tpy", "FIFO"}, {"dir.tpy", "directory"}}) {
    Status st = write_executable_file(at(name), some_executable());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find(at(name)), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(kind), std::string::npos) << st.message();
  }
  EXPECT_TRUE(read_text(at("victim.txt")) == "precious") << "the link's target was overwritten";
  struct stat info;
  ASSERT_EQ(::lstat(at("fifo.tpy").c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  ASSERT_EQ(::rmdir(at("dir.tpy").c_str()), 0);
  EXPECT_EQ(entries(), (std::vector<std::string>{"fifo.tpy", "link.tpy", "victim.txt"}));
}

TEST_F(FileIo, save_to_a_missing_directory_names_the_path) {
  Status st = write_executable_file(at("no/such/dir/m.tpy"), some_executable());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(at("no/such/dir/m.tpy")), std::string::npos) << st.message();
}

TEST_F(FileIo, load_refuses_a_fifo_without_blocking) {
  ASSERT_EQ(::mkfifo(at("fifo.tpy").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("fifo.tpy", at("to_fifo.tpy").c_str()), 0);
  for (const std::string& name : {"fifo.tpy", "to_fifo.tpy"}) {
    Status st = read_executable_file(at(name)).status();  // blocked forever before the fix
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(at(name)), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("FIFO"), std::string::npos) << st.message();
  }
  Status st = read_executable_file("/dev/null").status();
  EXPECT_NE(st.message().find("character device"), std::string::npos) << st.message();
}

TEST_F(FileIo, paths_with_a_nul_byte_are_refused_not_cut_short) {
  ASSERT_TRUE(write_executable_file(at("a"), some_executable()).ok());
  const std::string with_nul = at("a") + std::string(1, '\0') + "b.tpy";
  Status load = read_executable_file(with_nul).status();
  EXPECT_EQ(load.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(load.message().find("NUL"), std::string::npos) << load.message();
  Status save = write_executable_file(at("n") + std::string(1, '\0') + "ul.tpy", some_executable());
  EXPECT_EQ(save.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(save.message().find("NUL"), std::string::npos) << save.message();
  EXPECT_EQ(entries(), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace tripy::rt
