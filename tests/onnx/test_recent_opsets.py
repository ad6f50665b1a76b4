"""Converters of opsets 18 to 22 (newer than ONNX's local conformance data, which stops at 17) and
of ops the local cases do not cover with Tripy's dtypes (int8 Q/DQ, GroupNormalization, Mish,
Gelu, LpNormalization, LpPool; CenterCropPad, Col2Im and the bitwise ops), each against numpy; and the op types Tripy's IR cannot express,
refused with their reason."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402

RNG = np.random.default_rng(5)
_ELEM = {np.float32: TensorProto.FLOAT, np.int8: TensorProto.INT8, np.int64: TensorProto.INT64,
         np.int32: TensorProto.INT32}


def _load(tmp_path, nodes, inputs, outputs, initializers=(), opset=18):
    """``inputs``: (name, array) pairs, whose dtypes and shapes the graph declares."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, _ELEM[v.dtype.type], v.shape) for k, v in inputs],
        [helper.make_tensor_value_info(k, _ELEM[np.dtype(d).type], None) for k, d in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in initializers])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    model = tp.onnx.load(path, device="cpu")
    out = model(*[tp.Tensor(v, device=tp.device("cpu")) for _, v in inputs])
    return [np.asarray(o) for o in out] if isinstance(out, tuple) else np.asarray(out)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_reductions_take_axes_as_an_input_from_opset_18(tmp_path):
    x = _x(2, 3, 4)
    for op, ref in [("ReduceMax", np.max), ("ReduceMean", np.mean), ("ReduceL2", lambda a, axis, keepdims:
                                                                         np.sqrt((a * a).sum(axis, keepdims=keepdims)))]:
        out = _load(tmp_path, [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)], [("x", x)], [("y", np.float32)],
                    [("axes", np.array([0, -1], np.int64))])
        np.testing.assert_allclose(out, ref(x, axis=(0, 2), keepdims=False), rtol=1e-5, err_msg=op)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_with_axes_and_wrap_mode(tmp_path, mode):
    x = _x(3, 4, 5)
    out = _load(tmp_path, [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode=mode)], [("x", x)],
                [("y", np.float32)], [("pads", np.array([1, 2, 2, 1], np.int64)), ("axes", np.array([2, 0], np.int64))],
                opset=19)
    np.testing.assert_array_equal(out, np.pad(x, [(2, 1), (0, 0), (1, 2)], mode=mode))


def test_negative_pads_crop(tmp_path):
    x = _x(4, 6)
    out = _load(tmp_path, [helper.make_node("Pad", ["x", "pads"], ["y"])], [("x", x)], [("y", np.float32)],
                [("pads", np.array([-1, 2, 1, -3], np.int64))])
    np.testing.assert_array_equal(out, np.pad(x[1:, :3], [(0, 1), (2, 0)]))


def test_split_num_outputs_rounds_the_parts_up(tmp_path):
    x = _x(7, 2)
    out = _load(tmp_path, [helper.make_node("Split", ["x"], ["a", "b", "c"], num_outputs=3)], [("x", x)],
                [("a", np.float32), ("b", np.float32), ("c", np.float32)])
    for got, want in zip(out, [x[:3], x[3:6], x[6:]]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_max_and_min(tmp_path, reduction):
    data = _x(4, 3)
    indices = np.array([[1, 0, 3], [1, 2, 3]], np.int64)
    updates = _x(2, 3)
    out = _load(tmp_path, [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0, reduction=reduction)],
                [("d", data), ("i", indices), ("u", updates)], [("y", np.float32)])
    expected = data.copy()
    pick = np.maximum if reduction == "max" else np.minimum
    for r in range(2):
        for c in range(3):
            expected[indices[r, c], c] = pick(expected[indices[r, c], c], updates[r, c])
    np.testing.assert_array_equal(out, expected)
    nd = _load(tmp_path, [helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)],
               [("d", data), ("i", np.array([[2], [0], [2]], np.int64)), ("u", _x(3, 3) * 3)], [("y", np.float32)])
    assert nd.shape == data.shape


def test_resize_half_pixel_symmetric_and_axes(tmp_path):
    x = _x(1, 1, 4, 5)
    out = _load(tmp_path, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", axes=[3],
                                            coordinate_transformation_mode="half_pixel_symmetric")],
                [("x", x)], [("y", np.float32)], [("scales", np.array([1.5], np.float32))], opset=19)
    n_in, scale = 5, 1.5
    n_out = int(math.floor(n_in * scale))
    offset = n_in / 2 * (1 - n_out / (n_in * scale))
    expected = np.empty((1, 1, 4, n_out), np.float32)
    for i in range(n_out):
        src = min(max(offset + (i + 0.5) / scale - 0.5, 0), n_in - 1)
        lo = int(math.floor(src))
        hi = min(lo + 1, n_in - 1)
        t = src - lo
        expected[..., i] = x[..., lo] * (1 - t) + x[..., hi] * t
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_resize_refuses_antialias_at_load(tmp_path):
    with pytest.raises(tp.TripyException, match=r"\(Resize, opset 18\): antialias=1 is not supported"):
        _load(tmp_path, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)],
              [("x", _x(1, 1, 4, 4))], [("y", np.float32)], [("scales", np.array([1, 1, 0.5, 0.5], np.float32))])


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(tmp_path, opset):
    x = _x(2, 6, 3, 3)
    groups = 3
    size = groups if opset == 18 else 6
    scale, bias = _x(size), _x(size)
    out = _load(tmp_path, [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                                            epsilon=1e-3)],
                [("x", x)], [("y", np.float32)], [("s", scale), ("b", bias)], opset=opset)
    g = x.reshape(2, groups, -1)
    normed = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-3)).reshape(x.shape)
    per_channel = np.repeat(scale, 2) if opset == 18 else scale
    per_bias = np.repeat(bias, 2) if opset == 18 else bias
    np.testing.assert_allclose(out, normed * per_channel[:, None, None] + per_bias[:, None, None], rtol=1e-4, atol=1e-5)


def test_mish_gelu_and_lp_normalization(tmp_path):
    x = _x(3, 8) * 3
    erf = np.vectorize(math.erf)
    cases = [
        (helper.make_node("Mish", ["x"], ["y"]), 18, x * np.tanh(np.log1p(np.exp(x)))),
        (helper.make_node("Gelu", ["x"], ["y"]), 20, 0.5 * x * (1 + erf(x / math.sqrt(2)))),
        (helper.make_node("Gelu", ["x"], ["y"], approximate="tanh"), 20,
         0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
        (helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=1), 17, x / np.abs(x).sum(1, keepdims=True)),
        (helper.make_node("LpNormalization", ["x"], ["y"], axis=0), 17, x / np.sqrt((x * x).sum(0, keepdims=True))),
    ]
    for node, opset, expected in cases:
        out = _load(tmp_path, [node], [("x", x)], [("y", np.float32)], opset=opset)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, err_msg=str(node))


def test_lp_pool_and_global_lp_pool(tmp_path):
    x = _x(1, 2, 5, 5)
    out = _load(tmp_path, [helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1],
                                            p=3)], [("x", x)], [("y", np.float32)])
    padded = np.pad(np.abs(x) ** 3, [(0, 0), (0, 0), (0, 1), (0, 1)])
    expected = padded.reshape(1, 2, 3, 2, 3, 2).sum((3, 5)) ** (1 / 3)
    np.testing.assert_allclose(out, expected, rtol=1e-4)
    out = _load(tmp_path, [helper.make_node("GlobalLpPool", ["x"], ["y"])], [("x", x)], [("y", np.float32)])
    np.testing.assert_allclose(out, np.sqrt((x * x).sum((2, 3), keepdims=True)), rtol=1e-5)


def test_dilated_average_pool(tmp_path):
    x = _x(1, 1, 6, 6)
    out = _load(tmp_path, [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2],
                                            pads=[1, 1, 1, 1])], [("x", x)], [("y", np.float32)], opset=19)
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ones = np.pad(np.ones_like(x), [(0, 0), (0, 0), (1, 1), (1, 1)])
    total = sum(padded[..., a * 2:a * 2 + 6, b * 2:b * 2 + 6] for a in range(2) for b in range(2))
    count = sum(ones[..., a * 2:a * 2 + 6, b * 2:b * 2 + 6] for a in range(2) for b in range(2))
    np.testing.assert_allclose(out, total / count, rtol=1e-5)


def test_int8_quantize_and_dequantize_per_axis(tmp_path):
    x = _x(2, 3, 4) * 40
    scale = np.array([0.5, 0.25, 1.0], np.float32)
    zero = np.array([3, -2, 0], np.int8)
    q = _load(tmp_path, [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1)], [("x", x)],
              [("q", np.int8)], [("s", scale), ("z", zero)], opset=13)
    expected = np.clip(np.round(x / scale[:, None]) + zero[:, None], -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q, expected)
    d = _load(tmp_path, [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)], [("q", expected)],
              [("y", np.float32)], [("s", scale), ("z", zero)], opset=13)
    np.testing.assert_allclose(d, (expected.astype(np.float32) - zero[:, None]) * scale[:, None])


def test_a_uint8_quantize_is_refused_at_load(tmp_path):
    with pytest.raises(tp.TripyException, match=r"\(QuantizeLinear, opset 13\): without a zero point the output is uint8"):
        _load(tmp_path, [helper.make_node("QuantizeLinear", ["x", "s"], ["q"])], [("x", _x(4))], [("q", np.int8)],
              [("s", np.array(0.5, np.float32))], opset=13)


@pytest.mark.parametrize("op, reason", [
    ("StringNormalizer", "it works on strings"),
    ("RandomUniformLike", "it draws random numbers"),
])
def test_inexpressible_ops_are_refused_with_their_reason(tmp_path, op, reason):
    with pytest.raises(tp.TripyException, match=rf"node 'n' \({op}, opset 18\): the op type {op} is not supported: {reason}"):
        _load(tmp_path, [helper.make_node(op, ["x"], ["y"], name="n")], [("x", _x(4))], [("y", np.float32)])


@pytest.mark.parametrize("shape, target, axes", [
    ((5, 8, 3), [3, 11], [0, 1]), ((4, 6), [7, 2], None), ((2, 5, 4), [6], [-2]), ((3, 3), [3, 3], None)])
def test_center_crop_pad_crops_and_pads_around_the_centre(tmp_path, shape, target, axes):
    x = _x(*shape)
    attrs = {} if axes is None else {"axes": axes}
    out = _load(tmp_path, [helper.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)], [("x", x)],
                [("y", np.float32)], [("s", np.array(target, np.int64))])
    expected = x
    for axis, want in zip([a % x.ndim for a in (axes or range(x.ndim))], target):
        have = expected.shape[axis]
        if have > want:
            expected = np.take(expected, range((have - want) // 2, (have - want) // 2 + want), axis=axis)
        elif have < want:
            widths = [(0, 0)] * x.ndim
            widths[axis] = ((want - have) // 2, want - have - (want - have) // 2)
            expected = np.pad(expected, widths)
    np.testing.assert_array_equal(out, expected)


def _col2im_reference(cols, image, block, strides, dilations, pads):
    n, ck, _ = cols.shape
    channels = ck // math.prod(block)
    padded = [s + pads[i] + pads[i + len(image)] for i, s in enumerate(image)]
    grid = [(p - (d * (k - 1) + 1)) // s + 1 for p, d, k, s in zip(padded, dilations, block, strides)]
    out = np.zeros((n, channels, *padded), np.float32)
    windows = np.reshape(cols, (n, channels, *block, *grid))
    for k in np.ndindex(*block):
        for g in np.ndindex(*grid):
            at = tuple(gi * s + ki * d for gi, s, ki, d in zip(g, strides, k, dilations))
            out[(slice(None), slice(None), *at)] += windows[(slice(None), slice(None), *k, *g)]
    return out[(slice(None), slice(None), *[slice(pads[i], pads[i] + s) for i, s in enumerate(image)])]


@pytest.mark.parametrize("image, block, strides, dilations, pads", [
    ([5, 5], [2, 2], [1, 1], [1, 1], [0, 0, 0, 0]),
    ([6, 7], [3, 2], [2, 1], [1, 2], [1, 0, 2, 1]),
    ([7, 6], [2, 3], [3, 2], [1, 1], [0, 1, 0, 0]),
    ([9], [3], [2], [2], [1, 2]),
])
def test_col2im_matches_a_numpy_fold(tmp_path, image, block, strides, dilations, pads):
    nd = len(image)
    grid = [(s + pads[i] + pads[i + nd] - (d * (k - 1) + 1)) // st + 1
            for i, (s, k, st, d) in enumerate(zip(image, block, strides, dilations))]
    cols = _x(2, 3 * math.prod(block), math.prod(grid))
    out = _load(tmp_path, [helper.make_node("Col2Im", ["c", "i", "b"], ["y"], strides=strides, dilations=dilations,
                                            pads=pads)], [("c", cols)], [("y", np.float32)],
                [("i", np.array(image, np.int64)), ("b", np.array(block, np.int64))])
    np.testing.assert_allclose(out, _col2im_reference(cols, image, block, strides, dilations, pads), rtol=1e-5,
                               atol=1e-5)


_EDGES = {np.int8: [-128, -1, 0, 1, 127, -77, 85], np.int32: [-2**31, -1, 0, 1, 2**31 - 1, -123456789, 0x5A5A5A5A],
          np.int64: [-2**63, -1, 0, 1, 2**63 - 1, -(2**40) - 12345, 0x0F0F0F0F0F0F0F0F]}


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("op, ref", [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                                     ("BitwiseXor", np.bitwise_xor)])
def test_bitwise_binary_ops_match_numpy_on_every_bit(tmp_path, dtype, op, ref):
    info = np.iinfo(dtype)
    edges = np.array(_EDGES[dtype], dtype)
    a = np.concatenate([edges, RNG.integers(info.min, info.max, 25, dtype=dtype, endpoint=True)])
    b = np.concatenate([edges[::-1], RNG.integers(info.min, info.max, 25, dtype=dtype, endpoint=True)])
    a, b = np.stack([a, b]), b[None, :]  # b broadcasts over a's rows
    out = _load(tmp_path, [helper.make_node(op, ["a", "b"], ["y"])], [("a", a), ("b", b)], [("y", dtype)])
    np.testing.assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_bitwise_not_matches_numpy(tmp_path, dtype):
    x = np.array(_EDGES[dtype], dtype)
    out = _load(tmp_path, [helper.make_node("BitwiseNot", ["x"], ["y"])], [("x", x)], [("y", dtype)])
    np.testing.assert_array_equal(out, np.invert(x))


def test_bitwise_ops_of_unsigned_integers_are_refused_with_the_dtype(tmp_path):
    graph = helper.make_graph([helper.make_node("BitwiseAnd", ["a", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info(k, TensorProto.UINT8, [3]) for k in "ab"],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [3])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    with pytest.raises(tp.TripyException, match=r"input 'a': dtype UINT8, which Tripy does not have"):
        tp.onnx.load(path, device="cpu")


def test_opset_22_runs_its_ops_in_bfloat16(tmp_path):
    """Opset 22 changed no op's meaning; it let ops such as Sin, Conv and AveragePool take bfloat16."""
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = (RNG.standard_normal((3, 2, 3, 3)) / 4).astype(np.float32)
    nodes = [helper.make_node("Sin", ["x"], ["s"]), helper.make_node("Conv", ["s", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, None)],
                              initializer=[helper.make_tensor("w", TensorProto.BFLOAT16, w.shape,
                                                              (w.view(np.uint32) >> 16).astype(np.uint16).tobytes(),
                                                              raw=True)])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), path)
    model = tp.onnx.load(path, device="cpu")
    got = np.asarray(tp.cast(model(tp.cast(tp.Tensor(x, device=tp.device("cpu")), tp.bfloat16)), tp.float32))
    # numpy in float32 from the bfloat16 weights: the model rounds in between, so a loose bound.
    w16 = ((w.view(np.uint32) >> 16) << 16).view(np.float32)
    s = np.pad(np.sin(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 3, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            conv[0, :, i, j] = np.tensordot(w16, s[0, :, i:i + 3, j:j + 3], axes=([1, 2, 3], [0, 1, 2]))
    want = conv.reshape(1, 3, 3, 2, 3, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2)
