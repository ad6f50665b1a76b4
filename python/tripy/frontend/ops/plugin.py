"""Plugins: custom ops called by name with ``tp.plugin``, as nvtripy calls TensorRT plugins.

Tripy has no TensorRT, so plugins come from its own registry: ``tp.register_plugin`` takes a
shape/dtype rule (Python, run where the call is traced, so shapes may be symbolic inside
``tp.compile``), CUDA C++ device code (compiled with NVRTC when a GPU program is built and saved
with the executable) and a CPU implementation (a Python function over numpy arrays). The C++
registry (``tripy/plugin.h``) holds the device code and CPU implementations; this module holds the
rules. ``CustomGeluPluginDynamic``, the plugin nvtripy documents ``tp.plugin`` with, is built in.
"""

import json
import numbers

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import _sizes
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make

# Registry key -> shape/dtype rule.
_RULES = {}


def register_plugin(name, rule, *, cpu=None, cuda_source=None, cuda_entry=None, version="1", namespace="",
                    block_size=256):
    """
    Registers (or replaces) the plugin that ``tp.plugin(name, ..., version=version,
    namespace=namespace)`` calls. Give it a CPU implementation, CUDA code, or both; a program runs
    a plugin on the device it was built for.

    Args:
        name (str): The plugin's name.
        rule (Callable): ``rule(inputs, **fields) -> (shape, dtype)``: the output's shape (ints, or the
            inputs' ``tp.DimensionSize`` values and arithmetic on them) and dtype, from the input tensors
            and the call's fields. It runs where ``tp.plugin`` is called; raise
            ``tp.TripyException`` (or any error) to reject a call.
        cpu (Callable | None): ``cpu(inputs, output, **fields)``: reads the inputs (read-only numpy arrays) and fills
            ``output`` (a writable numpy array of the rule's shape and dtype).
        cuda_source (str | None): CUDA C++ defining ``extern "C" __global__ void <cuda_entry>(PluginArgs args)``.
            ``args.inputs[i]`` and ``args.output`` hold ``data``, ``rank`` and ``shape``;
            ``args.n`` is the output's element count. The kernel runs with ``ceil(n /
            block_size)`` blocks of ``block_size`` threads. Numeric fields are macros
            ``TRIPY_FIELD_<name>``; ``h2f``/``f2h`` convert float16 (stored as ``unsigned short``).
        cuda_entry (str | None): The kernel's name in ``cuda_source``.
        version (str): Tells plugins of one name apart, as in TensorRT.
        namespace (str): Tells plugins of one name apart, as in TensorRT.
        block_size (int): CUDA threads per block.

    Raises:
        tp.TripyException: if neither ``cpu`` nor ``cuda_source`` is given, ``cuda_source`` comes
            without ``cuda_entry``, or ``block_size`` is not a positive int.

    Example::

        import numpy as np
        import tripy as tp

        def scale_rule(inputs, factor):
            return inputs[0].shape, inputs[0].dtype

        def scale_cpu(inputs, output, factor):
            output[...] = inputs[0] * factor

        tp.register_plugin("Scale", scale_rule, cpu=scale_cpu, cuda_entry="scale", cuda_source='''
        extern "C" __global__ void scale(PluginArgs args) {
          i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
          if (i < args.n) ((float*)args.output.data)[i] = ((const float*)args.inputs[0].data)[i] * TRIPY_FIELD_factor;
        }
        ''')
        x = tp.Tensor([1.0, 2.0])
        out = tp.plugin("Scale", [x], output_info=[(1, tp.float32)], factor=3.0)
        assert np.array_equal(np.asarray(out), [3.0, 6.0])
    """
    if not isinstance(name, str) or not name or not callable(rule):
        _raise_here("register_plugin needs a non-empty name and a callable rule.")
    if cpu is None and cuda_source is None:
        _raise_here(f"register_plugin('{name}'): give a CPU implementation (cpu=...), CUDA code (cuda_source=...), or both.")
    if cpu is not None and not callable(cpu):
        _raise_here(f"register_plugin('{name}'): cpu must be callable, but got: {cpu!r}.")
    if (cuda_source is None) != (cuda_entry is None):
        _raise_here(f"register_plugin('{name}'): cuda_source and cuda_entry go together.")
    if not isinstance(block_size, int) or not 1 <= block_size <= 1024:
        _raise_here(f"register_plugin('{name}'): block_size must be an int in [1, 1024], but got: {block_size!r}.")
    key = _C.plugin_key(name, str(version), namespace)
    wrapped = None
    if cpu is not None:

        def wrapped(inputs, output, fields_json):
            cpu(inputs, output, **json.loads(fields_json))

    _C.register_plugin(key, wrapped, cuda_source or "", cuda_entry or "", block_size)
    _RULES[key] = rule


def _field_value(key, value):
    """Plugin fields travel as JSON: numbers, bools, strings and (nested) lists of them."""
    if hasattr(value, "tolist") and not isinstance(value, (bool, numbers.Number)):
        value = value.tolist()  # numpy arrays and scalars
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        return [_field_value(key, v) for v in value]
    if isinstance(value, (bool, numbers.Integral)):
        return value if isinstance(value, bool) else int(value)
    if isinstance(value, (numbers.Real, str)):
        return value if isinstance(value, str) else float(value)
    _raise_here(
        f"Plugin field '{key}' must be a number, a bool, a string or a list of them, but got: {type(value).__name__}."
    )


def plugin(name, inputs, output_info, version="1", namespace="", **fields):
    """
    Calls the plugin registered as ``name`` (with ``tp.register_plugin``, or built in) on
    ``inputs``. It runs eagerly and inside ``tp.compile``; a compiled GPU executable carries the
    plugin's device code, so it runs wherever it is loaded, even where the plugin is not registered.

    Args:
        name (str): The plugin's name.
        inputs (Sequence[tp.Tensor]): The input tensors.
        output_info (Sequence[tuple[int, tp.dtype]]): ``[(rank, dtype)]`` of the output, as nvtripy takes it; it is checked against
            what the plugin's rule gives. Tripy plugins have one output.
        version (str): The plugin's version.
        namespace (str): The plugin's namespace.
        **fields (number | bool | str | Sequence): The plugin's fields: numbers, bools, strings, or lists (or numpy arrays) of them.

    Returns:
        tp.Tensor: the output tensor.

    Raises:
        tp.TripyException: if no plugin of that name, version and namespace is registered, its rule
            rejects the call, or ``output_info`` disagrees with the rule.

    Example::

        import numpy as np
        import tripy as tp

        inp = tp.iota((2, 1, 4))
        out = tp.plugin(
            name="CustomGeluPluginDynamic",
            inputs=[inp],
            # GELU has a single output which always has the same rank and data type as the input.
            output_info=[(inp.rank, inp.dtype)],
            # The GELU plugin expects a `type_id` parameter indicating the precision to use:
            # `0` indicates float32.
            type_id=0,
        )
        # tp.gelu uses erf but the plugin uses the tanh approximation.
        assert tp.allclose(out, tp.gelu(inp), rtol=1e-2)
    """
    key = _C.plugin_key(str(name), str(version), str(namespace))
    rule = _RULES.get(key)
    if rule is None:
        known = ", ".join(sorted(_RULES)) or "none"
        _raise_here(
            f"tp.plugin: no plugin is registered as '{name}' (version '{version}', namespace '{namespace}'). "
            f"Registered plugins: {known}. Register it with tp.register_plugin first."
        )
    inputs = list(inputs)
    for index, value in enumerate(inputs):
        if not isinstance(value, Tensor):
            _raise_here(f"tp.plugin: input {index} must be a tripy.Tensor, but got: {type(value).__name__}.")
    info = list(output_info) if isinstance(output_info, (list, tuple)) else None
    if not info or not all(isinstance(o, (list, tuple)) and len(o) == 2 for o in info):
        _raise_here(f"tp.plugin: output_info must be a list of (rank, dtype) pairs, but got: {output_info!r}.")
    if len(info) != 1:
        _raise_here(f"tp.plugin: Tripy plugins have one output, but output_info describes {len(info)}.")
    fields = {key_: _field_value(key_, value) for key_, value in fields.items()}
    shape, dtype = rule(inputs, **fields)
    dtype = dtypes.check_dtype(dtype, f"the dtype plugin '{name}''s rule returned")
    shape = list(shape)
    (rank, want_dtype), = info
    if rank != len(shape) or want_dtype != dtype:
        _raise_here(
            f"tp.plugin: output_info says the output has rank {rank} and dtype {getattr(want_dtype, 'name', want_dtype)}, "
            f"but plugin '{name}' gives rank {len(shape)} and dtype {dtype.name}."
        )
    return make(
        "plugin",
        inputs,
        shape=_sizes(shape, "the plugin output's shape"),
        dtype=dtype.name,
        plugin={"name": key, "fields": json.dumps(fields, sort_keys=True)},
    )


def _gelu_rule(inputs, type_id=0, **others):
    # TensorRT's sample GELU plugin: type_id 0 is float32, 1 float16; the output is like the input.
    if others:
        _raise_here(f"CustomGeluPluginDynamic takes the field type_id only, but got: {sorted(others)}.")
    if len(inputs) != 1:
        _raise_here(f"CustomGeluPluginDynamic takes one input, but got {len(inputs)}.")
    want = {0: dtypes.float32, 1: dtypes.float16}.get(type_id)
    if want is None or inputs[0].dtype != want:
        _raise_here(
            f"CustomGeluPluginDynamic: type_id {type_id!r} does not fit an input of dtype {inputs[0].dtype.name} "
            "(type_id 0 is float32, 1 is float16)."
        )
    return inputs[0].shape, inputs[0].dtype


# The built-in plugin's device code and CPU implementation live in the core (plugin_builtin.cc).
_RULES[_C.plugin_key("CustomGeluPluginDynamic", "1", "")] = _gelu_rule
