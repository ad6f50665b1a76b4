"""tripy.frontend.trace_call.make hands attributes to the core by name; each op declares the ones
it reads and needs, so a frontend function that passes another is stopped at the user's line
instead of being silently ignored."""

import inspect

import pytest

import tripy as tp
from tripy import _C
from tripy.frontend.trace_call import make


def _line():
    return inspect.currentframe().f_back.f_lineno


def test_an_attribute_the_op_does_not_read_is_refused_at_the_users_line():
    x = tp.ones((2, 3))
    with pytest.raises(tp.TripyException) as info:
        line = _line() + 1
        make("softmax", [x], dims=[1], keepdim=True)
    text = str(info.value)
    assert "softmax takes the attributes dims, not keepdim" in text
    assert f"test_trace_call.py:{line}" in text


def test_a_missing_required_attribute_is_refused():
    with pytest.raises(tp.TripyException, match="slice needs the attributes steps"):
        make("slice", [tp.ones((4,))], starts=[0], limits=[2])


def test_the_op_table_lists_each_ops_attributes():
    table = {row[0]: row for row in _C.op_table()}
    assert table["sum"][5:] == ("dims, keepdim", "")
    assert table["slice"][5:] == ("starts, limits, steps", "starts, limits, steps")
    assert table["add"][5:] == ("", "")
