"""``tp.Sequential``: calls its layers one after another."""

from tripy.frontend.errors import _raise_here
from tripy.frontend.module import Module


class Sequential(Module):
    """
    Calls each layer on the previous one's output. Layers are given in order (named ``"0"``,
    ``"1"``, ...) or as one dict from names to layers. A layer is a Module or any callable taking
    one tensor (``tp.gelu``, say); parameters are named after their layer (``"0.weight"``).

    Args:
        *modules (tp.Module | Callable | dict[str, tp.Module]): The layers in order, or one dict of
            them by name.

    Raises:
        tp.TripyException: if a layer is not callable.

    Example::

        import tripy as tp

        model = tp.Sequential(tp.Linear(2, 3), tp.gelu, tp.Linear(3, 1))
        assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert model(tp.ones((1, 2))).shape == (1, 1)

        named = tp.Sequential({"proj": tp.Linear(2, 2), "act": tp.relu})
        assert list(named.state_dict()) == ["proj.weight", "proj.bias"]
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            named = list(modules[0].items())
        else:
            named = [(str(index), layer) for index, layer in enumerate(modules)]
        for name, layer in named:
            if not isinstance(name, str) or not name or "." in name or hasattr(Sequential, name):
                _raise_here(
                    f"Sequential layer names must be non-empty strings without dots that do not clash with "
                    f"Sequential's own attributes, but got: {name!r}."
                )
            if not callable(layer):
                _raise_here(f"Sequential layer {name!r} must be a Module or a callable, but got: {layer!r}.")
            # Names like "0" are not identifiers, so they go straight into the instance dict.
            self.__dict__[name] = layer
        self._layer_names = [name for name, _ in named]

    def forward(self, x):
        """
        Calls each layer on the previous layer's output, starting with ``x``.

        Args:
            x (tp.Tensor): The first layer's input.

        Returns:
            tp.Tensor: the last layer's output.

        Raises:
            tp.TripyException: as the layers raise.
        """
        for layer in self:
            x = layer(x)
        return x

    def __len__(self):
        return len(self._layer_names)

    def __iter__(self):
        return (self.__dict__[name] for name in self._layer_names)

    def __getitem__(self, key):
        """A layer by position (``model[0]``, ``model[-1]``) or by name (``model["proj"]``)."""
        if isinstance(key, int):
            return self.__dict__[self._layer_names[key]]
        if key not in self._layer_names:
            _raise_here(f"Sequential has no layer {key!r}; its layers are: {self._layer_names}.")
        return self.__dict__[key]
