"""The documentation site's content stays true: every Python block of every guide runs as the
site build runs it (docs/_ext/doc_blocks.py), every public name has a place in the API reference,
and, where Sphinx is installed (make docs installs it), the whole site builds with warnings as
errors."""

import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "docs", "_ext"))

import api_pages  # noqa: E402
import doc_blocks  # noqa: E402

import tripy as tp  # noqa: E402

PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_python_block_of_the_page_runs(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    # The guides call tripy-run as a reader whose venv is active would: from PATH (the venv's bin,
    # or the build tree's where another Python runs the tests, as on the GPU machine).
    build_tools = os.path.join(ROOT, os.environ.get("TRIPY_BUILD_DIR", "build"), "core")
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.join(sys.prefix, "bin"), build_tools, os.environ["PATH"]]))
    with open(path) as f:
        blocks = list(doc_blocks.markdown_blocks(f.read()))
    namespace = doc_blocks.new_namespace()
    keys_before = set(tp._C.plugin_keys())
    for first_line, code in blocks:
        doc_blocks.run_block(code, namespace, os.path.relpath(path, ROOT), first_line)
    # CUDA code the page registers compiles (NVRTC needs no GPU), so a GPU reader can run it too.
    if hasattr(tp._C, "_plugin_ptx"):
        for key in set(tp._C.plugin_keys()) - keys_before:
            if tp._C.plugin_info(key)[1]:
                assert tp._C._plugin_ptx(key, "{}", 90) is None or ".entry" in tp._C._plugin_ptx(key, "{}", 90)


def test_guides_have_python_blocks():
    guides = [p for p in PAGES if "/guides/" in p]
    with_code = [p for p in guides if any(True for _ in doc_blocks.markdown_blocks(open(p).read()))]
    assert len(guides) >= 9 and len(with_code) >= 8


def test_every_public_name_is_on_an_api_page():
    texts = api_pages.pages()
    import tripy as tp

    for name, obj in api_pages.public_names().items():
        page = api_pages.page_of(name, obj)
        concrete_dtype = isinstance(obj, type) and issubclass(obj, tp.dtype) and obj is not tp.dtype
        if concrete_dtype:
            assert f"``tp.{name}``" in texts["dtypes"] or name in ("floating", "integer"), name
        else:
            assert f"tripy.{name}" in texts[page], name


def test_op_pages_list_dtypes_from_the_op_table():
    assert api_pages.dtype_lines("exp") == ["", "**Supported dtypes:** ``float32``, ``float16``, ``bfloat16``", ""]
    where = api_pages.dtype_lines("where")
    assert "- input 0: ``bool``" in where
    assert api_pages.dtype_lines("reshape") == []  # any dtype
    # Composites list the dtypes of the op their input goes into (dtype_rules.COMPOSITES).
    assert api_pages.dtype_lines("log_softmax") == api_pages.dtype_lines("softmax")
    assert "``int8``" in "".join(api_pages.dtype_lines("clamp")) and "``bool``" in "".join(api_pages.dtype_lines("masked_fill"))


def test_markers():
    ns = doc_blocks.new_namespace()
    assert doc_blocks.run_block("x = tp.ones((1,))  # doc: omit\nprint(int(x.shape[0]))\n", ns) == "1\n>>> x\n" + repr(ns["x"]) + "\n"
    assert doc_blocks.shown_code("# doc: no-print-locals\na = 1  # doc: omit\nb = 2\n") == "b = 2\n"
    assert doc_blocks.run_block("# doc: no-print-locals\ny = tp.ones((1,))\n", ns) == ""
    out = doc_blocks.run_block("# doc: raises TripyException\ntp.ones((2,)) + tp.ones((3,))\n", ns)
    assert out.startswith("TripyException: ")
    with pytest.raises(doc_blocks.DocBlockError, match="raised nothing"):
        doc_blocks.run_block("# doc: raises\nz = 1\n", ns)
    with pytest.raises(doc_blocks.DocBlockError, match="mark it '# doc: raises'"):
        doc_blocks.run_block("1 / 0\n", ns)
    with pytest.raises(doc_blocks.DocBlockError, match="expected KeyError"):
        doc_blocks.run_block("# doc: raises KeyError\n1 / 0\n", ns)


def test_errors_in_blocks_name_the_doc_line(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\n# doc: raises TripyException\nbad = tp.ones((2,)) + tp.ones((3,))\n```\n")
    monkeypatch.chdir(tmp_path)
    [(first_line, code)] = list(doc_blocks.markdown_blocks(page.read_text()))
    out = doc_blocks.run_block(code, doc_blocks.new_namespace(), "page.md", first_line)
    assert "page.md:5" in out and "bad = tp.ones((2,)) + tp.ones((3,))" in out


def test_readme_links_to_the_site():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "make docs" in readme and "docs/index.md" in readme


def _have_sphinx():
    try:
        import myst_parser  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _have_sphinx(), reason="Sphinx and MyST are installed by `make docs`, not by the test set-up")
def test_site_builds_with_warnings_as_errors(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert os.path.exists(tmp_path / "html" / "api" / "compiling.html")
