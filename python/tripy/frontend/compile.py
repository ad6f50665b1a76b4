"""``tp.compile``: trace a function with InputInfo placeholders and build an Executable."""

import concurrent.futures
import inspect
import time

from tripy import _C
from tripy.exception import TripyException
from tripy.frontend.device import default_device, device as _device, placing_on
from tripy.frontend.executable import Executable
from tripy.frontend.input_info import DimensionInputInfo, InputInfo, NamedDimension
from tripy.frontend.mesh import DeviceMesh, _TracingRank
from tripy.frontend.module import Module, _parameter_slots, known_parameters
from tripy.frontend.ops.misc import copy
from tripy.frontend.tensor import Tensor
from tripy.logging import FLAGS, STAGE_FLAGS, logger
from tripy.utils.stack_info import capture_user_frames


def _signature_of(func):
    """The parameters a user sees: a Module's own __call__, or its forward when it defines that."""
    target = func
    if isinstance(func, Module) and type(func).__call__ is Module.__call__ and hasattr(func, "forward"):
        target = func.forward
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


class _Inputs:
    """Turns InputInfos and DimensionInputInfos (possibly nested in containers) into runtime-input
    tensors and DimensionSizes."""

    def __init__(self, frames, profile=None, device=None):
        # An optimization profile's bounds for named dimensions: name -> (min, opt, max).
        self.profile = profile or {}
        self.symbols = _C.symbol_table()
        self.named = {}
        self.nodes = []
        self.names = []
        self.donated = []  # input numbers declared with InputInfo(donate=True)
        self.frames = frames
        self.device = device or str(default_device())

    def _dim(self, name, index, bounds, dim_name):
        lo, opt, hi = self.profile.get(dim_name, bounds)
        # A size the bounds fix (named or not, in a profile or not) is compiled as a constant:
        # kernels specialise on it.
        if lo == hi:
            return (False, lo)
        if dim_name is not None:
            if dim_name not in self.named:
                self.named[dim_name] = self.symbols.add(dim_name, lo, opt, hi)
            return (True, self.named[dim_name])
        return (True, self.symbols.add(f"{name}.shape[{index}]", lo, opt, hi))

    def replace(self, value, name):
        if isinstance(value, DimensionInputInfo):
            # A new symbol whose value the executable reads from this argument at run time.
            symbol = self.symbols.add(name, *value.value_bounds._per_dim()[0])
            node = _C.shape_input_node(len(self.nodes), name, symbol, self.device, self.symbols, self.frames)
            self.nodes.append(node)
            self.names.append(name)
            return Tensor._wrap(node)
        if isinstance(value, InputInfo):
            dims = [
                self._dim(name, i, bounds, value.dimension_names.get(i))
                for i, bounds in enumerate(value.shape_bounds._per_dim())
            ]
            if value.donate:
                self.donated.append(len(self.nodes))
            node = _C.input_node(
                len(self.nodes), name, value.dtype.name, dims, self.device, self.symbols, self.frames
            )
            self.nodes.append(node)
            self.names.append(name)
            return Tensor._wrap(node)
        if isinstance(value, (list, tuple)):
            out = [self.replace(v, f"{name}[{i}]") for i, v in enumerate(value)]
            return type(value)(out) if isinstance(value, tuple) else out
        if isinstance(value, dict):
            return {k: self.replace(v, f"{name}[{k!r}]") for k, v in value.items()}
        return value


def _freeze_parameters(func, outputs):
    """Evaluates, once, every module parameter the traced graph reads and that is still to be
    computed (a fresh module's placeholders, a loaded value built by ops), so that the executable
    holds it as a constant rather than recomputing it in every call: a module's parameters are
    constants at compile time whether or not ``load_state_dict`` was called. The parameters of
    modules reached through a closure count as much as those of ``func`` itself. On the CPU where
    they read no device values (a causal mask): a device kernel compiled for one value would cost
    more."""
    pending = set(_C.pending_constant_ids([o._node for o in outputs]))
    if not pending:
        return
    params = known_parameters()
    if isinstance(func, Module):  # also a tensor put in a list after the list was assigned
        params += list(func.state_dict().values())
    for param in params:
        if param._node.id in pending:
            pending.discard(param._node.id)
            _C.evaluate(param._node, parameter=True)


def _named_dimensions(value, found):
    """The names of the tp.NamedDimensions of the InputInfos in ``value`` (nested containers too)."""
    if isinstance(value, InputInfo):
        found.update(value.dimension_names.values())
    elif isinstance(value, (list, tuple)):
        for v in value:
            _named_dimensions(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _named_dimensions(v, found)
    return found


def _checked_profiles(profiles, args, kwargs, frames):
    """``optimization_profiles`` as a list of {name: (min, opt, max)}, one per profile (``[None]``
    without profiles: the bounds in ``args`` and ``kwargs`` alone)."""
    if profiles is None:
        return [None]
    if not isinstance(profiles, (list, tuple)) or not profiles:
        _C.raise_error(
            "optimization_profiles must be a non-empty list of profiles, each a list of tp.NamedDimension, "
            f"but got: {profiles!r}.",
            frames,
        )
    declared = _named_dimensions([args, kwargs], set())
    known = ", ".join(repr(n) for n in sorted(declared)) or "none"
    out = []
    for i, profile in enumerate(profiles):
        if not isinstance(profile, (list, tuple)):
            _C.raise_error(
                f"Optimization profile {i} must be a list of tp.NamedDimension, but got: {profile!r}.", frames
            )
        bounds = {}
        for dim in profile:
            if not isinstance(dim, NamedDimension):
                _C.raise_error(
                    f"Optimization profile {i} must be a list of tp.NamedDimension, but it holds: {dim!r}.", frames
                )
            if dim.name in bounds:
                _C.raise_error(f"Optimization profile {i} gives the dimension '{dim.name}' twice.", frames)
            if dim.name not in declared:
                _C.raise_error(
                    f"Optimization profile {i} gives bounds for the dimension '{dim.name}', which no input declares "
                    f"(the inputs' tp.NamedDimensions are: {known}).",
                    frames,
                )
            bounds[dim.name] = dim.bounds
        out.append(bounds)
    return out


def compile(func, optimization_level=3, *, args=[], kwargs={}, optimization_profiles=None, mesh=None):
    """
    Compiles ``func`` (a function or a ``tp.Module``) into a ``tp.Executable``.

    Each ``tp.InputInfo`` in ``args``/``kwargs`` (also inside lists, tuples and dicts) becomes a
    runtime input; every other argument, and every tensor the function uses, is frozen into the
    executable as a constant. Each ``tp.DimensionInputInfo`` becomes a runtime size: the function
    receives a ``tp.DimensionSize`` that shapes may use, and the executable takes an int for it.
    The function must return one tensor or a tuple of tensors. With no runtime inputs at all,
    the executable takes no arguments and returns the frozen result. An input declared with
    ``tp.InputInfo(..., donate=True)`` may be updated in place by ``tp.update_slice``
    (see there: a KV cache that a decode step writes one row of).

    Args:
        func (Callable | tp.Module): The function to compile. It must be pure (its result depends
            only on its arguments and the tensors it reads) and return a ``tp.Tensor`` or a tuple of
            them.
        optimization_level (int): From 0 to 5, how much work the compiler does for speed.
            0 skips the optimizing passes (constant folding, common-subexpression elimination,
            attention matching, GEMM rewrites) and, on the GPU, the timing of GEMM and convolution
            algorithms: the quickest build, for debugging. 1 and above run every pass and, on the
            GPU, time the candidate algorithms of each GEMM and convolution at the ``opt`` shapes;
            levels 1 to 5 currently do the same (the range is nvtripy's). The default, 3, is what
            deployments use.
        args (Sequence): The positional arguments to trace ``func`` with: ``tp.InputInfo`` and
            ``tp.DimensionInputInfo`` become runtime inputs; anything else is a constant.
        kwargs (dict[str, Any]): The keyword arguments, likewise.
        optimization_profiles (Sequence[Sequence[tp.NamedDimension]] | None): Several optimization
            profiles in one executable, as TensorRT has them: each profile lists
            ``tp.NamedDimension`` values that replace, for that profile, the bounds of the input
            dimensions of those names (dimensions it does not list keep the bounds in ``args`` and
            ``kwargs``). ``func`` is compiled once per profile, for that profile's ranges and tuned
            for its ``opt`` sizes (a dimension whose ``min`` equals its ``max`` in a profile is a
            constant there, as everywhere). A call runs the first profile, in the order given, whose ranges hold
            every argument; a call that none holds raises an error listing each profile's ranges.
            ``None`` (the default): one profile, the bounds in ``args`` and ``kwargs``.
        mesh (tp.DeviceMesh | None): Shards the function over the mesh's ranks (tensor
            parallelism): ``func`` is traced and compiled once per rank of this process, with
            ``tp.current_rank()`` and ``tp.world_size()`` saying which, so that layers built with
            ``parallel=tp.ColumnParallel(...)`` or ``tp.RowParallel()`` take that rank's share of
            their parameters and insert the collectives between the ranks. Each rank's program runs
            on its own thread (see ``tp.Executable``). ``None``: one program, on the default device.
            While ``func`` is traced for a device (the default one, or a rank's), the tensors it
            makes without naming a device (``tp.ones``, ``tp.iota``, ``tp.Tensor(...)``) are placed
            on that device.

    Returns:
        tp.Executable: the compiled function; its parameters are the runtime inputs, named after
        ``func``'s parameters.

    Raises:
        tp.TripyException: if ``func`` is not callable, ``optimization_level`` is not an int in
            ``[0, 5]``, the arguments do not fit ``func``'s signature, ``func`` reads the value of a
            runtime input (a Python ``if`` on a tensor: use ``tp.where``), returns something other
            than tensors, or an op in it fails its checks; or if ``optimization_profiles`` is not
            a non-empty list of lists of ``tp.NamedDimension``, or names a dimension that no input
            declares; or if ``mesh`` is not a ``tp.DeviceMesh``, or a layer cannot be split over it.

    Example::

        import tripy as tp

        def add_one(x):
            return x + 1.0

        exe = tp.compile(add_one, args=[tp.InputInfo(((1, 2, 4),), dtype=tp.float32)])
        assert exe(tp.Tensor([1.0, 2.0, 3.0])).tolist() == [2.0, 3.0, 4.0]

        def first_rows(x, n):
            return x[:n] * 2.0

        exe = tp.compile(
            first_rows, args=[tp.InputInfo((8, 2), dtype=tp.float32), tp.DimensionInputInfo(value_bounds=(1, 4, 8))]
        )
        assert exe(tp.ones((8, 2)), 3).shape == (3, 2)

        # Two optimization profiles: short sequences (tuned for 16) and long ones (tuned for 512).
        seq = tp.NamedDimension("seq", 1, 16, 512)
        exe = tp.compile(
            add_one,
            args=[tp.InputInfo((seq,), dtype=tp.float32)],
            optimization_profiles=[[tp.NamedDimension("seq", 1, 16, 64)], [tp.NamedDimension("seq", 65, 512, 512)]],
        )
        assert exe.optimization_profile_for(tp.ones((100,))) == 1
        assert exe(tp.ones((100,))).tolist() == [2.0] * 100
    """
    return _traced(func, optimization_level, args, kwargs, optimization_profiles, mesh, capture_user_frames())()


def _traced(func, optimization_level, args, kwargs, optimization_profiles, mesh, frames):
    """``tp.compile``'s work up to the compiler: checks the arguments and traces ``func`` here, and
    returns what finishes the compile (the compiler, which runs without the GIL, and the
    executable). Under a mesh each rank is traced and compiled in turn, before this returns."""
    if not callable(func):
        _C.raise_error(f"tp.compile expects a function or a tp.Module, but got: {func!r}.", frames)
    if not isinstance(optimization_level, int) or not 0 <= optimization_level <= 5:
        _C.raise_error(f"optimization_level must be an int in [0, 5], but got: {optimization_level!r}.", frames)
    profiles = _checked_profiles(optimization_profiles, args, kwargs, frames)
    if mesh is not None and not isinstance(mesh, DeviceMesh):
        _C.raise_error(f"mesh must be a tp.DeviceMesh or None, but got: {mesh!r}.", frames)
    sig = _signature_of(func)
    params = list(sig.parameters) if sig is not None else []

    def traced_rank(device):
        pending = [_traced_profile(func, sig, params, args, kwargs, optimization_level, profile, frames,
                                   None if len(profiles) == 1 else i, device)
                   for i, profile in enumerate(profiles)]

        def compiled():
            impls = [compile_profile() for compile_profile in pending]
            return impls[0] if len(impls) == 1 else _C.combine_profiles(impls)

        return compiled

    if mesh is None:
        compile_rank = traced_rank(None)
        return lambda: Executable(compile_rank())
    ranks = []
    for rank in mesh._local_ranks():
        with _TracingRank(rank, mesh.size), _ParametersOn(func, str(mesh.devices[rank])):
            ranks.append(traced_rank(str(mesh.devices[rank]))())
    executable = Executable(ranks[0], ranks=ranks, mesh=mesh)
    return lambda: executable


def _compile_together(calls):
    """The executables of several ``tp.compile`` calls, each given as ``(func, kwargs)``: all traced
    here in turn (so an error in one names the caller's line, as tp.compile's would), then compiled
    at once on as many threads, whose compiles overlap (a prefill and a decode step: on a GPU, their
    NVRTC work)."""
    frames = capture_user_frames()
    pending = []
    for func, kw in calls:
        call = inspect.signature(compile).bind(func, **kw)  # tp.compile's own defaults
        call.apply_defaults()
        a = call.arguments
        pending.append(_traced(func, a["optimization_level"], a["args"], a["kwargs"], a["optimization_profiles"],
                               a["mesh"], frames))
    if len(pending) == 1:
        return [pending[0]()]
    with concurrent.futures.ThreadPoolExecutor(len(pending)) as pool:
        futures = [pool.submit(finish) for finish in pending]
        return [f.result() for f in futures]


def _modules_reached(func):
    """The modules ``func`` computes with: itself, or those it closes over, is bound to or names as
    globals (a step function over a model)."""
    if isinstance(func, Module):
        return [func]
    found = []

    def add(value):
        if isinstance(value, Module) and all(value is not m for m in found):
            found.append(value)

    add(getattr(func, "__self__", None))
    for cell in getattr(func, "__closure__", None) or ():
        try:
            add(cell.cell_contents)
        except ValueError:  # a cell not yet filled
            pass
    code, names = getattr(func, "__code__", None), getattr(func, "__globals__", {})
    for name in code.co_names if code is not None else ():
        add(names.get(name))
    return found


class _ParametersOn:
    """While a mesh rank is traced, the parameters of the modules it computes with that live on
    another device than the rank's (a model made or loaded on the GPU, compiled for a mesh of CPU
    ranks or for another GPU) are read as copies on the rank's device, each rank's program taking
    its share from them; the modules get their own tensors back afterwards. A sharded load's layers
    hold no whole parameters (``load_share``), so nothing of theirs is copied."""

    def __init__(self, func, device):
        self.func, self.device, self.swapped = func, device, []

    @staticmethod
    def _put(holder, key, value):
        if isinstance(holder, (list, dict)):
            holder[key] = value
        else:
            object.__setattr__(holder, key, value)

    def __enter__(self):
        seen = set()
        slots = [slot for module in _modules_reached(self.func) for slot in _parameter_slots(module).values()]
        for holder, key, value in slots:
            if isinstance(holder, tuple) or str(value.device) == self.device or (id(holder), key) in seen:
                continue
            seen.add((id(holder), key))
            value.eval()  # a placeholder: the compile would freeze it as a constant anyway
            moved = copy(value, _device(self.device))
            moved.eval()
            self._put(holder, key, moved)
            self.swapped.append((holder, key, value))
        return self

    def __exit__(self, *exc):
        for holder, key, value in reversed(self.swapped):
            self._put(holder, key, value)
        self.swapped = []


def _traced_profile(func, sig, params, args, kwargs, optimization_level, profile, frames, number, device=None):
    """Traces ``func`` with the bounds of one optimization profile for ``device`` (None: the
    default) and returns what compiles it (``number``: the profile's, for the debug dumps, when
    there are several)."""
    inputs = _Inputs(frames, profile, device)
    traced_args = []
    for i, a in enumerate(args):
        name = params[i] if i < len(params) and sig.parameters[params[i]].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) else f"arg{i}"
        traced_args.append(inputs.replace(a, name))
    traced_kwargs = {k: inputs.replace(v, k) for k, v in kwargs.items()}

    if sig is not None:
        try:
            sig.bind(*traced_args, **traced_kwargs)
        except TypeError as err:
            _C.raise_error(f"tp.compile cannot call the function with these args and kwargs: {err}.", frames)
    traced_at = time.perf_counter()
    with placing_on(_device(inputs.device)):
        result = func(*traced_args, **traced_kwargs)
    traced_s = time.perf_counter() - traced_at
    single = isinstance(result, Tensor)
    outputs = [result] if single else list(result) if isinstance(result, (tuple, list)) else None
    if not outputs or not all(isinstance(o, Tensor) for o in outputs):
        _C.raise_error(
            f"The compiled function must return a tripy.Tensor or a tuple of them, but it returned: {type(result).__name__}.",
            frames,
        )
    names = ["return"] if single else [f"return[{i}]" for i in range(len(outputs))]
    _freeze_parameters(func, outputs)

    def dump(stage, text):
        if stage == "timing":
            text = f"  {'tracing':<24} {1e3 * traced_s:8.1f} ms\n{text}"
        title = stage if number is None else f"{stage} (optimization profile {number})"
        for flag in STAGE_FLAGS.get(stage, ("ir",)):
            if logger.is_enabled(flag):
                logger.log(flag, lambda: f"{title}:\n{text}")
                break

    # The compiler formats each dump before handing it over: ask for them only when one is shown.
    wanted = any(logger.is_enabled(flag) for flag in FLAGS)
    nodes = [o._node for o in outputs]
    return lambda: _C.compile(nodes, inputs.nodes, names, inputs.device, optimization_level,
                              dump if wanted else None, inputs.donated)

