"""Type annotations for user code: ``tp.types.TensorLike``, ``ShapeLike`` and ``IntLike``.

They describe what Tripy's functions accept, so type-annotated programs (and nvtripy ports) can
name them; nothing in Tripy checks values against them at run time.
"""

import numbers
from typing import Sequence, Union

TensorLike = Union["tripy.Tensor", numbers.Number]
"""A ``tp.Tensor`` or a Python number, which becomes a tensor where one is needed."""

IntLike = Union[int, "tripy.DimensionSize"]
"""An int or a ``tp.DimensionSize`` (a size that may be known only at run time)."""

ShapeLike = Sequence[IntLike]
"""A shape: a sequence of ``IntLike``, such as ``(2, x.shape[1])``."""

__all__ = ["TensorLike", "IntLike", "ShapeLike"]
