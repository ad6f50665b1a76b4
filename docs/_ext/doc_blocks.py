"""Runs the documentation's code blocks: the Sphinx build shows their output, and the test suite
runs the same blocks the same way (without Sphinx), so the docs cannot rot.

A block may carry markers, as comments, in the style of nvtripy's docs:

- ``# doc: omit`` at the end of a line: the line runs but is not shown.
- ``# doc: no-print-locals [NAME ...]``: do not show these local variables (all, without names).
- ``# doc: print-locals NAME ...``: show only these local variables.
- ``# doc: raises [ExceptionName]``: the block must raise (that exception); its message is shown.
  Any other block that raises fails the build.
- ``# doc: no-run`` (nvtripy's ``# doc: no-eval`` too): shown, never run (for code that needs
  what a build machine lacks, or that illustrates a mistake).

By default a block shows what it prints (standard output and error), then the Tripy objects (tensors, InputInfos, ...) it
bound, as ``>>> name`` followed by their repr, the way nvtripy's docs show local variables.
"""

import contextlib
import io
import re
import traceback

_MARKER = re.compile(r"#\s*doc:\s*([a-z-]+)(.*)$")


class DocBlockError(Exception):
    """A block raised without being marked, or did not raise although it was marked."""


def _markers(code):
    found = {}
    for line in code.splitlines():
        match = _MARKER.search(line)
        if match and match.group(1) != "omit":
            found[match.group(1)] = match.group(2).split()
    return found


def shown_code(code):
    """The code as the page shows it: without marker lines and ``# doc: omit`` lines."""
    lines = []
    for line in code.splitlines():
        match = _MARKER.search(line)
        if match:
            if match.group(1) == "omit" or not line[: match.start()].strip():
                continue
            line = line[: match.start()].rstrip()
        lines.append(line)
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def new_namespace():
    """What every page starts with: ``tp`` and ``np``, as in nvtripy's docs."""
    import numpy as np

    import tripy as tp

    return {"tp": tp, "np": np, "__name__": "__doc__"}


def _shows_as_local(value):
    import tripy as tp

    kinds = (tp.Tensor, tp.InputInfo, tp.DimensionInputInfo, tp.NamedDimension, tp.Bounds)
    return isinstance(value, kinds)


def run_block(code, namespace, filename="<doc>", first_line=1):
    """
    Runs ``code`` in ``namespace`` (shared by the blocks of one page) and returns the text to show
    under it: what it printed, then its local variables. Raises DocBlockError for an unmarked
    exception or a marked block that did not raise. ``filename`` and ``first_line`` place the
    block in its source file, so errors (Tripy's included) point at the documentation's lines.

    Example::

        import sys
        sys.path.insert(0, "docs/_ext")
        from doc_blocks import new_namespace, run_block

        ns = new_namespace()
        out = run_block("x = tp.ones((2,))\\nprint('hello')", ns)
        assert out.startswith("hello\\n>>> x\\ntensor(")
    """
    markers = _markers(code)
    if "no-run" in markers or "no-eval" in markers:
        return ""
    before = {name: id(value) for name, value in namespace.items()}
    stdout = io.StringIO()
    raised = None
    compiled = compile("\n" * (first_line - 1) + code, filename, "exec")
    # Standard error too: Tripy's logger writes there, and the page should show it.
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stdout):
        try:
            exec(compiled, namespace)
        except Exception as error:  # noqa: BLE001 - every error is reported or expected
            raised = error
    text = stdout.getvalue()
    if "raises" in markers:
        wanted = markers["raises"][0] if markers["raises"] else None
        if raised is None:
            raise DocBlockError(f"{filename}:{first_line}: the block is marked '# doc: raises' but raised nothing.")
        if wanted is not None and wanted not in [cls.__name__ for cls in type(raised).__mro__]:
            raise DocBlockError(
                f"{filename}:{first_line}: expected {wanted}, but the block raised {type(raised).__name__}: {raised}"
            )
        return text + f"{type(raised).__name__}: {raised}\n"
    if raised is not None:
        detail = "".join(traceback.format_exception(type(raised), raised, raised.__traceback__)[-3:])
        raise DocBlockError(f"{filename}:{first_line}: the block raised (mark it '# doc: raises' if it should):\n{detail}")
    return text + _locals_text(namespace, before, markers)


def _locals_text(namespace, before, markers):
    if "no-print-locals" in markers and not markers["no-print-locals"]:
        return ""
    hidden = set(markers.get("no-print-locals", ()))
    only = markers.get("print-locals")
    names = only if only else [
        name
        for name, value in namespace.items()
        if before.get(name) != id(value) and not name.startswith("_") and _shows_as_local(value)
    ]
    parts = []
    for name in names:
        if name in hidden:
            continue
        if name not in namespace:
            raise DocBlockError(f"'# doc: print-locals' names {name!r}, which the block does not define.")
        parts.append(f">>> {name}\n{namespace[name]!r}\n")
    return "".join(parts)


def markdown_blocks(text):
    """Yields ``(first_line, code)`` for each ```python (or ```py) fence of a Markdown page;
    ``first_line`` is the 1-based line of the code's first line."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(\s*)(```+|~~~+)\s*(\{[^}]*\}\s*)?(\S*)", lines[index])
        if not fence or not lines[index].strip().startswith(("```", "~~~")):
            index += 1
            continue
        indent, ticks, language = fence.group(1), fence.group(2), fence.group(4)
        start = index + 1
        end = start
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        if language in ("python", "py"):
            body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[start:end]]
            yield start + 1, "\n".join(body) + "\n"
        index = end + 1
