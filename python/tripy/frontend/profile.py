"""``tp.Profile``: where one call of an executable spends its time, kernel by kernel.

``Executable.profile(*args)`` runs once and times each kernel (wall time on the CPU, CUDA events
around each kernel on the GPU, launched directly rather than replayed as a graph). ``TRIPY_DEBUG=1``
(the ``"timing"`` flag) prints this table after every call.
"""

import inspect
import json
import os


class Profile:
    """
    Per-kernel times of one call: ``rows`` (one dict per kernel, in launch order, with ``kernel``,
    ``kind``, ``name`` (its FlatIR ops), ``source`` (the user line it came from), ``ms`` and
    ``share``), ``total_ms``, the call's ``outputs``, a printable table (``str(profile)``) and a
    Chrome trace (``chrome_trace()``, ``save_chrome_trace(path)``) that Perfetto and
    chrome://tracing open.

    Example::

        import tripy as tp

        exe = tp.compile(lambda x: tp.relu(x @ x) + 1.0, args=[tp.InputInfo((64, 64), dtype=tp.float32)])
        profile = exe.profile(tp.ones((64, 64)))
        assert [row["kind"] for row in profile.rows] == ["dot", "fused"]
        assert abs(sum(row["share"] for row in profile.rows) - 1.0) < 1e-6
        print(profile)
    """

    # Made by Executable.profile(): its constructor's arguments are not API.
    __signature__ = inspect.Signature()

    def __init__(self, kernels, kernel_ms, outputs):
        self.outputs = outputs
        self.total_ms = float(sum(kernel_ms))
        self.rows = []
        for index, ((kind, name, where), ms) in enumerate(zip(kernels, kernel_ms)):
            source = f"{os.path.basename(where[0])}:{where[1]} ({where[2]})" if where else ""
            share = ms / self.total_ms if self.total_ms > 0 else 0.0
            self.rows.append(
                {"kernel": index, "kind": kind, "name": name, "source": source, "ms": float(ms), "share": share}
            )

    def __str__(self):
        header = ("#", "kind", "kernel (FlatIR ops)", "ms", "share", "source")
        lines = [
            (str(r["kernel"]), r["kind"], r["name"], f"{r['ms']:.4f}", f"{100 * r['share']:.1f}%", r["source"])
            for r in self.rows
        ]
        lines.append(("", "", "total", f"{self.total_ms:.4f}", "100.0%" if self.rows else "", ""))
        widths = [max(len(row[i]) for row in [header] + lines) for i in range(len(header))]
        fmt = lambda row: "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
        return "\n".join([fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(row) for row in lines])

    __repr__ = __str__

    def chrome_trace(self):
        """The call as Chrome trace events (kernels back to back, times in microseconds).

        Returns:
            list[dict]: the trace events, one per kernel.
        """
        events, at = [], 0.0
        for r in self.rows:
            dur = r["ms"] * 1000.0
            events.append(
                {
                    "name": r["name"],
                    "cat": r["kind"],
                    "ph": "X",
                    "ts": at,
                    "dur": dur,
                    "pid": 0,
                    "tid": 0,
                    "args": {"kernel": r["kernel"], "source": r["source"], "share": r["share"]},
                }
            )
            at += dur
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def save_chrome_trace(self, path):
        """Writes ``chrome_trace()`` as JSON to ``path``.

        Args:
            path (str | os.PathLike): The file to write.

        Raises:
            OSError: if the file cannot be written.
        """
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
