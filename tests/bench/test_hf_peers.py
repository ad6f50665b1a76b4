"""bench/hf_peers.py's mapping of the GPT-2 twin's state dict onto transformers' GPT2LMHeadModel
(the benchmark's GPU peer), checked without torch or transformers: a dropped or untransposed
weight there made the peer compute another model."""


class Weight:
    """A stand-in for a torch tensor: its name, and whether t() made it."""

    def __init__(self, name, transposed=False):
        self.name, self.transposed = name, transposed

    def t(self):
        return Weight(self.name, not self.transposed)


def test_gpt2_state_keeps_every_weight_and_transposes_the_conv1d_ones(load_bench):
    names = ["transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight", "transformer.ln_f.weight",
             "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias",
             "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
             "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias",
             "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias",
             "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias"]
    twin = {n: Weight(n) for n in names}
    twin["transformer.h.0.attn.bias"] = Weight("mask")  # the twin's causal-mask buffer
    state = load_bench("hf_peers").gpt2_state(twin)
    assert sorted(state) == sorted(names)
    transposed = {n for n, w in state.items() if w.transposed}
    assert transposed == {"transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
                          "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_proj.weight"}
