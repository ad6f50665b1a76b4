"""Large language models: checkpoints on disk, Llama-family decoders, tokenizers and generation.

    llm = tp.llm.load("path/to/checkpoint")          # config.json + *.safetensors (+ tokenizer.json)
    print(llm.generate("The capital of France is", max_new_tokens=16))
"""

from tripy.llm.generate import Generator
from tripy.llm.llama import LlamaConfig, LlamaForCausalLM
from tripy.llm.loader import LLM, load

__all__ = ["LLM", "Generator", "LlamaConfig", "LlamaForCausalLM", "load"]
