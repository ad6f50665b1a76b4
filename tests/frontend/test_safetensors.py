"""tp.load_safetensors / tp.save_safetensors: every supported dtype round-trips bit for bit against
numpy (bfloat16 and float8 against references written here from their bit layouts); files are
built byte by byte with struct and json, so the reader is checked against the format rather than
against our writer; sharded checkpoints; hostile files and paths raise TripyException naming the
file, the tensor and the user's line; loaded tensors work as any other tp.Tensor."""

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tripy as tp

HERE = os.path.basename(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def st_file(tensors, metadata=None, pad=True):
    """A safetensors file's bytes from ``[(name, dtype, shape, raw bytes)]``, laid out in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_file(header_text, data=b""):
    """A file from header text as given (possibly malformed) and a data region."""
    header_text = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(header_text)) + header_text + data


def split_file(blob):
    """(header dict, header length, data region) of a file, read with struct and json."""
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), n, blob[8 + n :]


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)
    return str(path)


# --- independent references for the dtypes numpy lacks ---------------------------------------------


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounding to nearest even (finite inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def e4m3fn_to_f32(bits):
    """float8 e4m3fn (bias 7, no infinities, S.1111.111 is NaN) -> float32."""
    bits = np.asarray(bits, np.uint8).astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exp, mant = (bits >> 3) & 0xF, bits & 7
    value = np.where(exp == 0, mant / 8.0 * 2.0**-6, (1 + mant / 8.0) * 2.0 ** (exp - 7))
    value = np.where((exp == 15) & (mant == 7), np.nan, value)
    return (sign * value).astype(np.float32)


NUMPY_DTYPES = [
    ("F32", np.float32, tp.float32),
    ("F16", np.float16, tp.float16),
    ("I8", np.int8, tp.int8),
    ("I32", np.int32, tp.int32),
    ("I64", np.int64, tp.int64),
    ("BOOL", np.bool_, tp.bool),
]


def sample(np_dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if np_dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(info.min, info.max, shape, dtype=np_dtype, endpoint=True)
    return (rng.standard_normal(shape) * 100).astype(np_dtype)


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name,np_dtype,tp_dtype", NUMPY_DTYPES, ids=[d[0] for d in NUMPY_DTYPES])
def test_numpy_dtypes_round_trip_bit_for_bit_in_the_format_s_layout(tmp_path, name, np_dtype, tp_dtype):
    arrays = {"a": sample(np_dtype, (3, 5), 0), "scalar": sample(np_dtype, (), 1), "empty": sample(np_dtype, (0, 2), 2)}
    path = str(tmp_path / "x.safetensors")
    tp.save_safetensors(arrays, path, metadata={"format": "np"})
    # What we wrote, read back with struct and json.
    header, n, data = split_file(open(path, "rb").read())
    assert (8 + n) % 8 == 0 and header.pop("__metadata__") == {"format": "np"}
    assert list(header) == list(arrays)
    for key, array in arrays.items():
        entry = header[key]
        assert entry["dtype"] == name and entry["shape"] == list(array.shape)
        begin, end = entry["data_offsets"]
        assert data[begin:end] == array.tobytes()
    # What our reader makes of a file built here, with an unpadded header (misaligned data).
    blob = st_file([(k, name, a.shape, a.tobytes()) for k, a in arrays.items()], pad=False)
    for file in (path, write(tmp_path / "by_hand.safetensors", blob)):
        loaded = tp.load_safetensors(file, device="cpu")
        assert list(loaded) == list(arrays)
        for key, array in arrays.items():
            assert loaded[key].dtype == tp_dtype and loaded[key].shape == array.shape
            # (np.asarray of an empty bool tensor drops its shape where numpy exports no bool
            # through DLPack: an issue of tp.Tensor.__array__, not of the file.)
            np.testing.assert_array_equal(np.asarray(loaded[key]).reshape(array.shape), array)


def test_bfloat16_round_trips_against_a_reference_of_its_bits(tmp_path):
    values = np.concatenate([sample(np.float32, (61,), 3), np.float32([1.0, -0.0, 1.00390625, 1.01171875, 3e38])])
    path = str(tmp_path / "bf16.safetensors")
    tp.save_safetensors({"w": tp.cast(tp.Tensor(values), tp.bfloat16)}, path)
    header, _, data = split_file(open(path, "rb").read())
    assert header["w"]["dtype"] == "BF16" and header["w"]["shape"] == [values.size]
    np.testing.assert_array_equal(np.frombuffer(data, np.uint16), bf16_bits(values))
    # And a file of bf16 bits built here reads as those values.
    bits = bf16_bits(values)
    blob = st_file([("w", "BF16", bits.shape, bits.tobytes())])
    for file in (path, write(tmp_path / "by_hand.safetensors", blob)):
        loaded = tp.load_safetensors(file, device="cpu")["w"]
        assert loaded.dtype == tp.bfloat16
        np.testing.assert_array_equal(np.asarray(tp.cast(loaded, tp.float32)), bf16_to_f32(bits))


def test_float8_reads_every_byte_as_its_e4m3fn_value_and_round_trips(tmp_path):
    bits = np.arange(256, dtype=np.uint8)
    path = write(tmp_path / "f8.safetensors", st_file([("scale", "F8_E4M3", (16, 16), bits.tobytes())]))
    loaded = tp.load_safetensors(path, device="cpu")["scale"]
    assert loaded.dtype == tp.float8 and loaded.shape == (16, 16)
    np.testing.assert_array_equal(np.asarray(tp.cast(loaded, tp.float32)).ravel(), e4m3fn_to_f32(bits))
    again = str(tmp_path / "again.safetensors")
    tp.save_safetensors({"scale": loaded}, again)
    header, _, data = split_file(open(again, "rb").read())
    assert header == {"scale": {"dtype": "F8_E4M3", "shape": [16, 16], "data_offsets": [0, 256]}}
    assert data == bits.tobytes()


def test_order_metadata_and_mixed_dtypes_survive_and_data_is_aligned(tmp_path):
    tensors = {"mask": np.array([True, False, True]), "w": np.ones((2, 2), np.float32), "ids": np.arange(3, dtype=np.int64)}
    path = str(tmp_path / "m.safetensors")
    tp.save_safetensors(tensors, path, metadata={"format": "pt", "note": "café"})
    header, n, _ = split_file(open(path, "rb").read())
    for key, array in tensors.items():
        assert (8 + n + header[key]["data_offsets"][0]) % array.itemsize == 0, key
    loaded = tp.load_safetensors(path, device="cpu")
    assert list(loaded) == ["mask", "w", "ids"] and loaded.metadata == {"format": "pt", "note": "café"}


def test_cpu_tensors_read_the_mapped_file_in_place(tmp_path):
    path = str(tmp_path / "w.safetensors")
    tp.save_safetensors({"w": np.arange(4096, dtype=np.float32)}, path)
    w = tp.load_safetensors(path, device="cpu")["w"]
    address = np.from_dlpack(w).ctypes.data
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        ranges = [[int(x, 16) for x in line.split()[0].split("-")] for line in f if line.split()[-1] == real]
    assert any(lo <= address < hi for lo, hi in ranges), "the tensor does not point into the file's mapping"
    # The mapping outlives the file's name and the dict.
    os.unlink(path)
    assert np.asarray(w + 1.0)[4095] == 4096.0


# --- loaded tensors are ordinary tensors -----------------------------------------------------------


def test_loaded_tensors_work_in_eager_ops_modules_and_compiled_functions(tmp_path, device):
    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    path = str(tmp_path / "linear.safetensors")
    tp.save_safetensors({"weight": weight, "bias": bias}, path)
    loaded = tp.load_safetensors(path)
    assert loaded["weight"].device == tp.device(device)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(loaded["weight"] * 2.0), weight * 2.0)

    linear = tp.Linear(3, 4)
    linear.load_state_dict(loaded)
    np.testing.assert_allclose(np.asarray(linear(tp.Tensor(x))), x @ weight.T + bias, rtol=1e-5, atol=1e-5)
    compiled = tp.compile(linear, args=[tp.InputInfo((2, 3), dtype=tp.float32)])
    np.testing.assert_allclose(np.asarray(compiled(tp.Tensor(x))), x @ weight.T + bias, rtol=1e-5, atol=1e-5)
    w = loaded["weight"]
    as_constant = tp.compile(lambda a: a @ tp.transpose(w, 0, 1), args=[tp.InputInfo((2, 3), dtype=tp.float32)])
    np.testing.assert_allclose(np.asarray(as_constant(tp.Tensor(x))), x @ weight.T, rtol=1e-5, atol=1e-5)


def test_device_argument_places_every_tensor(tmp_path, device):
    path = str(tmp_path / "w.safetensors")
    tp.save_safetensors({"a": np.arange(6, dtype=np.int32).reshape(2, 3), "b": np.ones(2, np.float16)}, path)
    loaded = tp.load_safetensors(path, device=device)
    assert all(t.device == tp.device(device) for t in loaded.values())
    np.testing.assert_array_equal(np.asarray(loaded["a"]), np.arange(6).reshape(2, 3))
    # Saving from the device writes the same file.
    again = str(tmp_path / "again.safetensors")
    tp.save_safetensors(dict(loaded), again)
    assert open(again, "rb").read() == open(path, "rb").read()


# --- sharded checkpoints -------------------------------------------------------------------------


def sharded_checkpoint(directory, weight_map=None, index_text=None):
    a, b, c = np.arange(4, dtype=np.float32), np.ones((2, 2), np.float16), np.array([7], np.int64)
    write(directory / "model-00001-of-00002.safetensors", st_file([("a", "F32", a.shape, a.tobytes()), ("c", "I64", c.shape, c.tobytes())], {"format": "pt"}))
    write(directory / "model-00002-of-00002.safetensors", st_file([("b", "F16", b.shape, b.tobytes())], {"format": "pt", "x": "1"}))
    if weight_map is None:
        weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}
    if index_text is None:
        index_text = json.dumps({"metadata": {"total_size": 36}, "weight_map": weight_map})
    (directory / "model.safetensors.index.json").write_text(index_text)
    return {"a": a, "c": c, "b": b}


def test_a_sharded_directory_loads_file_by_file(tmp_path):
    expected = sharded_checkpoint(tmp_path)
    loaded = tp.load_safetensors(tmp_path, device="cpu")
    assert list(loaded) == ["a", "c", "b"] and loaded.metadata == {"format": "pt", "x": "1"}
    for key, array in expected.items():
        np.testing.assert_array_equal(np.asarray(loaded[key]), array)


def test_a_directory_with_one_file_loads_it(tmp_path):
    write(tmp_path / "model.safetensors", st_file([("w", "I32", (1,), np.int32([5]).tobytes())]))
    assert tp.load_safetensors(str(tmp_path), device="cpu")["w"].tolist() == [5]


@pytest.mark.parametrize(
    "case,weight_map,index_text,expect",
    [
        ("missing shard", {"a": "model-00001-of-00002.safetensors", "b": "model-00003-of-00003.safetensors"}, None,
         ["'b'", "'model-00003-of-00003.safetensors'", "which is not in the directory"]),
        ("tensor not in its shard", {"a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors",
                                     "b": "model-00002-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"}, None,
         ["tensor(s) in 'model-00002-of-00002.safetensors' that it does not hold, the first 'z'"]),
        ("tensor the index does not list", {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}, None,
         ["'model-00001-of-00002.safetensors' holds 1 tensor(s)", "the first 'c'"]),
        ("parent directory", {"a": "../model-00001-of-00002.safetensors"}, None, ["'a'", "not a file name inside the checkpoint's directory"]),
        ("absolute path", {"a": "/etc/passwd"}, None, ["'/etc/passwd'", "not a file name inside"]),
        ("not JSON", None, "{\"weight_map\": ", ["is not valid JSON"]),
        ("duplicate key", None, '{"weight_map": {"a": "x", "a": "y"}}', ["has the key 'a' twice"]),
        ("no weight_map", None, '{"metadata": {}}', ["has no weight_map"]),
        ("weight_map of numbers", None, '{"weight_map": {"a": 1}}', ["has no weight_map"]),
        ("deeply nested", None, "[" * 100000 + "]" * 100000, ["is not valid JSON"]),
    ],
)
def test_a_bad_index_names_what_is_wrong(tmp_path, case, weight_map, index_text, expect):
    sharded_checkpoint(tmp_path, weight_map, index_text)
    with pytest.raises(tp.TripyException) as err:
        tp.load_safetensors(tmp_path, device="cpu")
    message = str(err.value)
    assert HERE in message, message
    for fragment in expect:
        assert fragment in message, message


def test_a_directory_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(tp.TripyException, match="holds neither model.safetensors nor model.safetensors.index.json"):
        tp.load_safetensors(tmp_path)


# --- hostile files --------------------------------------------------------------------------------

OK = '"dtype":"F32","shape":[2],"data_offsets":[0,8]'
BAD_FILES = [
    ("size mismatch", raw_file('{"layers.0.wq.weight":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,100]}}', bytes(100)),
     "tensor 'layers.0.wq.weight' has data_offsets [0, 100) but dtype BF16 and shape (4, 4) need 32 bytes"),
    ("unknown dtype", raw_file('{"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "tensor 'w' has dtype 'Q7'"),
    ("float64", raw_file('{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}', bytes(8)), "tensor 'w' has dtype 'F64', which Tripy does not read"),
    ("uint8", raw_file('{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}', bytes(8)), "tensor 'w' has dtype 'U8'"),
    ("negative dim", raw_file('{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', bytes(8)), "tensor 'w': its shape is not a list of non-negative integers"),
    ("begin after end", raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', bytes(8)), "tensor 'w' has data_offsets [8, 0), which begin after they end"),
    ("past the data", raw_file('{"w":{' + OK + "}}", bytes(4)), "tensor 'w' has data_offsets [0, 8), past the end of the data"),
    ("overlap", raw_file('{"a":{' + OK + '},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)), "tensors 'a' [0, 8) and 'b' [4, 12) overlap"),
    ("gap", raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)), "bytes [0, 4) of the data belong to no tensor"),
    ("duplicate", raw_file('{"w":{' + OK + '},"w":{' + OK + "}}", bytes(8)), "tensor 'w' appears twice"),
    ("overflow", raw_file('{"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}'), "tensor 'w' has dtype F32 and shape"),
    ("wrong type", raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":"0-8"}}', bytes(8)), "tensor 'w': its data_offsets are not"),
    ("missing field", raw_file('{"w":{"dtype":"F32","shape":[2]}}', bytes(8)), "tensor 'w' has no data_offsets"),
    ("not JSON", raw_file("{w}"), "its header is not valid JSON"),
    ("metadata not strings", raw_file('{"__metadata__":{"n":1}}'), "its __metadata__ value for 'n' is not a string"),
    ("truncated", raw_file('{"w":{' + OK + "}}", bytes(8))[:20], "runs past the end of the file"),
    ("absurd header length", struct.pack("<Q", 1 << 40) + b"{}", "is over the limit of 100000000"),
    ("too short", b"\x02\x00", "the file has 2 bytes"),
    ("bool byte", raw_file('{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x01\x07"), "tensor 'm' holds the byte 7"),
]


@pytest.mark.parametrize("case,blob,expect", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_hostile_file_is_refused_naming_the_file_and_the_tensor(tmp_path, case, blob, expect):
    path = write(tmp_path / "model.safetensors", blob)
    with pytest.raises(tp.TripyException) as err:
        tp.load_safetensors(path)
    message = str(err.value)
    assert f"Cannot load safetensors file '{path}'" in message and expect in message and HERE in message, message


def test_every_corruption_of_a_header_byte_loads_or_raises(tmp_path):
    good = st_file([("w", "F32", (2,), np.float32([1, 2]).tobytes()), ("m", "BOOL", (1,), b"\x01")], {"k": "v"})
    (n,) = struct.unpack("<Q", good[:8])
    path = str(tmp_path / "x.safetensors")
    loaded = refused = 0
    for at in range(8 + n):
        for value in (0x00, 0x22, 0x2C, 0x31, 0x5B, 0x7B, 0x7D, 0xFF):
            if good[at] == value:
                continue
            write(path, good[:at] + bytes([value]) + good[at + 1 :])
            try:
                tp.load_safetensors(path, device="cpu")
                loaded += 1
            except tp.TripyException as e:
                assert "Cannot load safetensors file" in str(e)
                refused += 1
    assert refused > 0 and loaded + refused > 8 * n


# --- paths ----------------------------------------------------------------------------------------


def _in_subprocess(code, timeout=60):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_a_fifo_or_a_link_to_one_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")
    os.symlink("model.safetensors", tmp_path / "link.safetensors")
    os.mkfifo(tmp_path / "index_dir_fifo")
    (tmp_path / "sharded").mkdir()
    os.mkfifo(tmp_path / "sharded" / "model.safetensors.index.json")
    out = _in_subprocess(f"""
        import tripy as tp
        for path in [{str(tmp_path / 'model.safetensors')!r}, {str(tmp_path / 'link.safetensors')!r}, {str(tmp_path / 'sharded')!r}]:
            try:
                tp.load_safetensors(path, device="cpu")
            except tp.TripyException as e:
                print("REFUSED", str(e).splitlines()[-1])
        """, timeout=30)
    lines = [line for line in out.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(lines) == 3, (out.stdout, out.stderr)
    assert "FIFO" in lines[0] and "FIFO" in lines[1] and "not a regular file" in lines[2], lines


def test_links_to_files_are_followed_and_a_dangling_link_is_named(tmp_path):
    path = str(tmp_path / "real.safetensors")
    tp.save_safetensors({"w": np.float32([1.5])}, path)
    os.symlink("real.safetensors", tmp_path / "link.safetensors")
    assert tp.load_safetensors(tmp_path / "link.safetensors", device="cpu")["w"].tolist() == [1.5]
    os.symlink("nowhere.safetensors", tmp_path / "dangling.safetensors")
    with pytest.raises(tp.TripyException, match="dangling.safetensors': No such file or directory"):
        tp.load_safetensors(tmp_path / "dangling.safetensors")


def test_a_path_with_a_nul_byte_is_refused(tmp_path):
    for call in (lambda p: tp.load_safetensors(p), lambda p: tp.save_safetensors({"w": np.float32([1])}, p)):
        with pytest.raises(tp.TripyException, match="contains a NUL byte") as err:
            call(str(tmp_path / "a\0b.safetensors"))
        assert HERE in str(err.value)
    assert os.listdir(tmp_path) == []


def test_save_replaces_only_a_regular_file(tmp_path):
    (tmp_path / "victim.txt").write_text("precious")
    os.symlink("victim.txt", tmp_path / "link.safetensors")
    with pytest.raises(tp.TripyException, match="a symbolic link"):
        tp.save_safetensors({"w": np.float32([1])}, tmp_path / "link.safetensors")
    assert (tmp_path / "victim.txt").read_text() == "precious"
    os.mkfifo(tmp_path / "fifo.safetensors")
    with pytest.raises(tp.TripyException, match="a special file"):
        tp.save_safetensors({"w": np.float32([1])}, tmp_path / "fifo.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["fifo.safetensors", "link.safetensors", "victim.txt"]


@pytest.mark.parametrize(
    "tensors,metadata,expect",
    [
        ({"q": tp.Tensor([1, 2], dtype=tp.int4)}, None, "tensor 'q' has dtype int4, which the safetensors format cannot hold"),
        ({"__metadata__": np.float32([1])}, None, "cannot be named '__metadata__'"),
        ({1: np.float32([1])}, None, "tensor names must be strings"),
        ({"w": np.float64([1])}, None, "Unsupported data type: float64"),
        ({"w": np.float32([1])}, {"k": 1}, "metadata values must be strings"),
        ({"w": np.float32([1])}, ["k"], "metadata must be a dict"),
        ({"\ud800": np.float32([1])}, None, "must be valid Unicode text"),
    ],
)
def test_save_refuses_what_the_format_cannot_hold(tmp_path, tensors, metadata, expect):
    with pytest.raises(tp.TripyException) as err:
        tp.save_safetensors(tensors, tmp_path / "x.safetensors", metadata=metadata)
    assert expect in str(err.value) and HERE in str(err.value), str(err.value)
    assert os.listdir(tmp_path) == []


# --- Hugging Face's own library, where installed ---------------------------------------------------


def test_files_cross_check_with_hugging_face_safetensors(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    arrays = {name: sample(np_dtype, (3, 4), i) for i, (name, np_dtype, _) in enumerate(NUMPY_DTYPES)}
    theirs, ours = str(tmp_path / "theirs.safetensors"), str(tmp_path / "ours.safetensors")
    st_numpy.save_file(arrays, theirs, metadata={"format": "np"})
    loaded = tp.load_safetensors(theirs, device="cpu")
    assert loaded.metadata == {"format": "np"}
    for key, array in arrays.items():
        np.testing.assert_array_equal(np.asarray(loaded[key]), array)
    tp.save_safetensors(arrays, ours, metadata={"format": "np"})
    back = st_numpy.load_file(ours)
    for key, array in arrays.items():
        assert back[key].dtype == array.dtype
        np.testing.assert_array_equal(back[key], array)


def test_bfloat16_cross_checks_with_hugging_face_safetensors_and_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    values = sample(np.float32, (5, 7), 9)
    theirs, ours = str(tmp_path / "theirs.safetensors"), str(tmp_path / "ours.safetensors")
    st_torch.save_file({"w": torch.from_numpy(values).to(torch.bfloat16), "f8": torch.from_numpy(values).to(torch.float8_e4m3fn)}, theirs)
    loaded = tp.load_safetensors(theirs, device="cpu")
    np.testing.assert_array_equal(np.asarray(tp.cast(loaded["w"], tp.float32)), bf16_to_f32(bf16_bits(values)))
    f8_torch = torch.from_numpy(values).to(torch.float8_e4m3fn).to(torch.float32).numpy()
    np.testing.assert_array_equal(np.asarray(tp.cast(loaded["f8"], tp.float32)), f8_torch)
    tp.save_safetensors(dict(loaded), ours)
    back = st_torch.load_file(ours)
    assert back["w"].dtype == torch.bfloat16 and back["f8"].dtype == torch.float8_e4m3fn
    np.testing.assert_array_equal(back["w"].to(torch.float32).numpy(), bf16_to_f32(bf16_bits(values)))


def test_a_copy_asked_of_a_mapped_tensor_is_writable_and_leaves_the_file_alone(tmp_path):
    """numpy 2's np.array(t) passes copy=True to __array__ and trusts the answer: a view of the
    mapped file would come back read-only (or, writable, would write through to the file)."""
    path = str(tmp_path / "x.safetensors")
    tp.save_safetensors({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    loaded = tp.load_safetensors(path, device="cpu")["w"]
    copied = loaded.__array__(copy=True)
    copied[1, 2] = -1.0
    np.testing.assert_array_equal(np.asarray(loaded), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert loaded.__array__(dtype=np.float64, copy=True).flags.writeable
