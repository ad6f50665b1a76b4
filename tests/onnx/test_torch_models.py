"""Real exported models: torchvision classifiers (ResNet, MobileNet, EfficientNet, a small ViT, Swin),
a segmentation head (LR-ASPP, bilinear Resize), a transformer encoder layer and a GPT-2-style
decoder, exported by ``torch.onnx.export`` (opset 17, dynamic batch; the sequence too for the text
models) with random weights, loaded by ``tp.onnx.load``, compiled for a range of batches and checked
against torch at several batches, and against onnxruntime where it is installed; and two detectors
(SSDlite, and Faster R-CNN with its RoiAlign pooling; score thresholds, top-k and
NonMaxSuppression sized by the image's values) run eagerly, their boxes, scores and labels checked
against torch's. Skipped where torch or torchvision is missing (Debian's python3-torch,
python3-torchvision: ``make bench`` installs them)."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

import tripy as tp  # noqa: E402
from onnx_files import torch_export  # noqa: E402

# torch.onnx.export warns (traced Python values, constant folding, its tracer): not about Tripy.
pytestmark = pytest.mark.filterwarnings("ignore")
CPU = tp.device("cpu")
TOLERANCE = 2e-4  # max |error| / max |torch's output|


class TinyGPT(torch.nn.Module):
    """A GPT-2-style decoder: token and position embeddings, pre-norm blocks of causal attention and
    a tanh-GELU MLP, the output head tied to the token embedding."""

    def __init__(self, vocab=97, width=32, heads=4, layers=2, context=32):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            block = torch.nn.Module()
            block.ln1, block.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
            block.qkv, block.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
            block.fc, block.out = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
            self.blocks.append(block)
        self.ln_f = torch.nn.LayerNorm(width)
        self.heads = heads

    def forward(self, ids):
        batch, seq = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(seq))
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=-1)
            q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            x = x + b.proj((att @ v).transpose(1, 2).reshape(batch, seq, -1))
            x = x + b.out(torch.nn.functional.gelu(b.fc(b.ln2(x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.T


def _randomize(module):
    """Random BatchNorm statistics and a random head where torchvision starts them at 0 and 1, so
    that every layer's arithmetic shows in the output."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in module.modules():
            _randomize_one(m, gen)
    return module.eval()


def _randomize_one(m, gen):
    if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
        m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
        m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
    if isinstance(m, torch.nn.Linear) and not m.weight.abs().sum():
        m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.05)


def _export(tmp_path, module, example, names, dynamic):
    path = str(tmp_path / "model.onnx")
    # Not under no_grad: there torch runs (and exports) TransformerEncoderLayer's fused fast path,
    # which has no ONNX form.
    torch_export(torch, module, (example,), path, opset_version=17, input_names=names, output_names=["out"],
                      dynamic_axes={**dynamic, "out": {0: "batch"}})
    return path


def _compare(got, expected, what):
    got = np.asarray(got)
    assert got.shape == expected.shape, what
    scale = max(np.abs(expected).max(), 1e-6)
    error = np.abs(got - expected).max() / scale
    assert error < TOLERANCE, f"{what}: relative error {error:.2e}"


def _check(tmp_path, module, make_input, dims, shapes, name):
    """Exports ``module``, compiles it for the ``dims`` ranges and compares it with torch (and
    onnxruntime where present) on inputs of each shape in ``shapes``; eagerly on the first."""
    torch.manual_seed(0)
    module = _randomize(module)
    example = make_input(shapes[0])
    dynamic = {name: {i: d for i, d in enumerate(["batch", "seq"]) if d in dims}}
    path = _export(tmp_path, module, example, [name], dynamic)
    model = tp.onnx.load(path, device=CPU)
    exe = tp.compile(model, kwargs=model.input_infos(dims))
    ort = _onnxruntime_session(path)
    for i, shape in enumerate(shapes):
        x = make_input(shape)
        with torch.no_grad():
            expected = module(x).numpy()
        _compare(exe(tp.Tensor(x.numpy(), device=CPU)), expected, f"compiled, input {shape}")
        if i == 0:
            _compare(model(tp.Tensor(x.numpy(), device=CPU)), expected, f"eager, input {shape}")
        if ort is not None:
            _compare(ort.run(None, {name: x.numpy()})[0], expected, f"onnxruntime, input {shape}")
    return model


def _onnxruntime_session(path):
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])


def _image(size):
    return lambda shape: torch.randn(shape[0], 3, size, size)


CLASSIFIERS = {
    "resnet18": lambda: torchvision.models.resnet18(),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(),
    "efficientnet_b0": lambda: torchvision.models.efficientnet_b0(),
    "vit": lambda: torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                      hidden_dim=32, mlp_dim=64, num_classes=10),
    "swin_t": lambda: torchvision.models.swin_t(num_classes=10),
}


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_torchvision_classifier_with_dynamic_batch_matches_torch(tmp_path, name):
    size = 32 if name == "vit" else 64
    model = _check(tmp_path, CLASSIFIERS[name](), _image(size), {"batch": (1, 2, 4)}, [(2,), (1,), (3,)], "image")
    ops = {n.op_type for n in model._graph.nodes}
    if name == "efficientnet_b0":
        assert "Silu" in ops and "Sigmoid" in ops  # x * sigmoid(x) fused; squeeze-excite gates stay
    if name in ("vit", "swin_t"):
        assert "Gelu" in ops and "Erf" not in ops


def test_segmentation_head_with_bilinear_resize_matches_torch(tmp_path):
    module = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                      num_classes=3)

    class Logits(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)["out"]

    model = _check(tmp_path, Logits(module), _image(64), {"batch": (1, 2, 4)}, [(2,), (1,)], "image")
    assert {n.op_type for n in model._graph.nodes} >= {"Resize", "HardSwish"}


def test_transformer_encoder_layer_with_dynamic_batch_and_sequence_matches_torch(tmp_path):
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
    _check(tmp_path, layer, lambda shape: torch.randn(shape[0], shape[1], 32),
           {"batch": (1, 2, 4), "seq": (1, 8, 16)}, [(2, 8), (1, 3), (4, 16)], "x")


def test_gpt2_style_decoder_with_dynamic_batch_and_sequence_matches_torch(tmp_path):
    model = _check(tmp_path, TinyGPT(), lambda shape: torch.randint(0, 97, shape),
                   {"batch": (1, 2, 4), "seq": (1, 8, 32)}, [(2, 8), (1, 1), (3, 32)], "ids")
    assert {n.op_type for n in model._graph.nodes} >= {"LayerNormalization", "Trilu", "Where", "Tanh"}


def _measure_batch_norm(net, features, gen):
    """Random BatchNorm scales and shifts, and statistics measured on four random images by
    ``features`` (the detector's layers that hold BatchNorm), so that each channel comes out near
    unit scale. torchvision draws its convolutions with std 0.03, so under random statistics each
    block shrinks the activations about a thousandfold and every anchor sees the same features: all
    scores tie."""
    for m in net.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # the plain mean over the calibration batch
            m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)
    net.train()
    images, _ = net.transform([torch.rand(3, 160, 160, generator=gen) for _ in range(4)])
    features(images.tensors)
    net.eval()


def _ssdlite(score_thresh):
    """SSDlite320 over MobileNetV3 with 3 classes and a background, made to give distinct scores:
    BatchNorm measured on random images, and the heads' last convolutions drawn at unit gain, so that
    scores spread over (0, 1) and boxes move off their anchors."""
    torch.manual_seed(0)
    net = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4, score_thresh=score_thresh, detections_per_img=100)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        _measure_batch_norm(net, lambda x: net.head(list(net.backbone(x).values())), gen)
        for head in (net.head.classification_head, net.head.regression_head):
            for block in head.module_list:
                conv = block[-1]
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen) / conv.weight[0].numel() ** 0.5)
                conv.bias.copy_(torch.randn(conv.bias.shape, generator=gen) * 0.1)
    return net


# Scores closer than this may come out in either order (Tripy's and torch's arithmetic differ in the
# last bits), so their detections are compared as a set.
SCORE_TIE = 1e-4


def _compare_detections(got, expected, score_tie=SCORE_TIE):
    """Detections (boxes [n, 4], scores [n], labels [n]) against torch's, in torch's order (falling
    score) except within a run of scores each within ``score_tie`` of the next, where each of
    torch's detections must match a different one of Tripy's in the run: the same label, the score
    to ``score_tie`` and the box to TOLERANCE of the image's scale."""
    boxes, scores, labels = (np.asarray(v) for v in got)
    want_boxes, want_scores, want_labels = expected
    assert boxes.shape == want_boxes.shape and scores.shape == labels.shape == want_scores.shape, \
        f"{len(scores)} detections, torch gives {len(want_scores)}"
    scale = np.abs(want_boxes).max()
    start = 0
    while start < len(want_scores):
        end = start + 1
        while end < len(want_scores) and want_scores[end - 1] - want_scores[end] < score_tie:
            end += 1
        unused = list(range(start, end))
        for i in range(start, end):
            match = [j for j in unused if labels[j] == want_labels[i] and abs(scores[j] - want_scores[i]) < score_tie
                     and np.abs(boxes[j] - want_boxes[i]).max() < TOLERANCE * scale]
            assert match, f"torch's detection {i} (label {want_labels[i]}, score {want_scores[i]:.6f}, box " \
                          f"{want_boxes[i]}) has no match among Tripy's detections {start}..{end - 1}"
            unused.remove(match[0])
        start = end


def test_ssdlite_detector_runs_eagerly_and_matches_torch(tmp_path):
    net = _ssdlite(score_thresh=0.7)
    image = torch.rand(3, 120, 160, generator=torch.Generator().manual_seed(2))  # resized to 320x320 inside
    with torch.no_grad():
        expected = net([image])[0]
    expected = [expected[k].numpy() for k in ("boxes", "scores", "labels")]
    assert 20 < len(expected[1]) < 100 and set(expected[2]) == {1, 2, 3}  # not cut at detections_per_img
    path = str(tmp_path / "ssdlite.onnx")
    torch_export(torch, net, ([image],), path, opset_version=17, input_names=["image"],
                      output_names=["boxes", "scores", "labels"])
    model = tp.onnx.load(path, device=CPU)
    _compare_detections(model(tp.Tensor(image.numpy(), device=CPU)), expected)
    ops = {n.op_type for n in model._graph.nodes}
    assert {"NonZero", "TopK", "If", "Resize"} <= ops
    branches = [g for n in model._graph.nodes if n.op_type == "If" for _, g in model._graph.subgraphs(n)]
    assert any(m.op_type == "NonMaxSuppression" for g in branches for m in g.nodes)


def _faster_rcnn(score_thresh):
    """Faster R-CNN over MobileNetV3 (320 px, FPN) with 3 classes and a background, made to give
    distinct scores: BatchNorm measured on random images, and the last layers of the RPN head and
    the box predictor drawn at gain 4, so that proposals and scores spread."""
    torch.manual_seed(0)
    net = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=4, box_score_thresh=score_thresh)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        _measure_batch_norm(net, net.backbone, gen)
        for layer in (net.rpn.head.cls_logits, net.rpn.head.bbox_pred,
                      net.roi_heads.box_predictor.cls_score, net.roi_heads.box_predictor.bbox_pred):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 4 / layer.weight[0].numel() ** 0.5)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.1)
    return net


def test_faster_rcnn_detector_matches_torch_once_its_roi_align_says_output_half_pixel(tmp_path):
    """torchvision's MultiScaleRoIAlign pools with aligned=False, ONNX's output_half_pixel. The
    torchvision 0.14 that Debian ships writes RoiAlign as for opset 11, without
    coordinate_transformation_mode, at any opset; from opset 16 that means half_pixel (aligned=True),
    which moves every sample half a pixel and leaves a torch 1.13 export's detections unlike torch's.
    The test names the mode where the exporter left it out.

    The reference is torch in float64. torch's own float32 run drifts from it by 1e-4 in the
    backbone's features (Tripy's by 6e-6) and by 1.4e-3 in the scores, and with other weights flips
    the RPN's NonMaxSuppression where two proposals overlap by IoU 0.7 to within 3e-3. Tripy keeps
    float64's proposals; their corners carry the rounding of exp(box delta) times the anchor (0.04
    px), which the pooling and the gain-4 classifier turn into scores within 2e-4 of float64's:
    ties to 5e-4."""
    net = _faster_rcnn(score_thresh=0.5)
    image = torch.rand(3, 120, 160, generator=torch.Generator().manual_seed(5))  # resized to 320x426 inside
    path = str(tmp_path / "faster_rcnn.onnx")
    torch_export(torch, net, ([image],), path, opset_version=17, input_names=["image"],
                      output_names=["boxes", "labels", "scores"])
    exported = onnx.load(path)
    pools = [n for n in exported.graph.node if n.op_type == "RoiAlign"]
    modes = {a.s.decode() for n in pools for a in n.attribute if a.name == "coordinate_transformation_mode"}
    assert len(pools) == 2 and modes <= {"output_half_pixel"}
    for n in pools:
        if not any(a.name == "coordinate_transformation_mode" for a in n.attribute):
            n.attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode", "output_half_pixel"))
    onnx.save(exported, path)
    with torch.no_grad():
        expected = net.double()([image.double()])[0]
    expected = [expected[k].numpy() for k in ("boxes", "scores", "labels")]
    assert 20 < len(expected[1]) < 100 and set(expected[2]) == {1, 2, 3}  # not cut at detections_per_img
    model = tp.onnx.load(path, device=CPU)
    boxes, labels, scores = model(tp.Tensor(image.numpy(), device=CPU))
    _compare_detections((boxes, scores, labels), expected, score_tie=5e-4)
