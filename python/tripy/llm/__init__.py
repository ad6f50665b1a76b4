"""Large language models: checkpoints on disk, Llama-family decoders, tokenizers and generation."""
