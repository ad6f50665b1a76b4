"""Llama-family decoders built from config.json, against the float64 numpy model of llama_ref.py:
logits, cached decoding against full recompute, greedy generation, rope scaling, Qwen2's biases,
tied embeddings, and the configurations that are refused."""

import numpy as np
import pytest

import tripy as tp
from tripy.llm.generate import Generator
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

import llama_ref

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])


def build(config_dict, max_seq_len=32, seed=0):
    weights = llama_ref.random_weights(config_dict, seed=seed)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config_dict), max_seq_len=max_seq_len)
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    return model, weights


def last_logits(model, tokens, pos=0, caches=None):
    caches = caches or model.empty_caches(tokens.shape[0])
    logits, caches = model(tp.Tensor(tokens.astype(np.int32)), tp.Tensor(np.array([pos], np.int32)), caches)
    return np.asarray(tp.cast(logits, tp.float32)), caches


VARIANTS = {
    "llama": {},
    "llama3-rope-scaling": {
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 16},
    },
    "linear-rope-scaling": {"rope_scaling": {"type": "linear", "factor": 2.0}},
    # transformers 5's form: theta and scaling in one object.
    "rope-parameters": {
        "rope_theta": 1.0,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
    },
    "qwen2-biases": {"model_type": "qwen2"},
    "tied-embeddings": {"tie_word_embeddings": True},
    "head-dim-not-hidden-over-heads": {"head_dim": 8},
    "multi-query": {"num_key_value_heads": 1},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_last_token_logits_match_numpy(device, variant):
    config = llama_ref.tiny_config(**VARIANTS[variant])
    model, weights = build(config)
    got, _ = last_logits(model, PROMPT)
    want = llama_ref.logits(weights, PROMPT, config)[:, -1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_decoding_over_the_cache_equals_full_recompute(device):
    config = llama_ref.tiny_config()
    model, weights = build(config)
    seq = PROMPT
    _, caches = last_logits(model, seq[:, :4])
    for pos in range(4, seq.shape[1]):  # one token at a time after a 4-token prefill
        got, caches = last_logits(model, seq[:, pos : pos + 1], pos, caches)
        want = llama_ref.logits(weights, seq[:, : pos + 1], config)[:, -1]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_greedy_generation_matches_numpy(device):
    config = llama_ref.tiny_config()
    model, weights = build(config)
    generator = Generator(model, max_batch_size=2)
    got = generator.generate(PROMPT, 12)
    assert got == llama_ref.greedy(weights, PROMPT, 12, config).tolist()
    # One sequence, and a batch of one through the same executables: a profile of its own, tuned
    # for one row; batches of 2 up to max_batch_size take the other.
    assert generator.generate(PROMPT[1], 12) == got[1]
    for step in (generator.prefill, generator.decode):
        bounds = [p["tokens"].shape_bounds for p in step.optimization_profiles]
        assert [(b.min[0], b.opt[0], b.max[0]) for b in bounds] == [(1, 1, 1), (2, 2, 2)]


def test_generation_stops_at_a_stop_token(device):
    config = llama_ref.tiny_config()
    model, weights = build(config)
    full = llama_ref.greedy(weights, PROMPT[:1], 12, config)[0].tolist()
    stop = full[5]
    got = Generator(model).generate(PROMPT[0], 12, stop_tokens=[stop])
    assert got == full[: full.index(stop) + 1]


def test_bfloat16_model_follows_the_float32_one(device):
    config = llama_ref.tiny_config()
    weights = llama_ref.random_weights(config, sharpen=1.0)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config), dtype=tp.bfloat16, max_seq_len=16)
    model.load_state_dict({k: tp.cast(tp.Tensor(v), tp.bfloat16) for k, v in weights.items()})
    got, _ = last_logits(model, PROMPT)
    want = llama_ref.logits(weights, PROMPT, config)[:, -1]
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max()


def test_prompt_past_the_context_is_an_error_naming_the_call():
    model, _ = build(llama_ref.tiny_config(), max_seq_len=8)
    generator = Generator(model)
    with pytest.raises(tp.TripyException, match=r"prompt's 6 tokens plus max_new_tokens=3 exceed .* 8 positions") as e:
        generator.generate(PROMPT[0], 3)
    assert "test_llama.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"Token ids must be in \[0, 97\)"):
        generator.generate(np.array([1, 200]), 2)
    with pytest.raises(tp.TripyException, match="at most 1"):
        generator.generate(PROMPT, 1)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "gpt2"}, "model_type 'gpt2' is not a Llama-family decoder"),
        ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not supported"),
        ({"num_key_value_heads": 3}, r"num_key_value_heads \(3\) must divide num_attention_heads \(4\)"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling of type 'yarn' is not supported"),
        ({"hidden_size": -1}, "'hidden_size' must be a positive integer"),
    ],
)
def test_unsupported_configurations_are_refused(change, message):
    with pytest.raises(tp.TripyException, match=message):
        LlamaConfig.from_dict(llama_ref.tiny_config(**change))


def test_sliding_window_is_refused_only_past_the_window(tmp_path):
    config = LlamaConfig.from_dict(llama_ref.tiny_config(model_type="mistral", sliding_window=16))
    LlamaForCausalLM(config, max_seq_len=16)  # within the window every position is seen
    with pytest.raises(tp.TripyException, match="sliding window of 16 positions"):
        LlamaForCausalLM(config, max_seq_len=32)


def test_config_from_a_checkpoint_directory(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps(llama_ref.tiny_config(eos_token_id=[2, 7])))
    config = LlamaConfig.from_file(str(tmp_path))
    assert (config.head_dim, config.eos_token_id) == (16, [2, 7])
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(tp.TripyException, match="is not valid JSON"):
        LlamaConfig.from_file(str(tmp_path))


@pytest.mark.parametrize("head_dim", [64, 128])
def test_batched_greedy_decoding_with_llama_3_heads_matches_numpy(device, head_dim):
    # Llama 3's attention shapes (32 query heads over 8 key/value heads of 64 for 1B, 128 for 8B)
    # on a narrow model, eight sequences at once: every step of every sequence against full recompute.
    config = llama_ref.tiny_config(hidden_size=128, num_attention_heads=32, num_key_value_heads=8, head_dim=head_dim,
                                   intermediate_size=256, vocab_size=211)
    model, weights = build(config, max_seq_len=40)
    prompt = np.random.default_rng(5).integers(0, 211, (8, 24))
    got = Generator(model, max_batch_size=8).generate(prompt, 6)
    assert got == llama_ref.greedy(weights, prompt, 6, config).tolist()
