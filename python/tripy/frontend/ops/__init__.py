"""The public ops, one small module per family; each is a thin call into a C++ Trace op.

Importing the package binds the methods of ``tp.Tensor`` that are ops (``tensor_methods``)."""

from tripy.frontend.ops import tensor_methods  # noqa: F401 (binds Tensor's methods when imported)
