"""Sphinx extension for the Benchmarks page: before the pages are read, writes its summary table,
its per-run tables and its bar charts from the benchmark JSON (docs/benchmarks/*.json) with
scripts/plot_benchmarks.py, into docs/benchmarks/_generated/, which docs/benchmarks.md includes.
The charts need matplotlib; without it the page says so and keeps its tables.
"""

import importlib.util
import os

GENERATED = os.path.join("benchmarks", "_generated")


def _plot_module(srcdir):
    path = os.path.join(os.path.dirname(srcdir), "scripts", "plot_benchmarks.py")
    spec = importlib.util.spec_from_file_location("plot_benchmarks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(app):
    plot = _plot_module(app.srcdir)
    plot.write(os.path.join(app.srcdir, GENERATED), os.path.join(app.srcdir, "benchmarks"),
               image_dir=GENERATED.replace(os.sep, "/") + "/charts")


def setup(app):
    app.connect("builder-inited", _write)
    return {"version": "1", "parallel_read_safe": True}
