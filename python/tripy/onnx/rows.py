"""What a row of the converter table is (``Row``: the converter, the attributes it reads, the
opsets it covers, a check naming unsupported settings before any work), the checks rows share, and
the op types Tripy's IR cannot express, each with the reason given when a model uses one."""

from collections import namedtuple

from tripy.onnx.graph import OPSET_MAX, OPSET_MIN, _elem_name, dtype_of

Row = namedtuple("Row", "fn attrs first last check", defaults=((), OPSET_MIN, OPSET_MAX, None))


def dtype_attr(name):
    def check(n):
        if n.has(name) and dtype_of(n.attr(name)) is None:
            return f"{name}={_elem_name(n.attr(name))}: Tripy has no such dtype"
        return None

    return check


def attr_is(name, allowed, default):
    def check(n):
        value = n.attr(name, default)
        if value not in allowed:
            return f"{name}={value!r} is not supported (supported: {', '.join(map(repr, allowed))})"
        return None

    return check


def checks(*all_checks):
    def check(n):
        for c in all_checks:
            problem = c(n)
            if problem:
                return problem
        return None

    return check


def one_output(n):
    if len([o for o in n.outputs if o]) > 1 and any(n.outputs[1:]):
        return "only the first output is supported"
    return None


_RANDOM = "it draws random numbers, and Tripy has no random-number op for ONNX's generators to match"
_STRINGS = "it works on strings, which Tripy does not have"

# Op types of the standard domain that no converter can write with Tripy's ops, and why.
INEXPRESSIBLE = {
    **{op: _RANDOM for op in ("Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                              "RandomUniformLike")},
    **{op: _STRINGS for op in ("StringNormalizer", "TfIdfVectorizer", "RegexFullMatch", "StringConcat",
                               "StringSplit", "LabelEncoder")},
}
