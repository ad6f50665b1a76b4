"""Writes the seed corpus of the executable loader's fuzz harness, core/fuzz/corpus/executable/,
and that of the safetensors reader's, core/fuzz/corpus/safetensors/ (see the end of this text).

Run it after any change to the executable file format (Executable::kFormatVersion, the metadata
JSON, the program or kernel layout), or the old seeds are refused at the door and fuzzing no longer
reaches the JSON reader and the program validator through them. After a build (it uses the built
tripy module):

    .venv/bin/python scripts/make_fuzz_corpus.py

It compiles nine small programs on the CPU (no weights: every constant folds into a kernel; one has
two optimization profiles) and writes each in the two forms that core/fuzz/executable_fuzz.cc reads
(its first byte picks the mode):

    NAME.tpy   b"\\x01" + the saved file (mode 1: the file, its metadata checksum recomputed)
    NAME.meta  b"\\x02" + METADATA-JSON + b"\\0" + DATA-REGION (mode 2: the harness makes it a file
               with every length and checksum right, so mutations reach the JSON reader)

The output is the same on every run and in every checkout: the metadata is rewritten as one line
of JSON whose source frames name this script by its path relative to the repository root (then
the metadata checksum is recomputed). Each seed is then loaded back with tp.Executable.load and
run at its inputs' opt shapes against numpy. v3_ew_static.tpy, a file of format version 3 (before
optimization profiles, still read), is kept as it was written and not rewritten here.

The safetensors seeds are small checkpoints (every dtype the reader takes, metadata, empty and
0-d tensors, an unpadded header whose data is misaligned), each in the two forms that
core/fuzz/safetensors_fuzz.cc reads: NAME.st, b"\\x00" + the file; NAME.json, b"\\x01" + HEADER-JSON
+ b"\\0" + DATA-REGION (the harness writes the length, so mutations reach the JSON reader).
"""

import json
import os
import sys
import tempfile

import numpy as np

import tripy as tp

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "core", "fuzz", "corpus", "executable")
THIS_FILE = os.path.abspath(__file__)
THIS_FILE_REL = os.path.relpath(THIS_FILE, REPO).replace(os.sep, "/")

# The file layout (core/src/runtime/file_format.h): a 32-byte header (magic, u32 version, u32 zero,
# u64 metadata length, u64 checksum of the metadata), the metadata, zeros to a multiple of 64, then
# the data region.
HEADER_BYTES = 32
ALIGN = 64
MODE_FILE_FIXED_CHECKSUM = b"\x01"
MODE_META_AND_DATA = b"\x02"

# XXH64 with seed 0, the file's checksum64 (core/src/runtime/checksum.cc).
_M64 = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def _lane_round(acc, lane):
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def _le(data, at, n):
    return int.from_bytes(data[at : at + n], "little")


def checksum64(data):
    n, p = len(data), 0
    if n >= 32:
        lanes = [(_P1 + _P2) & _M64, _P2, 0, (-_P1) & _M64]
        while p + 32 <= n:
            lanes = [_lane_round(v, _le(data, p + 8 * i, 8)) for i, v in enumerate(lanes)]
            p += 32
        h = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _M64
        for v in lanes:
            h = ((h ^ _lane_round(0, v)) * _P1 + _P4) & _M64
    else:
        h = _P5
    h = (h + n) & _M64
    while p + 8 <= n:
        h = (_rotl(h ^ _lane_round(0, _le(data, p, 8)), 27) * _P1 + _P4) & _M64
        p += 8
    if p + 4 <= n:
        h = (_rotl(h ^ ((_le(data, p, 4) * _P1) & _M64), 23) * _P2 + _P3) & _M64
        p += 4
    while p < n:
        h = (_rotl(h ^ ((data[p] * _P5) & _M64), 11) * _P1) & _M64
        p += 1
    h = ((h ^ (h >> 33)) * _P2) & _M64
    h = ((h ^ (h >> 29)) * _P3) & _M64
    return h ^ (h >> 32)


def split_file(blob):
    """(header's first 16 bytes, metadata text, data region) of a saved executable, checked."""
    assert blob[:8] == b"TRIPYEXE", "not an executable file"
    length, checksum = _le(blob, 16, 8), _le(blob, 24, 8)
    meta = blob[HEADER_BYTES : HEADER_BYTES + length]
    assert checksum64(meta) == checksum, "checksum64 here disagrees with the runtime's: fix this script"
    data_start = (HEADER_BYTES + length + ALIGN - 1) // ALIGN * ALIGN
    assert not any(blob[HEADER_BYTES + length : data_start]), "padding is not zero"
    return blob[:16], meta, blob[data_start:]


def join_file(head16, meta, data):
    out = bytearray(head16)
    out += len(meta).to_bytes(8, "little") + checksum64(meta).to_bytes(8, "little") + meta
    out += bytes(-len(out) % ALIGN)
    return bytes(out + data)


def canonical_metadata(meta):
    """The metadata as one line of JSON, its source frames naming this script relative to the repository.

    The runtime prints the JSON with line breaks that depend on how long a line gets, and so on the
    absolute path of the checkout; the loader reads any layout, and a short seed mutates better.
    """
    doc = json.loads(meta.decode("utf-8"))
    for profile in doc["profiles"]:
        for frames in profile["program"]["sources"]:
            for frame in frames:
                assert frame["file"] == THIS_FILE, f"a source frame outside this script: {frame}"
                frame["file"] = THIS_FILE_REL
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


# The programs: (name, function, compile args, inputs at the opt shapes, numpy reference[,
# optimization profiles]).
def _floats(*shape):
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 3.0) / 4.0


def by_size(x, n):
    return tp.reshape(x, (n, 8 // n))


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


PROGRAMS = [
    (
        "ew_static",
        lambda x: x * 2.0 + 1.0,
        [tp.InputInfo((2, 3), dtype=tp.float32)],
        [_floats(2, 3)],
        lambda x: x * 2.0 + 1.0,
    ),
    (
        "ew_dynamic",
        lambda x, y: tp.exp(x) - y,
        [tp.InputInfo(((1, 2, 4), 3), dtype=tp.float32), tp.InputInfo((3,), dtype=tp.float32)],
        [_floats(2, 3), _floats(3)],
        lambda x, y: np.exp(x) - y,
    ),
    (
        "matmul_dynamic",
        lambda a, b: a @ b,
        [tp.InputInfo(((1, 2, 3), 4, 5), dtype=tp.float32), tp.InputInfo((5, 2), dtype=tp.float32)],
        [_floats(2, 4, 5), _floats(5, 2)],
        lambda a, b: a @ b,
    ),
    (
        "softmax_sum",
        lambda x: tp.softmax(x, dim=1) + tp.sum(x, dim=1, keepdim=True),
        [tp.InputInfo(((1, 2, 3), 8), dtype=tp.float32)],
        [_floats(2, 8)],
        lambda x: _softmax(x) + x.sum(axis=1, keepdims=True),
    ),
    (
        "slice_concat",
        lambda x: tp.concatenate([x[:, 1:], x[:, :1]], dim=1),
        [tp.InputInfo(((1, 2, 4), 4), dtype=tp.float32)],
        [_floats(2, 4)],
        lambda x: np.concatenate([x[:, 1:], x[:, :1]], axis=1),
    ),
    (
        "gather_argmax",
        lambda x, i: tp.argmax(tp.gather(x, 0, i), dim=1),
        [tp.InputInfo((4, 3), dtype=tp.float32), tp.InputInfo((2,), dtype=tp.int32)],
        [np.array([[0, 5, 1], [7, 2, 3], [1, 1, 9], [4, 8, 6]], dtype=np.float32), np.array([3, 1], dtype=np.int32)],
        lambda x, i: np.argmax(x[i], axis=1).astype(np.int32),
    ),
    (
        "transpose_int",
        lambda x: tp.transpose(x, 0, 1) * 3,
        [tp.InputInfo(((1, 2, 3), 2), dtype=tp.int32)],
        [np.arange(4, dtype=np.int32).reshape(2, 2) - 1],
        lambda x: x.T * 3,
    ),
    (
        "shape_value",
        by_size,
        [tp.InputInfo((2, 4), dtype=tp.float32), tp.DimensionInputInfo(value_bounds=(1, 2, 8))],
        [_floats(2, 4), 2],
        lambda x, n: x.reshape(n, 8 // n),
    ),
    (
        "two_profiles",
        lambda x, w: tp.sum(x * w, dim=1),
        [tp.InputInfo((tp.NamedDimension("rows", 1, 2, 8), 4), dtype=tp.float32), tp.InputInfo((4,), dtype=tp.float32)],
        [_floats(2, 4), _floats(4)],
        lambda x, w: (x * w).sum(axis=1),
        [[tp.NamedDimension("rows", 2, 2, 2)], [tp.NamedDimension("rows", 3, 6, 8)]],
    ),
]


def write(name, fn, args, scratch, profiles=None):
    saved = os.path.join(scratch, name + ".tpy")
    tp.compile(fn, args=args, optimization_profiles=profiles).save(saved)
    with open(saved, "rb") as f:
        head16, meta, data = split_file(f.read())
    meta = canonical_metadata(meta)
    with open(os.path.join(CORPUS, name + ".tpy"), "wb") as f:
        f.write(MODE_FILE_FIXED_CHECKSUM + join_file(head16, meta, data))
    with open(os.path.join(CORPUS, name + ".meta"), "wb") as f:
        f.write(MODE_META_AND_DATA + meta + b"\0" + data)


def check(name, inputs, reference, scratch):
    """Loads both seeds as the harness makes them into files, and runs each against numpy."""
    with open(os.path.join(CORPUS, name + ".tpy"), "rb") as f:
        tpy = f.read()
    with open(os.path.join(CORPUS, name + ".meta"), "rb") as f:
        meta_seed = f.read()
    assert tpy[:1] == MODE_FILE_FIXED_CHECKSUM and meta_seed[:1] == MODE_META_AND_DATA
    meta, _, data = meta_seed[1:].partition(b"\0")
    files = {"tpy": tpy[1:], "meta": join_file(tpy[1:17], meta, data)}
    args = [a if isinstance(a, int) else tp.Tensor(a) for a in inputs]
    want = reference(*inputs)
    for form, blob in files.items():
        path = os.path.join(scratch, f"{name}.{form}.tpy")
        with open(path, "wb") as f:
            f.write(blob)
        got = np.asarray(tp.Executable.load(path)(*args))
        what = f"{name}.{form}"
        assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), f"{what}: {got} != {want}"


SAFETENSORS_CORPUS = os.path.join(REPO, "core", "fuzz", "corpus", "safetensors")


def _safetensors_seeds(scratch):
    """(name, file bytes) of each safetensors seed: ours from tp.save_safetensors, one by hand."""
    f32 = np.arange(6, dtype=np.float32).reshape(2, 3) / 4.0
    checkpoints = {
        "linear": ({"weight": f32, "bias": np.float32([0.5, -1.0])}, {"format": "pt"}),
        "every_dtype": (
            {
                "f32": f32,
                "f16": f32.astype(np.float16),
                "bf16": tp.cast(tp.Tensor(f32), tp.bfloat16),
                "f8": tp.cast(tp.Tensor(f32), tp.float8),
                "i8": np.int8([-128, 0, 127]),
                "i32": np.int32([7]),
                "i64": np.int64([-(2**40), 2**40]),
                "mask": np.array([True, False]),
                "empty": np.zeros((0, 4), np.float32),
                "scalar": np.float32(3.0),
            },
            {"format": "np", "note": "seed"},
        ),
    }
    seeds = []
    for name, (tensors, metadata) in checkpoints.items():
        path = os.path.join(scratch, name + ".safetensors")
        tp.save_safetensors(tensors, path, metadata=metadata)
        with open(path, "rb") as f:
            seeds.append((name, f.read()))
    # Unpadded: the data starts at an odd offset, so the reader copies the int32 it cannot borrow.
    header = b'{"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[8,9]}}'
    seeds.append(("unaligned", len(header).to_bytes(8, "little") + header + np.int32([-7, 9]).tobytes() + b"\x01"))
    return seeds


def write_safetensors_seeds(scratch):
    os.makedirs(SAFETENSORS_CORPUS, exist_ok=True)
    for name, blob in _safetensors_seeds(scratch):
        n = int.from_bytes(blob[:8], "little")
        with open(os.path.join(SAFETENSORS_CORPUS, name + ".st"), "wb") as f:
            f.write(b"\x00" + blob)
        with open(os.path.join(SAFETENSORS_CORPUS, name + ".json"), "wb") as f:
            f.write(b"\x01" + blob[8 : 8 + n] + b"\0" + blob[8 + n :])
        # Each seed reads back (the harness's two forms make this same file).
        path = os.path.join(scratch, name + ".check.safetensors")
        with open(path, "wb") as f:
            f.write(blob)
        print(f"{name}: {len(tp.load_safetensors(path))} tensors, {name}.st {len(blob) + 1} bytes")


def main():
    tp.config.default_device = "cpu"
    os.makedirs(CORPUS, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, fn, args, inputs, reference, *profiles in PROGRAMS:
            write(name, fn, args, scratch, *profiles)
            check(name, inputs, reference, scratch)
            sizes = [os.path.getsize(os.path.join(CORPUS, name + ext)) for ext in (".tpy", ".meta")]
            print(f"{name}: {name}.tpy {sizes[0]} bytes, {name}.meta {sizes[1]} bytes")
        write_safetensors_seeds(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
