"""The Llama-family shapes bench/llm.py runs and their checkpoints: config.json and safetensors of
random weights, written once (by transformers, a tensor at a time for a model larger than the GPU,
or by Tripy from numpy) and shared by the processes of a torchrun job."""

import json
import math
import os
import time

import numpy as np

import tripy as tp

from llm_reference import head_dim


def llama3_rope(factor):
    """Llama 3's rope_scaling entry of config.json, with its frequency `factor`."""
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}


SHAPES = {
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=2, vocab_size=4096, tie_word_embeddings=True, rope_theta=500000.0),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
               rope_scaling=llama3_rope(32.0)),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0,
               rope_scaling=llama3_rope(8.0)),
    # One rank's share of 8b split over two GPUs by heads and features (vocabulary too), run on one
    # GPU with no collectives: the floor of the two-GPU step, what its all-reduces add beside.
    "8b-rank": dict(hidden_size=4096, intermediate_size=7168, num_hidden_layers=32, num_attention_heads=16,
                    num_key_value_heads=4, head_dim=128, vocab_size=64128, tie_word_embeddings=False,
                    rope_theta=500000.0, rope_scaling=llama3_rope(8.0)),
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0,
                rope_scaling=llama3_rope(8.0)),
}


def parse_shape(text):
    """(name, layers) of a --shapes entry: a SHAPES name, optionally `:N` layers (None: the shape's);
    ValueError for anything else."""
    name, colon, layers = text.partition(":")
    if name not in SHAPES or colon and not (layers.isdigit() and int(layers) > 0):
        raise ValueError(f"--shapes takes {', '.join(SHAPES)}, each optionally with a layer count (70b:48), "
                         f"not {text!r}")
    return name, int(layers) if colon else None


def config_dict(shape, dtype):
    name, layers = parse_shape(shape)
    c = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu", rms_norm_eps=1e-5,
             max_position_embeddings=131072, bos_token_id=128000, eos_token_id=128001, torch_dtype=dtype,
             attention_bias=False, mlp_bias=False, initializer_range=0.02)
    c.update(SHAPES[name])
    if layers is not None:
        c["num_hidden_layers"] = layers
    return c


def checkpoint_shapes(c):
    """The shape of every tensor of a Hugging Face Llama checkpoint of config `c`, by name."""
    C, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    H, G = c["num_attention_heads"], c["num_key_value_heads"]
    D = head_dim(c)
    shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (H * D, C), p + "self_attn.k_proj.weight": (G * D, C),
                       p + "self_attn.v_proj.weight": (G * D, C), p + "self_attn.o_proj.weight": (C, H * D),
                       p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                       p + "mlp.down_proj.weight": (C, F), p + "input_layernorm.weight": (C,),
                       p + "post_attention_layernorm.weight": (C,)})
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def weight_bytes(c, itemsize):
    return sum(math.prod(shape) for shape in checkpoint_shapes(c).values()) * itemsize


def write_checkpoint(directory, shape, dtype, torch, on_gpu=True):
    """config.json + safetensors with random N(0, 0.02) weights (norms 1), written by transformers
    where it is installed (the model made on the GPU), a tensor at a time when the model is larger
    than the GPU (not `on_gpu`), else by Tripy from numpy. A directory that already holds this
    shape's complete checkpoint (a --dir of an earlier run) is kept as it is."""
    c = config_dict(shape, dtype)
    complete = os.path.join(directory, COMPLETE)
    if os.path.exists(complete):
        with open(complete) as f:
            if json.load(f) == c:
                return c
        os.remove(complete)
    os.makedirs(directory, exist_ok=True)
    if torch is not None and on_gpu:
        import transformers

        torch_dtype = getattr(torch, dtype)
        config = transformers.LlamaConfig(**c)
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            torch.manual_seed(0)
            previous = torch.get_default_dtype()
            torch.set_default_dtype(torch_dtype)
            try:
                model = transformers.LlamaForCausalLM(config)
            finally:
                torch.set_default_dtype(previous)
        model.save_pretrained(directory, safe_serialization=True)
        del model
        torch.cuda.empty_cache()  # torch's cache back to the GPU before Tripy loads the model there
    elif torch is not None:
        write_shards(directory, c, dtype, torch)
    else:
        rng = np.random.default_rng(0)
        weights = {}
        for name, shape in checkpoint_shapes(c).items():
            value = (np.ones(shape, np.float32) if name.endswith("norm.weight")
                     else rng.normal(0, 0.02, shape).astype(np.float32))
            weights[name] = tp.cast(tp.Tensor(value), getattr(tp, dtype))
        tp.save_safetensors(weights, os.path.join(directory, "model.safetensors"))
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(c, f)
    with open(complete, "w") as f:
        json.dump(c, f)
    return c


COMPLETE = "bench-complete.json"  # the config of a checkpoint written whole (the last file written)


def write_shards(directory, c, dtype, torch, shard_bytes=5e9):
    """The checkpoint of config `c` as safetensors shards of about `shard_bytes` and their index,
    each tensor made (on the GPU where there is one) and written before the next: the host holds
    one tensor, however large the model."""
    itemsize, code = {"bfloat16": (2, "BF16"), "float16": (2, "F16"), "float32": (4, "F32")}[dtype]
    shards, size = [[]], 0
    for name, shape in checkpoint_shapes(c).items():
        if size and size + math.prod(shape) * itemsize > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += math.prod(shape) * itemsize
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator(device).manual_seed(0)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in shard:
            end = offset + math.prod(shape) * itemsize
            header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, end]}
            offset = end
            weight_map[name] = file
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
        with open(os.path.join(directory, file), "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for name, shape in shard:
                t = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
                t.fill_(1) if name.endswith("norm.weight") else t.normal_(0, 0.02, generator=generator)
                f.write(t.view(torch.uint8).cpu().numpy().data)
        total += offset
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f)


def shared_checkpoint(directory, shape, dtype, torch, rank, on_gpu=True, timeout_s=3600):
    """The checkpoint that rank 0 writes for every process of a torchrun job (one host): the others
    wait for its marker, which names the job by torchrun's agent (every worker's parent process),
    so a marker left by an earlier job is never taken for this one's."""
    marker, job = directory + ".ready", str(os.getppid())
    if rank == 0:
        if os.path.exists(marker):
            os.remove(marker)
        c = write_checkpoint(directory, shape, dtype, torch, on_gpu)
        with open(marker + ".tmp", "w") as f:
            f.write(job)
        os.replace(marker + ".tmp", marker)
        return c
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(marker) as f:
                if f.read() == job:
                    return config_dict(shape, dtype)
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"rank {rank}: rank 0 did not write the checkpoint {directory} within {timeout_s} s")
        time.sleep(1)
