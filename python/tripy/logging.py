"""Tripy's logger: severity levels plus named debug flags (IR dumps, timings, kernel source).

Messages are formatted only when they will be shown: pass a callable to defer building an
expensive message (an IR dump, say) until the flag is known to be on.
"""

import contextlib
import difflib
import os
import sys

from tripy import _C
from tripy.exception import TripyException

# Ordered least to most severe: enabling a level enables every level after it.
LEVELS = ("verbose", "info", "warning", "error")
# Independent switches, off unless named (or unless "verbose" turns everything on).
FLAGS = ("trace", "ir", "timing", "kernels")
# nvtripy's names for the same switches: its "mlir" dump is our FlatIR dump ("ir"); there, "ir"
# means both IR dumps, as "ir" (FlatIR and Program) plus "trace" do here.
ALIASES = {"mlir": ("ir",), "ir": ("ir", "trace")}
# ANSI colours for terminals (nvtripy's choice of hues); flags share one.
_COLORS = {"verbose": "\x1b[95m", "warning": "\x1b[93m", "error": "\x1b[91m", "info": ""}
_FLAG_COLOR = "\x1b[35m"
_RESET = "\x1b[0m"
DEFAULT_LEVEL = "warning"

# The stages the core dumps, for tp.compile and for eager evaluation, and the flags that show each
# ("eager": the graph an eager evaluation compiles; "eager.timing": its compile and kernel times;
# "eager.failed": the graph of an evaluation that failed, shown under any flag).
STAGE_FLAGS = {
    "trace": ("trace",),
    "eager": ("trace",),
    "flat": ("ir",),
    "flat.optimized": ("ir",),
    "fusion": ("ir",),
    "program": ("ir",),
    "kernels": ("kernels",),
    "timing": ("timing",),
    "eager.timing": ("timing",),
    "eager.failed": FLAGS,
}

# TRIPY_DEBUG=N turns on the flags of every step up to N.
_DEBUG_FLAGS = {1: ("timing",), 2: ("ir", "trace"), 3: ("kernels",)}


def _debug_flags(value):
    try:
        depth = int(value or 0)
    except ValueError:
        raise TripyException(f"TRIPY_DEBUG must be an integer from 0 to 3, but got: {value!r}.") from None
    return {flag for step, flags in _DEBUG_FLAGS.items() if step <= depth for flag in flags}


def _unknown_name(name):
    known = LEVELS + FLAGS + tuple(a for a in ALIASES if a not in FLAGS)
    message = f"Unknown verbosity: {name!r}. Known verbosities are: {', '.join(known)}."
    close = difflib.get_close_matches(str(name), known, n=1)
    if close:
        message += f" Did you mean: {close[0]!r}?"
    return TripyException(message)


def _expand(spec):
    """The set of enabled levels and flags for a verbosity given as one name or a set of names."""
    names = {spec} if isinstance(spec, str) else set(spec)
    for name in names:
        if name not in LEVELS and name not in FLAGS and name not in ALIASES:
            raise _unknown_name(name)
    names = {flag for name in names for flag in ALIASES.get(name, (name,))}
    if "verbose" in names:
        return frozenset(LEVELS + FLAGS)
    lowest = min((LEVELS.index(name) for name in names if name in LEVELS), default=LEVELS.index(DEFAULT_LEVEL))
    return frozenset(LEVELS[lowest:]) | frozenset(name for name in names if name in FLAGS)


class Logger:
    """
    Tripy's logger, available as ``tp.logger``.

    ``verbosity`` is a level (``"verbose"``, ``"info"``, ``"warning"``, ``"error"``: that level and
    every more severe one), a set mixing a level with flags (``"trace"``, ``"ir"``, ``"timing"``,
    ``"kernels"``), or a dict from module names to either of those, with ``""`` for the rest.
    nvtripy's names work too: ``"mlir"`` is the FlatIR dump (``"ir"``), and ``"ir"`` also
    turns on ``"trace"``. ``logger.trace(...)``, ``logger.timing(...)`` and so on log under a
    flag. ``enable_color`` colours the prefix when the output is a terminal.
    The environment variable ``TRIPY_DEBUG=1..3`` adds flags to the default (1: timing,
    2: also ir and trace, 3: also kernels). The flags cover eager evaluation as they cover
    ``tp.compile``: each evaluation's graph (``trace``), FlatIR and program (``ir``), kernels
    (``kernels``) and compile and kernel times (``timing``); an evaluation that fails shows its
    graph under any flag.

    Args:
        verbosity (str | set[str] | dict[str, str | set[str]] | None): The initial verbosity; the
            default level (``"warning"``) plus the flags of ``TRIPY_DEBUG`` when None.

    Raises:
        tp.TripyException: if a name is not a known level or flag, or ``TRIPY_DEBUG`` is not an
            integer.

    Example::

        import tripy as tp

        with tp.logger.use_verbosity({"info", "ir"}):
            tp.logger.info("shown")
            tp.logger.log("ir", lambda: "an IR dump, built only because 'ir' is on")
            tp.logger.verbose("hidden")
        with tp.logger.use_verbosity({"": "error", "my_app": "verbose"}):
            assert not tp.logger.is_enabled("warning", module="tripy.frontend")
            assert tp.logger.is_enabled("ir", module="my_app.models")
    """

    def __init__(self, verbosity=None):
        if verbosity is None:
            verbosity = {DEFAULT_LEVEL, *_debug_flags(os.environ.get("TRIPY_DEBUG"))}
        self.verbosity = verbosity
        self.enable_color = True

    @property
    def verbosity(self):
        """
        What is shown: a level, a set of a level and flags, or a dict of those by module name.
        Setting it checks the names (``tp.TripyException`` for an unknown one).
        """
        return self._spec

    @verbosity.setter
    def verbosity(self, spec):
        if isinstance(spec, dict):
            by_module = {str(module): _expand(value) for module, value in spec.items()}
        else:
            by_module = {"": _expand(spec)}
        by_module.setdefault("", _expand(DEFAULT_LEVEL))
        self._spec = spec
        # With one entry every module sees the same set, so no caller lookup is needed.
        self._uniform = by_module[""] if len(by_module) == 1 else None
        self._by_module = by_module
        self._module_cache = {}
        if getattr(self, "_drives_core", False):
            self._sync_core()

    def _sync_core(self):
        """Tells the core which stages of eager evaluation to dump (those some module's flags show);
        the core formats none of the others."""
        enabled = frozenset().union(*self._by_module.values())
        stages = [stage for stage, flags in STAGE_FLAGS.items() if enabled.intersection(flags)]
        _C.set_eager_dump(self._dump_stage if stages else None, set(stages))

    def _dump_stage(self, stage, text):
        """Logs a stage the core dumped (``STAGE_FLAGS`` names the flags that show it)."""
        shown = [flag for flag in STAGE_FLAGS.get(stage, ("ir",)) if self.is_enabled(flag, module="tripy")]
        if shown:
            self._emit(shown[0], f"{stage}:\n{text}")

    @contextlib.contextmanager
    def use_verbosity(self, spec):
        """Sets ``verbosity`` for the body of a ``with`` block, then restores it.

        Args:
            spec (str | set[str] | dict[str, str | set[str]]): The verbosity for the block, in any form
                ``verbosity`` takes.

        Returns:
            contextlib.AbstractContextManager: the context manager (``with`` gives the logger).

        Raises:
            tp.TripyException: if a name is not a known level or flag.
        """
        previous = self._spec
        self.verbosity = spec
        try:
            yield self
        finally:
            self.verbosity = previous

    def _enabled_for_module(self, module):
        enabled = self._module_cache.get(module)
        if enabled is None:
            # The longest configured prefix that ends at a dot boundary wins.
            best = ""
            for prefix in self._by_module:
                if len(prefix) > len(best) and (module == prefix or module.startswith(prefix + ".")):
                    best = prefix
            enabled = self._module_cache[module] = self._by_module[best]
        return enabled

    def is_enabled(self, flag, module=None, _depth=1):
        """
        Whether messages under ``flag`` (a level or a flag) are shown for ``module`` (by default,
        the calling module).

        Args:
            flag (str): A level (``"info"``, ...) or a flag (``"ir"``, ...).
            module (str | None): A module name; the caller's module when None.

        Returns:
            bool: whether messages under ``flag`` are shown.

        Raises:
            tp.TripyException: if ``flag`` is not a known level or flag.
        """
        if flag not in LEVELS and flag not in FLAGS:
            if flag not in ALIASES:
                raise _unknown_name(flag)
            flag = ALIASES[flag][0]
        enabled = self._uniform
        if enabled is None:
            if module is None:
                module = sys._getframe(_depth).f_globals.get("__name__", "")
            enabled = self._enabled_for_module(module)
        return flag in enabled

    def log(self, flag, message, _depth=2):
        """Prints ``message`` (a string, or a callable returning one) if ``flag`` is enabled.

        Args:
            flag (str): A level or a flag.
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: if ``flag`` is not a known level or flag.
        """
        if not self.is_enabled(flag, _depth=_depth):
            return
        self._emit(flag, message)

    def _emit(self, flag, message):
        if callable(message):
            message = message()
        prefix = f"[tripy][{flag}]"
        color = _COLORS.get(flag, _FLAG_COLOR)
        if self.enable_color and color and sys.stderr.isatty():
            prefix = f"{color}{prefix}{_RESET}"
        print(f"{prefix} {message}", file=sys.stderr)

    def verbose(self, message):
        """
        Logs ``message`` at the ``"verbose"`` level.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("verbose", message, _depth=3)

    def info(self, message):
        """
        Logs ``message`` at the ``"info"`` level.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("info", message, _depth=3)

    def warning(self, message):
        """
        Logs ``message`` at the ``"warning"`` level.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("warning", message, _depth=3)

    def error(self, message):
        """
        Logs ``message`` at the ``"error"`` level.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("error", message, _depth=3)

    def trace(self, message):
        """
        Logs ``message`` under the ``"trace"`` flag (Trace graphs).

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("trace", message, _depth=3)

    def ir(self, message):
        """
        Logs ``message`` under the ``"ir"`` flag (FlatIR and programs).

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("ir", message, _depth=3)

    def mlir(self, message):
        """
        Logs ``message`` under the ``"ir"`` flag (nvtripy's name for it).

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("ir", message, _depth=3)

    def timing(self, message):
        """
        Logs ``message`` under the ``"timing"`` flag.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("timing", message, _depth=3)

    def kernels(self, message):
        """
        Logs ``message`` under the ``"kernels"`` flag.

        Args:
            message (str | Callable[[], str]): The message, or a callable that builds it (called only
                when it is shown).

        Raises:
            tp.TripyException: never for a known level; see ``log``.
        """
        self.log("kernels", message, _depth=3)


logger = Logger()
# The global logger (not one a test makes) decides what the core dumps while evaluating eagerly.
logger._drives_core = True
logger._sync_core()
