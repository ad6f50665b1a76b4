"""The ONNX benchmark: exported models imported with tp.onnx.load and compiled with a dynamic batch,
timed against the same file in onnxruntime and the same module in torch (eager, and torch.compile
where torch has it), in one run, with ratios (a peer's time over Tripy's: above 1, Tripy is faster).

Models, exported by torch.onnx.export (opset 17, dynamic batch) with random weights: resnet50 (with
a row for the hand-written ResNet-50 of examples/resnet50.py on the same weights: the imported
model's time over it is `vs_handwritten`), resnet18, mobilenet_v2, efficientnet_b0, vit (ViT-B/16 on
the GPU, a 2-layer one on the CPU), encoder (a transformer encoder layer) and gpt (a GPT-2-style
decoder: GPT-2 small's width on the GPU). Without torch, small models written with onnx.helper
(mlp, convnet) stand in, so the benchmark runs anywhere Tripy and python3-onnx do. Each imported
model's output is checked against torch (or onnxruntime; or numpy for the stand-ins) first.

Sizes: on the GPU batch 1 and 32 at 224x224 (sequence 128 for the text models), float32; on the CPU
batch 1 and 8 at 64x64 (sequence 32); --quick: batch 1 and 2, short timings (for CI).

Run: python bench/onnx.py [--device cpu|gpu] [--quick] [--only resnet50,gpt,...] [--no-torch-compile]
Output: one JSON object per line per measurement, then a table. Exits non-zero when a check fails.
"""

import argparse
import json
import math
import os
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# This file is bench/onnx.py: with bench/ first on the path, `import onnx` would import it again.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path[:0] = [os.path.join(ROOT, "examples"), HERE]

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402

import timing  # noqa: E402
from model_utils import optional_torch  # noqa: E402

torch = optional_torch()
try:
    import torchvision
except ImportError:
    torchvision = None
try:
    import onnxruntime
except ImportError:
    onnxruntime = None

TOLERANCE = 1e-3  # max |error| / max |reference|, float32 throughout
TORCH_MODELS = ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "vit", "encoder", "gpt")
STAND_INS = ("mlp", "convnet")


class Env:
    def __init__(self, args):
        self.device = args.device or ("gpu" if _C.gpu_available() else "cpu")
        tp.config.default_device = "gpu:0" if self.device == "gpu" else "cpu"
        self.gpu = self.device == "gpu"
        self.quick = args.quick
        self.budget_s = 0.2 if args.quick else 1.0
        self.batches = (1, 2) if args.quick else ((1, 32) if self.gpu else (1, 8))
        self.image = 224 if self.gpu and not args.quick else (32 if args.quick else 64)
        self.seq = 128 if self.gpu and not args.quick else (16 if args.quick else 32)
        self.torch_device = "cuda" if self.gpu else "cpu"
        self.torch_compile = not args.no_torch_compile and torch is not None and hasattr(torch, "compile")
        if torch is not None and not self.gpu:
            torch.set_num_threads(os.cpu_count())  # Tripy runs a thread per logical CPU
        self.sync = (torch.cuda.synchronize if torch is not None else tp.default_stream().synchronize) if self.gpu \
            else timing.no_sync
        self.dir = tempfile.mkdtemp(prefix="tripy-onnx-bench-")
        self.records, self.failures = [], []

    def emit(self, **record):
        record.update(device=self.device)
        self.records.append(record)
        print(json.dumps(record), flush=True)


# --- models --------------------------------------------------------------------------------------
class TinyGPT(torch.nn.Module if torch is not None else object):
    """A GPT-2-style decoder (pre-norm causal attention, tanh-GELU MLP, tied head)."""

    def __init__(self, vocab, width, heads, layers, context):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, width), torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.ln1, b.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
            b.qkv, b.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
            b.fc, b.out = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
            self.blocks.append(b)
        self.ln_f, self.heads = torch.nn.LayerNorm(width), heads

    def forward(self, ids):
        batch, seq = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(seq, device=ids.device))
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=ids.device))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=-1)
            q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            att = ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf")).softmax(-1)
            x = x + b.proj((att @ v).transpose(1, 2).reshape(batch, seq, -1))
            x = x + b.out(torch.nn.functional.gelu(b.fc(b.ln2(x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.T


def _torch_model(name, env):
    """(module, input name, make_input(batch) -> numpy array, named dims) for a torch model."""
    torch.manual_seed(0)
    tv = torchvision.models if torchvision is not None else None
    image = lambda b: np.random.default_rng(b).standard_normal((b, 3, env.image, env.image)).astype(np.float32)  # noqa: E731
    if name in ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "vit"):
        if tv is None:
            return None
        if name == "resnet50":
            import resnet50 as handwritten

            module = handwritten.torchvision_resnet50()
        elif name == "vit":
            module = tv.vit_b_16() if env.image == 224 else tv.VisionTransformer(
                image_size=env.image, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128)
            with torch.no_grad():
                module.heads.head.weight.normal_(0, 0.02)
        else:
            module = getattr(tv, name)()
        return module.eval(), "image", image, ("batch",)
    if name == "encoder":
        width = 768 if env.gpu and not env.quick else 64
        module = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True,
                                                  activation="gelu")
        make = lambda b: np.random.default_rng(b).standard_normal((b, env.seq, width)).astype(np.float32)  # noqa: E731
        return module.eval(), "x", make, ("batch", "seq")
    if name == "gpt":
        width, layers = (768, 12) if env.gpu and not env.quick else (64, 2)
        module = TinyGPT(vocab=1024, width=width, heads=max(width // 64, 2), layers=layers, context=max(env.seq, 32))
        make = lambda b: np.random.default_rng(b).integers(0, 1024, (b, env.seq)).astype(np.int64)  # noqa: E731
        return module.eval(), "ids", make, ("batch", "seq")
    raise ValueError(name)


def _export(name, module, input_name, example, dims, env):
    path = os.path.join(env.dir, f"{name}.onnx")
    dynamic = {input_name: {i: d for i, d in enumerate(dims)}, "out": {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.from_numpy(example),), path, opset_version=17, input_names=[input_name],
                          output_names=["out"], dynamic_axes=dynamic)
    return path


def _stand_in(name, env):
    """A small model written with onnx.helper, and its numpy reference: for machines without torch."""
    rng = np.random.default_rng(0)
    if name == "mlp":
        w1, w2 = rng.standard_normal((256, 1024)).astype(np.float32) * 0.05, rng.standard_normal((1024, 256)).astype(np.float32) * 0.05
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                 helper.make_node("MatMul", ["r", "w2"], ["out"])]
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])]
        inits = {"w1": w1, "w2": w2}
        make = lambda b: np.random.default_rng(b).standard_normal((b, 256)).astype(np.float32)  # noqa: E731
        reference = lambda x: np.maximum(x @ w1, 0) @ w2  # noqa: E731
    else:
        w = rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.2
        fc = rng.standard_normal((16, 10)).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
                 helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
                 helper.make_node("MatMul", ["f", "fc"], ["out"])]
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, env.image, env.image])]
        inits = {"w": w, "fc": fc}
        make = lambda b: np.random.default_rng(b).standard_normal((b, 3, env.image, env.image)).astype(np.float32)  # noqa: E731

        def reference(x):
            padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
            out = sum(np.einsum("nchw,oc->nohw", padded[:, :, i:i + env.image, j:j + env.image], w[:, :, i, j])
                      for i in range(3) for j in range(3))
            return np.maximum(out, 0).mean((2, 3)) @ fc

    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = os.path.join(env.dir, f"{name}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, "x", make, reference


# --- measuring -----------------------------------------------------------------------------------
def _rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def _host(t):
    return np.asarray(tp.copy(t, tp.device("cpu")) if t.device.kind == "gpu" else t)


def bench_model(name, env):
    reference_fn, module, handwritten = None, None, None
    if name in STAND_INS:
        path, input_name, make, reference_fn = _stand_in(name, env)
        dims = {"batch": (1, env.batches[-1], max(env.batches[-1], 32))}
    else:
        spec = _torch_model(name, env)
        if spec is None:
            print(f"# {name}: skipped (torchvision is not installed)", flush=True)
            return
        module, input_name, make, dim_names = spec
        path = _export(name, module, input_name, make(env.batches[0]), dim_names, env)
        module = module.to(env.torch_device)
        dims = {"batch": (1, env.batches[-1], max(env.batches[-1], 32))}
        if "seq" in dim_names:
            dims["seq"] = (1, env.seq, max(env.seq, 32))
        if name == "resnet50":
            import resnet50 as hw

            handwritten = hw.ResNet(width=64, dtype=tp.float32)
            hw.load_resnet(handwritten, {k: v.detach().cpu() for k, v in module.state_dict().items()})
    model = tp.onnx.load(path)
    compile_s, exe = timing.first_call_seconds(lambda: tp.compile(model, kwargs=model.input_infos(dims)))
    session = None
    if onnxruntime is not None:
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if env.gpu else ["CPUExecutionProvider"]
        available = onnxruntime.get_available_providers()
        session = onnxruntime.InferenceSession(path, providers=[p for p in providers if p in available])
    hw_exe = None
    if handwritten is not None:
        lo, opt, hi = dims["batch"]
        hw_exe = tp.compile(handwritten, args=[tp.InputInfo(((lo, opt, hi), 3, env.image, env.image), tp.float32)])
    for batch in env.batches:
        x = make(batch)
        tx = tp.Tensor(x)
        param = next(iter(exe.input_infos))
        out = exe(**{param: tx})
        if module is not None:
            with torch.no_grad():
                want = module(torch.from_numpy(x).to(env.torch_device)).float().cpu().numpy()
            check = "torch"
        elif session is not None:
            want, check = session.run(None, {input_name: x})[0], "onnxruntime"
        else:
            want, check = reference_fn(x), "numpy"
        err = _rel_err(_host(out), want)
        if not err <= TOLERANCE:
            env.failures.append(f"{name} B{batch}: Tripy differs from {check} by {err:.2e}")
        shape = f"B{batch}" + (f"x{env.seq}" if x.ndim == 2 or name == "encoder" else "")
        tripy_ms = timing.median_seconds(lambda: exe(**{param: tx}), env.budget_s, env.sync) * 1e3
        env.emit(model=name, shape=shape, batch=batch, system="tripy (onnx)", ms=tripy_ms, compile_s=compile_s,
                 max_rel_err=err, checked_against=check, nodes=len(model._graph.nodes), kernels=len(exe._impl.kernels))
        if hw_exe is not None:
            ms = timing.median_seconds(lambda: hw_exe(tx), env.budget_s, env.sync) * 1e3
            env.emit(model=name, shape=shape, batch=batch, system="tripy (hand-written)", ms=ms,
                     max_rel_err=_rel_err(_host(hw_exe(tx)), want), vs_handwritten=tripy_ms / ms)
        if session is not None:
            ms = timing.median_seconds(lambda: session.run(None, {input_name: x}), env.budget_s) * 1e3
            env.emit(model=name, shape=shape, batch=batch, system="onnxruntime", ms=ms, ratio=ms / tripy_ms)
        if module is not None:
            tx_torch = torch.from_numpy(x).to(env.torch_device)
            systems = [("torch eager", module)]
            if env.torch_compile:
                systems.append(("torch.compile", torch.compile(module)))
            for system, fn in systems:
                with torch.no_grad():
                    compile_peer_s, _ = timing.first_call_seconds(lambda: fn(tx_torch), env.sync)
                    ms = timing.median_seconds(lambda: fn(tx_torch), env.budget_s, env.sync) * 1e3
                env.emit(model=name, shape=shape, batch=batch, system=system, ms=ms, ratio=ms / tripy_ms,
                         **({"compile_s": compile_peer_s} if system != "torch eager" else {}))


def table(records):
    rows = [("model", "shape", "system", "ms", "peer/tripy", "note")]
    for r in records:
        note = f"vs hand-written {r['vs_handwritten']:.2f}x" if "vs_handwritten" in r else (
            f"{r['kernels']} kernels from {r['nodes']} nodes, err {r['max_rel_err']:.1e} vs {r['checked_against']}"
            if "kernels" in r else "")
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
        rows.append((r["model"], r["shape"], r["system"], f"{r['ms']:.3f}", ratio, note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "gpu"])
    parser.add_argument("--quick", action="store_true", help="small sizes and short timings (CI)")
    parser.add_argument("--only", help="comma-separated models")
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args(argv)
    env = Env(args)
    names = TORCH_MODELS if torch is not None else STAND_INS
    if args.only:
        names = [n for n in args.only.split(",") if n]
        unknown = sorted(set(names) - set(TORCH_MODELS) - set(STAND_INS))
        if unknown:
            parser.error(f"unknown models {unknown}; choose from {TORCH_MODELS + STAND_INS}")
        if torch is None and set(names) & set(TORCH_MODELS):
            parser.error("these models are exported by torch, which is not installed")
    peers = ["onnxruntime" if onnxruntime else None, "torch" if torch else None,
             "torch.compile" if env.torch_compile else None]
    print(f"# device {env.device}; peers: {', '.join(p for p in peers if p) or 'none installed'}", flush=True)
    for name in names:
        bench_model(name, env)
    print(table(env.records))
    for f in env.failures:
        print("FAILED:", f)
    return 1 if env.failures else 0


if __name__ == "__main__":
    sys.exit(main())
