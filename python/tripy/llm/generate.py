"""Text generation with a Llama-family model: a compiled prefill (any batch and prompt length up to
the limits) and a compiled decode step (one token per sequence), KV caches updated in place, the
next token chosen on the device. With a ``tp.DeviceMesh`` both steps are sharded over its ranks
(the model's heads split, each rank's caches its share); the next token is rank 0's.

Each step returns the next tokens and the next position as device tensors that feed the following
step directly, so a decode loop moves nothing between host and device but the tokens it reports.
"""

import numpy as np

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.compile import _compile_together
from tripy.frontend.device import device as _device, default_device, placing_on
from tripy.frontend.errors import _raise_here
from tripy.frontend.input_info import InputInfo, NamedDimension
from tripy.frontend.mesh import DeviceMesh
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.sampling import sample
from tripy.frontend.tensor import Tensor


def _choose(logits, key, temperature, top_k, top_p):
    """The next token of every row of ``logits`` (B, vocab), as int32 (B, 1). Greedy choice too
    goes through tp.sample (temperature 0): one block per row, where a generic argmax reduction
    of one long row would run on a handful of threads."""
    chosen = sample(logits, key, temperature=temperature, top_k=top_k, top_p=top_p)
    return chosen.reshape((logits.shape[0], 1))


def _check_sampling(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < float("inf"):
        _raise_here(f"temperature must be a finite number >= 0 (0 picks the most likely token), but got: {temperature!r}.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        _raise_here(f"top_k must be an int >= 0 (0 keeps every token), but got: {top_k!r}.")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        _raise_here(f"top_p must be a number in (0, 1] (1 keeps every token), but got: {top_p!r}.")


class Generator:
    """Compiled prefill and decode steps of a ``LlamaForCausalLM`` for one way of choosing tokens
    (greedy when ``temperature`` is 0, else sampling with ``top_k``/``top_p``), and the generation
    loop over them.

    Sequences in a batch share their length: prompts are given as an int array ``(B, T)``.

    With ``max_batch_size`` above 1, each step holds two optimization profiles: one sequence, and
    2 to ``max_batch_size`` sequences tuned for ``max_batch_size`` (a matrix product's fastest
    kernels for eight rows are not those for one).

    With ``mesh`` (a ``tp.DeviceMesh``) the steps are compiled sharded over its ranks, each rank
    holding its share of the model's heads and of the KV caches; every rank computes the whole
    logits, and the token rank 0 chooses is the next input of every rank.
    """

    def __init__(self, model, *, max_batch_size=1, temperature=0.0, top_k=0, top_p=1.0, prefill_opt=128, mesh=None):
        _check_sampling(temperature, top_k, top_p)
        if mesh is not None and not isinstance(mesh, DeviceMesh):
            _raise_here(f"mesh must be a tp.DeviceMesh or None, but got: {mesh!r}.")
        self.model = model
        self.max_batch_size = max_batch_size
        self.mesh = mesh
        self._world = 1 if mesh is None else mesh.size
        self._device = default_device()  # where the steps' arguments are made without a mesh
        n, S = model.config.num_hidden_layers, model.max_seq_len
        batch = NamedDimension("batch", 1, 1, max_batch_size)
        c = model.cache_shape(1, self._world)
        caches = [InputInfo((batch, c[1], c[2], c[3]), dtype=model.dtype, donate=True)] * (2 * n)
        pos = InputInfo((1,), dtype=dtypes.int32)
        seed = InputInfo((1,), dtype=dtypes.int64)

        def step(tokens, pos, seed, *caches):
            logits, updated = model(tokens, pos, list(caches))
            # A different draw per position and seed; (seed, position) pairs never collide.
            key = seed * 4294967296 + cast(pos, dtypes.int64)
            return (_choose(logits, key, temperature, top_k, top_p), pos + tokens.shape[1], *updated)

        prompt_len = (1, min(prefill_opt, S), S)
        profiles = None
        if max_batch_size > 1:
            profiles = [[NamedDimension("batch", 1, 1, 1)],
                        [NamedDimension("batch", 2, max_batch_size, max_batch_size)]]
        # Both traced, then compiled at once (on a GPU their NVRTC work overlaps).
        self.prefill, self.decode = _compile_together([
            (step, dict(args=[InputInfo((batch, prompt_len), dtypes.int32), pos, seed, *caches], mesh=mesh,
                        optimization_profiles=profiles)),
            (step, dict(args=[InputInfo((batch, 1), dtypes.int32), pos, seed, *caches], mesh=mesh,
                        optimization_profiles=profiles)),
        ])

    def stream(self, prompt, max_new_tokens, *, stop_tokens=(), seed=0):
        """Yields the next token of every sequence, as an int numpy array ``(B,)``, step by step.

        ``prompt``: int token ids ``(B, T)`` (or one sequence ``(T,)``). Stops after
        ``max_new_tokens`` steps, or once every sequence has produced one of ``stop_tokens`` (the
        stop token is yielded; a sequence that has finished keeps yielding tokens until the others
        finish, which ``generate`` drops). ``seed`` (an int in [0, 2**31)) picks the sampled draws.
        """
        prompt = np.asarray(prompt)
        if prompt.ndim == 1:
            prompt = prompt[None]
        if prompt.ndim != 2 or prompt.shape[1] == 0 or not np.issubdtype(prompt.dtype, np.integer):
            _raise_here(f"The prompt must be int token ids of shape (batch, length) or (length,), but has shape {prompt.shape} and dtype {prompt.dtype}.")
        B, T = prompt.shape
        vocab, S = self.model.config.vocab_size, self.model.max_seq_len
        if not 1 <= B <= self.max_batch_size:
            _raise_here(f"The prompt holds {B} sequences, but this generator was compiled for at most {self.max_batch_size} (max_batch_size).")
        if isinstance(max_new_tokens, int) and T + max_new_tokens > S:
            _raise_here(
                f"The prompt's {T} tokens plus max_new_tokens={max_new_tokens} exceed the model's context of {S} "
                f"positions (max_seq_len); shorten the prompt or generate fewer tokens."
            )
        if prompt.min() < 0 or prompt.max() >= vocab:
            _raise_here(f"Token ids must be in [0, {vocab}), but the prompt holds {int(prompt.min())} .. {int(prompt.max())}.")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
            _raise_here(f"seed must be an int in [0, 2**31), but got: {seed!r}.")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            _raise_here(f"max_new_tokens must be an int >= 0, but got: {max_new_tokens!r}.")
        return self._steps(prompt, max_new_tokens, stop_tokens, seed)

    def _steps(self, prompt, max_new_tokens, stop_tokens, seed):
        B, T = prompt.shape
        if max_new_tokens == 0:
            return
        stop = np.array(sorted(set(int(t) for t in stop_tokens)), np.int64)
        seed_t, prompt_t, start, *caches = self._arguments(lambda: [
            Tensor(np.array([seed], np.int64)), Tensor(prompt.astype(np.int32)), Tensor(np.array([0], np.int32)),
            *self.model.empty_caches(B, self._world)])
        tokens, pos, *updated = self.prefill(prompt_t, start, seed_t, *caches)
        done = np.zeros(B, bool)
        for i in range(max_new_tokens):
            current = tokens
            if i + 1 < max_new_tokens:  # queue the next step before reading this one's tokens
                # A sharded step returns rank 0's caches; each rank's were updated in place.
                caches = updated if self.mesh is None else caches
                tokens, pos, *updated = self.decode(current, pos, seed_t, *caches)
            values = np.asarray(current).reshape(B).astype(np.int64)
            yield values
            done |= np.isin(values, stop)
            if done.all():
                return

    def _arguments(self, make):
        """The tensors ``make()`` returns, made on the steps' device; under a mesh, a list per tensor of
        each rank's, made on that rank's device (for the ranks of this process only: a process of
        torchrun holds one), so that no step copies an argument from one GPU to another."""
        if self.mesh is None:
            with placing_on(self._device):
                return make()
        per_rank = {}
        for r in self.mesh._local_ranks():
            with placing_on(_device(self.mesh.devices[r])):
                per_rank[r] = make()
        count = len(next(iter(per_rank.values())))
        return [[per_rank[r][i] if r in per_rank else None for r in range(self._world)] for i in range(count)]

    def generate(self, prompt, max_new_tokens, *, stop_tokens=(), seed=0):
        """The generated tokens of every sequence, each list ending at its first stop token."""
        prompt = np.asarray(prompt)
        single = prompt.ndim == 1
        steps = list(self.stream(prompt, max_new_tokens, stop_tokens=stop_tokens, seed=seed))
        out = []
        for row in range(len(steps[0]) if steps else (1 if single else prompt.shape[0])):
            seq = []
            for values in steps:
                seq.append(int(values[row]))
                if seq[-1] in stop_tokens:
                    break
            out.append(seq)
        return out[0] if single else out


def check_model_dtype(name):
    """tp dtype for a config's ``dtype`` (or ``torch_dtype``) name."""
    table = {"float32": dtypes.float32, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16}
    if name not in table:
        raise TripyException(f"The model's dtype '{name}' is not a float dtype Tripy runs models in ({', '.join(table)}).")
    return table[name]
