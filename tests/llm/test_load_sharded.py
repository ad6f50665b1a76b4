"""tp.llm.load(path, mesh=...) and LLM(mesh=...): a checkpoint written here, loaded (and quantized)
whole and generated from over 2 CPU ranks, against the same checkpoint loaded unsharded and the
float64 numpy model (on the dequantized weights for a quantized mode: int8, int4, float8); meshes
that cannot split the model are refused at the user's line. python -m tripy.llm --devices N: CPU
ranks, on GPUs outside torchrun the first N of this process (generating on two where there are
two), and the errors of a partial torchrun environment."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy.frontend import executable
from tripy.llm.__main__ import main, make_mesh
from tripy.llm import sharded_load
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

import llama_ref
from test_loader import write_checkpoint
from test_quantized_llama import dequantized

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])
# 4 KV heads, a vocabulary of 96 and, for int4, 256 input features in groups of 128: every dim the
# sharded model splits splits over 2 ranks, int4's groups within a rank's share.
CONFIG = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96, hidden_size=256, intermediate_size=256)


@pytest.fixture(autouse=True)
def cpu_tensors(monkeypatch):
    """The ranks are CPU ranks: the weights load on the CPU, also where the default device is a GPU."""
    monkeypatch.setattr(tp.config, "default_device", "cpu")


@pytest.fixture
def checkpoint(tmp_path):
    weights = llama_ref.random_weights(CONFIG, seed=3)
    write_checkpoint(str(tmp_path), CONFIG, weights, shards=2)
    return str(tmp_path), weights


@pytest.mark.parametrize("world, quant_mode", [(2, None), (2, "int8-weight-only"), (2, "int4-weight-only"),
                                               (4, None), (4, "int8-weight-only")])
def test_a_checkpoint_loaded_over_cpu_ranks_generates_the_unsharded_tokens(checkpoint, world, quant_mode):
    path, weights = checkpoint
    mesh = tp.DeviceMesh(["cpu"] * world)
    sharded = tp.llm.load(path, max_seq_len=32, max_batch_size=2, quant_mode=quant_mode, mesh=mesh)
    whole = tp.llm.load(path, max_seq_len=32, max_batch_size=2, quant_mode=quant_mode)
    assert sharded.mesh is mesh and sharded.generator().decode.world_size == world
    # The whole model's parameters run sharded (each rank's program slicing them) as the shares do.
    assert sharded.generate(PROMPT, 10, stop_tokens=[]) == tp.llm.LLM(whole.model, max_batch_size=2, mesh=mesh).generate(
        PROMPT, 10, stop_tokens=[])
    got = sharded.generate(PROMPT, max_new_tokens=10, stop_tokens=[])
    reference = weights if quant_mode is None else dequantized(whole.model, weights, CONFIG)
    assert got == llama_ref.greedy(reference, PROMPT, 10, CONFIG).tolist()
    assert got == whole.generate(PROMPT, max_new_tokens=10, stop_tokens=[])
    assert list(sharded.stream(PROMPT[1], max_new_tokens=10, stop_tokens=[])) == got[1]
    if quant_mode is not None:
        # Each rank's decode step reads its share of every projection and of the output head packed,
        # one weight-only product each (a share of several parts is quantized and packed as one).
        for rank in sharded.generator().decode._ranks:
            kinds = re.findall(r"^b\d+ = (\w+) '", rank.program_text, re.M)
            assert kinds.count("weight_only_dot") == 4 * CONFIG["num_hidden_layers"] + 1
            assert kinds.count("dot") == 0


def _values(t):
    return np.asarray(tp.cast(t, tp.int32) if t.dtype == tp.int4 else t)


@pytest.mark.parametrize("quant_mode", [None, "int8-weight-only", "int4-weight-only"])
def test_each_rank_holds_only_its_share_of_every_sharded_weight(checkpoint, quant_mode, monkeypatch):
    path, _ = checkpoint
    world, uploaded = 2, []
    upload = sharded_load.copy
    monkeypatch.setattr(sharded_load, "copy", lambda t, device: (uploaded.append(tuple(t.shape)), upload(t, device))[1])
    model = tp.llm.load(path, max_seq_len=32, quant_mode=quant_mode, mesh=tp.DeviceMesh(["cpu"] * world)).model
    monkeypatch.setattr(sharded_load, "copy", upload)
    whole = tp.llm.load(path, max_seq_len=32, quant_mode=quant_mode).model
    C, F, V = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    # Only the norms are whole parameters; the sharded layers hold the shares of this process's ranks.
    assert all(name.endswith("layernorm.weight") or name == "model.norm.weight" for name in model.state_dict())
    layer, whole_layer = model.model.layers[0], whole.model.layers[0]
    pairs = [(layer.self_attn.qkv_proj, whole_layer.self_attn.qkv_proj), (layer.self_attn.o_proj, whole_layer.self_attn.o_proj),
             (layer.mlp.gate_up_proj, whole_layer.mlp.gate_up_proj), (layer.mlp.down_proj, whole_layer.mlp.down_proj),
             (model.lm_head, whole.lm_head)]
    for rank in range(world):
        for linear, reference in pairs:
            share = linear.shares[rank]
            rows, cols = linear.share_ranges(rank, world)
            assert share["weight"].shape == (sum(b - a for a, b in rows), sum(b - a for a, b in cols))
            # Bit for bit the rows or columns of the whole weight's quantization (its scales, its zeros).
            for name, value in share.items():
                want = _values(getattr(reference, name))
                if name == "weight" or (name in ("weight_scale", "weight_zero_point") and want.ndim == 2):
                    column = cols == [(0, linear.in_features)]
                    want = np.concatenate([want[a:b] for a, b in rows]) if column else (
                        want[:, cols[0][0]:cols[0][1]] if name == "weight" else
                        want[:, cols[0][0] * want.shape[1] // linear.in_features:cols[0][1] * want.shape[1] // linear.in_features])
                elif name in ("weight_scale",) and cols == [(0, linear.in_features)]:
                    want = np.concatenate([want[a:b] for a, b in rows])
                assert np.array_equal(_values(value), want), (name, rank)
        table = model.model.embed_tokens.shares[rank]["weight"]
        assert table.shape == (V, C // world)
    # What went to the ranks' device: slices of the checkpoint's q, k, v, gate and up (each (F, C)),
    # o and down ((C, C), (C, F)) and embedding ((V, C)) tensors, never one whole; whole norms.
    assert F == C and not {(C, C), (V, C)} & set(uploaded) and (C // world, C) in uploaded and (C,) in uploaded
    with pytest.raises(tp.TripyException, match=r"loaded as the shares of ranks 0, 1 of a mesh of 2, so it runs only"):
        model.lm_head(tp.ones((1, C)))


def test_an_llm_made_from_a_model_takes_a_mesh(checkpoint):
    path, weights = checkpoint
    model = tp.llm.load(path, max_seq_len=32).model
    llm = tp.llm.LLM(model, mesh=tp.DeviceMesh(["cpu"] * 2))
    want = llama_ref.greedy(weights, PROMPT[:1], 8, CONFIG)[0].tolist()
    assert llm.generate(PROMPT[0], max_new_tokens=8, stop_tokens=[]) == want


def test_a_float8_model_over_two_ranks_generates_the_unsharded_tokens(checkpoint):
    # The mode of fp8 checkpoints: e4m3 weights with a scale per output feature, split with the rows.
    path, weights = checkpoint
    model = LlamaForCausalLM(LlamaConfig.from_dict(CONFIG), max_seq_len=32, quant_mode="float8")
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    got = tp.llm.LLM(model, max_batch_size=2, mesh=tp.DeviceMesh(["cpu"] * 2)).generate(PROMPT, 8, stop_tokens=[])
    assert got == llama_ref.greedy(dequantized(model, weights, CONFIG), PROMPT, 8, CONFIG).tolist()
    assert got == tp.llm.LLM(model, max_batch_size=2).generate(PROMPT, 8, stop_tokens=[])


def test_a_mesh_that_does_not_divide_the_heads_is_refused_at_the_users_line(checkpoint):
    path, _ = checkpoint
    with pytest.raises(tp.TripyException, match=r"cannot be split over the 3 ranks of the mesh: its 4 attention heads "
                                                r"are not a multiple of 3. Meshes of 1, 2 or 4 ranks split it.") as e:
        tp.llm.load(path, mesh=tp.DeviceMesh(["cpu"] * 3))
    assert "test_load_sharded.py" in str(e.value)
    model = tp.llm.load(path, max_seq_len=32).model
    with pytest.raises(tp.TripyException, match=r"its 4 attention heads are not a multiple of 8") as e:
        tp.llm.LLM(model, mesh=tp.DeviceMesh(["cpu"] * 8))
    assert "test_load_sharded.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"mesh must be a tp.DeviceMesh or None, but got: 2"):
        tp.llm.load(path, mesh=2)


def test_int4_groups_that_straddle_two_ranks_are_refused(tmp_path):
    # 64 hidden features in one group of 64: each of 2 ranks' 32 o_proj inputs would cut the group.
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    write_checkpoint(str(tmp_path), config, llama_ref.random_weights(config))
    with pytest.raises(tp.TripyException, match=r"gives each rank 32 of its 64 input features, which splits its "
                                                r"quantization groups of 64") as e:
        tp.llm.load(str(tmp_path), max_seq_len=32, quant_mode="int4-weight-only", mesh=tp.DeviceMesh(["cpu"] * 2))
    assert "test_load_sharded.py" in str(e.value)  # refused at the load, before a weight reaches a device


def test_the_command_generates_over_cpu_ranks(checkpoint, capsys):
    path, weights = checkpoint
    assert main([path, "--ids", "5,9,14", "--max-new-tokens", "6", "--device", "cpu", "--devices", "2"]) == 0
    out, err = capsys.readouterr()
    assert [int(line) for line in out.split()] == llama_ref.greedy(weights, np.array([[5, 9, 14]]), 6, CONFIG)[0].tolist()
    assert "6 tokens over 2 ranks" in err


def test_the_command_on_gpus_drives_the_first_n_outside_torchrun(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    assert make_mesh(3).devices == [tp.device("gpu:0"), tp.device("gpu:1"), tp.device("gpu:2")]


def test_the_command_with_part_of_torchruns_variables_says_how_to_start_it(checkpoint, capsys, monkeypatch):
    path, _ = checkpoint
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert main([path, "--ids", "5,9", "--device", "gpu", "--devices", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --devices 2: LOCAL_RANK is set but RANK, WORLD_SIZE are not: start one process per "
                          "GPU with torchrun --nproc-per-node 2 -m tripy.llm ..., or unset them for one process "
                          "driving 2 GPUs.") and "Traceback" not in err
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert main([path, "--ids", "5,9", "--device", "gpu", "--devices", "2"]) == 1
    assert capsys.readouterr().err.startswith("error: --devices 2 does not match the 4 processes of this job (WORLD_SIZE).")


@pytest.mark.usefixtures("two_gpus")
def test_the_command_generates_over_two_gpus_of_this_process(checkpoint, capsys, monkeypatch):
    path, weights = checkpoint
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TRIPY_CUDA_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    # Each rank's steps take their arguments on their own GPU: no copy between GPUs (through the host).
    copies = []
    monkeypatch.setattr(executable, "copy", lambda value, device: copies.append(device))
    assert main([path, "--ids", "5,9,14", "--max-new-tokens", "6", "--device", "gpu", "--devices", "2",
                 "--dtype", "float32"]) == 0
    out, err = capsys.readouterr()
    assert [int(line) for line in out.split()] == llama_ref.greedy(weights, np.array([[5, 9, 14]]), 6, CONFIG)[0].tolist()
    assert "6 tokens over 2 ranks" in err
    assert copies == []


def test_the_command_refuses_a_mesh_that_cannot_split_the_model(checkpoint, capsys):
    path, _ = checkpoint
    assert main([path, "--ids", "5,9", "--device", "cpu", "--devices", "3"]) == 1
    assert capsys.readouterr().err.startswith("error: This model cannot be split over the 3 ranks of the mesh: its 4 "
                                              "attention heads are not a multiple of 3.")
