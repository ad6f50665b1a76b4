# Sphinx configuration of Tripy's documentation site (`make docs`). The guides are Markdown
# (MyST), the API reference is generated from the docstrings (docs/_ext/api_pages.py), and every
# Python code block runs during the build (docs/_ext/doc_blocks.py).
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "_ext"))
sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))

project = "Tripy"
author = "The Tripy authors"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "tripy_docs"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
html_theme = "alabaster"
html_title = "Tripy"
html_static_path = []
# The guides link README-relative paths to source files; those are not pages.
suppress_warnings = ["myst.xref_missing"]
