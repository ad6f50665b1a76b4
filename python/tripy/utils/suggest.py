"""Builds the AttributeError for a missing name, pointing at the one spelling Tripy does provide.

Tripy exposes each operation once (``tp.softmax``, never ``Tensor.softmax``), so reaching for
another spelling should say where the real one lives rather than just fail.
"""

import difflib
import re

# A name made of a word and a bit width, like "float16" or "int8".
_SIZED_NAME = re.compile(r"^([A-Za-z_]+?)(\d+)$")

# The namespace of the ``tripy`` package (its globals), whose names a missing attribute of a Tripy
# object is matched against (``Tensor.softmax`` -> ``tripy.softmax``). tripy/__init__.py hands it
# over: the package imports every module, so none of them may import the package to ask.
api_namespace = {}


def api_names():
    """The names ``tripy`` defines, as ``dir(tripy)`` lists them."""
    return sorted(api_namespace)


class TripyAttributeError(AttributeError):
    """
    Raised when a Tripy object or the ``tripy`` module lacks an attribute; its message suggests
    the name the user most likely meant.

    Example::

        import tripy as tp

        try:
            tp.Tensor([1.0, 2.0]).softmax
        except AttributeError as err:
            assert "Did you mean: 'tripy.softmax'?" in str(err)
    """


# Names from torch and numpy that users reach for on a tensor, and Tripy's way of doing each: a
# close spelling of something else (item -> Stream, to -> topk) would only mislead.
TENSOR_HINTS = {
    "item": "To read the value of a one-element tensor, use float(t), int(t) or bool(t) (t.tolist() for all values).",
    "numpy": "To get a numpy array, use np.asarray(t) or np.from_dlpack(t); t.tolist() gives Python lists.",
    "to": "To move a tensor, use tp.copy(t, tp.device(\"gpu\")) (or t.copy(...)); to change its dtype, use "
    "tp.cast(t, tp.float16) (or t.cast(...)).",
    "T": "To transpose, use tp.transpose(t, 0, 1) (or t.transpose(0, 1)); tp.permute(t, perm) reorders any dims.",
    "mT": "To transpose the last two dims, use tp.transpose(t, -2, -1).",
    "view": "To reshape, use tp.reshape(t, shape) (or t.reshape(shape)).",
    "size": "The size of every dim is t.shape (t.shape[i] for one dim).",
    "dim": "The number of dims is t.rank (or t.ndim).",
    "cuda": "To move a tensor to the GPU, use tp.copy(t, tp.device(\"gpu\")) (or t.copy(tp.device(\"gpu\"))).",
    "cpu": "To move a tensor to the host, use tp.copy(t, tp.device(\"cpu\")) (or t.copy(tp.device(\"cpu\"))).",
    "astype": "To change the dtype, use tp.cast(t, dtype) (or t.cast(dtype)).",
    "float": "To change the dtype, use tp.cast(t, tp.float32); float(t) reads a one-element tensor's value.",
    "half": "To change the dtype, use tp.cast(t, tp.float16) (or t.cast(tp.float16)).",
    "long": "To change the dtype, use tp.cast(t, tp.int64) (or t.cast(tp.int64)).",
    "detach": "Tripy tensors track no gradients: use the tensor itself.",
}


def _same_family(attr, candidates):
    """Best match among candidates differing from ``attr`` only in their bit width (int16 -> int32)."""
    match = _SIZED_NAME.match(attr)
    if match is None:
        return None
    stem, digits = match.group(1), match.group(2)
    width = int(digits)
    family = []
    for candidate in candidates:
        other = _SIZED_NAME.match(candidate)
        if other is not None and other.group(1) == stem:
            other_digits = other.group(2)
            # Prefer widths written with as many digits (int16 -> int32 over int8), then the closest.
            family.append((len(other_digits) != len(digits), abs(int(other_digits) - width), candidate))
    return min(family)[2] if family else None


def _closest(attr, candidates):
    same_family = _same_family(attr, candidates)
    if same_family is not None:
        return same_family
    lowered = {candidate.lower(): candidate for candidate in candidates}
    if attr.lower() in lowered:
        return lowered[attr.lower()]
    matches = difflib.get_close_matches(attr, candidates, n=1)
    return matches[0] if matches else None


def suggestion(owner_name, attr, candidates, own_names=()):
    """
    The fully qualified name to suggest for ``owner_name.attr``, or None.

    ``candidates`` are the public names of the ``tripy`` module; ``own_names`` are the owner's own
    attributes (used for typos of them). A name that exists in ``tripy`` is suggested there first:
    that is the no-redundancy rule (``Tensor.softmax`` -> ``tripy.softmax``).

    Example::

        from tripy.utils.suggest import suggestion

        assert suggestion("tripy.Tensor", "softmax", ["softmax", "gelu"]) == "tripy.softmax"
        assert suggestion("tripy", "int16", ["int8", "int32", "int64"]) == "tripy.int32"
        assert suggestion("tripy.Tensor", "shap", ["softmax"], own_names=["shape"]) == "tripy.Tensor.shape"
    """
    if attr.startswith("_"):
        # Private and protocol names (numpy probes __array_interface__ and friends) get no
        # suggestion, and skipping difflib keeps those probes cheap.
        return None
    candidates = [name for name in candidates if not name.startswith("_")]
    if owner_name != "tripy" and attr in candidates:
        return f"tripy.{attr}"
    own = _closest(attr, [name for name in own_names if not name.startswith("_")])
    if own is not None:
        return f"{owner_name}.{own}"
    close = _closest(attr, candidates)
    return f"tripy.{close}" if close is not None else None


def missing_attribute(owner_name, attr, candidates, own_names=()):
    """
    Builds (does not raise) the ``TripyAttributeError`` for a missing ``owner_name.attr``. A
    tensor attribute that torch or numpy users expect (``item``, ``numpy``, ``to``, ``T``, ...)
    gets Tripy's way of doing the same (``TENSOR_HINTS``) instead of a close spelling.

    Example::

        from tripy.utils.suggest import missing_attribute

        err = missing_attribute("tripy.Tensor", "softmax", ["softmax", "gelu"])
        assert str(err) == (
            "Module: 'tripy.Tensor' does not have attribute: 'softmax'. Did you mean: 'tripy.softmax'?"
        )
        assert str(missing_attribute("tripy", "xyz", ["softmax"])) == (
            "Module: 'tripy' does not have attribute: 'xyz'"
        )
    """
    message = f"Module: '{owner_name}' does not have attribute: '{attr}'"
    if owner_name == "tripy.Tensor" and attr in TENSOR_HINTS:
        return TripyAttributeError(f"{message}. {TENSOR_HINTS[attr]}")
    suggested = suggestion(owner_name, attr, candidates, own_names)
    if suggested is not None:
        message += f". Did you mean: '{suggested}'?"
    # No name/obj arguments: Python would otherwise append its own "Did you mean" hint.
    return TripyAttributeError(message)
