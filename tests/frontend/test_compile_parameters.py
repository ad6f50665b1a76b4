"""tp.compile freezes a module's parameters as constants, whether they were loaded or are still the
placeholders of a fresh module, and whether the module is compiled itself or reached through a
closure: the executable never recomputes them, so a Linear's bias and GELU fuse into its GEMM."""

import numpy as np
import pytest

import tripy as tp


def _placeholder_linear(in_features, out_features):
    weight = np.arange(in_features * out_features, dtype=np.float32).reshape(out_features, in_features)
    return weight, np.arange(out_features, dtype=np.float32)


def _gelu(x):
    from math import erf, sqrt

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / sqrt(2.0)))


def _kinds(exe, x):
    return [row["kind"] for row in exe.profile(x).rows]


@pytest.mark.parametrize("through", ["closure", "module"])
def test_fresh_placeholders_are_folded_like_loaded_weights(device, through):
    layer = tp.Linear(16, 8)
    if through == "closure":
        func = lambda x: tp.gelu(layer(x))
    else:
        class Block(tp.Module):
            def __init__(self):
                self.layer = layer

            def forward(self, x):
                return tp.gelu(self.layer(x))

        func = Block()
    exe = tp.compile(func, args=[tp.InputInfo(((1, 4, 8), 16), dtype=tp.float32)])
    x = np.linspace(-1, 1, 3 * 16, dtype=np.float32).reshape(3, 16) / 100
    # One kernel: no kernel regenerates the weights, and the bias and GELU ride on the GEMM.
    assert _kinds(exe, tp.Tensor(x)) == ["dot"]
    weight, bias = _placeholder_linear(16, 8)
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), _gelu(x @ weight.T + bias), rtol=1e-4, atol=1e-4)


def test_loaded_values_built_by_ops_are_folded_too(device):
    layer = tp.Linear(16, 8)
    layer.load_state_dict({"weight": tp.ones((8, 16)) * 0.5, "bias": tp.iota((8,))})
    exe = tp.compile(lambda x: tp.gelu(layer(x)), args=[tp.InputInfo((2, 16), dtype=tp.float32)])
    x = np.ones((2, 16), np.float32) * 0.1
    assert _kinds(exe, tp.Tensor(x)) == ["dot"]
    np.testing.assert_allclose(
        np.asarray(exe(tp.Tensor(x))), _gelu(x @ np.full((16, 8), 0.5, np.float32) + np.arange(8)), rtol=1e-5
    )


def test_a_constant_that_is_no_parameter_is_left_to_the_compiler(device):
    # tp.ones inside the function is not a parameter: it stays an op the compiler may fuse.
    exe = tp.compile(lambda x: x + tp.ones((2, 16)), args=[tp.InputInfo((2, 16), dtype=tp.float32)])
    assert exe(tp.zeros((2, 16))).tolist() == [[1.0] * 16] * 2


def test_a_module_attribute_set_from_a_runtime_input_is_not_evaluated(device):
    class Remember(tp.Module):
        def __init__(self):
            self.scale = tp.Tensor([2.0])

        def forward(self, x):
            self.last = x * self.scale  # computed from the input: not a constant
            return self.last + 1.0

    exe = tp.compile(Remember(), args=[tp.InputInfo((1,), dtype=tp.float32)])
    assert exe(tp.Tensor([3.0])).tolist() == [7.0]


_GLOBAL_MODEL = tp.Linear(2, 2)


def _step_over_the_global_model(x):
    return _GLOBAL_MODEL(x)


def test_the_modules_a_function_computes_with_are_found_through_closures_bound_methods_and_globals():
    # A sharded compile copies these modules' parameters to each rank's device.
    from tripy.frontend.compile import _modules_reached

    inner, outer = tp.Linear(2, 2), tp.Linear(2, 2)
    assert _modules_reached(outer) == [outer]
    assert _modules_reached(lambda x: outer(inner(x))) in ([inner, outer], [outer, inner])
    assert _modules_reached(outer.forward) == [outer]
    assert _modules_reached(_step_over_the_global_model) == [_GLOBAL_MODEL]
    assert _modules_reached(lambda x: x + 1.0) == []
