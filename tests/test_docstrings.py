"""Every public API is documented: each name ``tripy`` exports, and each public member of its
classes, has a docstring; every callable's docstring lists each of its parameters with a type
(Google style: ``Args:`` then ``name (type): ...``), says what it returns (``Returns:``) when it
returns something, and what it raises (``Raises:``) when it takes arguments; and every example
(``Example::``) runs (API.md: examples are collected as tests). docs/_ext/api_pages.py turns these
docstrings into the API reference (Sphinx's napoleon renders the sections)."""

import ast
import inspect
import pathlib
import re
import textwrap

import pytest

import tripy as tp

# Submodules ``import tripy`` exposes only because they are packages of the implementation (as
# docs/_ext/api_pages.py's INTERNAL_MODULES), and tp.llm, documented by its own tests.
NOT_API = {"exception", "frontend", "logging", "utils", "llm"}


def _public_objects():
    """(dotted name, object) for every public name of ``tripy`` and every public member of its
    classes (methods, static and class methods, properties), each object once."""
    seen = set()
    for name in sorted(dir(tp)):
        if name.startswith("_") or name in NOT_API:
            continue
        obj = getattr(tp, name)
        if inspect.ismodule(obj):
            # A public module's own functions (tp.random.normal), where it lists them.
            for member_name in getattr(obj, "__all__", []):
                member = getattr(obj, member_name)
                if inspect.isfunction(member) and id(member) not in seen:
                    seen.add(id(member))
                    yield f"{name}.{member_name}", member
            continue
        if not (callable(obj) or isinstance(obj, tp.logging.Logger)):
            continue
        if isinstance(obj, tp.logging.Logger):
            obj = type(obj)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield name, obj
        if inspect.isclass(obj):
            for member_name, member in _own_members(obj):
                if id(member) not in seen:  # an inherited member is checked under its class only
                    seen.add(id(member))
                    yield f"{name}.{member_name}", member


def _own_members(cls):
    """Public methods and properties that ``cls`` defines or inherits from a private Tripy base
    (``_ConvBase``); what a public base defines is checked under that base (``Module.state_dict``)."""
    for klass in cls.__mro__:
        if klass is not cls and (not klass.__module__.startswith("tripy") or not klass.__name__.startswith("_")):
            continue
        for member_name, member in vars(klass).items():
            if member_name.startswith("_"):
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if inspect.isfunction(member) or isinstance(member, property):
                if klass is cls or member_name not in vars(cls):
                    yield member_name, member


def _is_dtype(obj):
    return inspect.isclass(obj) and issubclass(obj, tp.dtype) and obj is not tp.dtype


OBJECTS = [(name, obj) for name, obj in _public_objects() if not (_is_dtype(obj) and "." not in name)]


def _doc(obj):
    return inspect.getdoc(obj.fget if isinstance(obj, property) else obj) or ""


def _section(doc, title):
    """The lines of a Google-style section (``Args:``), dedented; None where there is none."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"{title}:":
            base = len(line) - len(line.lstrip())
            body = []
            for item in lines[i + 1 :]:
                if item.strip() and len(item) - len(item.lstrip()) <= base:
                    break
                body.append(item)
            return textwrap.dedent("\n".join(body)).splitlines()
    return None


def _documented_parameters(doc):
    """name -> type text for each ``name (type): description`` entry of ``Args:``."""
    entries = {}
    for line in _section(doc, "Args") or []:
        match = re.match(r"^(\*{0,2}\w+) \(([^)]+(?:\)[^)]*)*)\):", line)
        if match:
            entries[match.group(1).lstrip("*")] = match.group(2)
    return entries


def _signature_parameters(obj):
    if inspect.isclass(obj):
        if _is_dtype(obj) or issubclass(obj, BaseException):
            return []
        target = obj
    else:
        target = obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    # Parameters named with a leading underscore are internal (a Stream's handle, the logger's depth).
    return [p for p in sig.parameters.values() if p.name not in ("self", "cls") and not p.name.startswith("_")]


def _returns_a_value(func):
    """Whether ``func``'s source returns or yields a value (so it needs ``Returns:``/``Yields:``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError):
        return False
    body = tree.body[0]
    for node in ast.walk(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not body:
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)) or (isinstance(node, ast.Return) and node.value is not None):
            if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
    return False


def _problems(name, obj):
    doc = _doc(obj)
    if not doc.strip():
        return [f"tp.{name} has no docstring"]
    if isinstance(obj, property):
        return []
    problems = []
    params = _signature_parameters(obj)
    documented = _documented_parameters(doc)
    for p in params:
        if p.name not in documented:
            problems.append(f"tp.{name}: parameter '{p.name}' is not documented with a type under Args:")
    extra = set(documented) - {p.name for p in params}
    if params and extra:
        problems.append(f"tp.{name}: Args: documents {sorted(extra)}, which its signature lacks")
    if inspect.isfunction(obj) and _returns_a_value(obj):
        returns = _section(doc, "Returns") or _section(doc, "Yields")
        if not returns or not re.match(r"^[\w.\[\], |()]+:", returns[0].strip()):
            problems.append(f"tp.{name}: no 'Returns:' section starting with the type ('tp.Tensor: ...')")
    if params and _section(doc, "Raises") is None:
        problems.append(f"tp.{name}: no 'Raises:' section")
    return problems


def test_every_public_name_member_and_parameter_is_documented():
    problems = [problem for name, obj in OBJECTS for problem in _problems(name, obj)]
    assert problems == [], f"{len(problems)} problems:\n" + "\n".join(problems)


def test_the_documentation_check_catches_what_is_missing():
    def undocumented(x, dtype=None):
        """Does something.

        Args:
            x (tp.Tensor): The input.
        """
        return x

    problems = _problems("undocumented", undocumented)
    assert any("'dtype' is not documented" in p for p in problems)
    assert any("no 'Returns:'" in p for p in problems)
    assert any("no 'Raises:'" in p for p in problems)

    def untyped(x):
        """Does something.

        Args:
            x: The input.

        Raises:
            tp.TripyException: never.
        """

    assert _problems("untyped", untyped) == ["tp.untyped: parameter 'x' is not documented with a type under Args:"]
    assert _problems("bare", lambda: None) == ["tp.bare has no docstring"]


def _examples(doc):
    # A block starts at "Example::" and runs while lines are indented deeper than that line.
    lines = (doc or "").splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Example::":
            base = len(line) - len(line.lstrip())
            block = []
            for body in lines[i + 1 :]:
                if body.strip() and len(body) - len(body.lstrip()) <= base:
                    break
                block.append(body)
            yield textwrap.dedent("\n".join(block))


CASES = [(name, code) for name, obj in OBJECTS for code in _examples(_doc(obj))]
UNDOCUMENTED = [
    name for name, obj in OBJECTS if "." not in name and not inspect.isclass(obj) and not list(_examples(_doc(obj)))
]


@pytest.mark.parametrize("name,code", CASES, ids=[c[0] for c in CASES])
def test_docstring_example_runs(name, code):
    exec(compile(code, f"<docstring of tp.{name}>", "exec"), {})


def test_every_public_function_has_an_example():
    assert UNDOCUMENTED == []


# An inline literal as its author meant it: the next ``...`` closes it, also across a line break.
_INLINE_LITERAL = re.compile(r"``[^`\s](?:[^`]*?[^`\s])?``")


def _literals_running_into_words(doc):
    """Inline literals followed directly by a letter or digit (``tp.Tensor``s): reST does not end
    a literal there, so the markup runs on and the page renders garbled."""
    return [
        m.group(0) + doc[m.end() :].split()[0]
        for m in _INLINE_LITERAL.finditer(doc)
        if doc[m.end() : m.end() + 1].isalnum()
    ]


def _source_docstrings():
    """(file:line, docstring) of every module, class and function in the package. tp.llm is left
    to its own tests (as in NOT_API)."""
    root = pathlib.Path(tp.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        if "llm" in path.relative_to(root).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{path.relative_to(root)}:{getattr(node, 'lineno', 1)}", doc


def test_no_inline_literal_runs_into_a_word():
    found = [f"{where}: {bad}" for where, doc in _source_docstrings() for bad in _literals_running_into_words(doc)]
    assert found == [], "write ``tp.Tensor`` values, not ``tp.Tensor``s:\n" + "\n".join(found)


def test_the_inline_literal_check_pairs_literals_as_written():
    assert _literals_running_into_words("are ``tp.Tensor``s, or ``x``'s ``a\nb`` and ``c``.") == ["``tp.Tensor``s,"]
