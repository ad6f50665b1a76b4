"""ResNet-50 written with Tripy in torchvision's architecture and parameter names (ResNet v1.5: the
stride sits on each bottleneck's 3x3 convolution), so torchvision's ``resnet50()`` weights copy over.

    stem: conv 7x7/2 -> BatchNorm -> ReLU -> max pool 3x3/2
    layer1..4: (3, 4, 6, 3) bottlenecks (1x1 -> 3x3 -> 1x1, x4 channels, residual add, ReLU)
    head: global average pool -> fc

``width`` scales every channel count (64 is ResNet-50); small widths make quick CPU checks.

Run: python examples/resnet50.py   (torchvision's ResNet-50 where installed, else a tiny-width
variant checked against a float64 numpy reference)
"""

import math
import os
import sys

import numpy as np

import tripy as tp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref as ref  # noqa: E402
from model_utils import load_weights, report, to_numpy  # noqa: E402

RESNET50_LAYERS = (3, 4, 6, 3)
IGNORED = (".num_batches_tracked",)  # a training counter in torchvision's BatchNorm state


def conv(in_channels, out_channels, kernel, stride, dtype):
    return tp.Conv(in_channels, out_channels, (kernel, kernel), stride=stride, padding=kernel // 2, bias=False,
                   dtype=dtype)


class Bottleneck(tp.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride, dtype):
        self.conv1, self.bn1 = conv(inplanes, planes, 1, 1, dtype), tp.BatchNorm(planes, dtype=dtype)
        self.conv2, self.bn2 = conv(planes, planes, 3, stride, dtype), tp.BatchNorm(planes, dtype=dtype)
        self.conv3 = conv(planes, planes * self.expansion, 1, 1, dtype)
        self.bn3 = tp.BatchNorm(planes * self.expansion, dtype=dtype)
        self.downsample = None
        if stride != 1 or inplanes != planes * self.expansion:
            self.downsample = tp.Sequential(conv(inplanes, planes * self.expansion, 1, stride, dtype),
                                            tp.BatchNorm(planes * self.expansion, dtype=dtype))

    def __call__(self, x):
        out = tp.relu(self.bn1(self.conv1(x)))
        out = tp.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return tp.relu(out + identity)


class ResNet(tp.Module):
    """Images (N, 3, H, W) -> class logits (N, num_classes)."""

    def __init__(self, layers=RESNET50_LAYERS, width=64, num_classes=1000, dtype=tp.float32):
        self.conv1 = conv(3, width, 7, 2, dtype)
        self.bn1 = tp.BatchNorm(width, dtype=dtype)
        inplanes = width
        for i, blocks in enumerate(layers):
            planes, stride = width * 2**i, (1 if i == 0 else 2)
            stage = []
            for b in range(blocks):
                stage.append(Bottleneck(inplanes, planes, stride if b == 0 else 1, dtype))
                inplanes = planes * Bottleneck.expansion
            setattr(self, f"layer{i + 1}", tp.Sequential(*stage))
        self.num_stages = len(layers)
        self.fc = tp.Linear(inplanes, num_classes, dtype=dtype)

    def __call__(self, x):
        x = tp.relu(self.bn1(self.conv1(x)))
        x = tp.maxpool(x, (3, 3), stride=(2, 2), padding=((1, 1), (1, 1)))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(tp.mean(x, dim=(2, 3)))


def load_resnet(model, state):
    """Copies torchvision-named weights (``resnet50().state_dict()`` or numpy arrays) into ``model``."""
    load_weights(model, state, ignore=IGNORED)


def random_weights(layers=RESNET50_LAYERS, width=64, num_classes=1000, seed=0):
    """torchvision-named float32 numpy weights: He-scaled convolutions and random BatchNorm statistics,
    so that every parameter changes the output."""
    rng = np.random.default_rng(seed)
    w = {}

    def conv_w(name, c_out, c_in, k):
        he = math.sqrt(2.0 / (c_in * k * k))
        w[name + ".weight"] = (rng.standard_normal((c_out, c_in, k, k)) * he).astype(np.float32)

    def bn(name, c):
        for key, value in (("weight", 1 + 0.1 * rng.standard_normal(c)), ("bias", 0.1 * rng.standard_normal(c)),
                           ("running_mean", 0.1 * rng.standard_normal(c)), ("running_var", rng.uniform(0.5, 1.5, c))):
            w[f"{name}.{key}"] = value.astype(np.float32)

    conv_w("conv1", width, 3, 7)
    bn("bn1", width)
    inplanes = width
    for i, blocks in enumerate(layers):
        planes = width * 2**i
        for b in range(blocks):
            p = f"layer{i + 1}.{b}."
            conv_w(p + "conv1", planes, inplanes, 1), bn(p + "bn1", planes)
            conv_w(p + "conv2", planes, planes, 3), bn(p + "bn2", planes)
            conv_w(p + "conv3", planes * 4, planes, 1), bn(p + "bn3", planes * 4)
            if b == 0:
                conv_w(p + "downsample.0", planes * 4, inplanes, 1), bn(p + "downsample.1", planes * 4)
            inplanes = planes * 4
    w["fc.weight"] = (rng.standard_normal((num_classes, inplanes)) / math.sqrt(inplanes)).astype(np.float32)
    w["fc.bias"] = (0.1 * rng.standard_normal(num_classes)).astype(np.float32)
    return w


def numpy_forward(weights, x, layers=RESNET50_LAYERS):
    """The same network in float64 numpy, on images (N, 3, H, W)."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}

    def bn(name, y):
        stats = (w[f"{name}.{p}"] for p in ("weight", "bias", "running_mean", "running_var"))
        return ref.batch_norm(y, *stats)

    def conv_bn(conv_name, bn_name, y, stride=1):
        k = w[conv_name + ".weight"]
        return bn(bn_name, ref.conv2d(y, k, stride=stride, padding=k.shape[-1] // 2))

    y = np.maximum(conv_bn("conv1", "bn1", np.asarray(x, np.float64), 2), 0)
    y = ref.max_pool2d(y, 3, 2, 1)
    for i, blocks in enumerate(layers):
        for b in range(blocks):
            p, stride = f"layer{i + 1}.{b}.", (2 if i > 0 and b == 0 else 1)
            out = np.maximum(conv_bn(p + "conv1", p + "bn1", y), 0)
            out = np.maximum(conv_bn(p + "conv2", p + "bn2", out, stride), 0)
            out = conv_bn(p + "conv3", p + "bn3", out)
            if p + "downsample.0.weight" in w:
                y = conv_bn(p + "downsample.0", p + "downsample.1", y, stride)
            y = np.maximum(out + y, 0)
    return ref.linear(y.mean(axis=(2, 3)), w["fc.weight"], w["fc.bias"])


def torchvision_resnet50(seed=0):
    """torchvision's ResNet-50 (random weights, no download) in eval mode with random BatchNorm
    statistics, or None where torchvision is not installed."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    torch.manual_seed(seed)
    model = torchvision.models.resnet50().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(1 + 0.1 * torch.randn(c, generator=gen))
                m.bias.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
    return model


def main():
    twin = torchvision_resnet50()
    if twin is not None:
        import torch
        import torchvision

        layers, width, size, against = RESNET50_LAYERS, 64, 64, f"torchvision {torchvision.__version__}"
    else:
        layers, width, size, against = RESNET50_LAYERS, 4, 32, "numpy float64"
    model = ResNet(layers, width)
    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    if twin is not None:
        load_resnet(model, twin.state_dict())
        with torch.no_grad():
            want = twin(torch.from_numpy(x)).numpy()
    else:
        weights = random_weights(layers, width)
        load_resnet(model, weights)
        want = numpy_forward(weights, x, layers)
    fast = tp.compile(model, args=[tp.InputInfo(shape=((1, 2, 4), 3, size, size), dtype=tp.float32)])
    got = to_numpy(fast(tp.Tensor(x)))
    report(f"ResNet-50 (width {width}, {size}x{size} images) vs {against}", ref.max_relative_error(got, want), 1e-4)


if __name__ == "__main__":
    main()
