"""The Python package imports in one direction: no module imports a Tripy module inside a function
to dodge a cycle, the graph of top-level imports has no cycle, and the frontend's layers (bottom to
top: dtypes and devices, the tensor, the trace-call helpers, the ops, modules, compiling) only
import downwards. Everything is read with ``ast``; nothing is imported.
"""

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "python" / "tripy"
# Modules of the package that are not Python source (the C++ binding), so ``from tripy import _C``
# is an import of that module, not of ``tripy`` itself.
EXTENSION_MODULES = {"tripy._C"}

# The only imports allowed inside a function: optional dependencies that ``import tripy`` must
# not pull in (tests/test_without_numpy.py runs Tripy with numpy blocked). (module, import) -> why.
FUNCTION_LEVEL_ALLOWED = {
    ("tripy.frontend.tensor", "numpy"): "numpy scalars and np.asarray(tensor) need numpy; Tripy does not",
}

# The frontend bottom to top (module names under tripy.frontend; a package stands for all of its
# modules). A module imports only from its own layer or the ones below, never from a layer above.
LAYERS = [
    ["errors", "printing", "dtypes", "device", "paths", "mesh"],
    ["tensor", "safetensors"],
    ["trace_call"],
    ["ops"],
    ["module", "modules", "input_info", "stream", "profile"],
    ["executable"],
    ["compile"],
]


def module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_modules(root):
    """Module name -> (path, syntax tree) for every Python file under the package ``root``."""
    return {
        module_name(path, root): (path, ast.parse(path.read_text(), str(path))) for path in sorted(root.rglob("*.py"))
    }


def _imports(tree, in_function=False):
    """Yields ``(node, in_function)`` for every import statement; class bodies run at import time,
    so only function (and lambda) bodies count as inside a function."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _imports(child, inner)


def _from_module(node, module, is_package):
    """The absolute name of the module a ``from ... import`` statement reads from."""
    if not node.level:
        return node.module
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def named_modules(node, module, is_package):
    """The modules an import statement names: each one of ``import a, b``; the ``a`` of
    ``from a import b``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [_from_module(node, module, is_package)]


def _is_tripy(name):
    return name == "tripy" or name.startswith("tripy.")


def _all_imports(modules):
    """``(module, statement, in_function, named modules)`` for every import statement."""
    for module, (path, tree) in modules.items():
        for node, in_function in _imports(tree):
            yield module, node, in_function, named_modules(node, module, path.name == "__init__.py")


def function_level_imports(modules):
    """``(module, imported module, line)`` for each import inside a function that is not allowed:
    every import of a Tripy module, and any other not in FUNCTION_LEVEL_ALLOWED."""
    return [
        (module, name, node.lineno)
        for module, node, in_function, names in _all_imports(modules)
        if in_function
        for name in names
        if _is_tripy(name) or (module, name) not in FUNCTION_LEVEL_ALLOWED
    ]


def import_graph(modules):
    """Module -> the package's modules that its top-level code imports. ``from a import b`` is an
    import of the module ``a.b`` when there is one, else of ``a``."""
    graph = {module: set() for module in modules}
    known = modules.keys() | EXTENSION_MODULES
    for module, node, in_function, names in _all_imports(modules):
        if in_function:
            continue
        if isinstance(node, ast.ImportFrom):
            base = names[0]
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        graph[module].update(name for name in names if name in modules and name != module)
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules (first == last), or None."""
    state = {}  # module -> "open" while on the current path, "done" once fully explored

    def visit(module, path):
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target, path)
                if cycle:
                    return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [])
            if cycle:
                return cycle
    return None


def layer_of(module):
    """The index in LAYERS of a frontend module, or None outside the frontend (or unplaced)."""
    rest = module.removeprefix("tripy.frontend.")
    if rest == module:
        return None
    for index, layer in enumerate(LAYERS):
        if any(rest == name or rest.startswith(name + ".") for name in layer):
            return index
    return None


def upward_imports(graph):
    """``(module, imported module)`` for each frontend import that points at a higher layer."""
    return sorted(
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if layer_of(module) is not None and layer_of(target) is not None and layer_of(target) > layer_of(module)
    )


@pytest.fixture(scope="module")
def modules():
    return read_modules(PACKAGE_DIR)


def test_no_function_level_imports(modules):
    found = function_level_imports(modules)
    assert found == [], (
        "Imports inside functions (move them to the top of the module; an optional dependency goes into "
        "FUNCTION_LEVEL_ALLOWED with its reason):\n" + "\n".join(f"  {m}:{line}: {n}" for m, n, line in found)
    )


def test_import_graph_is_acyclic(modules):
    cycle = find_cycle(import_graph(modules))
    assert cycle is None, "Import cycle: " + " -> ".join(cycle)


def test_frontend_imports_point_down_its_layers(modules):
    assert upward_imports(import_graph(modules)) == []


def test_every_frontend_module_has_a_layer(modules):
    unplaced = [m for m in modules if m.startswith("tripy.frontend.") and layer_of(m) is None]
    assert unplaced == [], f"Add these modules to LAYERS: {unplaced}"


def test_allowed_function_level_imports_still_exist(modules):
    # An entry whose import is gone would silently allow it again later.
    present = {
        (module, name) for module, _, in_function, names in _all_imports(modules) if in_function for name in names
    }
    assert set(FUNCTION_LEVEL_ALLOWED) <= present


# ---- The checks can fail: a small package with each fault ----------------------------------------


def _package(tmp_path, files):
    root = tmp_path / "tripy"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return read_modules(root)


def test_a_cycle_is_found(tmp_path):
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "frontend/__init__.py": "",
            "frontend/tensor.py": "from tripy.frontend.ops import shape_ops\n",
            "frontend/ops/__init__.py": "",
            "frontend/ops/shape_ops.py": "from tripy.frontend.tensor import Tensor\n",
        },
    )
    graph = import_graph(modules)
    shape_ops, tensor = "tripy.frontend.ops.shape_ops", "tripy.frontend.tensor"
    assert find_cycle(graph) == [shape_ops, tensor, shape_ops]
    assert upward_imports(graph) == [(tensor, shape_ops)]


def test_a_function_level_import_is_found(tmp_path):
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "frontend/__init__.py": "",
            "frontend/tensor.py": "def f():\n    import numpy\n",
            "frontend/ops/__init__.py": "",
            "frontend/ops/misc.py": "def cast(x):\n    from ..tensor import Tensor\n    import tripy as tp\n",
        },
    )
    assert function_level_imports(modules) == [
        ("tripy.frontend.ops.misc", "tripy.frontend.tensor", 2),
        ("tripy.frontend.ops.misc", "tripy", 3),
    ]
