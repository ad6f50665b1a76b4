"""tp.llm.load and python -m tripy.llm on checkpoint directories written here (config.json, sharded
safetensors with their index, a tokenizer.json), against the numpy model's greedy tokens."""

import json
import os

import numpy as np
import pytest

import tripy as tp
from tripy.llm.__main__ import main
from tripy.llm.tokenizer import Tokenizer

import llama_ref
from test_tokenizer import make_fixture


def write_checkpoint(directory, config, weights, shards=1, tokenizer=None):
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    names = sorted(weights)
    if shards == 1:
        tp.save_safetensors(weights, os.path.join(directory, "model.safetensors"))
    else:
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: weights[n] for n in names[s::shards]}
            tp.save_safetensors(part, os.path.join(directory, file))
            weight_map.update({n: file for n in part})
        with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    if tokenizer is not None:
        with open(os.path.join(directory, "tokenizer.json"), "w") as f:
            json.dump(tokenizer, f)


@pytest.fixture
def checkpoint(tmp_path):
    tokenizer = make_fixture(pre="gpt2", added_tokens=["<|end|>"])
    vocab = Tokenizer.from_dict(tokenizer).vocab_size
    config = llama_ref.tiny_config(vocab_size=vocab, eos_token_id=vocab - 1)
    weights = llama_ref.random_weights(config)
    write_checkpoint(str(tmp_path), config, weights, shards=3, tokenizer=tokenizer)
    return str(tmp_path), config, weights


def test_text_in_text_out_from_a_sharded_checkpoint(device, checkpoint):
    path, config, weights = checkpoint
    llm = tp.llm.load(path, max_seq_len=48)
    text = "the quick brown fox"
    ids = llm.tokenizer.encode(text)
    want = llama_ref.greedy(weights, np.array([ids]), 8, config)[0].tolist()
    if config["eos_token_id"] in want:  # generation stops at the end-of-sequence id
        want = want[: want.index(config["eos_token_id"]) + 1]
    assert llm.generate(text, max_new_tokens=8) == llm.tokenizer.decode(want, skip_special_tokens=True)
    assert list(llm.stream(ids, max_new_tokens=8)) == want


def test_sampling_is_repeatable_and_follows_the_seed(device, checkpoint):
    path, _, _ = checkpoint
    llm = tp.llm.load(path, max_seq_len=48)
    run = lambda seed: llm.generate([5, 9, 14], max_new_tokens=12, temperature=1.5, top_k=40, seed=seed, stop_tokens=[])
    assert run(3) == run(3)
    assert run(3) != run(4)


def test_the_command_streams_the_greedy_ids(checkpoint, capsys):
    path, config, weights = checkpoint
    before = tp.config.default_device
    assert main([path, "--ids", "5,9,14", "--max-new-tokens", "6", "--device", "cpu"]) == 0
    assert tp.config.default_device == before  # --device lasts for the command, not the process
    printed = [int(line) for line in capsys.readouterr().out.split()]
    want = llama_ref.greedy(weights, np.array([[5, 9, 14]]), 6, config)[0].tolist()
    if config["eos_token_id"] in want:
        want = want[: want.index(config["eos_token_id"]) + 1]
    assert printed == want


def test_the_command_reports_errors_without_a_traceback(checkpoint, capsys):
    path, _, _ = checkpoint
    assert main([path, "--ids", "5,9,14", "--max-new-tokens", "5000", "--device", "cpu", "--max-seq-len", "32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The prompt's 3 tokens plus max_new_tokens=5000 exceed") and "Traceback" not in err


def test_a_missing_or_misshaped_weight_names_it(tmp_path):
    config = llama_ref.tiny_config()
    weights = llama_ref.random_weights(config)
    del weights["model.layers.1.mlp.down_proj.weight"]
    write_checkpoint(str(tmp_path), config, weights)
    with pytest.raises(tp.TripyException, match="model.layers.1.mlp.down_proj.weight"):
        tp.llm.load(str(tmp_path))
    weights = llama_ref.random_weights(config)
    weights["model.norm.weight"] = weights["model.norm.weight"][:10]
    write_checkpoint(str(tmp_path), config, weights)
    with pytest.raises(tp.TripyException, match=r"model.norm.weight.*\(64,\).*\(10,\)|model.norm.weight.*\(10,\).*\(64,\)"):
        tp.llm.load(str(tmp_path))


def test_top_k_of_one_is_greedy_at_any_temperature(device, checkpoint):
    path, _, _ = checkpoint
    llm = tp.llm.load(path, max_seq_len=48)
    greedy = llm.generate([5, 9, 14], max_new_tokens=10, stop_tokens=[])
    assert llm.generate([5, 9, 14], max_new_tokens=10, temperature=3.0, top_k=1, seed=11, stop_tokens=[]) == greedy


def test_loading_in_another_dtype_converts_the_weights_once(checkpoint):
    path, config, weights = checkpoint
    llm = tp.llm.load(path, dtype=tp.float16, max_seq_len=48)
    assert all(t.dtype == tp.float16 for t in llm.model.state_dict().values())
    prompt = np.array([[5, 9, 14, 3]])
    logits, _ = llm.model(tp.Tensor(prompt.astype(np.int32)), tp.Tensor(np.array([0], np.int32)), llm.model.empty_caches(1))
    want = llama_ref.logits(weights, prompt, config)[:, -1]
    got = np.asarray(tp.cast(logits, tp.float32))
    assert np.abs(got - want).max() < 0.02 * np.abs(want).max()


@pytest.mark.parametrize(
    "dtype_keys, want",
    [
        ({"dtype": "float16"}, "float16"),  # transformers 5's name
        ({"torch_dtype": "float16"}, "float16"),  # earlier releases'
        ({"dtype": "float16", "torch_dtype": "float32"}, "float16"),
        ({}, "float16"),  # neither: the dtype the weights are stored in
    ],
)
def test_the_compute_dtype_follows_the_config_else_the_stored_weights(tmp_path, dtype_keys, want):
    config = llama_ref.tiny_config(**dtype_keys)
    weights = {k: tp.cast(tp.Tensor(v), tp.float16) for k, v in llama_ref.random_weights(config).items()}
    write_checkpoint(str(tmp_path), config, weights)
    llm = tp.llm.load(str(tmp_path), max_seq_len=16)
    assert llm.model.dtype == getattr(tp, want)
    assert all(t.dtype == getattr(tp, want) for t in llm.model.state_dict().values())
