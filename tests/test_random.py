"""tp.random: seeded normal and uniform tensors, against numpy's statistics of the same sizes
(the mean, the variance and the Kolmogorov-Smirnov distance to the distribution); the same values
for the same arguments, element i of a seed's stream wherever it sits; bad arguments as errors at
the caller's line."""

import math

import numpy as np
import pytest

import tripy as tp

N = 100_000


def _values(t):
    return np.array(tp.cast(t, tp.float32).tolist(), np.float64).reshape(-1)


def _ks(x, cdf):
    """The Kolmogorov-Smirnov distance between x's empirical distribution and `cdf`."""
    x = np.sort(x)
    c = np.array([cdf(v) for v in x])
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


# At N values, a KS distance above 1.63 / sqrt(N) has 1% chance under the distribution.
KS_BOUND = 1.63 / math.sqrt(N)


def test_normal_values_follow_the_normal_distribution():
    x = _values(tp.random.normal((N,), mean=2.0, std=3.0, seed=4))
    assert abs(x.mean() - 2.0) < 5 * 3.0 / math.sqrt(N)
    assert abs(x.std() - 3.0) < 0.03
    assert _ks(x[:20000], lambda v: 0.5 * (1 + math.erf((v - 2.0) / (3.0 * math.sqrt(2))))) < 1.63 / math.sqrt(20000)


def test_uniform_values_follow_the_uniform_distribution_below_high():
    x = _values(tp.random.uniform((N,), low=-2.0, high=6.0, seed=9))
    assert x.min() >= -2.0 and x.max() < 6.0
    assert abs(x.mean() - 2.0) < 5 * 8 / math.sqrt(12 * N)
    assert abs(x.var() - 64 / 12) < 0.1
    assert _ks(x[:20000], lambda v: (v + 2.0) / 8.0) < 1.63 / math.sqrt(20000)


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16])
def test_half_precision_values_stay_below_high_where_rounding_would_reach_it(dtype):
    # bfloat16 holds 8 bits of a value in [0.5, 1): about 1 in 512 values would round up to 1.0.
    x = _values(tp.random.uniform((N,), dtype=dtype, seed=1))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert np.sum(x == x.max()) > 10  # the values that would have been 1.0 took the next one below
    y = _values(tp.random.normal((1000,), dtype=dtype, seed=1))
    ref = _values(tp.random.normal((1000,), seed=1))
    assert np.max(np.abs(y - ref)) <= np.max(np.abs(ref)) * 2.0**-7  # the float32 values, rounded


def test_the_same_arguments_give_the_same_tensor_and_another_seed_unrelated_values():
    a = tp.random.normal((3, 5), seed=12)
    assert tp.equal(a, tp.random.normal((3, 5), seed=12))
    assert not tp.equal(a, tp.random.normal((3, 5), seed=13))
    b = _values(tp.random.normal((N,), seed=12)), _values(tp.random.normal((N,), seed=13))
    assert abs(np.corrcoef(*b)[0, 1]) < 5 / math.sqrt(N)
    # A seed's uniform and normal streams are unrelated too.
    u, z = _values(tp.random.uniform((N,), seed=12)), b[0]
    assert abs(np.corrcoef(u, z)[0, 1]) < 5 / math.sqrt(N)
    assert tp.random.uniform((4,), seed=2**64 - 1).shape == (4,)


def test_element_i_is_value_i_of_its_seeds_stream_whatever_the_shape():
    flat = _values(tp.random.normal((24,), seed=3))
    assert np.array_equal(_values(tp.random.normal((2, 3, 4), seed=3)), flat)
    assert np.array_equal(_values(tp.random.normal((7,), seed=3)), flat[:7])  # a prefix, not other values
    assert np.array_equal(_values(tp.random.uniform(5, seed=3)), _values(tp.random.uniform((5,), seed=3)))


def test_degenerate_spreads_and_empty_shapes():
    assert _values(tp.random.normal((4,), mean=1.5, std=0.0)).tolist() == [1.5] * 4
    assert _values(tp.random.uniform((4,), low=-3.0, high=-3.0)).tolist() == [-3.0] * 4
    assert tp.random.normal((0, 3)).shape == (0, 3)
    assert tp.random.uniform(()).shape == ()


def test_a_random_tensor_is_a_constant_of_a_compiled_function():
    exe = tp.compile(lambda x: x + tp.random.normal((2, 2), seed=5), args=[tp.InputInfo((2, 2), dtype=tp.float32)])
    want = _values(tp.random.normal((2, 2), seed=5))
    assert np.array_equal(_values(exe(tp.zeros((2, 2)))), want)
    assert np.array_equal(_values(exe(tp.zeros((2, 2)))), want)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tp.random.normal((2, -1)), "negative sizes"),
        (lambda: tp.random.normal((2.5,)), "sequence of ints"),
        (lambda: tp.random.normal((2,), std=-1.0), "std must be 0 or more"),
        (lambda: tp.random.normal((2,), mean=float("nan")), "mean must be a finite number"),
        (lambda: tp.random.uniform((2,), low=1.0, high=0.0), "must not be above high"),
        (lambda: tp.random.uniform((2,), high=float("inf")), "high must be a finite number"),
        (lambda: tp.random.uniform((2,), dtype=tp.int32), "float32, float16 or bfloat16"),
        (lambda: tp.random.uniform((2,), seed=-1), "the seed must be an int"),
        (lambda: tp.random.uniform((2,), seed=2**64), "the seed must be an int"),
        (lambda: tp.random.uniform((2,), seed=1.5), "the seed must be an int"),
    ],
)
def test_bad_arguments_are_errors_at_the_callers_line(call, message):
    with pytest.raises(tp.TripyException, match=message) as e:
        call()
    assert "test_random.py" in str(e.value)


def test_a_size_known_only_at_run_time_is_an_error_at_the_callers_line():
    def model(n):
        return tp.random.normal((n, 2))

    with pytest.raises(tp.TripyException, match="sizes known now") as e:
        tp.compile(model, args=[tp.DimensionInputInfo((1, 2, 4))])
    assert "test_random.py" in str(e.value)


def test_a_tensor_too_large_for_memory_is_an_error_naming_the_bytes():
    with pytest.raises(tp.TripyException, match="4000000000000 bytes") as e:
        tp.random.normal((10**6, 10**6))
    assert f"test_random.py:{e.tb.tb_lineno}" in str(e.value)


@pytest.mark.skipif(not tp._C.gpu_available(), reason="no GPU on this machine")
def test_the_gpu_holds_the_same_values_as_the_cpu(monkeypatch):
    on_gpu = tp.random.normal((3, 70), dtype=tp.bfloat16, seed=21)
    assert on_gpu.device.kind == "gpu"
    monkeypatch.setattr(tp.config, "default_device", "cpu")
    on_cpu = tp.random.normal((3, 70), dtype=tp.bfloat16, seed=21)
    assert on_cpu.device.kind == "cpu"
    assert np.array_equal(_values(tp.copy(on_gpu, "cpu")), _values(on_cpu))
