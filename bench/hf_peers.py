"""Hugging Face `transformers` models holding the weights of the examples' torch twins: the torch
side of bench/models.py where transformers is installed (the model a torch user runs, SDPA
attention). Each builder returns (call, note) or None, and None also where a release's signatures
differ: the run then says why and keeps the twin as the peer. Also the static KV cache of
bench/llm.py's peer."""

try:
    import torch
except ImportError:
    torch = None


def _transformers(env, twin):
    """transformers where a peer is wanted (a twin to take the weights from, not --quick) and
    installed; else None."""
    if twin is None or env.quick:
        return None
    try:
        import transformers
    except ImportError:
        return None
    return transformers


def static_cache(transformers, config, batch, length, device, dtype):
    """transformers' StaticCache of ``length`` rows for ``batch`` sequences."""
    kwargs = dict(config=config, max_cache_len=length, device=device, dtype=dtype)
    try:
        return transformers.StaticCache(max_batch_size=batch, **kwargs)
    except TypeError:  # newer releases size the batch, device and dtype from the first call
        kwargs.pop("device"), kwargs.pop("dtype")
        return transformers.StaticCache(**kwargs)


def _fallback(model, error):
    print(f"# {model}: transformers not used ({type(error).__name__}: {error}); the twin is the peer")


# --- GPT-2 --------------------------------------------------------------------------------------
# transformers' projections are Conv1D layers, weights (in, out): the twin's Linear weights transposed.
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def gpt2_state(twin_state):
    """The twin's state dict as GPT2LMHeadModel's: its Conv1D weights transposed, its causal-mask
    buffers (".attn.bias", not weights) left out; "attn.c_attn.bias" is a weight and stays."""
    return {k: (v.t() if k.endswith(_CONV1D) else v) for k, v in twin_state.items() if not k.endswith(".attn.bias")}


def _gpt2_model(transformers, env, config, twin):
    hf_config = transformers.GPT2Config(vocab_size=config.vocab_size, n_positions=config.block_size,
                                        n_embd=config.n_embd, n_layer=config.n_layer, n_head=config.n_head,
                                        activation_function="gelu")  # the twin's (exact) GELU
    model = transformers.GPT2LMHeadModel._from_config(hf_config, attn_implementation="sdpa")
    missing, unexpected = model.load_state_dict(gpt2_state(twin.state_dict()), strict=False)
    parameters = dict(model.named_parameters())
    if unexpected or any(k in parameters for k in missing):
        raise ValueError(f"the twin's weights do not map onto GPT2LMHeadModel's: missing {missing}, "
                         f"unexpected {unexpected}")
    return env.twin(model)


def gpt2(env, config, twin):
    """GPT2LMHeadModel: logits for idx (B, T), no cache."""
    transformers = _transformers(env, twin)
    if transformers is None:
        return None
    try:
        model = _gpt2_model(transformers, env, config, twin)
    except Exception as e:
        _fallback("gpt2", e)
        return None
    attention = model.config._attn_implementation
    return (lambda idx: model(idx, use_cache=False, return_dict=False)[0],
            f"torch: transformers GPT2LMHeadModel ({attention} attention)")


def gpt2_decode(env, config, twin, past):
    """GPT2LMHeadModel's decode step for B1 over ``past``, per layer (k, v) of shape (1, H, P, D):
    a call on (token, position) that returns that token's logits. transformers' GPT-2 does not hand
    cache positions to a static cache (5.x), so the step takes a DynamicCache of the cached rows,
    which it extends by concatenation as a torch user's generate() does."""
    transformers = _transformers(env, twin)
    if transformers is None:
        return None
    try:
        model = _gpt2_model(transformers, env, config, twin)

        def step(token, position):
            cache = transformers.DynamicCache()
            for i, (k, v) in enumerate(past):
                cache.update(k, v, i)
            return model(token, position_ids=position[None], cache_position=position, past_key_values=cache,
                         use_cache=True, return_dict=False)[0]

        with torch.no_grad():  # fail here, not in the timings, where a release's signatures differ
            P = past[0][0].shape[2]
            step(torch.zeros((1, 1), dtype=torch.long, device=past[0][0].device),
                 torch.tensor([P], device=past[0][0].device))
    except Exception as e:
        _fallback("gpt2-decode", e)
        return None
    attention = model.config._attn_implementation
    return step, f"torch: transformers GPT2LMHeadModel, cache of the cached rows ({attention} attention)"


# --- the Llama block ------------------------------------------------------------------------------
# The Llama block twin's parameters -> transformers' LlamaDecoderLayer's.
_LLAMA = {"attention.wq.weight": "self_attn.q_proj.weight", "attention.wk.weight": "self_attn.k_proj.weight",
          "attention.wv.weight": "self_attn.v_proj.weight", "attention.wo.weight": "self_attn.o_proj.weight",
          "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w3.weight": "mlp.up_proj.weight",
          "feed_forward.w2.weight": "mlp.down_proj.weight", "attention_norm.weight": "input_layernorm.weight",
          "ffn_norm.weight": "post_attention_layernorm.weight"}


def llama_block(env, config, twin):
    """transformers' LlamaDecoderLayer (SDPA attention) and its rotary embedding: a call on x."""
    transformers = _transformers(env, twin)
    if transformers is None:
        return None
    try:
        from transformers.models.llama import modeling_llama

        c = transformers.LlamaConfig(hidden_size=config.dim, intermediate_size=config.hidden_dim,
                                     num_attention_heads=config.n_heads, num_key_value_heads=config.n_kv_heads,
                                     rms_norm_eps=config.norm_eps, rope_theta=config.rope_theta)
        c._attn_implementation = "sdpa"
        layer = modeling_llama.LlamaDecoderLayer(c, layer_idx=0)
        layer.load_state_dict({_LLAMA[k]: v for k, v in twin.state_dict().items()})
        layer, rotary = env.twin(layer), modeling_llama.LlamaRotaryEmbedding(config=c).to(env.torch_device)
        want = config.rope_theta ** (-torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim)
        if not torch.allclose(rotary.inv_freq.float().cpu(), want, rtol=1e-5):
            raise ValueError("its rotary frequencies differ from the block's")
    except Exception as e:
        _fallback("llama-block", e)
        return None

    def forward(x):
        pos = torch.arange(x.shape[1], device=x.device)[None]
        out = layer(x, position_ids=pos, position_embeddings=rotary(x, pos))
        return out[0] if isinstance(out, tuple) else out

    return forward, f"torch: transformers LlamaDecoderLayer ({c._attn_implementation} attention)"
