"""Pre-quantized checkpoints (tripy/llm/prequantized.py): GPTQ and AWQ int4 checkpoints and fp8
checkpoints with weight_scale, written here in each layout the way AutoGPTQ, AutoAWQ and fp8
exporters write them (the packing loops below follow their code, value by value), loaded with
tp.llm.load and compared with the numpy model on the numpy dequantization of the same tensors:
logits and greedy tokens. int4 weights stay packed in the model (two values a byte) and every
projection of a decode step is a weight-only product. Layouts Tripy does not read (act-order
g_idx, block-wise fp8 scales, other bit widths) and damaged tensors (shapes that do not fit the
configuration, bad scales) are errors naming the tensor."""

import json
import os
import re
import struct

import numpy as np
import pytest

import tripy as tp

import llama_ref

PROMPT = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
               "mlp.up_proj", "mlp.down_proj")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def _projections(weights, config):
    for i in range(config["num_hidden_layers"]):
        for p in PROJECTIONS:
            yield f"model.layers.{i}.{p}"


def _quantize_groups(w, group):
    """Asymmetric 4-bit quantization of w (out, in) per group of input features, as GPTQ and AWQ
    store it: unsigned values q in [0, 15], a zero z in [0, 15] and a float16 scale per (group, out)
    with w ~ scale * (q - z). Returns q (in, out), zeros (groups, out), scales (groups, out)."""
    N, K = w.shape
    G = K // group
    g = w.reshape(N, G, group)
    lo, hi = g.min(-1), g.max(-1)
    scales = ((hi - lo) / 15).astype(np.float16).astype(np.float64)
    # Zeros from 1: GPTQ's v1 format stores z - 1, and AutoGPTQ's packing of a zero of 0 (-1)
    # would spill into the next values of its word.
    zeros = np.clip(np.round(-lo / scales), 1, 15)
    q = np.clip(np.round(g / scales[..., None]) + zeros[..., None], 0, 15).reshape(N, K)
    return (np.ascontiguousarray(q.T, np.uint32), np.ascontiguousarray(zeros.T, np.uint32),
            np.ascontiguousarray(scales.T, np.float16))


def _gptq_pack(q, zeros, bits=4):
    """AutoGPTQ's QuantLinear.pack: q (in, out) eight to a word along the input rows, zeros
    (groups, out) eight to a word along the columns, each value j of a word at bits 4j."""
    per = 32 // bits
    qweight = np.zeros((q.shape[0] // per, q.shape[1]), np.uint32)
    for row in range(qweight.shape[0]):
        for j in range(per):
            qweight[row] |= q[row * per + j] << (bits * j)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // per), np.uint32)
    for col in range(qzeros.shape[1]):
        for j in range(per):
            qzeros[:, col] |= zeros[:, col * per + j] << (bits * j)
    return qweight.view(np.int32), qzeros.view(np.int32)


def _awq_pack(values):
    """AutoAWQ's WQLinear_GEMM.from_linear: values (rows, out) eight to a word along the columns,
    nibble i holding column 8 c + AWQ_ORDER[i]."""
    out = np.zeros((values.shape[0], values.shape[1] // 8), np.uint32)
    for col in range(out.shape[1]):
        for i in range(8):
            out[:, col] |= values[:, col * 8 + AWQ_ORDER[i]] << (4 * i)
    return out.view(np.int32)


def _write(directory, config, tensors, quantization_config):
    config = dict(config, quantization_config=quantization_config)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    tp.save_safetensors(tensors, os.path.join(directory, "model.safetensors"))


def _int4_checkpoint(directory, method, group=32, gptq_format="gptq", seed=0, config=None):
    """A checkpoint in `method`'s layout (of `config`, the tiny one by default), and the float64
    weights it dequantizes to in numpy."""
    config = config or llama_ref.tiny_config()
    weights = llama_ref.random_weights(config, seed=seed)
    tensors = dict(weights)
    deq = dict(weights)
    for prefix in _projections(weights, config):
        w = tensors.pop(prefix + ".weight").astype(np.float64)
        K = w.shape[1]
        g = K if group == -1 else group
        q, zeros, scales = _quantize_groups(w, g)
        rows = np.arange(K) // g
        deq[prefix + ".weight"] = ((q.astype(np.float64) - zeros[rows]) * scales[rows].astype(np.float64)).T
        if method == "gptq":
            stored = zeros - 1 if gptq_format == "gptq" else zeros
            tensors[prefix + ".qweight"], tensors[prefix + ".qzeros"] = _gptq_pack(q, stored)
            tensors[prefix + ".g_idx"] = rows.astype(np.int32)
        else:
            tensors[prefix + ".qweight"], tensors[prefix + ".qzeros"] = _awq_pack(q), _awq_pack(zeros)
        tensors[prefix + ".scales"] = scales
    qc = {"quant_method": method, "bits": 4, "group_size": group}
    if method == "gptq":
        qc.update(desc_act=False, sym=False, checkpoint_format=gptq_format)
    else:
        qc.update(version="gemm", zero_point=True)
    _write(directory, config, tensors, qc)
    return config, deq, tensors


def _decode_kinds(llm):
    return re.findall(r"^b\d+ = (\w+) '", llm.generator().decode._impl.program_text, re.M)


def _check_model(llm, config, deq):
    caches = llm.model.empty_caches(PROMPT.shape[0])
    logits, _ = llm.model(tp.Tensor(PROMPT.astype(np.int32)), tp.Tensor(np.array([0], np.int32)), caches)
    want = llama_ref.logits(deq, PROMPT, config)[:, -1]
    got = np.asarray(tp.cast(logits, tp.float32))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    got_tokens = llm.generate(PROMPT, max_new_tokens=8, stop_tokens=[])
    assert got_tokens == llama_ref.greedy(deq, PROMPT, 8, config).tolist()


@pytest.mark.parametrize(
    "method, group, gptq_format",
    [("gptq", 32, "gptq"), ("gptq", -1, "gptq_v2"), ("awq", 32, None)],
    ids=["gptq-group32", "gptq_v2-per-channel", "awq-group32"],
)
def test_int4_checkpoints_match_their_numpy_dequantization(device, tmp_path, method, group, gptq_format):
    config, deq, _ = _int4_checkpoint(str(tmp_path), method, group, gptq_format)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2, dtype=tp.float32)
    assert llm.model.quant_mode == "int4-weight-only"
    _check_model(llm, config, deq)
    # Every projection of a decode step reads its packed bytes in the weight-only product, and the
    # model holds each int4 weight as a view of those bytes (never one byte per value).
    assert _decode_kinds(llm).count("weight_only_dot") == 4 * config["num_hidden_layers"]
    down = llm.model.model.layers[0].mlp.down_proj
    assert down.weight.dtype == tp.int4 and not down.weight._node.is_evaluated


def test_int4_checkpoints_load_in_bfloat16(tmp_path):
    """float16 scales round to the model's bfloat16; the logits follow the rounded scales' model."""
    config, deq, tensors = _int4_checkpoint(str(tmp_path), "gptq", 32)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, dtype=tp.bfloat16)
    assert llm.model.model.layers[0].self_attn.qkv_proj.weight_scale.dtype == tp.bfloat16
    caches = llm.model.empty_caches(PROMPT.shape[0])
    logits, _ = llm.model(tp.Tensor(PROMPT.astype(np.int32)), tp.Tensor(np.array([0], np.int32)), caches)
    want = llama_ref.logits(deq, PROMPT, config)[:, -1]
    got = np.asarray(tp.cast(logits, tp.float32))
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()


# -- fp8 ---------------------------------------------------------------------------------------

def _e4m3(codes):
    """float8 e4m3fn codes (uint8) as float64: sign, 4 exponent bits (bias 7), 3 mantissa bits."""
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 15, codes & 7
    return sign * np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * 2.0 ** (e - 7))


def _round_e4m3(v):
    """Round-to-nearest-even into e4m3fn, saturating at 448 (how a quantized input is rounded)."""
    a = np.minimum(np.abs(v), 448.0)
    e = np.floor(np.log2(np.maximum(a, 2.0**-6)))
    step = 2.0 ** (e - 3)
    return np.sign(v) * np.minimum(np.round(a / step) * step, 448.0)


def _write_safetensors(path, entries):
    """A safetensors file of (name, dtype string, shape, raw bytes), written field by field."""
    header, data, at = {}, b"", 0
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def _fp8_checkpoint(directory, scale_shape, input_scales=False, seed=0, extra=(), config=None):
    config = config or llama_ref.tiny_config()
    weights = llama_ref.random_weights(config, seed=seed)
    rng = np.random.default_rng(seed)
    entries, deq, x_scales = [], dict(weights), {}
    for prefix in _projections(weights, config):
        w = weights[prefix + ".weight"]
        N, K = w.shape
        codes = rng.integers(0, 256, (N, K)).astype(np.uint8)
        codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN codes
        per = scale_shape(N)
        scale = (np.abs(w).max() / 448 * rng.uniform(0.5, 2.0, per)).astype(np.float32)
        deq[prefix + ".weight"] = _e4m3(codes) * np.resize(scale, N)[:, None] / 4.0
        # (the codes span e4m3's range; the scale keeps the layer's outputs near the float model's)
        scale = (scale / 4.0).astype(np.float32)
        entries.append((prefix + ".weight", "F8_E4M3", (N, K), codes.tobytes()))
        entries.append((prefix + ".weight_scale", "F32", scale.shape, scale.tobytes()))
        if input_scales:
            x_scales[prefix] = np.float32(rng.uniform(0.01, 0.03))
            entries.append((prefix + ".input_scale", "F32", (), x_scales[prefix].tobytes()))
    for name, w in weights.items():
        if ".layers." in name and name.endswith("proj.weight"):
            continue
        entries.append((name, "F32", w.shape, w.astype(np.float32).tobytes()))
    entries += list(extra)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(config, quantization_config={"quant_method": "fp8", "activation_scheme": "static" if input_scales else "dynamic"}), f)
    _write_safetensors(os.path.join(directory, "model.safetensors"), entries)
    return config, deq, x_scales


@pytest.mark.parametrize("scale_shape", [lambda n: (), lambda n: (1,), lambda n: (n,), lambda n: (n, 1)],
                         ids=["per-tensor", "per-tensor-1", "per-channel", "per-channel-column"])
def test_fp8_checkpoints_dequantize_with_their_weight_scales(device, tmp_path, scale_shape):
    config, deq, _ = _fp8_checkpoint(str(tmp_path), scale_shape)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32, max_batch_size=2)
    assert llm.model.quant_mode == "float8"
    assert llm.model.model.layers[0].mlp.down_proj.weight.dtype == tp.float8
    _check_model(llm, config, deq)


def test_fp8_static_input_scales_quantize_the_projections_inputs(tmp_path):
    """q, k and v (gate and up) read one input: their stacked projection takes the largest scale."""
    config, deq, x_scales = _fp8_checkpoint(str(tmp_path), lambda n: (n,), input_scales=True)
    llm = tp.llm.load(str(tmp_path), max_seq_len=32)
    layer = llm.model.model.layers[1]
    q, k, v = (x_scales[f"model.layers.1.self_attn.{p}_proj"] for p in "qkv")
    assert layer.self_attn.qkv_proj.input_scale.shape == ()
    assert layer.self_attn.qkv_proj.input_scale.tolist() == pytest.approx(float(max(q, k, v)))
    # The numpy model with each projection's input rounded to e4m3 at the stacked scale.
    x = np.random.default_rng(1).standard_normal((3, config["hidden_size"]))
    scale = float(layer.self_attn.qkv_proj.input_scale.tolist())
    w = np.concatenate([deq[f"model.layers.1.self_attn.{p}_proj.weight"] for p in "qkv"])
    want = (_round_e4m3(x / scale) * scale) @ w.T
    got = np.asarray(layer.self_attn.qkv_proj(tp.Tensor(x.astype(np.float32))))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


# -- errors ------------------------------------------------------------------------------------

def _rewrite(directory, edit):
    """Loads the checkpoint's tensors into numpy, applies `edit` and writes them back."""
    path = os.path.join(directory, "model.safetensors")
    tensors = {k: np.array(v) for k, v in tp.load_safetensors(path, device="cpu").items()}
    edit(tensors)
    tp.save_safetensors(tensors, path)


def test_act_order_gptq_is_refused_naming_g_idx(tmp_path):
    _int4_checkpoint(str(tmp_path), "gptq", 32)

    def shuffle(t):
        t["model.layers.1.mlp.down_proj.g_idx"] = t["model.layers.1.mlp.down_proj.g_idx"][::-1].copy()

    _rewrite(str(tmp_path), shuffle)
    with pytest.raises(tp.TripyException, match=r"model\.layers\.1\.mlp\.down_proj\.g_idx: .*act-order"):
        tp.llm.load(str(tmp_path))


@pytest.mark.parametrize("bad", [np.nan, -0.5, 0.0, np.inf])
def test_bad_scales_are_errors_naming_the_tensor(tmp_path, bad):
    _int4_checkpoint(str(tmp_path), "awq", 32)

    def spoil(t):
        t["model.layers.0.self_attn.k_proj.scales"][1, 3] = bad

    _rewrite(str(tmp_path), spoil)
    with pytest.raises(tp.TripyException, match=r"model\.layers\.0\.self_attn\.k_proj\.scales holds .* at \(1, 3\): scales must be finite and positive"):
        tp.llm.load(str(tmp_path))


@pytest.mark.parametrize(
    "method, name, shape",
    [("gptq", "qweight", (8, 60)), ("gptq", "qzeros", (2, 5)), ("awq", "qweight", (64, 5)), ("awq", "scales", (1, 32))],
)
def test_packed_tensors_that_do_not_fit_the_configuration_are_errors(tmp_path, method, name, shape):
    _int4_checkpoint(str(tmp_path), method, 32)
    full = f"model.layers.1.self_attn.v_proj.{name}"

    def reshape(t):
        t[full] = np.zeros(shape, t[full].dtype)

    _rewrite(str(tmp_path), reshape)
    with pytest.raises(tp.TripyException, match=re.escape(full) + r": .* but it is .* of shape " + re.escape(str(shape))):
        tp.llm.load(str(tmp_path))


def test_fp8_layouts_tripy_does_not_read_are_errors(tmp_path):
    blockwise = [("model.layers.0.mlp.up_proj.weight_scale_inv", "F32", (1, 1), np.ones(1, np.float32).tobytes())]
    _fp8_checkpoint(str(tmp_path), lambda n: (n,), extra=blockwise)
    with pytest.raises(tp.TripyException, match=r"model\.layers\.0\.mlp\.up_proj\.weight_scale_inv: block-wise fp8"):
        tp.llm.load(str(tmp_path))
    _fp8_checkpoint(str(tmp_path), lambda n: (n, 2))
    with pytest.raises(tp.TripyException, match=r"model\.layers\.0\.self_attn\.q_proj\.weight_scale: fp8 weight scales are"):
        tp.llm.load(str(tmp_path))


def test_quantization_configs_tripy_does_not_read_are_errors(tmp_path):
    config, _, tensors = _int4_checkpoint(str(tmp_path), "gptq", 32)
    for qc, message in [
        ({"quant_method": "gptq", "bits": 8, "group_size": 32}, "GPTQ checkpoints of 8 bits are not supported"),
        ({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemv"}, "AWQ version 'gemv' is not supported"),
        ({"quant_method": "bitsandbytes"}, "quant_method 'bitsandbytes' is not supported"),
    ]:
        _write(str(tmp_path), config, tensors, qc)
        with pytest.raises(tp.TripyException, match=message):
            tp.llm.load(str(tmp_path))
    _write(str(tmp_path), config, tensors, {"quant_method": "gptq", "bits": 4, "group_size": 32})
    with pytest.raises(tp.TripyException, match=r"already quantized \(GPTQ\).*quant_mode='int8-weight-only'"):
        tp.llm.load(str(tmp_path), quant_mode="int8-weight-only")
