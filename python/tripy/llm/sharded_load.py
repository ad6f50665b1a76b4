"""A checkpoint loaded over a ``tp.DeviceMesh`` share by share (``tp.llm.load(path, mesh=...)``): the
weights are read on the host in place (mapped files), and each rank of this process gets, on its
device, only its share of every sharded weight, which its program reads as it is. A process of
``torchrun`` so holds one rank's share of the model, never the whole; the weights every rank holds
whole (the norms) go to the device as they are.

A float weight's share is quantized on the rank's device under a quant_mode, to exactly the rows or
columns of the whole weight's quantization: int8 scales per output feature come from the whole
row's largest magnitude (read on the host) where a row-parallel share holds some of its columns,
and int4's groups are the whole weight's. A pre-quantized checkpoint's share is taken from its
tensors as tripy/llm/prequantized.py repacks them on the host: the rows, or the input features, of
the packed int4 bytes, scales and zero points, or of the fp8 values (whose per-output-feature
scales go whole with a share of the columns). Either way a row-parallel int4 share must hold whole
groups of input features: a load that would split one is refused before any weight is placed.
"""

from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import check_whole_groups
from tripy.frontend.ops.misc import cast, copy
from tripy.frontend.ops.shape_ops import concatenate
from tripy.llm.llama import _PROJECTIONS, _STACKED, _STACKED_PARAMETERS, _module_at, _stacked
from tripy.llm.quantize import int4_group, packed_int4_weight, quantize_weight, row_absmax

_FLOATS = ("float32", "float16", "bfloat16")


def load_shares(model, weights, mesh):
    """Loads ``weights`` (host tensors by the checkpoint's names; a pre-quantized checkpoint's as
    ``prequantized.on_host`` gives them) into ``model`` (a ``LlamaForCausalLM``) as the shares of
    ``mesh``'s ranks in this process; the remaining (replicated) weights load whole through
    ``model.load_state_dict``."""
    weights = dict(weights)
    if "lm_head.weight" not in weights and "model.embed_tokens.weight" in weights:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    world, ranks = mesh.size, mesh._local_ranks()
    linears = []
    for name, linear, sources in _sharded_linears(model):
        params = {p: [weights.pop(f"{s}.{p}") for s in sources]
                  for p in _STACKED_PARAMETERS if all(f"{s}.{p}" in weights for s in sources)}
        if "weight" in params or "weight_packed" in params:  # else load_state_dict below reports it missing
            linears.append((name, linear, params))
    for name, linear, params in linears:  # every share checked before any weight is placed
        _check_whole_groups(model, name, linear, params, world)
    for name, linear, params in linears:
        for rank in ranks:
            linear.load_share(rank, world, _linear_share(model, name, linear, params, rank, world, mesh.devices[rank]))
    table = weights.pop("model.embed_tokens.weight", None)
    if table is not None:
        embedding = model.model.embed_tokens
        for rank in ranks:
            dim, lo, hi = embedding.share_range(rank, world)
            share = _to_device(table[:, lo:hi] if dim == 1 else table[lo:hi], mesh.devices[rank], model.dtype)
            share.eval()
            embedding.load_share(rank, world, share)
    replicated = {}
    for key, w in weights.items():
        replicated[key] = _to_device(w, mesh.devices[ranks[0]], model.dtype)
        replicated[key].eval()
    model.load_state_dict(replicated)


def _sharded_linears(model):
    """(name, Linear, checkpoint names of the projections it stacks) of every sharded Linear."""
    yield "lm_head", model.lm_head, ["lm_head"]
    for i, layer in enumerate(model.model.layers):
        prefix = f"model.layers.{i}."
        for proj in _PROJECTIONS:
            yield prefix + proj, _module_at(layer, proj), [prefix + s for s in _STACKED.get(proj, (proj,))]


def _to_device(host, device, dtype):
    """``host`` (a slice of a mapped checkpoint tensor) on ``device``, float weights in ``dtype``."""
    t = copy(host, device)
    return cast(t, dtype) if t.dtype.name in _FLOATS and t.dtype != dtype else t


def _int4_group(model, name, linear, params):
    """The group of input features an int4 layer's scales are per (the checkpoint's, read from its
    scales' shape, or the one a float weight quantizes in); None for a layer that is not int4."""
    if "weight_packed" in params:
        return linear.in_features // params["weight_scale"][0].shape[1]
    if model.quant_mode == "int4-weight-only" and linear.quant_dtype is not None:
        return int4_group(linear.in_features, name + ".weight")
    return None


def _check_whole_groups(model, name, linear, params, world):
    """A row-parallel int4 layer whose ranks' shares of the input features would split a group of
    its quantization (or, packed, a byte of two values) is an error at the user's line, naming it."""
    group = _int4_group(model, name, linear, params)
    if group is None or linear.share_ranges(0, world)[1] == [(0, linear.in_features)]:
        return
    check_whole_groups(name, linear.in_features, world, group)
    for rank in range(world):
        (lo, hi), = linear.share_ranges(rank, world)[1]
        if lo % 2 and "weight_packed" in params:
            _raise_here(
                f"{name}: a row-parallel Linear over {world} ranks gives rank {rank} the input features {lo}:{hi}, "
                f"which start inside a byte of its packed int4 values (two a byte): each rank's share must start at an "
                f"even input feature."
            )


def _columns(param, t, lo, hi, in_features):
    """A row-parallel share of one parameter (host tensor ``t``): input features ``lo:hi`` of a
    weight (of its packed bytes, two a byte), the groups they hold of 2-D (per group) scales and zero
    points; the rest (per-output-feature scales, a per-tensor input scale, the bias) whole."""
    if param == "weight":
        return t[:, lo:hi]
    if param == "weight_packed":
        return t[:, lo // 2 : (hi + 1) // 2]
    if param in ("weight_scale", "weight_zero_point") and t.rank == 2:
        group = in_features // t.shape[1]
        return t[:, lo // group : hi // group]
    return t


def _linear_share(model, name, linear, params, rank, world, device):
    """Rank ``rank``'s share of one Linear's parameters (each a list of the stacked projections'
    host tensors), on ``device``: float weights quantized as the model's quant_mode says, a
    pre-quantized checkpoint's taken as they are (int4: the share's packed bytes, which its weight
    views, as a quantize_weight share holds them)."""
    rows, cols = linear.share_ranges(rank, world)
    column = cols == [(0, linear.in_features)]
    (lo, hi), = cols

    def share(param, sources):
        if not column:  # row-parallel: the input features' share, per output feature ones whole
            return _to_device(_columns(param, sources[0], lo, hi, linear.in_features), device, model.dtype)
        if _STACKED_PARAMETERS[param] == "maximum":  # per tensor: the stacked parts' largest, whole
            return _stacked(param, [_to_device(t, device, model.dtype) for t in sources])
        pieces = [_to_device(t, device, model.dtype) for t in _rows_of_sources(sources, rows)]
        return pieces[0] if len(pieces) == 1 else concatenate(pieces, dim=0)

    out = {p: share(p, sources) for p, sources in params.items()}
    for t in out.values():
        t.eval()
    if "weight_packed" in out:  # the int4 weight a view of the share's bytes, read in place by its program
        out["weight"] = packed_int4_weight(out.pop("weight_packed"), hi - lo, name + ".weight_packed")
        return out
    weight = out["weight"]
    if linear.quant_dtype is None or weight.dtype.name not in _FLOATS:
        return out
    mode, absmax, group = model.quant_mode, None, None
    if mode == "int4-weight-only":
        group = int4_group(linear.in_features, name + ".weight")
    elif not column:  # per-output-feature scales from the whole rows, read on the host
        absmax = copy(row_absmax(cast(params["weight"][0], model.dtype)), device)
        absmax.eval()
    out.update(quantize_weight(weight, mode, name + ".weight", absmax=absmax, group=group))
    return out


def _rows_of_sources(sources, rows):
    """The host tensors of ``rows`` ((start, stop) pairs over the sources stacked along dim 0), each
    range taken from the source that holds it."""
    out, starts, start = [], [], 0
    for t in sources:
        starts.append(start)
        start += t.shape[0]
    for lo, hi in rows:
        i = max(j for j, s in enumerate(starts) if s <= lo)
        if hi > starts[i] + sources[i].shape[0]:
            _raise_here(f"A share's rows {lo}:{hi} straddle two of the projections stacked into one Linear.")
        out.append(sources[i][lo - starts[i] : hi - starts[i]])
    return out
