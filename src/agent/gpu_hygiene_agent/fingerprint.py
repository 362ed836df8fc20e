"""What an inventory depends on, cheaply: when the fingerprint of the kernel's state is the one
of the last inventory, that inventory is sent again instead of being built (``skipped``)."""

import itertools
import sys
from typing import NamedTuple

from . import devices, roots
from .limits import FINGERPRINT_ITEMS
from .util import LEAF_IDS, OPAQUE_TYPES, PLAIN_IDS, torch_module, vars_of


def shallow(value):
    """A cheap signature of an object one level deep (tuple of ints, compared with ==): its
    id and the ids of a container's items or of an instance's attributes (up to
    ``FINGERPRINT_ITEMS`` of them; of a larger container its size and its first 32 items,
    so that a new container at a freed one's address is told apart). Modules, classes and
    functions: the id."""
    cls = type(value)
    if id(cls) in PLAIN_IDS:
        size = len(value)
        items = value.values() if cls is dict else value
        if size <= FINGERPRINT_ITEMS:
            return (id(value), *map(id, items))
        return (id(value), -size, *map(id, itertools.islice(items, 32)))
    attrs = None if issubclass(cls, OPAQUE_TYPES) else vars_of(value)
    if attrs and len(attrs) <= FINGERPRINT_ITEMS:
        return (id(value), *map(id, list(attrs.values())))
    return (id(value),)


# Where the fingerprint's parts are: HEAD parts first (tracker counts, torch imported, torch's
# memory, the probe), then one (name, shallow) pair per binding, then TAIL parts (the output
# cache, the display hook's slots, the last exception and last result).
HEAD = 5
TAIL = 3
_CHANGES, _STRUCTURE, _MEMORY, _PROBE = 0, 1, 3, 4


def fingerprint(shell, tracker, stats, names=None):
    """The fingerprint (tuple, compared with ==; holds no user object): the tracked-module set
    and registration events (``tracker``'s counts), torch's allocated bytes per device, the
    first and last tensor of each model (``stats.probe()``, a ``models.StatsCache``), the user
    namespace's bindings with one level of their content (``shallow``), the output cache and
    the display hook's slots, and the last exception. ``names``: a
    ``namespace.NamespaceIndex`` refreshed for this inventory; where its namespace is large,
    only its roots are fingerprinted (the other names can hold nothing, as last read)."""
    parts = [
        tracker.changes,
        tracker.structure,
        torch_module() is not None,
        devices.torch_memory(),
        stats.probe(),
    ]
    system_name = roots.SYSTEM_NAME
    spaces = (shell.user_ns, roots.hidden_ns(shell) or {})
    large = names is not None and names.active and names.pairs is not None
    bindings = (names.pairs if large else list(spaces[0].items()), list(spaces[1].items()))
    for space in bindings:
        for name, value in space:
            cls = type(value)
            if id(cls) in LEAF_IDS:
                continue
            if value is spaces[0] or value is spaces[1]:
                # a variable holding globals(): the namespace itself, never walked, changes
                # at every cell (IPython's _i<n>...): by its id, not one level deep
                parts.append((name if type(name) is str else ("key", id(name)), (id(value),)))
                continue
            if type(name) is not str:
                # by id: comparing the fingerprints must never run a key's __eq__
                parts.append((("key", id(name)), shallow(value)))
                continue
            if system_name.match(name):
                continue
            parts.append((name, shallow(value)))
    cache = roots.output_cache(shell)
    parts.append(tuple(map(id, list(cache.values()))) if type(cache) is dict else None)
    displayhook = getattr(shell, "displayhook", None)
    slots = vars_of(displayhook) if displayhook is not None else {}
    parts.append(tuple(id(slots.get(k)) for k in roots.DISPLAYHOOK_SLOTS))
    last = getattr(shell, "last_execution_result", None)
    last_vars = vars_of(last) if last is not None else {}
    parts.append(
        (
            id(getattr(sys, "last_value", None)),
            id(getattr(sys, "last_exc", None)),
            id(getattr(sys, "last_traceback", None)),
            id(getattr(getattr(shell, "InteractiveTB", None), "tb", None)),
            id(last_vars.get("error_in_exec")),
            id(last_vars.get("result")),
        )
    )
    return tuple(parts)


def refreshed(print_, tracker, stats):
    """The fingerprint ``print_`` (taken before an inventory was built) with the parts the
    building itself changes taken again: the tracker's counts (the walk adds the modules the
    hooks missed, such as unpickled models) and the probe of the models just measured (as
    measured: ``StatsCache.measured_probe``). Every other part stays as it was before the
    building, so that a change made meanwhile (a collection that freed tensors) gives the next
    cell a different fingerprint: a new inventory, never a stale one re-sent."""
    parts = list(print_)
    parts[_CHANGES] = tracker.changes
    parts[_STRUCTURE] = tracker.structure
    parts[_PROBE] = stats.measured_probe()
    return tuple(parts)


class Since(NamedTuple):
    """What changed between two fingerprints, as the roots see it (``since``)."""

    kept: frozenset  # names whose bindings are the same, one level deep, in both
    changed: frozenset  # names with a binding that is new or changed one level deep
    outputs: bool  # the output cache, the display hook's slots or the last result changed
    errors: bool  # the last exception changed
    devices: frozenset  # devices whose torch allocated or reserved bytes changed

    def root_changed(self, kind, name):
        """Whether the root ``(kind, name)`` of a walk may hold something else than at the
        older fingerprint (bool)."""
        if kind == "variable":
            return name not in self.kept
        if kind == "output":
            return self.outputs
        if kind == "traceback":
            return self.errors
        return True


def since(older, newer):
    """``Since`` from the fingerprint ``older`` to ``newer`` (tuples of ``fingerprint``)."""
    # only str names can be roots; no user object's __hash__ runs
    before = {pair for pair in older[HEAD:-TAIL] if type(pair[0]) is str}
    now = [pair for pair in newer[HEAD:-TAIL] if type(pair[0]) is str]
    changed = frozenset(pair[0] for pair in now if pair not in before)
    kept = frozenset(pair[0] for pair in now) - changed
    outputs = older[-3] != newer[-3] or older[-2] != newer[-2] or older[-1][5] != newer[-1][5]
    output_names = any(roots.OUTPUT_NAME.match(n) for n in changed)
    memory_before = older[_MEMORY] or {}
    memory_now = newer[_MEMORY] or {}
    devices = frozenset(
        d for d in set(memory_before) | set(memory_now) if memory_before.get(d) != memory_now.get(d)
    )
    return Since(kept, changed, outputs or output_names, older[-1][:5] != newer[-1][:5], devices)
