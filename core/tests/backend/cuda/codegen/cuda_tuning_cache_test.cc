// The tuning cache without a GPU: stored choices come back for the same problem and context only,
// and files that are damaged, foreign or hostile read as misses rather than as choices.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cuda/codegen/cuda_tuning_cache.h"
#include "cache_file_checks.h"

namespace tripy::rt::cuda {
namespace {

class TuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tripy_tuning_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files(true)) std::remove((dir_ + "/" + f).c_str());
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> files(bool hidden = false) const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (hidden ? std::string(e->d_name) != "." && std::string(e->d_name) != ".." : e->d_name[0] != '.')
          out.push_back(e->d_name);
      ::closedir(d);
    }
    return out;
  }
  // The one file the cache wrote, rewritten as `text`.
  void overwrite(const std::string& text) const {
    ASSERT_EQ(files().size(), 1u);
    std::ofstream(dir_ + "/" + files()[0], std::ios::binary) << text;
  }
  std::string dir_;
};

const std::vector<uint8_t> kAlgo = {0, 1, 0x7f, 0x80, 0xfe, 0xff, 42};

TEST_F(TuningCacheTest, AStoredChoiceComesBackForItsProblemAndContextOnly) {
  TuningCache cache(dir_, "H100 sm90, cuDNN 91000");
  EXPECT_FALSE(cache.find("conv 1:x").has_value());
  cache.store("conv 1:x", kAlgo);
  ASSERT_TRUE(cache.find("conv 1:x").has_value());
  EXPECT_EQ(*cache.find("conv 1:x"), kAlgo);
  EXPECT_FALSE(cache.find("conv 1:y").has_value());
  EXPECT_FALSE(TuningCache(dir_, "H100 sm90, cuDNN 91100").find("conv 1:x").has_value());
  // A later choice for the same problem replaces the earlier one.
  cache.store("conv 1:x", {9, 9});
  EXPECT_EQ(*cache.find("conv 1:x"), (std::vector<uint8_t>{9, 9}));
  EXPECT_EQ(files().size(), 1u);
}

TEST_F(TuningCacheTest, AnEmptyDirectoryTurnsItOff) {
  TuningCache off("", "ctx");
  off.store("dot a", kAlgo);
  EXPECT_FALSE(off.find("dot a").has_value());
  EXPECT_TRUE(files().empty());
}

TEST_F(TuningCacheTest, DamagedOrForeignFilesReadAsMisses) {
  TuningCache cache(dir_, "ctx");
  const std::string head = "tripy-tuning 1\nctx\tdot a\n";
  const std::string bad[] = {
      "",                                            // empty
      head,                                          // no algorithm
      head + "0001",                                 // no final line break
      head + "000\n",                                // an odd number of digits
      head + "00zz\n",                               // not hex
      head + "00FF\n",                               // upper case: not what store writes
      head + "0001\nextra\n",                        // trailing data
      "tripy-tuning 2\nctx\tdot a\n0001\n",          // another format version
      "tripy-tuning 1\nctx\tdot b\n0001\n",          // another problem (a hash collision)
      "tripy-tuning 1\nother\tdot a\n0001\n",        // another context
      head + std::string(2 * 4097, '0') + "\n",      // an algorithm far too long
      head + std::string(100000, 'a') + "\n",        // a file far too large
  };
  for (const std::string& text : bad) {
    cache.store("dot a", kAlgo);
    overwrite(text);
    EXPECT_FALSE(cache.find("dot a").has_value()) << text.substr(0, 60);
  }
  overwrite(head + "00017f\n");  // and the well-formed file reads back
  EXPECT_EQ(*cache.find("dot a"), (std::vector<uint8_t>{0, 1, 0x7f}));
}

TEST_F(TuningCacheTest, KeysThatWouldBreakTheFormatAreNeitherStoredNorFound) {
  TuningCache cache(dir_, "ctx\nwith\tbreaks");  // the context's breaks become spaces
  cache.store("dot a\nb", kAlgo);
  EXPECT_TRUE(files().empty());
  EXPECT_FALSE(cache.find("dot a\nb").has_value());
  cache.store("dot a", kAlgo);
  EXPECT_EQ(*TuningCache(dir_, "ctx with breaks").find("dot a"), kAlgo);
}

// The path a store of `problem` writes: the one file in a scratch cache with the same context.
std::string file_for(const std::string& dir, const std::string& context, const std::string& problem) {
  char tmpl[] = "/tmp/tripy_tuning_probe_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return "";
  TuningCache(tmpl, context).store(problem, kAlgo);
  std::string name;
  if (DIR* d = ::opendir(tmpl)) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') name = e->d_name;
    ::closedir(d);
  }
  std::remove((std::string(tmpl) + "/" + name).c_str());
  ::rmdir(tmpl);
  return dir + "/" + name;
}

TEST_F(TuningCacheTest, AFifoInTheCacheIsAMissNotAHang) {
  TuningCache cache(dir_, "ctx");
  const std::string path = file_for(dir_, "ctx", "dot a");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  bool found = true;
  EXPECT_TRUE(testing::returns_without_blocking([&] { found = cache.find("dot a").has_value(); }, path));
  EXPECT_FALSE(found);
  cache.store("dot a", kAlgo);  // timing again replaces it
  EXPECT_EQ(*cache.find("dot a"), kAlgo);
}

TEST_F(TuningCacheTest, ALinkInTheCacheIsNeitherReadNorWrittenThrough) {
  TuningCache cache(dir_, "ctx");
  const std::string path = file_for(dir_, "ctx", "dot a"), victim = dir_ + "/victim.txt";
  // A well-formed choice, but behind a link someone else planted.
  std::ofstream(victim, std::ios::binary) << "tripy-tuning 1\nctx\tdot a\n0001\n";
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  EXPECT_FALSE(cache.find("dot a").has_value());
  // The link under the predictable temporary name of earlier versions is not followed either.
  const std::string planted = testing::predictable_temp_name(path);
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  cache.store("dot a", kAlgo);
  std::ifstream in(victim, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
            "tripy-tuning 1\nctx\tdot a\n0001\n");
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(*cache.find("dot a"), kAlgo);
  EXPECT_EQ(files(true).size(), 3u);  // the file, the victim and the planted link: no temporary file
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif
