# Sphinx configuration of Tripy's documentation site (`make docs`). The guides are Markdown
# (MyST), the API reference is generated from the docstrings (docs/_ext/api_pages.py), and every
# Python code block runs during the build (docs/_ext/doc_blocks.py). The theme and the copy button
# come from Debian packages that `make docs` installs (scripts/debian-packages-docs.txt); where
# they are absent (the test machine builds the site with Sphinx alone) the site falls back to
# Sphinx's own theme and has no copy button.
import importlib
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "_ext"))
sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))

import tripy  # noqa: E402  (the version shown on every page is the package's own)


def _have(module):
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


project = "Tripy"
author = "The Tripy authors"
copyright = "2026, The Tripy authors"
release = tripy.__version__
version = ".".join(release.split(".")[:2])

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "tripy_docs", "benchmark_pages"]
if _have("sphinx_copybutton"):
    extensions.append("sphinx_copybutton")
    # Copy the code, not the output blocks nor a ">>> " prompt.
    copybutton_selector = "div.highlight-python pre"
    copybutton_prompt_text = ">>> "

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# benchmarks/_generated: the Benchmarks page includes these (docs/_ext/benchmark_pages.py).
exclude_patterns = ["_build", "_ext", "_templates", "benchmarks/_generated"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_title = f"Tripy {release}"
html_short_title = "Tripy"
html_static_path = ["_static"]
html_css_files = ["tripy.css"]
html_show_sourcelink = False
if _have("pydata_sphinx_theme"):
    html_theme = "pydata_sphinx_theme"
    html_theme_options = {
        # The page's own headings in the right-hand column, two levels deep.
        "show_toc_level": 2,
        "navbar_align": "left",
        "search_bar_text": "Search the docs (e.g. tp.compile)",
        "footer_items": ["copyright.html", "tripy-version.html"],
    }
    templates_path = ["_templates"]
else:
    html_theme = "alabaster"
    html_theme_options = {"description": f"version {release}"}
    templates_path = []

# The guides link README-relative paths to source files; those are not pages.
suppress_warnings = ["myst.xref_missing"]
