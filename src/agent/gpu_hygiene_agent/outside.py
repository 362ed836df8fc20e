"""Models that no root reaches, and whether they are really waiting for the garbage collector.

The walk starts at the user namespace, the output cache and the last traceback. A model it does
not reach is either garbage in a reference cycle (the layers of a deleted model: ``gc.collect()``
frees them) or held from a place the walk never enters: another module's global
(``helpers._MODEL``), a class attribute, the frame of a running thread or of a kept generator,
a library's cache. Calling the second kind "waiting for garbage collection; Clean GPU frees it"
would be false, so before such a model is reported the agent looks for what holds it:

- ``find_holders``: a bounded search up the referrers (``gc.get_referrers``, one scan of the
  collector's objects per level for all the models at once) until a module's globals, a class,
  the notebook's namespace or a frame that is not the agent's own; the path down from it is
  named as the walk names paths.
- ``FullCollections``: a ``gc.callbacks`` entry that counts full (generation 2) collections. A
  model that nothing reached before one and that is still alive after it survived
  ``gc.collect()``: it is not garbage, whatever holds it.

Never runs user code: referrers are matched by type and identity, dicts are scanned with
``dict.items`` of exact dicts only (``paths.edge_label``), a module's globals are read through
``ModuleType``'s own ``__dict__`` slot.
"""

import gc
import sys
import types

from . import peek
from .limits import OUTSIDE_FRONTIER, OUTSIDE_LEVELS
from .paths import edge_label
from .util import frame_name, short

_MODULE_DICT = types.ModuleType.__dict__["__dict__"]
_PACKAGE = __name__.rpartition(".")[0]  # the agent's package: its objects are no holders
_FRAME = types.FrameType


class FullCollections:
    """Counts full (generation 2) collections (``count``) through ``gc.callbacks``."""

    def __init__(self):
        self.count = 0

    def __call__(self, phase, info):
        try:
            if phase == "stop" and info.get("generation") == 2:
                self.count += 1
        except Exception:
            pass

    def install(self):
        if not any(cb is self for cb in gc.callbacks):  # identity: a user callback's __eq__
            gc.callbacks.append(self)

    def uninstall(self):
        for i, cb in enumerate(gc.callbacks):
            if cb is self:
                del gc.callbacks[i]
                return


def _module_dicts(user_ns):
    """{id(module globals): what it is} of the modules in ``sys.modules`` (the agent's own left
    out: they hold no user object) and of the notebook's namespace ``user_ns`` (what the walk
    did not enter there: a generator, a class)."""
    out = {id(user_ns): "the notebook's namespace"}
    for name, module in list(sys.modules.items()):
        if type(name) is not str or name == "__main__" or name.startswith(_PACKAGE):
            continue
        if not isinstance(module, types.ModuleType):
            continue
        try:
            out[id(_MODULE_DICT.__get__(module, types.ModuleType))] = f"module {name}"
        except Exception:
            continue
    return out


def _own(obj):
    """Whether ``obj`` is one of the agent's objects (an instance of a class it defined)."""
    module = peek.type_module(type(obj))
    return type(module) is str and module.startswith(_PACKAGE)


def _anchor(obj, modules, stack):
    """What ``obj`` is when it is a place that holds things for good (str), else None: a module's
    globals, a class, a frame that is not on the agent's own stack."""
    name = modules.get(id(obj))
    if name is not None and type(obj) is dict:
        return name
    if isinstance(obj, type):
        return f"class {peek.type_module(obj)}.{peek.type_name(obj)}"
    if type(obj) is _FRAME and id(obj) not in stack:
        try:
            code = obj.f_code
            where = f"{code.co_filename.rsplit('/', 1)[-1]}:{obj.f_lineno}"
        except Exception:
            where = "?"
        return f"a frame of {frame_name(code)}() ({where})"
    return None


def find_holders(targets, user_ns):
    """{id(model): description} for the ``targets`` (modules no root reached) that something
    holds: ``"module helpers: ._MODEL"``, ``"class app.Registry: .models['a']"``, ``"a frame of
    train() (run.py:12): <local>"`` (a frame object that owns its locals: a paused generator's, a
    traceback's), ``"the notebook's namespace: .gen<ref>"``. ``user_ns``: the notebook's
    namespace. The locals of a function that is running (another thread's) are no object the
    collector tracks before Python 3.13 and are not read (``frame.f_locals`` would copy them
    into the frame and keep them alive): such a model is found by ``survived`` only. A model not
    in it reached no such place within
    ``OUTSIDE_LEVELS`` levels of referrers, ``OUTSIDE_FRONTIER`` objects each: garbage in a
    cycle, or held where the search cannot tell (a C extension)."""
    modules = _module_dicts(user_ns)
    stack = set()
    frame = sys._getframe()
    while frame is not None:
        stack.add(id(frame))
        frame = frame.f_back
    del frame
    child_of = {}  # id(referrer) -> the object below it on the way to a target
    target_of = {id(t): t for t in targets}  # id(object) -> the target it leads to
    found = {}
    frontier = list(targets)
    mine = {id(frontier), id(targets), id(child_of), id(target_of), id(found), id(modules)}
    for _level in range(OUTSIDE_LEVELS):
        if not frontier or len(found) == len(targets):
            break
        ids = {id(o) for o in frontier}
        referrers = gc.get_referrers(*frontier)
        mine.add(id(referrers))
        following = []
        for ref in referrers:
            rid = id(ref)
            if rid in mine or rid in child_of or rid in target_of or rid in stack:
                continue
            if _own(ref):
                continue  # the agent's own records of the models: a dead end
            child = next((c for c in gc.get_referents(ref) if id(c) in ids), None)
            if child is None:
                continue
            target = target_of[id(child)]
            if id(target) in found:
                continue
            child_of[rid] = child
            target_of[rid] = target
            anchor = _anchor(ref, modules, stack)
            if anchor is not None:
                found[id(target)] = short(f"{anchor}: {_path(ref, child_of, target)}")
            elif len(following) < OUTSIDE_FRONTIER:
                following.append(ref)
        frontier = following
        mine.add(id(frontier))
    return found


def _path(anchor, child_of, target):
    """The path from ``anchor`` down to ``target`` (``.cache['m'].model``), as the walk names
    paths (``paths.edge_label``)."""
    chain = [anchor]
    current = anchor
    while current is not target and len(chain) < OUTSIDE_LEVELS + 2:
        current = child_of.get(id(current), target)
        chain.append(current)
    labels = []
    for i in range(1, len(chain)):
        parent, child = chain[i - 1], chain[i]
        if isinstance(parent, type) and type(child) is dict:
            continue  # a class to its namespace: the next hop reads ``.name``
        if type(parent) is dict and (i == 1 or isinstance(chain[i - 2], type)):
            # a module's globals or a class's namespace: an attribute
            key = next((k for k, v in parent.items() if v is child), None)
            if type(key) is str and key.isidentifier():
                labels.append("." + key)
                continue
        grand = chain[i - 2] if i >= 2 else None
        labels.append(edge_label(parent, child, grand))
    return "".join(labels) or "<ref>"
