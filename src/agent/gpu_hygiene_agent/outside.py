"""Models that no root reaches, and whether they are really waiting for the garbage collector.

The walk starts at the user namespace, the output cache and the last traceback. A model it does
not reach is either garbage in a reference cycle (the layers of a deleted model: ``gc.collect()``
frees them) or held from a place the walk never enters: another module's global
(``helpers._MODEL``), a class attribute, the frame of a running thread or of a kept generator,
a library's cache. Calling the second kind "waiting for garbage collection; Clean GPU frees it"
would be false, so before such a model is reported the agent looks for what holds it:

- ``find_holders``: a bounded search up the referrers (``gc.get_referrers``, one scan of the
  collector's objects per level for all the models at once) until a module's globals or the
  notebook's namespace; the path down from it is named as the walk names paths.
- ``FullCollections``: a ``gc.callbacks`` entry that counts full (generation 2) collections. A
  model that nothing reached before one and that is still alive after it survived
  ``gc.collect()``: it is not garbage, whatever holds it.

Never runs user code: referrers are matched by exact type and identity (``peek.is_a``, never
``isinstance``, which reads ``__class__``), dicts are scanned with ``dict.items`` of exact dicts
only (``paths.edge_label``), a module's globals are read through ``ModuleType``'s own
``__dict__`` slot.
"""

import gc
import sys
import types

from . import peek
from .limits import OUTSIDE_FRONTIER, OUTSIDE_LEVELS
from .paths import edge_label
from .util import short

_MODULE_DICT = types.ModuleType.__dict__["__dict__"]
_PACKAGE = __name__.rpartition(".")[0]  # the agent's package: its objects are no holders


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
        if not peek.is_a(module, types.ModuleType):
            continue
        try:
            # setdefault: the namespace keeps its name (``__mp_main__`` is another name of it)
            out.setdefault(id(_MODULE_DICT.__get__(module, types.ModuleType)), f"module {name}")
        except Exception:
            continue
    return out


def _own(obj):
    """Whether ``obj`` is one of the agent's objects (an instance of a class it defined)."""
    module = peek.type_module(type(obj))
    return type(module) is str and module.startswith(_PACKAGE)


def find_holders(targets, user_ns):
    """{id(model): description} for the ``targets`` (modules no root reached) that something
    holds: ``"module helpers: ._MODEL"``, ``"module app: .Registry.models['a']"`` (a class
    attribute), ``"the notebook's namespace: .Cache.model"`` (through something the walk does
    not enter: a class, a generator), each model by its own path.

    Only a module's globals (``sys.modules``) and the notebook's namespace ``user_ns`` end a
    path: a class, a frame or any other object is searched through, since it may be garbage
    itself (``class C: model = M()`` then ``del C`` leaves a cycle ``gc.collect()`` frees).
    The agent's own objects and the frames of the running stack are dead ends. The locals of a
    function that is running (another thread's) are no object the collector tracks before
    Python 3.13 and are not read (``frame.f_locals`` would copy them into the frame and keep
    them alive): such a model is found by ``survived`` only. A model not in the answer reached
    no such place within ``OUTSIDE_LEVELS`` levels of referrers, ``OUTSIDE_FRONTIER`` objects
    each: garbage in a cycle, or held where the search cannot tell (a C extension)."""
    modules = _module_dicts(user_ns)
    stack = set()
    frame = sys._getframe()
    while frame is not None:
        stack.add(id(frame))
        frame = frame.f_back
    del frame
    # (id(object), id(target)) -> the object below it on the way to that target
    via = {}
    leads = {id(t): [t] for t in targets}  # id(object) -> the targets it leads to
    found = {}
    frontier = list(targets)
    mine = {id(frontier), id(targets), id(via), id(leads), id(found), id(modules)}
    for _level in range(OUTSIDE_LEVELS):
        if not frontier or len(found) == len(targets):
            break
        ids = {id(o) for o in frontier}
        referrers = gc.get_referrers(*frontier)
        mine.add(id(referrers))
        following = []
        queued = set()
        for ref in referrers:
            rid = id(ref)
            if rid in mine or rid in stack or _own(ref):
                continue  # the search's, the running stack's or the agent's own: dead ends
            new = []
            for child in gc.get_referents(ref):
                if id(child) not in ids:
                    continue
                for target in leads[id(child)]:
                    key = (rid, id(target))
                    if id(target) in found or key in via:
                        continue
                    via[key] = child
                    new.append(target)
            if not new:
                continue
            leads.setdefault(rid, []).extend(new)
            anchor = modules.get(rid) if type(ref) is dict else None
            if anchor is not None:
                for target in new:
                    found[id(target)] = short(f"{anchor}: {_path(ref, via, target)}")
            elif rid not in queued and len(following) < OUTSIDE_FRONTIER:
                queued.add(rid)  # searched up at the next level, for all it leads to
                following.append(ref)
        frontier = following
        mine.add(id(frontier))
    return found


def _path(anchor, via, target):
    """The path from ``anchor`` down to ``target`` (``.Registry.models['a']``), as the walk
    names paths (``paths.edge_label``), with attributes of modules and classes as ``.name`` and
    an instance's class as ``.__class__``."""
    chain = [anchor]
    current = anchor
    while current is not target and len(chain) < OUTSIDE_LEVELS + 2:
        current = via.get((id(current), id(target)), target)
        chain.append(current)
    labels = []
    for i in range(1, len(chain)):
        parent, child = chain[i - 1], chain[i]
        if peek.is_a(parent, type) and type(child) is dict:
            continue  # a class to its namespace: the next hop reads ``.name``
        if type(parent) is dict and (i == 1 or peek.is_a(chain[i - 2], type)):
            # a module's globals, the namespace or a class's namespace: an attribute
            key = next((k for k, v in parent.items() if v is child), None)
            if type(key) is str and key.isidentifier():
                labels.append("." + key)
                continue
        if child is type(parent):
            labels.append(".__class__")
            continue
        grand = chain[i - 2] if i >= 2 else None
        labels.append(edge_label(parent, child, grand))
    return "".join(labels) or "<ref>"
