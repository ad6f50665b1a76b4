// Data in and out of Tripy: nested Python lists, DLPack (zero-copy both ways), tolist, copies.
#include <algorithm>
#include <pybind11/stl.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "runtime/backend.h"
#include "runtime/gpu_scope.h"
#include "common/half.h"
#include "common/random.h"
#include "compiler/eager.h"
#include "binding.h"
#include "dlpack_abi.h"

namespace tripy::binding {
namespace {

using trace::NodeRef;

// --- nested lists -----------------------------------------------------------------------------

enum class Kind { kBool = 0, kInt = 1, kFloat = 2 };

struct ListScan {
  std::vector<int64_t> shape;
  Kind kind = Kind::kBool;
  bool big_int = false;
  bool any = false;
  long long int_min = 0, int_max = 0;  // the range of the integers seen (not bools)
};

void scan(const py::handle& obj, size_t depth, ListScan& s, SourceRef src) {
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    int64_t n = static_cast<int64_t>(py::len(seq));
    if (depth == s.shape.size() && !s.any) s.shape.push_back(n);
    if (depth >= s.shape.size() || s.shape[depth] != n)
      raise(invalid_argument("Cannot create a tensor from a ragged nested list: the lengths along dimension " +
                                 std::to_string(depth) + " differ.",
                             src));
    for (const auto& item : seq) scan(item, depth + 1, s, src);
    if (n == 0) s.any = true;  // an empty list fixes the shape
    return;
  }
  if (depth != s.shape.size())
    raise(invalid_argument("Cannot create a tensor from a ragged nested list: a scalar appears at depth " +
                               std::to_string(depth) + " of a list of depth " + std::to_string(s.shape.size()) + ".",
                           src));
  s.any = true;
  if (py::isinstance<py::bool_>(obj)) return;
  if (py::isinstance<py::int_>(obj)) {
    s.kind = std::max(s.kind, Kind::kInt);
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow != 0)
      raise(invalid_argument("Cannot create a tensor from the integer " + std::string(py::str(obj)) +
                                 ": it does not fit in int64, the widest integer dtype.",
                             src));
    if (v > INT32_MAX || v < INT32_MIN) s.big_int = true;
    s.int_min = std::min(s.int_min, v);
    s.int_max = std::max(s.int_max, v);
    return;
  }
  if (py::isinstance<py::float_>(obj)) {
    s.kind = Kind::kFloat;
    return;
  }
  raise(invalid_argument("Cannot create a tensor from an object of type '" +
                             std::string(py::str(obj.get_type().attr("__name__"))) +
                             "': expected numbers, bools, nested lists of them, or an object with __dlpack__.",
                         src));
}

void store(void* base, int64_t i, DType dt, double v) {
  switch (dt) {
    case DType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::kFloat16: static_cast<uint16_t*>(base)[i] = cpu::float_to_half(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(base)[i] = cpu::float_to_bfloat16(static_cast<float>(v)); break;
    case DType::kFloat8E4M3: static_cast<uint8_t*>(base)[i] = cpu::float_to_float8(static_cast<float>(v)); break;
    case DType::kInt4: static_cast<int8_t*>(base)[i] = cpu::wrap_int4(static_cast<int64_t>(v)); break;
    case DType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DType::kBool: static_cast<uint8_t*>(base)[i] = v != 0; break;
  }
}

py::object load(const void* base, int64_t i, DType dt) {
  switch (dt) {
    case DType::kFloat32: return py::float_(static_cast<const float*>(base)[i]);
    case DType::kFloat16: return py::float_(cpu::half_to_float(static_cast<const uint16_t*>(base)[i]));
    case DType::kBFloat16: return py::float_(cpu::bfloat16_to_float(static_cast<const uint16_t*>(base)[i]));
    case DType::kFloat8E4M3: return py::float_(cpu::float8_to_float(static_cast<const uint8_t*>(base)[i]));
    case DType::kInt4:
    case DType::kInt8: return py::int_(static_cast<const int8_t*>(base)[i]);
    case DType::kInt32: return py::int_(static_cast<const int32_t*>(base)[i]);
    case DType::kInt64: return py::int_(static_cast<const int64_t*>(base)[i]);
    case DType::kBool: return py::bool_(static_cast<const uint8_t*>(base)[i] != 0);
  }
  return py::none();
}

void fill(const py::handle& obj, void* base, int64_t& i, DType dt) {
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    for (const auto& item : obj) fill(item, base, i, dt);
    return;
  }
  if (dt == DType::kInt64 && py::isinstance<py::int_>(obj)) {
    static_cast<int64_t*>(base)[i++] = obj.cast<int64_t>();  // exact beyond 2^53
    return;
  }
  store(base, i++, dt, obj.cast<double>());
}

py::object nested(const Tensor& t, size_t dim, int64_t& i) {
  if (dim == t.shape().size()) return load(t.data(), i++, t.dtype());
  py::list out;
  for (int64_t k = 0; k < t.shape()[dim]; ++k) out.append(nested(t, dim + 1, i));
  return std::move(out);
}

Tensor place(Tensor host, const Device& device) {
  if (device.kind == Device::Kind::kCpu) return host;
  rt::Backend* b = rt::backend_for(device.kind);
  if (!b) raise(Status(StatusCode::kUnavailable, "No GPU is available for device " + device.str() + "."));
  rt::GpuScope on(device.index);
  return unwrap(b->copy_from_host(host));
}

// --- DLPack -----------------------------------------------------------------------------------

// Names a DLPack dtype Tripy has no equivalent for (numpy's and torch's spelling) and says how to
// convert it, since the most common case is numpy's default float64.
std::string unsupported_dl_message(const dlpack::DLDataType& t) {
  const std::string bits = std::to_string(t.bits);
  std::string name, to;
  switch (t.code) {
    case dlpack::kDLFloat: name = "float" + bits; to = "float32"; break;
    case dlpack::kDLInt: name = "int" + bits; to = t.bits < 32 ? "int32" : "int64"; break;
    case dlpack::kDLUInt: name = "uint" + bits; to = t.bits < 32 ? "int32" : "int64"; break;
    case dlpack::kDLBfloat: name = "bfloat" + bits; to = "bfloat16"; break;
    case 5: name = "complex" + bits; break;  // kDLComplex
    default: name = "type code " + std::to_string(t.code) + " of " + bits + " bits"; break;
  }
  if (t.lanes != 1) name += " x" + std::to_string(t.lanes) + " lanes";
  std::string msg = "Unsupported data type: " + name +
                    ". Tripy tensors hold float32, float16, bfloat16, int8, int32, int64 or bool.";
  if (!to.empty() && t.lanes == 1)
    msg += " Convert it first, e.g. numpy: x.astype(numpy." + to + "), torch: x.to(torch." + to + ").";
  return msg;
}

std::optional<DType> from_dl(const dlpack::DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case dlpack::kDLFloat: return t.bits == 32 ? DType::kFloat32 : t.bits == 16 ? std::optional(DType::kFloat16) : std::nullopt;
    case dlpack::kDLBfloat: return t.bits == 16 ? std::optional(DType::kBFloat16) : std::nullopt;
    case dlpack::kDLInt:
      return t.bits == 8 ? DType::kInt8 : t.bits == 32 ? DType::kInt32 : t.bits == 64 ? std::optional(DType::kInt64) : std::nullopt;
    case dlpack::kDLBool: return t.bits == 8 ? std::optional(DType::kBool) : std::nullopt;
    default: return std::nullopt;
  }
}

dlpack::DLDataType to_dl(DType dt) {
  switch (dt) {
    case DType::kFloat32: return {dlpack::kDLFloat, 32, 1};
    case DType::kFloat16: return {dlpack::kDLFloat, 16, 1};
    case DType::kBFloat16: return {dlpack::kDLBfloat, 16, 1};
    case DType::kInt8: return {dlpack::kDLInt, 8, 1};
    case DType::kInt32: return {dlpack::kDLInt, 32, 1};
    case DType::kInt64: return {dlpack::kDLInt, 64, 1};
    case DType::kBool: return {dlpack::kDLBool, 8, 1};
    default: return {dlpack::kDLUInt, 8, 1};  // float8/int4: raw bytes
  }
}

struct Exported {
  dlpack::DLManagedTensor managed;
  Tensor tensor;
  std::vector<int64_t> shape;
};

NodeRef from_dlpack(py::object obj, py::object frames) {
  SourceRef src = to_source(frames);
  py::object cap = obj.attr("__dlpack__")();
  auto* mt = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  if (!mt) {
    PyErr_Clear();
    raise(invalid_argument("The object's __dlpack__ did not return a DLPack capsule.", src));
  }
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  // From here the capsule is ours: release it with the last tensor that views it.
  std::shared_ptr<void> keep(mt, [](void* p) {
    auto* m = static_cast<dlpack::DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  const dlpack::DLTensor& t = mt->dl_tensor;
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  // Strides of an empty array say nothing (numpy 2 exports them as it pleases): nothing is read.
  const bool empty = std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end();
  if (t.strides && !empty) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expect)
        raise(invalid_argument("Cannot create a tensor from non-contiguous memory (strides are not row-major). "
                               "Make it contiguous first, e.g. numpy.ascontiguousarray(x) or x.contiguous().",
                               src));
      expect *= shape[i];
    }
  }
  auto dt = from_dl(t.dtype);
  if (!dt) raise(invalid_argument(unsupported_dl_message(t.dtype), src));
  Device dev;
  if (t.device.device_type == dlpack::kDLCUDA) {  // device_id is CUDA's number, not always Tripy's
    rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu);
    const int index = gpu ? gpu->gpu_index(t.device.device_id) : t.device.device_id;
    if (index < 0)
      raise(invalid_argument("The tensor is on CUDA device " + std::to_string(t.device.device_id) +
                                 ", but this process drives CUDA device " + std::to_string(gpu->cuda_ordinal(0)) +
                                 " alone (TRIPY_CUDA_DEVICE or LOCAL_RANK pins it): move the tensor there first.",
                             src));
    dev = Device{Device::Kind::kGpu, index};
  }
  else if (t.device.device_type != dlpack::kDLCPU && t.device.device_type != dlpack::kDLCUDAHost)
    raise(invalid_argument("Unsupported DLPack device type " + std::to_string(t.device.device_type) + ".", src));
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  // Copy on import: the exporter's memory (a numpy array, a torch tensor) may be written after
  // this call, and a lazy op must compute with the values it was given. The copy costs one
  // memcpy (docs/robustness.md has the measured cost); the capsule is released right after it.
  Tensor borrowed = Tensor::borrow(data, *dt, std::move(shape), dev, std::move(keep));
  rt::Backend* b = rt::backend_for(dev.kind);
  if (!b) raise(Status(StatusCode::kUnavailable, "No GPU is available for device " + dev.str() + ".", src));
  return trace::make_data_node(unwrap_at(b->duplicate(borrowed), src), src);
}

// `n`'s value, evaluated and copied to the host. Evaluation waits for the eager lock
// (compiler/eager.cc), which another thread may hold while its plugin's CPU implementation waits
// for the GIL: so the GIL is released meanwhile, and no Python object is touched until it is back.
Tensor evaluated_on_host(const NodeRef& n) {
  Status st;
  Tensor host;
  {
    py::gil_scoped_release nogil;
    st = compiler::evaluate(n, eager_options(n->device));
    rt::Backend* b = st.ok() ? rt::backend_for(n->value.device().kind) : nullptr;
    if (!st.ok()) {
      // reported below, with the GIL
    } else if (n->value.device().kind == Device::Kind::kCpu) {
      host = n->value;
    } else if (!b) {
      st = Status(StatusCode::kUnavailable, "No backend for " + n->value.device().str());
    } else if (StatusOr<Tensor> copied = b->copy_to_host(n->value); copied.ok()) {
      host = std::move(copied.value());
    } else {
      st = copied.status();
    }
  }
  check(st);
  return host;
}

void delete_exported(dlpack::DLManagedTensor* self) { delete static_cast<Exported*>(self->manager_ctx); }

py::capsule to_dlpack(const NodeRef& n) {
  Status st;
  {
    py::gil_scoped_release nogil;  // see evaluated_on_host
    st = compiler::evaluate(n, eager_options(n->device));
    // The consumer may read on any stream: finish our work on the default stream first.
    if (st.ok()) st = synchronize_device(n->device);
  }
  check(st);
  auto* e = new Exported();
  e->tensor = n->value;
  e->shape = n->value.shape();
  dlpack::DLTensor& t = e->managed.dl_tensor;
  t.data = e->tensor.data();
  if (e->tensor.device().kind == Device::Kind::kGpu) {
    rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu);
    const int index = e->tensor.device().index;
    t.device = {dlpack::kDLCUDA, gpu ? gpu->cuda_ordinal(index) : index};
  } else {
    t.device = {dlpack::kDLCPU, 0};
  }
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = to_dl(e->tensor.dtype());
  t.shape = e->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_exported;
  return py::capsule(&e->managed, "dltensor", [](PyObject* cap) {
    // Only an unconsumed capsule still owns the tensor.
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      if (m && m->deleter) m->deleter(m);
    }
  });
}

// Stores lo + scale * v for the n values v of stream (seed, kind) (uniform in [0, 1), or standard
// normal), in double; `store` rounds each to the tensor's dtype.
template <class Store>
void fill_random(RandomKind kind, uint64_t seed, double lo, double scale, int64_t n, Store store) {
  for (int64_t b = 0; 4 * b < n; ++b) {
    const std::array<double, 4> v = random_block(kind, seed, static_cast<uint64_t>(b));
    for (int64_t j = 0; j < 4 && 4 * b + j < n; ++j) store(4 * b + j, lo + scale * v[static_cast<size_t>(j)]);
  }
}

// The 16-bit float just below the one of bits `h` (sign-magnitude: toward -inf).
uint16_t below16(uint16_t h) { return (h & 0x7fffu) == 0 ? 0x8001u : (h & 0x8000u) ? h + 1 : h - 1; }

Tensor random_tensor(const std::string& kind, const std::vector<int64_t>& shape, DType dt, uint64_t seed, double a,
                     double b, const SourceRef& src) {
  const bool uniform = kind == "uniform";
  Tensor host = unwrap_at(Tensor::try_empty_host(dt, shape, "the random tensor's data"), src);
  const RandomKind k = uniform ? RandomKind::kUniform : RandomKind::kNormal;
  const double scale = uniform ? b - a : b;
  // The bound a uniform value stays below: one that rounds up to it takes the dtype's next value
  // below, so that every value is in [a, b).
  const double hi = uniform && b > a ? b : HUGE_VAL;
  const int64_t n = host.numel();
  void* data = host.data();
  switch (dt) {
    case DType::kFloat32:
      fill_random(k, seed, a, scale, n, [&](int64_t i, double v) {
        float f = static_cast<float>(v);
        if (f >= hi) f = std::nextafter(static_cast<float>(hi), -HUGE_VALF);
        static_cast<float*>(data)[i] = f;
      });
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const bool half = dt == DType::kFloat16;
      fill_random(k, seed, a, scale, n, [&](int64_t i, double v) {
        // double -> float -> the 16-bit format (each value rounded twice: no matter for random values).
        uint16_t h = half ? cpu::float_to_half(static_cast<float>(v)) : cpu::float_to_bfloat16(static_cast<float>(v));
        while ((half ? cpu::half_to_float(h) : cpu::bfloat16_to_float(h)) >= hi) h = below16(h);
        static_cast<uint16_t*>(data)[i] = h;
      });
      break;
    }
    default:
      raise(invalid_argument(std::string("tp.random makes floating-point values, not ") + std::string(dtype_name(dt)) + ".", src));
  }
  return host;
}

}  // namespace

void bind_data(py::module_& m) {
  m.def("from_list", [](py::object data, py::object dtype, const std::string& device, py::object frames) {
    SourceRef src = to_source(frames);
    ListScan s;
    scan(data, 0, s, src);
    DType inferred = s.kind == Kind::kFloat ? DType::kFloat32
                     : s.kind == Kind::kInt ? (s.big_int ? DType::kInt64 : DType::kInt32)
                                            : DType::kBool;
    DType dt = dtype.is_none() ? inferred : parse_dtype(dtype.cast<std::string>());
    if (s.kind == Kind::kFloat && !is_floating(dt))
      raise(invalid_argument("Cannot create a tensor of dtype " + std::string(dtype_name(dt)) +
                                 " from floating-point values: the conversion would lose information. "
                                 "Pass integers, or a floating-point dtype.",
                             src));
    // As numpy 2 does, an integer outside the requested dtype's range is an error, not a wrap.
    const long long lo = dt == DType::kInt8 ? INT8_MIN : dt == DType::kInt32 ? INT32_MIN : dt == DType::kInt4 ? -8 : LLONG_MIN;
    const long long hi = dt == DType::kInt8 ? INT8_MAX : dt == DType::kInt32 ? INT32_MAX : dt == DType::kInt4 ? 7 : LLONG_MAX;
    if (s.kind == Kind::kInt && (s.int_min < lo || s.int_max > hi))
      raise(invalid_argument("Cannot create a tensor of dtype " + std::string(dtype_name(dt)) + " from the integer " +
                                 std::to_string(s.int_min < lo ? s.int_min : s.int_max) + ": it is out of that dtype's range [" +
                                 std::to_string(lo) + ", " + std::to_string(hi) + "].",
                             src));
    Tensor host = unwrap_at(Tensor::try_empty_host(dt, s.shape, "the tensor's data"), src);
    int64_t i = 0;
    fill(data, host.data(), i, dt);
    return trace::make_data_node(place(std::move(host), parse_device(device)), src);
  });
  m.def("random", [](const std::string& kind, const std::vector<int64_t>& shape, const std::string& dtype,
                     uint64_t seed, double a, double b, const std::string& device, py::object frames) {
    SourceRef src = to_source(frames);
    Tensor host = random_tensor(kind, shape, parse_dtype(dtype), seed, a, b, src);
    return trace::make_data_node(place(std::move(host), parse_device(device)), src);
  });
  m.def("from_dlpack", &from_dlpack);
  m.def("to_dlpack", &to_dlpack);
  m.def("dlpack_device", [](const NodeRef& n) {
    return py::make_tuple(n->device.kind == Device::Kind::kGpu ? 2 : 1, n->device.index);
  });
  m.def("tolist", [](const NodeRef& n) {
    Tensor host = evaluated_on_host(n);
    int64_t i = 0;
    return nested(host, 0, i);
  });
  m.def("copy", [](const NodeRef& n, const std::string& device, py::object frames) {
    Tensor host = evaluated_on_host(n);
    Device to = parse_device(device);
    return trace::make_data_node(place(host, to), to_source(frames));
  });
}

}  // namespace tripy::binding
