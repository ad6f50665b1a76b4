"""Sphinx extension for Tripy's site: writes the API pages before reading (``api_pages``), adds
each op's supported dtypes to its docstring, and runs every code block while reading a page,
showing its output under it (``doc_blocks``). A block that raises without being marked fails the
build.
"""

import os

from docutils import nodes
from sphinx.errors import ExtensionError

import api_pages
import doc_blocks

# Literal blocks in these languages run; in API pages, docstrings' ``Example::`` blocks (no
# language) run too.
_PYTHON = {"python", "py", "python3"}


def _write_api_pages(app):
    # Blocks name their pages by paths from the repository root; Tripy reads the lines it shows in
    # errors from those paths.
    os.chdir(os.path.dirname(app.srcdir))
    out_dir = os.path.join(app.srcdir, "api")
    os.makedirs(out_dir, exist_ok=True)
    for page, text in api_pages.pages().items():
        path = os.path.join(out_dir, page + ".rst")
        # Rewrite only what changed, so Sphinx's incremental build stays incremental.
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)


def _add_dtypes(app, what, name, obj, options, lines):
    if what in ("function", "class", "method"):
        lines.extend(api_pages.dtype_lines(name.split(".")[-1]))


def _runs(node, is_api_page):
    language = node.get("language")
    if language in _PYTHON:
        return True
    return is_api_page and language in (None, "default")


def _block_lines(app, docname):
    """Code text -> first line in the page's Markdown source, so errors name the doc's lines (by
    a path from the repository root, where the build runs)."""
    path = app.env.doc2path(docname)
    shown = os.path.relpath(path, os.path.dirname(app.srcdir))
    if not path.endswith(".md"):
        return shown, {}
    with open(path) as f:
        return shown, {code.rstrip("\n"): line for line, code in doc_blocks.markdown_blocks(f.read())}


def _run_page(app, doctree):
    docname = app.env.docname
    is_api_page = docname.startswith("api/")
    path, lines = _block_lines(app, docname)
    namespace = doc_blocks.new_namespace()
    for node in list(doctree.findall(nodes.literal_block)):
        if not _runs(node, is_api_page) or "doc-output" in node.get("classes", []):
            continue
        code = node.astext()
        if is_api_page:
            namespace = doc_blocks.new_namespace()  # each docstring example stands alone
        try:
            output = doc_blocks.run_block(code + "\n", namespace, path, lines.get(code.rstrip("\n"), 1))
        except doc_blocks.DocBlockError as error:
            raise ExtensionError(f"{docname}: {error}") from None
        shown = doc_blocks.shown_code(code)
        node.children = [nodes.Text(shown.rstrip("\n"))]
        node.rawsource = shown
        node["language"] = "python"
        if output:
            label = nodes.paragraph(classes=["doc-output-label"])
            label += nodes.strong(text="Output")
            out = nodes.literal_block(output, output.rstrip("\n"), language="text", classes=["doc-output"])
            parent = node.parent
            index = parent.index(node)
            parent.insert(index + 1, label)
            parent.insert(index + 2, out)


def setup(app):
    app.connect("builder-inited", _write_api_pages)
    app.connect("autodoc-process-docstring", _add_dtypes)
    app.connect("doctree-read", _run_page)
    return {"version": "1", "parallel_read_safe": False}
