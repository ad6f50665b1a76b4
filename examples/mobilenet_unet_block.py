"""A small encoder-decoder written with Tripy that exercises the convolutions MobileNets and UNets
are made of: depthwise (groups = channels), pointwise, strided and transposed convolutions.

    stem:    conv 3x3 -> BatchNorm -> ReLU6                       (skip connection taken here)
    down:    MobileNetV2 inverted residual, stride 2 (1x1 expand, 3x3 depthwise/2, 1x1 project)
    middle:  inverted residual, stride 1, with its residual add
    up:      transposed conv 4x4/2 (back to full resolution) -> ReLU
    head:    concat(up, skip) -> conv 1x1 -> logits per pixel

The file also holds a torch twin of the same net, used where torch is installed.

Run: python examples/mobilenet_unet_block.py   (checked against torch, or a float64 numpy reference)
"""

import os
import sys

import numpy as np

import tripy as tp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref as ref  # noqa: E402
from model_utils import load_weights, optional_torch, report, to_numpy  # noqa: E402

torch = optional_torch()
nn = torch.nn if torch else None
IGNORED = (".num_batches_tracked",)


def relu6(x):
    return tp.clamp(x, 0.0, 6.0)


def conv_bn(c_in, c_out, kernel, stride=1, groups=1, dtype=tp.float32):
    """conv (no bias) -> BatchNorm, named like torch's nn.Sequential(Conv2d, BatchNorm2d): 0.*, 1.*"""
    return tp.Sequential(tp.Conv(c_in, c_out, (kernel, kernel), stride=stride, padding=kernel // 2, groups=groups,
                                 bias=False, dtype=dtype), tp.BatchNorm(c_out, dtype=dtype))


class InvertedResidual(tp.Module):
    def __init__(self, c_in, c_out, stride, expand, dtype):
        hidden = c_in * expand
        self.expand = conv_bn(c_in, hidden, 1, dtype=dtype)
        self.depthwise = conv_bn(hidden, hidden, 3, stride, groups=hidden, dtype=dtype)
        self.project = conv_bn(hidden, c_out, 1, dtype=dtype)
        self.residual = stride == 1 and c_in == c_out

    def __call__(self, x):
        y = self.project(relu6(self.depthwise(relu6(self.expand(x)))))
        return x + y if self.residual else y


class MobileUNetBlock(tp.Module):
    """Images (N, 3, H, W), H and W even -> per-pixel logits (N, classes, H, W)."""

    def __init__(self, channels=8, classes=5, dtype=tp.float32):
        self.stem = conv_bn(3, channels, 3, dtype=dtype)
        self.down = InvertedResidual(channels, 2 * channels, 2, 4, dtype)
        self.middle = InvertedResidual(2 * channels, 2 * channels, 1, 4, dtype)
        self.up = tp.ConvTranspose(2 * channels, channels, (4, 4), stride=2, padding=1, dtype=dtype)
        self.head = tp.Conv(2 * channels, classes, (1, 1), dtype=dtype)

    def __call__(self, x):
        skip = relu6(self.stem(x))
        y = tp.relu(self.up(self.middle(self.down(skip))))
        return self.head(tp.concatenate([y, skip], dim=1))


def random_weights(channels=8, classes=5, seed=0):
    """Float32 numpy weights under the module's names (fan-in scaled, random BatchNorm statistics)."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, param in MobileUNetBlock(channels, classes).state_dict().items():
        shape = tuple(param.shape)
        if name.endswith("running_var"):
            value = rng.uniform(0.5, 1.5, shape)
        elif name.endswith(("running_mean", "bias")) or (name.endswith("1.weight") and len(shape) == 1):
            value = 0.1 * rng.standard_normal(shape) + (1.0 if name.endswith("weight") else 0.0)
        else:  # convolution weights: (out, in/groups, k, k), or (in, out/groups, k, k) when transposed
            fan_in = int(np.prod(shape[1:]))
            value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        w[name] = value.astype(np.float32)
    return w


def numpy_forward(weights, x):
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}

    def conv_bn_np(name, y, stride=1, groups=1):
        k = w[name + ".0.weight"]
        y = ref.conv2d(y, k, stride=stride, padding=k.shape[-1] // 2, groups=groups)
        return ref.batch_norm(y, *(w[f"{name}.1.{p}"] for p in ("weight", "bias", "running_mean", "running_var")))

    def inverted(name, y, stride):
        hidden = w[name + ".expand.0.weight"].shape[0]
        h = np.clip(conv_bn_np(name + ".expand", y), 0, 6)
        h = np.clip(conv_bn_np(name + ".depthwise", h, stride, hidden), 0, 6)
        h = conv_bn_np(name + ".project", h)
        return y + h if stride == 1 and h.shape == y.shape else h

    skip = np.clip(conv_bn_np("stem", np.asarray(x, np.float64)), 0, 6)
    y = inverted("middle", inverted("down", skip, 2), 1)
    y = np.maximum(ref.conv_transpose2d(y, w["up.weight"], w["up.bias"], stride=2, padding=1), 0)
    return ref.conv2d(np.concatenate([y, skip], axis=1), w["head.weight"], w["head.bias"])


# --- the torch twin: the same net and names -------------------------------------------------------
def torch_conv_bn(c_in, c_out, kernel, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(c_out))


class TorchInvertedResidual(nn.Module if torch else object):
    def __init__(self, c_in, c_out, stride, expand):
        super().__init__()
        hidden = c_in * expand
        self.expand = torch_conv_bn(c_in, hidden, 1)
        self.depthwise = torch_conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.project = torch_conv_bn(hidden, c_out, 1)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        y = self.project(nn.functional.relu6(self.depthwise(nn.functional.relu6(self.expand(x)))))
        return x + y if self.residual else y


class TorchMobileUNetBlock(nn.Module if torch else object):
    def __init__(self, channels=8, classes=5):
        super().__init__()
        self.stem = torch_conv_bn(3, channels, 3)
        self.down = TorchInvertedResidual(channels, 2 * channels, 2, 4)
        self.middle = TorchInvertedResidual(2 * channels, 2 * channels, 1, 4)
        self.up = nn.ConvTranspose2d(2 * channels, channels, 4, stride=2, padding=1)
        self.head = nn.Conv2d(2 * channels, classes, 1)

    def forward(self, x):
        skip = nn.functional.relu6(self.stem(x))
        y = torch.relu(self.up(self.middle(self.down(skip))))
        return self.head(torch.cat([y, skip], dim=1))


def main():
    model = MobileUNetBlock()
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    weights = random_weights()
    load_weights(model, weights, ignore=IGNORED)
    if torch is not None:
        twin = TorchMobileUNetBlock().eval()
        twin.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
        with torch.no_grad():
            want, against = twin(torch.from_numpy(x)).numpy(), f"torch {torch.__version__}"
    else:
        want, against = numpy_forward(weights, x), "numpy float64"
    fast = tp.compile(model, args=[tp.InputInfo(shape=x.shape, dtype=tp.float32)])
    got = to_numpy(fast(tp.Tensor(x)))
    report(f"MobileNet/UNet block vs {against}", ref.max_relative_error(got, want), 1e-4)


if __name__ == "__main__":
    main()
