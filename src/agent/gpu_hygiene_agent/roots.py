"""Where the holder walk starts, read from the IPython shell without running user code: user
variables, the output cache, the last exception and its traceback frames; and what the walk
never enters (``skip_ids``)."""

import re
import sys
import types
from typing import NamedTuple

from . import degrade, peek
from .limits import MAX_FRAMES, MAX_TB_DEPTH
from .util import LEAF_IDS, MISSING, inert, machinery_frame, vars_of

# Output-cache names: _, __, ___ and _<n>.
OUTPUT_NAME = re.compile(r"_{1,3}$|_\d+$")
# IPython's own names in user_ns that are never user variables.
SYSTEM_NAME = re.compile(r"_i{1,3}$|_i\d+$|_ih$|_oh$|_dh$|In$|Out$|exit$|quit$|get_ipython$")
# A module's or the interpreter's own names (__builtins__, __name__...): never user variables;
# left out by name only where user_ns_hidden cannot be read (``hidden_ns``).
DUNDER_NAME = re.compile(r"__\w+__$")
# The display hook's slots for the last three results (IPython's DisplayHook sets them).
DISPLAYHOOK_SLOTS = ("_", "__", "___")
# ModuleType's own __dict__ descriptor: a module's namespace without its __getattr__, a
# subclass's property, or gc.get_referents (see ModuleDicts)
_MODULE_DICT = types.ModuleType.__dict__["__dict__"]


def hidden_ns(shell):
    """IPython's ``user_ns_hidden`` (the names ``%who`` hides), or None when the shell has none
    or it is not a plain dict (a subclass could run code on ``get``): the ``holders`` limit
    (``shell_gaps``), variables are then told from IPython's names by name only."""
    hidden = getattr(shell, "user_ns_hidden", None)
    return hidden if type(hidden) is dict else None


def shell_gaps(shell):
    """The parts of the shell's layout that the holder roots read and that this shell lacks or
    has in another shape (list of str, empty for the IPython the agent expects):
    ``user_ns_hidden`` (a dict), ``displayhook`` (its ``_``, ``__``, ``___`` slots),
    ``history_manager.output_hist`` (the output cache, a dict), ``last_execution_result``.
    Reads attributes of IPython's own objects only."""
    gaps = []
    if hidden_ns(shell) is None:
        gaps.append("user_ns_hidden")
    displayhook = getattr(shell, "displayhook", None)
    slots = vars_of(displayhook) if displayhook is not None else {}
    if any(slot not in slots for slot in DISPLAYHOOK_SLOTS):
        gaps.append("displayhook")
    history = getattr(shell, "history_manager", None)
    if type(getattr(history, "output_hist", None)) is not dict:
        gaps.append("output_hist")
    if getattr(shell, "last_execution_result", MISSING) is MISSING:
        gaps.append("last_execution_result")
    return gaps


def note_shell_gaps(shell):
    """Note the ``holders`` limit (``degrade``) with IPython's version when ``shell_gaps``
    finds any; the roots then name the holders they can read. Never raises. Returns the
    gaps (list of str)."""
    try:
        gaps = shell_gaps(shell)
    except Exception:
        gaps = ["shell"]
    if gaps:
        degrade.note("holders", "IPython")
    return gaps


def output_cache(shell):
    """IPython's output cache dict (``Out``), also after the user deleted the name ``Out``."""
    cache = getattr(getattr(shell, "history_manager", None), "output_hist", None)
    return cache if type(cache) is dict else shell.user_ns.get("Out", {})


def is_output_name(shell, name, value):
    """Whether ``name`` is an output-cache name holding ``value``: ``_``, ``__``, ``___``, or
    ``_<n>`` while it is still ``Out[n]`` or IPython's own copy (``user_ns_hidden[name]`` is
    ``value``: left behind by ``del Out[n]``, a culled cache or ``%reset -f out`` on some
    IPython versions); a user's own ``_7 = ...`` is a variable."""
    if not OUTPUT_NAME.match(name):
        return False
    if name in DISPLAYHOOK_SLOTS:
        return True
    hidden = hidden_ns(shell)
    if hidden is not None and hidden.get(name, MISSING) is value:
        return True
    cache = output_cache(shell)
    try:
        return cache.get(int(name[1:]), MISSING) is value
    except Exception:
        return False


def output_caches(shell):
    """The distinct output-cache dicts: ``Out``, ``_oh`` and the history manager's
    ``output_hist`` (usually one dict under three names)."""
    ns = shell.user_ns
    caches = []
    for cache in (
        ns.get("Out"),
        ns.get("_oh"),
        getattr(getattr(shell, "history_manager", None), "output_hist", None),
    ):
        if type(cache) is dict and all(cache is not c for c in caches):
            caches.append(cache)
    return caches


def output_cells(shell):
    """{id(value): sorted execution counts (int) whose ``Out`` entry is that very object}."""
    cells = {}
    for cache in output_caches(shell):
        for key, value in list(cache.items()):
            if type(key) is int and id(type(value)) not in LEAF_IDS:
                found = cells.setdefault(id(value), [])
                if key not in found:
                    found.append(key)
    for found in cells.values():
        found.sort()
    return cells


def variable_roots(shell, skips=None):
    """User variables: (name, value) pairs of ``user_ns`` that IPython's ``%who`` rule does
    not hide (value is not ``user_ns_hidden[name]``), without the output-cache and IPython
    names (and, where ``user_ns_hidden`` cannot be read, without ``__dunder__`` names), and
    without the values that can hold nothing (``util.inert``: ``n = 3``, ``ids = [1, 2]``). A name
    that is not an exact ``str`` (a subclass could run code when hashed or compared) is left
    out and counted in ``skips`` (a ``peek.Skips``)."""
    ns = shell.user_ns
    hidden = hidden_ns(shell)
    out = []
    for name, value in list(ns.items()):
        if type(name) is not str:
            if skips is not None and id(type(value)) not in LEAF_IDS:
                skips.add("name not a str")
            continue
        if is_variable(shell, hidden, name, value):
            out.append((name, value))
    return out


def is_variable(shell, hidden, name, value):
    """Whether the binding ``name`` (an exact str) = ``value`` of ``user_ns`` is a user
    variable that can hold something (``variable_roots``'s rule for one name; ``hidden``:
    ``hidden_ns(shell)``)."""
    if inert(value):  # first: the cheapest test, true of most names of a large namespace
        return False
    if SYSTEM_NAME.match(name) or is_output_name(shell, name, value):
        return False
    if hidden is None:
        return not DUNDER_NAME.match(name)
    return hidden.get(name, MISSING) is not value


def output_names(shell):
    """The names of ``user_ns`` that can be output-cache names now (list of str, without
    reading the namespace): ``_``, ``__``, ``___`` and ``_<n>`` for each int key ``n`` of the
    output caches, in that order (the order IPython binds them in)."""
    names = list(DISPLAYHOOK_SLOTS)
    seen = set(names)
    for cache in output_caches(shell):
        for key in list(cache):
            if type(key) is int:
                name = f"_{key}"
                if name not in seen:
                    seen.add(name)
                    names.append(name)
    return names


def output_roots(shell, large=False):
    """Output cache: (holder name, value): ``Out[n]``, ``_n``, ``_``, ``__``, ``___`` (user_ns,
    user_ns_hidden, the display hook's own slots) and the last result (named ``_``). Which
    cells a value is the output of: ``output_cells``. ``large``: look the output names of
    ``user_ns`` up (``output_names``) instead of reading every name (``namespace``)."""
    out = []
    ns = shell.user_ns
    hidden = hidden_ns(shell)
    if large:
        found = ((n, dict.get(ns, n, MISSING)) for n in output_names(shell))
        named = [(n, v) for n, v in found if v is not MISSING]
    else:
        named = list(ns.items())
    for space in (named, list((hidden or {}).items())):
        for name, value in space:
            output = type(name) is str and is_output_name(shell, name, value)
            if output and not inert(value):
                out.append((name, value))
    displayhook = getattr(shell, "displayhook", None)
    for slot in DISPLAYHOOK_SLOTS:
        value = vars_of(displayhook).get(slot) if displayhook is not None else None
        if value is not None and id(type(value)) not in LEAF_IDS:
            out.append((slot, value))
    for cache in output_caches(shell):
        for key, value in list(cache.items()):
            if not inert(value):
                out.append(("Out[" + peek.key_text(key) + "]", value))
    last = getattr(shell, "last_execution_result", None)
    value = vars_of(last).get("result") if last is not None else None
    if value is not None and id(type(value)) not in LEAF_IDS:
        out.append(("_", value))
    return out


def exceptions(shell):
    """The last exception(s): sys.last_exc / last_value, the last cell's error_in_exec and
    their causes/contexts (list, deduplicated, at most 100)."""
    roots = []
    for value in (getattr(sys, "last_exc", None), getattr(sys, "last_value", None)):
        if peek.is_a(value, BaseException):
            roots.append(value)
    last = getattr(shell, "last_execution_result", None)
    value = vars_of(last).get("error_in_exec") if last is not None else None
    if peek.is_a(value, BaseException):
        roots.append(value)
    out = []
    seen = set()
    stack = list(reversed(roots))
    while stack and len(out) < 100:
        exc = stack.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        out.append(exc)
        for attr in ("__cause__", "__context__"):
            nxt = peek.exc_link(exc, attr)  # BaseException's slots, never a property
            if peek.is_a(nxt, BaseException):
                stack.append(nxt)
    return out


def traceback_frames(shell, excs):
    """Frames of the last traceback(s) (list, outermost first, each once, at most
    ``MAX_FRAMES``): ``sys.last_traceback``, IPython's ``InteractiveTB.tb`` and the
    tracebacks of ``excs``, without IPython/ipykernel's own frames."""
    tbs = [getattr(sys, "last_traceback", None)]
    tbs.append(getattr(getattr(shell, "InteractiveTB", None), "tb", None))
    for exc in excs:
        tbs.append(peek.exc_link(exc, "__traceback__"))
    frames = []
    seen_frames = set()
    seen_tbs = set()
    for tb in tbs:
        depth = 0
        while type(tb) is types.TracebackType and depth < MAX_TB_DEPTH:
            if len(frames) >= MAX_FRAMES:
                break
            if id(tb) in seen_tbs:
                break
            seen_tbs.add(id(tb))
            frame = tb.tb_frame
            if id(frame) not in seen_frames:
                seen_frames.add(id(frame))
                if not machinery_frame(frame):
                    frames.append(frame)
            tb = tb.tb_next
            depth += 1
    return frames


def skip_ids(shell, own_ids, module_dicts):
    """ids (frozenset) of objects the walk never enters: namespaces, IPython and kernel
    machinery, ``own_ids`` (of the agent's objects), and ``module_dicts.ids()`` (every module's
    ``__dict__``). The same object while none of them changed (``ModuleDicts.with_ids``)."""
    skip = {id(shell), id(sys.modules)}
    skip.update(own_ids)
    ns = shell.user_ns
    history = getattr(shell, "history_manager", None)
    for obj in (
        ns,
        getattr(shell, "user_global_ns", None),
        getattr(shell, "user_ns_hidden", None),
        getattr(shell, "displayhook", None),
        history,
        getattr(shell, "events", None),
        getattr(shell, "InteractiveTB", None),
        getattr(shell, "display_pub", None),
        ns.get("Out"),
        ns.get("_oh"),
        ns.get("In"),
        ns.get("_ih"),
        getattr(history, "output_hist", None),
    ):
        if obj is not None:
            skip.add(id(obj))
    return module_dicts.with_ids(skip)


class _ModuleDictIds(NamedTuple):
    modules: int  # len(sys.modules) when computed
    ids: frozenset


class ModuleDicts:
    """ids of the ``__dict__`` of every imported module, recomputed only when the number of
    entries in ``sys.modules`` changed (a module's dict keeps its identity for the module's
    life)."""

    def __init__(self):
        self._cached = None  # _ModuleDictIds
        self._with = None  # (ids(), the other ids, their union) of the last ``with_ids``

    def ids(self):
        """The ids (frozenset of int)."""
        modules = sys.modules
        cached = self._cached
        if cached is not None and cached.modules == len(modules):
            return cached.ids
        ids = set()
        for module in list(modules.values()):
            if issubclass(type(module), types.ModuleType):
                # Never gc.get_referents(module): CPython 3.12 before 3.12.6 hands out freed
                # objects from _asyncio's free list there, and the next collection loops
                # forever (python/cpython#122695; it hung kernels in their first import).
                try:
                    ref = _MODULE_DICT.__get__(module)
                except Exception:
                    continue
                if type(ref) is dict:
                    ids.add(id(ref))
        ids = frozenset(ids)
        self._cached = _ModuleDictIds(len(modules), ids)
        return ids

    def with_ids(self, other):
        """``ids() | other`` (frozenset; ``other``: a set of ids), the very same object as the
        last call's while neither changed: no copy of ~2,000 ids per inventory, and the
        walk's ``Trace`` compares its context by identity."""
        ids = self.ids()
        last = self._with
        if last is not None and last[0] is ids and last[1] == other:
            return last[2]
        union = ids | other
        self._with = (ids, frozenset(other), union)
        return union
