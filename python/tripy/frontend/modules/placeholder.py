"""Deterministic placeholder values for parameters, so a model runs before its weights are loaded.

A parameter of shape S holds ``arange(prod(S))`` reshaped to S in its dtype (the quickstart's printed
outputs depend on exactly these values). nvtripy instead leaves parameters unset until they are
loaded or ``initialize_dummy_parameters()`` fills them with ones; here calling a fresh module must
work (the quickstart does it), so placeholders are real tensors and are remembered as placeholders:
``initialize_dummy_parameters()`` replaces exactly those, as nvtripy would.
"""

import math
import weakref

from tripy.frontend.ops.creation import arange
from tripy.frontend.ops.shape_ops import reshape

# id(tensor) -> weak reference: the tensors placeholder() made (tensors compare elementwise, so
# they cannot sit in a WeakSet).
_made = {}


def placeholder(shape, dtype):
    """
    ``arange(prod(shape))`` reshaped to ``shape``, in ``dtype``.

    Example::

        import tripy as tp
        from tripy.frontend.modules.placeholder import placeholder

        assert placeholder((2, 2), tp.float32).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    """
    shape = tuple(shape)
    values = arange(math.prod(shape), dtype=dtype)
    return remember(values if len(shape) == 1 else reshape(values, shape))


def remember(tensor):
    """Marks ``tensor`` as a placeholder (for values derived from one, like a quantized weight)."""
    key = id(tensor)
    _made[key] = weakref.ref(tensor, lambda _: _made.pop(key, None))
    return tensor


def is_placeholder(tensor):
    """True if ``tensor`` is a placeholder that nothing has replaced."""
    ref = _made.get(id(tensor))
    return ref is not None and ref() is tensor
