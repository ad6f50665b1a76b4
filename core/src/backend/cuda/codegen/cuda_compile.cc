// NVRTC compilation with dedupe, a thread per distinct source, and an on-disk cubin cache.
#include "backend/cuda/codegen/cuda_compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "backend/cuda/codegen/cuda_cache_files.h"
#include "backend/cuda/cuda_api.h"

namespace tripy::rt::cuda {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string nvrtc_version_string() {
  int major = 0, minor = 0;
  if (!TRIPY_CUDA(nvrtcVersion(&major, &minor)).ok()) return "nvrtc?";
  return "nvrtc" + std::to_string(major) + "." + std::to_string(minor);
}

// No iostream number formatting here (see SourceWriter in cuda_codegen_fused.cc for why).
std::string numbered(const std::string& source) {
  std::string out;
  size_t start = 0;
  for (int n = 1; start < source.size(); ++n) {
    size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    out += std::to_string(n) + ": " + source.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// TRIPY_NVRTC_OPTIONS: more NVRTC options, separated by spaces (to measure one, such as
// --Ofast-compile=mid, against the default); part of the cubin cache's key.
std::vector<std::string> extra_nvrtc_options() {
  std::vector<std::string> out;
  const char* v = std::getenv("TRIPY_NVRTC_OPTIONS");
  std::string word;
  for (const char* c = v ? v : ""; ; ++c) {
    if (*c == ' ' || *c == '\0') {
      if (!word.empty()) out.push_back(word);
      word.clear();
      if (*c == '\0') break;
    } else {
      word += *c;
    }
  }
  return out;
}

// One NVRTC compile for `target` ("sm_90" or "compute_90"); fills cubin or ptx.
Status nvrtc_compile(const std::string& source, const std::string& name, const std::string& target,
                     CompiledModule& out, bool want_cubin, bool want_ptx) {
  nvrtcProgram prog = nullptr;
  TRIPY_CUDA_TRY(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr));
  const std::string arch_opt = "--gpu-architecture=" + target;
  std::vector<std::string> words{arch_opt, "--std=c++17", "--device-as-default-execution-space",
                                 "--extra-device-vectorization"};
  for (std::string& w : extra_nvrtc_options()) words.push_back(std::move(w));
  std::vector<const char*> opts;
  for (const std::string& w : words) opts.push_back(w.c_str());
  nvrtcResult r = api().nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  Status st;
  if (r == NVRTC_ERROR_INVALID_OPTION) {
    const char* extra = std::getenv("TRIPY_NVRTC_OPTIONS");
    return Status(StatusCode::kInvalidArgument, std::string("NVRTC refused an option; TRIPY_NVRTC_OPTIONS is '") +
                                                    (extra ? extra : "") + "'");
  }
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (TRIPY_CUDA(nvrtcGetProgramLogSize(prog, &log_size)).ok() && log_size > 1) {
      log.resize(log_size);
      (void)TRIPY_CUDA(nvrtcGetProgramLog(prog, log.data()));
    }
    st = Status(StatusCode::kInternal, "NVRTC could not compile the generated kernel '" + name +
                                           "' (a bug in Tripy's CUDA code generator):\n" + log +
                                           "\nsource:\n" + numbered(source));
  }
  if (st.ok() && want_cubin) {
    size_t n = 0;
    st = TRIPY_CUDA(nvrtcGetCUBINSize(prog, &n));
    if (st.ok()) {
      out.cubin.resize(n);
      if (n) st = TRIPY_CUDA(nvrtcGetCUBIN(prog, reinterpret_cast<char*>(out.cubin.data())));
    }
  }
  if (st.ok() && want_ptx) {
    size_t n = 0;
    // With a real arch, some NVRTC versions keep no PTX; the caller then compiles for compute_XX.
    if (api().nvrtcGetPTXSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
      out.ptx.resize(n);
      if (api().nvrtcGetPTX(prog, out.ptx.data()) != NVRTC_SUCCESS) out.ptx.clear();
      while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    }
  }
  (void)TRIPY_CUDA(nvrtcDestroyProgram(&prog));
  return st;
}

Status compile_one(const std::string& source, const std::string& name, int arch,
                   const std::string& cache_dir, const std::string& version, CompiledModule& out) {
  std::string options;
  for (const std::string& w : extra_nvrtc_options()) options += " " + w;
  std::string key = hash_hex(source + "\n// arch " + std::to_string(arch) + " " + version + options);
  std::string base = cache_dir.empty() ? "" : cache_dir + "/" + key;
  if (!base.empty()) {
    std::string cubin, ptx;
    if (read_file(base + ".cubin", cubin) && read_file(base + ".ptx", ptx) && !cubin.empty()) {
      out.cubin.assign(cubin.begin(), cubin.end());
      out.ptx = ptx;
      return ok_status();
    }
  }
  if (debug_level() >= 2) std::cerr << "[tripy cuda] kernel " << name << ":\n" << source << "\n";
  const auto start = std::chrono::steady_clock::now();
  std::string arch_s = std::to_string(arch);
  TRIPY_RETURN_IF_ERROR(nvrtc_compile(source, name, "sm_" + arch_s, out, true, true));
  const bool twice = out.ptx.empty();
  if (twice) {
    TRIPY_RETURN_IF_ERROR(nvrtc_compile(source, name, "compute_" + arch_s, out, false, true));
  }
  if (debug_level() >= 1)
    std::fprintf(stderr, "tripy: NVRTC compiled %s (%zu bytes of source%s) in %.1f ms\n", name.c_str(), source.size(),
                 twice ? ", twice: once more for PTX" : "", ms_since(start));
  if (!base.empty()) {
    write_file_atomic(base + ".cubin", out.cubin.data(), out.cubin.size());
    write_file_atomic(base + ".ptx", out.ptx.data(), out.ptx.size());
  }
  return ok_status();
}

}  // namespace

std::string hash_hex(const std::string& text) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(fnv1a(text, 14695981039346656037ull)),
                static_cast<unsigned long long>(fnv1a(text, 0x9e3779b97f4a7c15ull)));
  return buf;
}

bool nvrtc_available() { return api().nvrtc_ok; }

std::string kernel_cache_dir() {
  std::string dir;
  if (const char* v = std::getenv("TRIPY_CACHE_DIR")) {
    if (std::string(v) == "off" || std::string(v).empty()) return "";
    dir = v;
  } else if (const char* home = std::getenv("HOME")) {
    dir = std::string(home) + "/.cache/tripy/kernels";
  } else {
    return "";
  }
  return make_dirs(dir) ? dir : "";
}

StatusOr<std::vector<CompiledModule>> compile_modules(const std::vector<std::string>& sources,
                                                      const std::vector<std::string>& names,
                                                      int arch, int spare_cores) {
  if (!api().nvrtc_ok) {
    return Status(StatusCode::kUnavailable,
                  "NVRTC (libnvrtc.so.13) could not be loaded, so CUDA kernels cannot be compiled "
                  "(set TRIPY_CUDA_HOME to the CUDA toolkit)");
  }
  std::vector<CompiledModule> out(sources.size());
  std::vector<Status> status(sources.size());
  std::string cache_dir = kernel_cache_dir();
  std::string version = nvrtc_version_string();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < sources.size();) {
      status[i] = compile_one(sources[i], names[i], arch, cache_dir, version, out[i]);
    }
  };
  const int cores = static_cast<int>(std::thread::hardware_concurrency()) - spare_cores;
  size_t n_threads = std::min<size_t>(sources.size(), static_cast<size_t>(std::max(1, cores)));
  n_threads = std::min<size_t>(n_threads, 16);
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  for (Status& st : status) TRIPY_RETURN_IF_ERROR(st);
  return out;
}

}  // namespace tripy::rt::cuda
