"""Tensor parallelism: ``tp.DeviceMesh`` (the ranks a sharded executable runs on), the sharding
specs that ``tp.Linear`` and ``tp.Embedding`` take (``tp.ColumnParallel``, ``tp.RowParallel``), and
the rank being traced (``tp.current_rank``, ``tp.world_size``).

``tp.compile(..., mesh=mesh)`` traces the function once per rank with that rank current, so a
sharded layer takes its rank's share of its parameters and inserts the collectives its output
needs (``tp.all_reduce``, ``tp.all_gather``); each rank's program is compiled on its own.
Outside a sharded compile every layer is whole and every collective is its input.
"""

import os
import socket
import struct
import sys
import threading
import time

from tripy import _C
from tripy.frontend.device import device as _device
from tripy.frontend.errors import _raise_here

_tracing = threading.local()


def current_rank():
    """
    The rank that ``tp.compile(..., mesh=...)`` is tracing the function for: 0 to
    ``tp.world_size() - 1``; 0 outside a sharded compile. Sharded layers written by hand use it
    to take their rank's share of a parameter.

    Returns:
        int: the rank.

    Example::

        import tripy as tp

        assert (tp.current_rank(), tp.world_size()) == (0, 1)  # not inside a sharded compile
    """
    return getattr(_tracing, "rank", (0, 1))[0]


def world_size():
    """
    How many ranks ``tp.compile(..., mesh=...)`` is tracing the function for (the mesh's size);
    1 outside a sharded compile. A layer split by attention heads keeps
    ``num_heads // tp.world_size()`` of them on each rank.

    Returns:
        int: the number of ranks.

    Example::

        import tripy as tp

        heads = 8
        assert heads // tp.world_size() == 8
    """
    return getattr(_tracing, "rank", (0, 1))[1]


class _TracingRank:
    """The rank a sharded compile traces for, while the ``with`` block runs."""

    def __init__(self, rank, world):
        self.rank = (rank, world)

    def __enter__(self):
        self.previous = getattr(_tracing, "rank", (0, 1))
        _tracing.rank = self.rank

    def __exit__(self, *exc):
        _tracing.rank = self.previous


def _local_nccl():
    """pip's nvidia-nccl-cu13 (or -cu12) library, where NCCL is not found otherwise."""
    for base in sys.path:
        path = os.path.join(base, "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.isfile(path):
            return path
    return None


class DeviceMesh:
    """
    The devices a sharded executable runs on, one rank each: ``tp.compile(func, ..., mesh=mesh)``
    compiles ``func`` once per rank (its sharded layers taking that rank's share of their
    parameters) and the executable runs every rank of this process on its own thread, the ranks
    exchanging data through collectives (``tp.all_reduce``, ``tp.all_gather``): in host memory on
    the CPU, through NCCL on GPUs.

    ``tp.DeviceMesh(["cpu"] * 4)`` is four CPU ranks in this process (the CPU's collectives run in
    shared memory, so a sharded model can be checked on any machine).
    ``tp.DeviceMesh(["gpu:0", "gpu:1"])`` is two GPUs driven by this process, a thread each.
    ``tp.DeviceMesh.from_environment()`` is one rank per process on GPUs, as ``torchrun`` starts
    them (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``): each process
    compiles and runs its own rank on GPU ``LOCAL_RANK``.

    Args:
        devices (Sequence[str | tp.device]): One device per rank, all of one kind. The CPU may
            appear several times, a GPU once.

    Raises:
        tp.TripyException: if ``devices`` is empty, mixes kinds, names a GPU twice or holds more
            than 1024 ranks.

    Example::

        import numpy as np
        import tripy as tp

        class MLP(tp.Module):
            def __init__(self):
                super().__init__()
                self.up = tp.Linear(4, 8, parallel=tp.ColumnParallel())
                self.down = tp.Linear(8, 4, parallel=tp.RowParallel())

            def forward(self, x):
                return self.down(tp.relu(self.up(x)))

        mlp = MLP()
        x = tp.Tensor(np.ones((2, 4), dtype=np.float32), device="cpu")
        args = [tp.InputInfo((2, 4), dtype=tp.float32)]
        whole = tp.compile(mlp, args=args, mesh=tp.DeviceMesh(["cpu"]))  # one CPU rank: every layer whole
        sharded = tp.compile(mlp, args=args, mesh=tp.DeviceMesh(["cpu"] * 2))
        assert sharded.world_size == 2
        assert np.allclose(np.asarray(sharded(x)), np.asarray(whole(x)))
    """

    def __init__(self, devices):
        devices = [_device(d) for d in devices] if isinstance(devices, (list, tuple)) else None
        if not devices:
            _raise_here("A tp.DeviceMesh needs a non-empty list of devices, one per rank (e.g. [\"cpu\"] * 2).")
        if len(devices) > 1024:
            _raise_here(f"A tp.DeviceMesh holds at most 1024 ranks, but got {len(devices)}.")
        kinds = {d.kind for d in devices}
        if len(kinds) > 1:
            _raise_here(f"A tp.DeviceMesh's devices must be of one kind, but got: {', '.join(str(d) for d in devices)}.")
        if devices[0].kind == "gpu" and len(set(devices)) != len(devices):
            _raise_here(f"A tp.DeviceMesh names each GPU once, but got: {', '.join(str(d) for d in devices)}.")
        self.devices = devices
        self._rank = None  # this process's only rank (from_environment), or None: every rank is here
        self._communicators = None
        # One sharded call at a time over these communicators: two calls' collectives would meet.
        self._run_lock = threading.Lock()

    @classmethod
    def from_environment(cls):
        """
        The mesh of a job that ``torchrun`` (or any launcher setting the same variables) started:
        ``WORLD_SIZE`` processes, this one rank ``RANK``, on GPU ``LOCAL_RANK`` of its host. The
        ranks meet through NCCL; rank 0 hands NCCL's unique id to the others over a socket at
        ``MASTER_ADDR``, port ``MASTER_PORT + 1`` (``TRIPY_BOOTSTRAP_PORT`` overrides it).

        Returns:
            tp.DeviceMesh: of ``WORLD_SIZE`` GPUs, this process holding rank ``RANK``.

        Raises:
            tp.TripyException: if a variable is missing or out of range.
        """
        values = {}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            text = os.environ.get(name)
            if text is None or not text.strip().isdigit():
                _raise_here(
                    f"tp.DeviceMesh.from_environment needs {name} set to a number (torchrun sets RANK, WORLD_SIZE "
                    f"and LOCAL_RANK), but it is {text!r}."
                )
            values[name] = int(text)
        rank, world, local = values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"]
        if not 0 <= rank < world or world > 1024:
            _raise_here(f"RANK ({rank}) must be in [0, WORLD_SIZE) and WORLD_SIZE ({world}) at most 1024.")
        mesh = cls.__new__(cls)
        # The CUDA backend of this process drives GPU LOCAL_RANK (its "gpu").
        mesh.devices = [_device("gpu")] * world
        mesh.local_rank = local
        mesh._rank = rank
        mesh._communicators = None
        mesh._run_lock = threading.Lock()
        return mesh

    @property
    def size(self):
        """The number of ranks."""
        return len(self.devices)

    def __repr__(self):
        where = "" if self._rank is None else f", this process: rank {self._rank}"
        return f"DeviceMesh([{', '.join(repr(str(d)) for d in self.devices)}]{where})"

    def _local_ranks(self):
        """The ranks this process runs: all of them, or its one."""
        return list(range(self.size)) if self._rank is None else [self._rank]

    def _kind(self):
        return self.devices[0].kind

    def _communicators_of_process(self):
        """This process's ranks' communicators (made once, the first time an executable runs)."""
        if self._communicators is None:
            if self._kind() == "gpu" and "TRIPY_NCCL_LIBRARY" not in os.environ and _local_nccl():
                os.environ["TRIPY_NCCL_LIBRARY"] = _local_nccl()
            if self._rank is None:
                self._communicators = _C.create_communicators([str(d) for d in self.devices])
            else:
                unique_id = _exchange_unique_id(self._rank, self.size)
                self._communicators = _C.join_communicator(self._kind(), unique_id, self._rank, self.size)
        return self._communicators


def _exchange_unique_id(rank, world):
    """NCCL's unique id, made by rank 0 and sent to every other rank over TCP (stdlib sockets)."""
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("TRIPY_BOOTSTRAP_PORT", int(os.environ.get("MASTER_PORT", "29500")) + 1))
    if rank == 0:
        unique_id = _C.communicator_unique_id("gpu")
        with socket.create_server(("", port), reuse_port=False) as server:
            server.settimeout(300)
            for _ in range(world - 1):
                conn, _ = server.accept()
                with conn:
                    conn.sendall(struct.pack("!I", len(unique_id)) + unique_id)
        return unique_id
    deadline = time.monotonic() + 300
    while True:
        try:
            with socket.create_connection((host, port), timeout=10) as conn:
                data = b""
                while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                return data[4:]
        except OSError:
            if time.monotonic() > deadline:
                _raise_here(f"Rank {rank} could not reach rank 0 at {host}:{port} for NCCL's unique id within 300 s.")
            time.sleep(0.2)


class ColumnParallel:
    """
    Shards a layer's output features over the ranks of a ``tp.DeviceMesh`` (Megatron's
    column-parallel form): ``tp.Linear(..., parallel=tp.ColumnParallel())`` gives each rank
    ``out_features / world_size`` rows of the weight (and of the bias), so each rank computes its
    share of the output; ``tp.Embedding(..., parallel=tp.ColumnParallel())`` gives each rank its
    share of the embedding dim. Outside a sharded compile the layer is whole.

    Args:
        parts (Sequence[int] | None): The output features as consecutive parts that are split
            separately (each evenly over the ranks, rank r taking its share of each part, in
            order): a stacked projection such as q, k and v in one weight. None: one part.
        gather_output (bool): All-gather the ranks' shares along the last dim, so every rank
            holds the whole output (a model's output head). With several parts the gathered output
            is the ranks' shares in rank order, not the parts' order, so it needs one part.

    Raises:
        tp.TripyException: if a part is not a positive int, or ``gather_output`` is combined with
            several parts.

    Example::

        import tripy as tp

        qkv = tp.Linear(16, 48, parallel=tp.ColumnParallel(parts=(16, 16, 16)))
        assert qkv(tp.ones((1, 16))).shape == (1, 48)  # whole outside a sharded compile
    """

    def __init__(self, parts=None, gather_output=False):
        if parts is not None:
            parts = tuple(parts)
            if not parts or any(isinstance(p, bool) or not isinstance(p, int) or p <= 0 for p in parts):
                _raise_here(f"ColumnParallel's parts must be positive ints, but got: {parts!r}.")
            if gather_output and len(parts) > 1:
                _raise_here("ColumnParallel(gather_output=True) needs one part: gathered shares of several parts would interleave them.")
        self.parts = parts
        self.gather_output = bool(gather_output)

    def __repr__(self):
        return f"ColumnParallel(parts={self.parts!r}, gather_output={self.gather_output})"

    def _check(self, total, what):
        if self.parts is not None and sum(self.parts) != total:
            _raise_here(f"{what}'s ColumnParallel parts {self.parts} add up to {sum(self.parts)}, not {total}.")

    def _ranges(self, total, rank, world, what):
        """(start, stop) of each of this rank's pieces along the split dim of size ``total``."""
        out, start = [], 0
        for part in self.parts or (total,):
            if part % world:
                _raise_here(
                    f"{what} cannot be split over {world} ranks: its {'part of ' if self.parts else ''}"
                    f"{part} features is not a multiple of {world}."
                )
            share = part // world
            out.append((start + rank * share, start + (rank + 1) * share))
            start += part
        return out


class RowParallel:
    """
    Shards a layer's input features over the ranks of a ``tp.DeviceMesh`` (Megatron's row-parallel
    form): ``tp.Linear(..., parallel=tp.RowParallel())`` takes each rank's share of the input
    features (what a ``tp.ColumnParallel`` layer before it computes) and gives each rank those
    columns of the weight; the ranks' partial products are summed by an all-reduce, then the bias
    is added once. ``tp.Embedding(..., parallel=tp.RowParallel())`` splits the table's rows (the
    vocabulary): each rank looks up the indices in its range, zero elsewhere, and the all-reduce
    sums them. Outside a sharded compile the layer is whole.

    Example::

        import tripy as tp

        down = tp.Linear(8, 4, parallel=tp.RowParallel())
        assert down(tp.ones((1, 8))).shape == (1, 4)
    """

    def __repr__(self):
        return "RowParallel()"

    def _range(self, total, rank, world, what):
        if total % world:
            _raise_here(f"{what} cannot be split over {world} ranks: its {total} features are not a multiple of {world}.")
        share = total // world
        return rank * share, (rank + 1) * share


def check_whole_groups(what, total, world, group):
    """Every rank's row-parallel share of ``total`` input features holds whole quantization groups
    of ``group`` features; else an error at the user's line naming ``what``."""
    share = total // world
    if share % group:
        _raise_here(
            f"{what}: a row-parallel Linear over {world} ranks gives each rank {share} of its {total} input features, "
            f"which splits its quantization groups of {group}: each rank's share must hold whole groups (a mesh "
            f"whose shares are a multiple of {group} features loads it)."
        )


def check_parallel(parallel, what):
    """``parallel`` as a layer takes it: None, a tp.ColumnParallel or a tp.RowParallel."""
    if parallel is not None and not isinstance(parallel, (ColumnParallel, RowParallel)):
        _raise_here(f"{what}'s parallel must be None, tp.ColumnParallel(...) or tp.RowParallel(), but got: {parallel!r}.")
    return parallel


class RankShares:
    """
    A sharded layer's parameters held as each rank's share (a sharded ``tp.llm.load``): rank ->
    {parameter name: that rank's share}, for the ranks of this process only, so a process of
    ``torchrun`` holds its rank's share alone. The layer's whole parameters are then absent, and it
    runs only in a compile over a mesh of ``world`` ranks, where each rank's program reads its
    share as it is (no slicing of a whole weight). Not a dict, so ``state_dict`` does not list it.
    """

    def __init__(self, world):
        self.world = world
        self._by_rank = {}

    def set(self, rank, params):
        self._by_rank[rank] = dict(params)

    def ranks(self):
        return sorted(self._by_rank)

    def __getitem__(self, rank):
        return self._by_rank[rank]

    def of(self, rank, world, what):
        """The share of ``rank`` in a compile over ``world`` ranks; a clear error for another mesh."""
        if world != self.world or rank not in self._by_rank:
            held = ", ".join(map(str, self.ranks())) or "none"
            _raise_here(
                f"This {what} was loaded as the shares of ranks {held} of a mesh of {self.world}, so it runs only in a "
                f"compile over a mesh of {self.world} ranks from this process, not rank {rank} of {world}."
            )
        return self._by_rank[rank]
