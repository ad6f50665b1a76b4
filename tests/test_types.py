"""tp.types: the annotations name what Tripy's functions accept."""

import numbers
import typing

import tripy as tp


def test_annotations_resolve_to_tripy_types():
    hints = typing.get_type_hints(_annotated, globalns={"tripy": tp})
    assert typing.get_args(hints["x"]) == (tp.Tensor, numbers.Number)
    assert typing.get_args(hints["n"]) == (int, tp.DimensionSize)
    assert typing.get_origin(hints["shape"]) is typing.get_origin(typing.Sequence[int])
    assert tp.types.ShapeLike == typing.Sequence[tp.types.IntLike]
    assert typing.get_args(hints["shape"])[0] is tp.types.IntLike or "DimensionSize" in str(hints["shape"])


def _annotated(x: tp.types.TensorLike, n: tp.types.IntLike, shape: tp.types.ShapeLike):
    return x, n, shape


def test_annotated_user_code_runs():
    def scale(x: tp.types.TensorLike, shape: tp.types.ShapeLike) -> tp.Tensor:
        return tp.reshape(x, shape) * 2

    assert scale(tp.ones((4,)), (2, 2)).tolist() == [[2.0, 2.0], [2.0, 2.0]]
