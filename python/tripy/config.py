"""Global switches users may set at run time (``tp.config.<name> = ...``).

Each starts from an environment variable where one exists, so a run can be reconfigured without
editing code.

Example::

    import tripy as tp

    previous = tp.config.enable_input_validation
    tp.config.enable_input_validation = False  # trust the inputs of every executable call
    tp.config.enable_input_validation = previous
"""

import os


def _env_list(name):
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


enable_input_validation = True
"""Whether ``tp.Executable`` checks the dtype, rank, device and dimension bounds of every input.
Turning it off saves a little time per call once a program is known to be correct."""

extra_error_information = _env_list("TRIPY_EXTRA_ERROR_INFORMATION")
"""Kinds of extra context added to error messages (comma-separated in the environment variable
``TRIPY_EXTRA_ERROR_INFORMATION``); ``["all"]`` adds everything available."""

default_device = os.environ.get("TRIPY_DEVICE") or None
"""The device new tensors are placed on, like ``"cpu"`` or ``"gpu:0"`` (from ``TRIPY_DEVICE``).
``None`` means ``gpu:0`` where a CUDA GPU is present and ``cpu`` otherwise."""
