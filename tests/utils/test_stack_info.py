"""Stack capture returns the user's frames, innermost first, with the executing expression's columns."""

import os
import time

from tripy.utils import stack_info
from tripy.utils.stack_info import capture_user_frames


def _capture_here():
    return capture_user_frames()


def test_innermost_user_frame_comes_first():
    frames = _capture_here()
    filename, lineno, function_name, col, end_col = frames[0]
    assert filename == __file__
    assert function_name == "_capture_here"
    assert lineno == _capture_here.__code__.co_firstlineno + 1
    assert frames[1][2] == "test_innermost_user_frame_comes_first"


def test_columns_underline_the_executing_call():
    frames = capture_user_frames()
    filename, lineno, _, col, end_col = frames[0]
    with open(filename) as f:
        line = f.read().splitlines()[lineno - 1]
    assert line[col:end_col] == "capture_user_frames()"


def test_multi_line_expression_underlines_to_end_of_first_line():
    frames = capture_user_frames(
        limit=3,
    )
    _, lineno, _, col, end_col = frames[0]
    with open(__file__) as f:
        line = f.read().splitlines()[lineno - 1]
    assert line[col:].startswith("capture_user_frames(")
    assert end_col == -1


def test_limit_bounds_the_number_of_frames():
    def recurse(depth):
        return capture_user_frames(limit=5) if depth == 0 else recurse(depth - 1)

    frames = recurse(20)
    assert len(frames) == 5
    assert all(frame[2] == "recurse" for frame in frames)


def test_frames_inside_tripy_are_skipped():
    # Code compiled with a filename inside the package counts as Tripy's own, like an op's frames.
    internal_file = os.path.join(stack_info._TRIPY_DIR, "frontend", "fake_op.py")
    namespace = {"capture_user_frames": capture_user_frames}
    exec(compile("def fake_op():\n    return capture_user_frames()\n", internal_file, "exec"), namespace)

    frames = namespace["fake_op"]()
    assert all(frame[0] != internal_file for frame in frames)
    assert frames[0][0] == __file__
    assert frames[0][2] == "test_frames_inside_tripy_are_skipped"


def test_each_call_site_keeps_its_own_position():
    first = capture_user_frames()[0]
    second = capture_user_frames()[0]
    assert second[1] == first[1] + 1
    repeated = [capture_user_frames()[0] for _ in range(3)]
    assert repeated[0] == repeated[1] == repeated[2]


def test_capture_is_cheap():
    # Generous bound for slow CI machines; the target on a typical machine is well under 3 us.
    capture_user_frames()
    iterations = 20000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations):
            capture_user_frames()
        best = min(best, (time.perf_counter() - start) / iterations)
    depth = len(capture_user_frames(limit=8))
    assert best < 20e-6, f"{best * 1e6:.2f} us per capture of {depth} frames"
