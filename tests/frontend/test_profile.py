"""Executable.profile and TRIPY_DEBUG's per-call table: one row per kernel with its kind, FlatIR
ops, user line and time; the Chrome trace opens in Perfetto (checked here for its format)."""

import json

import numpy as np

import tripy as tp


def _mlp(x):
    h = tp.relu(x @ tp.Tensor(np.full((32, 16), 0.5, np.float32)))  # profile-line
    return tp.softmax(h, dim=-1)


def test_profile_times_every_kernel_and_returns_the_outputs():
    exe = tp.compile(_mlp, args=[tp.InputInfo((4, 32), dtype=tp.float32)])
    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    profile = exe.profile(tp.Tensor(x))
    np.testing.assert_allclose(np.asarray(profile.outputs), np.asarray(exe(tp.Tensor(x))), rtol=1e-6)
    assert [r["kind"] for r in profile.rows] == [k[0] for k in exe._impl.kernels]
    assert len(profile.rows) >= 2
    assert all(r["ms"] >= 0 for r in profile.rows) and profile.total_ms > 0
    assert abs(sum(r["share"] for r in profile.rows) - 1.0) < 1e-9
    # Each kernel names the user line its first op came from.
    assert any("test_profile.py" in r["source"] for r in profile.rows)
    dot = next(r for r in profile.rows if r["kind"] == "dot")
    assert dot["name"].startswith("dot") and "_mlp" in dot["source"]
    text = str(profile)
    assert "share" in text and "total" in text and dot["name"] in text


def test_chrome_trace_has_one_complete_event_per_kernel(tmp_path):
    exe = tp.compile(_mlp, args=[tp.InputInfo((4, 32), dtype=tp.float32)])
    profile = exe.profile(tp.ones((4, 32)))
    path = tmp_path / "trace.json"
    profile.save_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert len(events) == len(profile.rows)
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    # Back to back, in launch order.
    for a, b in zip(events, events[1:]):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1e-6


def test_timing_flag_prints_the_table_on_each_call(capsys):
    exe = tp.compile(_mlp, args=[tp.InputInfo((4, 32), dtype=tp.float32)])
    with tp.logger.use_verbosity("timing"):
        out = exe(tp.ones((4, 32)))
    assert out.shape == (4, 16)
    captured = capsys.readouterr()
    assert "kernel (FlatIR ops)" in captured.out + captured.err
