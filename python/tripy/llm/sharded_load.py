"""A float checkpoint loaded over a ``tp.DeviceMesh`` share by share (``tp.llm.load(path, mesh=...)``):
the weights are read on the host in place (mapped files), and each rank of this process gets, on its
device, only its share of every sharded weight (quantized there under a quant_mode), which its
program reads as it is. A process of ``torchrun`` so holds one rank's share of the model, never the
whole; the weights every rank holds whole (the norms) go to the device as they are.

A share quantizes to exactly the rows or columns of the whole weight's quantization: int8 scales
per output feature come from the whole row's largest magnitude (read on the host) where a
row-parallel share holds some of its columns, and int4's groups are the whole weight's, which a
row-parallel share must hold whole.
"""

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.misc import cast, copy
from tripy.frontend.ops.shape_ops import concatenate
from tripy.llm.llama import _PROJECTIONS, _STACKED, _module_at
from tripy.llm.quantize import int4_group, quantize_weight, row_absmax

_FLOATS = ("float32", "float16", "bfloat16")


def load_shares(model, weights, mesh):
    """Loads ``weights`` (host tensors by the checkpoint's names) into ``model`` (a
    ``LlamaForCausalLM``) as the shares of ``mesh``'s ranks in this process; the remaining
    (replicated) weights load whole through ``model.load_state_dict``."""
    weights = dict(weights)
    if "lm_head.weight" not in weights and "model.embed_tokens.weight" in weights:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    world, ranks = mesh.size, mesh._local_ranks()
    for name, linear, sources in _sharded_linears(model):
        params = {p: [weights.pop(f"{s}.{p}") for s in sources]
                  for p in ("weight", "bias") if all(f"{s}.{p}" in weights for s in sources)}
        if "weight" not in params:
            continue  # load_state_dict below reports it missing
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


def _linear_share(model, name, linear, params, rank, world, device):
    """Rank ``rank``'s share of one Linear's parameters (each a list of the stacked projections'
    host tensors), on ``device``, quantized as the model's quant_mode says."""
    rows, cols = linear.share_ranges(rank, world)
    column = len(cols) == 1 and cols[0] == (0, linear.in_features)

    def share(sources, of_weight):
        if not column:  # row-parallel: the weight's columns, the bias whole
            (lo, hi), = cols
            return _to_device(sources[0][:, lo:hi] if of_weight else sources[0], device, model.dtype)
        pieces = [_to_device(t, device, model.dtype) for t in _rows_of_sources(sources, rows)]
        return pieces[0] if len(pieces) == 1 else concatenate(pieces, dim=0)

    out = {p: share(sources, p == "weight") for p, sources in params.items()}
    weight = out["weight"]
    if linear.quant_dtype is None or weight.dtype.name not in _FLOATS:
        for t in out.values():
            t.eval()
        return out
    mode, absmax, group = model.quant_mode, None, None
    if mode == "int4-weight-only":
        group = int4_group(linear.in_features, name + ".weight")
        (lo, hi), = cols
        if lo % group or hi % group:
            _raise_here(
                f"A row-parallel Linear over {world} ranks gives each rank {hi - lo} of its {linear.in_features} input "
                f"features, which splits its quantization groups of {group}: the share must be a multiple of the group."
            )
    elif not column:  # per-output-feature scales from the whole rows, read on the host
        absmax = copy(row_absmax(cast(params["weight"][0], model.dtype)), device)
        absmax.eval()
    weight.eval()
    out.update(quantize_weight(weight, mode, name + ".weight", absmax=absmax, group=group))
    if "bias" in out:
        out["bias"].eval()
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
