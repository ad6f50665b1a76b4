"""``tp.onnx``: ONNX models as Tripy functions. ``tp.onnx.load(path)`` reads a ``.onnx`` file (parsed by
the core, checked whole before any work) into a ``tp.onnx.Model``, which runs eagerly or compiles
with ``tp.compile`` like any function; its named dims become ``tp.NamedDimension`` values."""

from tripy.onnx.model import Model, load

__all__ = ["Model", "load"]
