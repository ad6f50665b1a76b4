"""tp.Module: parameter discovery, state dicts, assignment checks, calling and printing.

The structural tests run against a small stand-in tensor so they do not depend on the core; the
tests at the end use the real ``tp.Tensor`` and run once the package imports.
"""

import numpy as np
import pytest

from tripy.exception import TripyException
from tripy.frontend import module as module_file
from tripy.frontend.module import Module


class FakeDType:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, FakeDType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class FakeTensor:
    """Just enough of a tensor for Module: a shape, a dtype and construction from array-likes."""

    def __init__(self, data):
        self.data = np.asarray(data)
        if isinstance(data, list) and self.data.dtype == np.float64:
            # Python floats become float32, as they do in tp.Tensor.
            self.data = self.data.astype(np.float32)
        self.shape = tuple(self.data.shape)
        self.dtype = FakeDType(str(self.data.dtype))


@pytest.fixture
def fake_tensors(monkeypatch):
    monkeypatch.setattr(module_file, "Tensor", FakeTensor)


def fake(shape, dtype="float32"):
    return FakeTensor(np.zeros(shape, dtype=dtype))


class Leaf(Module):
    def __init__(self, n=2):
        super().__init__()
        self.weight = fake((n, n))
        self.bias = fake((n,))
        self.size = n


class NoSuperInit(Module):
    # Like the seeds' GEGLU: never calls super().__init__().
    def __init__(self):
        self.proj = Leaf()
        self.out_dim = 1

    def __call__(self, x):
        return ("called", x)


class Containers(Module):
    def __init__(self):
        self.layers = [Leaf(), Leaf(3)]
        self.blocks = {"key": Leaf(), "other": [fake((1,))]}
        self.scale = fake(())
        self.not_a_parameter = [1, "two", None]


def test_parameters_and_children_without_super_init(fake_tensors):
    module = NoSuperInit()
    assert [name for name, _ in module.named_children()] == ["proj"]
    assert list(module.named_parameters()) == []
    assert list(module.state_dict()) == ["proj.weight", "proj.bias"]
    assert module("x") == ("called", "x")


def test_parameters_inside_lists_and_dicts(fake_tensors):
    module = Containers()
    assert [name for name, _ in module.named_parameters()] == ["blocks.other.0", "scale"]
    assert [name for name, _ in module.named_children()] == ["layers.0", "layers.1", "blocks.key"]
    assert list(module.state_dict()) == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
        "blocks.key.weight",
        "blocks.key.bias",
        "blocks.other.0",
        "scale",
    ]
    assert module.state_dict()["layers.1.weight"] is module.layers[1].weight


def test_load_state_dict_replaces_parameters_everywhere(fake_tensors):
    module = Containers()
    new = {name: FakeTensor(np.ones(tensor.shape, dtype="float32")) for name, tensor in module.state_dict().items()}
    missing, unexpected = module.load_state_dict(new)
    assert missing == [] and unexpected == []
    assert module.layers[1].weight is new["layers.1.weight"]
    assert module.blocks["key"].bias is new["blocks.key.bias"]
    assert module.blocks["other"][0] is new["blocks.other.0"]
    assert module.scale is new["scale"]


def test_load_state_dict_converts_array_likes(fake_tensors):
    leaf = Leaf()
    leaf.load_state_dict({"weight": np.ones((2, 2), dtype="float32"), "bias": [0.5, 0.5]}, strict=False)
    assert isinstance(leaf.weight, FakeTensor)
    assert leaf.weight.data.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_strict_load_lists_missing_and_unexpected_keys(fake_tensors):
    leaf = Leaf()
    original = leaf.weight
    with pytest.raises(TripyException) as info:
        leaf.load_state_dict({"weight": fake((2, 2)), "extra": fake((1,))})
    message = str(info.value)
    assert "Missing keys: ['bias']" in message
    assert "Unexpected keys: ['extra']" in message
    assert leaf.weight is original


def test_non_strict_load_reports_keys(fake_tensors):
    leaf = Leaf()
    result = leaf.load_state_dict({"weight": fake((2, 2)), "extra": fake((1,))}, strict=False)
    assert result == (["bias"], ["extra"])
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]


def test_load_checks_shape_and_dtype_and_changes_nothing_on_failure(fake_tensors):
    module = Containers()
    before = module.state_dict()
    bad_shape = {"layers.0.weight": fake((2, 2)), "layers.1.weight": fake((2, 2))}
    message = r"'layers.1.weight': it has shape \(3, 3\), but the new value has shape \(2, 2\)"
    with pytest.raises(TripyException, match=message):
        module.load_state_dict(bad_shape, strict=False)
    assert module.layers[0].weight is before["layers.0.weight"]

    with pytest.raises(TripyException, match="'scale': it has dtype float32, but the new value has dtype int32"):
        module.load_state_dict({"scale": fake((), "int32")}, strict=False)


def test_assigning_a_parameter_checks_shape_and_dtype(fake_tensors):
    leaf = Leaf()
    leaf.weight = fake((2, 2))
    with pytest.raises(TripyException, match=r"'weight': it has shape \(2, 2\), but the new value has shape \(3, 2\)"):
        leaf.weight = fake((3, 2))
    with pytest.raises(TripyException, match="'bias': it has dtype float32, but the new value has dtype float16"):
        leaf.bias = fake((2,), "float16")
    # Replacing a parameter with something that is not a tensor, or adding a new one, is allowed.
    leaf.bias = None
    leaf.extra = fake((5,))
    assert [name for name, _ in leaf.named_parameters()] == ["weight", "extra"]


def test_call_uses_forward():
    class WithForward(Module):
        def forward(self, x, scale=1):
            return x * scale

    assert WithForward()(3, scale=2) == 6


def test_calling_a_module_without_call_or_forward_is_an_error():
    with pytest.raises(TripyException, match=r"Module 'Module' must define `forward` \(or `__call__`\)"):
        Module()(1)


def test_str_shows_the_tree(fake_tensors):
    assert str(NoSuperInit()) == (
        "NoSuperInit(\n"
        "    proj: Leaf(\n"
        "        weight: Tensor(shape=(2, 2), dtype=float32)\n"
        "        bias: Tensor(shape=(2,), dtype=float32)\n"
        "        size=2\n"
        "    )\n"
        "    out_dim=1\n"
        ")"
    )
    assert str(Module()) == "Module()"


def test_loading_into_a_tuple_is_reported(fake_tensors):
    class Tupled(Module):
        def __init__(self):
            self.pair = (fake((1,)), fake((1,)))

    with pytest.raises(TripyException, match="'pair.0': it sits in a tuple"):
        Tupled().load_state_dict({"pair.0": fake((1,))}, strict=False)


# ---- With the real tensor --------------------------------------------------------------------


@pytest.fixture
def tp():
    tripy = pytest.importorskip("tripy")
    pytest.importorskip("tripy.frontend.tensor")
    return tripy


def test_placeholders_follow_arange(tp):
    linear = tp.Linear(2, 2)
    assert linear.weight.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert linear.bias.tolist() == [0.0, 1.0]
    assert linear.weight.dtype == tp.float32
    norm = tp.LayerNorm((2, 3))
    assert norm.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    embedding = tp.Embedding(3, 2, dtype=tp.float16)
    assert embedding.weight.dtype == tp.float16
    assert embedding.weight.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_linear_math(tp):
    linear = tp.Linear(2, 3)
    x = np.array([[1.0, 2.0]], dtype=np.float32)
    expected = x @ np.arange(6, dtype=np.float32).reshape(3, 2).T + np.arange(3, dtype=np.float32)
    assert linear(tp.Tensor(x)).tolist() == expected.tolist()
    no_bias = tp.Linear(2, 3, bias=False)
    assert no_bias.bias is None
    assert list(no_bias.state_dict()) == ["weight"]


def test_seed_geglu_values(tp):
    class GEGLU(tp.Module):
        def __init__(self, in_dim, out_dim):
            self.proj = tp.Linear(in_dim, out_dim * 2)
            self.out_dim = out_dim

        def __call__(self, x):
            proj = self.proj(x)
            x, gate = tp.split(proj, 2, proj.rank - 1)
            return x * tp.gelu(gate)

    layer = GEGLU(in_dim=2, out_dim=1)
    assert np.allclose(layer(tp.ones((1, 2))).tolist(), [[6.0]], atol=1e-4)
    out = layer(tp.Tensor([[1.0, 2.0], [2.0, 3.0]]))
    assert np.allclose(out.tolist(), [[18.0], [42.0]], atol=1e-4)


def test_real_tensor_assignment_checks(tp):
    linear = tp.Linear(2, 2)
    with pytest.raises(tp.TripyException, match="'weight': it has shape"):
        linear.weight = tp.ones((3, 2))
    with pytest.raises(tp.TripyException, match="'bias': it has dtype float32"):
        linear.bias = tp.ones((2,), dtype=tp.float16)


def test_load_state_dict_from_numpy(tp):
    linear = tp.Linear(2, 1)
    weights = {"weight": np.full((1, 2), 2.0, dtype=np.float32), "bias": np.zeros((1,), dtype=np.float32)}
    linear.load_state_dict(weights)
    assert linear(tp.ones((1, 2))).tolist() == [[4.0]]


def test_sequential_and_layernorm(tp):
    model = tp.Sequential(tp.Linear(2, 4), tp.LayerNorm(4))
    model.load_state_dict({"1.weight": tp.ones((4,)), "1.bias": tp.zeros((4,))}, strict=False)
    out = np.array(model(tp.ones((3, 2))).tolist())
    assert out.shape == (3, 4)
    assert np.allclose(out.mean(axis=-1), 0.0, atol=1e-4)
    assert np.allclose(out.var(axis=-1), 1.0, atol=1e-2)
    assert len(model) == 2 and isinstance(model[-1], tp.LayerNorm)


def test_quantized_linear_dequantizes_its_weight(tp):
    linear = tp.Linear(2, 2, quant_dtype=tp.int8, weight_quant_dim=0)
    assert linear.weight.dtype == tp.int8
    assert linear.weight_scale.shape == (2,)
    assert linear(tp.ones((1, 2))).tolist() == [[1.0, 6.0]]

