"""``tp.onnx.load`` and the model it returns: an ONNX graph read by the core (core/src/onnx/), checked
whole before any work (every node's op type, opset, attributes and dtypes against the converter
table, ``converters.py``), then run as Tripy ops, eagerly or under ``tp.compile``."""

import inspect
import keyword
import os
import re

from tripy import _C
from tripy.frontend.device import placing_device, placing_on, resolve as _resolve_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.input_info import InputInfo, NamedDimension
from tripy.frontend.paths import path_argument, quoted_path
from tripy.frontend.tensor import Tensor
from tripy.onnx import patterns
from tripy.onnx.converters import problems_of, run_graph, scalar_constant
from tripy.onnx.graph import Graph, Sequence, dtype_of
from tripy.utils.stack_info import capture_user_frames



def _parameter_name(name, taken):
    """A Python identifier for an ONNX input name ("input.1" -> "input_1"), unique among ``taken``."""
    text = re.sub(r"\W", "_", name) or "input"
    if text[0].isdigit() or keyword.iskeyword(text):
        text = "input_" + text
    while text in taken:
        text += "_"
    taken.add(text)
    return text


def _input_value(name, value, container):
    """An input as the converters take it: a tensor, a ``Sequence`` for an ONNX sequence (from a
    list or tuple of tensors), None for an empty optional; ``container`` is its declared kind."""
    kinds = container.split()
    if kinds[:1] == ["optional"]:
        return None if value is None else _input_value(name, value, " ".join(kinds[1:]))
    if kinds[:1] == ["sequence"]:
        if not isinstance(value, (list, tuple)):
            _raise_here(f"The input {name!r} is a sequence: it takes a list of tensors, not {type(value).__name__}.")
        return Sequence(_input_value(name, v, " ".join(kinds[1:])) for v in value)
    if not isinstance(value, Tensor):
        _raise_here(f"The input {name!r} must be a tripy.Tensor, but got {type(value).__name__}.")
    return value


class Model:
    """
    An ONNX model loaded by ``tp.onnx.load``: call it like a function of its inputs (positionally,
    or by their ONNX names as keywords), eagerly or inside ``tp.compile``. Its initializers are
    tensors over the loaded file, frozen into a compiled executable as constants. ``device`` is
    where they are (``tp.onnx.load``'s ``device``); an eager call makes the constants its ops need
    there too, so its inputs belong on that device.

    Example::

        import os
        import tempfile

        import onnx
        from onnx import TensorProto, helper

        import tripy as tp

        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "relu",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        )
        path = os.path.join(tempfile.mkdtemp(), "relu.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

        model = tp.onnx.load(path)
        assert model.input_names == ["x"] and model.dim_names == ["batch"]
        assert model(tp.Tensor([[-1.0, 0.0, 2.0]])).tolist() == [[0.0, 0.0, 2.0]]
    """

    def __init__(self, path, contents, graph, device):
        self.path = path
        self.device = device
        self._contents = contents
        self._graph = graph
        self.input_names = [name for name, _, _ in graph.inputs]
        self.output_names = [name for name, _, _ in graph.outputs]
        taken = set()
        self._parameters = [_parameter_name(name, taken) for name in self.input_names]
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in self._parameters]
        )

    @property
    def opset(self):
        """
        The version of the standard ONNX op set (domain ``""``) the model was written for.

        Returns:
            int: the opset version.

        Example::

            import tripy as tp
            import os, tempfile
            import onnx
            from onnx import TensorProto, helper

            graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
            path = os.path.join(tempfile.mkdtemp(), "neg.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
            assert tp.onnx.load(path).opset == 13
        """
        return self._graph.opset

    @property
    def dim_names(self):
        """
        The named dims (ONNX ``dim_param``) of the model's inputs, in the order they first appear.

        Returns:
            list[str]: the names; ``input_infos`` takes a range for each.

        Example::

            import tripy as tp
            import os, tempfile
            import onnx
            from onnx import TensorProto, helper

            graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g",
                [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
                 helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 4])],
                [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["n", 4])])
            path = os.path.join(tempfile.mkdtemp(), "add.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
            assert tp.onnx.load(path).dim_names == ["n"]
        """
        names = []
        for _, _, dims in self._graph.inputs:
            for d in dims or []:
                if isinstance(d, str) and d not in names:
                    names.append(d)
        return names

    def input_infos(self, dims=None):
        """
        The ``tp.InputInfo`` of each input, by name, for ``tp.compile(model, kwargs=...)``: fixed
        dims as they are declared, and each named dim (``dim_param``) a ``tp.NamedDimension`` with
        the range given for its name, so inputs that share a name share the size at run time. A dim
        the model leaves unknown takes a range under the key ``"INPUT[i]"`` (input name and dim).

        Args:
            dims (dict[str, int | tuple[int, int, int]] | None): A size, or a ``(min, opt, max)``
                range, for each named or unknown dim.

        Returns:
            dict[str, tp.InputInfo]: one per input, keyed by the parameter names ``tp.compile``
            passes them by (the ONNX names made into Python identifiers).

        Raises:
            tp.TripyException: if a named or unknown dim has no range, a key names no dim, or an
                input's dtype is not one Tripy has.

        Example::

            import tripy as tp
            import os, tempfile
            import onnx
            from onnx import TensorProto, helper

            graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g",
                [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
                 helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 4])],
                [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["n", 4])])
            path = os.path.join(tempfile.mkdtemp(), "add.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

            model = tp.onnx.load(path)
            exe = tp.compile(model, kwargs=model.input_infos({"n": (1, 2, 8)}))
            out = exe(a=tp.ones((3, 4)), b=tp.ones((3, 4)))
            assert out.shape == (3, 4)
        """
        dims = dict(dims or {})
        used = set()
        infos = {}
        for (name, elem_type, shape), parameter in zip(self._graph.inputs, self._parameters):
            if name in self._graph.containers:
                _raise_here(f"The input {name!r} of {quoted_path(self.path)} is a {self._graph.containers[name]}, "
                            "not a tensor: call the model eagerly with a list of tensors for it.")
            dtype = dtype_of(elem_type)
            if dtype is None:
                _raise_here(f"The input {name!r} of {quoted_path(self.path)} has the dtype "
                            f"{_C.onnx_elem_type_name(elem_type)}, which Tripy does not have.")
            if shape is None:
                _raise_here(f"The input {name!r} of {quoted_path(self.path)} has no declared shape: "
                            "compile the model as a function of your own with tp.InputInfo for it.")
            entries = []
            for i, d in enumerate(shape):
                if isinstance(d, int):
                    entries.append(d)
                    continue
                key = d if isinstance(d, str) else f"{name}[{i}]"
                if key not in dims:
                    what = f"the named dim {key!r}" if isinstance(d, str) else f"dim {i} of the input {name!r}"
                    _raise_here(f"input_infos needs a size or a (min, opt, max) range for {what} (the key {key!r}).")
                used.add(key)
                bounds = dims[key]
                if isinstance(bounds, int):
                    bounds = (bounds, bounds, bounds)
                if not isinstance(bounds, (tuple, list)) or len(bounds) != 3:
                    _raise_here(f"input_infos: the range of {key!r} must be an int or (min, opt, max), not {bounds!r}.")
                entries.append(NamedDimension(key, *bounds) if isinstance(d, str) else tuple(bounds))
            infos[parameter] = InputInfo(tuple(entries), dtype=dtype)
        unknown = sorted(set(dims) - used)
        if unknown:
            _raise_here(f"input_infos: {unknown} name no dim of the model's inputs (its named dims: {self.dim_names}).")
        return infos

    def __call__(self, *args, **kwargs):
        """
        Runs the model on tensors: its inputs positionally or by name (the ONNX name or the
        parameter name of ``inspect.signature(model)``).

        Args:
            *args (tp.Tensor): The inputs in the model's order; an ONNX sequence input takes a list
                of tensors, and an optional input a tensor (or list) or None.
            **kwargs (tp.Tensor): The inputs by name.

        Returns:
            tp.Tensor | tuple[tp.Tensor, ...]: the model's output, or a tuple of its outputs (a
            sequence output is a list of tensors, an empty optional None).

        Raises:
            tp.TripyException: if an input is missing, unknown, given twice, or not of its kind (a
                tensor, a list of tensors for a sequence), or a node's op fails its checks on the
                given inputs.
        """
        if len(args) > len(self.input_names):
            _raise_here(f"The model takes {len(self.input_names)} inputs, but got {len(args)} positional arguments.")
        values = dict(zip(self.input_names, args))
        for key, value in kwargs.items():
            name = key if key in self.input_names else (
                self.input_names[self._parameters.index(key)] if key in self._parameters else None)
            if name is None:
                _raise_here(f"The model has no input {key!r} (its inputs: {self.input_names}).")
            if name in values:
                _raise_here(f"The input {name!r} is given twice.")
            values[name] = value
        missing = [n for n in self.input_names if n not in values]
        if missing:
            _raise_here(f"The model's inputs {missing} are missing.")
        values = {name: _input_value(name, value, self._graph.containers.get(name, ""))
                  for name, value in values.items()}
        # The constants the converters make go where the weights are; under tp.compile, to the
        # device it compiles for.
        with placing_on(placing_device() or self.device):
            outputs = run_graph(self._graph, values)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self):
        return f"tp.onnx.Model({quoted_path(self.path)}, inputs={self.input_names}, outputs={self.output_names})"


def load(path, device=None):
    """
    Loads an ONNX model (a ``.onnx`` file) and checks it whole before any work: every node's op
    type and opset (the standard domain, up to opset 21), attributes and dtypes. One
    ``tp.TripyException`` lists every node Tripy cannot run, with what is missing. Initializers
    become tensors over the memory-mapped file (or its external data files, which must lie inside
    the model's folder) without a copy on the CPU.

    Args:
        path (str | os.PathLike): The ``.onnx`` file.
        device (tp.device | str | None): Where the weights go; the default device when omitted.

    Returns:
        tp.onnx.Model: the model, to call on tensors or to pass to ``tp.compile``.

    Raises:
        tp.TripyException: if the file is missing or damaged (truncated, a cycle, a name nothing
            defines, tensor data that does not match its shape, external data outside the folder)
            or holds ops, attributes or dtypes Tripy cannot run.

    Example::

        import os
        import tempfile

        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        import tripy as tp

        weight = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w")
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])], "linear",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])],
            initializer=[weight],
        )
        path = os.path.join(tempfile.mkdtemp(), "linear.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

        model = tp.onnx.load(path)
        exe = tp.compile(model, kwargs=model.input_infos({"batch": (1, 2, 4)}))
        assert exe(x=tp.ones((2, 3))).tolist() == [[6.0, 9.0], [6.0, 9.0]]
    """
    frames = capture_user_frames()
    if not isinstance(path, (str, bytes, os.PathLike)):
        _raise_here(f"tp.onnx.load: the path must be a str, bytes or os.PathLike, not {type(path).__name__}.")
    name = path_argument(path, "tp.onnx.load")
    device = _resolve_device(device)
    contents = _C.load_onnx(name, str(device), frames)
    graph = Graph.from_contents(contents)
    problems = problems_of(graph)
    if problems:
        shown = "\n".join(f"    {p}" for p in problems[:50])
        more = f"\n    ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        _raise_here(f"Cannot run the ONNX model {quoted_path(name)}: {len(problems)} problem(s) found before any "
                    f"work:\n{shown}{more}")
    graph.nodes = patterns.fuse(graph, lambda value: scalar_constant(graph, value))
    return Model(os.fsdecode(name), contents, graph, device)
