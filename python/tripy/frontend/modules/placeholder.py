"""Deterministic placeholder values for parameters, so a model runs before its weights are loaded.

A parameter of shape S holds ``arange(prod(S))`` reshaped to S in its dtype (the seeds' printed
outputs depend on exactly these values).
"""

import math


def placeholder(shape, dtype):
    """
    ``arange(prod(shape))`` reshaped to ``shape``, in ``dtype``.

    Example::

        import tripy as tp
        from tripy.frontend.modules.placeholder import placeholder

        assert placeholder((2, 2), tp.float32).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    """
    import tripy as tp

    shape = tuple(shape)
    values = tp.arange(math.prod(shape), dtype=dtype)
    return values if len(shape) == 1 else tp.reshape(values, shape)
