"""ONNX's signal ops as Tripy ops: the windows (Hann, Hamming, Blackman) as constants of their
size, DFT as products with cosine and sine matrices along the transformed axis (static lengths),
STFT as strided frames of the signal, windowed, through the same DFT; MelWeightMatrix computed at
load, as a constant, from its five scalar inputs. Sizes given as graph inputs are read when the
model runs eagerly (a compiled model needs them constant). Their rows join the
converter table in ``converters.py``."""

import math

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.shape_ops import concatenate, permute, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.onnx.graph import _axis, _flat, dtype_of
from tripy.onnx.rows import Row, dtype_attr

_WINDOWS = {
    "HannWindow": lambda n, size: 0.5 - 0.5 * math.cos(2 * math.pi * n / size),
    "HammingWindow": lambda n, size: 25 / 46 - 21 / 46 * math.cos(2 * math.pi * n / size),
    "BlackmanWindow": lambda n, size: 0.42 - 0.5 * math.cos(2 * math.pi * n / size) + 0.08 * math.cos(
        4 * math.pi * n / size),
}


def _scalar(ctx, n, i):
    return int(_flat(ctx.values(n.inputs[i], n))[0])


def _window(ctx, n):
    size = _scalar(ctx, n, 0)
    span = size if n.attr("periodic", 1) else size - 1
    values = [_WINDOWS[n.op_type](i, span) if span else 1.0 for i in range(size)]
    return Tensor(values, dtype=dtype_of(n.attr("output_datatype", 1)))


def _fit_last(t, n):
    """``t`` (or None) padded with zeros or cut to ``n`` along its last dim."""
    if t is None or t.shape[-1] == n:
        return t
    return pad(t, [(0, 0)] * (t.rank - 1) + [(0, n - t.shape[-1])]) if t.shape[-1] < n else t[..., :n]


def dft_last(real, imag, length, inverse=False, onesided=False):
    """(real, imag) of the DFT of length ``length`` along the last dim of ``real`` (and ``imag``,
    or None for a real signal), padded with zeros or cut to ``length``."""
    real, imag = _fit_last(real, length), _fit_last(imag, length)
    bins = length // 2 + 1 if onesided else length
    angle = [[2 * math.pi * ((i * k) % length) / length for k in range(bins)] for i in range(length)]
    cos = Tensor([[math.cos(a) for a in row] for row in angle], dtype=real.dtype)
    sin = Tensor([[math.sin(a) for a in row] for row in angle], dtype=real.dtype)
    sign = 1.0 if inverse else -1.0  # e^(sign * 2 pi i k n / N)
    out_real = matmul(real, cos)
    out_imag = matmul(real, sin) * sign
    if imag is not None:
        out_real = out_real - matmul(imag, sin) * sign
        out_imag = out_imag + matmul(imag, cos)
    if inverse:
        out_real, out_imag = out_real / float(length), out_imag / float(length)
    return out_real, out_imag


def irfft_last(real, imag, length):
    """The real signal of length ``length`` whose one-sided spectrum (its first length // 2 + 1
    bins, by conjugate symmetry the whole) is ``real`` + i ``imag`` along the last dim (cut or
    padded with zeros to those bins; ``imag`` None: zero)."""
    bins = length // 2 + 1
    real, imag = _fit_last(real, bins), _fit_last(imag, bins)
    # Bin k stands for itself and bin length - k: twice, but for the bins that have no twin.
    weight = [1.0 if k == 0 or 2 * k == length else 2.0 for k in range(bins)]
    angle = [[2 * math.pi * ((k * i) % length) / length for i in range(length)] for k in range(bins)]
    cos = Tensor([[weight[k] * math.cos(a) / length for a in row] for k, row in enumerate(angle)], dtype=real.dtype)
    out = matmul(real, cos)
    if imag is not None:
        sin = Tensor([[weight[k] * math.sin(a) / length for a in row] for k, row in enumerate(angle)], dtype=real.dtype)
        out = out - matmul(imag, sin)
    return out


def _complex(real, imag):
    return concatenate([unsqueeze(real, real.rank), unsqueeze(imag, imag.rank)], real.rank)


def _dft(ctx, n):
    x = ctx.tensor(n.inputs[0])
    rank = x.rank
    axis = _axis(n.attr("axis", 1), rank)
    if axis == rank - 1:
        _raise_here(f"ONNX {n.describe()}: the axis is the real/imaginary dim.")
    order = [d for d in range(rank - 1) if d != axis] + [axis]
    real = permute(x[..., 0], order)
    imag = permute(x[..., 1], order) if x.shape[-1] == 2 else None
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    if n.input(1) is not None:
        length = _scalar(ctx, n, 1)
    else:  # an inverse of a one-sided spectrum of B bins is 2 (B - 1) long (numpy's irfft)
        length = 2 * (real.shape[-1] - 1) if inverse and onesided and isinstance(real.shape[-1], int) else real.shape[-1]
    if not isinstance(length, int):
        _raise_here(f"ONNX {n.describe()}: DFT needs a static length along its axis.")
    back = [order.index(d) for d in range(rank - 1)]
    if inverse and onesided:  # one-sided spectrum in, the real signal out
        return unsqueeze(permute(irfft_last(real, imag, length), back), rank - 1)
    out_real, out_imag = dft_last(real, imag, length, inverse, onesided)
    return _complex(permute(out_real, back), permute(out_imag, back))


def _stft(ctx, n):
    signal = ctx.tensor(n.inputs[0])
    step = _scalar(ctx, n, 1)
    window = ctx.opt_tensor(n, 2)
    length = _scalar(ctx, n, 3) if n.input(3) is not None else window.shape[0] if window is not None else None
    total = signal.shape[1]
    if length is None or not isinstance(total, int):
        _raise_here(f"ONNX {n.describe()}: STFT needs a frame length (or window) and a static signal length.")
    frames = (total - length) // step + 1
    real = signal[..., 0]
    imag = signal[..., 1] if signal.shape[-1] == 2 else None

    def framed(t):  # [batch, frames, length]
        return concatenate([unsqueeze(t[:, f * step:f * step + length], 1) for f in range(frames)], 1)

    real, imag = framed(real), None if imag is None else framed(imag)
    if window is not None:
        window = window if window.dtype == real.dtype else cast(window, real.dtype)
        real, imag = real * window, None if imag is None else imag * window
    out_real, out_imag = dft_last(real, imag, length, onesided=bool(n.attr("onesided", 1)) and imag is None)
    return _complex(out_real, out_imag)


def _mel_weight_matrix(ctx, n):
    """ONNX's triangular filters: num_mel_bins + 2 points evenly spaced in mels, mapped to DFT bins
    (truncated as the reference does); filter i rises from point i to i + 1 and falls to i + 2."""
    bins, length, rate = (_scalar(ctx, n, i) for i in range(3))
    low, high = (float(_flat(ctx.values(n.inputs[i], n))[0]) for i in (3, 4))
    to_mel = lambda hz: 2595 * math.log10(1 + hz / 700)  # noqa: E731
    step = (to_mel(high) - to_mel(low)) / (bins + 2)
    hz = [700 * (10 ** ((i * step + to_mel(low)) / 2595) - 1) for i in range(bins + 2)]
    points = [int(((length + 1) * f) // rate) for f in hz]
    if bins < 1 or rate <= 0 or min(points) < 0 or max(points) > length // 2:
        _raise_here(f"ONNX {n.describe()}: the mel points fall at DFT bins {points}, outside the {length // 2 + 1} "
                    "bins of the spectrum (check the edges against sample_rate / 2).")
    out = [[0.0] * bins for _ in range(length // 2 + 1)]
    for i in range(bins):
        left, center, right = points[i:i + 3]
        if center == left:
            out[center][i] = 1.0
        for j in range(left, center + 1) if center > left else ():
            out[j][i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j][i] = (right - j) / (right - center)
    return Tensor(out, dtype=dtype_of(n.attr("output_datatype", 1)))


ROWS = {
    "BlackmanWindow": Row(_window, ("output_datatype", "periodic"), first=17, check=dtype_attr("output_datatype")),
    "DFT": Row(_dft, ("axis", "inverse", "onesided"), first=17, last=19),
    "HammingWindow": Row(_window, ("output_datatype", "periodic"), first=17, check=dtype_attr("output_datatype")),
    "HannWindow": Row(_window, ("output_datatype", "periodic"), first=17, check=dtype_attr("output_datatype")),
    "MelWeightMatrix": Row(_mel_weight_matrix, ("output_datatype",), first=17, check=dtype_attr("output_datatype")),
    "STFT": Row(_stft, ("onesided",), first=17),
}
