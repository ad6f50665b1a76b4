"""The GPU's folded norms and residual adds (the few-rows tile's fold forms, 9 to 16 rows of
bfloat16 x) with x off a 16-byte boundary: the layout then reads x a value at a time; against
numpy, as with x aligned. Skipped without a GPU or torch."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import off_by_one_element  # noqa: E402
from test_weight_only_dot import K, RNG, _check, _linear, _rounded  # noqa: E402
from test_weight_only_dot_folds import _norm, _rms  # noqa: E402


@pytest.mark.parametrize("rows", [9, 16])
@pytest.mark.parametrize("bits, group", [(4, 128), (8, None)])
def test_x_aligned_or_not_gives_the_folded_norm_and_residual(rows, bits, group):
    lin, w = _linear(bits, group, bits == 4, tp.bfloat16)
    norm, gamma = _norm(tp.bfloat16)
    N = w.shape[0]
    exe = tp.compile(lambda x, r: r + lin(norm(x)),
                     args=[tp.InputInfo((rows, K), dtype=tp.bfloat16), tp.InputInfo((rows, N), dtype=tp.bfloat16)])
    text = exe._impl.program_text
    assert "norm = true" in text and "residual = true" in text, text
    x = _rounded(RNG.standard_normal((rows, K)) * 3, tp.bfloat16)
    r = _rounded(RNG.standard_normal((rows, N)), tp.bfloat16)
    want = _rms(x, gamma, 1e-5) @ w.T + r
    xt = torch.tensor(x, dtype=torch.bfloat16, device="cuda")
    rt = torch.tensor(r, dtype=torch.bfloat16, device="cuda")
    for x_in in (xt, off_by_one_element(xt)):
        out = exe(tp.Tensor(x_in), tp.Tensor(rt))
        got = torch.from_dlpack(out).float().cpu().numpy().astype(np.float64)
        _check(got, want, tp.bfloat16)
