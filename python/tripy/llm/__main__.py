"""python -m tripy.llm CHECKPOINT (--prompt TEXT | --ids 1,2,3): generates and streams tokens.

Text is printed as it completes (a token that ends inside a UTF-8 character waits for the next);
with --ids, or without a tokenizer.json, token ids are printed one per line.

--devices N runs the model tensor-parallel over N ranks (tp.llm.load's mesh). On the CPU they are N
threads of this process. On GPUs this process drives gpu:0 to gpu:N-1, a thread each, or, under
torchrun, each process drives one GPU, every process running this same command (rank 0 prints):

    torchrun --nproc-per-node 2 -m tripy.llm CHECKPOINT --prompt "..." --devices 2
"""

import argparse
import os
import re
import sys
import time

import tripy as tp
from tripy.frontend.device import default_device


# The lines of an error's message that show where it was raised ("--> file:line", source, carets).
_LOCATION = re.compile(r"^\s*(-->|\d*\s*\|)")


def _ids(text):
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids, got {text!r}") from None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tripy.llm", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="directory with config.json and *.safetensors")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="text (needs the checkpoint's tokenizer.json)")
    source.add_argument("--ids", type=_ids, help="prompt token ids, e.g. 128000,791,6864")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default) picks the most likely token")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (0: all)")
    parser.add_argument("--top-p", type=float, default=1.0, help="sample within this probability mass (1: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-len", type=int, default=None, help="context length (default: the config's, at most 4096)")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    parser.add_argument("--device", default=None, help="cpu or gpu (default: the GPU where present)")
    parser.add_argument("--devices", type=int, default=1, metavar="N",
                        help="ranks to shard the model over (GPUs: this process's first N, or one each under torchrun)")
    args = parser.parse_args(argv)
    if args.devices < 1:
        parser.error(f"--devices must be at least 1, got {args.devices}")

    # The device choice lasts for this command only (main() may be called from Python too).
    previous_device = tp.config.default_device
    try:
        if args.device:
            tp.config.default_device = args.device
        start = time.perf_counter()
        mesh = make_mesh(args.devices)
        # Under torchrun every process generates (each rank runs its share of every step); rank 0 prints.
        quiet = mesh is not None and mesh._rank not in (None, 0)
        llm = tp.llm.load(args.checkpoint, dtype=args.dtype and getattr(tp, args.dtype), max_seq_len=args.max_seq_len,
                          mesh=mesh)
        prompt = args.prompt if args.ids is None else args.ids
        as_text = args.ids is None and llm.tokenizer is not None
        steps = llm.stream(prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                           top_p=args.top_p, seed=args.seed)
        decoder = llm.tokenizer.stream() if as_text else None
        n, first = 0, None
        for token in steps:
            first = first or time.perf_counter()
            n += 1
            text = decoder.push(token) if decoder is not None else f"{token}\n"
            if not quiet:
                sys.stdout.write(text)
                sys.stdout.flush()
        if as_text and not quiet:
            sys.stdout.write("\n")
        end = time.perf_counter()
        rate = f", {(n - 1) / (end - first):.1f} tokens/s after the first" if n > 1 else ""
        ranks = f" over {mesh.size} ranks" if mesh is not None else ""
        if not quiet:
            print(f"[{n} tokens{ranks} in {end - start:.2f} s, load and compile included{rate}]", file=sys.stderr)
    except tp.TripyException as e:
        # The message without its source location: from the shell that would be this module's own.
        lines = [line for line in str(e).splitlines() if not _LOCATION.match(line)]
        print("error: " + "\n".join(lines).strip(), file=sys.stderr)
        return 1
    finally:
        tp.config.default_device = previous_device
    return 0


def make_mesh(n):
    """None for one device; else the tp.DeviceMesh of ``n`` ranks on the default device: CPU
    threads of this process, GPUs 0 to n - 1 driven by this process, or, under torchrun, one GPU
    a process."""
    if n == 1:
        return None
    if default_device().kind == "cpu":
        return tp.DeviceMesh(["cpu"] * n)
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    torchrun = [name for name in names if name in os.environ]
    missing = [name for name in names if name not in os.environ]
    if not torchrun:
        return tp.DeviceMesh([f"gpu:{i}" for i in range(n)])
    if missing:
        raise tp.TripyException(
            f"--devices {n}: {', '.join(torchrun)} {'is' if len(torchrun) == 1 else 'are'} set but "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: start one process per GPU with "
            f"torchrun --nproc-per-node {n} -m tripy.llm ..., or unset them for one process driving {n} GPUs."
        )
    mesh = tp.DeviceMesh.from_environment()
    if mesh.size != n:
        raise tp.TripyException(f"--devices {n} does not match the {mesh.size} processes of this job (WORLD_SIZE).")
    return mesh


if __name__ == "__main__":
    sys.exit(main())
