"""``tp.Module``: a reusable block whose Tensor attributes are its parameters.

Nothing is registered: parameters and children are found by looking at the instance's attributes
(and inside lists, tuples and dicts among them) whenever they are asked for. That is why a subclass
works even when its ``__init__`` never calls ``super().__init__()``, as the quickstart's GEGLU does.
"""

import weakref
from collections import namedtuple

from tripy.frontend.errors import _raise_here
from tripy.frontend.modules.placeholder import is_placeholder
from tripy.frontend.ops.creation import ones
from tripy.frontend.tensor import Tensor

LoadResult = namedtuple("LoadResult", ["missing_keys", "unexpected_keys"])

# id(tensor) -> weak reference, for every tensor set as a module's parameter (assigned, or loaded
# by load_state_dict): tp.compile freezes the ones its graph reads as constants, whether they were
# loaded or are still placeholders. Tensors compare elementwise, so they cannot sit in a WeakSet.
_parameters = {}


def _remember_parameters(value):
    if isinstance(value, Tensor):
        key = id(value)
        if key not in _parameters:
            _parameters[key] = weakref.ref(value, lambda _: _parameters.pop(key, None))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _remember_parameters(item)
    elif isinstance(value, dict):
        for item in value.values():
            _remember_parameters(item)


def known_parameters():
    """Every live tensor that has been set as some module's parameter."""
    return [tensor for tensor in (ref() for ref in list(_parameters.values())) if tensor is not None]


def _static_shape(tensor):
    shape = tuple(tensor.shape)
    return shape if all(isinstance(dim, int) for dim in shape) else None


def _dtype_name(dtype):
    return getattr(dtype, "name", str(dtype))


def _check_compatible(name, current, new, rule=None):
    """
    Raises unless ``new`` may replace the parameter ``current``: same dtype, same shape, or what
    the module's ``rule`` for it allows (a tuple of dtypes, and whether the shape must match).
    ``current`` is None for an optional parameter that is not set.
    """
    allowed, check_shape = rule if rule is not None else ((current.dtype,) if current is not None else None, True)
    if allowed is not None and new.dtype not in allowed:
        _raise_here(
            f"Cannot set parameter '{name}': it has dtype {' or '.join(_dtype_name(d) for d in allowed)}, "
            f"but the new value has dtype {_dtype_name(new.dtype)}."
        )
    if current is None or not check_shape:
        return
    current_shape, new_shape = _static_shape(current), _static_shape(new)
    # Shapes known only at run time (inside compile) cannot be compared here.
    if current_shape is not None and new_shape is not None and current_shape != new_shape:
        _raise_here(
            f"Cannot set parameter '{name}': it has shape {current_shape}, but the new value has shape {new_shape}."
        )


def _members(module):
    """
    Yields ``(name, value, holder, key)`` for every Tensor and Module that ``module`` holds, directly
    or inside lists, tuples and dicts; ``holder[key]`` (or ``holder.key``) is where it sits.
    """
    def visit(name, value, holder, key):
        if isinstance(value, (Tensor, Module)):
            yield name, value, holder, key
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                yield from visit(f"{name}.{index}", item, value, index)
        elif isinstance(value, dict):
            for item_key, item in value.items():
                yield from visit(f"{name}.{item_key}", item, value, item_key)

    for name, value in list(vars(module).items()):
        yield from visit(name, value, module, name)


def _parameter_slots(module, prefix="", optional=False):
    """
    Dotted name -> (holder, key, tensor) for every parameter of ``module`` and its descendants;
    with ``optional``, also the optional parameters that are unset (tensor None).
    """
    slots = {}
    for name, value, holder, key in _members(module):
        if isinstance(value, Module):
            slots.update(_parameter_slots(value, f"{prefix}{name}.", optional))
        else:
            slots[prefix + name] = (holder, key, value)
    if optional:
        for name in module._optional_parameters:
            if getattr(module, name, None) is None:
                slots[prefix + name] = (module, name, None)
    return slots


class Module:
    """
    Base class of reusable blocks. Attributes that are ``tp.Tensor`` values are the module's parameters;
    attributes that are Modules are its children; either may also sit in a list or a dict.
    A subclass defines ``forward`` (or ``__call__``) to compute its output.

    Example::

        import tripy as tp

        class AddBias(tp.Module):
            def __init__(self):
                super().__init__()
                self.bias = tp.Tensor([1.0, 2.0])

            def __call__(self, x):
                return x + self.bias

        add_bias = AddBias()
        assert list(add_bias.state_dict()) == ["bias"]
        assert tp.equal(add_bias(tp.Tensor([1.0, 1.0])), tp.Tensor([2.0, 3.0]))
    """

    # Attributes that are parameters when set and may stay None (a quantized Linear's input_scale):
    # load_state_dict accepts them and does not miss them.
    _optional_parameters = ()

    def __init__(self):
        # Nothing to set up: parameters and children are found from the attributes when needed.
        pass

    def _parameter_rule(self, name):
        """What may replace parameter ``name``: None for the same dtype and shape, else a tuple
        (dtypes, whether the shape must match). Modules whose parameters take several forms say so."""
        return None

    def __setattr__(self, name, value):
        current = self.__dict__.get(name)
        if isinstance(value, Tensor) and (
            isinstance(current, Tensor) or (current is None and name in self._optional_parameters)
        ):
            _check_compatible(name, current, value, self._parameter_rule(name))
        if not isinstance(value, Module):
            _remember_parameters(value)
        object.__setattr__(self, name, value)

    def __call__(self, *args, **kwargs):
        """Calls ``forward``; a subclass may define ``__call__`` itself instead, as the quickstart's modules do."""
        if type(self).forward is Module.forward:
            _raise_here(f"Module '{type(self).__name__}' must define `forward` (or `__call__`) to be called.")
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """
        Computes the module's output. Subclasses define it (or ``__call__``); the built-in modules
        define it, so a subclass can extend one with ``super().forward(x)``. On a module that
        defines only ``__call__``, ``forward`` calls that.

        Args:
            *args (Any): The inputs, as the subclass defines them.
            **kwargs (Any): Keyword inputs, likewise.

        Returns:
            tp.Tensor | tuple: what the subclass computes.

        Raises:
            tp.TripyException: if the module defines neither ``forward`` nor ``__call__``.

        Example::

            import tripy as tp

            class Doubled(tp.Linear):
                def forward(self, x):
                    return super().forward(x) * 2

            layer = Doubled(2, 1)
            layer.load_state_dict({"weight": tp.ones((1, 2)), "bias": tp.zeros((1,))})
            assert layer(tp.ones((1, 2))).tolist() == [[4.0]]
            assert layer.forward(tp.ones((1, 2))).tolist() == [[4.0]]
        """
        if type(self).__call__ is not Module.__call__:
            return self(*args, **kwargs)
        _raise_here(f"Module '{type(self).__name__}' must define `forward` (or `__call__`) to be called.")

    def named_parameters(self):
        """
        Yields ``(name, tensor)`` for this module's own parameters (not its children's); a
        parameter in a list or dict is named like ``"weights.0"``.

        Returns:
            Iterator[tuple[str, tp.Tensor]]: the parameters by name.

        Example::

            import tripy as tp

            linear = tp.Linear(2, 3)
            assert [name for name, _ in linear.named_parameters()] == ["weight", "bias"]
        """
        for name, value, _, _ in _members(self):
            if not isinstance(value, Module):
                yield name, value

    def named_children(self):
        """
        Yields ``(name, module)`` for this module's immediate children.

        Returns:
            Iterator[tuple[str, tp.Module]]: the children by name.

        Example::

            import tripy as tp

            model = tp.Sequential(tp.Linear(2, 3), tp.Linear(3, 1))
            assert [name for name, _ in model.named_children()] == ["0", "1"]
        """
        for name, value, _, _ in _members(self):
            if isinstance(value, Module):
                yield name, value

    def state_dict(self):
        """
        Returns every parameter of this module and its descendants, by dotted name.

        Returns:
            dict[str, tp.Tensor]: every parameter, by dotted name (``"layers.0.weight"``).

        Example::

            import tripy as tp

            class Block(tp.Module):
                def __init__(self):
                    self.layers = [tp.Linear(2, 2), tp.Linear(2, 2, bias=False)]

            assert list(Block().state_dict()) == ["layers.0.weight", "layers.0.bias", "layers.1.weight"]
        """
        return {name: tensor for name, (_, _, tensor) in _parameter_slots(self).items()}

    def load_state_dict(self, state_dict, strict=True):
        """
        Replaces parameters with the values in ``state_dict`` (Tensors, or anything ``tp.Tensor``
        accepts, like numpy arrays), checking that each keeps its shape and dtype. Nothing is
        changed if any check fails.

        Returns ``(missing_keys, unexpected_keys)``: parameters absent from ``state_dict`` and keys
        that name no parameter. With ``strict=True`` either is an error.

        Args:
            state_dict (dict[str, tp.Tensor | Any]): New values by dotted name.
            strict (bool): Whether a missing or unexpected key is an error.

        Returns:
            LoadResult: a named tuple ``(missing_keys, unexpected_keys)`` of lists of names.

        Raises:
            tp.TripyException: if a value's shape or dtype does not fit its parameter, a value cannot
                become a tensor, or (``strict``) a key is missing or unexpected.

        Example::

            import tripy as tp

            linear = tp.Linear(2, 1)
            missing, unexpected = linear.load_state_dict({"weight": tp.ones((1, 2))}, strict=False)
            assert missing == ["bias"] and unexpected == []
            assert tp.equal(linear.weight, tp.ones((1, 2)))
        """
        slots = _parameter_slots(self, optional=True)
        missing = [name for name, (_, _, current) in slots.items() if name not in state_dict and current is not None]
        unexpected = [name for name in state_dict if name not in slots]
        if strict and (missing or unexpected):
            _raise_here(
                f"load_state_dict found {len(missing)} missing and {len(unexpected)} unexpected key(s) "
                f"for '{type(self).__name__}'.\n    Missing keys: {missing}\n    Unexpected keys: {unexpected}\n"
                "Pass strict=False to load the matching keys only."
            )

        updates = []
        # Check everything first so a bad entry leaves the module untouched.
        for name, value in state_dict.items():
            if name not in slots:
                continue
            holder, key, current = slots[name]
            if isinstance(holder, tuple):
                _raise_here(f"Cannot load parameter '{name}': it sits in a tuple; hold it in a list instead.")
            new = value if isinstance(value, Tensor) else Tensor(value)
            rule = holder._parameter_rule(key) if isinstance(holder, Module) else None
            _check_compatible(name, current, new, rule)
            updates.append((holder, key, new))

        for holder, key, new in updates:
            _remember_parameters(new)
            if isinstance(holder, Module):
                object.__setattr__(holder, key, new)
            else:
                holder[key] = new
        return LoadResult(missing, unexpected)

    def initialize_dummy_parameters(self):
        """
        Replaces every parameter that still holds its placeholder (nothing loaded or assigned) with
        ones of its shape and dtype, the dummy values nvtripy uses; loaded parameters are kept.

        Example::

            import tripy as tp

            linear = tp.Linear(2, 2)
            linear.load_state_dict({"bias": tp.zeros((2,))}, strict=False)
            linear.initialize_dummy_parameters()
            assert linear.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
            assert linear.bias.tolist() == [0.0, 0.0]
        """
        dummies = {
            name: ones(tensor.shape, tensor.dtype)
            for name, (_, _, tensor) in _parameter_slots(self).items()
            if is_placeholder(tensor)
        }
        self.load_state_dict(dummies, strict=False)

    def __str__(self):
        lines = []
        for name, value, _, _ in _members(self):
            if isinstance(value, Module):
                lines.append(f"{name}: {value}")
            else:
                lines.append(f"{name}: Tensor(shape={tuple(value.shape)}, dtype={_dtype_name(value.dtype)})")
        # Plain settings (sizes, flags) help tell modules of one class apart.
        for name, value in vars(self).items():
            if not name.startswith("_") and isinstance(value, (bool, int, float, str)):
                lines.append(f"{name}={value!r}")
        if not lines:
            return f"{type(self).__name__}()"
        body = "\n".join(lines).replace("\n", "\n    ")
        return f"{type(self).__name__}(\n    {body}\n)"

    __repr__ = __str__
