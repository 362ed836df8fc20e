"""The running Ultralytics trainer's epoch, read by the sampler thread while a user cell runs
(``sample.progress``), without importing Ultralytics and without running any of its code or the
user's.

How it is read, per sample while the kernel is busy:

1. The stack of the thread that runs the cell (``sys._current_frames()``, walked by ``f_back``;
   only ``f_code.co_name`` is looked at, never ``f_locals``: on Python 3.11 and 3.12 reading it
   snapshots the locals into a dict that keeps them, a training batch included, alive): is a
   function named ``_do_train`` running? That is ``BaseTrainer._do_train``, the epoch loop of
   every Ultralytics 8.x trainer (or a subclass's override). No such frame: no progress, and
   nothing else is read.
2. The Ultralytics ``Model`` wrappers (``YOLO``, ``RTDETR``...: a class in the MRO named
   ``Model`` from ``ultralytics.engine.model``) the agent knows, as weak references: the ones
   among the top-level models of the last inventory (``remember``, main thread, after each
   cell) and, when none of those is training, the ones among the tracker's modules (one pass,
   again only when the tracker changed: a wrapper created in the running cell).
3. Each wrapper's instance ``__dict__`` (read through the ``__dict__`` slot descriptor, never
   ``getattr``) gives its ``trainer``: a ``BaseTrainer`` (a class in the MRO named
   ``BaseTrainer`` from ``ultralytics.engine.trainer``) whose class resolves ``_do_train`` to a
   plain function with the code of a running ``_do_train`` frame. Its ``__dict__`` must hold
   ``epoch`` (int >= 0, set by ``_do_train`` at the top of each epoch: absent during the
   setup), ``epochs`` (int >= 1), ``train_time_start`` (a ``time.time()`` stamp set when the
   loop starts; it must be from this cell: a finished trainer of an earlier cell never counts)
   and ``stop`` not ``True`` (set after the last epoch, by early stopping or the time limit;
   the final validation of the best weights then runs without progress). Of several (two
   trainings in one cell), the one started last.

All class facts are read through ``type``'s own descriptors (``__mro__``, ``__module__``,
``__qualname__``, ``__dict__``), so neither a metaclass nor a property, ``__getattr__`` or
``__getattribute__`` of the user's or Ultralytics' classes runs. Nothing is kept but weak
references; strong references live only for the few microseconds of one read, and the user's
objects are touched only while their training is running (the wrapper is then held by
``Model.train``'s frame). Not read: training in another thread or process (DDP runs a
subprocess), a ``BaseTrainer`` used without a wrapper (``DetectionTrainer(...).train()``: no
weak reference leads to it), Ultralytics' ``MultiTrainer`` (a list of datasets), a wrapper
created in the first cell that imports torch (the tracker starts after it). One mix-up is
possible: a training interrupted earlier in the same cell (its exception caught, ``stop`` never
set) on another wrapper, with the same trainer class, is read during the next one's setup.
"""

import sys
import time
import types
import weakref

# type's own descriptors: class facts without the class's (or its metaclass's) attribute hooks
_TYPE_DICT = type.__dict__["__dict__"].__get__
_TYPE_MRO = type.__dict__["__mro__"].__get__
_TYPE_MODULE = type.__dict__["__module__"].__get__
_TYPE_QUALNAME = type.__dict__["__qualname__"].__get__

WRAPPER = "wrapper"
TRAINER = "trainer"
MAX_STACK = 2000  # frames looked at per read
MAX_WRAPPERS = 64  # wrappers remembered
MAX_KINDS = 1024  # classes whose kind is cached
SCAN_EVERY_S = 2.0  # at most one tracker pass this often while no known trainer trains


def _in_ultralytics(module, suffix):
    return type(module) is str and module.startswith("ultralytics.") and module.endswith(suffix)


def class_kind(cls):
    """``WRAPPER`` for a subclass of Ultralytics' ``Model``, ``TRAINER`` for one of its
    ``BaseTrainer``, else None, from the names of the classes in ``cls``'s MRO."""
    try:
        for c in _TYPE_MRO(cls):
            qualname = _TYPE_QUALNAME(c)
            if qualname == "Model" and _in_ultralytics(_TYPE_MODULE(c), ".engine.model"):
                return WRAPPER
            if qualname == "BaseTrainer" and _in_ultralytics(_TYPE_MODULE(c), ".engine.trainer"):
                return TRAINER
    except Exception:
        pass
    return None


def instance_dict(obj):
    """The instance ``__dict__`` of ``obj`` (dict) read through the ``__dict__`` slot of its
    class, or None when the class has none or replaced it (a property named ``__dict__``)."""
    try:
        for c in _TYPE_MRO(type(obj)):
            descriptor = _TYPE_DICT(c).get("__dict__")
            if descriptor is None:
                continue
            if type(descriptor) is not types.GetSetDescriptorType:
                return None
            d = descriptor.__get__(obj, c)
            return d if type(d) is dict else None
    except Exception:
        pass
    return None


def resolved_code(cls, name):
    """The code object of the plain function ``cls`` resolves ``name`` to, or None."""
    try:
        for c in _TYPE_MRO(cls):
            value = _TYPE_DICT(c).get(name)
            if value is not None:
                return value.__code__ if type(value) is types.FunctionType else None
    except Exception:
        pass
    return None


def running_codes(thread_id, name="_do_train"):
    """Code objects of the frames named ``name`` on the stack of thread ``thread_id`` (list,
    innermost first): only ``f_code`` and ``f_back`` are read."""
    frames = sys._current_frames()
    frame = frames.get(thread_id)
    del frames
    codes = []
    depth = 0
    while frame is not None and depth < MAX_STACK:
        code = frame.f_code
        if code.co_name == name:
            codes.append(code)
        frame = frame.f_back
        depth += 1
    return codes


def _weak(obj):
    """A weak reference to ``obj``, or None when it takes none."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def _int(value, least):
    return value if type(value) is int and value >= least else None


class ProgressReader:
    """``read()``: ``{"epoch": int, "epochs": int}`` of the Ultralytics trainer that runs in
    the current cell, or None (see the module's docstring). ``tracker``: the agent's
    ``ModuleTracker`` (its weak registry is scanned for wrappers created in the cell)."""

    def __init__(self, tracker=None):
        self.tracker = tracker
        self.wrappers = []  # [weakref] to Ultralytics Model wrappers
        self.thread_id = None  # the thread that runs the current cell
        self.since = None  # time.time() at the current cell's pre_run_cell
        self.scanned = None  # (tracker.changes, time.monotonic()) of the last tracker pass
        self._kinds = {}  # id(class) -> (weakref to it, kind)

    # ---- main thread

    def cell_started(self, thread_id, since):
        """``pre_run_cell``: the cell runs in ``thread_id``, started at ``since`` (time.time())."""
        self.thread_id = thread_id
        self.since = since
        self.scanned = None

    def remember(self, modules):
        """Keep weak references to the Ultralytics wrappers among ``modules`` (a list of
        top-level modules), instead of the ones kept before."""
        kept = []
        for module in modules:
            if len(kept) < MAX_WRAPPERS and self.kind(type(module)) == WRAPPER:
                ref = _weak(module)
                if ref is not None:
                    kept.append(ref)
        self.wrappers = kept

    # ---- sampler thread

    def kind(self, cls):
        """``class_kind(cls)``, cached per class (weakly)."""
        key = id(cls)
        entry = self._kinds.get(key)
        if entry is not None and entry[0]() is cls:
            return entry[1]
        kind = class_kind(cls)
        kinds = self._kinds
        if len(kinds) >= MAX_KINDS:
            kinds.clear()
        ref = _weak(cls)
        if ref is not None:
            kinds[key] = (ref, kind)
        return kind

    def read(self):
        """The progress of the trainer training in the current cell (dict) or None."""
        thread_id, since = self.thread_id, self.since
        if thread_id is None or since is None:
            return None
        try:
            codes = running_codes(thread_id)
            if not codes:
                return None
            found = self._from_wrappers(self.wrappers, codes, since)
            if found is None and self._may_scan():
                self.wrappers = self._scan()
                found = self._from_wrappers(self.wrappers, codes, since)
            del codes
        except Exception:
            return None
        if found is None:
            return None
        return {"epoch": found[1], "epochs": found[2]}

    def _from_wrappers(self, refs, codes, since):
        """(train_time_start, epoch, epochs) of the latest trainer of ``refs`` that runs one of
        ``codes`` and started in this cell, or None."""
        best = None
        for ref in list(refs):
            wrapper = ref()
            if wrapper is None:
                continue
            found = self._trainer_progress(wrapper, codes, since)
            del wrapper
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        return best

    def _trainer_progress(self, wrapper, codes, since):
        wd = instance_dict(wrapper)
        trainer = wd.get("trainer") if wd is not None else None
        if trainer is None:
            return None
        cls = type(trainer)
        if self.kind(cls) != TRAINER:
            return None
        code = resolved_code(cls, "_do_train")
        if code is None or not any(c is code for c in codes):
            return None
        td = instance_dict(trainer)
        if td is None:
            return None
        started = td.get("train_time_start")
        epoch = _int(td.get("epoch"), 0)
        epochs = _int(td.get("epochs"), 1)
        if type(started) is not float or started < since or epoch is None or epochs is None:
            return None
        if td.get("stop") is True:
            return None
        return (started, epoch, epochs)

    def _may_scan(self):
        tracker = self.tracker
        if tracker is None or not tracker.active:
            return False
        now = time.monotonic()
        last = self.scanned
        if last is not None and (last[0] == tracker.changes or now - last[1] < SCAN_EVERY_S):
            return False
        self.scanned = (tracker.changes, now)
        return True

    def _scan(self):
        """Weak references to the wrappers among the tracker's live modules (and the ones
        remembered before that are still alive)."""
        out = [ref for ref in self.wrappers if ref() is not None]
        known = {id(ref()) for ref in out}
        for entry in list(self.tracker._refs.values()):
            module = entry.ref()
            if module is None or id(module) in known:
                continue
            if self.kind(type(module)) == WRAPPER and len(out) < MAX_WRAPPERS:
                ref = _weak(module)
                if ref is not None:
                    out.append(ref)
            del module
        return out
