"""What the model examples share: torch when it is installed, moving weights into Tripy modules by
name (from torch modules or dicts of numpy arrays), and reading results back as numpy."""

import numpy as np

import tripy as tp


def optional_torch():
    """torch, or None where it is not installed (every example then checks against numpy)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def as_tensor(value, dtype):
    """A torch tensor or numpy array as a tp.Tensor of ``dtype`` on the default device (zero-copy
    where the value already has that dtype, layout and device)."""
    if hasattr(value, "detach"):  # a torch tensor: DLPack refuses tensors that require grad
        import torch

        value = value.detach().to(getattr(torch, dtype.name)).contiguous()
    else:
        value = np.ascontiguousarray(value, dtype=np.dtype(dtype.name))
    return tp.Tensor(value)


def load_weights(module, state, ignore=()):
    """
    Copies ``state`` (name -> torch tensor or numpy array) into ``module``'s parameters of the same
    names, converting each to its parameter's dtype. Names ending in one of ``ignore`` are skipped on
    both sides (buffers that one side computes itself, tied copies). Any other name that is missing or
    unexpected is an error, so a renamed layer cannot go unnoticed.
    """
    ignore = tuple(ignore)
    params = module.state_dict()
    values = {name: value for name, value in state.items() if not name.endswith(ignore)}
    unexpected = sorted(set(values) - set(params))
    missing = sorted(n for n in params if n not in values and not n.endswith(ignore))
    if missing or unexpected:
        raise KeyError(f"weights do not match {type(module).__name__}: "
                       f"missing {missing[:8]}, unexpected {unexpected[:8]}")
    module.load_state_dict({n: as_tensor(v, params[n].dtype) for n, v in values.items()}, strict=False)


def to_numpy(tensor):
    """A tp.Tensor's values as a numpy array (copied to the host first when it lives on a GPU)."""
    if str(tensor.device) != "cpu":
        tensor = tensor.copy(tp.device("cpu"))
    return np.from_dlpack(tensor.eval())


def report(name, err, tol):
    """Prints the agreement line the examples end with; raises when the error exceeds ``tol``."""
    verdict = "agree" if err <= tol else "DISAGREE"
    print(f"{name}: max relative error {err:.2e} (tolerance {tol:.0e}): {verdict}")
    if err > tol:
        raise SystemExit(f"{name}: outputs disagree")
