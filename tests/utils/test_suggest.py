"""The no-redundancy lookup: missing attributes point at the one spelling Tripy provides."""

import pytest

from tripy.utils.suggest import TripyAttributeError, missing_attribute, suggestion

# A slice of the public tripy namespace, enough to exercise each rule.
TRIPY_NAMES = [
    "Tensor", "softmax", "gelu", "reshape", "transpose", "ones", "zeros", "equal",
    "float32", "float16", "bfloat16", "float8", "int4", "int8", "int32", "int64", "bool",
    "_C", "_private_helper",
]
TENSOR_NAMES = ["shape", "dtype", "rank", "device", "eval", "tolist", "reshape", "transpose"]


def test_tensor_method_that_is_a_tripy_function():
    err = missing_attribute("tripy.Tensor", "softmax", TRIPY_NAMES, TENSOR_NAMES)
    assert isinstance(err, AttributeError)
    assert isinstance(err, TripyAttributeError)
    assert str(err) == "Module: 'tripy.Tensor' does not have attribute: 'softmax'. Did you mean: 'tripy.softmax'?"


def test_python_adds_no_hint_of_its_own():
    # Python 3.10+ appends "Did you mean" to AttributeErrors carrying name/obj; ours must not.
    err = missing_attribute("tripy.Tensor", "softmax", TRIPY_NAMES)
    assert err.name is None and err.obj is None


@pytest.mark.parametrize(
    "attr, expected",
    [("float64", "tripy.float32"), ("int16", "tripy.int32"), ("Softmax", "tripy.softmax"), ("gelo", "tripy.gelu")],
)
def test_tripy_module_suggests_close_names(attr, expected):
    err = missing_attribute("tripy", attr, TRIPY_NAMES)
    assert str(err) == f"Module: 'tripy' does not have attribute: '{attr}'. Did you mean: '{expected}'?"


def test_no_suggestion():
    assert str(missing_attribute("tripy", "xyz", TRIPY_NAMES)) == "Module: 'tripy' does not have attribute: 'xyz'"


def test_typos_of_the_owners_own_attributes():
    assert suggestion("tripy.Tensor", "shap", TRIPY_NAMES, TENSOR_NAMES) == "tripy.Tensor.shape"


def test_typos_of_tripy_functions_on_a_tensor():
    assert suggestion("tripy.Tensor", "sofmax", TRIPY_NAMES, TENSOR_NAMES) == "tripy.softmax"


def test_private_names_are_never_suggested():
    assert suggestion("tripy", "_privat_helper", TRIPY_NAMES) is None
    assert suggestion("tripy", "C", TRIPY_NAMES) is None


def test_protocol_probes_get_no_suggestion():
    assert str(missing_attribute("tripy.Tensor", "__array_interface__", TRIPY_NAMES, TENSOR_NAMES)) == (
        "Module: 'tripy.Tensor' does not have attribute: '__array_interface__'"
    )


def test_bit_widths_prefer_the_same_number_of_digits_then_the_closest():
    assert suggestion("tripy", "int2", TRIPY_NAMES) == "tripy.int4"
    assert suggestion("tripy", "uint8", TRIPY_NAMES) == "tripy.int8"
    assert suggestion("tripy", "bfloat8", TRIPY_NAMES) == "tripy.bfloat16"
