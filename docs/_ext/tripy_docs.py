"""Sphinx extension for Tripy's site: writes the API pages before reading (``api_pages``), adds
each op's supported dtypes to its docstring, and runs every code block while reading a page,
showing its output under it (``doc_blocks``). A block that raises without being marked fails the
build.
"""

import glob
import hashlib
import json
import os
import re

from docutils import nodes
from sphinx import addnodes
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
        # Sphinx highlights a literal block only when its rawsource equals its text (otherwise it
        # takes it for a parsed literal), so both get the same string, trailing newline removed.
        shown = doc_blocks.shown_code(code).rstrip("\n")
        node.children = [nodes.Text(shown)]
        node.rawsource = shown
        node["language"] = "python"
        if output:
            label = nodes.paragraph(classes=["doc-output-label"])
            label += nodes.strong(text="Output")
            output = output.rstrip("\n")
            out = nodes.literal_block(output, output, language="text", classes=["doc-output"])
            parent = node.parent
            index = parent.index(node)
            parent.insert(index + 1, label)
            parent.insert(index + 2, out)


def _index_as_tp(app, doctree):
    """Adds an index entry ``tp.NAME`` beside autodoc's ``NAME() (in module tripy)`` for every
    documented object, so that the site's search finds ``tp.compile`` as users write it (the
    search matches a query against index entries whole; object names alone are ``tripy.compile``,
    which a query ``tp.compile`` does not contain)."""
    domain_entries = app.env.get_domain("index").entries.setdefault(app.env.docname, [])
    for desc in doctree.findall(addnodes.desc):
        if desc.get("domain") != "py":
            continue
        parent = desc.parent
        position = parent.index(desc)
        index = parent[position - 1] if position > 0 else None
        if not isinstance(index, addnodes.index):
            continue
        for signature in desc.findall(addnodes.desc_signature):
            target = signature["ids"][0] if signature["ids"] else ""
            parts = target.split(".")
            if len(parts) < 2 or parts[0] != "tripy" or parts[1] in api_pages.INTERNAL_MODULES:
                continue
            entry = ("single", "tp." + ".".join(parts[1:]), target, "", None)
            index["entries"].append(entry)
            # The index domain copied the page's entries before this event: give it this one too
            # (the general index and the search index are written from it).
            domain_entries.append(entry)


_TP_NAME = re.compile(r"^tp\.([A-Za-z_][\w.]*)(\(.*\))?$")


def _link_tp_names(app, doctree):
    """Makes inline code naming the API (```tp.compile```, ```tp.Tensor.reshape(...)```) on the
    guides a link to its entry. Names without an entry stay plain text (Sphinx resolves these
    references quietly: the site is not built nitpicky)."""
    if app.env.docname.startswith("api/"):
        return
    for literal in list(doctree.findall(nodes.literal)):
        if isinstance(literal.parent, (nodes.reference, addnodes.pending_xref, nodes.literal_block)):
            continue
        match = _TP_NAME.match(literal.astext())
        if not match:
            continue
        xref = addnodes.pending_xref(
            "", refdomain="py", reftype="obj", reftarget="tripy." + match.group(1),
            refexplicit=True, refwarn=False, refdoc=app.env.docname,
        )
        literal.replace_self(xref)
        xref += literal


def _complete_search_index(app, exception):
    """Writes every index entry into the search index. Sphinx 5.3 drops the entries of pages an
    incremental build does not rewrite (its index loader restores words and titles, not index
    entries), so after `make docs` with one guide changed, searching ``tp.compile`` found nothing
    again. The index domain keeps every page's entries, so they are written from there."""
    if exception is not None or app.builder.format != "html" or not hasattr(app.builder, "indexer"):
        return
    path = os.path.join(app.outdir, "searchindex.js")
    if not os.path.exists(path):
        return
    prefix, suffix = "Search.setIndex(", ")"
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not (text.startswith(prefix) and text.endswith(suffix)):
        return
    index = json.loads(text[len(prefix) : -len(suffix)])
    file_number = {docname: number for number, docname in enumerate(index["docnames"])}
    entries = {}
    for docname, items in sorted(app.env.get_domain("index").entries.items()):
        if docname not in file_number:
            continue
        for entry_type, value, target, *_ in items:
            if entry_type == "single":
                names = [part.strip() for part in value.split(";")[:2]]
            elif entry_type in ("pair", "triple"):
                names = [part.strip() for part in value.split(";")]
            else:
                continue
            for name in filter(None, names):
                found = entries.setdefault(name.lower(), [])
                if [file_number[docname], target or ""] not in found:
                    found.append([file_number[docname], target or ""])
    index["indexentries"] = entries
    with open(path, "w", encoding="utf-8") as f:
        f.write(prefix + json.dumps(index, separators=(",", ":"), sort_keys=True) + suffix)


def _tripy_fingerprint(app):
    """Changes whenever the Tripy that runs the pages' code does: its Python sources and its
    compiled core."""
    package = os.path.join(os.path.dirname(app.srcdir), "python", "tripy")
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(package, "**", "*.py"), recursive=True)):
        with open(path, "rb") as f:
            digest.update(path.encode() + f.read())
    for path in sorted(glob.glob(os.path.join(package, "_C*.so"))):
        stat = os.stat(path)
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _rerun_when_tripy_changed(app, env, added, changed, removed):
    """A page's outputs come from running Tripy, not only from its source: when Tripy changed
    since the last build, every page is read (and its blocks run) again, so an incremental
    `make docs` never shows outputs of an older Tripy."""
    fingerprint = _tripy_fingerprint(app)
    previous = getattr(env, "tripy_fingerprint", None)
    env.tripy_fingerprint = fingerprint
    if previous is None or previous == fingerprint:
        return []
    return sorted(set(env.found_docs) - set(added) - set(changed) - set(removed))


def setup(app):
    app.connect("builder-inited", _write_api_pages)
    app.connect("autodoc-process-docstring", _add_dtypes)
    app.connect("doctree-read", _run_page)
    app.connect("doctree-read", _index_as_tp)
    app.connect("doctree-read", _link_tp_names)
    app.connect("build-finished", _complete_search_index)
    app.connect("env-get-outdated", _rerun_when_tripy_changed)
    return {"version": "1", "parallel_read_safe": False}
