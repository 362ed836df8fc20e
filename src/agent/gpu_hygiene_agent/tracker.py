"""Which ``torch.nn.Module`` instances exist: a weak registry fed by torch's global
registration hooks (one heap scan when tracking starts)."""

import contextlib
import gc
import itertools
import weakref
from typing import NamedTuple


class Tracked(NamedTuple):
    """A registry entry."""

    ref: object  # weak reference to the module
    order: int  # creation order, smaller = older


class LiveModule(NamedTuple):
    """A live tracked module (a strong reference: drop it before returning to the user)."""

    module: object
    order: int


class ModuleTracker:
    """Weak registry of ``torch.nn.Module`` instances, fed by torch's global registration hooks.

    Modules are keyed by ``id()`` with a weak reference and a creation order (``Tracked``). A
    plain ``WeakKeyDictionary`` would hash and compare user modules (a subclass may define
    ``__eq__``/``__hash__``, even raising ones, and the hooks run inside the user's
    constructors), so identity keys are used instead; a weakref callback removes dead entries.
    """

    def __init__(self):
        self._refs = {}  # id(module) -> Tracked
        self._counter = itertools.count()
        self._handles = []
        self.active = False  # registration hooks installed
        self.rescan_each_time = False  # torch without registration hooks: scan per inventory
        self.changes = 0  # modules added or gone so far (int): equal counts, same tracked set
        # registration events seen (int): submodules, parameters and buffers set on a module;
        # equal counts, no module tree changed through __setattr__ / register_*
        self.structure = 0

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

    def add(self, module):
        """Track ``module`` (no-op when already tracked)."""
        key = id(module)
        entry = self._refs.get(key)
        if entry is not None and entry.ref() is module:
            return
        refs = self._refs

        def _gone(ref, key=key, refs=refs, tracker=self):
            current = refs.get(key)
            if current is not None and current.ref is ref:
                refs.pop(key, None)
                tracker.changes += 1

        try:
            ref = weakref.ref(module, _gone)
        except TypeError:
            return
        refs[key] = Tracked(ref, next(self._counter))
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
