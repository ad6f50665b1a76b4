// The binding's hot path for eager mode: building an op from tensors and evaluating a tensor, each
// one call from Python, with the user's source frames captured here once per call site.
//
// An eager step (`(a + b).eval()`) costs a few microseconds of Python against a kernel of
// nanoseconds, so every op call matters: frames are walked in C++ and their SourceRef memoised by
// (code object, instruction offset) for each frame of the call site, so a repeated call site
// converts nothing; a result tensor is made here rather than wrapped in Python.
#include <pybind11/stl.h>
#include <structmember.h>

#include <array>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "binding.h"
#include "compiler/eager.h"
#include "runtime/backend.h"
#include "trace/lower.h"

namespace tripy::binding {
namespace {

using trace::NodeRef;

constexpr int kMaxFrames = 8;  // capture_user_frames's limit

// What tripy.utils.stack_info decides (one source of truth for internal files and positions),
// and the classes results are made of (tripy.frontend.tensor registers them on import). Set once,
// read with the GIL held, never released.
struct EagerHooks {
  PyObject* internal = nullptr;  // stack_info._internal(filename) -> bool
  PyObject* position = nullptr;  // stack_info._position(code, lasti, lineno) -> (lineno, col, end_col)
  PyObject* tensor = nullptr;    // tp.Tensor
  PyObject* size = nullptr;      // tp.DimensionSize
  PyObject* node_name = nullptr;  // "_node"
  PyObject* name_name = nullptr;  // "name"
  Py_ssize_t node_offset = 0;     // where tp.Tensor's `_node` and `name` slots lie in an instance
  Py_ssize_t name_offset = 0;
};
EagerHooks g_hooks;

// A call site: the code object and instruction offset of each user frame, innermost first.
struct CallSite {
  std::array<std::pair<PyObject*, int>, kMaxFrames> frames{};
  int count = 0;
  bool operator==(const CallSite& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count; ++i)
      if (frames[i] != o.frames[i]) return false;
    return true;
  }
};
struct CallSiteHash {
  size_t operator()(const CallSite& c) const {
    size_t h = static_cast<size_t>(c.count);
    for (int i = 0; i < c.count; ++i)
      h = (h ^ (reinterpret_cast<uintptr_t>(c.frames[i].first) >> 4) ^ (static_cast<size_t>(c.frames[i].second) << 40)) *
          0x100000001b3ull;
    return h;
  }
};

// Memoised with the GIL held. Every code object met is kept alive (one reference each) so its
// address is never reused while cached; past kMaxEntries (code made by exec() in a notebook is
// unbounded) both caches start over.
constexpr size_t kMaxEntries = 1 << 16;
std::unordered_map<PyObject*, bool> g_internal_code;  // code object -> inside the tripy package
std::unordered_map<CallSite, SourceRef, CallSiteHash> g_sites;

void clear_frame_caches() {
  g_sites.clear();
  for (auto& [code, internal] : g_internal_code) Py_DECREF(code);
  g_internal_code.clear();
}

bool internal_code(PyCodeObject* code) {
  auto it = g_internal_code.find(reinterpret_cast<PyObject*>(code));
  if (it != g_internal_code.end()) return it->second;
  if (g_internal_code.size() >= kMaxEntries) clear_frame_caches();
  py::object filename = py::reinterpret_borrow<py::object>(code->co_filename);
  const bool internal = py::reinterpret_borrow<py::object>(g_hooks.internal)(filename).cast<bool>();
  Py_INCREF(code);
  g_internal_code.emplace(reinterpret_cast<PyObject*>(code), internal);
  return internal;
}

SourceFrame frame_of(PyCodeObject* code, int lasti, int lineno) {
  py::tuple pos = py::reinterpret_borrow<py::object>(g_hooks.position)(
      py::handle(reinterpret_cast<PyObject*>(code)), lasti, lineno);
  return {py::reinterpret_borrow<py::object>(code->co_filename).cast<std::string>(), pos[0].cast<int>(),
          py::reinterpret_borrow<py::object>(code->co_name).cast<std::string>(), pos[1].cast<int>(),
          pos[2].cast<int>()};
}

void check_hooks() {
  if (g_hooks.tensor == nullptr) throw std::runtime_error("tripy._C: tripy.frontend.tensor has not registered Tensor");
}

bool is_tensor(const py::handle& obj) {
  const int is = PyObject_IsInstance(obj.ptr(), g_hooks.tensor);
  if (is < 0) throw py::error_already_set();
  return is != 0;
}

// pybind finds a C++ type's registration by hashing its std::type_index on every cast, which
// costs more than building the op: the Node's is looked up once (pybind11/detail, stable in the
// pybind11 the build uses).
const py::detail::type_info* node_type() {
  static const py::detail::type_info* const type = py::detail::get_type_info(typeid(trace::Node));
  return type;
}

NodeRef node_from(py::handle handle) {
  const py::detail::type_info* type = node_type();
  if (Py_TYPE(handle.ptr()) != type->type) return handle.cast<NodeRef>();  // pybind's checks and errors
  return reinterpret_cast<py::detail::instance*>(handle.ptr())->get_value_and_holder(type).holder<NodeRef>();
}

// `node` as a Python Node object: what pybind's cast of a holder does (type_caster_generic::cast,
// class_::init_instance), less its look-up of the type by typeid on every call, and with the
// holder moved in rather than copied (a new node has no Python object; one that has is returned).
py::object node_to_python(NodeRef node) {
  const py::detail::type_info* type = node_type();
  if (py::handle existing = py::detail::find_registered_python_instance(node.get(), type))
    return py::reinterpret_steal<py::object>(existing);
  py::object self = py::reinterpret_steal<py::object>(py::detail::make_new_instance(type->type));
  if (!self) throw py::error_already_set();
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  inst->owned = true;
  py::detail::value_and_holder v_h = inst->get_value_and_holder(type);
  v_h.value_ptr() = node.get();
  py::detail::register_instance(inst, v_h.value_ptr(), type);
  v_h.set_instance_registered();
  new (std::addressof(v_h.holder<NodeRef>())) NodeRef(std::move(node));
  v_h.set_holder_constructed();
  return self;
}

// The `_node` and `name` slots of tp.Tensor (its __slots__; tp.DimensionSize adds none), read and
// written in place for a tensor of either class: a generic attribute access looks the name up
// through the class first.
PyObject** tensor_slot(PyObject* tensor, Py_ssize_t offset) {
  return reinterpret_cast<PyObject**>(reinterpret_cast<char*>(tensor) + offset);
}
bool exact_tensor(PyObject* obj) {
  return Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(g_hooks.tensor) ||
         Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(g_hooks.size);
}

NodeRef node_of(const py::handle& tensor) {
  if (exact_tensor(tensor.ptr())) {
    if (PyObject* node = *tensor_slot(tensor.ptr(), g_hooks.node_offset)) return node_from(node);
  }
  py::object node = py::reinterpret_steal<py::object>(PyObject_GetAttr(tensor.ptr(), g_hooks.node_name));
  if (!node) throw py::error_already_set();
  return node_from(node);
}

// inputs (a list or tuple of tp.Tensor) -> their nodes; anything else is the user's error.
std::vector<NodeRef> input_nodes(const std::string& op, const py::handle& inputs) {
  py::sequence seq = py::reinterpret_borrow<py::sequence>(inputs);
  std::vector<NodeRef> nodes;
  nodes.reserve(seq.size());
  for (const py::handle item : seq) {
    if (!is_tensor(item))
      raise(invalid_argument("Expected a tripy.Tensor as an input of " + op + ", but got an object of type '" +
                                 std::string(Py_TYPE(item.ptr())->tp_name) + "'.",
                             capture_source()));
    nodes.push_back(node_of(item));
  }
  return nodes;
}

// A tp.Tensor (a tp.DimensionSize for a size) holding `node`, as Tensor._wrap makes one: the
// object allocated as object.__new__ does (neither class defines __new__) and its slots set.
py::object wrap(NodeRef node) {
  auto* cls = reinterpret_cast<PyTypeObject*>(node->dim_value ? g_hooks.size : g_hooks.tensor);
  py::object handle = node_to_python(std::move(node));
  py::object t = py::reinterpret_steal<py::object>(cls->tp_alloc(cls, 0));
  if (!t) throw py::error_already_set();
  *tensor_slot(t.ptr(), g_hooks.node_offset) = handle.release().ptr();
  Py_INCREF(Py_None);
  *tensor_slot(t.ptr(), g_hooks.name_offset) = Py_None;
  return t;
}

}  // namespace

namespace {

// The user frames of the running code into `site`; with `linenos`, each one's line number too
// (PyFrame_GetLineNumber decodes the line table: only a call site met for the first time needs it).
void walk_user_frames(CallSite& site, int* linenos) {
  // PyEval_GetFrame is borrowed; each PyFrame_GetBack a new reference, released as the walk moves.
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr && site.count < kMaxFrames) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    if (!internal_code(code)) {
      if (linenos) linenos[site.count] = PyFrame_GetLineNumber(frame);
      site.frames[site.count++] = {reinterpret_cast<PyObject*>(code), PyFrame_GetLasti(frame)};
    }
    Py_DECREF(code);  // kept alive by g_internal_code
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
}

// Runs `body` for a plain CPython function, turning C++ exceptions into the Python error they
// carry (raise() has set it) or one of their own.
template <class Body>
PyObject* guarded(Body&& body) {
  try {
    return body().release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject* evaluate_eager(PyObject*, PyObject* node) {
  return guarded([&]() -> py::object {
    const NodeRef n = node_from(node);
    {
      const auto graph = graph_lock();
      if (n->evaluated()) return py::bool_(true);
      if (compiler::reads_compile_input(n)) return py::bool_(false);
    }
    Status st;
    {
      py::gil_scoped_release nogil;
      st = compiler::evaluate(n, eager_options(n->device));
      if (st.ok()) st = synchronize_device(n->device);
    }
    check(st);
    return py::bool_(true);
  });
}

// The binary operator methods (`x + y`, `2 * x`), each a method descriptor of tp.Tensor whose
// function knows its op through its index in a table: a CPython method has no closure.
struct BinaryMethod {
  const trace::OpDef* def = nullptr;
  bool reflected = false;   // __radd__ and friends: the tensor is on the right
  PyObject* scalar_like = nullptr;  // trace_call.scalar_like(value, tensor)
  PyMethodDef method{};
};
constexpr size_t kMaxBinaryMethods = 48;
std::array<BinaryMethod, kMaxBinaryMethods> g_binary;
size_t g_binary_count = 0;

py::object binary(const BinaryMethod& m, PyObject* self, PyObject* other_ptr) {
  py::object other = py::reinterpret_borrow<py::object>(other_ptr);
  if (!is_tensor(other)) other = py::reinterpret_borrow<py::object>(m.scalar_like)(other, py::handle(self));
  NodeRef a = node_of(self), b = node_of(other);
  if (m.reflected) std::swap(a, b);
  std::vector<NodeRef> nodes;
  nodes.reserve(2);
  nodes.push_back(std::move(a));
  nodes.push_back(std::move(b));
  // A binary op takes no attributes: its node keeps the defaults, with none converted or moved.
  return wrap(unwrap(trace::make_node(*m.def, std::move(nodes), capture_source())));
}

template <size_t I>
PyObject* binary_method(PyObject* self, PyObject* other) {
  return guarded([&] { return binary(g_binary[I], self, other); });
}

template <size_t... I>
constexpr std::array<PyCFunction, sizeof...(I)> binary_functions(std::index_sequence<I...>) {
  return {&binary_method<I>...};
}
constexpr std::array<PyCFunction, kMaxBinaryMethods> kBinaryFunctions =
    binary_functions(std::make_index_sequence<kMaxBinaryMethods>{});

}  // namespace

SourceRef capture_source() {
  if (g_hooks.internal == nullptr) return nullptr;
  CallSite site;
  walk_user_frames(site, nullptr);
  auto it = g_sites.find(site);
  if (it != g_sites.end()) return it->second;
  int linenos[kMaxFrames];
  site = CallSite{};
  walk_user_frames(site, linenos);
  auto info = std::make_shared<SourceInfo>();
  bool kept = true;  // every code object of the site still held (the caches may have started over)
  for (int i = 0; i < site.count; ++i) {
    info->push_back(frame_of(reinterpret_cast<PyCodeObject*>(site.frames[i].first), site.frames[i].second, linenos[i]));
    kept = kept && g_internal_code.count(site.frames[i].first) > 0;
  }
  if (g_sites.size() >= kMaxEntries) g_sites.clear();
  if (kept) g_sites.emplace(site, info);
  return info;
}

void bind_eager(py::module_& m) {
  // tripy.frontend.tensor registers the classes results are made of; stack_info decides which
  // frames are the user's and where in a line each is.
  m.def("_register_eager", [](py::object tensor, py::object size, py::object internal, py::object position) {
    // The slots results are written through: both classes must hold `_node` and `name` as
    // tp.Tensor's __slots__ lay them out, and make instances as object.__new__ does.
    auto slot_offset = [&](const char* name) {
      py::object descr = py::reinterpret_steal<py::object>(
          _PyType_Lookup(reinterpret_cast<PyTypeObject*>(tensor.ptr()), py::str(name).ptr()));
      if (descr) descr.inc_ref();  // _PyType_Lookup's reference is borrowed
      if (!descr || Py_TYPE(descr.ptr()) != &PyMemberDescr_Type)
        throw std::runtime_error(std::string("tripy._C: tp.Tensor's '") + name + "' is not a slot");
      const PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr.ptr())->d_member;
      if (member->type != T_OBJECT_EX || (member->flags & READONLY))
        throw std::runtime_error(std::string("tripy._C: tp.Tensor's '") + name + "' is not a writable object slot");
      return member->offset;
    };
    auto* tensor_type = reinterpret_cast<PyTypeObject*>(tensor.ptr());
    auto* size_type = reinterpret_cast<PyTypeObject*>(size.ptr());
    if (!PyType_Check(tensor.ptr()) || !PyType_Check(size.ptr()) || !PyType_IsSubtype(size_type, tensor_type) ||
        size_type->tp_basicsize != tensor_type->tp_basicsize || tensor_type->tp_new != PyBaseObject_Type.tp_new ||
        size_type->tp_new != PyBaseObject_Type.tp_new)
      throw std::runtime_error("tripy._C: tp.DimensionSize must be a tp.Tensor with no slots or __new__ of its own");
    g_hooks.node_offset = slot_offset("_node");
    g_hooks.name_offset = slot_offset("name");
    g_hooks.tensor = tensor.inc_ref().ptr();
    g_hooks.size = size.inc_ref().ptr();
    g_hooks.internal = internal.inc_ref().ptr();
    g_hooks.position = position.inc_ref().ptr();
    // Interned, as attribute names are: a name that is not is interned again on every setattr.
    g_hooks.node_name = PyUnicode_InternFromString("_node");
    g_hooks.name_name = PyUnicode_InternFromString("name");
  });

  // tripy.frontend.trace_call.make: the op `op` on tensors `inputs` with attributes `attrs`, as a
  // tp.Tensor, errors at the user's line.
  m.def("tensor_op", [](const std::string& op, py::handle inputs, py::dict attrs) {
    check_hooks();
    std::vector<NodeRef> nodes = input_nodes(op, inputs);
    return wrap(make_op(op, std::move(nodes), attrs, capture_source()));
  });

  // The operator methods of tp.Tensor for the binary op `op` (`x + y`, `2 * x`): `reflected` for
  // __radd__ and friends, where the tensor is on the right. An operand that is not a tensor
  // becomes one of the tensor's dtype through `scalar_like(value, tensor)` (trace_call's, which
  // refuses lossy literals at the user's line).
  m.def("_binary_method", [](py::object cls, const std::string& name, const std::string& op, bool reflected,
                             py::object scalar_like) {
    const trace::OpDef* def = trace::find_op(op);
    if (def == nullptr) throw py::value_error("unknown Trace op '" + op + "'");
    if (def->attrs != 0) throw py::value_error("Trace op '" + op + "' takes attributes: not a binary operator");
    if (g_binary_count == kMaxBinaryMethods) throw std::runtime_error("tripy._C: too many binary methods");
    BinaryMethod& m = g_binary[g_binary_count];
    m.def = def;
    m.reflected = reflected;
    m.scalar_like = scalar_like.inc_ref().ptr();
    m.method = {strdup(name.c_str()), kBinaryFunctions[g_binary_count], METH_O, nullptr};
    ++g_binary_count;
    PyObject* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &m.method);
    if (descr == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(descr);
  });

  // Tensor.eval(): evaluates `node` (compiling, or finding in the cache, what it needs). False,
  // without evaluating, where it reads a runtime input of tp.compile (it has no value yet: the
  // frontend explains). On the GPU also a host synchronisation point, as _C.evaluate. A plain
  // CPython function: pybind's dispatcher would add a tenth of a microsecond to every eager step.
  static PyMethodDef evaluate_eager_def = {"evaluate_eager", evaluate_eager, METH_O,
                                           "evaluate_eager(node) -> bool: evaluates a Trace node (Tensor.eval)."};
  m.add_object("evaluate_eager", py::reinterpret_steal<py::object>(PyCFunction_NewEx(&evaluate_eager_def, nullptr, nullptr)));
  // Whether `node`'s value can be read now: it has one, or it reads no runtime input of tp.compile.
  m.def("value_known", [](const NodeRef& n) {
    const auto graph = graph_lock();
    return n->evaluated() || !compiler::reads_compile_input(n);
  });

  // Test hooks: the frames capture_source gives here, as (file, line, function, col, end_col)
  // tuples like capture_user_frames'; and how many call sites are memoised.
  m.def("_capture_source", [] {
    py::list out;
    if (SourceRef src = capture_source())
      for (const SourceFrame& f : *src) out.append(py::make_tuple(f.file, f.line, f.function, f.col, f.end_col));
    return py::tuple(out);
  });
  m.def("_call_sites", [] { return g_sites.size(); });
}

}  // namespace tripy::binding
