"""``tp.Linear``: ``y = x @ transpose(weight) + bias``, optionally with quantized weights."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import (
    ColumnParallel, RankShares, RowParallel, check_parallel, check_whole_groups, current_rank, world_size,
)
from tripy.frontend.module import Module, _remember_parameters
from tripy.frontend.modules.placeholder import placeholder, remember
from tripy.frontend.ops.collectives import all_gather, all_reduce
from tripy.frontend.ops.creation import ones
from tripy.frontend.ops.quantize import dequantize, quantize
from tripy.frontend.ops.shape_ops import concatenate, transpose


class Linear(Module):
    """
    Applies ``x @ transpose(weight) + bias`` with ``weight`` of shape ``(out_features, in_features)``
    and ``bias`` of shape ``(out_features,)``.

    With ``quant_dtype`` (``tp.int8``, ``tp.int4`` or ``tp.float8``) the weight goes through that
    dtype with ``weight_scale``: one scale for the whole weight when ``weight_quant_dim`` is None
    (or, for int4, a 2-D block-wise scale: ``(out_features, in_features / group)`` for groups of
    input features), else one per index of that dimension. ``weight`` may be
    loaded in the float ``dtype`` (quantized at each call, as nvtripy does; folded into a
    constant by ``tp.compile``, which stores it quantized) or already quantized in ``quant_dtype``
    (only dequantized). The optional ``weight_zero_point`` (the scale's shape) makes the
    quantization asymmetric: ``weight = (q - weight_zero_point) * weight_scale``.
    Setting the optional ``input_scale`` also quantizes and dequantizes the input, as a quantized
    deployment would; without it (weight-only quantization) an int8 or int4 weight whose scales
    are per output feature or per group of input features is read packed by the product's kernel
    and never dequantized to memory.

    With ``parallel`` (``tp.ColumnParallel(...)`` or ``tp.RowParallel()``) the layer is sharded
    when compiled with a ``tp.DeviceMesh``: each rank keeps its share of the weight and computes
    its share of the output features (column) or a partial product over its share of the input
    features, summed by an all-reduce (row; the bias is added once, after the sum). The parameters
    stay whole in the module (a checkpoint of the unsharded model loads as it is); each rank's
    program holds only its share. Outside a sharded compile the layer is whole. ``load_share``
    instead holds only the shares of this process's ranks (the whole weight is never loaded),
    which each rank's program reads as they are; such a layer runs only sharded. A quantized layer
    is split before it is dequantized: each rank reads its share of the quantized weight with the
    scales (and zero points) of that share; int4's groups of input features must not straddle two
    ranks' shares.

    Args:
        in_features (int): The size of the input's last dim.
        out_features (int): The size of the output's last dim.
        bias (bool): Whether the module has a ``bias``.
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        quant_dtype (tp.dtype | None): ``tp.int8``, ``tp.int4`` or ``tp.float8`` to quantize the
            weight; None for none.
        weight_quant_dim (int | None): 0 or 1 for one scale per index of that weight dim; None for
            one scale (or int4's block-wise scale).
        parallel (tp.ColumnParallel | tp.RowParallel | None): How a sharded compile splits the
            layer; None: every rank computes it whole.

    Raises:
        tp.TripyException: if ``weight_quant_dim`` is not None, 0 or 1, a dtype is not a Tripy dtype,
            or ``parallel`` is not a sharding spec or its parts do not add up to ``out_features``.

    Example::

        import tripy as tp

        linear = tp.Linear(2, 3)
        out = linear(tp.ones((1, 2)))
        assert out.shape == (1, 3)
        assert tp.equal(out, tp.Tensor([[1.0, 6.0, 11.0]]))

        quantized = tp.Linear(2, 2, quant_dtype=tp.int8, weight_quant_dim=0)
        quantized.load_state_dict(
            {"weight": tp.Tensor([[0.5, -1.0], [2.0, 4.0]]), "weight_scale": tp.Tensor([0.5, 2.0]),
             "bias": tp.zeros((2,))}
        )
        assert quantized(tp.ones((1, 2))).tolist() == [[-0.5, 6.0]]

        groups = tp.Linear(4, 1, bias=False, quant_dtype=tp.int4)  # 2 groups of 2 input features
        groups.load_state_dict(
            {"weight": tp.Tensor([[1.0, 2.0, 3.0, 4.0]]), "weight_scale": tp.Tensor([[1.0, 0.5]]),
             "weight_zero_point": tp.Tensor([[1.0, -2.0]])}
        )
        assert groups(tp.ones((1, 4))).tolist() == [[10.0]]
    """

    _optional_parameters = ("input_scale", "weight_zero_point")

    def __init__(
        self,
        in_features,
        out_features,
        bias=True,
        dtype=dtypes.float32,
        quant_dtype=None,
        weight_quant_dim=None,
        parallel=None,
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtypes.check_dtype(dtype)
        self.quant_dtype = None if quant_dtype is None else dtypes.check_dtype(quant_dtype, "Linear's quant_dtype")
        self.weight_quant_dim = weight_quant_dim
        self.parallel = check_parallel(parallel, "Linear")
        if isinstance(parallel, ColumnParallel):
            parallel._check(out_features, "Linear")

        weight_shape = (out_features, in_features)
        weight = placeholder(weight_shape, self.dtype)
        if weight_quant_dim not in (None, 0, 1):
            _raise_here(f"Linear's weight_quant_dim must be None, 0 or 1, but got: {weight_quant_dim}.")
        if quant_dtype is not None:
            scale_shape = () if weight_quant_dim is None else (weight_shape[weight_quant_dim],)
            # Scales of one keep the placeholder weight's values (quantization would divide by zero
            # with arange's leading 0).
            self.weight_scale = remember(ones(scale_shape, dtype=self.dtype))
            self.input_scale = None
            self.weight_zero_point = None
            weight = remember(quantize(weight, self.weight_scale, quant_dtype, dim=weight_quant_dim))
        self.weight = weight
        self.bias = placeholder((out_features,), self.dtype) if bias else None
        self.shares = None  # a tp.RankShares once load_share has been called

    def _parameter_rule(self, name):
        if self.quant_dtype is None:
            return None
        if name == "weight":
            return ((self.dtype, self.quant_dtype), True)
        if name == "weight_scale":
            # Per-channel scales have a fixed length; a whole-weight scale may be a scalar or, for
            # int4, block-wise 2-D (quantize checks it against the weight).
            return ((self.dtype,), self.weight_quant_dim is not None)
        if name in ("input_scale", "weight_zero_point"):
            return ((self.dtype,), False)
        return None

    def share_ranges(self, rank, world):
        """
        Where rank ``rank``'s share of the weight lies in the whole.

        Args:
            rank (int): The rank, from 0.
            world (int): The number of ranks.

        Returns:
            tuple[list, list]: ``(rows, cols)``, each a list of (start, stop) pairs: a column-parallel
            layer's rows, one pair per part, or a row-parallel layer's columns.

        Raises:
            tp.TripyException: if the features do not split evenly over ``world`` ranks.
        """
        if isinstance(self.parallel, ColumnParallel):
            return self.parallel._ranges(self.out_features, rank, world, "Linear"), [(0, self.in_features)]
        return [(0, self.out_features)], [self.parallel._range(self.in_features, rank, world, "Linear")]

    def load_share(self, rank, world, params):
        """
        Holds ``params`` as rank ``rank``'s share of this sharded layer over ``world`` ranks:
        ``weight`` (the rows of ``share_ranges``, a column-parallel layer's parts one after the
        other, or its columns; quantized, or in ``dtype``), its ``weight_scale`` and
        ``weight_zero_point`` when quantized (the rows' or the columns' groups; per-output-feature
        scales of a row-parallel layer whole), a per-tensor ``input_scale`` where the layer has one,
        and ``bias`` (a column-parallel layer's rows of it; a row-parallel layer's whole). The whole
        parameters are dropped: the layer then runs only in a compile over ``world`` ranks, each of
        this process's ranks reading its share.

        Args:
            rank (int): The rank whose share ``params`` is, from 0.
            world (int): The number of ranks.
            params (dict[str, tp.Tensor]): The share's ``weight`` and, as the layer has them,
                ``weight_scale``, ``weight_zero_point``, ``input_scale`` and ``bias``.

        Raises:
            tp.TripyException: if the layer is not sharded or the weight is not the share's shape.
        """
        if self.parallel is None:
            _raise_here("load_share needs a sharded Linear (parallel=tp.ColumnParallel(...) or tp.RowParallel()).")
        rows, cols = self.share_ranges(rank, world)
        want = (sum(hi - lo for lo, hi in rows), sum(hi - lo for lo, hi in cols))
        got = tuple(params["weight"].shape)
        if got != want:
            _raise_here(f"Rank {rank} of {world}'s share of this Linear's weight has shape {want}, but got {got}.")
        if self.shares is None or self.shares.world != world:
            self.shares = RankShares(world)
        _remember_parameters(params)
        self.shares.set(rank, params)
        for name in ("weight", "bias", "weight_scale", "weight_zero_point", "input_scale"):
            if name in vars(self):
                object.__setattr__(self, name, None)

    def forward(self, x):
        """
        Computes ``x @ transpose(weight) + bias`` (dequantizing the weight first when quantized).

        Args:
            x (tp.Tensor): A tensor whose last dim is ``in_features``.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype or last dim does not match the module's.
        """
        sharded = self.parallel is not None and world_size() > 1
        if self.shares is not None:
            return self._forward_share(x)
        weight = self.weight
        if self.quant_dtype is not None:
            if self.input_scale is not None:
                quantized = quantize(x, self.input_scale, self.quant_dtype)
                x = dequantize(quantized, self.input_scale, self.dtype)
            scale, zero = self.weight_scale, self.weight_zero_point
            if weight.dtype != self.quant_dtype:
                weight = quantize(weight, scale, self.quant_dtype, dim=self.weight_quant_dim, zero_point=zero)
            if sharded:  # this rank's share of the quantized weight, so its program holds only that
                shares = self._quantized_shares(weight, scale, zero, current_rank(), world_size())
                if len(shares) > 1 and self.quant_dtype == dtypes.int4:
                    # Concatenated int4 parts would be unpacked to a temporary: one product per part
                    # reads each part's packed bytes in place.
                    return self._column_parts(x, shares)
                weight, scale, zero = (_joined(pieces) for pieces in zip(*shares))
            weight = dequantize(weight, scale, self.dtype, dim=self.weight_quant_dim, zero_point=zero)
        if sharded:
            return self._sharded(x, weight, current_rank(), world_size(), weight_is_share=self.quant_dtype is not None)
        out = x @ transpose(weight, 0, 1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def _forward_share(self, x):
        """The layer from this rank's share held by ``load_share``, read as it is."""
        rank, world = current_rank(), world_size()
        share = self.shares.of(rank, world, "Linear")
        weight, bias = share["weight"], share.get("bias")
        if self.quant_dtype is not None:
            if share.get("input_scale") is not None:
                x = dequantize(quantize(x, share["input_scale"], self.quant_dtype), share["input_scale"], self.dtype)
            weight = dequantize(weight, share["weight_scale"], self.dtype, dim=self.weight_quant_dim,
                                zero_point=share.get("weight_zero_point"))
        return self._sharded(x, weight, rank, world, weight_is_share=True, bias=bias, bias_is_share=True)

    def _quantized_shares(self, weight, scale, zero, rank, world):
        """This rank's share of a quantized weight and the scales (and zero points) that go with it,
        as (weight, scale, zero_point) per piece (a column-parallel layer's parts): per-output-feature
        and block-wise scales split with the weight's rows (column-parallel), per-input-feature and
        block-wise ones with its columns (row-parallel)."""
        block = self.weight_quant_dim is None and scale.rank == 2
        if isinstance(self.parallel, ColumnParallel):
            ranges = self.parallel._ranges(self.out_features, rank, world, "Linear")
            follows = block or self.weight_quant_dim == 0
            return [tuple(t[lo:hi] if t is not None and (t is weight or follows) else t for t in (weight, scale, zero))
                    for lo, hi in ranges]
        lo, hi = self.parallel._range(self.in_features, rank, world, "Linear")
        if block:
            group = self.in_features // scale.shape[1]
            check_whole_groups("tp.Linear", self.in_features, world, group)
            cols = lambda t: None if t is None else t[:, lo // group : hi // group]
            return [(weight[:, lo:hi], cols(scale), cols(zero))]
        if self.weight_quant_dim == 1:
            return [(weight[:, lo:hi], scale[lo:hi], None if zero is None else zero[lo:hi])]
        return [(weight[:, lo:hi], scale, zero)]

    def _column_parts(self, x, shares):
        """A column-parallel layer of several parts computed one product per part of this rank's
        share, the outputs concatenated in the parts' order (as the share's rows are)."""
        outs = [x @ transpose(dequantize(w, s, self.dtype, dim=self.weight_quant_dim, zero_point=z), 0, 1)
                for w, s, z in shares]
        out = concatenate(outs, dim=-1)
        if self.bias is not None:
            out = out + _rows(self.bias, self.parallel._ranges(self.out_features, current_rank(), world_size(), "Linear"))
        return out

    def _sharded(self, x, weight, rank, world, weight_is_share=False, bias=None, bias_is_share=False):
        """This rank's part of the layer in a sharded compile (see ``parallel``); ``weight_is_share``:
        ``weight`` is this rank's share already (a quantized weight is split before dequantizing);
        ``bias_is_share``: ``bias`` is (``load_share``), else the module's whole bias is split here."""
        if not bias_is_share:
            bias = self.bias
        if isinstance(self.parallel, ColumnParallel):
            ranges = self.parallel._ranges(self.out_features, rank, world, "Linear")
            out = x @ transpose(weight if weight_is_share else _rows(weight, ranges), 0, 1)
            if bias is not None:
                out = out + (bias if bias_is_share else _rows(bias, ranges))
            return all_gather(out, dim=-1) if self.parallel.gather_output else out
        lo, hi = self.parallel._range(self.in_features, rank, world, "Linear")
        features = x.shape[-1] if x.rank else None
        if isinstance(features, int) and features != hi - lo:
            _raise_here(
                f"A row-parallel Linear over {world} ranks takes each rank's share of its {self.in_features} input "
                f"features ({hi - lo}, as a column-parallel layer before it computes them), but its input has {features}"
                + (": for an input that every rank holds whole, use tp.ColumnParallel() or no parallel."
                   if features == self.in_features else ".")
            )
        out = all_reduce(x @ transpose(weight if weight_is_share else weight[:, lo:hi], 0, 1))
        return out + bias if bias is not None else out


def _rows(t, ranges):
    """The rows of ``t`` in ``ranges`` ((start, stop) pairs), in order."""
    if len(ranges) == 1:
        return t[ranges[0][0] : ranges[0][1]]
    return concatenate([t[lo:hi] for lo, hi in ranges], dim=0)


def _joined(pieces):
    """One tensor of a share's pieces along dim 0: a piece every part shares (a scale that does not
    split with the rows), or None, is taken once."""
    if pieces[0] is None or all(p is pieces[0] for p in pieces):
        return pieces[0]
    return concatenate(list(pieces), dim=0)
