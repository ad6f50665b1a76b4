"""The model benchmark: whole models in Tripy against the same architecture in torch, in one run.

Each model comes from examples/ (one definition, with its torch twin). Torch's random weights are
copied into Tripy by name (nothing is downloaded); where Hugging Face `transformers` is installed,
the torch side is its model holding the same weights (bench/hf_peers.py: GPT2LMHeadModel, also for
the decode step, and LlamaDecoderLayer, SDPA attention), what a torch user runs, and the twin (which
calls scaled_dot_product_attention where torch has it) is timed beside it under torch.compile-ro:
`tripy/best` divides by the faster of all. The outputs are checked against torch (or, where torch
is absent, against the examples' float64 numpy references while the size allows), then Tripy's
compiled executable is timed against torch eager, torch.compile and
torch.compile(mode="reduce-overhead"). Compile times: tp.compile against
torch.compile's first call, both cold: the run points Tripy's kernel cache, the CUDA driver's cache
(where NVRTC 12.9+ keeps what it compiled) and torch.compile's (Inductor's, Triton's) at new empty
directories, and each compile-scaling probe gets its own. --warm-caches keeps the usual ones (what
a user's second run sees).

Models: gpt2 (B1x128, B8x1024), gpt2-decode (B1, one token after 1023 cached: Tripy's compiled
decode step over a KV cache updated in place, examples/gpt2_generate.py, against a step that
concatenates its cache), llama-block (Llama 3 8B's block at B1x128 and B1x1024), resnet50 (B1, B32
at 224x224; on the GPU torch's side runs channels-last where that is faster in eager). float16 on
the GPU; float32 on the CPU, where only the first size of each model runs. --quick: small configs
and short timings, for CI.
compile-scaling (only when asked for): GPT-2-width models of 6, 12 and 24 layers, Tripy's compile
time and peak host memory against their weight bytes, each measured in a fresh process.
compile-dynamic (only when asked for): GPT-2 (12 layers) at B1 compiled with T fixed at 128 and
with T dynamic in (1, 128, 128), alternately, five times each, each in a fresh process; the ratio
of the medians. profiles (only when asked for): GPT-2 compiled once with two optimization
profiles (B1xT128 and B in 1..32 x T in 1..1024, opt B32x1024; B8x64 at most with --quick), each
shape timed on it against an executable compiled for that profile alone.

Output: one JSON object per line per measurement (model, shape, batch, system, ms, device, dtype,
compile_s, max_rel_err, ...), then a table. Exits non-zero when an output check fails.

Run: python bench/models.py [--device cpu|gpu] [--quick] [--only gpt2,resnet50,...] [--no-torch-compile]
     [--profile DIR] [--kernels] [--warm-caches]
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "bench")]

from timing import empty_caches  # noqa: E402

if __name__ == "__main__" and "--warm-caches" not in sys.argv:
    empty_caches()

import numpy as np  # noqa: E402

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402

import gpt2  # noqa: E402
import gpt2_generate  # noqa: E402
import hf_peers  # noqa: E402
import kernel_table  # noqa: E402
import llama_block  # noqa: E402
import numpy_ref  # noqa: E402
import resnet50  # noqa: E402
import timing  # noqa: E402
from model_utils import load_weights, optional_torch, to_numpy  # noqa: E402

torch = optional_torch()
MODELS = ("gpt2", "gpt2-decode", "llama-block", "resnet50")
EXTRA = ("compile-scaling", "compile-dynamic", "profiles")  # run only when named in --only
TOLERANCE = {"float16": 2e-2, "float32": 1e-3}  # max |error| / max |reference|


class Env:
    """The run's settings: device, dtypes, how to synchronise, the time budget per measurement."""

    def __init__(self, args):
        self.device = args.device or ("gpu" if _C.gpu_available() else "cpu")
        tp.config.default_device = "gpu:0" if self.device == "gpu" else "cpu"
        self.quick = args.quick
        self.budget_s = 0.2 if args.quick else 1.5
        self.dtype = tp.float16 if self.device == "gpu" else tp.float32
        self.np_dtype = np.dtype(self.dtype.name)
        self.torch_compile = not args.no_torch_compile and torch is not None and hasattr(torch, "compile")
        self.torch_device = "cuda" if self.device == "gpu" else "cpu"
        self.torch_dtype = getattr(torch, self.dtype.name) if torch else None
        if self.device == "cpu":
            self.sync = timing.no_sync
            if torch is not None:
                # torch defaults to its count of physical cores (1 on some 2-vCPU machines); Tripy
                # runs a thread per logical CPU, so torch gets as many.
                torch.set_num_threads(os.cpu_count())
        elif torch is not None:
            self.sync = torch.cuda.synchronize  # device-wide, so Tripy's stream is covered too
        else:
            self.sync = tp.default_stream().synchronize
        self.failures = []
        self.records = []
        self.profile_dir = args.profile
        self.kernels = args.kernels and self.device == "gpu" and torch is not None
        self.warm_caches = getattr(args, "warm_caches", True)  # imported (tests): the caches were not touched

    def full_sizes(self, sizes):
        """The full benchmark's sizes: on the CPU only the first (the largest take minutes per call)."""
        return list(sizes) if self.device == "gpu" else list(sizes)[:1]

    def twin(self, module):
        """A torch twin moved to the run's device and dtype, in inference mode."""
        return module.to(self.torch_device, self.torch_dtype).eval()

    def emit(self, **record):
        record.update(device=self.device, dtype=self.dtype.name)
        self.records.append(record)
        print(json.dumps(record), flush=True)


class Case:
    """One workload. ``tripy_fn`` is compiled for ``inputs`` (numpy arrays; float ones take the run's
    dtype), unless ``tripy_build()`` is given: it compiles and prepares what it needs and returns
    (compile seconds, a call to time, a call that profiles one call). ``torch_fn(*torch_args)`` is
    the peer (transformers' model, or the twin), or None; ``also`` = (label, fn, args) a second
    torch implementation timed under torch.compile-ro beside it (the twin where the peer is
    transformers', which can be the faster of the two): the best ratio takes the faster.
    ``reference()`` is a numpy float64 result used where torch is absent. ``pick`` selects the
    compared part of Tripy's output."""

    def __init__(self, model, shape, batch, tripy_fn, inputs, torch_fn=None, torch_args=(), reference=None,
                 pick=None, system="tripy", note=None, tripy_build=None, also=None):
        self.model, self.shape, self.batch = model, shape, batch
        self.tripy_fn, self.inputs, self.torch_fn, self.torch_args = tripy_fn, inputs, torch_fn, torch_args
        self.reference, self.pick, self.system, self.note = reference, pick, system, note
        self.tripy_build, self.also = tripy_build, also


def torch_input(env, array):
    t = torch.from_numpy(array).to(env.torch_device)
    return t.long() if array.dtype.kind == "i" else t.to(env.torch_dtype)


# --- the models --------------------------------------------------------------------------------
_gpt_cache = {}


def gpt_models(env):
    """GPT-2 124M (a small config with --quick) with its weights, shared by the gpt2 cases."""
    if not _gpt_cache:
        config = gpt2.GPT2_124M
        if env.quick:
            config = gpt2.GPTConfig(block_size=64, vocab_size=211, n_layer=2, n_head=4, n_embd=64)
        model, twin, weights = gpt2.GPT(config, env.dtype), None, None
        if torch is not None:
            twin = env.twin(gpt2.TorchGPT(config))
            gpt2.load_gpt(model, twin.state_dict())
        else:
            weights = gpt2.random_weights(config)
            gpt2.load_gpt(model, weights)
        _gpt_cache.update(config=config, model=model, twin=twin, weights=weights)
    return _gpt_cache["config"], _gpt_cache["model"], _gpt_cache["twin"], _gpt_cache["weights"]


def gpt2_cases(env):
    config, model, twin, weights = gpt_models(env)
    peer, note = twin, None
    hf = hf_peers.gpt2(env, config, twin)
    if hf is not None:
        peer, note = hf
    rng = np.random.default_rng(0)
    for B, T in [(1, 16), (2, 64)] if env.quick else env.full_sizes([(1, 128), (8, 1024)]):
        idx = rng.integers(0, config.vocab_size, (B, T)).astype(np.int32)
        reference = None
        if weights is not None and B * T <= 128:  # numpy float64 is too slow beyond that
            reference = lambda idx=idx: gpt2.numpy_forward(weights, idx, config)  # noqa: E731
        args = (torch_input(env, idx),) if twin else ()
        also = ("twin", twin, args) if hf is not None else None
        yield Case("gpt2", f"B{B}x{T}", B, model, [idx], peer, args, reference, note=note, also=also)


def gpt2_decode_cases(env):
    """One greedy decode step at B1 after block_size - 1 cached tokens (GPT-2's positions end at
    1024, so 1023 + 1). Tripy: examples/gpt2_generate.py's compiled prefill fills the caches (donated,
    so updated in place), then the compiled decode step is timed at position 1023 (each call rewrites
    that row: the same work every call). torch: transformers' GPT2LMHeadModel over the cached rows,
    else the twin's KV-cache step (both concatenate the cache)."""
    config, model, twin, weights = gpt_models(env)
    past_len = config.block_size - 1
    idx = np.random.default_rng(1).integers(0, config.vocab_size, (1, past_len + 1)).astype(np.int32)
    shape = f"B1 past {past_len}"

    def build():
        compile_s, (prefill, decode) = timing.first_call_seconds(
            lambda: gpt2_generate.compile_steps(model, dtype=env.dtype, prefill_opt=past_len))
        _, *caches = prefill(tp.Tensor(idx[:, :past_len]), gpt2_generate.position(0),
                             *gpt2_generate.empty_caches(model, dtype=env.dtype))
        token, pos = tp.Tensor(idx[:, past_len:]), gpt2_generate.position(past_len)
        return compile_s, lambda: decode(token, pos, *caches)[0], lambda: decode.profile(token, pos, *caches)

    torch_fn, torch_args, also = None, (), None
    note = "compiled decode step, KV cache updated in place; compile_s: prefill and decode"
    if twin is not None:
        with torch.no_grad():
            _, past = twin(torch_input(env, idx[:, :past_len]), past=[])
        torch_fn = lambda token, cache: twin(token, past=cache)[0]  # noqa: E731
        torch_args = (torch_input(env, idx[:, past_len:]), past)
        hf = hf_peers.gpt2_decode(env, config, twin, past)
        if hf is not None:
            also = ("twin", torch_fn, torch_args)
            (torch_fn, peer_note), position = hf, torch.tensor([past_len], device=env.torch_device)
            torch_args, note = (torch_input(env, idx[:, past_len:]), position), f"{note}; {peer_note}"
    reference = None
    if weights is not None and env.quick:
        reference = lambda: gpt2.numpy_forward(weights, idx, config)[:, -1:]  # noqa: E731
    yield Case("gpt2-decode", shape, 1, None, [], torch_fn, torch_args, reference, tripy_build=build, note=note,
               also=also)


def llama_block_cases(env):
    config = llama_block.TINY if env.quick else llama_block.LLAMA3_8B
    block, twin, weights = llama_block.TransformerBlock(config, env.dtype), None, None
    if torch is not None:
        twin = env.twin(llama_block.TorchTransformerBlock(config))
        load_weights(block, twin.state_dict())
    else:
        weights = llama_block.random_weights(config)
        load_weights(block, weights)
    peer, note = twin, None
    hf = hf_peers.llama_block(env, config, twin)
    if hf is not None:
        peer, note = hf
    rng = np.random.default_rng(2)
    for B, T in [(1, 16)] if env.quick else env.full_sizes([(1, 128), (1, 1024)]):
        x = rng.standard_normal((B, T, config.dim)).astype(env.np_dtype)
        reference = None
        if weights is not None and env.quick:
            reference = lambda x=x: llama_block.numpy_forward(weights, x, config)  # noqa: E731
        args = (torch_input(env, x),) if twin else ()
        also = ("twin", twin, args) if hf is not None else None
        yield Case("llama-block", f"B{B}x{T}", B, block, [x], peer, args, reference, note=note, also=also)


def resnet50_cases(env):
    twin = resnet50.torchvision_resnet50()
    if twin is not None:  # full width; small images with --quick
        width, weights = 64, None
        size, batches = (64, (1, 2)) if env.quick else (224, env.full_sizes((1, 32)))
        model = resnet50.ResNet(width=width, dtype=env.dtype)
        twin = env.twin(twin)
        resnet50.load_resnet(model, twin.state_dict())
    else:  # full width, or a tiny width with --quick that numpy can check
        width, size, batches = (4, 32, (1, 2)) if env.quick else (64, 224, env.full_sizes((1, 32)))
        model = resnet50.ResNet(width=width, dtype=env.dtype)
        weights = resnet50.random_weights(width=width)
        resnet50.load_resnet(model, weights)
    rng = np.random.default_rng(3)
    for B in batches:
        x = rng.standard_normal((B, 3, size, size)).astype(env.np_dtype)
        reference = None
        if weights is not None and env.quick:
            reference = lambda x=x: resnet50.numpy_forward(weights, x)  # noqa: E731
        note = None if width == 64 else f"width {width} (tiny), {size}x{size}"
        peer, peer_args = twin, (torch_input(env, x),) if twin else ()
        if twin is not None and env.device == "gpu" and not env.quick:
            peer, peer_args, layout = faster_layout(env, twin, peer_args[0])
            note = f"torch: {layout} (the faster layout in eager at this size)"
        yield Case("resnet50", f"B{B}", B, model, [x], peer, peer_args, reference, note=note)


def faster_layout(env, twin, x):
    """The twin and its input in channels-last or in NCHW, whichever torch eager runs faster (with
    float16 convolutions cuDNN is often faster channels-last), as (model, args, layout name)."""
    channels_last = copy.deepcopy(twin).to(memory_format=torch.channels_last)
    x_last = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        nchw = timing.median_seconds(lambda: twin(x), 0.5, env.sync)
        last = timing.median_seconds(lambda: channels_last(x_last), 0.5, env.sync)
    return (channels_last, (x_last,), "channels-last") if last < nchw else (twin, (x,), "NCHW")


CASES = {"gpt2": gpt2_cases, "gpt2-decode": gpt2_decode_cases, "llama-block": llama_block_cases,
         "resnet50": resnet50_cases}


# --- measuring ----------------------------------------------------------------------------------
def relative_error(got, want):
    """max |got - want| / max |want|, computed where the data lives (torch tensors stay on the GPU)."""
    if torch is not None and isinstance(want, torch.Tensor):
        try:
            got_t = torch.from_dlpack(got)
        except Exception:  # an exporter torch cannot read: go through the host
            got_t = torch.from_numpy(to_numpy(got))
        got_t, want = got_t.to(want.device).float(), want.float()
        if got_t.shape != want.shape:
            raise ValueError(f"shapes differ: Tripy {tuple(got_t.shape)} vs torch {tuple(want.shape)}")
        return ((got_t - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    return numpy_ref.max_relative_error(to_numpy(got), want)


def run_tripy(case, env):
    if case.tripy_build is not None:
        compile_s, call, profile = case.tripy_build()
    else:
        infos = [tp.InputInfo(shape=a.shape, dtype=tp.int32 if a.dtype.kind == "i" else env.dtype)
                 for a in case.inputs]
        args = [tp.Tensor(a) for a in case.inputs]
        compile_s, exe = timing.first_call_seconds(lambda: tp.compile(case.tripy_fn, args=infos))
        call, profile = (lambda: exe(*args)), (lambda: exe.profile(*args))
    err, check = None, "none"
    out = call()
    if case.pick is not None:
        out = case.pick(out)
    if case.torch_fn is not None:
        with torch.no_grad():
            want = case.torch_fn(*case.torch_args)
        err, check = relative_error(out, want), "torch"
        del want
    elif case.reference is not None:
        err, check = relative_error(out, case.reference()), "numpy float64"
    del out
    ms = timing.median_seconds(call, env.budget_s, env.sync) * 1e3
    if env.profile_dir:
        print_profile(profile(), f"{case.model}-{case.shape}", env.profile_dir)
    if env.kernels:
        kernel_table.report(f"{case.model}-{case.shape} {case.system}", call, env.sync)
    env.emit(model=case.model, shape=case.shape, batch=case.batch, system=case.system, ms=ms, compile_s=compile_s,
             max_rel_err=err, checked_against=check, **({"note": case.note} if case.note else {}))
    if err is not None and not err <= TOLERANCE[env.dtype.name]:
        env.failures.append(f"{case.model} {case.shape}: Tripy differs from {check} by {err:.2e}")


def print_profile(profile, label, directory):
    """Where a call's time goes: per kernel kind, then the costliest kernels (summed over repeats),
    and a Chrome trace in `directory`."""
    os.makedirs(directory, exist_ok=True)
    profile.save_chrome_trace(os.path.join(directory, f"{label}.json"))
    by_kind, by_kernel = {}, {}
    for r in profile.rows:
        by_kind[r["kind"]] = [a + b for a, b in zip(by_kind.get(r["kind"], [0, 0.0]), [1, r["ms"]])]
        key = (r["kind"], r["name"], r["source"])
        by_kernel[key] = [a + b for a, b in zip(by_kernel.get(key, [0, 0.0]), [1, r["ms"]])]
    print(f"\nprofile {label}: {len(profile.rows)} kernels, {profile.total_ms:.3f} ms (kernels launched one by one)")
    for kind, (n, ms) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:<10} {n:>4} kernels {ms:9.3f} ms {100 * ms / profile.total_ms:5.1f}%")
    for (kind, name, source), (n, ms) in sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"  {ms:9.3f} ms  {n:>3}x {kind:<9} {name[:60]:<60} {source}")


def run_torch(case, env):
    ro = {"mode": "reduce-overhead"}
    systems = [("torch eager", None, case.torch_fn, case.torch_args)]
    if env.torch_compile:
        systems += [("torch.compile", {}, case.torch_fn, case.torch_args),
                    ("torch.compile-ro", ro, case.torch_fn, case.torch_args)]
        if case.also is not None:
            label, fn, args = case.also
            systems.append((f"{label} torch.compile-ro", ro, fn, args))
    for system, options, torch_fn, args in systems:
        record = dict(model=case.model, shape=case.shape, batch=case.batch, system=system)
        try:
            with torch.no_grad():
                fn, compile_s = torch_fn, None
                if options is not None:
                    torch._dynamo.reset()  # each case compiles afresh: no recompile limits, honest times
                    fn = torch.compile(torch_fn, dynamic=False, **options)
                    compile_s, _ = timing.first_call_seconds(lambda: fn(*args), env.sync)
                ms = timing.median_seconds(lambda: fn(*args), env.budget_s, env.sync) * 1e3
                if env.kernels and system == "torch.compile-ro":
                    kernel_table.report(f"{case.model}-{case.shape} {system}", lambda: fn(*args), env.sync)
            env.emit(**record, ms=ms, compile_s=compile_s)
        except Exception as e:  # one failing system must not hide the others
            env.emit(**record, ms=None, error=f"{type(e).__name__}: {str(e)[:300]}")


def run_model(name, env):
    for case in CASES[name](env):
        try:
            run_tripy(case, env)
        except Exception as e:
            env.emit(model=case.model, shape=case.shape, batch=case.batch, system=case.system, ms=None,
                     error=f"{type(e).__name__}: {str(e)[:2000]}")
            env.failures.append(f"{case.model} {case.shape}: Tripy failed: {type(e).__name__}")
        if case.torch_fn is not None:
            run_torch(case, env)
        if env.device == "gpu" and torch is not None:
            torch.cuda.empty_cache()


# --- compile time and memory against weight bytes -------------------------------------------------
def _proc_status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return None


def compile_probe(n_layer, env, dynamic=None):
    """In a fresh process: build a GPT-2-width model of n_layer layers from numpy weights, compile it,
    and report compile seconds and peak host memory (VmHWM, reset first where the kernel allows).
    With `dynamic` given (compile-dynamic's probes), T is dynamic in (1, T, T) when it is true, and
    the record is compile-dynamic's."""
    wide = dict(block_size=64, vocab_size=1024, n_head=4, n_embd=64) if env.quick else {}
    config = gpt2.GPTConfig(n_layer=n_layer, **wide)
    model, weights = gpt2.GPT(config, env.dtype), gpt2.random_weights(config)
    gpt2.load_gpt(model, weights)
    weight_bytes = sum(v.size for v in weights.values()) * env.np_dtype.itemsize
    rss_before = _proc_status_mib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        peak_reset = True
    except OSError:
        peak_reset = False
    T = 16 if env.quick else 128
    info = tp.InputInfo((1, (1, T, T)) if dynamic else (1, T), tp.int32)
    compile_s, _ = timing.first_call_seconds(lambda: tp.compile(model, args=[info]))
    peak = _proc_status_mib("VmHWM")
    if dynamic is not None:
        shape = f"B1xT, T in (1, {T}, {T})" if dynamic else f"B1xT, T = {T}"
        env.emit(model="compile-dynamic", shape=shape, batch=1, system="tripy", ms=None, compile_s=compile_s,
                 dynamic=dynamic, n_layer=n_layer)
        return
    env.emit(model="compile-scaling", shape=f"{n_layer} layers, width {config.n_embd}", batch=1, system="tripy",
             ms=None, compile_s=compile_s, n_layer=n_layer, weight_mib=weight_bytes / 2**20,
             rss_before_mib=rss_before, peak_mib=peak, extra_peak_mib=peak - rss_before, peak_reset=peak_reset)


def run_probe(env, n_layer, what, extra=()):
    """One compile probe in a fresh process: its record, or None after noting the failure."""
    cmd = [sys.executable, os.path.abspath(__file__), "--compile-probe", str(n_layer), "--device", env.device, *extra]
    # Without --warm-caches each probe starts with empty caches of its own (at its import).
    cmd += (["--quick"] if env.quick else []) + (["--warm-caches"] if env.warm_caches else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        env.failures.append(f"{what}: exit {out.returncode}: {out.stderr[-500:]}")
        return None
    record = json.loads(lines[-1])
    env.records.append(record)
    print(lines[-1], flush=True)
    return record


def compile_scaling(env):
    for n_layer in (6, 12, 24):
        run_probe(env, n_layer, f"compile-scaling {n_layer} layers")


def compile_dynamic(env):
    """GPT-2's compile with T static against T dynamic, alternated so that both meet the same load."""
    seconds = {False: [], True: []}
    for _ in range(2 if env.quick else 5):
        for dynamic in (False, True):
            shape = "dynamic" if dynamic else "static"
            record = run_probe(env, 12, f"compile-dynamic ({shape} T)", ["--probe-shape", shape])
            if record:
                seconds[dynamic].append(record["compile_s"])
    if seconds[False] and seconds[True]:
        static, dynamic = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"\ncompile GPT-2 B1 on {env.device}: T static {1e3 * static:.1f} ms, T dynamic {1e3 * dynamic:.1f} ms "
              f"(medians of {len(seconds[False])} and {len(seconds[True])}); dynamic / static {dynamic / static:.2f}",
              flush=True)


def profiles(env):
    """GPT-2 with two optimization profiles against each profile compiled alone, timed alternately."""
    config, model, _, _ = gpt_models(env)
    small, large = ((1, 16), (8, 64)) if env.quick else ((1, 128), (32, 1024))
    batch, seq = tp.NamedDimension("batch", 1, large[0], large[0]), tp.NamedDimension("seq", 1, large[1], large[1])
    shapes = [[tp.NamedDimension("batch", *[small[0]] * 3), tp.NamedDimension("seq", *[small[1]] * 3)],
              [batch, seq]]
    info = lambda dims: [tp.InputInfo(tuple(dims), tp.int32)]  # noqa: E731
    both = tp.compile(model, args=info([batch, seq]), optimization_profiles=shapes)
    rng = np.random.default_rng(3)
    for (B, T), dims in zip((small, large), shapes):
        alone = tp.compile(model, args=info(dims))
        idx = tp.Tensor(rng.integers(0, config.vocab_size, (B, T)).astype(np.int32))
        got, want = (np.asarray(tp.copy(exe(idx), tp.device("cpu"))).astype(np.float32) for exe in (both, alone))
        err = float(np.abs(got - want).max() / np.abs(want).max())
        times = {id(both): [], id(alone): []}
        for _ in range(3):  # alternated, so both meet the same clocks
            for exe in (both, alone):
                times[id(exe)].append(timing.median_seconds(lambda exe=exe: exe(idx), env.budget_s / 3, env.sync))
        two, one = (1e3 * min(times[id(exe)]) for exe in (both, alone))
        env.emit(model="profiles", shape=f"B{B}x{T}", batch=B, system="tripy", ms=two, alone_ms=one,
                 ratio=two / one, max_rel_err=err, profile=both.optimization_profile_for(idx))
        print(f"profiles: GPT-2 B{B}x{T} on the two-profile executable {two:.3f} ms, compiled alone {one:.3f} ms "
              f"({two / one:.3f}x)", flush=True)


# --- the table ------------------------------------------------------------------------------------
def fmt_ms(ms):
    return "-" if ms is None else f"{ms:.3f}"


def print_table(env):
    systems = ("tripy", "torch eager", "torch.compile", "torch.compile-ro")
    rows = {}
    for r in env.records:
        if r["model"] not in EXTRA:
            rows.setdefault((r["model"], r["shape"]), {})[r["system"]] = r
    head = (f"{'model':<12} {'shape':<15} " + " ".join(f"{s:>16}" for s in systems)
            + f" {'tripy/best':>10} {'rel.err':>8} {'compile tp | t.c':>17}")
    if rows:
        print(f"\nms per call, {env.device} ({device_name(env)}), {env.dtype.name}")
        print(head)
        print("-" * len(head))
    for (model, shape), by in rows.items():
        tripy = by.get("tripy", {})
        torch_ms = [r["ms"] for s, r in by.items() if s != "tripy" and r.get("ms")]  # the twin's too
        ratio = f"{tripy['ms'] / min(torch_ms):.2f}" if tripy.get("ms") and torch_ms else "-"
        err = next((r.get("max_rel_err") for r in by.values() if r.get("max_rel_err") is not None), None)
        tc = by.get("torch.compile", {}).get("compile_s")
        tpc = next((r["compile_s"] for r in by.values() if r["system"].startswith("tripy") and r.get("compile_s")),
                   None)
        compile_col = f"{tpc:.2f}s | {tc:.2f}s" if tpc and tc else (f"{tpc:.2f}s" if tpc else "-")
        print(f"{model:<12} {shape:<15} " + " ".join(f"{fmt_ms(by.get(s, {}).get('ms')):>16}" for s in systems)
              + f" {ratio:>10} {'-' if err is None else f'{err:.1e}':>8} {compile_col:>17}")
        for r in by.values():
            if r["system"] not in systems and r.get("ms"):
                print(f"{'':<28} {r['system']}: {r['ms']:.3f} ms ({r.get('note', '')})")
            if r.get("error"):
                print(f"{'':<28} {r['system']} failed: {r['error'][:150]}")
    scaling = [r for r in env.records if r["model"] == "compile-scaling"]
    if scaling:
        print(f"\n{'compile scaling':<30} {'weights MiB':>12} {'compile s':>10} {'ms per MiB':>10} "
              f"{'extra peak MiB':>15}")
        for r in scaling:
            print(f"{r['shape']:<30} {r['weight_mib']:>12.1f} {r['compile_s']:>10.2f} "
                  f"{1e3 * r['compile_s'] / r['weight_mib']:>10.2f} {r['extra_peak_mib']:>15.1f}")


def device_name(env):
    if env.device == "gpu" and torch is not None:
        return torch.cuda.get_device_name()
    return env.device


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), help="default: gpu where Tripy sees one")
    parser.add_argument("--quick", action="store_true", help="small sizes and short timings (CI)")
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(MODELS + EXTRA)}")
    parser.add_argument("--no-torch-compile", action="store_true", help="time torch eager only")
    parser.add_argument("--profile", metavar="DIR", help="print where Tripy's time goes per model; Chrome traces in DIR")
    parser.add_argument("--kernels", action="store_true",
                        help="GPU: per-kernel times of Tripy's and torch.compile-ro's calls, from CUPTI via torch.profiler")
    parser.add_argument("--warm-caches", action="store_true",
                        help="keep the usual compile caches (default: new empty ones, so compile times are cold)")
    parser.add_argument("--compile-probe", type=int, help=argparse.SUPPRESS)  # compile-scaling's child
    parser.add_argument("--probe-shape", choices=("static", "dynamic"), help=argparse.SUPPRESS)  # compile-dynamic's
    args = parser.parse_args()
    if args.device == "gpu" and not _C.gpu_available():
        parser.error("--device gpu: Tripy sees no GPU on this machine")
    env = Env(args)
    if args.compile_probe:
        dynamic = None if args.probe_shape is None else args.probe_shape == "dynamic"
        return compile_probe(args.compile_probe, env, dynamic)
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS + EXTRA]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS + EXTRA)}")
    print(f"# device {env.device} ({device_name(env)}), {env.dtype.name}; "
          f"torch {torch.__version__ if torch else 'absent: Tripy timed alone'}"
          + (f", torch threads {torch.get_num_threads()}" if torch is not None and env.device == "cpu" else ""),
          flush=True)
    print("# compile caches: " + ("the usual ones (--warm-caches)" if env.warm_caches else
                                  "new and empty (cold compiles; --warm-caches keeps the usual ones)"), flush=True)
    if torch is not None and not env.torch_compile:
        why = "--no-torch-compile" if args.no_torch_compile else f"torch {torch.__version__} has no torch.compile"
        print(f"# torch.compile and torch.compile-ro skipped: {why}", flush=True)
    if os.environ.get("TRIPY_DEBUG", "0") not in ("", "0"):
        print("# TRIPY_DEBUG is set: Tripy's times include its logging (3-5x on small models); "
              "unset it to measure", flush=True)
    if env.device == "cpu" and not env.quick and set(names) & set(MODELS):
        print("# on the CPU only the first size of each model runs (gpt2 B8x1024, llama-block B1x1024 and "
              "resnet50 B32 take minutes per call there)", flush=True)
    for name in names:
        if name == "compile-scaling":
            compile_scaling(env)
        elif name == "compile-dynamic":
            compile_dynamic(env)
        elif name == "profiles":
            profiles(env)
        else:
            run_model(name, env)
    print_table(env)
    if env.failures:
        print("\nFAILED:\n  " + "\n  ".join(env.failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
