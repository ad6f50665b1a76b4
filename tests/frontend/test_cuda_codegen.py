"""The CUDA code generator on programs the frontend builds (GroupNorm, softmax, gelu), run where
the CUDA headers were present at build time; no GPU is needed to generate source."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

pytestmark = pytest.mark.skipif(not hasattr(_C, "_cuda_kernel_sources"), reason="built without CUDA headers")


@pytest.mark.parametrize(
    "make",
    [
        lambda x: tp.GroupNorm(2, 4)(x),
        lambda x: tp.softmax(x, dim=-1),
        lambda x: tp.gelu(x) * 2.0,
    ],
    ids=["group_norm", "softmax", "gelu"],
)
def test_every_fused_kernel_generates(make):
    x = tp.Tensor(np.random.default_rng(0).standard_normal((2, 4, 3, 5)).astype(np.float32))
    sources = _C._cuda_kernel_sources(make(x)._node)
    assert sources, "expected at least one fused kernel"
    for src in sources:
        assert 'extern "C" __global__' in src and "struct Args" in src


def test_rmsnorm_kernel_spells_its_overflow_test_in_cuda():
    # RMSNorm's row test (mean square >= inf) holds an infinite constant, which C++ cannot spell
    # as a literal; the CPU and CUDA kernels come from the same lowering.
    norm = tp.RMSNorm(5, dtype=tp.float16)
    norm.weight = tp.ones((5,), dtype=tp.float16)
    x = tp.Tensor(np.ones((3, 5), np.float16))
    sources = _C._cuda_kernel_sources(norm(x)._node)
    assert any("__int_as_float(0x7f800000)" in src and "0x1p-96f" in src for src in sources)
