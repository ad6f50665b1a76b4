"""tp.llm.load(path, mesh=...) of a pre-quantized checkpoint (GPTQ and AWQ int4, fp8 with
weight_scale; written as test_prequantized.py writes them) over 2 and 4 CPU ranks: each rank holds
only its share of every projection, taken from the tensors repacked on the host (bit for bit the
whole load's quantized tensors split), never a whole quantized weight on its device; the greedy
tokens are the unsharded model's and numpy's on the dequantized weights. A row-parallel int4 share
that would split a quantization group is refused at the user's line, naming the layer."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy.llm import sharded_load

import llama_ref
from test_prequantized import _fp8_checkpoint, _int4_checkpoint

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])
# 4 KV heads, a vocabulary of 96, 128 hidden and 256 feed-forward features: every dim the sharded
# model splits splits over 2 and 4 ranks, o_proj's 32 input features a rank (of 4) hold whole groups
# of 32, down_proj's 64 whole groups of 32 or 64.
CONFIG = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96, hidden_size=128, intermediate_size=256)
QWEN2 = dict(CONFIG, model_type="qwen2")  # q, k and v have biases


@pytest.fixture(autouse=True)
def cpu_tensors(monkeypatch):
    """The ranks are CPU ranks: the weights load on the CPU, also where the default device is a GPU."""
    monkeypatch.setattr(tp.config, "default_device", "cpu")


def _checkpoint(path, method, config=CONFIG, group=32, input_scales=True):
    """A pre-quantized checkpoint in ``method``'s layout and the float64 weights it dequantizes to
    (fp8: with per-tensor input scales unless ``input_scales`` is false)."""
    if method == "fp8":
        config, deq, _ = _fp8_checkpoint(path, lambda n: (n,), input_scales=input_scales, config=config)
    else:
        config, deq, _ = _int4_checkpoint(path, method, group, config=config)
    return config, deq


def _uploads(monkeypatch):
    """The (shape, dtype name) of every tensor the sharded load copies to a rank's device."""
    uploaded, upload = [], sharded_load.copy
    monkeypatch.setattr(sharded_load, "copy",
                        lambda t, device: (uploaded.append((tuple(t.shape), t.dtype.name)), upload(t, device))[1])
    return uploaded


def _projections(model):
    """The decoder layers' sharded projections of ``model``, by their names."""
    for i, layer in enumerate(model.model.layers):
        for name in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"):
            module = layer
            for attr in name.split("."):
                module = getattr(module, attr)
            yield f"model.layers.{i}.{name}", module


def _values(t):
    """A tensor's values in numpy: int4 as int32, float8 and bfloat16 as float32 (exactly)."""
    if t.dtype in (tp.int4, tp.float8, tp.bfloat16):
        t = tp.cast(t, tp.int32 if t.dtype == tp.int4 else tp.float32)
    return np.asarray(t)


def _split(whole, name, linear, rank, world):
    """Rank ``rank``'s share of a whole parameter (numpy) of ``linear``: rows of a column-parallel
    layer's parts; a row-parallel layer's input features of the weight, its groups of 2-D scales and
    zero points, and the rest whole."""
    rows, cols = linear.share_ranges(rank, world)
    if cols == [(0, linear.in_features)]:
        return whole if whole.ndim == 0 else np.concatenate([whole[a:b] for a, b in rows])
    (lo, hi), = cols
    if name == "weight":
        return whole[:, lo:hi]
    if whole.ndim == 2:
        group = linear.in_features // whole.shape[1]
        return whole[:, lo // group : hi // group]
    return whole


@pytest.mark.parametrize("method, world, config, input_scales", [
    ("gptq", 2, CONFIG, False), ("gptq", 4, CONFIG, False), ("awq", 2, QWEN2, False), ("awq", 4, CONFIG, False),
    ("fp8", 2, CONFIG, False), ("fp8", 4, QWEN2, True),
], ids=["gptq-2", "gptq-4", "awq-qwen2-2", "awq-4", "fp8-2", "fp8-input-scales-qwen2-4"])
def test_a_prequantized_checkpoint_loaded_over_cpu_ranks_generates_the_unsharded_tokens(tmp_path, method, world,
                                                                                       config, input_scales):
    config, deq = _checkpoint(str(tmp_path), method, config, input_scales=input_scales)
    mesh = tp.DeviceMesh(["cpu"] * world)
    sharded = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, dtype=tp.float32, mesh=mesh)
    whole = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, dtype=tp.float32)
    assert sharded.model.quant_mode == whole.model.quant_mode
    got = sharded.generate(PROMPT, max_new_tokens=10, stop_tokens=[])
    assert got == whole.generate(PROMPT, max_new_tokens=10, stop_tokens=[])
    if not input_scales:  # (numpy's model does not quantize the projections' inputs)
        assert got == llama_ref.greedy(deq, PROMPT, 10, config).tolist()
    if method != "fp8":
        # Each rank's decode step reads its share of every projection packed: one weight-only product
        # a projection (q, k and v's rows of the share packed as one), the float output head one GEMM.
        for rank in sharded.generator().decode._ranks:
            kinds = re.findall(r"^b\d+ = (\w+) '", rank.program_text, re.M)
            assert kinds.count("weight_only_dot") == 4 * config["num_hidden_layers"]
            assert kinds.count("dot") == 1


@pytest.mark.parametrize("method, world, dtype", [
    ("gptq", 2, tp.float32), ("awq", 4, tp.float32), ("gptq", 2, tp.bfloat16), ("fp8", 2, tp.float32),
    ("fp8", 4, tp.bfloat16),
])
def test_each_rank_holds_its_share_of_the_repacked_tensors_bit_for_bit(tmp_path, monkeypatch, method, world, dtype):
    _checkpoint(str(tmp_path), method)
    upload = sharded_load.copy
    uploaded = _uploads(monkeypatch)
    model = tp.llm.load(str(tmp_path), max_seq_len=32, dtype=dtype, mesh=tp.DeviceMesh(["cpu"] * world)).model
    monkeypatch.setattr(sharded_load, "copy", upload)
    whole = tp.llm.load(str(tmp_path), max_seq_len=32, dtype=dtype).model
    # Only the norms are whole parameters; the sharded layers hold the shares of this process's ranks.
    assert all(name.endswith("layernorm.weight") or name == "model.norm.weight" for name in model.state_dict())
    held = {"weight", "weight_scale", "input_scale" if method == "fp8" else "weight_zero_point"}
    quantized = 0
    for (name, linear), (_, reference) in zip(_projections(model), _projections(whole)):
        for rank in range(world):
            share = linear.shares[rank]
            assert set(share) == held
            if method != "fp8":  # the int4 weight a view of the share's packed bytes, as a load-time share's is
                assert share["weight"].dtype == tp.int4 and not share["weight"]._node.is_evaluated
            for param, value in share.items():
                assert value.dtype == getattr(reference, param).dtype, (name, param)
                want = _split(_values(getattr(reference, param)), param, linear, rank, world)
                assert np.array_equal(_values(value), want), (name, param, rank)
        quantized += linear.out_features * linear.in_features // (2 if method != "fp8" else 1)
    # What went to the ranks' devices of each projection: its shares, which add up to the whole
    # quantized weight once (each of the world ranks a 1/world of it), never one whole weight.
    codes = [shape for shape, dtype_name in uploaded if dtype_name in ("int8", "float8")]
    assert sum(int(np.prod(shape)) for shape in codes) == quantized
    largest = max(linear.out_features * linear.in_features for _, linear in _projections(model)) // world
    assert max(int(np.prod(shape)) for shape in codes) <= largest


@pytest.mark.parametrize("method, group, world, layer, share, features", [
    ("gptq", -1, 2, "self_attn.o_proj", 64, 128),  # one group of all 128 input features, per output feature
    ("awq", 64, 4, "self_attn.o_proj", 32, 128),
])
def test_an_int4_row_parallel_share_that_splits_a_group_is_refused(tmp_path, monkeypatch, method, group, world, layer,
                                                                    share, features):
    _checkpoint(str(tmp_path), method, group=group)
    uploaded = _uploads(monkeypatch)
    whole_group = features if group == -1 else group
    with pytest.raises(tp.TripyException, match=re.escape(
            f"model.layers.0.{layer}: a row-parallel Linear over {world} ranks gives each rank {share} of its "
            f"{features} input features, which splits its quantization groups of {whole_group}")) as e:
        tp.llm.load(str(tmp_path), max_seq_len=32, mesh=tp.DeviceMesh(["cpu"] * world))
    assert "test_load_sharded_prequantized.py" in str(e.value)
    assert uploaded == []  # refused before any weight reached a rank's device
    # Loaded whole, the same checkpoint runs.
    assert tp.llm.load(str(tmp_path), max_seq_len=32).model.quant_mode == "int4-weight-only"
