"""The documentation site's content stays true: every Python block of every guide runs as the
site build runs it (docs/_ext/doc_blocks.py), every public name has a place in the API reference,
user pages speak the project's own words, the benchmark tables come from the benchmark JSON, and,
where Sphinx is installed (make docs installs it), the whole site builds with warnings as errors,
its executed blocks are highlighted and its search knows ``tp.compile``. Where Chromium is
installed too, a headless browser opens the built site: pages load, search finds ``tp.compile``,
and no code line is cut off at 1280 px."""

import glob
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

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


needs_sphinx = pytest.mark.skipif(not _have_sphinx(), reason="Sphinx and MyST are installed by `make docs`, not by the test set-up")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for this module's tests, with warnings as errors."""
    out = tmp_path_factory.mktemp("site") / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out


@needs_sphinx
def test_site_builds_with_warnings_as_errors(site):
    for page in ("index", "install", "concepts", "benchmarks", "api/compiling", "guides/getting_started"):
        assert os.path.exists(site / f"{page}.html"), page


def _code_blocks(page_html, language):
    return re.findall(rf'<div class="highlight-{language} notranslate"><div class="highlight"><pre>(.*?)</pre>', page_html, re.S)


@needs_sphinx
def test_executed_blocks_are_highlighted(site):
    # Every block of the guide runs while the site builds; Sphinx highlights a block only when its
    # rawsource equals its text, which the runner must keep true when it replaces the code shown.
    page = (site / "guides" / "getting_started.html").read_text()
    blocks = _code_blocks(page, "python")
    assert len(blocks) >= 5
    for block in blocks:
        assert '<span class="k">' in block or '<span class="n">' in block, block[:200]
    api = _code_blocks((site / "api" / "shapes.html").read_text(), "python")
    assert api and all('<span class="n">' in block for block in api)
    # Outputs are text blocks of their own, under a label.
    assert "doc-output" in page and "Output" in page


@needs_sphinx
def test_search_index_knows_tp_names(site):
    text = (site / "searchindex.js").read_text()
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    assert [index["docnames"][number] for number, _ in index["indexentries"]["tp.compile"]] == ["api/compiling"]
    assert "tp.tensor.reshape" in index["indexentries"] or "tp.tensor" in index["indexentries"]


@needs_sphinx
def test_site_shows_version_and_footer(site):
    page = (site / "index.html").read_text()
    assert tp.__version__ in page
    assert "The Tripy authors" in page and "©." not in page.replace("&copy;", "©")


def test_api_pages_open_with_contents():
    texts = api_pages.pages()
    assert ":class: api-contents" in texts["elementwise"] and ":py:func:`tp.exp <tripy.exp>`" in texts["elementwise"]
    assert api_pages.summary(tp.split).endswith(".") and "\n" not in api_pages.summary(tp.split)


# Words of the project's own workflow that mean nothing to a reader of the site.
INTERNAL_WORDS = re.compile(r"\bseeds\b|seeds'|seed documents?|work sessions?|\bsessions?\b|commit log", re.I)
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def test_user_pages_use_the_projects_own_words():
    pages = [os.path.join(ROOT, "README.md")] + [
        p for p in glob.glob(os.path.join(ROOT, "docs", "**", "*"), recursive=True)
        if p.endswith((".md", ".json", ".html", ".py")) and "_generated" not in p and os.sep + "api" + os.sep not in p
    ]
    found = []
    for path in pages:
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            for match in list(INTERNAL_WORDS.finditer(line)) + list(COMMIT_HASH.finditer(line)):
                found.append(f"{os.path.relpath(path, ROOT)}:{number}: {match.group(0)!r}")
    assert not found, "\n".join(found)
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "make demo" in readme and "make test" in readme


sys.path.insert(0, os.path.join(ROOT, "scripts"))
import plot_benchmarks  # noqa: E402


def test_benchmark_pages_come_from_the_json():
    runs = plot_benchmarks.load()
    assert runs and all(r["records"] for r in runs)
    for run in runs:
        for record in run["records"]:
            assert {"model", "shape", "system", "ms"} <= set(record) and record["ms"] > 0, (run["file"], record)
    summary = plot_benchmarks.summary_markdown(runs)
    # Units and devices on every row; each workload's newest run.
    rows = [line for line in summary.splitlines()[2:]]
    devices = ("H100", "H200", "EPYC", "Xeon")
    assert rows and all(("ms" in row or "µs" in row) and any(d in row for d in devices) for row in rows)
    assert "gpt2 (124M), B1×128 | H100 | float16 | 0.555\u00a0ms" in summary  # run 8, not an older run
    measurements = plot_benchmarks.measurements_markdown(runs)
    assert measurements.count("#### ") == len(runs)
    # Without matplotlib the page keeps its tables and says why it has no charts.
    assert "matplotlib" in plot_benchmarks.charts_markdown(None, "charts")


def test_benchmark_pages_are_rewritten_for_another_charts_directory(tmp_path):
    # A run by hand names the charts from _generated's own directory; the docs build names them
    # from the page's: the second must not keep the first's pages.
    pytest.importorskip("matplotlib")
    plot_benchmarks.write(str(tmp_path), image_dir="charts")
    assert "{figure} charts/" in (tmp_path / "charts.md").read_text()
    plot_benchmarks.write(str(tmp_path), image_dir="benchmarks/_generated/charts")
    text = (tmp_path / "charts.md").read_text()
    assert "{figure} charts/" not in text and "{figure} benchmarks/_generated/charts/" in text


def test_benchmark_charts_are_drawn_where_matplotlib_is(tmp_path):
    pytest.importorskip("matplotlib")
    made = plot_benchmarks.charts(plot_benchmarks.load(), str(tmp_path))
    devices = {run["device"] for run in plot_benchmarks.load()}
    assert len(made) >= len(devices)
    for name, caption in made:
        svg = (tmp_path / name).read_text()
        assert svg.lstrip().startswith("<?xml") and "tripy" in svg and ":" not in caption


# The browser check: headless Chromium on the built site (Debian's `chromium`, which `make docs`
# installs). Pages are opened from file:// URLs; a harness page beside them loads every page in a
# 1280 px wide frame and measures its code blocks.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

HARNESS = """<!DOCTYPE html><html><body>
<iframe id="frame" style="width: 1280px; height: 900px; border: 0"></iframe><pre id="result"></pre>
<script>
const pages = PAGES;
const results = {};
let next = 0;
function load() {
  if (next >= pages.length) { document.getElementById("result").textContent = JSON.stringify(results); return; }
  const page = pages[next++];
  const frame = document.getElementById("frame");
  frame.onload = () => {
    const doc = frame.contentDocument;
    const cut = [];
    for (const pre of doc.querySelectorAll("pre")) {
      if (pre.offsetParent !== null && pre.scrollWidth > pre.clientWidth + 1) cut.push(pre.textContent.slice(0, 120));
    }
    const h1 = doc.querySelector("h1");
    results[page] = {h1: h1 ? h1.textContent : null, cut: cut, blocks: doc.querySelectorAll("pre").length};
    load();
  };
  frame.src = page;
}
window.onload = load;
</script></body></html>
"""


# What scripts/sanitize.sh sets for the instrumented Python: Chromium inherits it otherwise, and with
# the sanitizer runtime preloaded it spins until the timeout (make test-asan). Chromium is not under test.
_SANITIZER_ENV = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS")


def _chromium_dom(url, profile):
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         f"--user-data-dir={profile}", "--window-size=1280,900", "--virtual-time-budget=20000", "--dump-dom", url],
        capture_output=True, text=True, timeout=60,
        env={name: value for name, value in os.environ.items() if name not in _SANITIZER_ENV},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@needs_sphinx
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is installed by `make docs` (scripts/debian-packages-docs.txt)")
def test_site_in_a_browser(site):
    profile = tempfile.mkdtemp(prefix="tripy-chromium-")
    try:
        pages = sorted(os.path.relpath(p, site) for p in glob.glob(str(site / "**" / "*.html"), recursive=True)
                       if not os.path.basename(p).startswith(("_", "search", "genindex")))
        (site / "_browser_check.html").write_text(HARNESS.replace("PAGES", json.dumps(pages)))
        dom = _chromium_dom((site / "_browser_check.html").as_uri(), profile)
        results = json.loads(html.unescape(re.search(r'<pre id="result">(.*?)</pre>', dom, re.S).group(1)))
        assert set(results) == set(pages)
        # The index, a guide and an API page load, with their titles.
        assert results["index.html"]["h1"].startswith("Tripy")
        assert results["guides/getting_started.html"]["h1"].startswith("Getting started")
        assert results["api/compiling.html"]["h1"].startswith("Compiling and running") and results["api/compiling.html"]["blocks"]
        cut = {page: r["cut"] for page, r in results.items() if r["cut"]}
        assert not cut, f"code lines cut off at 1280 px: {cut}"
        # Search runs in the page's JavaScript; its first result is tp.compile's entry.
        dom = _chromium_dom((site / "search.html").as_uri() + "?q=tp.compile", profile)
        found = re.findall(r'<ul class="search">\s*<li><a href="([^"]+)"', dom)
        assert found == ["api/compiling.html#tripy.compile"], dom[-3000:]
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@needs_sphinx
def test_pages_rerun_when_tripy_changes():
    # An incremental build reads again every page when Tripy (its sources or its core) changed,
    # so guide outputs never go stale; with Tripy unchanged it reads only what changed.
    import types

    import tripy_docs

    app = types.SimpleNamespace(srcdir=os.path.join(ROOT, "docs"))
    env = types.SimpleNamespace(found_docs={"index", "guides/eager", "api/tensor"})
    assert tripy_docs._rerun_when_tripy_changed(app, env, set(), set(), set()) == []  # first build: all read anyway
    assert tripy_docs._rerun_when_tripy_changed(app, env, set(), {"guides/eager"}, set()) == []
    env.tripy_fingerprint = "a Tripy of before"
    assert tripy_docs._rerun_when_tripy_changed(app, env, set(), {"guides/eager"}, set()) == ["api/tensor", "index"]


@needs_sphinx
def test_guides_link_api_names(site):
    page = (site / "guides" / "compiling.html").read_text()
    assert 'href="../api/compiling.html#tripy.compile"' in page
    links = sum(len(re.findall(r'href="\.\./api/[^"#]+#tripy\.', p.read_text())) for p in (site / "guides").glob("*.html"))
    assert links >= 50
