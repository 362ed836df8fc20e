"""What an inventory depends on, cheaply: when the fingerprint of the kernel's state is the one
of the last inventory, that inventory is sent again instead of being built (``skipped``)."""

import itertools
import sys

from . import devices, roots
from .limits import FINGERPRINT_ITEMS
from .util import LEAF_TYPES, OPAQUE_TYPES, PLAIN_CONTAINERS, torch_module, vars_of


def shallow(value):
    """A cheap signature of an object one level deep (tuple of ints, compared with ==): its
    id and the ids of a container's items or of an instance's attributes (up to
    ``FINGERPRINT_ITEMS`` of them; of a larger container its size and its first 32 items,
    so that a new container at a freed one's address is told apart). Modules, classes and
    functions: the id."""
    cls = type(value)
    if cls in PLAIN_CONTAINERS:
        size = len(value)
        items = value.values() if cls is dict else value
        if size <= FINGERPRINT_ITEMS:
            return (id(value), *map(id, items))
        return (id(value), -size, *map(id, itertools.islice(items, 32)))
    attrs = None if issubclass(cls, OPAQUE_TYPES) else vars_of(value)
    if attrs and len(attrs) <= FINGERPRINT_ITEMS:
        return (id(value), *map(id, list(attrs.values())))
    return (id(value),)


def fingerprint(shell, tracker, stats):
    """The fingerprint (tuple, compared with ==; holds no user object): the tracked-module set
    and registration events (``tracker``'s counts), torch's allocated bytes per device, the
    first and last tensor of each model (``stats.probe()``, a ``models.StatsCache``), the user
    namespace's bindings with one level of their content (``shallow``), the output cache and
    the display hook's slots, and the last exception."""
    parts = [
        tracker.changes,
        tracker.structure,
        torch_module() is not None,
        devices.torch_memory(),
        stats.probe(),
    ]
    system_name = roots.SYSTEM_NAME
    for space in (shell.user_ns, shell.user_ns_hidden):
        for name, value in list(space.items()):
            cls = type(value)
            if cls in LEAF_TYPES or (isinstance(name, str) and system_name.match(name)):
                continue
            parts.append((name, shallow(value)))
    cache = roots.output_cache(shell)
    parts.append(tuple(map(id, list(cache.values()))) if type(cache) is dict else None)
    displayhook = getattr(shell, "displayhook", None)
    slots = vars_of(displayhook) if displayhook is not None else {}
    parts.append(tuple(id(slots.get(k)) for k in ("_", "__", "___")))
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
