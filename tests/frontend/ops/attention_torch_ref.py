"""What the GPU attention tests share: random torch operands on the GPU, torch's SDPA in float32 as
the reference (grouped-query k/v repeated per q head), the relative-error check, and a tensor's
values moved off a 16-byte boundary. Import it after
`pytest.importorskip("torch")`."""

import torch

TDT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
TOL = {"float16": 2e-3, "bfloat16": 1.5e-2, "float32": 1e-5}


def rand(*shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed + sum(shape))
    return torch.randn(*shape, device="cuda", dtype=TDT[dtype], generator=g)


def ref(q, k, v, mask=None, causal=False):
    if k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, -3), v.repeat_interleave(rep, -3)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.float()
    # The math path in float32: the reference is then more accurate than either side.
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, is_causal=causal)


def check(got, want, dtype):
    err = (torch.linalg.norm(torch.from_dlpack(got).float() - want) / torch.linalg.norm(want)).item()
    assert err < TOL[dtype], err


def off_by_one_element(t):
    """`t`'s values at an address 2 bytes past a 16-byte boundary (a view into a larger buffer)."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    assert view.data_ptr() % 16 == 2
    return view
