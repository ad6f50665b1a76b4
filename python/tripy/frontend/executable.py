"""``tp.Executable``: a compiled program; call it, save it, load it."""

import inspect
import os
import operator
import re

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.input_info import DimensionInputInfo, InputInfo
from tripy.frontend.mesh import DeviceMesh
from tripy.frontend.ops.misc import copy
from tripy.frontend.paths import path_argument, quoted_path
from tripy.frontend.profile import Profile
from tripy.frontend.stream import default_stream
from tripy.frontend.tensor import DimensionSize, Tensor
from tripy.logging import logger
from tripy.utils.stack_info import capture_user_frames


class _ConstructedElsewhere(property):
    """The instance's ``__signature__`` (its runtime parameters); on the class, an empty one:
    users get executables from ``tp.compile`` and ``tp.Executable.load``, never by calling the
    class, so ``inspect.signature`` and the API reference show no constructor arguments."""

    def __get__(self, instance, owner=None):
        if instance is None:
            return inspect.Signature()
        return super().__get__(instance, owner)


class Executable:
    """
    A compiled function. Call it with tensors (positionally or by parameter name), and with an
    int (or a ``tp.DimensionSize``) for each size declared with ``tp.DimensionInputInfo``; inputs
    are checked against the dtypes and ranges it was compiled for. An argument declared with
    ``tp.InputInfo(..., donate=True)`` may be updated in place (``tp.update_slice``). An executable
    compiled with several optimization profiles runs, for each call, the first profile whose ranges
    hold every argument (``optimization_profile_for`` says which).

    An executable compiled with a ``tp.DeviceMesh`` (``tp.compile(..., mesh=...)``) holds one
    program per rank of this process and runs each on its own thread, the ranks meeting at their
    collectives. Each argument is a tensor that every rank gets (a GPU tensor copied to each rank's
    GPU), or a list of ``world_size`` tensors, one per rank (its shard: a KV cache split by heads,
    each on its rank's device); a call returns the first rank's outputs (under tensor parallelism
    every rank's outputs are whole, and equal). An output passed back to a sharded call gives each
    rank of this process its own output of that call, on its GPU, without a copy. A rank that fails
    stops the others: the call raises that rank's error, naming it. Calls over one mesh from several
    threads run one at a time.
    ``save`` writes each rank of this process to a file of its own, and ``load(path, mesh=...)``
    reads them back.

    Example::

        import os, tempfile
        import tripy as tp

        exe = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((2,), dtype=tp.float32)])
        path = os.path.join(tempfile.mkdtemp(), "double.tpy")
        exe.save(path)
        assert tp.Executable.load(path)(tp.Tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
    """

    def __init__(self, impl, ranks=None, mesh=None):
        # Internal: tp.compile and Executable.load make executables (see _ConstructedElsewhere).
        # A sharded one holds the program of each rank of this process (`ranks`, impl the first).
        self._impl = impl
        self._ranks = ranks
        self._mesh = mesh
        self._names = [name for name, *_ in impl.inputs]
        # Sizes declared with tp.DimensionInputInfo: name -> (min, opt, max).
        self._sizes = {name: bounds for name, *_, bounds in impl.inputs if bounds is not None}
        self._stream = None

    @property
    def stream(self):
        """The ``tp.Stream`` a GPU executable runs on (the default stream unless set)."""
        return self._stream if self._stream is not None else default_stream()

    @stream.setter
    def stream(self, stream):
        _C.set_executable_stream(self._impl, None if stream is None else stream._impl)
        self._stream = stream

    @property
    def world_size(self):
        """The number of ranks the executable was compiled for (``tp.compile``'s mesh); 1 without one."""
        return 1 if self._mesh is None else self._mesh.size

    @property
    def input_infos(self):
        """The ``tp.InputInfo`` (``tp.DimensionInputInfo`` for a size) of each runtime input, by name.
        An executable of several optimization profiles gives those of its first profile here and
        every profile's in ``optimization_profiles``."""
        return self._infos(self._impl.inputs)

    @property
    def optimization_profiles(self):
        """One dict per optimization profile, in the order calls try them: the ``tp.InputInfo``
        (``tp.DimensionInputInfo`` for a size) of each runtime input, by name, with that profile's
        bounds. An executable compiled without ``optimization_profiles`` has one."""
        return [self._infos(self._impl.inputs_of(i)) for i in range(self._impl.num_profiles)]

    def optimization_profile_for(self, *args, **kwargs):
        """
        The number of the optimization profile that a call with these arguments runs: the first
        profile, in order, whose ranges hold every argument.

        Args:
            *args (tp.Tensor | int): The arguments, as a call takes them.
            **kwargs (tp.Tensor | int): The arguments by name.

        Returns:
            int: an index into ``optimization_profiles``.

        Raises:
            tp.TripyException: as a call does (a missing, extra or invalid argument, or sizes that no
                profile holds).
        """
        frames = capture_user_frames()
        return self._impl.select_profile(self._bind(args, kwargs, frames), frames)

    def _infos(self, inputs):
        infos = {}
        donated = set(self._impl.donated)
        for name, dtype, lo, opt, hi, bounds in inputs:
            if bounds is not None:
                infos[name] = DimensionInputInfo(value_bounds=bounds)
            else:
                infos[name] = InputInfo(shape=list(zip(lo, opt, hi)), dtype=dtypes.from_name(dtype),
                                        donate=name in donated)
        return infos

    @_ConstructedElsewhere
    def __signature__(self):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(n, kind, annotation=int if n in self._sizes else Tensor) for n in self._names]
        outs = self._impl.output_names
        ret = Tensor if outs == ["return"] else tuple
        return inspect.Signature(params, return_annotation=ret)

    def __str__(self):
        params = ", ".join(f"{n}: int" if n in self._sizes else f"{n}: tripy.Tensor" for n in self._names)
        outs = self._impl.output_names
        ret = "tripy.Tensor" if outs == ["return"] else "Tuple[" + ", ".join(["tripy.Tensor"] * len(outs)) + "]"
        return f"Executable({params}) -> {ret}"

    __repr__ = __str__

    def __call__(self, *args, **kwargs):
        frames = capture_user_frames()
        if self._ranks is not None:
            return self._call_ranks(args, kwargs, frames)
        nodes = self._bind(args, kwargs, frames)
        if logger.is_enabled("timing"):
            profile = self._profile(nodes, frames)
            logger.log("timing", lambda: f"{self}:\n{profile}")
            return profile.outputs
        return self._wrap_outputs(self._impl.run(nodes, frames))

    def profile(self, *args, **kwargs):
        """
        Runs once, like a call, timing each kernel; returns a ``tp.Profile`` (its ``outputs`` are
        what the call returns). On the GPU, kernels launch directly (no graph replay) so that CUDA
        events can sit between them.

        Args:
            *args (tp.Tensor | int): The arguments, as a call takes them.
            **kwargs (tp.Tensor | int): The arguments by name.

        Returns:
            tp.Profile: the kernels' times and the call's outputs.

        Raises:
            tp.TripyException: as a call does (a missing, extra or invalid argument).
        """
        frames = capture_user_frames()
        if self._ranks is not None:
            _C.raise_error("Profiling a sharded executable (tp.compile with a mesh) is not supported yet.", frames)
        return self._profile(self._bind(args, kwargs, frames), frames)

    def _call_ranks(self, args, kwargs, frames):
        """A call of a sharded executable: each rank's arguments (a list gives each rank its own)."""
        local = self._mesh._local_ranks()
        world = self._mesh.size

        def of_rank(value, i, name):
            if isinstance(value, (list, tuple)):
                if len(value) != world:
                    _C.raise_error(
                        f"Argument '{name}' is a list of {len(value)} values, but a per-rank argument of this executable "
                        f"holds one per rank: {world}.",
                        frames,
                    )
                return value[local[i]]
            # One GPU tensor for every rank: a rank on another GPU gets its own output of the sharded
            # call that returned the tensor (already there), or else a copy (through the host).
            there = self._mesh.devices[local[i]]
            if isinstance(value, Tensor) and value.device.kind == there.kind == "gpu" and value.device != there:
                twin = (getattr(value, "_twins", None) or {}).get(str(there))
                return twin if twin is not None else copy(value, there)
            return value

        per_rank = []
        for i in range(len(self._ranks)):
            rank_args = [of_rank(a, i, n) for a, n in zip(args, self._names)]
            rank_kwargs = {k: of_rank(v, i, k) for k, v in kwargs.items()}
            per_rank.append(self._bind(rank_args, rank_kwargs, frames, f"rank {local[i]} of {world}: "))
        if logger.is_enabled("timing"):
            logger.log("timing", lambda: f"{self}: a sharded executable's kernels are not timed yet")
        # The mesh's communicators serve one call at a time (calls from several threads wait here).
        with self._mesh._run_lock:
            outs = _C.run_ranks(self._ranks, self._mesh._communicators_of_process(), per_rank, frames)
        result = self._wrap_outputs(outs[0])
        # Where this process runs several ranks, each returned tensor keeps the other ranks' outputs
        # in its place (see of_rank).
        if len(outs) > 1:
            for j, t in enumerate(result if isinstance(result, tuple) else (result,)):
                t._twins = {str(self._mesh.devices[local[i]]): Tensor._wrap(outs[i][j]) for i in range(1, len(outs))}
        return result

    def _profile(self, nodes, frames):
        outs, kernel_ms, kernels = self._impl.profile(nodes, frames)
        return Profile(kernels, kernel_ms, self._wrap_outputs(outs))

    def _wrap_outputs(self, nodes):
        outs = [Tensor._wrap(node) for node in nodes]
        return outs[0] if self._impl.output_names == ["return"] else tuple(outs)

    def _bind(self, args, kwargs, frames, who=""):
        """The runtime-input nodes for a call's arguments, checked by name and count (``who``: the
        rank whose arguments these are, before the message on a value, in a sharded call)."""
        if len(args) > len(self._names):
            _C.raise_error(f"This executable takes {len(self._names)} argument(s) ({', '.join(self._names)}), but {len(args)} were given.", frames)
        bound = dict(zip(self._names, args))
        for k, v in kwargs.items():
            if k not in self._names:
                _C.raise_error(f"Unexpected argument '{k}': this executable's arguments are: {', '.join(self._names)}.", frames)
            if k in bound:
                _C.raise_error(f"Argument '{k}' was given twice.", frames)
            bound[k] = v
        missing = [n for n in self._names if n not in bound]
        if missing:
            _C.raise_error(f"Missing argument(s): {', '.join(repr(m) for m in missing)}.", frames)
        nodes = []
        for n in self._names:
            v = bound[n]
            if n in self._sizes:
                nodes.append(self._size_node(n, v, frames, who))
                continue
            if not isinstance(v, Tensor):
                if isinstance(v, (list, tuple)) and v and all(isinstance(t, Tensor) for t in v) and self._ranks is None:
                    _C.raise_error(
                        f"Argument '{n}' is a {type(v).__name__}: a list of one tensor per rank is an argument of an "
                        "executable compiled with a tp.DeviceMesh, and this one has one rank: pass a tripy.Tensor.",
                        frames,
                    )
                _C.raise_error(who + f"Argument '{n}' must be a tripy.Tensor, but got: {type(v).__name__}.", frames)
            nodes.append(v._node)
        return nodes

    def _size_node(self, name, arg, frames, who=""):
        """A size argument as the runtime takes it: a 0-d int64 tensor in host memory (only the
        shape program reads it, whatever device the executable runs on). The runtime checks its range."""
        value = None
        if isinstance(arg, DimensionSize):
            value = int(arg)
        elif not isinstance(arg, (bool, Tensor)):
            try:
                value = operator.index(arg)
            except TypeError:
                pass
        if value is None:
            _C.raise_error(
                who + f"Argument '{name}' must be an int or a tp.DimensionSize, but got: {type(arg).__name__}.", frames
            )
        if not -(2**63) <= value < 2**63:
            lo, _, hi = self._sizes[name]
            _C.raise_error(
                who + f"Argument '{name}' has value {value}, which is outside the range [{lo}, {hi}] this executable was "
                "compiled for.",
                frames,
            )
        return _C.from_list(value, "int64", "cpu", frames)

    def save(self, path):
        """Writes the executable to one file at ``path`` (any name), making missing parent
        directories as nvtripy does. Only a regular file is replaced (a symbolic link, FIFO or
        directory at ``path`` is refused), and the file is written whole or not at all.

        Args:
            path (str | os.PathLike): The file to write.

        Raises:
            tp.TripyException: if the file or its directory cannot be written, or ``path`` names
                something other than a regular file.
            TypeError: if ``path`` is not a path.
        """
        path = path_argument(path, "Executable.save")
        parent = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            _raise_here(f"Cannot save the executable to {quoted_path(path)}: cannot make its directory ({e.strerror}).")
        frames = capture_user_frames()
        if self._ranks is None:
            self._impl.save(path, frames)
            return
        for rank, impl in zip(self._mesh._local_ranks(), self._ranks):
            impl.save(_rank_path(path, rank, self._mesh.size), frames)

    @staticmethod
    def load(path, mesh=None):
        """Loads an executable saved with ``save``; a corrupt file, or one that is not a regular
        file (a FIFO, a directory), raises TripyException. A sharded executable is loaded with the
        mesh it runs on (``mesh``): each rank of this process from its own file, saved for a mesh
        of the same size and kind of device.

        Args:
            path (str | os.PathLike): The path given to ``save`` (for a sharded executable, without
                the ``.rank<r>-of-<n>`` that ``save`` put in each rank's file name).
            mesh (tp.DeviceMesh | None): The mesh of a sharded executable; None for one of one rank.

        Returns:
            tp.Executable: the executable, ready to call.

        Raises:
            tp.TripyException: if the file cannot be read, is not a regular file, is corrupt, or was
                written by another format version; or if ``mesh`` is missing for a sharded
                executable, given for one of one rank, or of another size or kind of device than the
                one the files were saved for.
            TypeError: if ``path`` is not a path.
        """
        path = path_argument(path, "Executable.load")
        frames = capture_user_frames()
        if mesh is None:
            if not os.path.lexists(path):
                saved = _saved_worlds(path)
                if saved:
                    _raise_here(
                        f"No executable is saved at {quoted_path(path)}, but a sharded one is, one file per rank, for a "
                        f"mesh of {' and of '.join(str(n) for n in saved)} ranks: load it with tp.Executable.load(path, "
                        "mesh=...)."
                    )
            impl = _C.Executable.load(path, frames)
            world = impl.collective_world_size
            if world is not None:
                _raise_here(
                    f"{quoted_path(path)} holds one rank of an executable sharded over {world} ranks: load the "
                    f"executable with tp.Executable.load(path, mesh=...), path being the one given to save."
                )
            return Executable(impl)
        if not isinstance(mesh, DeviceMesh):
            _raise_here(f"mesh must be a tp.DeviceMesh or None, but got: {mesh!r}.")
        saved = _saved_worlds(path)
        if saved and mesh.size not in saved:
            _raise_here(
                f"The executable at {quoted_path(path)} was saved for a mesh of {' and of '.join(str(n) for n in saved)} "
                f"ranks, but this mesh has {mesh.size}."
            )
        if not saved and os.path.lexists(path):
            _raise_here(
                f"{quoted_path(path)} holds an executable of one rank, not one sharded over a mesh: load it without mesh."
            )
        ranks = []
        for rank in mesh._local_ranks():
            rank_path = _rank_path(path, rank, mesh.size)
            impl = _C.Executable.load(rank_path, frames)
            world = impl.collective_world_size
            if world is not None and world != mesh.size:
                _raise_here(
                    f"{quoted_path(rank_path)} holds a rank of an executable sharded over {world} ranks, but this mesh "
                    f"has {mesh.size}."
                )
            device = mesh.devices[rank]
            if _C.parse_device(impl.device)[0] != device.kind:
                _raise_here(
                    f"{quoted_path(rank_path)} was compiled for {impl.device}, but rank {rank} of this mesh is {device}."
                )
            ranks.append(impl)
        return Executable(ranks[0], ranks=ranks, mesh=mesh)


def _rank_path(path, rank, world):
    """The file of one rank of a sharded executable saved at ``path`` (bytes, as path_argument
    gives it): ``model.rank0-of-2.tpy``."""
    root, ext = os.path.splitext(path)
    return root + b".rank%d-of-%d" % (rank, world) + ext


def _saved_worlds(path):
    """The mesh sizes for which some rank of a sharded executable is saved at ``path`` (bytes)."""
    root, ext = os.path.splitext(path)
    folder, stem = os.path.split(root)
    pattern = re.compile(re.escape(stem) + rb"\.rank(\d+)-of-(\d+)" + re.escape(ext) + b"$")
    try:
        names = os.listdir(folder or b".")
    except OSError:
        return []
    return sorted({int(m.group(2)) for m in map(pattern.match, names) if m and int(m.group(1)) < int(m.group(2))})
