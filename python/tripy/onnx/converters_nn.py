"""The converters of ONNX's math and network ops (softmax, reductions, matrix products,
convolution, pooling, normalizations, padding, resizing, scatter and gather, and the activations
that are not one elementwise function); the table in ``converters.py`` names them."""

import builtins
import math

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full, tril, triu
from tripy.frontend.ops.elementwise import exp, expm1, gelu, log, maximum, minimum, sqrt, tanh, where
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.reduce import max, mean, sum
from tripy.frontend.ops.scan import cumsum, topk
from tripy.frontend.ops.shape_ops import expand, flip, permute, reshape, squeeze
from tripy.frontend.trace_call import make
from tripy.onnx import composites
from tripy.onnx import resize as resize_rules
from tripy.onnx import scatter as scatter_ops
from tripy.onnx.einsum import einsum
from tripy.onnx.graph import _as_dtype_of, _axes_of, _axis, _flat, _static, dtype_of


def _softmax(fn):
    def run(ctx, n):
        x = ctx.tensor(n.inputs[0])
        if n.opset < 13:  # the input is seen as 2-D: [dims before axis, dims from axis on]
            axis = _axis(n.attr("axis", 1), x.rank)
            return fn(x, list(range(axis, x.rank)))
        return fn(x, _axis(n.attr("axis", -1), x.rank))

    return run


def _reduce(fn, axes_input_from=18):
    def run(ctx, n):
        x = ctx.tensor(n.inputs[0])
        axes = _axes_of(ctx, n, axes_input_from)
        keep = bool(n.attr("keepdims", 1))
        if not axes:
            if n.attr("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.rank))
        return fn(x, [_axis(a, x.rank) for a in axes], keep)

    return run


def _extreme(fn, highest):
    """ReduceMax (fn max) and ReduceMin (fn min, `highest`): bool through int32, and over an empty
    dim ONNX's identity, the other end of the dtype (-inf or inf, the lowest or highest integer,
    False or True)."""

    def reduce(x, axes, keep):
        if builtins.any(isinstance(x.shape[a], int) and x.shape[a] == 0 for a in axes):
            if x.dtype == dtypes.bool:  # tp.full takes numbers
                return _extreme(fn, highest)(cast(x, dtypes.int32), axes, keep) > 0
            if issubclass(x.dtype, dtypes.floating):
                value = math.inf if highest else -math.inf
            else:
                bits = {dtypes.int8: 8, dtypes.int32: 32, dtypes.int64: 64}[x.dtype]
                value = 2 ** (bits - 1) - 1 if highest else -(2 ** (bits - 1))
            shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else [
                d for i, d in enumerate(x.shape) if i not in axes]
            return full(shape, value, x.dtype)
        if x.dtype == dtypes.bool:
            return cast(fn(cast(x, dtypes.int32), axes, keep), dtypes.bool)
        return fn(x, axes, keep)

    return reduce


def _sum_square(x, axes, keep):
    return sum(x * x, axes, keep)


def _l1(x, axes, keep):
    return sum(abs(x), axes, keep)


def _l2(x, axes, keep):
    return sqrt(sum(x * x, axes, keep))


def _log_sum(x, axes, keep):
    return log(sum(x, axes, keep))


def _log_sum_exp(x, axes, keep):
    peak = max(x, axes, True)
    out = log(sum(exp(x - peak), axes, True)) + peak
    return out if keep else squeeze(out, axes)


def _arg(fn):
    def run(ctx, n):
        x = ctx.tensor(n.inputs[0])
        axis = _axis(n.attr("axis", 0), x.rank)
        keep = bool(n.attr("keepdims", 1))
        if n.attr("select_last_index", 0):
            idx = fn(flip(x, axis), axis, keep)
            out = (x.shape[axis] - 1) - idx if isinstance(x.shape[axis], int) else cast(x.shape[axis], dtypes.int32) - 1 - idx
        else:
            out = fn(x, axis, keep)
        return cast(out, dtypes.int64)

    return run


def _matmul(ctx, n):
    return matmul(ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]))


def _gemm(ctx, n):
    a, b = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    if n.attr("transA", 0):
        a = permute(a, [1, 0])
    if n.attr("transB", 0):
        b = permute(b, [1, 0])
    out = matmul(a, b)
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    if alpha != 1.0:
        out = out * alpha
    c = ctx.opt_tensor(n, 2)
    if c is not None:
        out = out + (c * beta if beta != 1.0 else c)
    return out


def _spatial_pads(ctx, n, x, kernel, strides, dilations):
    """(before, after) per spatial dim from ``pads`` or ``auto_pad``."""
    nd = len(kernel)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for i in range(nd):
            size = x.shape[2 + i]
            if not isinstance(size, int):
                _raise_here(f"ONNX {n.describe()}: auto_pad {auto} needs static spatial sizes, but dim {2 + i} is dynamic.")
            out = -(-size // strides[i])
            total = builtins.max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pairs.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return pairs
    if auto == "VALID":
        return [(0, 0)] * nd
    pads = n.attr("pads", [0] * (2 * nd))
    return [(pads[i], pads[i + nd]) for i in range(nd)]


def _conv(ctx, n):
    x, w = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    nd = w.rank - 2
    kernel = n.attr("kernel_shape", list(w.shape[2:]))
    strides = n.attr("strides", [1] * nd)
    dilations = n.attr("dilations", [1] * nd)
    padding = _spatial_pads(ctx, n, x, kernel, strides, dilations)
    conv = {"stride": strides, "padding": padding, "dilation": dilations, "groups": n.attr("group", 1),
            "transposed": False}
    out = make("convolution", [x, w], convolution=conv)
    b = ctx.opt_tensor(n, 2)
    return out if b is None else out + reshape(b, [-1] + [1] * nd)


def _conv_transpose(ctx, n):
    x, w = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    nd = w.rank - 2
    strides = n.attr("strides", [1] * nd)
    dilations = n.attr("dilations", [1] * nd)
    output_padding = n.attr("output_padding", [0] * nd)
    pads = n.attr("pads", [0] * (2 * nd))
    auto = n.attr("auto_pad", "NOTSET")
    wanted = n.attr("output_shape")
    if wanted is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        # pads from the output's size: the full transposed convolution cropped (or, where the total
        # is negative, extended with zeros) to it
        spatial = list(x.shape[2:])
        if not _static(spatial):
            _raise_here(f"ONNX {n.describe()}: output_shape and auto_pad need static spatial sizes.")
        wanted = list(wanted)[-nd:] if wanted is not None else [s * st for s, st in zip(spatial, strides)]
        k = list(w.shape[2:])
        total = [st * (s - 1) + op + (kk - 1) * d + 1 - want
                 for s, st, op, kk, d, want in zip(spatial, strides, output_padding, k, dilations, wanted)]
        # a negative total extends the end, as output_padding does; SAME_UPPER puts the odd one last
        head = [0 if t < 0 else t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        pads = head + [t - h for t, h in zip(total, head)]
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    grow = [(-builtins.min(pads[i], 0), -builtins.min(pads[i + nd], 0)) for i in range(nd)]
    pads = [builtins.max(p, 0) for p in pads]
    conv = {"stride": strides, "padding": [(pads[i], pads[i + nd]) for i in range(nd)], "dilation": dilations,
            "groups": n.attr("group", 1), "transposed": True, "output_padding": output_padding}
    out = make("convolution", [x, w], convolution=conv)
    if any(lo or hi for lo, hi in grow):  # outputs past the full convolution: no input reaches them
        out = pad(out, [(0, 0), (0, 0)] + grow)
    b = ctx.opt_tensor(n, 2)
    return out if b is None else out + reshape(b, [-1] + [1] * nd)


def _channel(t, rank):
    return reshape(t, [-1] + [1] * (rank - 2))


def _batch_norm(ctx, n):
    x, scale, bias, mean_, var = (ctx.tensor(i) for i in n.inputs[:5])
    eps = n.attr("epsilon", 1e-5)
    r = x.rank
    return (x - _channel(mean_, r)) / sqrt(_channel(var, r) + eps) * _channel(scale, r) + _channel(bias, r)


def _instance_norm(ctx, n):
    x, scale, bias = (ctx.tensor(i) for i in n.inputs[:3])
    if x.rank >= 3 and scale.rank == 1 and bias.rank == 1 and scale.dtype == bias.dtype == x.dtype:
        return make("instancenorm", [x, scale, bias], eps=float(n.attr("epsilon", 1e-5)))  # Tripy's fused op
    dims = list(range(2, x.rank))
    m = mean(x, dims, True)
    centred = x - m
    var = mean(centred * centred, dims, True)
    return centred / sqrt(var + n.attr("epsilon", 1e-5)) * _channel(scale, x.rank) + _channel(bias, x.rank)


def _layer_norm(ctx, n):
    x, scale = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    bias = ctx.opt_tensor(n, 2)
    axis = _axis(n.attr("axis", -1), x.rank)
    dims = list(range(axis, x.rank))
    normalized = list(x.shape[axis:])
    if len([o for o in n.outputs if o]) == 1 and _static(normalized) and all(
            t is None or (t.dtype == x.dtype and list(t.shape) == normalized) for t in (scale, bias)):
        # Tripy's fused LayerNorm (one row reduction); the mean and inverse deviation outputs, or a
        # scale that only broadcasts to the normalized dims, take the chain below.
        bias = bias if bias is not None else full(normalized, 0.0, x.dtype)
        return make("layernorm", [x, scale, bias], dims=list(range(axis - x.rank, 0)), eps=float(n.attr("epsilon", 1e-5)))
    m = mean(x, dims, True)
    centred = x - m
    inv = 1.0 / sqrt(mean(centred * centred, dims, True) + n.attr("epsilon", 1e-5))
    y = centred * inv * scale
    if bias is not None:
        y = y + bias
    return [y, m, inv][: len(n.outputs)]


def _mvn(ctx, n):
    x = ctx.tensor(n.inputs[0])
    dims = [_axis(a, x.rank) for a in n.attr("axes", [0, 2, 3])]
    m = mean(x, dims, True)
    centred = x - m
    return centred / (sqrt(mean(centred * centred, dims, True)) + 1e-9)


def _pad(ctx, n):
    x = ctx.tensor(n.inputs[0])
    if n.opset < 11:
        pads, value = n.attr("pads"), n.attr("value", 0.0)
    else:
        pads = ctx.ints(n.inputs[1], n)
        value = 0 if n.input(2) is None else _flat(ctx.values(n.inputs[2], n))[0]
    r = x.rank
    axes = list(range(r)) if n.input(3) is None else [_axis(a, r) for a in ctx.ints(n.inputs[3], n)]  # opset 18
    pairs = [(0, 0)] * r
    for i, a in enumerate(axes):
        pairs[a] = (pads[i], pads[i + len(axes)])
    if any(isinstance(p, int) and p < 0 for pair in pairs for p in pair):  # cropping: a slice first
        if not _static(x.shape):
            _raise_here(f"ONNX {n.describe()}: negative pads (cropping) need static shapes.")
        x = x[tuple(slice(-builtins.min(lo, 0), size + builtins.min(hi, 0)) for (lo, hi), size in zip(pairs, x.shape))]
        pairs = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi in pairs]
    mode = n.attr("mode", "constant")
    if mode in ("edge", "wrap"):
        if not _static(x.shape) or not _static([p for pair in pairs for p in pair]):
            _raise_here(f"ONNX {n.describe()}: {mode} padding needs static shapes and pads.")
        return composites.edge_pad(x, pairs, wrap=mode == "wrap")
    return pad(x, pairs, mode=mode, value=value)


def _resize(ctx, n):
    x = ctx.tensor(n.inputs[0])
    roi, extrapolation = None, 0.0
    if n.op_type == "Upsample":  # Resize with asymmetric coordinates, nearest rounding down
        scales = n.attr("scales") if n.opset < 9 else [float(v) for v in _flat(ctx.values(n.inputs[1], n))]
        mode, coordinate, rule, a, exclude = n.attr("mode", "nearest"), "asymmetric", "floor", -0.75, False
        sizes = None
    else:
        scales = None if n.input(2) is None else [float(v) for v in _flat(ctx.values(n.inputs[2], n))] or None
        sizes = None if n.input(3) is None or scales else ctx.ints(n.inputs[3], n)
        mode, coordinate = n.attr("mode", "nearest"), n.attr("coordinate_transformation_mode", "half_pixel")
        rule, a, exclude = n.attr("nearest_mode", "round_prefer_floor"), n.attr("cubic_coeff_a", -0.75), \
            bool(n.attr("exclude_outside", 0))
        if coordinate == "tf_crop_and_resize":
            roi = None if n.input(1) is None else [float(v) for v in _flat(ctx.values(n.inputs[1], n))]
            extrapolation = n.attr("extrapolation_value", 0.0)

    def fail(message):
        _raise_here(f"ONNX {n.describe()}: {message}.")

    if scales is None and sizes is None:
        fail("neither scales nor sizes is given")
    axes = n.attr("axes")  # opset 18: scales, sizes and roi name only these dims
    if axes is not None:
        axes = [_axis(d, x.rank) for d in axes]
        given = scales if scales is not None else sizes
        if len(given) != len(axes) or (roi is not None and len(roi) != 2 * len(axes)):
            fail(f"{len(given)} scales or sizes for {len(axes)} axes")
        full_given = [1.0 if scales is not None else x.shape[d] for d in range(x.rank)]
        full_roi = [0.0] * x.rank + [1.0] * x.rank
        for i, d in enumerate(axes):
            full_given[d] = given[i]
            if roi is not None:
                full_roi[d], full_roi[d + x.rank] = roi[i], roi[i + len(axes)]
        scales, sizes = (full_given, None) if scales is not None else (None, full_given)
        roi = full_roi if roi is not None else None
    if coordinate == "tf_crop_and_resize" and (roi is None or len(roi) != 2 * x.rank):
        fail("tf_crop_and_resize needs a roi of two entries per dim")
    if scales is not None:
        if len(scales) != x.rank:
            fail(f"{len(scales)} scales for an input of rank {x.rank}")
        sizes = []
        for d, (size, scale) in enumerate(zip(x.shape, scales)):
            crop = 1.0 if roi is None else roi[d + x.rank] - roi[d]
            if scale == 1.0 and crop == 1.0:
                sizes.append(size)
            elif isinstance(size, int):
                sizes.append(int(math.floor(size * crop * scale)))
            else:
                fail(f"dim {d} is dynamic: it can be resized to a size, not by a scale")
    elif len(sizes) != x.rank:
        fail(f"{len(sizes)} sizes for an input of rank {x.rank}")
    return resize_rules.onnx_resize(x, sizes, scales, mode, coordinate, rule, a, exclude, fail, roi, extrapolation)


def _failing(n):
    def fail(message):
        _raise_here(f"ONNX {n.describe()}: {message}.")

    return fail


def _gather_nd(ctx, n):
    return scatter_ops.gather_nd(ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]), n.attr("batch_dims", 0), _failing(n))


def _scatter_nd(ctx, n):
    data, indices, updates = (ctx.tensor(i) for i in n.inputs[:3])
    return scatter_ops.scatter_nd(data, indices, updates, n.attr("reduction", "none"), _failing(n))


def _scatter_elements(ctx, n):
    data, indices, updates = (ctx.tensor(i) for i in n.inputs[:3])
    axis = _axis(n.attr("axis", 0), data.rank)
    return scatter_ops.scatter_elements(data, indices, updates, axis, n.attr("reduction", "none"), _failing(n))


def _einsum(ctx, n):
    operands = [ctx.tensor(i) for i in n.inputs if i]
    try:
        return einsum(n.attr("equation"), operands)
    except ValueError as e:
        _failing(n)(str(e))


def _hardmax(ctx, n):
    x = ctx.tensor(n.inputs[0])
    if n.opset < 13:
        return composites.hardmax_2d(x, _axis(n.attr("axis", 1), x.rank))
    return composites.hardmax(x, _axis(n.attr("axis", -1), x.rank))


def _one_hot(ctx, n):
    indices = ctx.tensor(n.inputs[0])
    depth = _flat(ctx.values(n.inputs[1], n))[0]
    values = ctx.tensor(n.inputs[2])
    off, on = values[0], values[1]
    return composites.one_hot(indices, int(depth), off, on, n.attr("axis", -1))


def _eye_like(ctx, n):
    x = ctx.tensor(n.inputs[0])
    if x.rank != 2 or not _static(x.shape):
        _raise_here(f"ONNX {n.describe()}: EyeLike needs a 2-D input of static shape, but got {list(x.shape)}.")
    dtype = dtype_of(n.attr("dtype")) if n.has("dtype") else x.dtype
    return composites.eye_like(x, n.attr("k", 0), dtype)


def _lrn(ctx, n):
    x = ctx.tensor(n.inputs[0])
    return composites.lrn(x, n.attr("size"), n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0))


def _reverse_sequence(ctx, n):
    x, lengths = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    if not _static(x.shape):
        _raise_here(f"ONNX {n.describe()}: ReverseSequence needs a static shape, but got {list(x.shape)}.")
    return composites.reverse_sequence(x, lengths, n.attr("batch_axis", 1), n.attr("time_axis", 0))


def _topk(ctx, n):
    x = ctx.tensor(n.inputs[0])
    k = _flat(ctx.ints(n.inputs[1], n))[0]
    axis = _axis(n.attr("axis", -1), x.rank)
    if n.attr("largest", 1):
        values, indices = topk(x, k, axis)
    else:
        values, indices = topk(-x, k, axis)
        values = -values
    return [values, cast(indices, dtypes.int64)]


def _cumsum(ctx, n):
    x = ctx.tensor(n.inputs[0])
    axis = _axis(_flat(ctx.ints(n.inputs[1], n))[0], x.rank)
    if n.attr("reverse", 0):
        x = flip(x, axis)
    out = cumsum(x, axis)
    if n.attr("exclusive", 0):
        out = out - x
    return flip(out, axis) if n.attr("reverse", 0) else out


def _trilu(ctx, n):
    x = ctx.tensor(n.inputs[0])
    k = 0 if n.input(1) is None else _flat(ctx.ints(n.inputs[1], n))[0]
    return triu(x, k) if n.attr("upper", 1) else tril(x, k)


def _depth_to_space(ctx, n):
    x = ctx.tensor(n.inputs[0])
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    if n.attr("mode", "DCR") == "DCR":
        t = permute(reshape(x, [N, b, b, C // (b * b), H, W]), [0, 3, 4, 1, 5, 2])
    else:
        t = permute(reshape(x, [N, C // (b * b), b, b, H, W]), [0, 1, 4, 2, 5, 3])
    return reshape(t, [N, C // (b * b), H * b, W * b])


def _space_to_depth(ctx, n):
    x = ctx.tensor(n.inputs[0])
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    t = permute(reshape(x, [N, C, H // b, b, W // b, b]), [0, 3, 5, 1, 2, 4])
    return reshape(t, [N, C * b * b, H // b, W // b])


def _dropout(ctx, n):
    x = ctx.tensor(n.inputs[0])
    ratio = 0.0 if n.input(1) is None else _flat(ctx.values(n.inputs[1], n))[0]
    if n.input(2) is not None and _flat(ctx.values(n.inputs[2], n))[0] and ratio:  # checked at load
        _raise_here(f"ONNX {n.describe()}: training_mode is not supported (Tripy runs inference).")
    if len(n.outputs) > 1 and n.outputs[1]:
        return [x, cast(full(x.shape, 1, dtypes.int32), dtypes.bool)]
    return x


def _prelu(ctx, n):
    x, slope = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    return where(x < 0, x * slope, x)


def _elementwise(fn):
    """A converter from a function of the node and its first input."""
    return lambda ctx, n: fn(n, ctx.tensor(n.inputs[0]))


def _hard_sigmoid(n, x, alpha=None, beta=None):
    alpha = n.attr("alpha", 0.2) if alpha is None else alpha
    beta = n.attr("beta", 0.5) if beta is None else beta
    return minimum(maximum(x * alpha + beta, _as_dtype_of(0.0, x)), _as_dtype_of(1.0, x))


def _softplus(x):
    return maximum(x, _as_dtype_of(0.0, x)) + log(exp(-abs(x)) + 1.0)


def _celu(n, x):
    alpha = n.attr("alpha", 1.0)
    zero = _as_dtype_of(0.0, x)
    return maximum(x, zero) + minimum(zero, expm1(x / alpha) * alpha)


def _shrink(n, x):
    lambd, bias = n.attr("lambd", 0.5), n.attr("bias", 0.0)
    return where(x < -lambd, x + bias, where(x > lambd, x - bias, _as_dtype_of(0.0, x)))


def _is_inf(n, x):
    pos, neg = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    inf = float("inf")
    hit = (x == inf) if pos else (x != x) & (x == inf)  # all False, of x's shape
    return (hit | (x == -inf)) if neg else hit


def _group_norm(ctx, n):
    """Each sample's channels in ``num_groups`` groups, normalized over each group and its spatial
    dims; scale and bias per group (opset 18) or per channel (opset 21), as Tripy's fused groupnorm
    where the dtypes agree."""
    x, scale, bias = (ctx.tensor(i) for i in n.inputs[:3])
    groups, eps = n.attr("num_groups"), float(n.attr("epsilon", 1e-5))
    channels = x.shape[1]
    if n.opset < 21:  # one scale and bias per group: each repeated over its group's channels
        if not isinstance(channels, int):
            _raise_here(f"ONNX {n.describe()}: a scale per group needs the channel count static.")
        per_group = channels // groups
        scale, bias = (reshape(expand(reshape(t, [groups, 1]), [groups, per_group]), [channels]) for t in (scale, bias))
    if x.rank >= 3 and scale.dtype == bias.dtype == x.dtype:
        return make("groupnorm", [x, scale, bias], eps=eps, groups=groups)
    grouped = reshape(x, [x.shape[0], groups, -1])
    m = mean(grouped, [2], True)
    centred = grouped - m
    y = reshape(centred / sqrt(mean(centred * centred, [2], True) + eps), list(x.shape))
    return y * _channel(scale, x.rank) + _channel(bias, x.rank)


def _gelu(n, x):
    if n.attr("approximate", "none") == "tanh":
        return x * 0.5 * (tanh((x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)) + 1.0)
    return gelu(x)


def _mish(x):
    return x * tanh(_softplus(x))


def _lp_norm(ctx, n):
    x = ctx.tensor(n.inputs[0])
    axis, p = _axis(n.attr("axis", -1), x.rank), n.attr("p", 2)
    norm = sum(abs(x), [axis], True) if p == 1 else sqrt(sum(x * x, [axis], True))
    return x / norm
