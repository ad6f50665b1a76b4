"""Tripy: a debuggable, Pythonic frontend over a C++ inference compiler."""

import importlib as _importlib
import os as _os

# oneDNN's OpenMP threads otherwise spin between GEMMs; on a busy machine that halves its speed.
# Set before the core (and its OpenMP runtime) loads; a user's own setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from tripy import config, types
from tripy.exception import TripyException
from tripy.logging import logger
from tripy.utils import suggest as _suggest
from tripy.frontend.dtypes import (
    bfloat16,
    bool,
    dtype,
    float8,
    float16,
    float32,
    floating,
    int4,
    int8,
    int32,
    int64,
    integer,
)
from tripy.frontend.device import device
from tripy.frontend.tensor import DimensionSize, Tensor
from tripy.frontend.ops.creation import arange, full, full_like, iota, iota_like, ones, ones_like, tril, triu, zeros, zeros_like
from tripy.frontend.ops.elementwise import (
    ceil,
    clamp,
    cos,
    erf,
    exp,
    expm1,
    floor,
    gelu,
    leaky_relu,
    log,
    masked_fill,
    maximum,
    minimum,
    relu,
    round,
    rsqrt,
    sigmoid,
    sign,
    silu,
    sin,
    sqrt,
    tanh,
    where,
)
from tripy.frontend.ops.reduce import all, any, argmax, argmin, log_softmax, max, mean, min, prod, softmax, sum, var
from tripy.frontend.ops.shape_ops import (
    concatenate,
    expand,
    flatten,
    flip,
    gather,
    outer,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    unsqueeze,
    update_slice,
)
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.pad import pad, repeat
from tripy.frontend.ops.scan import cumsum, topk
from tripy.frontend.ops.attention import scaled_dot_product_attention
from tripy.frontend.ops.pooling import avgpool, maxpool
from tripy.frontend.ops.resize import resize
from tripy.frontend.ops.sampling import sample
from tripy.frontend.ops.misc import allclose, cast, copy, equal
from tripy.frontend.ops.quantize import dequantize, quantize
from tripy.frontend.ops.plugin import plugin, register_plugin
from tripy.frontend.ops.collectives import all_gather, all_reduce, reduce_scatter
from tripy.frontend.mesh import ColumnParallel, DeviceMesh, RowParallel, current_rank, world_size
from tripy.frontend.input_info import Bounds, DimensionInputInfo, InputInfo, NamedDimension
from tripy.frontend.executable import Executable
from tripy.frontend.profile import Profile
from tripy.frontend.stream import Stream, default_stream
from tripy.frontend.compile import compile
from tripy.frontend.module import Module
from tripy.frontend.modules.linear import Linear
from tripy.frontend.modules.layernorm import LayerNorm, RMSNorm
from tripy.frontend.modules.embedding import Embedding
from tripy.frontend.modules.sequential import Sequential
from tripy.frontend.modules.conv import Conv, ConvTranspose
from tripy.frontend.modules.norms import BatchNorm, GroupNorm, InstanceNorm
from tripy.frontend.safetensors import load_safetensors, save_safetensors
from tripy import onnx, random

__version__ = "0.1.0"

# A missing attribute of a Tripy object (Tensor.softmax) is matched against the names defined here.
_suggest.api_namespace = globals()


def __getattr__(attr):
    if attr == "llm":  # imported on first use: it needs numpy, which the rest of Tripy does not
        return _importlib.import_module("tripy.llm")
    raise _suggest.missing_attribute("tripy", attr, [n for n in globals() if not n.startswith("_")])
