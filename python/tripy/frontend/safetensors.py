"""``tp.load_safetensors`` and ``tp.save_safetensors``: weights in Hugging Face's safetensors format.

The core reads, checks and writes the files (core/src/runtime/safetensors.h); this module finds the
files of a checkpoint directory, checks a sharded checkpoint's index, and turns what the core
returns into tensors.
"""

import json
import os
import stat

from tripy import _C
from tripy.frontend.device import resolve as _resolve_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.paths import path_argument, quoted_path
from tripy.frontend.tensor import Tensor
from tripy.utils.stack_info import capture_user_frames

# The names Hugging Face gives a checkpoint's one file and a sharded checkpoint's index.
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# An index holds tensor and file names: far less than this. A larger file is not an index.
_MAX_INDEX_BYTES = 100_000_000


class _Weights(dict):
    """The dict ``load_safetensors`` returns: names to tensors, plus the files' ``metadata``."""

    metadata = {}


def load_safetensors(path, device=None):
    """
    Loads the tensors of a safetensors checkpoint (the format of Hugging Face's ``safetensors``).
    Every file is checked before a tensor is made (lengths, dtypes, shapes, offsets), so a damaged
    or hostile file raises TripyException naming the file and the tensor.

    Args:
        path (str | os.PathLike): A ``.safetensors`` file, or a directory holding ``model.safetensors`` or the
            ``model.safetensors.index.json`` of a sharded checkpoint, whose ``weight_map`` names
            each tensor's file. Those file names must lie inside the directory (no absolute paths,
            no ``..``); symbolic links among the files are followed, as in Hugging Face's cache.
        device (tp.device | str | None): Where the tensors go; the default device when omitted. On the CPU, tensors read
            the memory-mapped file in place, with no copy; on a GPU, each is copied there once.

    Returns:
        dict[str, tp.Tensor]: the tensors by name, in the file's order (a sharded checkpoint: file by
        file, in the order the index first names each file). Its ``metadata`` attribute is a dict
        of the files' ``__metadata__`` strings.

    F32, F16, BF16, F8_E4M3, I8, I32, I64 and BOOL tensors are read; other dtypes (F64, U8, ...)
    are refused by name. A loaded tensor is an ordinary ``tp.Tensor``: eager ops, ``tp.Module``'s
    ``load_state_dict`` and ``tp.compile`` (as a constant) all take it.

    Raises:
        tp.TripyException: if a file is missing, damaged or holds a dtype Tripy cannot read.

    Example::

        import os
        import tempfile

        import tripy as tp

        path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
        tp.save_safetensors({"weight": tp.ones((2, 3)), "bias": tp.zeros((2,))}, path, metadata={"format": "pt"})

        weights = tp.load_safetensors(path)
        assert list(weights) == ["weight", "bias"] and weights.metadata == {"format": "pt"}
        linear = tp.Linear(3, 2)
        linear.load_state_dict(weights)
        assert linear(tp.ones((1, 3))).tolist() == [[3.0, 3.0]]
    """
    frames = capture_user_frames()
    target = str(_resolve_device(device))
    name = _path_argument(path, "load_safetensors")
    if os.path.isdir(name):
        return _load_directory(name, target, frames)
    return _load_file(name, target, frames)


def save_safetensors(tensors, path, metadata=None):
    """
    Writes ``tensors`` to one safetensors file at ``path``, which ``tp.load_safetensors`` and
    Hugging Face's ``safetensors`` read. The file is written whole or not at all (through a
    temporary file renamed over ``path``); only a regular file at ``path`` is replaced, never a
    symbolic link, FIFO or directory.

    Args:
        tensors (dict[str, tp.Tensor | Any]): A dict of names to ``tp.Tensor``, or to anything ``tp.Tensor`` accepts (numpy
            arrays, ...). The file lists them in this order. Tensors on a GPU are copied to the host
            to be written. int4 tensors cannot be written: the format has no such dtype.
        path (str | os.PathLike): The file to write.
        metadata (dict[str, str] | None): Optional ``__metadata__`` for the file: a dict of strings to strings.

    Raises:
        tp.TripyException: if a value cannot become a tensor, is int4, the metadata is not strings,
            or the file cannot be written.

    Example::

        import os
        import tempfile

        import numpy as np
        import tripy as tp

        path = os.path.join(tempfile.mkdtemp(), "weights.safetensors")
        tp.save_safetensors({"w": tp.Tensor([[1.0, 2.0]]), "ids": np.arange(3, dtype=np.int32)}, path)
        loaded = tp.load_safetensors(path)
        assert loaded["w"].tolist() == [[1.0, 2.0]] and loaded["ids"].dtype == tp.int32
    """
    frames = capture_user_frames()
    name = _path_argument(path, "save_safetensors")
    if not isinstance(tensors, dict):
        _raise_here(f"save_safetensors takes a dict of names to tensors, not {type(tensors).__name__}.")
    items = []
    for key, value in tensors.items():
        _check_text(key, "tensor names")
        items.append((key, (value if isinstance(value, Tensor) else Tensor(value, device="cpu"))._node))
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        _raise_here(f"save_safetensors: metadata must be a dict of strings to strings, not {type(metadata).__name__}.")
    for key, value in metadata.items():
        _check_text(key, "metadata keys")
        _check_text(value, "metadata values")
    _C.save_safetensors(name, items, list(metadata.items()), frames)


def _load_file(name, device, frames):
    items, metadata = _C.load_safetensors(name, device, frames)
    weights = _Weights((key, Tensor._wrap(node)) for key, node in items)
    weights.metadata = dict(metadata)
    return weights


def _load_directory(directory, device, frames):
    single = os.path.join(directory, os.fsencode(SINGLE_FILE))
    index = os.path.join(directory, os.fsencode(INDEX_FILE))
    if os.path.lexists(single):
        return _load_file(single, device, frames)
    if not os.path.lexists(index):
        _raise_here(f"Cannot load safetensors from the directory {quoted_path(directory)}: it holds neither {SINGLE_FILE} nor {INDEX_FILE}.")
    shards = _read_index(index)
    # Every file is checked to exist before any is loaded: a missing shard is found at once.
    for file, names in shards.items():
        if not os.path.exists(os.path.join(directory, os.fsencode(file))):
            _raise_here(
                f"The safetensors index {quoted_path(index)} puts tensor {names[0]!r} in {file!r}, which is not in the directory."
            )
    weights = _Weights()
    weights.metadata = {}
    for file, names in shards.items():
        shard = _load_file(os.path.join(directory, os.fsencode(file)), device, frames)
        listed = set(names)
        missing = [n for n in names if n not in shard]
        if missing:
            _raise_here(
                f"The safetensors index {quoted_path(index)} puts {len(missing)} tensor(s) in {file!r} that it does not "
                f"hold, the first {missing[0]!r}."
            )
        unlisted = [n for n in shard if n not in listed]
        if unlisted:
            _raise_here(
                f"{file!r} holds {len(unlisted)} tensor(s) that the safetensors index {quoted_path(index)} does not put "
                f"there, the first {unlisted[0]!r}."
            )
        weights.update(shard)
        for key, value in shard.metadata.items():
            weights.metadata.setdefault(key, value)
    return weights


def _read_index(path):
    """The index's ``weight_map`` grouped by file: ``{file: [tensor names]}`` in the index's order.
    The index is opened as the core opens checkpoints: never blocking on a FIFO, regular files only."""
    shown = quoted_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        _raise_here(f"Cannot load the safetensors index {shown}: {e.strerror}.")
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _raise_here(f"Cannot load the safetensors index {shown}: it is not a regular file.")
        data = f.read(_MAX_INDEX_BYTES + 1)
    if len(data) > _MAX_INDEX_BYTES:
        _raise_here(f"Cannot load the safetensors index {shown}: it is larger than {_MAX_INDEX_BYTES} bytes.")
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        _raise_here(f"Cannot load the safetensors index {shown}: it has the key {e.args[0]!r} twice.")
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        _raise_here(f"Cannot load the safetensors index {shown}: it is not valid JSON ({e}).")
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        _raise_here(f"Cannot load the safetensors index {shown}: it has no weight_map of tensor names to file names.")
    shards = {}
    for tensor, file in weight_map.items():
        parts = file.split("/")
        if file.startswith("/") or "\0" in file or any(p in ("", ".", "..") for p in parts):
            _raise_here(
                f"The safetensors index {shown} puts tensor {tensor!r} in {file!r}, which is not a file name inside "
                "the checkpoint's directory."
            )
        shards.setdefault(file, []).append(tensor)
    return shards


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _check_text(value, what):
    if not isinstance(value, str):
        _raise_here(f"save_safetensors: {what} must be strings, not {type(value).__name__} ({value!r}).")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _raise_here(f"save_safetensors: {what} must be valid Unicode text; {value!r} is not.")


def _path_argument(path, function):
    """The path's file-name bytes (paths.path_argument), with a TripyException, not a TypeError,
    for anything that is not a path."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        _raise_here(f"{function}: the path must be a str, bytes or os.PathLike, not {type(path).__name__}.")
    return path_argument(path, function)
