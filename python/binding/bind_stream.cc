// Binding of CUDA streams: tp.Stream, tp.default_stream() and Executable.stream. On builds or
// machines without CUDA, creating a stream is a clear error and executables run as before.
#include "binding.h"
#include "runtime/executable_impl.h"
#if TRIPY_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tripy::binding {
namespace {

// A CUDA stream handle; owned streams are destroyed with the last reference.
struct Stream {
  void* handle = nullptr;
  bool owned = false;
  ~Stream() {
#if TRIPY_WITH_CUDA
    if (owned && handle) (void)rt::cuda_destroy_stream(handle);
#endif
  }
};

#if TRIPY_WITH_CUDA
bool have_gpu() { return rt::backend_for(Device::Kind::kGpu) != nullptr; }
#endif

std::shared_ptr<Stream> create_stream() {
  auto s = std::make_shared<Stream>();
#if TRIPY_WITH_CUDA
  if (have_gpu()) {
    s->handle = unwrap(rt::cuda_create_stream());
    s->owned = true;
    return s;
  }
#endif
  raise(Status(StatusCode::kUnavailable, "Streams need a CUDA GPU, and none is available."));
}

// Sets the stream an executable's GPU program runs on, loading the program if needed.
void set_executable_stream(const Executable& exe, const std::shared_ptr<Stream>& stream) {
  Executable::Impl& impl = *exe.impl();
  if (impl.device.kind != Device::Kind::kGpu) {
    if (stream && stream->handle) raise(invalid_argument("Only executables compiled for a GPU run on streams; this one runs on " + impl.device.str() + "."));
    return;
  }
#if TRIPY_WITH_CUDA
  std::lock_guard<std::mutex> lock(impl.mu);
  if (!impl.loaded) {
    rt::Backend* backend = rt::backend_for(impl.device.kind);
    if (!backend) raise(Status(StatusCode::kUnavailable, "No GPU is available to run this executable."));
    impl.loaded = unwrap(backend->load(impl.program, impl.artifacts));
  }
  check(rt::cuda_set_program_stream(impl.loaded.get(), stream ? stream->handle : nullptr));
#endif
}

}  // namespace

void bind_stream(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream")
      .def_property_readonly("handle", [](const Stream& s) { return reinterpret_cast<uintptr_t>(s.handle); })
      .def("synchronize", [](const Stream& s) {
#if TRIPY_WITH_CUDA
        if (have_gpu()) check(rt::cuda_synchronize(s.handle));
#endif
      });
  m.def("create_stream", &create_stream);
  m.def("default_stream", [] {
    auto s = std::make_shared<Stream>();
#if TRIPY_WITH_CUDA
    if (have_gpu()) s->handle = rt::cuda_default_stream();
#endif
    return s;
  });
  m.def("set_executable_stream", &set_executable_stream);
}

}  // namespace tripy::binding
