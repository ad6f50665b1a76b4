"""bench/llm.py, the LLM benchmark, runs in CI on its tiny shape on the CPU: it writes a checkpoint,
loads, compiles and times it, and prints one record per run and a table; with --devices 2, the
run over 2 CPU ranks beside one rank's (or alone, for a model larger than one device), and on GPUs
outside torchrun an error saying how to start it. A shape takes a layer count (tiny:3), and
--reference compares each run's prompt logits with the float32 layer-by-layer reference
(bench/llm_reference.py), which itself matches the float64 numpy Llama of tests/llm/llama_ref.py
(llama3 rope scaling included)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))

import llama_ref  # noqa: E402


def run_bench(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "cpu", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def checkpoint_module(load_bench):
    """bench/llm_checkpoint.py (after bench/llm.py, which puts bench/ on the path for its imports)."""
    load_bench("llm")
    return load_bench("llm_checkpoint")


def records(out):
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_tiny_cpu_run_prints_a_record_and_the_table():
    out = run_bench("--steps", "4", "--prompts", "16", "--batches", "1,2")
    rows = records(out)
    assert [(r["shape"], r["batch"], r["prompt"]) for r in rows] == [("tiny", 1, 16), ("tiny", 2, 16)]
    for r in rows:
        assert r["tripy_ms"] > 0 and r["tripy_tok_s"] > 0 and r["tripy_prefill_tok_s"] > 0
    assert out.stdout.splitlines()[-3].startswith("shape | dtype | batch | prompt | tripy_ms")


def test_quantized_rows_compare_their_logits_with_the_unquantized_models():
    out = run_bench("--steps", "4", "--prompts", "16", "--quant", "int8-weight-only,float8", "--accuracy", "24")
    base, int8, float8 = records(out)
    assert "quant" not in base and (int8["quant"], float8["quant"]) == ("int8-weight-only", "float8")
    for q in (int8, float8):
        assert q["accuracy_prompts"] == 24
        # Quantization moves the logits a little: int8 by about its step over the weights' range,
        # float8 by e4m3's relative step (1/16 at most).
        assert 0 < q["vs_model_err"] < 0.1 and 0 <= q["vs_model_top1"] <= 1
    assert int8["vs_model_top1"] >= 0.5
    # The float32 model's logits: on the CPU the unquantized model computes in float32 too, so it
    # agrees with them and each quantized row's distance to them is its distance to it.
    assert base["vs_f32_err"] < 1e-5 and base["vs_f32_top1"] == 1
    for q in (int8, float8):
        assert abs(q["vs_f32_err"] - q["vs_model_err"]) < 1e-5
    assert out.stdout.splitlines()[-4].endswith("vs_model_err | vs_model_top1 | vs_f32_err | vs_f32_top1")


def test_two_cpu_ranks_print_their_row_beside_one_ranks():
    out = run_bench("--steps", "4", "--prompts", "16", "--devices", "2", "--no-torch")
    one, two = records(out)
    assert "devices" not in one and two["devices"] == 2
    assert two["tripy_ms"] > 0 and two["vs_one"] == one["tripy_ms"] / two["tripy_ms"]
    # The sharded greedy tokens are the one rank's (32 steps of the tiny model).
    assert two["same_tokens"].startswith("32/32 ")
    table = out.stdout.splitlines()[-3:]
    assert table[0].startswith("shape | dtype | devices | batch | prompt | tripy_ms | tripy_host_ms | vs_one | same_tokens")
    for row in (one, two):  # the time to queue a step, within the step's
        assert 0 < row["tripy_host_ms"] <= row["tripy_ms"]
    assert table[1].split(" | ")[2] == "-" and table[2].split(" | ")[2] == "2"


def test_devices_on_gpus_with_part_of_torchruns_variables_says_how_to_start_it():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), RANK="0", WORLD_SIZE="2")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "gpu", "--devices", "2"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and out.stdout == ""
    assert ("--devices 2: torchrun's LOCAL_RANK, MASTER_ADDR, MASTER_PORT not set: start one process per GPU with "
            "torchrun --nproc-per-node 2 bench/llm.py --devices 2") in out.stderr


@pytest.mark.skipif(bool(subprocess.run([sys.executable, "-c", "import tripy._C as c; print(c.gpu_available())"],
                                        env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")),
                                        capture_output=True, text=True).stdout.strip() == "True"),
                    reason="this machine has a GPU")
def test_the_gpu_device_without_a_gpu_is_an_argument_error():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "gpu"], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 2 and "--device gpu, but this machine has no GPU that Tripy can use" in out.stderr


def test_a_layer_count_after_the_shape_sets_the_checkpoints_layers():
    (r,) = records(run_bench("--steps", "4", "--prompts", "16", "--shapes", "tiny:3"))
    assert r["shape"] == "tiny:3"
    # tiny's weights with 3 decoder layers instead of 2, in float32
    layer = 256 * 32 * (2 * 8 + 2 * 2) + 3 * 256 * 512 + 2 * 256
    assert r["weight_gb"] == pytest.approx((3 * layer + 4096 * 256 + 256) * 4 / 1e9)


@pytest.mark.parametrize("devices", ["1", "2"])
def test_reference_logits_agree_with_every_run(devices):
    rows = records(run_bench("--steps", "4", "--prompts", "16", "--batches", "2", "--devices", devices, "--reference"))
    assert len(rows) == int(devices)
    for r in rows:
        assert r["ref_logit_err"] < 1e-4 and r["ref_top1"] == 1.0


def test_the_load_dtype_sets_what_every_unquantized_row_computes_in():
    rows = records(run_bench("--steps", "4", "--prompts", "16", "--devices", "2", "--reference", "--load-dtype",
                             "bfloat16"))
    assert [r["dtype"] for r in rows] == ["bfloat16", "bfloat16"]
    for r in rows:  # bfloat16's rounding against the float32 reference, not float32's
        assert 1e-4 < r["ref_logit_err"] < 0.05


def test_a_model_larger_than_one_device_runs_sharded_alone():
    (r,) = records(run_bench("--steps", "4", "--prompts", "16", "--devices", "2", "--one-device-gb", "0.001",
                             "--reference"))
    assert r["devices"] == 2 and "vs_one" not in r and "same_tokens" not in r
    assert r["note"] == "no one-device row: 0.00866 GB of weights, one device holds 0.001 GB"
    assert r["ref_logit_err"] < 1e-4


def test_the_8b_rank_shape_holds_one_rank_of_8b_split_over_two(load_bench):
    bench = checkpoint_module(load_bench)
    whole, rank = (bench.checkpoint_shapes(bench.config_dict(s, "bfloat16")) for s in ("8b", "8b-rank"))
    assert rank.keys() == whole.keys()
    for name, shape in whole.items():  # every matrix halved along one axis, the norms' weights whole
        halved = [i for i, (w, r) in enumerate(zip(shape, rank[name])) if w != r]
        assert halved == ([] if name.endswith("norm.weight") else [halved[0]]), name
        assert all(rank[name][i] * 2 == shape[i] for i in halved), name


@pytest.mark.parametrize("shapes", ["8b:0", "8b:x", "nope", "tiny:"])
def test_a_shape_that_is_not_known_is_an_argument_error(shapes):
    out = run_bench("--shapes", shapes)
    assert out.returncode == 2 and out.stdout == ""
    assert f"--shapes takes tiny, 1b, 8b, 8b-rank, 70b, each optionally with a layer count (70b:48), not {shapes!r}" in out.stderr


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_reference_is_the_float64_numpy_llama(backend, dtype, tmp_path, load_bench, monkeypatch):
    bench, llm_reference = checkpoint_module(load_bench), load_bench("llm_reference")
    monkeypatch.setattr(llm_reference, "HEAD_ROWS", 1000)  # the head in slices, the last one shorter
    torch = pytest.importorskip("torch") if backend == "torch" else None
    c = bench.write_checkpoint(str(tmp_path), "tiny", dtype, None)
    c["rope_scaling"] = bench.SHAPES["8b"]["rope_scaling"]  # the reference rotates as its config says
    np.testing.assert_allclose(llm_reference.rope_frequencies(c), llama_ref.inverse_frequencies(c), rtol=1e-12)
    ids = np.random.default_rng(2).integers(0, c["vocab_size"], (2, 12))
    weights = {}
    for name, a in llm_reference.checkpoint_arrays(str(tmp_path)).items():  # bfloat16 read as its bits
        weights[name] = (a.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else np.array(a)
    want = llama_ref.logits(weights, ids, c)[:, -1]
    got = llm_reference.reference_logits(str(tmp_path), c, ids, torch)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_a_checkpoint_written_a_tensor_at_a_time_is_sharded_and_kept(tmp_path, load_bench):
    torch = pytest.importorskip("torch")
    import tripy as tp

    bench, llm_reference = checkpoint_module(load_bench), load_bench("llm_reference")
    c = bench.config_dict("tiny:3", "float32")
    bench.write_shards(str(tmp_path), c, "float32", torch, shard_bytes=300_000)
    with open(tmp_path / "model.safetensors.index.json") as f:
        weight_map = json.load(f)["weight_map"]
    files = sorted(p.name for p in tmp_path.glob("*.safetensors"))
    assert len(files) > 2 and sorted(set(weight_map.values())) == files
    arrays = llm_reference.checkpoint_arrays(str(tmp_path))
    assert {n: a.shape for n, a in arrays.items()} == bench.checkpoint_shapes(c)
    assert np.all(arrays["model.norm.weight"] == 1)
    w = np.asarray(arrays["model.layers.2.mlp.down_proj.weight"])
    assert abs(w.std() - 0.02) < 0.002 and abs(w.mean()) < 0.002
    llm = tp.llm.load(str(tmp_path))  # the index and its shards, as any Hugging Face checkpoint
    name = "model.layers.1.mlp.down_proj.weight"
    assert np.array_equal(np.asarray(llm.model.state_dict()[name]), arrays[name])

    # write_checkpoint keeps a complete checkpoint of the same shape, and rewrites one of another
    (tmp_path / bench.COMPLETE).write_text(json.dumps(c))
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert bench.write_checkpoint(str(tmp_path), "tiny:3", "float32", torch, on_gpu=False) == c
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
    bench.write_checkpoint(str(tmp_path), "tiny:2", "float32", torch, on_gpu=False)
    assert json.loads((tmp_path / "config.json").read_text())["num_hidden_layers"] == 2


def test_the_cpu_peer_decodes_as_the_float64_numpy_llama(tmp_path, load_bench):
    torch = pytest.importorskip("torch")
    bench = checkpoint_module(load_bench)
    llama_torch, llm_reference = load_bench("llama_torch"), load_bench("llm_reference")
    c = bench.write_checkpoint(str(tmp_path), "tiny:3", "float32", None)
    c["rope_scaling"] = bench.SHAPES["8b"]["rope_scaling"]
    weights = {n: np.array(a) for n, a in llm_reference.checkpoint_arrays(str(tmp_path)).items()}
    ids = np.random.default_rng(5).integers(0, c["vocab_size"], (2, 7))
    model = llama_torch.TorchLlama(str(tmp_path), c, 2, 16, torch)
    seen, start = ids, 0
    with torch.inference_mode():
        step = torch.from_numpy(ids)
        for _ in range(4):  # the prefill, then three decode steps reading the cache
            token, logits = model(step, start)
            want = llama_ref.logits(weights, seen, c)[:, -1]
            assert np.linalg.norm(logits.numpy() - want) / np.linalg.norm(want) < 1e-5
            np.testing.assert_array_equal(token.numpy()[:, 0], want.argmax(-1))
            start += step.shape[1]
            step = token
            seen = np.concatenate([seen, token.numpy()], axis=1)


def test_the_cpu_run_times_the_torch_peer_and_compares_tokens():
    (r,) = records(run_bench("--steps", "4", "--prompts", "16"))
    if "torch_ms" not in r:
        pytest.skip("torch is not installed")
    assert r["torch_ms"] > 0 and r["speedup"] == pytest.approx(r["torch_ms"] / r["tripy_ms"])
    assert r["greedy_match"].startswith("32/32")
    (r,) = records(run_bench("--steps", "4", "--prompts", "16", "--no-torch"))
    assert "torch_ms" not in r


def test_critical_path_shares_split_the_span_between_kernels_and_idle(load_bench):
    """Overlapped launches: a kernel that starts while the one before it runs adds only the time
    past that one's end; a gap before a kernel is idle; a second GPU's kernels are left out."""
    from types import SimpleNamespace as NS

    llm = load_bench("llm")

    def kernel(name, start, end, device=0):
        return NS(name=name, device_index=device, time_range=NS(start=start, end=end))

    shares = llm.critical_path_shares(llm.critical_path_sequence([
        kernel("b", 5.0, 12.0),  # started early, waited inside for "a": adds 10 -> 12
        kernel("a", 0.0, 10.0),
        kernel("c", 15.0, 16.0),  # 3 us after "b" ended: idle, then its own 1 us
        kernel("d", 15.5, 15.9),  # inside "c": adds nothing
        kernel("a", 0.0, 99.0, device=1),
    ]))
    assert shares == {"a": 10.0, "b": 2.0, llm.IDLE: 3.0, "c": 1.0}
    assert sum(shares.values()) == 16.0  # the span
    assert llm.critical_path_shares(llm.critical_path_sequence([])) == {}
    # In order, each with its own time: what a layer's products with one name cost apart.
    assert llm.critical_path_sequence([kernel("b", 5.0, 12.0), kernel("a", 0.0, 10.0), kernel("c", 15.0, 16.0)]) == [
        ("a", 0.0, 10.0, 10.0), ("b", 0.0, 2.0, 7.0), ("c", 3.0, 1.0, 1.0)]


def test_kind_shares_total_a_steps_kernels_by_what_they_compute(load_bench):
    """The profile's summary by kind, from names as a decode step's kernels have them."""
    llm = load_bench("llm")
    added = {"tripy_weight_only_dot_bf16_b4_m8_row1": 1674.0, "nvjet_sm90_tst_128x16_64x11_2x1_v_bz_TNT": 10.0,
             "tripy_add_convert_mul_reduce_sum_div": 208.7, "tripy_attention_split16": 283.0,
             "tripy_silu_mul": 96.3, "tripy_select_mul_mul_add": 91.2, "tripy_add_mul_sin_neg_select": 2.6,
             "tripy_update_2_i32": 83.4, "tripy_sample_bf16": 8.4, "ncclDevKernel_AllReduce_Sum_bf16": 5.0,
             "tripy_copy_bytes": 5.8, llm.IDLE: 10.7}
    shares = llm.kind_shares(added)
    assert shares[0] == ("products", 1684.0)
    got = dict(shares)
    assert got["add + RMSNorm"] == 208.7 and got["attention"] == 283.0 and got["SiLU x up"] == 96.3
    assert got["rotary"] == 91.2 + 2.6 and got["cache writes"] == 83.4 and got["sampling"] == 8.4
    assert got["collectives"] == 5.0 and got["other"] == 5.8 and got[llm.IDLE] == 10.7
    assert abs(sum(got.values()) - sum(added.values())) < 1e-9

