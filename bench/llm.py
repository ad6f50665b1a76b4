"""The LLM benchmark: Llama-family models generated from a checkpoint on disk, Tripy against Hugging
Face `transformers` with a static KV cache under torch.compile(mode="reduce-overhead") on a GPU, and
against a Llama decoder in plain torch (eager, float32, a preallocated cache: bench/llama_torch.py)
on the CPU, in one run.

Random weights are written once as a Hugging Face checkpoint (config.json + safetensors, nothing is
downloaded) and both systems load that same directory. Per shape, batch and prompt length it prints:
decode ms per token step (and `tripy_host_ms`, the time Python took to queue a step: near the
step's time, the step waits on the host) and tokens/s, the share of the measured copy bandwidth
that the step's bytes (weights plus the KV rows read) represent, prefill tokens/s (and, on a GPU, the prefill's
share of the measured bfloat16 GEMM peak), Tripy's load and compile seconds, whether the greedy
tokens agree (the first 32 steps), and, with the peer, how far each system's last-prompt-position
logits are from the same model computed in float32 by transformers (`logit_err`: relative L2
error; `top1`: the share of sequences whose most likely token agrees).

Shapes: 1b (Llama-3.2-1B: 16 layers, d 2048, GQA 32/8, vocab 128256, tied), 8b (Llama-3-8B),
70b (Llama-3-70B: 80 layers, d 8192, MLP 28672, GQA 64/8, vocab 128256, untied), tiny (2 layers, for
CPU runs and CI smoke tests). A shape takes a layer count after a colon: `70b:48` is the 70B shape
with 48 layers (its checkpoint is written with that many), `tiny:3` the tiny one with 3.

With --quant int8-weight-only,int4-weight-only,float8, each row is run again with the checkpoint
quantized at load (tp.llm.load's quant_mode): its rows say the mode and `vs_bf16`, its decode time
over the unquantized run's in the same process, and its logit error against the float32 peer. A
mode with `+float-head` (int4-weight-only+float-head) keeps the output head unquantized
(quantize_head=False). With --accuracy N as well, the unquantized model and each quantized one
compute the last-position logits of the same N random prompts (of the row's length), and each
quantized row says how far its logits are from the unquantized model's (`vs_model_err`: relative
L2 error over the N prompts; `vs_model_top1`: the share of prompts whose most likely token agrees),
with or without the peer. The same model loaded in float32 computes them too, and the unquantized
row and each quantized one say how far theirs are from it (`vs_f32_err`, `vs_f32_top1`): the
unquantized model's own rounding, the scale a quantized model's error is read against.

With --devices N (N > 1), each row is run again with the model tensor-parallel over N ranks
(tp.llm.load's mesh): its row says `devices` and `vs_one`, the one-device decode time over the
sharded one (the speedup) in the same run, and `same_tokens`, how many greedy steps agree with the
one-device run's (the worst sequence's count / the steps compared, and the mean: summing in another
order, bfloat16 near-ties may part a sequence). A model whose weights exceed what one GPU holds
(0.9 of its memory, or --one-device-gb) has no one-device row: its sharded row runs alone, without
`vs_one`, and says so in `note` (on the CPU the one-device row runs unless --one-device-gb says
otherwise). On the CPU the ranks are N threads of this process (the tiny shape checks the path in
CI; CPU ranks share the host's cores, so their timings say little). On GPUs one process drives
GPUs 0 to N - 1, a thread each, or under torchrun each process one GPU, every process running the
same command (rank 0 prints):

    torchrun --nproc-per-node 2 bench/llm.py --devices 2 --shapes 8b

Under torchrun every process also runs the one-GPU row on its own GPU (at the same time) where the
model fits one GPU; rank 0 writes the checkpoint (under --dir, default a directory of the system's
temporary one named for the job's port) and the others wait for it, so the processes must share a
file system (one host). The transformers peer is not run with --devices on GPUs. A model larger
than one GPU but not two (169 GB of bfloat16 weights, more than a 141 GB H200 holds; 70b:48, 86 GB,
exceeds an 80 GB H100), its checkpoint written a tensor at a time:

    torchrun --nproc-per-node 2 bench/llm.py --devices 2 --shapes 70b:96 --reference --dir DIR

A checkpoint written whole stays in --dir, and a later run of the same shape reads it again.

With --reference, each Tripy row (one device or sharded, not the quantized ones) also says how far
its last-prompt-position logits are from a float32 reference that owes nothing to Tripy or
transformers (`ref_logit_err`, `ref_top1`, as `logit_err` and `top1`): the checkpoint's safetensors
read one decoder layer at a time and computed with torch (on the GPU, else the CPU) or numpy, so it
runs for a model larger than one GPU. Under torchrun rank 0 computes it.
--load-dtype float32 loads the bfloat16 checkpoint in float32, so that the comparison is free of
bfloat16's rounding (whose error grows with the layers).

With --float32-check (and the peer), each row also says how many of 32 greedy steps agree when both
systems load the checkpoint in float32 (`greedy_f32`): random weights leave the top two logits
closer than bfloat16's rounding at some step, where both systems' bfloat16 tokens part from
float32's alike (`greedy_match`); in float32 the same model gives the same tokens. With the peer,
`torch_eager_match` says the same of transformers against itself: its compiled steps' greedy tokens
against its eager ones in bfloat16 (the same weights, other kernels).

Run: python bench/llm.py [--device gpu|cpu] [--shapes 1b,8b] [--batches 1,8] [--prompts 128,2048]
     [--steps 64] [--no-torch] [--dir DIR] [--out FILE.jsonl] [--warm-caches] [--quant MODES]
     [--accuracy N] [--devices N] [--one-device-gb GB] [--reference] [--load-dtype float32] [--float32-check]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_peers import static_cache  # noqa: E402
from llama_torch import bench_torch_cpu  # noqa: E402
from llm_checkpoint import config_dict, parse_shape, shared_checkpoint, weight_bytes, write_checkpoint  # noqa: E402
from llm_reference import head_dim, reference_logits  # noqa: E402
from timing import empty_caches  # noqa: E402

if __name__ == "__main__" and "--warm-caches" not in sys.argv:
    empty_caches()  # compile seconds from cold caches (Tripy's, CUDA's and torch.compile's)

import numpy as np  # noqa: E402

import tripy as tp  # noqa: E402

CHECK_STEPS = 32
REPEATS = 3  # timed decode runs per system; the median is reported


def median_ms(run, sync, repeats):
    run()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def gpu_gb_in_use():
    """GPU memory that Tripy's live tensors and loaded executables hold, in GB (None on the CPU)."""
    if not hasattr(tp._C, "_cuda_bytes_in_use") or not tp._C.gpu_available():
        return None
    return tp._C._cuda_bytes_in_use() / 1e9


def kernel_profile(step, torch, steps, top, what="step"):
    """The `top` kernels of `steps` calls of `step` by GPU time (torch.profiler sees Tripy's
    kernels too), and kernels per call, as text (`what` names the call)."""
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    # The calls are queued behind a sleeping kernel (launched before the profiler starts, so it
    # is not in the profile) so that the GPU never waits on the host, which the profiler slows:
    # the idle gaps are then the GPU's own (for a step; a prefill still converts its inputs).
    torch.cuda._sleep(int(SLEEP_CYCLES_PER_CALL * steps))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per = {}
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    for e in kernels:
        n, us = per.get(e.name, (0, 0.0))
        per[e.name] = (n + 1, us + e.device_time)
    sequence = critical_path_sequence(kernels)
    added = critical_path_shares(sequence)
    total = sum(us for _, us in per.values())
    lines = [f"# {sum(n for n, _ in per.values()) / steps:.0f} kernels and {total / steps:.1f} us of GPU time per {what}"]
    if os.environ.get("TRIPY_OVERLAP_LAUNCHES") != "0":
        # A kernel launched while its predecessor runs (sm_90+) is timed from its start, its wait
        # for that kernel included: the small kernels after a large one look slow.
        lines.append("# (launches overlap: each time includes the wait for the kernel before it; "
                     "TRIPY_OVERLAP_LAUNCHES=0 times each kernel alone)")
    lines.append(f"# 'adds': what each kernel adds to the {what}'s span on its GPU (its end after the end of every "
                 f"kernel that started before it); the span {sum(added.values()) / steps:.1f} us/{what}, "
                 f"idle {added.get(IDLE, 0.0) / steps:.1f} of it")
    for name, (n, us) in sorted(per.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"#  {us / steps:8.1f} us/{what}  adds {added.get(name, 0.0) / steps:8.1f}  {n / steps:5.1f}x  "
                     f"{us / n:7.2f} us  {name[:100]}")
    kinds = kind_shares(added)
    lines.append(f"# adds by kind (us/{what}): " + ", ".join(f"{kind} {us / steps:.1f}" for kind, us in kinds))
    # Where the GPU waits: the kernels that start after a gap, by the gaps' sum.
    gaps = {}
    for name, idle, _, _ in sequence:
        gaps[name] = gaps.get(name, 0.0) + idle
    waits = sorted(((us, name) for name, us in gaps.items() if us > 0), reverse=True)[:5]
    lines.append(f"# idle before (us/{what}): " + ", ".join(f"{name[:60]} {us / steps:.1f}" for us, name in waits))
    # The kernels that share a name (a layer's products) apart: a window from the middle of the
    # first call, in order (a layer or two of a model).
    middle = len(sequence) // steps // 2
    lines.append(f"# kernels {middle} to {middle + top - 1} of the first {what}: idle before, adds, own us")
    for name, idle, adds, own in sequence[middle:middle + top]:
        lines.append(f"#  {idle:6.2f} {adds:7.2f} {own:7.2f}  {name[:100]}")
    return "\n".join(lines)


IDLE = "(idle)"
# What a kernel of a decode step or prefill computes, from its name (Tripy's names its fused
# kernels by their ops; cuBLASLt's and NCCL's by their own): the first pattern that matches.
KERNEL_KINDS = (
    ("products", re.compile(r"gemv|weight_only_dot|nvjet|gemm|cutlass|splitKreduce|sm90_xmma|_dot_")),
    ("attention", re.compile(r"attention")),
    ("collectives", re.compile(r"all_reduce|all_gather|reduce_scatter|one_shot|nccl", re.I)),
    ("add + RMSNorm", re.compile(r"reduce_sum_div")),
    ("SiLU x up", re.compile(r"silu")),
    ("rotary", re.compile(r"sin|select_mul_mul_add")),
    ("cache writes", re.compile(r"update")),
    ("sampling", re.compile(r"sample")),
)


def kind_shares(added):
    """[(kind, microseconds)] of critical_path_shares' totals by KERNEL_KINDS (then "other" and
    idle), largest first: where a step's span goes."""
    totals = {}
    for name, us in added.items():
        kind = IDLE if name == IDLE else next((k for k, pattern in KERNEL_KINDS if pattern.search(name)), "other")
        totals[kind] = totals.get(kind, 0.0) + us
    return sorted(totals.items(), key=lambda kv: -kv[1])


SLEEP_CYCLES_PER_CALL = 2e7  # 10 ms at 2 GHz: more than the profiler's host time for a call


def critical_path_shares(sequence):
    """{kernel name: microseconds it adds to the span of the GPU's work}, and IDLE: the gaps, from
    critical_path_sequence's list."""
    added = {}
    for name, idle, adds, _ in sequence:
        if idle:
            added[IDLE] = added.get(IDLE, 0.0) + idle
        if adds:
            added[name] = added.get(name, 0.0) + adds
    return added


def critical_path_sequence(kernels):
    """[(name, idle before it, what it adds, its own time)] in start order, microseconds, for the
    kernels of the first GPU seen: each kernel adds the time from the later of its start and the
    previous ends to its own end, and a gap before it (the GPU waiting on the host or on a launch)
    is idle. Idle and adds sum to the span, so with overlapped launches (each kernel waiting inside
    for the one before) they say what each kernel costs the step where its time alone does not."""
    if not kernels:
        return []
    device = min(e.device_index for e in kernels)
    mine = sorted((e for e in kernels if e.device_index == device), key=lambda e: e.time_range.start)
    sequence, last_end = [], mine[0].time_range.start
    for e in mine:
        start, end = e.time_range.start, e.time_range.end
        sequence.append((e.name, max(start - last_end, 0.0), max(end - max(start, last_end), 0.0), end - start))
        last_end = max(last_end, end)
    return sequence


def bench_tripy(directory, batch, prompt, steps, sync, torch=None, profile_top=0, quant_mode=None, mesh=None,
                want_logits=False, profiler=None, accuracy=0, dtype=None):
    """One Tripy run (the model loaded in `dtype`, a name, else as stored); `torch` also computes
    the prompt logits, `profiler` (torch) only profiles.
    `quant_mode` may end in FLOAT_HEAD (the output head unquantized). `accuracy`: also the logits of
    that many random prompts (the same ones in every run: accuracy_prompts)."""
    profiler = profiler or torch
    quantize_head = None
    if quant_mode and quant_mode.endswith(FLOAT_HEAD):
        quant_mode, quantize_head = quant_mode[: -len(FLOAT_HEAD)], False
    t0 = time.perf_counter()
    llm = tp.llm.load(directory, max_seq_len=prompt + max(steps, CHECK_STEPS) + 8, max_batch_size=batch,
                      quant_mode=quant_mode, mesh=mesh, quantize_head=quantize_head,
                      dtype=getattr(tp, dtype) if dtype else None)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    # With --profile, also where each compile's time goes (the "timing" dump, stage by stage).
    with tp.logger.use_verbosity({"info", "timing"} if profile_top else {"info"}):
        gen = llm.generator()
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    ids = rng.integers(0, llm.config.vocab_size, (batch, prompt)).astype(np.int32)
    logits = prompt_logits(llm, gen, ids) if torch is not None or want_logits else None
    accuracy_logits = prompt_logits(llm, gen, accuracy_prompts(accuracy, prompt, llm.config)) if accuracy else None
    # Under a mesh, each argument is a list of this process's ranks' tensors, each on its rank's GPU.
    ids_t, zero, seed = gen._arguments(lambda: [tp.Tensor(ids), tp.Tensor(np.array([0], np.int32)),
                                                tp.Tensor(np.array([0], np.int64))])

    # Under a mesh the steps update each rank's caches in place; without one, each step returns them.
    def prefill():
        caches = gen._arguments(lambda: llm.model.empty_caches(batch, gen._world))
        tokens, pos, *updated = gen.prefill(ids_t, zero, seed, *caches)
        return (tokens, pos, *(updated if mesh is None else caches))

    prefill_ms = median_ms(lambda: np.asarray(prefill()[0]), sync, 3)
    tokens, pos, *caches = prefill()
    produced = [tokens]

    def decode_steps(n, keep):
        nonlocal tokens, pos, caches
        for _ in range(n):
            if mesh is None:
                tokens, pos, *caches = gen.decode(tokens, pos, seed, *caches)
            else:
                tokens, pos, *_ = gen.decode(tokens, pos, seed, *caches)
            if keep:
                produced.append(tokens)

    decode_steps(CHECK_STEPS - 1, True)  # warms the graph and gives the tokens to compare
    greedy = np.concatenate([np.asarray(t) for t in produced], axis=1)
    # Timed from a fresh prefill so the decode steps read the same KV rows as torch's; the
    # median of REPEATS runs.
    # host_ms: the time to queue a step; near ms, the step waits on the host, not on the device.
    samples, queued = [], []
    for _ in range(REPEATS):
        tokens, pos, *caches = prefill()
        np.asarray(tokens)
        t0 = time.perf_counter()
        decode_steps(steps, False)
        queued.append((time.perf_counter() - t0) * 1e3 / steps)
        np.asarray(tokens)
        samples.append((time.perf_counter() - t0) * 1e3 / steps)
    ms = statistics.median(samples)
    result = dict(ms=ms, host_ms=statistics.median(queued), prefill_ms=prefill_ms, load_s=load_s, compile_s=compile_s, tokens=greedy,
                  dtype=llm.model.dtype.name, logits=logits, ids=ids, accuracy_logits=accuracy_logits)
    held = gpu_gb_in_use()  # weights, KV caches, the executables' memory
    if held is not None:
        result["gpu_gb"] = held
    if profile_top and profiler is not None:  # every rank runs the profiled step (its collectives meet)
        note(kernel_profile(lambda: decode_steps(1, False), profiler, 8, profile_top))
        note(kernel_profile(prefill, profiler, 2, profile_top, what="prefill"))
    return result


def greedy_float32(directory, batch, prompt, torch):
    """CHECK_STEPS greedy tokens of Tripy and of transformers, both computing in float32 from the
    same checkpoint, and how many steps agree (as `greedy_match`). Random weights give nearly flat
    logits whose top two often sit closer than bfloat16's rounding, so the bfloat16 rows' tokens
    part after a few steps for both systems alike; in float32 the same model gives the same tokens."""
    import transformers

    llm = tp.llm.load(directory, dtype=tp.float32, max_seq_len=prompt + CHECK_STEPS + 8, max_batch_size=batch)
    gen = llm.generator()
    ids = np.random.default_rng(1).integers(0, llm.config.vocab_size, (batch, prompt)).astype(np.int32)
    seed, zero = tp.Tensor(np.array([0], np.int64)), tp.Tensor(np.array([0], np.int32))
    tokens, pos, *caches = gen.prefill(tp.Tensor(ids), zero, seed, *llm.model.empty_caches(batch))
    produced = [tokens]
    for _ in range(CHECK_STEPS - 1):
        tokens, pos, *caches = gen.decode(tokens, pos, seed, *caches)
        produced.append(tokens)
    tri = np.concatenate([np.asarray(t) for t in produced], axis=1)
    del llm, gen, caches, tokens, produced
    model = transformers.LlamaForCausalLM.from_pretrained(directory, torch_dtype=torch.float32,
                                                          attn_implementation="sdpa").cuda().eval()
    with torch.no_grad():
        x = torch.from_numpy(ids.astype(np.int64)).cuda()
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=CHECK_STEPS,
                             min_new_tokens=CHECK_STEPS, do_sample=False, pad_token_id=0)
    ref = out[:, prompt:].cpu().numpy()
    del model
    torch.cuda.empty_cache()
    return steps_agreeing(ref, tri)


def float32_accuracy_logits(directory, prompt, n):
    """The last-position logits of --accuracy's `n` prompts from the checkpoint loaded in float32."""
    llm = tp.llm.load(directory, dtype=tp.float32, max_seq_len=prompt + 8, max_batch_size=n)
    model = llm.model
    ids = accuracy_prompts(n, prompt, llm.config)
    cache = tp.InputInfo(model.cache_shape(n), dtype=model.dtype)
    fn = tp.compile(lambda tokens, pos, *caches: model(tokens, pos, list(caches))[0],
                    args=[tp.InputInfo(ids.shape, tp.int32), tp.InputInfo((1,), tp.int32)]
                    + [cache] * (2 * model.config.num_hidden_layers))
    return np.asarray(fn(tp.Tensor(ids), tp.Tensor(np.array([0], np.int32)), *model.empty_caches(n)))


def prompt_logits(llm, gen, ids):
    """The model's logits at the prompt's last position, (B, vocab) float32: the prefill without
    the token choice, compiled for these sizes (over the generator's mesh, if any: every rank
    computes the whole logits)."""
    model = llm.model
    n = 2 * model.config.num_hidden_layers
    batch = ids.shape[0]
    cache = tp.InputInfo(model.cache_shape(batch, gen._world), dtype=model.dtype)
    fn = tp.compile(lambda tokens, pos, *caches: tp.cast(model(tokens, pos, list(caches))[0], tp.float32),
                    args=[tp.InputInfo(ids.shape, tp.int32), tp.InputInfo((1,), tp.int32)] + [cache] * n, mesh=gen.mesh)
    args = gen._arguments(lambda: [tp.Tensor(ids), tp.Tensor(np.array([0], np.int32)),
                                   *model.empty_caches(batch, gen._world)])
    return np.asarray(fn(*args))


def accuracy_prompts(n, prompt, config):
    """The `n` random prompts of `prompt` tokens that --accuracy compares models on (the same in every run)."""
    return np.random.default_rng(256).integers(0, config.vocab_size, (n, prompt)).astype(np.int32)


def steps_agreeing(a, b):
    """Per sequence, how many greedy steps of `a` and `b` agree before the first difference: the worst
    sequence and the mean (bf16 near-ties may part a sequence late), as "worst/steps (mean m)"."""
    n = min(a.shape[1], b.shape[1])
    agree = (a[:, :n] == b[:, :n]).cumprod(axis=1).sum(axis=1)
    return f"{int(agree.min())}/{n} (mean {agree.mean():.1f})"


def logit_errors(got, want):
    """Relative L2 error of `got` against `want` (B, vocab), and the share of rows whose argmax agrees."""
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return err, float((got.argmax(-1) == want.argmax(-1)).mean())


def bench_torch(directory, batch, prompt, steps, torch):
    """transformers' LlamaForCausalLM (SDPA attention), a static cache, and the decode step under
    torch.compile(mode="reduce-overhead", fullgraph=True), as its documentation recommends."""
    import transformers

    model = transformers.LlamaForCausalLM.from_pretrained(directory, torch_dtype=torch.bfloat16,
                                                          attn_implementation="sdpa").cuda().eval()
    length = prompt + max(steps, CHECK_STEPS) + 8
    rng = np.random.default_rng(1)
    ids = torch.from_numpy(rng.integers(0, model.config.vocab_size, (batch, prompt))).cuda()
    sync = torch.cuda.synchronize

    def decode_one(cur, position, cache):
        logits = model(cur, position_ids=position[None].expand(cur.shape[0], 1), cache_position=position,
                       past_key_values=cache, use_cache=True, return_dict=False)[0]
        return logits[:, -1].argmax(-1, keepdim=True)

    compiled = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True)

    def run(n, keep, step=compiled):
        cache = static_cache(transformers, model.config, batch, length, "cuda", torch.bfloat16)
        with torch.no_grad():
            logits = model(ids, cache_position=torch.arange(prompt, device="cuda"), past_key_values=cache,
                           use_cache=True, return_dict=False)[0]
            cur = logits[:, -1].argmax(-1, keepdim=True)
            out = [cur]
            sync()
            t0 = time.perf_counter()
            for i in range(n):
                torch.compiler.cudagraph_mark_step_begin()
                cur = step(cur.clone(), torch.tensor([prompt + i], device="cuda"), cache)
                if keep:
                    out.append(cur.clone())
            sync()
            return (time.perf_counter() - t0) * 1e3 / max(n, 1), out

    def prefill():
        cache = static_cache(transformers, model.config, batch, length, "cuda", torch.bfloat16)
        with torch.no_grad():
            model(ids, cache_position=torch.arange(prompt, device="cuda"), past_key_values=cache, use_cache=True)

    t0 = time.perf_counter()
    _, out = run(CHECK_STEPS - 1, True)
    compile_s = time.perf_counter() - t0
    greedy = torch.cat(out, dim=1).cpu().numpy()
    # The same greedy steps in eager mode: how far bfloat16 rounding alone (torch.compile's fused
    # kernels against eager's) moves the tokens of these random weights.
    eager = torch.cat(run(CHECK_STEPS - 1, True, step=decode_one)[1], dim=1).cpu().numpy()
    run(8, False)
    ms = statistics.median(run(steps, False)[0] for _ in range(REPEATS))
    prefill_ms = median_ms(prefill, sync, 3)
    # The prompt's last logits in bfloat16, then in float32 from the same weights (the reference).
    with torch.no_grad():
        logits = model(ids, return_dict=False)[0][:, -1].float().cpu().numpy()
        model.float()
        reference = model(ids, return_dict=False)[0][:, -1].float().cpu().numpy()
    del model
    torch.cuda.empty_cache()
    return dict(ms=ms, prefill_ms=prefill_ms, compile_s=compile_s, tokens=greedy, eager_tokens=eager, logits=logits,
                reference=reference)


def prefill_flops(c, batch, prompt):
    """Multiply-adds x 2 of a prefill: every layer's projections over all the prompt's tokens, the
    causal attention's scores and values (half of the T x T products), and the logits of the last
    token only (as both systems compute them)."""
    C, F, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    D = head_dim(c)
    proj = C * D * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"]) + 3 * C * F
    tokens = batch * prompt
    attention = 2 * batch * prompt * prompt * c["num_attention_heads"] * D  # q k^T and p v, causal half each
    return 2 * L * (proj * tokens + attention) + 2 * batch * C * V


def gemm_peak(torch):
    """bfloat16 FLOP/s of an 8192 x 8192 x 8192 matrix product (the GPU's practical peak)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 2 * 8192**3 * 10 / (time.perf_counter() - t0)


def copy_bandwidth(torch):
    """Bytes read + written per second by a 1 GiB device-to-device copy."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        y.copy_(x)
    torch.cuda.synchronize()
    return 2 * x.numel() * 20 / (time.perf_counter() - t0)


QUANT_MODES = ("int8-weight-only", "int4-weight-only", "float8")  # tp.llm.load's quant_mode for a float checkpoint
FLOAT_HEAD = "+float-head"  # a --quant mode's suffix: the output head kept unquantized


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default=None)
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--batches", default="1")
    parser.add_argument("--prompts", default="128")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--no-torch", action="store_true",
                        help="no torch peer (transformers on a GPU, plain torch on the CPU)")
    parser.add_argument("--dir", default=None, help="where checkpoints are written (default: a temporary directory)")
    parser.add_argument("--warm-caches", action="store_true", help="keep the usual compile caches")
    parser.add_argument("--out", default=None, help="also append the JSON lines here")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N kernels of a decode step and of a prefill that take the most GPU time, "
                             "what each adds to the step as it runs (launches overlap), the gaps the GPU waits in, "
                             "and N kernels of the step in order (needs torch; TRIPY_OVERLAP_LAUNCHES=0 for each "
                             "kernel's own time)")
    parser.add_argument("--quant", default="", metavar="MODES",
                        help="also run these quant_modes (int8-weight-only,int4-weight-only,float8) against the "
                             "unquantized run")
    parser.add_argument("--accuracy", type=int, default=0, metavar="N",
                        help="with --quant: each quantized model's logits against the unquantized one's on N random "
                             "prompts")
    parser.add_argument("--devices", type=int, default=1, metavar="N",
                        help="also run each row tensor-parallel over N ranks (GPUs: under torchrun, one process per GPU)")
    parser.add_argument("--one-device-gb", type=float, default=None, metavar="GB",
                        help="with --devices, the weights one device holds: a larger model has no one-device row "
                             "(default: 0.9 of a GPU's memory; on the CPU, any)")
    parser.add_argument("--float32-check", action="store_true",
                        help="with the peer, also compare 32 greedy steps of both systems computing in float32 "
                             "(`greedy_f32`)")
    parser.add_argument("--load-dtype", choices=["float32", "bfloat16"], default=None,
                        help="load every unquantized row in this dtype (default: the checkpoint's, bfloat16 on a "
                             "GPU): float32 compares with --reference without bfloat16's rounding")
    parser.add_argument("--reference", action="store_true",
                        help="compare each Tripy row's prompt logits with a float32 layer-by-layer reference")
    args = parser.parse_args()

    from tripy import _C

    device = args.device or ("gpu" if _C.gpu_available() else "cpu")
    tp.config.default_device = device
    if args.devices < 1:
        parser.error(f"--devices must be at least 1, not {args.devices}")
    shapes = (args.shapes or ("1b" if device == "gpu" else "tiny")).split(",")
    for text in shapes:
        try:
            parse_shape(text)
        except ValueError as e:
            parser.error(str(e))
    mesh = make_mesh(parser, device, args.devices)
    if device == "gpu" and not _C.gpu_available():
        parser.error("--device gpu, but this machine has no GPU that Tripy can use")
    rank = 0 if mesh is None or mesh._rank is None else mesh._rank
    global PRINTS
    PRINTS = rank == 0
    modes = list(filter(None, args.quant.split(",")))
    for mode in modes:
        if mode.removesuffix(FLOAT_HEAD) not in QUANT_MODES:
            parser.error(f"--quant takes {', '.join(QUANT_MODES)} (each optionally with {FLOAT_HEAD}), not {mode!r}")
    # torch writes the checkpoint and times the GPU with or without --no-torch, which only drops
    # the transformers peer (writing an 8B checkpoint through numpy took 204 s instead of 21).
    torch, peer = None, False
    if device == "gpu":
        torch = optional_torch()
        if torch is not None and mesh is not None and mesh._rank is not None:
            # torch's timing and checkpoint on this process's GPU (the one Tripy's CUDA backend drives)
            torch.cuda.set_device(int(os.environ.get("TRIPY_CUDA_DEVICE", mesh.local_rank)))
        try:
            import transformers  # noqa: F401

            peer = torch is not None and not args.no_torch and mesh is None
        except ImportError:
            peer = False
    # On the CPU the peer is bench/llama_torch.py (transformers is not needed; Debian's torch has none).
    cpu_torch = optional_torch() if device == "cpu" and not args.no_torch else None
    dtype = "bfloat16" if device == "gpu" else "float32"
    one_process = mesh is None or mesh._rank is None
    if args.dir:
        root = args.dir
    elif one_process:
        root = tempfile.mkdtemp(prefix="tripy-llm-bench-")
    else:  # every process of the job names the same directory
        root = os.path.join(tempfile.gettempdir(), f"tripy-llm-bench-{os.environ.get('MASTER_PORT', '29500')}")
    bandwidth = copy_bandwidth(torch) if torch is not None else None
    peak = gemm_peak(torch) if torch is not None else None
    one_device_bytes = args.one_device_gb * 1e9 if args.one_device_gb is not None else (
        0.9 * torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory if torch is not None else None)
    device_name = _C.device_name() if hasattr(_C, "device_name") else device
    # The reference (rank 0's) runs with torch on this process's GPU, or on the CPU (numpy without torch).
    ref_torch, ref_device = optional_torch(), "cuda" if torch is not None else "cpu"
    rows = []
    for shape in shapes:
        directory = os.path.join(root, shape)
        wbytes = weight_bytes(config_dict(shape, dtype), 4 if (args.load_dtype or dtype) == "float32" else 2)
        # The one-device row runs unless a mesh is given and the weights exceed one device (KV caches
        # and workspace beside them); such a checkpoint is written a tensor at a time.
        fits = one_device_bytes is None or wbytes <= one_device_bytes
        t0 = time.perf_counter()
        if one_process:
            c = write_checkpoint(directory, shape, dtype, torch, on_gpu=fits)
        else:
            c = shared_checkpoint(directory, shape, dtype, torch, rank, on_gpu=fits)
        note(f"# {shape}: checkpoint written in {time.perf_counter() - t0:.1f} s")
        sync = (lambda: torch.cuda.synchronize()) if torch is not None else (lambda: None)
        for prompt in map(int, args.prompts.split(",")):
            for batch in map(int, args.batches.split(",")):
                tri, want = None, None  # want: the reference's logits (rank 0, --reference), computed once
                if mesh is None or fits:
                    tri = bench_tripy(directory, batch, prompt, args.steps, sync, torch, args.profile if PRINTS else 0,
                                      want_logits=args.reference, accuracy=args.accuracy if modes else 0,
                                      dtype=args.load_dtype)
                    ref = bench_torch(directory, batch, prompt, args.steps, torch) if peer else None
                    cpu_ref = (bench_torch_cpu(directory, c, tri["ids"], args.steps, CHECK_STEPS, REPEATS, cpu_torch)
                               if cpu_torch is not None else None)
                    kv_bytes = 2 * c["num_hidden_layers"] * batch * c["num_key_value_heads"] * (
                        head_dim(c)) * (prompt + args.steps // 2) * 2
                    # The dtype Tripy computes in, as config.json says: it must be the peer's (bfloat16 on a GPU).
                    row = dict(shape=shape, batch=batch, prompt=prompt, dtype=tri["dtype"], device=device_name,
                               tripy_ms=tri["ms"], tripy_host_ms=tri["host_ms"], tripy_tok_s=1e3 * batch / tri["ms"],
                               tripy_prefill_tok_s=1e3 * batch * prompt / tri["prefill_ms"],
                               load_s=tri["load_s"], compile_s=tri["compile_s"], weight_gb=wbytes / 1e9)
                    if "gpu_gb" in tri:
                        row.update(tripy_gpu_gb=tri["gpu_gb"])
                    if peak:
                        # The prefill's share of the GPU's bfloat16 GEMM peak (measured above).
                        achieved = prefill_flops(c, batch, prompt) / (tri["prefill_ms"] * 1e-3)
                        row.update(gemm_peak_tflops=peak / 1e12, tripy_prefill_tflops=achieved / 1e12,
                                   prefill_peak_share=achieved / peak)
                    if bandwidth:
                        row.update(copy_tb_s=bandwidth / 1e12, tripy_bw_share=(wbytes + kv_bytes) / (tri["ms"] * 1e-3) / bandwidth)
                    if ref is not None:
                        row.update(torch_ms=ref["ms"], torch_tok_s=1e3 * batch / ref["ms"],
                                   torch_prefill_tok_s=1e3 * batch * prompt / ref["prefill_ms"],
                                   torch_compile_s=ref["compile_s"], speedup=ref["ms"] / tri["ms"],
                                   greedy_match=steps_agreeing(ref["tokens"], tri["tokens"]),
                                   torch_eager_match=steps_agreeing(ref["tokens"], ref["eager_tokens"]))
                        (err, top1), (torch_err, torch_top1) = (logit_errors(x, ref["reference"]) for x in (tri["logits"], ref["logits"]))
                        row.update(logit_err=err, top1=top1, torch_logit_err=torch_err, torch_top1=torch_top1)
                        if args.float32_check:
                            row.update(greedy_f32=greedy_float32(directory, batch, prompt, torch))
                    if cpu_ref is not None:
                        row.update(torch_ms=cpu_ref["ms"], torch_tok_s=1e3 * batch / cpu_ref["ms"],
                                   torch_prefill_tok_s=1e3 * batch * prompt / cpu_ref["prefill_ms"],
                                   speedup=cpu_ref["ms"] / tri["ms"],
                                   greedy_match=steps_agreeing(cpu_ref["tokens"], tri["tokens"]))
                    if args.reference and PRINTS:
                        want = reference_logits(directory, c, tri["ids"], ref_torch, ref_device)
                        row.update(zip(("ref_logit_err", "ref_top1"), logit_errors(tri["logits"], want)))
                    if args.accuracy and modes:
                        tri["f32_logits"] = float32_accuracy_logits(directory, prompt, args.accuracy)
                        row.update(zip(("vs_f32_err", "vs_f32_top1"), logit_errors(tri["accuracy_logits"], tri["f32_logits"])))
                    emit(row, rows, args.out)
                    for mode in modes:
                        emit(quant_row(directory, batch, prompt, args.steps, sync, torch, mode, tri, ref,
                                       args.profile if PRINTS else 0, args.accuracy), rows, args.out)
                # Last: under torchrun its collectives wait for every process, so each has read the
                # checkpoint for every row once it returns (rank 0 then removes it).
                if mesh is not None:
                    sharded = bench_tripy(directory, batch, prompt, args.steps, sync, mesh=mesh,
                                          want_logits=args.reference, profile_top=args.profile, profiler=torch,
                                          dtype=args.load_dtype)
                    srow = dict(shape=shape, batch=batch, prompt=prompt, dtype=sharded["dtype"], devices=mesh.size,
                                device=device_name, tripy_ms=sharded["ms"], tripy_host_ms=sharded["host_ms"],
                                tripy_tok_s=1e3 * batch / sharded["ms"],
                                tripy_prefill_tok_s=1e3 * batch * prompt / sharded["prefill_ms"],
                                load_s=sharded["load_s"], compile_s=sharded["compile_s"], weight_gb=wbytes / 1e9)
                    if tri is not None:
                        srow.update(vs_one=tri["ms"] / sharded["ms"],
                                    same_tokens=steps_agreeing(sharded["tokens"], tri["tokens"]))
                    else:
                        srow.update(note=f"no one-device row: {wbytes / 1e9:.3g} GB of weights, one device holds "
                                         f"{one_device_bytes / 1e9:.3g} GB")
                        note(f"# {shape}: {srow['note']}")
                    if "gpu_gb" in sharded:
                        srow.update(tripy_gpu_gb=sharded["gpu_gb"])  # this process's GPU
                    if args.reference and PRINTS:
                        if want is None:
                            want = reference_logits(directory, c, sharded["ids"], ref_torch, ref_device)
                        srow.update(zip(("ref_logit_err", "ref_top1"), logit_errors(sharded["logits"], want)))
                    emit(srow, rows, args.out)
        if not args.dir and rank == 0:  # the other ranks are done with it: the sharded run met them
            shutil.rmtree(directory, ignore_errors=True)
    if PRINTS:
        print_table(rows)


def quant_row(directory, batch, prompt, steps, sync, torch, mode, tri, ref, profile_top=0, accuracy=0):
    """The row of the checkpoint quantized at load in `mode`, against the unquantized run `tri`
    (with `profile_top`, its decode step's kernels too; with `accuracy`, its logits against the
    unquantized model's on that many prompts)."""
    q = bench_tripy(directory, batch, prompt, steps, sync, torch, profile_top, quant_mode=mode, accuracy=accuracy)
    qrow = dict(shape=os.path.basename(directory), batch=batch, prompt=prompt, dtype=q["dtype"], quant=mode,
                tripy_ms=q["ms"], tripy_host_ms=q["host_ms"], tripy_tok_s=1e3 * batch / q["ms"], vs_bf16=q["ms"] / tri["ms"],
                tripy_prefill_tok_s=1e3 * batch * prompt / q["prefill_ms"],
                load_s=q["load_s"], compile_s=q["compile_s"])
    if "gpu_gb" in q:
        qrow.update(tripy_gpu_gb=q["gpu_gb"])
    if ref is not None:
        qrow.update(torch_ms=ref["ms"], speedup=ref["ms"] / q["ms"])
        qrow.update(zip(("logit_err", "top1"), logit_errors(q["logits"], ref["reference"])))
    if accuracy:
        qrow.update(accuracy_prompts=accuracy)
        qrow.update(zip(("vs_model_err", "vs_model_top1"), logit_errors(q["accuracy_logits"], tri["accuracy_logits"])))
        qrow.update(zip(("vs_f32_err", "vs_f32_top1"), logit_errors(q["accuracy_logits"], tri["f32_logits"])))
    return qrow


def optional_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


PRINTS = True  # whether this process prints: rank 0's under torchrun


def note(text):
    if PRINTS:
        print(text, file=sys.stderr)


def make_mesh(parser, device, n):
    """None for one device; N CPU ranks of this process; on GPUs, the torchrun job's mesh, or
    outside torchrun GPUs 0 to N - 1 driven by this process."""
    if n == 1:
        return None
    if device == "cpu":
        return tp.DeviceMesh(["cpu"] * n)
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    missing = [v for v in names if v not in os.environ]
    if len(missing) == len(names):
        return tp.DeviceMesh([f"gpu:{i}" for i in range(n)])
    if missing:
        parser.error(f"--devices {n}: torchrun's {', '.join(missing)} not set: start one process per GPU with "
                     f"torchrun --nproc-per-node {n} bench/llm.py --devices {n} ..., or none of them for one "
                     f"process driving {n} GPUs")
    mesh = tp.DeviceMesh.from_environment()
    if mesh.size != n:
        parser.error(f"--devices {n}, but this torchrun job has {mesh.size} processes (WORLD_SIZE)")
    return mesh


def emit(row, rows, out):
    """A row as soon as it is measured: printed (by rank 0 under torchrun), appended to `out`, kept
    for the table."""
    rows.append(row)
    if not PRINTS:
        return
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def print_table(rows):
    cols = [("shape", "{}"), ("dtype", "{}"), ("quant", "{}"), ("devices", "{}"), ("batch", "{}"), ("prompt", "{}"),
            ("tripy_ms", "{:.3f}"), ("tripy_host_ms", "{:.3f}"), ("torch_ms", "{:.3f}"), ("speedup", "{:.2f}"), ("vs_bf16", "{:.2f}"), ("vs_one", "{:.2f}"),
            ("same_tokens", "{}"), ("tripy_tok_s", "{:.0f}"), ("tripy_bw_share", "{:.0%}"),
            ("tripy_prefill_tok_s", "{:.0f}"), ("torch_prefill_tok_s", "{:.0f}"), ("prefill_peak_share", "{:.0%}"), ("compile_s", "{:.2f}"),
            ("load_s", "{:.2f}"), ("tripy_gpu_gb", "{:.2f}"), ("weight_gb", "{:.2f}"), ("greedy_match", "{}"), ("torch_eager_match", "{}"), ("greedy_f32", "{}"),
            ("logit_err", "{:.4f}"), ("torch_logit_err", "{:.4f}"), ("top1", "{:.2f}"), ("torch_top1", "{:.2f}"),
            ("ref_logit_err", "{:.2e}"), ("ref_top1", "{:.2f}"), ("vs_model_err", "{:.4f}"), ("vs_model_top1", "{:.2f}"), ("vs_f32_err", "{:.4f}"),
            ("vs_f32_top1", "{:.2f}")]
    cols = [(k, f) for k, f in cols if any(k in r for r in rows)]
    print(" | ".join(k for k, _ in cols))
    for r in rows:
        print(" | ".join(f.format(r[k]) if k in r else "-" for k, f in cols))


if __name__ == "__main__":
    main()
