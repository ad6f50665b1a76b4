"""Quantized Llama models (tp.llm.load(path, quant_mode=...), LlamaForCausalLM's quant_mode:
int8 and int4 weight-only, float8 weights): the quantizer's error bound, the quantized model's
logits and greedy tokens against the float64 numpy model run on the same dequantized weights,
compiled decode steps reading packed weights, and the errors for a bad mode or features no int4
group divides."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy import _C
from tripy.llm.generate import Generator
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

import llama_ref
from test_loader import write_checkpoint

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])
MODES = ["int8-weight-only", "int4-weight-only"]
LOAD_MODES = MODES + ["float8"]  # what tp.llm.load quantizes a float checkpoint in
# The merged projection -> the checkpoint's parameters it stacks, as LlamaForCausalLM stacks them.
PARTS = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "self_attn.o_proj": ("self_attn.o_proj",),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
    "mlp.down_proj": ("mlp.down_proj",),
}


def _np(t):
    return np.array(tp.cast(t, tp.float32).tolist(), np.float64)


def _dequantize(lin):
    """A quantized Linear's weight as numpy computes it: (q - zero_point) * scale, scales per output
    feature (int8, float8) or per group of input features (int4)."""
    q, s = _np(lin.weight), _np(lin.weight_scale)
    if s.ndim == 1:
        return q * s[:, None]
    group = q.shape[1] // s.shape[1]
    z = _np(lin.weight_zero_point)
    return (q - np.repeat(z, group, axis=1)) * np.repeat(s, group, axis=1)


def dequantized(model, weights, config):
    """`weights` with each quantized projection (and a quantized output head: a tied one as its
    own `lm_head.weight`) replaced by what the model holds, dequantized in numpy."""
    out = dict(weights)
    for i, layer in enumerate(model.model.layers):
        for merged, parts in PARTS.items():
            lin = layer
            for attr in merged.split("."):
                lin = getattr(lin, attr)
            w = _dequantize(lin)
            rows = np.cumsum([weights[f"model.layers.{i}.{p}.weight"].shape[0] for p in parts])[:-1]
            for p, part in zip(parts, np.split(w, rows)):
                out[f"model.layers.{i}.{p}.weight"] = part
    if model.lm_head.quant_dtype is not None:
        out["lm_head.weight"] = _dequantize(model.lm_head)
    return out


def build(config, mode, max_seq_len=32):
    weights = llama_ref.random_weights(config)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config), max_seq_len=max_seq_len, quant_mode=mode)
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    return model, weights


@pytest.mark.parametrize("mode", MODES)
def test_quantized_weights_stay_within_half_a_step(mode):
    config = llama_ref.tiny_config()
    model, weights = build(config, mode)
    deq = dequantized(model, weights, config)
    lin = model.model.layers[0].mlp.down_proj
    assert lin.weight.dtype == (tp.int8 if mode == "int8-weight-only" else tp.int4)
    for name, w in weights.items():
        if ".layers." in name and name.endswith("proj.weight"):
            err = np.abs(deq[name] - w)
            assert deq[name] is not w and err.max() > 0, name
            step = np.abs(w).max() / 127 if mode == "int8-weight-only" else (w.max() - w.min()) / 15
            assert err.max() <= 0.5 * step * 1.01 + 1e-6, name
    # The output head is quantized in the same form, within the same bound; embeddings and norms
    # keep the model's dtype.
    assert model.lm_head.weight.dtype == lin.weight.dtype and model.model.embed_tokens.weight.dtype == tp.float32
    w = weights["lm_head.weight"]
    step = np.abs(w).max() / 127 if mode == "int8-weight-only" else (w.max() - w.min()) / 15
    assert 0 < np.abs(deq["lm_head.weight"] - w).max() <= 0.5 * step * 1.01 + 1e-6


@pytest.mark.parametrize("mode", LOAD_MODES)
def test_logits_match_numpy_on_the_dequantized_weights(device, mode):
    config = llama_ref.tiny_config()
    model, weights = build(config, mode)
    caches = model.empty_caches(PROMPT.shape[0])
    logits, _ = model(tp.Tensor(PROMPT.astype(np.int32)), tp.Tensor(np.array([0], np.int32)), caches)
    want = llama_ref.logits(dequantized(model, weights, config), PROMPT, config)[:, -1]
    got = np.asarray(tp.cast(logits, tp.float32))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # Quantization moves the logits (these sharpened random weights amplify int4's and float8's
    # steps; int8's stay near the float model's).
    float_logits = llama_ref.logits(weights, PROMPT, config)[:, -1]
    assert np.abs(got - float_logits).max() > 0
    if mode == "int8-weight-only":
        assert np.abs(got - float_logits).max() < 0.1 * np.abs(float_logits).max()


@pytest.mark.parametrize("mode", LOAD_MODES)
def test_greedy_decoding_reads_packed_weights_and_matches_numpy(device, mode, tmp_path):
    config = llama_ref.tiny_config()
    weights = llama_ref.random_weights(config)
    write_checkpoint(str(tmp_path), config, weights)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, quant_mode=mode)
    got = llm.generate(PROMPT, max_new_tokens=10, stop_tokens=[])
    assert got == llama_ref.greedy(dequantized(llm.model, weights, config), PROMPT, 10, config).tolist()
    # Every projection of the compiled decode step and the output head is a weight-only product.
    text = llm.generator().decode._impl.program_text
    kinds = re.findall(r"^b\d+ = (\w+) '", text, re.M)
    layers = config["num_hidden_layers"]
    assert kinds.count("weight_only_dot") == 4 * layers + 1
    # On the CPU the products before the norms (qkv, gate/up, the head) normalize their x, and o and
    # down add the residual: no kernel of the step is a norm's or a residual's.
    if device == "cpu":
        assert text.count("norm = true") == 2 * layers + 1
        assert text.count("residual = true") == 2 * layers


def test_an_int4_prefill_past_the_products_rows_dequantizes_each_weight_in_one_kernel(monkeypatch, tmp_path):
    """A prefill compiled with the weight-only product off: each projection's weight comes from one
    fused kernel reading the packed bytes, the scales and the zero points, then the GEMM; no int4 or
    broadcast temporaries, and one weight at a time in the arena (not every layer's at once). Greedy
    tokens still match numpy."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_DOT", "0")
    config = llama_ref.tiny_config(num_hidden_layers=4)
    weights = llama_ref.random_weights(config)
    write_checkpoint(str(tmp_path), config, weights)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, quant_mode="int4-weight-only")
    got = llm.generate(PROMPT, max_new_tokens=6, stop_tokens=[])
    assert got == llama_ref.greedy(dequantized(llm.model, weights, config), PROMPT, 6, config).tolist()
    text = llm.generator().prefill._impl.program_text
    assert "fused_broadcast" not in text and not re.search(r"= temp i4\[", text)
    kinds = re.findall(r"^b\d+ = (\w+) '", text, re.M)
    assert kinds.count("weight_only_dot") == 0 and kinds.count("dot") == 4 * config["num_hidden_layers"] + 1
    # Twice the float bytes of one layer's projections bound the arena (weights and activations of
    # these tiny sizes); every layer's weights at once would be four times those bytes.
    layer = sum(w.size for n, w in weights.items() if n.startswith("model.layers.0.") and n.endswith("proj.weight")) * 4
    arena = int(re.search(r"^arena (\d+) bytes", text, re.M).group(1))
    assert arena < 2 * layer, (arena, layer)


def test_a_bad_mode_and_features_no_int4_group_divides_are_errors(tmp_path):
    config = llama_ref.tiny_config()
    with pytest.raises(tp.TripyException, match=r"quant_mode must be one of 'int8-weight-only', 'int4-weight-only'"):
        LlamaForCausalLM(LlamaConfig.from_dict(config), quant_mode="int3")
    config = llama_ref.tiny_config(intermediate_size=100)  # down_proj's 100 input features
    write_checkpoint(str(tmp_path), config, llama_ref.random_weights(config))
    with pytest.raises(tp.TripyException, match=r"model.layers.0.mlp.down_proj.weight: int4 .* none of them divides 100"):
        tp.llm.load(str(tmp_path), quant_mode="int4-weight-only")
    with pytest.raises(tp.TripyException, match="quant_mode must be one of"):
        tp.llm.load(str(tmp_path), quant_mode="fp4")


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_an_int4_model_holds_its_projections_packed_once_on_the_gpu(tmp_path):
    """The model holds each int4 projection two values a byte, and its compiled steps read those
    bytes in place: against the same model in bfloat16 (its executables' workspaces and arenas
    alike), loading it saves most of the projections' bytes, and a second generator (its own prefill
    and decode executables) adds no copy."""
    import gc

    config = llama_ref.tiny_config(hidden_size=512, intermediate_size=1536, num_attention_heads=8,
                                   num_key_value_heads=4, num_hidden_layers=8, torch_dtype="bfloat16")
    weights = llama_ref.random_weights(config)
    write_checkpoint(str(tmp_path), config, weights)
    projections = sum(w.size for n, w in weights.items() if ".layers." in n and n.endswith("proj.weight"))

    def held(**kwargs):
        # Eager mode's cached programs keep a few MiB of scratch each (quantizing runs a score of
        # them): what the model holds is measured without them.
        _C._clear_eager_cache()
        gc.collect()
        before = _C._cuda_bytes_in_use()
        llm = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, device="gpu", **kwargs)
        _C._clear_eager_cache()
        return llm, _C._cuda_bytes_in_use() - before

    bf16, bf16_bytes = held()
    del bf16
    llm, int4_bytes = held(quant_mode="int4-weight-only")
    # bfloat16 projections against packed bytes plus bfloat16 scales and zero points per group of 128.
    saving = projections * 2 - (projections // 2 + projections // 128 * 4)
    assert bf16_bytes - int4_bytes > 0.8 * saving, (bf16_bytes, int4_bytes, saving)
    assert llm.generate(PROMPT, max_new_tokens=4, stop_tokens=[])
    before = _C._cuda_bytes_in_use()
    assert llm.generate(PROMPT, max_new_tokens=4, temperature=0.7, top_k=5, stop_tokens=[])
    grown = _C._cuda_bytes_in_use() - before
    assert grown < 0.75 * (projections // 2), (grown, projections // 2)


def test_a_float8_model_quantizes_float_weights_per_output_feature(device):
    """quant_mode="float8" (the mode of fp8 checkpoints, tests/llm/test_prequantized.py) takes float
    weights too: e4m3 with a scale of max |w| / 448 per output feature, within e4m3's half step."""
    config = llama_ref.tiny_config()
    model, weights = build(config, "float8")
    lin = model.model.layers[0].mlp.down_proj
    assert lin.weight.dtype == tp.float8 and lin.weight_scale.shape == (config["hidden_size"],)
    deq = dequantized(model, weights, config)
    for name, w in weights.items():
        if ".layers." in name and name.endswith("proj.weight"):
            assert np.all(np.abs(deq[name] - w) <= np.abs(w) / 16 + np.abs(w).max() * 2.0**-9), name
    caches = model.empty_caches(PROMPT.shape[0])
    logits, _ = model(tp.Tensor(PROMPT.astype(np.int32)), tp.Tensor(np.array([0], np.int32)), caches)
    want = llama_ref.logits(deq, PROMPT, config)[:, -1]
    np.testing.assert_allclose(np.asarray(tp.cast(logits, tp.float32)), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("mode", LOAD_MODES)
def test_the_output_head_stays_float_when_asked_and_a_tied_head_gets_its_own_quantized_copy(mode, tmp_path):
    config = llama_ref.tiny_config(tie_word_embeddings=True)
    weights = llama_ref.random_weights(config)
    write_checkpoint(str(tmp_path), config, weights)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, quant_mode=mode)
    model = llm.model
    assert model.lm_head.weight.dtype == model.model.layers[0].mlp.down_proj.weight.dtype
    assert model.model.embed_tokens.weight.dtype == tp.float32  # the table the head was tied to, as stored
    got = llm.generate(PROMPT[:1], max_new_tokens=6, stop_tokens=[])
    assert got == llama_ref.greedy(dequantized(model, weights, config), PROMPT[:1], 6, config).tolist()
    kept = tp.llm.load(str(tmp_path), max_seq_len=32, quant_mode=mode, quantize_head=False).model
    assert kept.lm_head.weight.dtype == tp.float32 and kept.quantize_head is False
    with pytest.raises(tp.TripyException, match=r"quantize_head=True .* has no quant_mode"):
        tp.llm.load(str(tmp_path), quantize_head=True)
