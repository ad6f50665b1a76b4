#!/usr/bin/env python3
"""Turns the benchmark results stored as JSON (docs/benchmarks/*.json) into what the site's
Benchmarks page shows: a summary table of the latest measurement of every workload on every
device, a bar chart per suite and device (Tripy against each peer, one panel per model and size),
and a table per measurement run. `make docs` runs it through docs/_ext/benchmark_pages.py; run it
by hand to look at the charts:

    python3 scripts/plot_benchmarks.py [--data docs/benchmarks] [--out DIR]

Each JSON file is one measurement run on one device: its suite ("models", "llm", "blocks",
"attention", "micro"), device, date, optional run number, dtype, peers, the command that measured
it, notes, and "records" in bench/models.py's output format, one per system and workload:
{"model", "shape", "system", "ms", ...} (optional: "compile_s", "repeat" for a second measurement
of the same configuration, and suite-specific fields). Without matplotlib the tables are written
and the charts are left out, with a line saying so.
"""

import argparse
import glob
import hashlib
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "docs", "benchmarks")

# Display order and wording of the suites, and their short names in the summary table.
SHORT = {"models": "model", "llm": "LLM", "blocks": "block", "attention": "attention", "micro": "small case"}
SUITES = {
    "models": ("Whole models", "time per call"),
    "llm": ("LLM generation", "time per decode step"),
    "blocks": ("Blocks", "time per call"),
    "attention": ("Attention", "time per call"),
    "micro": ("Small cases", "time per call"),
}
TRIPY = "tripy"
TRIPY_COLOR = "#2f6fb5"
PEER_COLORS = ["#f0a35e", "#c6793a", "#8c510a", "#7f7f7f", "#b8b8b8"]


def load(data_dir=DATA):
    """Every measurement run, newest first within each suite and device."""
    runs = []
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        run["file"] = os.path.basename(path)
        for key in ("title", "suite", "device", "date", "records"):
            if key not in run:
                raise ValueError(f"{path}: no {key!r}")
        if run["suite"] not in SUITES:
            raise ValueError(f"{path}: unknown suite {run['suite']!r} (one of {', '.join(SUITES)})")
        runs.append(run)
    suite_order = list(SUITES)
    runs.sort(key=lambda r: (suite_order.index(r["suite"]), _device_order(r["device"]), _newest_first(r)))
    return runs


def _device_order(device):
    return (0 if "H100" in device else 1 if "H200" in device else 2, device)


def _newest_first(run):
    return tuple(-ord(c) for c in run["date"]) + (-run.get("run", 0),)


def _when(run):
    return run["date"] + (f", run\u00a0{run['run']}" if "run" in run else "")


def _workloads(run):
    """(model, shape) -> system -> [ms per repeat], in the order the file lists them."""
    table = {}
    for record in run["records"]:
        table.setdefault((record["model"], record["shape"]), {}).setdefault(record["system"], []).append(record["ms"])
    return table


def _systems(run):
    seen = []
    for record in run["records"]:
        if record["system"] not in seen:
            seen.append(record["system"])
    return [TRIPY] + [s for s in seen if s != TRIPY] if TRIPY in seen else seen


def latest(runs):
    """For every (suite, device, model, shape): the newest run that measured it, and its times."""
    found = {}
    for run in runs:  # newest first within a suite and device
        for (model, shape), times in _workloads(run).items():
            found.setdefault((run["suite"], run["device"], model, shape), (run, times))
    return found


def fmt_time(ms, unit="ms", with_unit=True):
    """A time as the run's unit shows it: "ms", or "auto" (µs below a millisecond)."""
    if unit == "auto" and ms < 1:
        text, name = f"{ms * 1000:.4g}", "µs"
    else:
        text, name = f"{ms:g}", "ms"
    return f"{text}\u00a0{name}" if with_unit else text  # a no-break space: tables never part them


def short_device(device):
    """"NVIDIA H100 80GB HBM3" -> "H100": the summary's column; the runs' headings name it whole."""
    if device.startswith("NVIDIA "):
        return device.split()[1]
    return device


def _span(values, fmt):
    low, high = min(values), max(values)
    return fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}"


def _span_time(values, unit):
    """One time, or the range of repeated measurements with the unit once: "2.16–2.18 ms"."""
    low, high = min(values), max(values)
    if low == high or fmt_time(low, unit)[-2:] != fmt_time(high, unit)[-2:]:
        return _span(values, lambda v: fmt_time(v, unit))
    return f"{fmt_time(low, unit, False)}–{fmt_time(high, unit)}"


def _speedups(times, peer):
    """Peer time over Tripy's time, pairing repeats of the same configuration."""
    tripy, other = times[TRIPY], times[peer]
    if len(tripy) == len(other):
        return [o / t for t, o in zip(tripy, other)]
    return [statistics.median(other) / statistics.median(tripy)]


def _ratio_text(values):
    text = _span(values, lambda v: f"{v:.2f}") + "×"
    return f"**{text}**" if min(values) >= 1 else text


def summary_markdown(runs):
    lines = [
        "| workload | device | dtype | Tripy | fastest peer | peer ÷ Tripy | measured |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (suite, device, model, shape), (run, times) in latest(runs).items():
        if TRIPY not in times or len(times) < 2:
            continue
        unit = run.get("unit", "ms")
        peers = [s for s in times if s != TRIPY]
        best = min(peers, key=lambda s: statistics.median(times[s]))
        dtype = _record_field(run, model, shape, "dtype") or run.get("dtype", "")
        lines.append(
            f"| {SHORT[suite]}: {model}, {shape} | {short_device(device)} | {dtype} "
            f"| {_span_time(times[TRIPY], unit)} "
            f"| {best}: {_span_time(times[best], unit)} "
            f"| {_ratio_text(_speedups(times, best))} | {_when(run)} |"
        )
    return "\n".join(lines) + "\n"


def _record_field(run, model, shape, field):
    for record in run["records"]:
        if record["model"] == model and record["shape"] == shape and field in record:
            return record[field]
    return None


def run_markdown(run):
    """One run's table: a row per workload, a column per system, then what else was recorded."""
    unit = run.get("unit", "ms")
    systems = _systems(run)
    peers = [s for s in systems if s != TRIPY]
    extra = []
    for record in run["records"]:
        for key in record:
            if key not in ("model", "shape", "system", "ms", "repeat", "dtype") and key not in extra:
                extra.append(key)
    with_dtype = any("dtype" in r for r in run["records"])
    head = ["workload"] + (["dtype"] if with_dtype else []) + systems
    if TRIPY in systems and peers:
        head.append("fastest peer ÷ Tripy")
    head += [_field_title(key) for key in extra]
    rows = []
    for record_group in _rows(run):
        (model, shape, repeat), by_system = record_group
        cells = [f"{model}, {shape}" + (f" (measurement {repeat})" if repeat else "")]
        if with_dtype:
            cells.append(next((r["dtype"] for r in by_system.values() if "dtype" in r), ""))
        cells += [fmt_time(by_system[s]["ms"], unit) if s in by_system else "–" for s in systems]
        if TRIPY in systems and peers:
            present = [s for s in peers if s in by_system]
            if TRIPY in by_system and present:
                best = min(by_system[s]["ms"] for s in present)
                cells.append(_ratio_text([best / by_system[TRIPY]["ms"]]))
            else:
                cells.append("–")
        for key in extra:
            values = [f"{s}: {_field_text(key, r[key])}" for s, r in by_system.items() if key in r]
            cells.append("; ".join(values) if values else "–")
        rows.append("| " + " | ".join(cells) + " |")
    table = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] + rows
    return "\n".join(table) + "\n"


def _rows(run):
    groups = {}
    for record in run["records"]:
        key = (record["model"], record["shape"], record.get("repeat"))
        groups.setdefault(key, {})[record["system"]] = record
    return list(groups.items())


FIELD_TITLES = {
    "compile_s": "compile",
    "max_rel_err": "max rel. error",
    "tflops": "TFLOP/s",
    "tokens_per_s": "tokens/s",
    "bandwidth_share": "bandwidth share",
    "load_s": "load",
    "greedy_steps_equal": "greedy steps equal",
}


def _field_title(key):
    return FIELD_TITLES.get(key, key.replace("_", " "))


def _field_text(key, value):
    if key.endswith("_s") and key != "tokens_per_s" and isinstance(value, (int, float)):
        return f"{value:g} s"
    if key == "bandwidth_share":
        return f"{value:.0%}"
    if key == "max_rel_err":
        return f"{value:.1e}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def measurements_markdown(runs):
    """Every run, grouped by device: what was run, on what, and the table."""
    by_device = {}
    for run in runs:
        by_device.setdefault(run["device"], []).append(run)
    out = []
    for device in sorted(by_device, key=_device_order):
        out += [f"### {device}", ""]
        for run in sorted(by_device[device], key=lambda r: (list(SUITES).index(r["suite"]), _newest_first(r))):
            out += [f"#### {run['title']}, {_when(run)}", ""]
            facts = [f"`{run['command']}`" if "command" in run else None,
                     f"dtype {run['dtype']}" if run.get("dtype") not in (None, "mixed") else None,
                     f"peers: {run['peers']}" if "peers" in run else None]
            out += ["; ".join(f for f in facts if f) + ".", ""]
            out += [run_markdown(run)]
            out += [note for note in run.get("notes", []) for note in (note, "")]
    return "\n".join(out)


def charts(runs, out_dir):
    """Writes one SVG bar chart per suite and device (the latest measurement of each workload)
    into out_dir; returns [(file name, caption)], or None where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    plt.rcParams.update({"svg.hashsalt": "tripy", "font.size": 9, "font.family": "DejaVu Sans"})
    groups = {}
    for (suite, device, model, shape), (run, times) in latest(runs).items():
        if TRIPY in times and len(times) > 1:
            groups.setdefault((suite, device), []).append((model, shape, run, times))
    os.makedirs(out_dir, exist_ok=True)
    made = []
    for (suite, device), panels in groups.items():
        name = f"{suite}-{_slug(device)}.svg"
        columns = min(3, len(panels))
        rows = (len(panels) + columns - 1) // columns
        systems = []
        for _, _, _, times in panels:
            systems += [s for s in times if s not in systems]
        figure, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 0.45 + rows * (0.5 + 0.28 * len(systems))),
                                    squeeze=False)
        for index, (model, shape, run, times) in enumerate(panels):
            ax = axes[index // columns][index % columns]
            names = [s for s in systems if s in times]
            values = [statistics.median(times[s]) for s in names]
            scale, unit = (1000, "µs") if run.get("unit") == "auto" and max(values) < 1 else (1, "ms")
            colors = [TRIPY_COLOR if s == TRIPY else PEER_COLORS[systems.index(s) % len(PEER_COLORS)] for s in names]
            y = list(range(len(names)))[::-1]
            ax.barh(y, [v * scale for v in values], color=colors, height=0.7)
            for s, yy in zip(names, y):
                if len(times[s]) > 1:  # repeated measurements: their spread
                    ax.plot([min(times[s]) * scale, max(times[s]) * scale], [yy, yy], color="black", linewidth=1)
            for yy, v in zip(y, values):
                ax.text(v * scale, yy, " " + fmt_time(v, run.get("unit", "ms"), with_unit=False), va="center", fontsize=8)
            ax.set_yticks(y)
            ax.set_yticklabels(names)
            ax.set_xlim(0, max(values) * scale * 1.35)
            ax.set_title(f"{model}, {shape}", fontsize=9)
            ax.set_xlabel(unit)
            ax.spines[["top", "right"]].set_visible(False)
        for index in range(len(panels), rows * columns):
            axes[index // columns][index % columns].axis("off")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, name), format="svg", metadata={"Date": None})
        plt.close(figure)
        label, what = SUITES[suite]
        dtypes = sorted({run.get("dtype", "") for _, _, run, _ in panels} - {"", "mixed"})
        made.append((name, f"{label}, {device}{' (' + ', '.join(dtypes) + ')' if dtypes else ''}. "
                           f"Bars are the {what}, shorter is faster; Tripy in blue."))
    return made


def _slug(text):
    return "".join(c.lower() if c.isalnum() else "-" for c in text).strip("-").replace("--", "-")


def charts_markdown(made, image_dir):
    if made is None:
        return ("The charts are drawn with matplotlib (`python3-matplotlib`, which `make docs` "
                "installs); it was not installed when this site was built.\n")
    out = []
    for name, caption in made:
        out += [f"```{{figure}} {image_dir}/{name}", f":alt: {caption}", ":class: tripy-figure", "", caption, "```", ""]
    return "\n".join(out)


def fingerprint(data_dir=DATA, image_dir="charts"):
    """Changes when the data, this script or the charts' directory as the page names them does: the
    docs build redraws only then (a run by hand, whose pages name the charts from elsewhere, does
    not leave the docs build pages that point at nothing)."""
    digest = hashlib.sha256(image_dir.encode())
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))) + [os.path.abspath(__file__)]:
        with open(path, "rb") as f:
            digest.update(path.encode() + f.read())
    try:
        import matplotlib

        digest.update(matplotlib.__version__.encode())
    except ImportError:
        digest.update(b"no matplotlib")
    return digest.hexdigest()


def write(out_dir, data_dir=DATA, image_dir="charts"):
    """Writes summary.md, measurements.md, charts.md and the charts into out_dir. image_dir is the
    charts' directory as the page that includes charts.md names it."""
    stamp = os.path.join(out_dir, "stamp")
    key = fingerprint(data_dir, image_dir)
    outputs = [os.path.join(out_dir, name) for name in ("summary.md", "measurements.md", "charts.md")]
    if os.path.exists(stamp) and open(stamp).read() == key and all(map(os.path.exists, outputs)):
        return
    runs = load(data_dir)
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "charts", "*.svg")):  # a suite or device may be gone
        os.remove(old)
    made = charts(runs, os.path.join(out_dir, "charts"))
    texts = {
        "summary.md": summary_markdown(runs),
        "measurements.md": measurements_markdown(runs),
        "charts.md": charts_markdown(made, image_dir),
    }
    for name, text in texts.items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(stamp, "w") as f:
        f.write(key)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DATA, help="the directory of benchmark JSON files")
    parser.add_argument("--out", default=os.path.join(DATA, "_generated"), help="where to write tables and charts")
    args = parser.parse_args()
    if os.path.exists(os.path.join(args.out, "stamp")):
        os.remove(os.path.join(args.out, "stamp"))
    write(args.out, args.data)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
