"""Large language models: checkpoints on disk, Llama-family decoders, tokenizers and generation
(the guide: docs/guides/llm.md). A checkpoint directory holds ``config.json``, the weights as
``.safetensors`` and, optionally, ``tokenizer.json``; for example
``tp.llm.load("path/to/checkpoint").generate("The capital of France is", max_new_tokens=16)``.
"""

from tripy.llm.generate import Generator
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM
from tripy.llm.loader import LLM, load

__all__ = ["LLM", "Generator", "LlamaConfig", "LlamaForCausalLM", "load"]
