"""A tiny Llama sharded over 2 and 4 CPU ranks (tp.compile with a tp.DeviceMesh: heads split over
the ranks, each rank's KV caches holding its heads) against the float64 numpy model of llama_ref.py
and against the same model compiled whole: a prefill, then decode steps over the per-rank caches."""

import numpy as np
import pytest

import tripy as tp
from tripy.llm.generate import Generator
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

import llama_ref

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])


@pytest.fixture(autouse=True)
def cpu_tensors(monkeypatch):
    """The ranks here are CPU ranks: their arguments and weights are made on the CPU, also where the
    default device is a GPU."""
    monkeypatch.setattr(tp.config, "default_device", "cpu")


def build(config_dict, max_seq_len=16):
    weights = llama_ref.random_weights(config_dict, seed=1)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config_dict), max_seq_len=max_seq_len)
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    return model, weights


def compile_step(model, world, batch):
    """The model's step (tokens, pos, caches...) -> logits, compiled over `world` CPU ranks."""
    n = model.config.num_hidden_layers

    def step(tokens, pos, *caches):
        logits, _ = model(tokens, pos, list(caches))
        return logits

    cache = tp.InputInfo(model.cache_shape(batch, world), dtype=tp.float32, donate=True)
    args = [tp.InputInfo((batch, (1, 4, 8)), dtype=tp.int32), tp.InputInfo((1,), dtype=tp.int32)] + [cache] * (2 * n)
    mesh = tp.DeviceMesh(["cpu"] * world) if world > 1 else None
    return tp.compile(step, args=args, mesh=mesh)


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_llama_prefill_and_decode_match_numpy_and_the_whole_model(world):
    # 4 KV heads and a vocabulary of 96, so every sharded dim splits over 4 ranks.
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    model, weights = build(config)
    layers = config["num_hidden_layers"]
    sharded, whole = compile_step(model, world, 2), compile_step(model, 1, 2)
    assert sharded.world_size == world
    # Each rank's caches: its own tensors, updated in place by every call.
    rank_caches = [model.empty_caches(2, world) for _ in range(world)]
    per_arg = [[rank_caches[r][i] for r in range(world)] for i in range(2 * layers)]
    whole_caches = model.empty_caches(2)

    def call(exe, tokens, pos, caches):
        return np.asarray(exe(tp.Tensor(tokens.astype(np.int32)), tp.Tensor(np.array([pos], np.int32)), *caches))

    got = call(sharded, PROMPT[:, :4], 0, per_arg)
    want = llama_ref.logits(weights, PROMPT[:, :4], config)[:, -1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(got, call(whole, PROMPT[:, :4], 0, whole_caches), rtol=1e-5, atol=1e-5 * np.abs(want).max())
    for pos in range(4, PROMPT.shape[1]):
        got = call(sharded, PROMPT[:, pos : pos + 1], pos, per_arg)
        want = llama_ref.logits(weights, PROMPT[:, : pos + 1], config)[:, -1]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # Rank r's cache holds KV heads [r * 4 / world, (r + 1) * 4 / world) of the whole model's.
    call(whole, PROMPT[:, 4:], 4, whole_caches)
    share = 4 // world
    for r in range(world):
        np.testing.assert_allclose(
            np.asarray(rank_caches[r][0]), np.asarray(whole_caches[0])[:, :, r * share : (r + 1) * share], rtol=1e-5, atol=1e-5
        )


def test_a_saved_sharded_llama_step_decodes_as_the_unsaved_one(tmp_path):
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    model, weights = build(config)
    world, layers = 2, config["num_hidden_layers"]
    exe = compile_step(model, world, 2)
    exe.save(tmp_path / "step.tpy")
    back = tp.Executable.load(tmp_path / "step.tpy", mesh=tp.DeviceMesh(["cpu"] * world))
    runs = []
    for step in (exe, back):
        rank_caches = [model.empty_caches(2, world) for _ in range(world)]
        caches = [[rank_caches[r][i] for r in range(world)] for i in range(2 * layers)]
        logits = [np.asarray(step(tp.Tensor(PROMPT[:, :4].astype(np.int32)), tp.Tensor(np.array([0], np.int32)), *caches))]
        for pos in range(4, PROMPT.shape[1]):  # decode steps over the caches the loaded ranks update in place
            logits.append(np.asarray(step(tp.Tensor(PROMPT[:, pos : pos + 1].astype(np.int32)),
                                          tp.Tensor(np.array([pos], np.int32)), *caches)))
        runs.append(logits)
    for saved, unsaved in zip(runs[1], runs[0]):
        np.testing.assert_array_equal(saved, unsaved)
    want = llama_ref.logits(weights, PROMPT, config)[:, -1]
    np.testing.assert_allclose(runs[1][-1], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_cpu_mesh_traces_the_model_for_the_cpu_whatever_the_default_device(monkeypatch):
    # Where the default device is a GPU, the rotary positions (iota + pos) and the tensors the
    # forward makes must still be the CPU ranks' own.
    monkeypatch.setattr(tp.config, "default_device", "gpu:0")
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    weights = llama_ref.random_weights(config, seed=1)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config), max_seq_len=16)
    model.load_state_dict({k: tp.Tensor(v, device="cpu") for k, v in weights.items()})
    exe = compile_step(model, 2, 1)
    caches = [[tp.Tensor(np.zeros(model.cache_shape(1, 2), np.float32), device="cpu") for _ in range(2)]
              for _ in range(2 * config["num_hidden_layers"])]
    got = np.asarray(exe(tp.Tensor(PROMPT[:1, :4].astype(np.int32), device="cpu"),
                         tp.Tensor(np.array([0], np.int32), device="cpu"), *caches))
    want = llama_ref.logits(weights, PROMPT[:1, :4], config)[:, -1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_model_whose_heads_do_not_split_is_refused_naming_the_layer():
    config = llama_ref.tiny_config(num_attention_heads=4, num_key_value_heads=2, vocab_size=96)
    model, _ = build(config)
    with pytest.raises(tp.TripyException, match=r"KV heads of this model cannot be split over 4 ranks"):
        model.cache_shape(1, 4)
    def step(tokens, pos, *caches):
        return model(tokens, pos, list(caches))[0]

    cache = tp.InputInfo((1, 16, 1, 16), dtype=tp.float32)
    args = [tp.InputInfo((1, 4), dtype=tp.int32), tp.InputInfo((1,), dtype=tp.int32)] + [cache] * 4
    with pytest.raises(tp.TripyException, match=r"The 2 KV heads of this model cannot be split over 4 ranks"):
        tp.compile(step, args=args, mesh=tp.DeviceMesh(["cpu"] * 4))


@pytest.mark.parametrize("cache_world", [1, 4])
def test_caches_made_for_another_number_of_ranks_are_refused_naming_the_users_line(cache_world):
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    model, _ = build(config)

    def step(tokens, pos, *caches):
        return model(tokens, pos, list(caches))[0]

    cache = tp.InputInfo(model.cache_shape(1, cache_world), dtype=tp.float32)
    args = [tp.InputInfo((1, 4), dtype=tp.int32), tp.InputInfo((1,), dtype=tp.int32)] + [cache] * 4
    made_for = "1 rank" if cache_world == 1 else "4 ranks"
    with pytest.raises(tp.TripyException, match=rf"The KV caches hold {4 // cache_world} KV heads \(made for {made_for}\), "
                                                r"but each of the 2 ranks of this compile holds 2 of the model's 4: make "
                                                r"them with model.cache_shape\(batch, 2\)") as e:
        tp.compile(step, args=args, mesh=tp.DeviceMesh(["cpu"] * 2))
    assert "test_llama_sharded.py" in str(e.value)


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_generation_gives_the_tokens_of_the_whole_model_and_numpy(world):
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    model, weights = build(config)
    sharded = Generator(model, max_batch_size=2, mesh=tp.DeviceMesh(["cpu"] * world))
    assert sharded.prefill.world_size == world and sharded.decode.world_size == world
    got = sharded.generate(PROMPT, 10)
    assert got == llama_ref.greedy(weights, PROMPT, 10, config).tolist()
    assert got == Generator(model, max_batch_size=2).generate(PROMPT, 10)
    # One sequence through the same executables (fresh caches), and a stop token.
    assert sharded.generate(PROMPT[1], 10) == got[1]
    stop = got[0][4]
    assert sharded.generate(PROMPT[0], 10, stop_tokens=[stop]) == got[0][: got[0].index(stop) + 1]


def test_sharded_sampling_draws_what_the_whole_model_draws():
    # Sampled tokens depend on the logits' bits only through the sampling threshold: with weights
    # this sharp, the sharded and the whole model's logits (summed in another order) draw alike.
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    model, _ = build(config)
    options = dict(temperature=0.8, top_k=20, top_p=0.9)
    sharded = Generator(model, mesh=tp.DeviceMesh(["cpu"] * 2), **options).generate(PROMPT[0], 10, seed=7)
    assert sharded == Generator(model, **options).generate(PROMPT[0], 10, seed=7)
    assert sharded == Generator(model, mesh=tp.DeviceMesh(["cpu"] * 2), **options).generate(PROMPT[0], 10, seed=7)


def test_a_generator_over_a_mesh_that_splits_no_heads_is_refused():
    config = llama_ref.tiny_config(num_attention_heads=4, num_key_value_heads=2, vocab_size=96)
    model, _ = build(config)
    with pytest.raises(tp.TripyException, match=r"The 2 KV heads of this model cannot be split over 4 ranks") as e:
        Generator(model, mesh=tp.DeviceMesh(["cpu"] * 4))
    assert "test_llama_sharded.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"mesh must be a tp.DeviceMesh or None"):
        Generator(model, mesh=["cpu", "cpu"])
