"""Which ``torch.nn.Module`` instances exist: a weak registry fed by torch's global
registration hooks (one heap scan when tracking starts); without them (torch < 2.0) a bounded
heap scan per inventory (``ModuleTracker.rescan``, the ``models`` limit of ``degrade``)."""

import contextlib
import gc
import itertools
import time
import weakref
from typing import NamedTuple

from . import degrade
from .limits import SCAN_LIST_MS, SCAN_MS, SCAN_OBJECTS

_CHECK_EVERY = 4096  # objects looked at between two reads of the clock


class Tracked(NamedTuple):
    """A registry entry."""

    ref: object  # weak reference to the module
    order: int  # creation order, smaller = older


class LiveModule(NamedTuple):
    """A live tracked module (a strong reference: drop it before returning to the user)."""

    module: object
    order: int


class ScanStats(NamedTuple):
    """What one bounded heap scan (``ModuleTracker.rescan``) did."""

    examined: int  # objects looked at (at most ``scan_objects``)
    old: int  # objects of the old generation listed (0: its pass was skipped)
    complete: bool  # every object of every generation looked at
    ms: float  # wall time of the whole scan, listing included (milliseconds)


class ModuleTracker:
    """Weak registry of ``torch.nn.Module`` instances, fed by torch's global registration hooks.

    Modules are keyed by ``id()`` with a weak reference and a creation order (``Tracked``). A
    plain ``WeakKeyDictionary`` would hash and compare user modules (a subclass may define
    ``__eq__``/``__hash__``, even raising ones, and the hooks run inside the user's
    constructors), so identity keys are used instead; a weakref callback removes dead entries.
    """

    def __init__(self):
        self._refs = {}  # id(module) -> Tracked
        # id(module) -> order of the tracked modules that the registration hooks never saw being
        # built while they were installed: made without their constructor (copy.deepcopy, pickle,
        # a whole-model torch.load), found later by a walk (``add(module, copied=True)``)
        self.copied = {}
        self._counter = itertools.count()
        self._handles = []
        self.active = False  # registration hooks installed
        self.rescan_each_time = False  # torch without registration hooks: scan per inventory
        self.changes = 0  # modules added or gone so far (int): equal counts, same tracked set
        # registration events seen (int): submodules, parameters and buffers set on a module;
        # equal counts, no module tree changed through __setattr__ / register_*
        self.structure = 0
        # bounds of ``rescan`` (limits.SCAN_*; instance attributes so that a test can lower them)
        self.scan_objects = SCAN_OBJECTS
        self.scan_ms = SCAN_MS
        self.scan_list_ms = SCAN_LIST_MS
        self.last_scan = None  # ScanStats of the last rescan, or None
        self._old_cursor = 0  # where the next old-generation pass resumes (index)
        self._old_skip = 0  # rescans left whose old-generation pass is skipped

    # hooks: they run inside user code (module constructors), so they never raise
    def _on_module(self, module, _name, submodule):
        self.structure += 1
        try:
            self.add(module)
            if submodule is not None:
                self.add(submodule)
        except Exception:
            pass

    def _on_tensor(self, module, _name, _tensor):
        self.structure += 1
        try:  # noqa: SIM105 -- hot path, cheaper than contextlib.suppress
            self.add(module)
        except Exception:
            pass

    def add(self, module, copied=False):
        """Track ``module`` (no-op when already tracked). ``copied``: a walk found it untracked
        while the registration hooks are installed, so its constructor never ran (noted in
        ``copied`` only then: without the hooks every module is found by a scan)."""
        key = id(module)
        entry = self._refs.get(key)
        if entry is not None and entry.ref() is module:
            return
        refs = self._refs
        copies = self.copied

        def _gone(ref, key=key, refs=refs, tracker=self, copies=copies):
            current = refs.get(key)
            if current is not None and current.ref is ref:
                refs.pop(key, None)
                copies.pop(key, None)
                tracker.changes += 1

        try:
            ref = weakref.ref(module, _gone)
        except TypeError:
            return
        refs[key] = Tracked(ref, next(self._counter))
        if copied and self.active:
            copies[key] = refs[key].order
        else:
            copies.pop(key, None)
        self.changes += 1

    def order(self, module):
        """Creation order (int) of a tracked module, or None."""
        entry = self._refs.get(id(module))
        if entry is not None and entry.ref() is module:
            return entry.order
        return None

    def start(self, torch):
        """Install torch's global registration hooks and scan the heap once for modules that
        exist already. Returns True when the hooks are in place."""
        if self.active:
            return True
        mm = torch.nn.modules.module
        registrars = (
            getattr(mm, "register_module_module_registration_hook", None),
            getattr(mm, "register_module_parameter_registration_hook", None),
            getattr(mm, "register_module_buffer_registration_hook", None),
        )
        if all(r is not None for r in registrars):
            self._handles = [
                registrars[0](self._on_module),
                registrars[1](self._on_tensor),
                registrars[2](self._on_tensor),
            ]
            self.active = True
        else:
            self.rescan_each_time = True
            degrade.note("models", "torch")  # its version from sys.modules["torch"]
        self.scan(torch)
        return self.active

    def scan(self, torch):
        """Track every live module found by one ``gc.get_objects()`` pass."""
        module_type = torch.nn.Module
        objects = gc.get_objects()
        try:
            for obj in objects:
                if issubclass(type(obj), module_type):
                    self.add(obj)
        finally:
            del objects

    def rescan(self, torch):
        """Without registration hooks: track the modules found by a bounded heap scan (one per
        inventory; ``ScanStats`` in ``last_scan``). At most ``scan_objects`` objects are looked
        at, and looking stops after ``scan_ms`` (listings not counted): first the young
        generations (objects made since the last collections), then the old one, newest first
        (what the last cells made and collections promoted lies at its end), then from where
        the last scan stopped, so that every object is looked at within a few inventories.
        Listing the old generation is the one cost not cut (about 55 ns per object): after a
        listing of t ms the next ``int(t / scan_list_ms)`` scans skip it. Modules reachable
        from the user's variables, the output cache or the last traceback are found by the
        holder walk in any case."""
        started = time.perf_counter()
        limit_s = self.scan_ms / 1000.0
        module_type = torch.nn.Module
        budget = max(0, int(self.scan_objects))
        add = self.add
        examined = 0
        looking_s = 0.0  # time spent looking (the listings not counted: see above)
        complete = True
        old_listed = 0

        def look(objects, start, stop):
            """Look at objects[start:stop] within the budget; the index reached (int)."""
            nonlocal examined, looking_s
            i = start
            while i < stop:
                if examined >= budget or looking_s > limit_s:
                    return i
                end = min(stop, i + _CHECK_EVERY, i + budget - examined)
                begun = time.perf_counter()
                for obj in objects[i:end]:
                    if issubclass(type(obj), module_type):
                        add(obj)
                looking_s += time.perf_counter() - begun
                examined += end - i
                i = end
            return i

        for generation in (0, 1):
            try:
                objects = gc.get_objects(generation)
            except Exception:
                objects = []
            try:
                if look(objects, 0, len(objects)) < len(objects):
                    complete = False
            finally:
                del objects
        if self._old_skip > 0:
            self._old_skip -= 1
            complete = False
        elif examined < budget:
            listed = time.perf_counter()
            try:
                objects = gc.get_objects(2)
            except Exception:
                objects = []
            try:
                list_ms = (time.perf_counter() - listed) * 1000.0
                self._old_skip = int(list_ms / self.scan_list_ms) if self.scan_list_ms > 0 else 0
                old_listed = n = len(objects)
                # the newest half of what is left of the budget, from the end
                share = min(n, (budget - examined) // 2)
                tail_start = n - share
                if look(objects, tail_start, n) < n:
                    complete = False
                # then the rest, from the cursor, wrapping at the tail
                cursor = self._old_cursor if self._old_cursor < tail_start else 0
                reached = look(objects, cursor, tail_start)
                if reached < tail_start:
                    complete = False
                    self._old_cursor = reached
                else:
                    first = look(objects, 0, cursor)
                    self._old_cursor = first if first < cursor else 0
                    complete = complete and first >= cursor
            finally:
                del objects
        else:
            complete = False
        self.last_scan = ScanStats(
            examined, old_listed, complete, (time.perf_counter() - started) * 1000.0
        )
        return self.last_scan

    def stop(self):
        """Remove the registration hooks."""
        for handle in self._handles:
            with contextlib.suppress(Exception):
                handle.remove()
        self._handles = []
        self.active = False

    def live(self):
        """Live tracked modules: list of ``LiveModule``, oldest first. Strong references:
        callers drop the list before returning to the user."""
        out = []
        for ref, order in list(self._refs.values()):
            module = ref()
            if module is not None:
                out.append(LiveModule(module, order))
        out.sort(key=lambda item: item.order)
        return out
