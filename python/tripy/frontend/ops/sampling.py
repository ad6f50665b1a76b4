"""Token sampling for generation: one ``sample`` op, a kernel of its own on every backend (so a
decode step draws on the device and its graph replays). The core checks the values of the
arguments and names the caller's line; this module turns them into the op's attributes."""

import numbers
import operator

from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make


def sample(logits, key, temperature=1.0, top_k=0, top_p=1.0):
    """
    Draws one index along the last dim of ``logits`` for every row: an int32 tensor of shape
    ``logits.shape[:-1]``. ``logits`` is float32, float16 or bfloat16 of rank >= 1 (rows are its
    leading dims, the vocabulary ``V`` its last). ``key`` is an int64 tensor of shape ``(1,)``
    read when the op runs, so a compiled decode step draws anew with each key (for example
    ``seed + position``, computed in the graph) without compiling again. ``temperature`` (finite,
    >= 0), ``top_k`` (>= 0) and ``top_p`` (in ``(0, 1]``) are fixed when the op is built.

    The rule, which both backends compute exactly (the same key draws the same tokens on the CPU
    and the GPU):

    - ``temperature == 0``: the index of the largest logit (the first on ties; a NaN counts as
      the largest, the first NaN wins, as in ``tp.argmax``). So is the draw of a row holding a
      NaN, or whose largest ``z`` below is infinite.
    - Otherwise ``z = logits / temperature`` in float32 (the temperature rounded to float32) and
      each token weighs ``w = exp(z - max(z))``, counted in integer units of ``2**-40`` (rounded
      down, so tokens less likely than about ``1e-12`` of the most likely one weigh 0) and summed
      exactly.
    - Top-k (``0 < top_k < V``) keeps the tokens whose logit is at least the ``top_k``-th largest
      logit (all ties at the boundary are kept); otherwise every token is kept.
    - Top-p (``top_p < 1``) then keeps, of those, the tokens with ``z >= tau``, where ``tau`` is
      the largest value for which their weight reaches ``ceil(top_p * W)`` (``W``: the weight
      kept by top-k, the product in float64): the smallest nucleus, ties at the boundary kept.
    - The draw: ``u = (h >> 11) / 2**53`` in ``[0, 1)``, where ``h`` is the ``(row + 1)``-th
      output of the splitmix64 generator seeded with ``key`` (rows are numbered in row-major
      order of the leading dims); ``target = floor(u * K)`` for the kept weight ``K``; the result
      is the smallest index whose running kept weight (in index order) exceeds ``target``.

    Args:
        logits (tp.Tensor): float32, float16 or bfloat16 scores of rank >= 1; the last dim is the vocabulary.
        key (tp.Tensor): An int64 tensor of shape ``(1,)``: the random key, read when the op runs.
        temperature (float): Divides the logits; 0 picks the largest (greedy).
        top_k (int): Keeps the ``top_k`` most likely tokens; 0 keeps all.
        top_p (float): Keeps the smallest set of tokens holding this share of the weight; 1 keeps all.

    Returns:
        tp.Tensor: int32 indices of shape ``logits.shape[:-1]``.

    Raises:
        tp.TripyException: if ``logits`` or ``key`` has the wrong dtype or shape, or a setting is out
            of its range.

    Example::

        import tripy as tp

        logits = tp.Tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 0.0]])
        key = tp.Tensor([1234], dtype=tp.int64)
        assert tp.sample(logits, key, temperature=0).tolist() == [1, 0]
        tokens = tp.sample(logits, key, temperature=0.8, top_k=2)
        assert tokens.dtype == tp.int32 and tokens.shape == (2,)
        assert tokens.tolist()[0] in (1, 2)
        assert tokens.tolist() == tp.sample(logits, key, temperature=0.8, top_k=2).tolist()
    """
    if not isinstance(key, Tensor):
        _raise_here(
            f"sample: the key must be a tripy.Tensor of dtype int64 and shape (1,) (e.g. "
            f"tp.Tensor([seed], dtype=tp.int64)), but got an object of type '{type(key).__name__}'."
        )
    floats = {}
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        try:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError
            floats[name] = float(value)
        except (TypeError, OverflowError):
            _raise_here(f"sample: {name} must be a float, but got {value!r}.")
    if isinstance(top_k, bool):
        _raise_here(f"sample: top_k must be an int, but got {top_k!r}.")
    try:
        top_k = operator.index(top_k)
    except TypeError:
        _raise_here(f"sample: top_k must be an int, but got {top_k!r}.")
    if not -(2**63) <= top_k < 2**63:
        _raise_here(f"sample: top_k must be >= 0 and fit in 64 bits, but got {top_k}.")
    attrs = {"temperature": floats["temperature"], "top_k": top_k, "top_p": floats["top_p"]}
    return make("sample", [logits, key], sample=attrs)
