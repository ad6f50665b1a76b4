"""Tensor parallelism on CPU ranks (tp.compile with a tp.DeviceMesh, a thread per rank, collectives
in shared memory): sharded layers and blocks against numpy and against the same module compiled
whole, per-rank arguments, and the errors of meshes, of ranks that fail and of ranks that never
arrive at a collective."""

import re
import threading
import time

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def cpu_tensors(monkeypatch):
    """The ranks here are CPU ranks: their arguments and weights are made on the CPU, also where the
    default device is a GPU."""
    monkeypatch.setattr(tp.config, "default_device", "cpu")


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def load(module, **params):
    module.load_state_dict({k: tp.Tensor(v) for k, v in params.items()})
    return module


class MLP(tp.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.up = tp.Linear(d, hidden, parallel=tp.ColumnParallel())
        self.down = tp.Linear(hidden, d, parallel=tp.RowParallel())

    def forward(self, x):
        return self.down(tp.gelu(self.up(x)))


def gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


@pytest.mark.parametrize("world", [2, 4])
def test_two_layer_mlp_matches_numpy_and_the_whole_module(world):
    w1, b1, w2, b2 = rand(16, 8), rand(16), rand(8, 16), rand(8)
    mlp = MLP(8, 16)
    mlp.up.load_state_dict({"weight": tp.Tensor(w1), "bias": tp.Tensor(b1)})
    mlp.down.load_state_dict({"weight": tp.Tensor(w2), "bias": tp.Tensor(b2)})
    args = [tp.InputInfo(((1, 3, 8), 8), dtype=tp.float32)]
    sharded = tp.compile(mlp, args=args, mesh=tp.DeviceMesh(["cpu"] * world))
    whole = tp.compile(mlp, args=args)
    # Each rank's program has one all-reduce, for a mesh of `world` ranks.
    text = sharded._ranks[world - 1].program_text
    assert text.count("= collective") == 1 and "{world_size = " + str(world) + "}" in text
    for rows in (1, 5):
        x = rand(rows, 8)
        want = gelu(x @ w1.T + b1) @ w2.T + b2
        got = np.asarray(sharded(tp.Tensor(x)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, np.asarray(whole(tp.Tensor(x))), rtol=1e-5, atol=1e-5)


class Attention(tp.Module):
    """Self-attention split by heads: q, k and v column-parallel (each rank's heads), the output
    projection row-parallel."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.d = heads, d
        self.qkv = tp.Linear(d, 3 * d, parallel=tp.ColumnParallel(parts=(d, d, d)))
        self.out = tp.Linear(d, d, parallel=tp.RowParallel())

    def forward(self, x):
        B, T = x.shape[0], x.shape[1]
        heads = self.heads // tp.world_size()
        hd = self.d // self.heads
        q, k, v = tp.split(self.qkv(x), 3, dim=-1)
        q, k, v = (t.reshape((B, T, heads, hd)).transpose(1, 2) for t in (q, k, v))
        y = tp.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape((B, T, heads * hd)))


def attention_reference(x, wqkv, bqkv, wo, bo, heads):
    B, T, d = x.shape
    hd = d // heads
    q, k, v = np.split(x @ wqkv.T + bqkv, 3, axis=-1)
    q, k, v = (t.reshape(B, T, heads, hd).transpose(0, 2, 1, 3) for t in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    y = (p / p.sum(-1, keepdims=True)) @ v
    return y.transpose(0, 2, 1, 3).reshape(B, T, d) @ wo.T + bo


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("parallel", [tp.ColumnParallel(), tp.ColumnParallel(parts=(128, 64, 64)), tp.RowParallel()],
                         ids=["column", "column_parts", "row"])
def test_a_quantized_linear_is_split_before_it_is_dequantized(mode, parallel):
    # int8: a scale per output feature; int4: packed bytes in groups of 64 input features with zero
    # points. Each rank reads its share of the quantized weight with its scales, in a weight-only product.
    from tripy.frontend.ops.quantize import pack_int4, unpack_int4

    N, K, world = 256, 256, 2
    if mode == "int8":
        q = RNG.integers(-127, 128, (N, K))
        scale = RNG.uniform(0.001, 0.01, (N,)).astype(np.float32)
        w = q * scale[:, None].astype(np.float64)
        lin = tp.Linear(K, N, quant_dtype=tp.int8, weight_quant_dim=0, parallel=parallel)
        state = {"weight": tp.Tensor(q.astype(np.int8)), "weight_scale": tp.Tensor(scale)}
    else:
        q = RNG.integers(-8, 8, (N, K))
        scale = RNG.uniform(0.001, 0.01, (N, K // 64)).astype(np.float32)
        zero = RNG.integers(-3, 4, (N, K // 64)).astype(np.float32)
        w = (q - np.repeat(zero, 64, axis=1)) * np.repeat(scale, 64, axis=1).astype(np.float64)
        lin = tp.Linear(K, N, quant_dtype=tp.int4, parallel=parallel)
        packed = pack_int4(tp.cast(tp.Tensor(q.astype(np.int32)), tp.int4))
        state = {"weight": unpack_int4(packed, K), "weight_scale": tp.Tensor(scale), "weight_zero_point": tp.Tensor(zero)}
    bias = rand(N)
    lin.load_state_dict({**state, "bias": tp.Tensor(bias)})
    row = isinstance(parallel, tp.RowParallel)
    x = rand(3, K)
    want = x.astype(np.float64) @ w.T + bias
    mesh = tp.DeviceMesh(["cpu"] * world)
    exe = tp.compile(lin, args=[tp.InputInfo((3, K // world if row else K), dtype=tp.float32)], mesh=mesh)
    for rank in exe._ranks:
        assert "weight_only_dot" in rank.program_text and " = dot '" not in rank.program_text
    if row:  # each rank takes its share of the input features
        got = np.asarray(exe([tp.Tensor(np.ascontiguousarray(x[:, r * K // 2 : (r + 1) * K // 2])) for r in range(world)]))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        return
    got = np.asarray(exe(tp.Tensor(x)))  # rank 0's share of the output features
    ranges = parallel._ranges(N, 0, world, "Linear")
    np.testing.assert_allclose(got, np.concatenate([want[:, lo:hi] for lo, hi in ranges], axis=1),
                               rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_row_parallel_int4_linear_whose_shares_would_split_its_groups_is_refused_at_the_callers_line():
    from tripy.frontend.ops.quantize import pack_int4, unpack_int4

    N, K = 8, 256  # groups of 128 input features: four ranks would take 64 each
    lin = tp.Linear(K, N, quant_dtype=tp.int4, parallel=tp.RowParallel())
    packed = pack_int4(tp.cast(tp.Tensor(RNG.integers(-8, 8, (N, K)).astype(np.int32)), tp.int4))
    lin.load_state_dict({"weight": unpack_int4(packed, K), "weight_scale": tp.Tensor(np.full((N, 2), 0.01, np.float32)),
                         "bias": tp.Tensor(rand(N))})
    with pytest.raises(tp.TripyException, match=re.escape(
            "tp.Linear: a row-parallel Linear over 4 ranks gives each rank 64 of its 256 input features, which "
            "splits its quantization groups of 128")) as e:
        tp.compile(lin, args=[tp.InputInfo((3, K // 4), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 4))
    assert "test_sharding.py" in str(e.value)
    # Two ranks take whole groups.
    tp.compile(lin, args=[tp.InputInfo((3, K // 2), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))


@pytest.mark.parametrize("world", [2, 4])
def test_attention_split_by_heads_matches_numpy(world):
    d, heads = 32, 4
    wqkv, bqkv, wo, bo = rand(3 * d, d), rand(3 * d), rand(d, d), rand(d)
    attn = Attention(d, heads)
    load(attn.qkv, weight=wqkv, bias=bqkv)
    load(attn.out, weight=wo, bias=bo)
    exe = tp.compile(attn, args=[tp.InputInfo((2, (1, 5, 8), d), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * world))
    x = rand(2, 5, d)
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), attention_reference(x, wqkv, bqkv, wo, bo, heads),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("parallel", [tp.ColumnParallel(gather_output=True), tp.RowParallel()], ids=["column", "row"])
def test_sharded_embedding_and_gathered_head_match_numpy(parallel):
    table, head = rand(12, 8), rand(6, 8)

    class Model(tp.Module):
        def __init__(self):
            super().__init__()
            self.embed = tp.Embedding(12, 8, parallel=parallel)
            self.head = tp.Linear(8, 6, bias=False, parallel=tp.ColumnParallel(gather_output=True))

        def forward(self, ids):
            return self.head(self.embed(ids))

    model = Model()
    load(model.embed, weight=table)
    load(model.head, weight=head)
    exe = tp.compile(model, args=[tp.InputInfo((2, 3), dtype=tp.int32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    ids = np.array([[0, 5, 11], [6, 7, 3]], np.int32)
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(ids))), table[ids] @ head.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16, tp.int32, tp.int64])
def test_all_reduce_and_all_gather_of_per_rank_arguments(dtype):
    world = 3

    def f(x):
        return tp.all_reduce(x), tp.all_gather(x, dim=1)

    exe = tp.compile(f, args=[tp.InputInfo((2, 2, 3), dtype=dtype)], mesh=tp.DeviceMesh(["cpu"] * world))
    parts = [np.arange(12).reshape(2, 2, 3) * (r + 1) - 5 for r in range(world)]
    total, gathered = exe([tp.cast(tp.Tensor(p.astype(np.float32)), dtype) for p in parts])
    np.testing.assert_array_equal(np.asarray(tp.cast(total, tp.float32)), sum(parts))
    np.testing.assert_array_equal(np.asarray(tp.cast(gathered, tp.float32)), np.concatenate(parts, axis=1))


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16, tp.int32])
def test_reduce_scatter_gives_each_rank_its_share_of_the_sum(world, dim, dtype):
    shape = [4, 8, 12]
    shape[dim] = 2 * world

    def f(x):
        share = tp.reduce_scatter(x, dim)
        return share, tp.all_gather(share, dim)  # every rank's share, in rank order

    exe = tp.compile(f, args=[tp.InputInfo(tuple(shape), dtype=dtype)], mesh=tp.DeviceMesh(["cpu"] * world))
    rng = np.random.default_rng(world)
    parts = [rng.integers(-8, 8, shape).astype(np.float32) for _ in range(world)]
    first, gathered = exe([tp.cast(tp.Tensor(p), dtype) for p in parts])
    total = sum(parts)
    np.testing.assert_array_equal(np.asarray(tp.cast(gathered, tp.float32)), total)
    np.testing.assert_array_equal(np.asarray(tp.cast(first, tp.float32)), np.split(total, world, axis=dim)[0])


def test_reduce_scatter_of_a_dynamic_dim_checks_it_splits_when_the_rank_runs():
    exe = tp.compile(lambda x: tp.all_gather(tp.reduce_scatter(x, 0), 0), args=[tp.InputInfo(((1, 4, 8), 3), dtype=tp.float32)],
                     mesh=tp.DeviceMesh(["cpu"] * 2))
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(np.asarray(exe([tp.Tensor(a), tp.Tensor(-2 * a)])), -a)
    with pytest.raises(tp.TripyException, match=r"reduce_scatter: dim 0 does not split into 2 equal parts, one per rank") as e:
        exe([tp.Tensor(a[:3]), tp.Tensor(a[:3])])
    assert "sizes were 2 and 3" in str(e.value) and "test_sharding.py" in str(e.value)


def test_reduce_scatter_errors_name_the_users_line():
    mesh = tp.DeviceMesh(["cpu"] * 2)
    with pytest.raises(tp.TripyException, match=r"reduce_scatter: dim 1 has size 3, which does not split into 2 equal parts") as e:
        tp.compile(lambda x: tp.reduce_scatter(x, 1), args=[tp.InputInfo((4, 3), dtype=tp.float32)], mesh=mesh)
    assert "test_sharding.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"reduce_scatter: dim 2 is out of range for a tensor of rank 2"):
        tp.compile(lambda x: tp.reduce_scatter(x, 2), args=[tp.InputInfo((4, 4), dtype=tp.float32)], mesh=mesh)
    with pytest.raises(tp.TripyException, match=r"reduce_scatter"):
        tp.compile(lambda x: tp.reduce_scatter(x, 0), args=[tp.InputInfo((4,), dtype=tp.bool)], mesh=mesh)
    with pytest.raises(tp.TripyException, match=r"reduce_scatter: dim must be an int"):
        tp.reduce_scatter(tp.ones((2,)), "0")
    x = tp.ones((2, 3))
    assert tp.reduce_scatter(x, 1) is x  # one rank outside a sharded compile


def test_a_rank_that_fails_gives_the_call_its_error_not_a_hang():
    table = rand(4, 2)

    def f(ids):
        rows = tp.gather(tp.Tensor(table), 0, ids)  # rank 1 is given an index out of range
        return tp.all_reduce(rows)

    exe = tp.compile(f, args=[tp.InputInfo((2,), dtype=tp.int32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    good, bad = tp.Tensor(np.array([0, 1], np.int32)), tp.Tensor(np.array([0, 9], np.int32))
    with pytest.raises(tp.TripyException, match=r"rank 1 of 2: .*index") as e:
        exe([good, bad])
    assert "test_sharding.py" in str(e.value)  # the user's line
    # The ranks recover: the next call runs.
    np.testing.assert_allclose(np.asarray(exe(good)), 2 * table[[0, 1]], rtol=1e-6)


def _register_slow_on_rank_one():
    """A plugin that copies its input, sleeping `seconds` first where the input's first value is 1
    (rank 1's argument below), or raising where it is negative."""

    def cpu(inputs, output, seconds):
        if inputs[0].flat[0] < 0:
            raise ValueError("a negative first value")
        if inputs[0].flat[0] == 1:
            time.sleep(seconds)
        output[...] = inputs[0]

    tp.register_plugin("ShardingTestDelay", lambda inputs, seconds: (inputs[0].shape, inputs[0].dtype), cpu=cpu)


def test_a_rank_that_arrives_late_times_out_for_every_rank(monkeypatch):
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "0.5")
    _register_slow_on_rank_one()

    def f(x):
        return tp.all_reduce(tp.plugin("ShardingTestDelay", [x], output_info=[(1, tp.float32)], seconds=2.0))

    exe = tp.compile(f, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    start = time.monotonic()
    with pytest.raises(tp.TripyException, match=r"rank 0 of 2: .*rank 0 waited 0.5 s \(TRIPY_COLLECTIVE_TIMEOUT\)"):
        exe([tp.Tensor([0.0, 2.0]), tp.Tensor([1.0, 2.0])])
    assert time.monotonic() - start < 10
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "60")
    np.testing.assert_array_equal(np.asarray(exe([tp.Tensor([0.0, 2.0]), tp.Tensor([3.0, 2.0])])), [3.0, 4.0])


def test_a_rank_whose_program_skips_a_collective_fails_the_others_at_once(monkeypatch):
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "60")

    def f(x):
        return tp.all_reduce(x) if tp.current_rank() == 0 else x + 1.0

    exe = tp.compile(f, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    start = time.monotonic()
    with pytest.raises(tp.TripyException, match=r"rank 0 of 2: .*rank 1 of 2 returned from its program without reaching "
                                                r"this collective") as e:
        exe(tp.ones((2,)))
    assert time.monotonic() - start < 10  # not the timeout
    assert "test_sharding.py" in str(e.value)


def test_an_exception_in_one_ranks_thread_stops_every_rank_with_its_error(monkeypatch):
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "60")
    _register_slow_on_rank_one()

    def f(x):
        y = tp.all_reduce(tp.plugin("ShardingTestDelay", [x], output_info=[(1, tp.float32)], seconds=0.0))
        return tp.all_gather(y, dim=0)

    exe = tp.compile(f, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 3))
    start = time.monotonic()
    with pytest.raises(tp.TripyException, match=r"rank 2 of 3: .*raised ValueError: a negative first value") as e:
        exe([tp.Tensor([2.0, 1.0]), tp.Tensor([3.0, 1.0]), tp.Tensor([-1.0, 1.0])])
    assert time.monotonic() - start < 10
    assert "test_sharding.py" in str(e.value)
    parts = [np.array([2.0, 1.0]), np.array([3.0, 1.0]), np.array([4.0, 1.0])]
    np.testing.assert_array_equal(np.asarray(exe([tp.Tensor(p.astype(np.float32)) for p in parts])), np.tile(sum(parts), 3))


def test_one_ranks_bad_argument_is_refused_naming_the_rank():
    exe = tp.compile(tp.all_reduce, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    with pytest.raises(tp.TripyException, match=r"rank 1 of 2: Argument 'x' has dtype int32, but this executable was "
                                                r"compiled for float32") as e:
        exe([tp.ones((2,)), tp.Tensor([1, 2])])
    assert "test_sharding.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"rank 1 of 2: .*dimension 0 has size 3"):
        exe([tp.ones((2,)), tp.ones((3,))])
    with pytest.raises(tp.TripyException, match=r"rank 0 of 2: Argument 'x' must be a tripy.Tensor, but got: list"):
        exe([[1.0, 2.0], tp.ones((2,))])
    np.testing.assert_array_equal(np.asarray(exe([tp.ones((2,)), tp.ones((2,))])), [2.0, 2.0])


def test_calls_from_several_threads_on_one_mesh_each_get_their_own_sums(monkeypatch):
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "60")
    mesh = tp.DeviceMesh(["cpu"] * 2)
    args = [tp.InputInfo((1024,), dtype=tp.float32)]
    double = tp.compile(lambda x: tp.all_reduce(x * 2.0), args=args, mesh=mesh)
    gather = tp.compile(lambda x: tp.all_gather(x, dim=0), args=args, mesh=mesh)  # the same communicators
    failures = []

    def worker(k):
        x = np.full(1024, float(k), np.float32)
        try:
            for _ in range(30):
                got = np.asarray(double([tp.Tensor(x), tp.Tensor(x + 1)]))
                np.testing.assert_array_equal(got, 2 * (2 * x + 1))
                np.testing.assert_array_equal(np.asarray(gather([tp.Tensor(x), tp.Tensor(-x)])), np.concatenate([x, -x]))
        except Exception as e:  # reported below, from the test's thread
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_calls_on_several_meshes_at_once_each_run_all_their_ranks(monkeypatch):
    # Calls over different meshes run at the same time: each needs all its ranks on threads of their
    # own at once (the ranks' threads are kept between calls; a call never waits for another's).
    monkeypatch.setenv("TRIPY_COLLECTIVE_TIMEOUT", "60")
    meshes = [tp.DeviceMesh(["cpu"] * world) for world in (2, 3, 4)]
    exes = [tp.compile(lambda x: tp.all_reduce(x + 1.0), args=[tp.InputInfo((64,), dtype=tp.float32)], mesh=m)
            for m in meshes]
    failures = []

    def worker(exe, world):
        parts = [np.full(64, float(r), np.float32) for r in range(world)]
        try:
            for _ in range(40):
                got = np.asarray(exe([tp.Tensor(p) for p in parts]))
                np.testing.assert_array_equal(got, sum(parts) + world)
        except Exception as e:  # reported below, from the test's thread
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(exe, m.size)) for exe, m in zip(exes, meshes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_ranks_whose_sizes_differ_are_refused(monkeypatch):
    exe = tp.compile(tp.all_reduce, args=[tp.InputInfo(((1, 2, 4),), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    with pytest.raises(tp.TripyException, match=r"all_reduce: rank \d sums \d elements but rank \d sums \d"):
        exe([tp.ones((2,)), tp.ones((3,))])


def test_mesh_and_argument_errors_name_the_users_line():
    with pytest.raises(tp.TripyException, match=r"non-empty list of devices"):
        tp.DeviceMesh([])
    with pytest.raises(tp.TripyException, match=r"devices must be of one kind"):
        tp.DeviceMesh(["cpu", "gpu:0"])
    with pytest.raises(tp.TripyException, match=r"names each GPU once, but got: gpu:0, gpu:1, gpu:0"):
        tp.DeviceMesh(["gpu", "gpu:1", "gpu:0"])
    with pytest.raises(tp.TripyException, match=r"mesh must be a tp.DeviceMesh"):
        tp.compile(tp.all_reduce, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh="cpu")
    with pytest.raises(tp.TripyException, match=r"parts \(4, 4\) add up to 8, not 12"):
        tp.Linear(4, 12, parallel=tp.ColumnParallel(parts=(4, 4)))
    with pytest.raises(tp.TripyException, match=r"parallel must be None, tp.ColumnParallel"):
        tp.Linear(4, 4, parallel="column")
    exe = tp.compile(tp.all_reduce, args=[tp.InputInfo((2,), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    with pytest.raises(tp.TripyException, match=r"a list of 3 values, but a per-rank argument of this executable holds one per rank: 2") as e:
        exe([tp.ones((2,))] * 3)
    assert "test_sharding.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"cannot be split over 3 ranks: its 4 features are not a multiple of 3"):
        tp.compile(tp.Linear(4, 2, parallel=tp.RowParallel()), args=[tp.InputInfo((1, 4), dtype=tp.float32)],
                   mesh=tp.DeviceMesh(["cpu"] * 3))


def test_tensors_made_while_tracing_a_rank_are_placed_on_its_device(monkeypatch):
    # On a GPU machine the default device is the GPU, and a CPU mesh traces each rank for the CPU:
    # what the function makes without a device (iota, full, ones, tp.Tensor) is the rank's.
    monkeypatch.setattr(tp.config, "default_device", "gpu:0")
    made = {}

    def f(x, pos):
        made["devices"] = {str(t.device) for t in (tp.iota((3,)), tp.ones((3,)), tp.Tensor([1.0, 2.0, 3.0]))}
        ramp = tp.iota((3,), dtype=tp.float32) + tp.cast(pos, tp.float32)
        return tp.all_reduce(x * ramp + tp.full((3,), 0.5) + tp.Tensor(np.array([1.0, 2.0, 3.0], np.float32)))

    args = [tp.InputInfo((3,), dtype=tp.float32), tp.InputInfo((1,), dtype=tp.int32)]
    exe = tp.compile(f, args=args, mesh=tp.DeviceMesh(["cpu"] * 2))
    assert made["devices"] == {"cpu"}
    # Outside the trace, the default device is back.
    assert str(tp.ones((2,)).device) == "gpu:0"
    xs = [rand(3), rand(3)]
    got = exe([tp.Tensor(x, device="cpu") for x in xs], tp.Tensor(np.array([2], np.int32), device="cpu"))
    want = sum(x * (np.arange(3) + 2.0) + 0.5 + np.array([1.0, 2.0, 3.0]) for x in xs)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.skipif(not tp._C.gpu_available(), reason="no GPU on this machine")
def test_a_model_on_the_gpu_compiles_for_a_mesh_of_cpu_ranks(monkeypatch):
    # A whole model on the GPU (the default device there): each CPU rank takes its share from a
    # copy of the weights on the CPU, and the module keeps its own GPU tensors.
    monkeypatch.setattr(tp.config, "default_device", "gpu:0")
    w1, b1, w2, b2 = rand(16, 4), rand(16), rand(4, 16), rand(4)
    mlp = load(MLP(4, 16), **{"up.weight": w1, "up.bias": b1, "down.weight": w2, "down.bias": b2})
    exe = tp.compile(mlp, args=[tp.InputInfo((2, 4), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * 2))
    assert {str(t.device) for t in mlp.state_dict().values()} == {"gpu:0"}
    x = rand(2, 4)
    got = exe([tp.Tensor(x, device="cpu")] * 2)
    np.testing.assert_allclose(np.asarray(got), gelu(x @ w1.T + b1) @ w2.T + b2, rtol=1e-4, atol=1e-5)


def test_world_sizes_that_do_not_match_are_refused_naming_the_users_line():
    # A row-parallel layer given the whole input (every rank's), not its rank's share of it.
    with pytest.raises(tp.TripyException, match=r"A row-parallel Linear over 2 ranks takes each rank's share of its 8 "
                                                r"input features \(4, .*but its input has 8: for an input that every "
                                                r"rank holds whole, use tp.ColumnParallel\(\)") as e:
        tp.compile(tp.Linear(8, 4, parallel=tp.RowParallel()), args=[tp.InputInfo((1, 8), dtype=tp.float32)],
                   mesh=tp.DeviceMesh(["cpu"] * 2))
    assert "test_sharding.py" in str(e.value)
    # Per-rank lists: one value per rank of the mesh, positional or by name; none for one rank.
    exe = tp.compile(lambda x, y: tp.all_reduce(x + y), args=[tp.InputInfo((2,), dtype=tp.float32)] * 2,
                     mesh=tp.DeviceMesh(["cpu"] * 2))
    with pytest.raises(tp.TripyException, match=r"Argument 'y' is a list of 3 values, but a per-rank argument of this "
                                                r"executable holds one per rank: 2"):
        exe(x=tp.ones((2,)), y=[tp.ones((2,))] * 3)
    np.testing.assert_array_equal(np.asarray(exe(x=tp.ones((2,)), y=[tp.ones((2,)), tp.zeros((2,))])), [3.0, 3.0])
    single = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((2,), dtype=tp.float32)])
    with pytest.raises(tp.TripyException, match=r"Argument 'x' is a list: a list of one tensor per rank is an argument "
                                                r"of an executable compiled with a tp.DeviceMesh") as e:
        single([tp.ones((2,)), tp.ones((2,))])
    assert "test_sharding.py" in str(e.value)


@pytest.mark.parametrize("world", [2, 4])
def test_a_sharded_executable_saved_and_loaded_keeps_every_ranks_program(tmp_path, world):
    w1, b1, w2, b2 = rand(16, 8), rand(16), rand(8, 16), rand(8)
    mlp = MLP(8, 16)
    load(mlp.up, weight=w1, bias=b1)
    load(mlp.down, weight=w2, bias=b2)
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 3, 8), 8), dtype=tp.float32)], mesh=tp.DeviceMesh(["cpu"] * world))
    path = tmp_path / "mlp.tpy"
    exe.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"mlp.rank{r}-of-{world}.tpy" for r in range(world)]
    # Loaded with a mesh of its own (new communicators), in a fresh executable.
    back = tp.Executable.load(path, mesh=tp.DeviceMesh(["cpu"] * world))
    assert back.world_size == world and str(back) == str(exe)
    for r in range(world):  # each rank holds its own share of the weights
        assert back._ranks[r].program_text == exe._ranks[r].program_text
    x = rand(5, 8)
    got = np.asarray(back(tp.Tensor(x)))
    np.testing.assert_array_equal(got, np.asarray(exe(tp.Tensor(x))))
    np.testing.assert_allclose(got, gelu(x @ w1.T + b1) @ w2.T + b2, rtol=1e-5, atol=1e-5)


def test_loading_a_sharded_executable_with_the_wrong_mesh_is_refused_naming_the_users_line(tmp_path):
    exe = tp.compile(lambda x: tp.all_reduce(x * 2.0), args=[tp.InputInfo((2,), dtype=tp.float32)],
                     mesh=tp.DeviceMesh(["cpu"] * 2))
    path = tmp_path / "sum.tpy"
    exe.save(path)
    with pytest.raises(tp.TripyException, match=r"No executable is saved at '.*sum.tpy', but a sharded one is, one file "
                                                r"per rank, for a mesh of 2 ranks: load it with "
                                                r"tp.Executable.load\(path, mesh=...\)") as e:
        tp.Executable.load(path)
    assert "test_sharding.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"was saved for a mesh of 2 ranks, but this mesh has 3"):
        tp.Executable.load(path, mesh=tp.DeviceMesh(["cpu"] * 3))
    with pytest.raises(tp.TripyException, match=r"sum.rank1-of-2.tpy' holds one rank of an executable sharded over 2 "
                                                r"ranks: load the executable with tp.Executable.load\(path, mesh=...\)"):
        tp.Executable.load(tmp_path / "sum.rank1-of-2.tpy")
    with pytest.raises(tp.TripyException, match=r"mesh must be a tp.DeviceMesh or None"):
        tp.Executable.load(path, mesh=2)
    # A rank's file renamed for a mesh of another size: its collectives say what it was compiled for.
    (tmp_path / "sum.rank0-of-2.tpy").rename(tmp_path / "sum.rank0-of-1.tpy")
    with pytest.raises(tp.TripyException, match=r"sum.rank0-of-1.tpy' holds a rank of an executable sharded over 2 "
                                                r"ranks, but this mesh has 1"):
        tp.Executable.load(path, mesh=tp.DeviceMesh(["cpu"]))
    # A missing rank names its file.
    with pytest.raises(tp.TripyException, match=r"sum.rank0-of-2.tpy"):
        tp.Executable.load(path, mesh=tp.DeviceMesh(["cpu"] * 2))
    single = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((2,), dtype=tp.float32)])
    single.save(tmp_path / "one.tpy")
    with pytest.raises(tp.TripyException, match=r"one.tpy' holds an executable of one rank, not one sharded over a mesh"):
        tp.Executable.load(tmp_path / "one.tpy", mesh=tp.DeviceMesh(["cpu"] * 2))
    assert tp.Executable.load(tmp_path / "one.tpy")(tp.Tensor([1.0, 2.0])).tolist() == [2.0, 4.0]


def test_outside_a_mesh_layers_are_whole_and_collectives_are_their_input():
    w = rand(6, 4)
    linear = load(tp.Linear(4, 6, bias=False, parallel=tp.ColumnParallel(parts=(2, 4))), weight=w)
    x = rand(3, 4)
    np.testing.assert_allclose(np.asarray(linear(tp.Tensor(x))), x @ w.T, rtol=1e-5)
    assert (tp.current_rank(), tp.world_size()) == (0, 1)
    assert tp.compile(tp.Linear(2, 2), args=[tp.InputInfo((1, 2), dtype=tp.float32)]).world_size == 1
