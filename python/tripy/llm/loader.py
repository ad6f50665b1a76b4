"""``tp.llm.load``: a Llama-family model from a Hugging Face checkpoint directory (``config.json``,
``*.safetensors``, and ``tokenizer.json`` when present), ready to generate text."""

import json
import math
import os

import numpy as np

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.device import resolve as _resolve_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import DeviceMesh
from tripy.frontend.ops.misc import cast
from tripy.frontend.safetensors import load_safetensors
from tripy.llm import prequantized
from tripy.llm.generate import Generator, _check_sampling, check_model_dtype
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM, _head_quantized
from tripy.llm.quantize import check_quant_mode
from tripy.llm.sharded_load import load_shares
from tripy.llm.tokenizer import Tokenizer

DEFAULT_MAX_SEQ_LEN = 4096
# Buffers some checkpoints store beside the parameters; the model computes them itself.
_COMPUTED = ("rotary_emb.inv_freq",)


def load(path, *, dtype=None, max_seq_len=None, max_batch_size=1, device=None, quant_mode=None, mesh=None,
         quantize_head=None):
    """
    Loads the checkpoint directory ``path`` (``config.json`` and its ``.safetensors`` weights, one
    file or shards listed by ``model.safetensors.index.json``) into an ``LLM``.

    Args:
        path: The checkpoint directory.
        dtype: The dtype to compute in; defaults to the config's ``dtype`` (``torch_dtype`` in
            configs written before transformers 5), else the dtype the weights are stored in.
        max_seq_len: Positions each sequence may hold (prompt plus generated tokens): the KV caches'
            length. Defaults to the config's ``max_position_embeddings``, at most 4096.
        max_batch_size: The most sequences one call generates at once.
        device: Where the weights go; the default device when omitted.
        quant_mode: None, ``"int8-weight-only"``, ``"int4-weight-only"`` or ``"float8"``:
            quantizes the decoder layers' projection weights as they load (int8 per output
            feature; int4 in groups of 128 input features with zero points, held two values a
            byte; float8 e4m3 per output feature, the activations staying in ``dtype``), so decode
            steps read a half or a quarter of the bytes. A checkpoint that is already quantized
            (its ``config.json`` has a ``quantization_config``: GPTQ or AWQ int4, fp8 with
            ``weight_scale``; see tripy/llm/prequantized.py) is read as it is stored; its
            quant_mode may be left None.
        mesh: A ``tp.DeviceMesh`` to run the model over, tensor-parallel: the LLM's steps compile
            sharded over the mesh's ranks, each holding its share of the heads, of the
            feed-forward features and of the vocabulary. The checkpoint is read on the host and
            each rank of this process gets only its share of every sharded weight on its device
            (quantized there; a pre-quantized checkpoint's share taken from its tensors repacked on
            the host; tripy/llm/sharded_load.py), so under ``torchrun`` (pass
            ``tp.DeviceMesh.from_environment()`` in every process, one per GPU) a process holds one
            rank's share of the model. None: one device.
        quantize_head: Whether the output head's weight is quantized too, in ``quant_mode``'s
            form. None: yes when ``quant_mode`` quantizes a float checkpoint (as
            torchao and gpt-fast quantize every linear layer; a tied head gets its own quantized
            copy, the embedding stays in ``dtype``), no for a checkpoint that is already quantized
            (its head as it is stored). False keeps the head in ``dtype``.

    Returns:
        An ``LLM``.

    Raises:
        tp.TripyException: if ``mesh`` is not a ``tp.DeviceMesh`` or its size does not divide the
            model's heads, feed-forward features or vocabulary, or if a rank's share of a
            row-parallel int4 projection's input features would split a quantization group, or
            if ``quantize_head`` is True without a ``quant_mode``.
    """
    check_quant_mode(quant_mode)
    config = LlamaConfig.from_file(path)
    check_mesh(config, mesh)
    if mesh is not None and device is None:
        device = mesh.devices[0]  # the ranks' device: the steps' arguments are made there
    scheme = prequantized.scheme_of(_config_dict(path), _config_path(path))
    by_share = mesh is not None
    if scheme is not None:
        quant_mode = _checkpoint_quant_mode(scheme, quant_mode)
        if quantize_head is None:
            quantize_head = False  # a pre-quantized checkpoint's head as it is stored
    quantize_head = _head_quantized(quant_mode, quantize_head)  # before any weight is read
    if by_share or scheme is not None:
        # Mapped, read in place: each rank's share is read from here, and quantized tensors are
        # repacked on the host.
        weights = load_safetensors(path, device="cpu")
    else:
        weights = load_safetensors(path, device=device)
    weights = {name: w for name, w in weights.items() if not name.endswith(_COMPUTED)}
    if dtype is None:
        stored = config.torch_dtype or _stored_dtype(weights)
        dtype = check_model_dtype(stored)
    if scheme is not None and by_share:
        weights = prequantized.on_host(prequantized.repack(weights, scheme, config))
    elif scheme is not None:
        weights = prequantized.read(weights, scheme, config, dtype, _resolve_device(device))
    max_seq_len = max_seq_len or min(config.max_position_embeddings, DEFAULT_MAX_SEQ_LEN)
    model = LlamaForCausalLM(config, dtype=dtype, max_seq_len=max_seq_len, quant_mode=quant_mode,
                             quantize_head=quantize_head)
    if by_share:
        load_shares(model, weights, mesh)
        weights = {}
    for name, w in weights.items():
        # Float weights are converted once here, not inside every compile and eager call; quantized
        # ones (int8, float8, packed int4) are kept as they are.
        if w.dtype != dtype and w.dtype in _FLOATS:
            weights[name] = cast(w, dtype)
            weights[name].eval()
    if not by_share:
        model.load_state_dict(weights)
    tokenizer = None
    if os.path.exists(os.path.join(path, "tokenizer.json")):
        tokenizer = Tokenizer.from_file(path)
    return LLM(model, tokenizer, max_batch_size, mesh=mesh)


def check_mesh(config, mesh):
    """A clear error at the user's line for a mesh that is not a tp.DeviceMesh or whose size does
    not divide each dim the sharded model splits (before any weight is read)."""
    if mesh is None:
        return
    if not isinstance(mesh, DeviceMesh):
        _raise_here(f"mesh must be a tp.DeviceMesh or None, but got: {mesh!r}.")
    n = mesh.size
    splits = (
        ("attention heads", config.num_attention_heads),
        ("KV heads", config.num_key_value_heads),
        ("feed-forward features (intermediate_size)", config.intermediate_size),
        ("hidden features (hidden_size)", config.hidden_size),
        ("vocabulary entries (vocab_size)", config.vocab_size),
    )
    whole = math.gcd(*(count for _, count in splits))
    sizes = [str(d) for d in range(1, whole + 1) if whole % d == 0]
    for what, count in splits:
        if count % n:
            _raise_here(
                f"This model cannot be split over the {n} ranks of the mesh: its {count} {what} are not a multiple of "
                f"{n}. Meshes of {', '.join(sizes[:-1]) + ' or ' if len(sizes) > 1 else ''}{sizes[-1]} "
                f"rank{'s' if whole > 1 else ''} split it."
            )


_FLOATS = (dtypes.float32, dtypes.float16, dtypes.bfloat16)


def _config_path(path):
    return os.path.join(path, "config.json") if os.path.isdir(path) else path


def _config_dict(path):
    """config.json as a dict (LlamaConfig.from_file has read and checked it already)."""
    with open(_config_path(path), encoding="utf-8") as f:
        return json.load(f)


def _checkpoint_quant_mode(scheme, quant_mode):
    """The model's quant_mode for a pre-quantized checkpoint; a quant_mode asking for another
    quantization is an error."""
    mode = prequantized.quant_mode_of(scheme)
    if quant_mode is not None and quant_mode != mode:
        raise TripyException(
            f"This checkpoint is already quantized ({scheme['method'].upper()}), so it cannot be loaded with "
            f"quant_mode={quant_mode!r}; pass quant_mode=None to read it as it is stored."
        )
    return mode


def _stored_dtype(weights):
    """The name of the dtype most of the checkpoint's float weights (by count) are stored in."""
    counts = {}
    for w in weights.values():
        if w.dtype.name in ("float32", "float16", "bfloat16"):
            counts[w.dtype.name] = counts.get(w.dtype.name, 0) + 1
    return max(counts, key=counts.get) if counts else "float32"


class LLM:
    """A loaded model, its tokenizer (or None) and its compiled steps, one ``Generator`` per way of
    choosing tokens (compiled on first use); with ``mesh`` (a ``tp.DeviceMesh``) the steps compile
    sharded over its ranks and generate the tokens the unsharded model does."""

    def __init__(self, model, tokenizer=None, max_batch_size=1, mesh=None):
        check_mesh(model.config, mesh)
        self.model = model
        self.config = model.config
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.mesh = mesh
        self._generators = {}

    def generator(self, temperature=0.0, top_k=0, top_p=1.0):
        """The compiled ``Generator`` for these sampling settings."""
        _check_sampling(temperature, top_k, top_p)
        key = (float(temperature), top_k, float(top_p)) if temperature else (0.0, 0, 1.0)
        if key not in self._generators:
            self._generators[key] = Generator(
                self.model, max_batch_size=self.max_batch_size, temperature=temperature, top_k=top_k, top_p=top_p,
                mesh=self.mesh,
            )
        return self._generators[key]

    def stop_tokens(self):
        """The ids that end a sequence: the config's ``eos_token_id`` and the tokenizer's."""
        ids = set(self.config.eos_token_id)
        if self.tokenizer is not None:
            ids |= set(self.tokenizer.eos_token_ids)
        return ids

    def encode(self, prompt):
        """Token ids for ``prompt``: a string (through the tokenizer) or ids as they are."""
        if isinstance(prompt, str):
            if self.tokenizer is None:
                _raise_here("This checkpoint has no tokenizer.json: pass the prompt as token ids.")
            return np.array(self.tokenizer.encode(prompt), np.int64)
        return np.asarray(prompt)

    def stream(self, prompt, max_new_tokens=128, *, temperature=0.0, top_k=0, top_p=1.0, seed=0, stop_tokens=None):
        """Yields generated token ids of one sequence, one by one, until a stop token (yielded) or
        ``max_new_tokens``."""
        ids = self.encode(prompt)
        if ids.ndim != 1:
            _raise_here(f"stream takes one sequence, but the prompt has shape {ids.shape}; use generate for a batch.")
        stop = self.stop_tokens() if stop_tokens is None else set(stop_tokens)
        steps = self.generator(temperature, top_k, top_p).stream(ids, max_new_tokens, stop_tokens=stop, seed=seed)
        for values in steps:
            yield int(values[0])

    def generate(self, prompt, max_new_tokens=128, *, temperature=0.0, top_k=0, top_p=1.0, seed=0, stop_tokens=None):
        """The generated continuation: text for a string prompt, else token ids (a list per
        sequence for a batch ``(B, T)``)."""
        ids = self.encode(prompt)
        stop = self.stop_tokens() if stop_tokens is None else set(stop_tokens)
        out = self.generator(temperature, top_k, top_p).generate(ids, max_new_tokens, stop_tokens=stop, seed=seed)
        if isinstance(prompt, str):
            return self.tokenizer.decode(out, skip_special_tokens=True)
        return out

