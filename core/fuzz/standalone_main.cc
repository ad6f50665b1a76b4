// A main() for the libFuzzer harnesses when libFuzzer is absent (the GCC build): runs every file
// of a corpus, then mutates them at random for a few seconds. ctest runs each harness this way,
// so the suite exercises them on every build; `make fuzz` runs the real, coverage-guided libFuzzer.
//
//   fuzz_NAME_standalone CORPUS_DIR [SECONDS] [SEED]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

// The input being run, written to ./fuzz-crash.bin if it crashes (with async-signal-safe calls).
const Bytes* g_current = nullptr;

void on_crash(int sig) {
  if (g_current) {
    int fd = open("fuzz-crash.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!write(fd, g_current->data(), g_current->size());
      close(fd);
    }
    const char msg[] = "the crashing input is in ./fuzz-crash.bin\n";
    (void)!write(2, msg, sizeof(msg) - 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run(const Bytes& b) {
  g_current = &b;
  LLVMFuzzerTestOneInput(b.data(), b.size());
  g_current = nullptr;
}

// One random edit of the kinds that break parsers: flipped bits, bytes set to boundary values,
// inserted or deleted runs, truncation, a run copied from elsewhere (in the input or another one).
void mutate(Bytes& b, const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '0', '9', '-', ',', '(', ')', '[', ']', '"', '\n'};
  switch (rng() % 7) {
    case 0: if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
    case 1: if (!b.empty()) b[pick(b.size())] = kInteresting[pick(sizeof(kInteresting))]; break;
    case 2: b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), 1 + pick(8), static_cast<uint8_t>(rng())); break;
    case 3: if (!b.empty()) { size_t at = pick(b.size()); b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), at + 1 + pick(16)))); } break;
    case 4: b.resize(pick(b.size() + 1)); break;
    case 5: {
      const Bytes& src = corpus[pick(corpus.size())];
      if (src.empty()) break;
      size_t from = pick(src.size()), len = 1 + pick(std::min<size_t>(64, src.size() - from));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), src.begin() + static_cast<std::ptrdiff_t>(from),
               src.begin() + static_cast<std::ptrdiff_t>(from + len));
      break;
    }
    default:  // a decimal digit string, where numbers live in text formats
      if (!b.empty()) { size_t at = pick(b.size()); std::string n = std::to_string(static_cast<int64_t>(rng()) >> pick(64)); b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), n.begin(), n.end()); }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [SECONDS] [SEED]\n", argv[0]);
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  std::vector<Bytes> corpus;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: the corpus %s is empty\n", argv[0], argv[1]);
    return 2;
  }
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_crash);
  for (const Bytes& b : corpus) run(b);
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = corpus.size();
  while (std::chrono::steady_clock::now() < end) {
    Bytes b = corpus[static_cast<size_t>(rng() % corpus.size())];
    for (int edits = 1 + static_cast<int>(rng() % 8); edits > 0; --edits) mutate(b, corpus, rng);
    run(b);
    ++runs;
  }
  std::printf("%s: %llu inputs (%zu seeds, seed %llu), no crash\n", argv[0], static_cast<unsigned long long>(runs),
              corpus.size(), static_cast<unsigned long long>(seed));
  return 0;
}
