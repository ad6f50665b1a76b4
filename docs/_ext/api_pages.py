"""Writes the API reference's pages (reStructuredText for Sphinx's autodoc) from what ``tripy``
exports: every public name lands on exactly one page, chosen by the module that defines it, and
each op's supported dtypes come from the core's op table (the same data that validates calls).

Kept free of Sphinx so the test suite can check that no public name is left out.
"""

import inspect
import re

# Page file -> (title, the defining modules (suffixes of ``tripy.``) whose names it holds).
PAGES = [
    ("tensor", "Tensors", ["frontend.tensor"]),
    ("dtypes", "Data types", ["frontend.dtypes"]),
    ("creation", "Creating tensors", ["frontend.ops.creation", "random"]),
    ("elementwise", "Elementwise operations", ["frontend.ops.elementwise"]),
    ("reductions", "Reductions and scans", ["frontend.ops.reduce", "frontend.ops.scan"]),
    ("shapes", "Shapes, layout and indexing", ["frontend.ops.shape_ops", "frontend.ops.pad", "frontend.ops.indexing"]),
    (
        "nn",
        "Matrix products, attention, pooling and resizing",
        ["frontend.ops.linalg", "frontend.ops.attention", "frontend.ops.pooling", "frontend.ops.resize"],
    ),
    ("sampling", "Sampling tokens", ["frontend.ops.sampling"]),
    ("quantization", "Quantization", ["frontend.ops.quantize"]),
    ("misc", "Casting, copying and comparing", ["frontend.ops.misc"]),
    ("plugins", "Custom plugins", ["frontend.ops.plugin", "frontend.plugin"]),
    ("modules", "Modules", ["frontend.module", "frontend.modules"]),
    ("checkpoints", "Loading and saving weights", ["frontend.safetensors"]),
    ("llm", "Large language models", ["llm"]),
    ("onnx", "ONNX models", ["onnx"]),
    (
        "compiling",
        "Compiling and running",
        ["frontend.compile", "frontend.input_info", "frontend.executable", "frontend.profile"],
    ),
    ("devices", "Devices and streams", ["frontend.device", "frontend.stream"]),
    ("parallel", "Tensor parallelism", ["frontend.mesh", "frontend.ops.collectives"]),
    ("errors_logging", "Errors, logging, configuration and types", ["exception", "logging", "config", "types"]),
]

# Submodules ``import tripy`` exposes as attributes only because they are packages of the
# implementation; they are not API.
INTERNAL_MODULES = {"exception", "frontend", "logging", "utils"}
# Public modules: documented as a whole.
PUBLIC_MODULES = {"config", "llm", "onnx", "random", "types"}

# Pages with at least this many entries open with a contents table.
CONTENTS_FROM = 4

# Public names whose core op has another name.
OP_NAMES = {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm", "GroupNorm": "groupnorm", "InstanceNorm": "instancenorm", "topk": "topk_values", "Conv": "convolution", "ConvTranspose": "convolution", "matmul": "matmul"}
# Tensor operators documented on the Tensor page with their op table rows.
OPERATORS = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "matmul", "neg", "abs",
             "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"]


def public_names():
    """``name -> object`` for everything ``tripy`` exports (the API that the reference covers)."""
    import tripy as tp
    import tripy.llm  # noqa: F401  (``import tripy`` loads it on first use; it is API all the same)

    names = {}
    for name in sorted(dir(tp)):
        if name.startswith("_") or name in INTERNAL_MODULES:
            continue
        names[name] = getattr(tp, name)
    return names


def _defining_module(name, obj):
    if inspect.ismodule(obj):
        return obj.__name__.removeprefix("tripy.")
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return module.removeprefix("tripy.")


def page_of(name, obj):
    """The page file a public name belongs on (KeyError if no page claims its module)."""
    module = _defining_module(name, obj)
    for page, _, prefixes in PAGES:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return page
    raise KeyError(f"No API page holds tripy.{name} (defined in tripy.{module}); add its module to PAGES.")


def op_dtypes():
    """Op name -> (display name, [dtype list per input]) from the core's op table, read through
    tripy.frontend.ops.dtype_rules (which the op x dtype test matrix reads too)."""
    from tripy.frontend.ops import dtype_rules

    return dtype_rules.op_dtype_names()


def dtype_lines(name):
    """reST lines naming the dtypes op ``name`` accepts, or [] when the op table has no row. A
    composite that passes its input straight to one op (dtype_rules.COMPOSITES) lists that
    op's dtypes for it."""
    from tripy.frontend.ops import dtype_rules

    if name in dtype_rules.COMPOSITES:
        accepted = dtype_rules.accepted(name)
        return ["", f"**Supported dtypes:** {_code_list(', '.join(d.name for d in accepted))}", ""]
    table = op_dtypes()
    row = table.get(OP_NAMES.get(name, name))
    if row is None or not row[1]:
        return []
    _, rows = row
    if len(set(rows)) == 1:
        return ["", f"**Supported dtypes:** {_code_list(rows[0])}", ""]
    lines = ["", "**Supported dtypes**, by input:", ""]
    lines += [f"- input {index}: {_code_list(dtypes)}" for index, dtypes in enumerate(rows)]
    return lines + [""]


def _code_list(text):
    return ", ".join(f"``{d.strip()}``" for d in text.split(","))


def _entry(name, obj):
    import tripy as tp

    if inspect.ismodule(obj):
        return [f".. automodule:: tripy.{name}", "   :members:", ""]
    if isinstance(obj, type) and issubclass(obj, tp.dtype) and obj is not tp.dtype and obj.name == name:
        return []  # concrete dtypes and families are listed in one table on the dtypes page
    if inspect.isclass(obj):
        inherits = [base for base in obj.__bases__ if base is not object]
        return [f".. autoclass:: tripy.{name}", "   :members:"] + (["   :show-inheritance:"] if inherits else []) + [""]
    if inspect.isfunction(obj):
        return [f".. autofunction:: tripy.{name}", ""]
    # An instance (tp.logger): document its class under the public name.
    cls = type(obj)
    return [f".. autodata:: tripy.{name}", "   :annotation:", "",
            f".. autoclass:: {cls.__module__}.{cls.__name__}", "   :members:", ""]


def summary(obj):
    """The first sentence of ``obj``'s docstring (reST, its inline markup kept whole), for a
    page's contents table."""
    doc = inspect.getdoc(obj) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    # "``tp.DimensionSize``s": an inline literal must end before a word character; escape the gap.
    paragraph = re.sub(r"(?<=[\w)\]])``(?=\w)", r"``\\ ", paragraph)
    sentence = paragraph
    for end in re.finditer(r"[.:;](?=\s|$)", paragraph):
        candidate = paragraph[: end.start() + 1]
        if candidate.count("``") % 2 == 0:  # not inside inline code (``start .. stop``)
            sentence = candidate
            break
    return sentence[:-1] + "." if sentence.endswith((":", ";")) else sentence


def _contents(entries):
    """A table at the top of a page: each entry's name, linked, and its first sentence, so a long
    page can be scanned before it is read."""
    lines = [".. list-table::", "   :class: api-contents", "   :widths: 30 70", ""]
    for name, obj in entries:
        role = "mod" if inspect.ismodule(obj) else "class" if inspect.isclass(obj) else "func" if callable(obj) else "data"
        lines += [f"   * - :py:{role}:`tp.{name} <tripy.{name}>`", f"     - {summary(obj) or ' '}"]
    return lines + [""]


def _dtype_table():
    import tripy as tp

    concrete = [tp.float32, tp.float16, tp.bfloat16, tp.float8, tp.int4, tp.int8, tp.int32, tp.int64, tp.bool]
    lines = [".. list-table::", "   :header-rows: 1", "", "   * - dtype", "     - bytes per element", "     - family"]
    for dt in concrete:
        family = "floating" if issubclass(dt, tp.floating) else "integer" if issubclass(dt, tp.integer) else "-"
        lines += [f"   * - ``tp.{dt.name}``", f"     - {dt.itemsize}", f"     - {family}"]
    return lines + [""]


def _operator_table():
    table = op_dtypes()
    lines = [
        "Operators",
        "---------",
        "",
        "Python operators on tensors build these ops (numbers on either side become tensors of the",
        "other operand's dtype):",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - operator",
        "     - supported dtypes",
    ]
    for op in OPERATORS:
        if op in table and table[op][1]:
            display = table[op][0].strip("'")
            lines += [f"   * - ``{display}``", f"     - {_code_list(table[op][1][0])}"]
    return lines + [""]


def pages():
    """``page file name -> reST text``, plus ``index``."""
    by_page = {page: [] for page, _, _ in PAGES}
    for name, obj in public_names().items():
        by_page[page_of(name, obj)].append((name, obj))
    texts = {}
    for page, title, _ in PAGES:
        entries = by_page[page]
        if not entries:
            continue
        lines = [title, "=" * len(title), "", ".. currentmodule:: tripy", ""]
        documented = [(name, obj) for name, obj in entries if _entry(name, obj)]
        if len(documented) >= CONTENTS_FROM:
            lines += _contents(documented)
        if page == "dtypes":
            lines += _dtype_table()
        if page == "tensor":
            lines += _operator_table()
        for name, obj in entries:
            lines += _entry(name, obj)
        texts[page] = "\n".join(lines) + "\n"
    index = ["API reference", "=============", "",
             "Every public name of ``tripy`` (``import tripy as tp``), grouped by topic. Each op lists",
             "the dtypes it accepts, taken from the core's op tables; every example on these pages ran",
             "while the site was built.", "",
             ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {page}" for page, _, _ in PAGES if page in texts]
    texts["index"] = "\n".join(index) + "\n"
    return texts
