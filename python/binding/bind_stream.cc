// Binding of device streams: tp.Stream, tp.default_stream() and Executable.stream, through the
// GPU's Backend and LoadedProgram (runtime/backend.h). Without a GPU (no CUDA in this build, or
// none on this machine), creating a stream is a clear error and executables run as before.
#include "binding.h"
#include "runtime/backend.h"
#include "runtime/executable_impl.h"

namespace tripy::binding {
namespace {

// The GPU's backend, or nullptr when there is none.
rt::Backend* gpu() { return rt::backend_for(Device::Kind::kGpu); }

// A stream handle (a CUstream on the GPU); owned streams are destroyed with the last reference.
struct Stream {
  void* handle = nullptr;
  bool owned = false;
  ~Stream() {
    if (owned && handle)
      if (rt::Backend* b = gpu()) (void)b->destroy_stream(handle);
  }
};

std::shared_ptr<Stream> create_stream() {
  auto s = std::make_shared<Stream>();
  if (rt::Backend* b = gpu()) {
    s->handle = unwrap(b->create_stream());
    s->owned = true;
    return s;
  }
  raise(Status(StatusCode::kUnavailable, "Streams need a CUDA GPU, and none is available."));
}

// Sets the stream an executable's GPU programs (one per optimization profile) run on.
void set_stream(const Executable& exe, const std::shared_ptr<Stream>& stream) {
  const Executable::Impl& impl = *exe.impl();
  if (impl.device.kind != Device::Kind::kGpu) {
    if (stream && stream->handle) raise(invalid_argument("Only executables compiled for a GPU run on streams; this one runs on " + impl.device.str() + "."));
    return;
  }
  check(set_executable_stream(impl, stream ? stream->handle : nullptr));
}

}  // namespace

void bind_stream(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream")
      .def_property_readonly("handle", [](const Stream& s) { return reinterpret_cast<uintptr_t>(s.handle); })
      .def("synchronize", [](const Stream& s) {
        if (rt::Backend* b = gpu()) check(b->synchronize(s.handle));
      });
  m.def("create_stream", &create_stream);
  m.def("default_stream", [] {
    auto s = std::make_shared<Stream>();
    if (rt::Backend* b = gpu()) s->handle = b->default_stream();
    return s;
  });
  m.def("set_executable_stream", &set_stream);
}

}  // namespace tripy::binding
