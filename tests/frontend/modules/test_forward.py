"""Modules' forward: every built-in module defines it, subclasses extend it with super().forward,
and initialize_dummy_parameters fills the parameters nothing has set."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.module import Module


BUILT_INS = [
    (lambda: tp.Linear(3, 2), (2, 3)),
    (lambda: tp.LayerNorm(3), (2, 3)),
    (lambda: tp.Embedding(4, 2), None),
    (lambda: tp.Sequential(tp.Linear(3, 3), tp.relu), (2, 3)),
    (lambda: tp.Conv(2, 2, (1, 1)), (1, 2, 2, 2)),
    (lambda: tp.ConvTranspose(2, 2, (1, 1)), (1, 2, 2, 2)),
    (lambda: tp.GroupNorm(1, 2), (1, 2, 3)),
    (lambda: tp.InstanceNorm(2), (1, 2, 3)),
    (lambda: tp.BatchNorm(2), (1, 2, 3)),
]


@pytest.mark.parametrize("make, shape", BUILT_INS, ids=lambda v: type(v()).__name__ if callable(v) else "")
def test_every_built_in_module_has_forward(make, shape):
    module = make()
    assert type(module).forward is not Module.forward
    x = tp.Tensor([[0, 3], [1, 2]], dtype=tp.int32) if shape is None else tp.iota(shape, dim=len(shape) - 1)
    np.testing.assert_array_equal(np.asarray(module.forward(x)), np.asarray(module(x)))


def test_subclass_extends_a_built_in_through_super_forward():
    class Shifted(tp.LayerNorm):
        def forward(self, x):
            return super().forward(x) + 1.0

    norm = Shifted(2)
    norm.load_state_dict({"weight": tp.ones((2,)), "bias": tp.zeros((2,))})
    np.testing.assert_allclose(np.asarray(norm(tp.Tensor([[1.0, 3.0]]))), [[0.0, 2.0]], atol=1e-3)


def test_forward_of_a_call_only_module_calls_it():
    class CallOnly(Module):
        def __call__(self, x):
            return x + 1

    assert CallOnly().forward(1) == 2


def test_initialize_dummy_parameters_replaces_only_placeholders():
    class Block(Module):
        def __init__(self):
            self.layers = [tp.Linear(2, 2), tp.LayerNorm(2)]
            self.scale = tp.Tensor([5.0, 5.0])

    block = Block()
    block.load_state_dict({"layers.1.weight": tp.Tensor([2.0, 2.0])}, strict=False)
    block.initialize_dummy_parameters()
    state = {name: np.asarray(t).tolist() for name, t in block.state_dict().items()}
    assert state == {
        "layers.0.weight": [[1.0, 1.0], [1.0, 1.0]],
        "layers.0.bias": [1.0, 1.0],
        "layers.1.weight": [2.0, 2.0],
        "layers.1.bias": [1.0, 1.0],
        "scale": [5.0, 5.0],
    }
    # Fresh modules still run on their arange placeholders (the seeds print those results).
    assert tp.Linear(2, 1)(tp.ones((1, 2))).tolist() == [[1.0]]
