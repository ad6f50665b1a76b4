// The tuning cache without a GPU: stored choices come back for the same problem and context only,
// and files that are damaged, foreign or hostile read as misses rather than as choices.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cuda/codegen/cuda_tuning_cache.h"

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
    for (const std::string& f : files()) std::remove((dir_ + "/" + f).c_str());
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') out.push_back(e->d_name);
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

}  // namespace
}  // namespace tripy::rt::cuda

#endif
