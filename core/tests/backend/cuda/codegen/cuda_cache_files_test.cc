// The compiled-kernel cache's files (cuda_cache_files.h), without a GPU: a link, FIFO or directory
// planted in the cache directory is a miss, never followed, never a hang; writes go through a
// private temporary file and leave nothing else behind.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cuda/codegen/cuda_cache_files.h"
#include "cache_file_checks.h"
#include "../../../common/scratch_dir.h"

namespace tripy::rt::cuda {
namespace {

class CudaCacheFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    victim_ = dir_ + "/victim.txt";
    std::ofstream(victim_) << "precious";
  }
  std::vector<std::string> names() const { return scratch_.entries(); }
  static std::string text_of(const std::string& path) { return tripy::testing::read_text(path); }
  static bool is_link(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  }
  tripy::testing::ScratchDir scratch_{"tripy_cache_files"};
  std::string dir_, victim_;
};

TEST_F(CudaCacheFiles, ADirectoryEveryoneMayWriteToIsNoCache) {
  const std::string mine = dir_ + "/a/b";
  EXPECT_TRUE(make_dirs(mine));
  ASSERT_EQ(::chmod(mine.c_str(), 0777), 0);  // another user could plant compiled kernels here
  EXPECT_FALSE(make_dirs(mine));
  ASSERT_EQ(::chmod(mine.c_str(), 0770), 0);  // a user-private group's mode stays a cache
  EXPECT_TRUE(make_dirs(mine));
}

TEST_F(CudaCacheFiles, AWrittenFileReadsBackAndLeavesNoTemporaryFile) {
  const std::string path = dir_ + "/k.cubin";
  write_file_atomic(path, "abc", 3);
  write_file_atomic(path, "defg", 4);  // replaces
  std::string out;
  ASSERT_TRUE(read_file(path, out));
  EXPECT_EQ(out, "defg");
  EXPECT_FALSE(read_file(path, out, 3));  // larger than allowed
  EXPECT_EQ(names(), (std::vector<std::string>{"k.cubin", "victim.txt"}));
}

TEST_F(CudaCacheFiles, AFifoInTheCacheIsAMissNotAHang) {
  const std::string path = dir_ + "/k.cubin";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  bool found = true;
  std::string out;
  EXPECT_TRUE(testing::returns_without_blocking([&] { found = read_file(path, out); }, path));
  EXPECT_FALSE(found);
  // A later write replaces it with the compiled kernel.
  write_file_atomic(path, "abc", 3);
  ASSERT_TRUE(read_file(path, out));
  EXPECT_EQ(out, "abc");
}

TEST_F(CudaCacheFiles, ALinkOrDirectoryInTheCacheIsAMiss) {
  const std::string link = dir_ + "/k.cubin", sub = dir_ + "/k.ptx";
  ASSERT_EQ(::symlink(victim_.c_str(), link.c_str()), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  std::string out;
  EXPECT_FALSE(read_file(link, out)) << "followed the link and read: " << out;
  EXPECT_FALSE(read_file(sub, out));
  EXPECT_FALSE(read_file(dir_ + "/missing.cubin", out));
}

TEST_F(CudaCacheFiles, AWriteNeverFollowsALinkPlantedUnderItsTemporaryName) {
  const std::string path = dir_ + "/k.cubin", planted = testing::predictable_temp_name(path);
  ASSERT_EQ(::symlink(victim_.c_str(), planted.c_str()), 0);
  write_file_atomic(path, "kernel", 6);
  EXPECT_EQ(text_of(victim_), "precious");
  EXPECT_TRUE(is_link(planted));
  EXPECT_FALSE(is_link(path));
  EXPECT_EQ(text_of(path), "kernel");
  EXPECT_EQ(names().size(), 3u);  // the target, the planted link and the victim: no temporary file
}

TEST_F(CudaCacheFiles, AWriteReplacesALinkAtTheTargetInsteadOfWritingThroughIt) {
  const std::string path = dir_ + "/k.cubin";
  ASSERT_EQ(::symlink(victim_.c_str(), path.c_str()), 0);
  write_file_atomic(path, "kernel", 6);
  EXPECT_EQ(text_of(victim_), "precious");
  EXPECT_FALSE(is_link(path));
  EXPECT_EQ(text_of(path), "kernel");
}

TEST_F(CudaCacheFiles, AWriteOverADirectoryFailsQuietlyAndLeavesNoTemporaryFile) {
  const std::string path = dir_ + "/k.cubin";
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  write_file_atomic(path, "kernel", 6);
  EXPECT_EQ(names(), (std::vector<std::string>{"k.cubin", "victim.txt"}));
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif
