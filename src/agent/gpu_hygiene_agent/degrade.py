"""What this environment lacks that the agent would use, and what it does instead: the current
*limits*, sent in every ``hello`` and ``inventory`` as ``limits`` (docs/protocol.md).

An old IPython, a torch without module registration hooks, an Ultralytics whose trainer moved
its attributes: the agent degrades, it never breaks. Where a module finds such a gap it calls
``note(area, library, version)`` once it knows, and goes on with its fallback; the browser says
each limit once, in the gauge's details. Nothing here prints or raises.

Areas (``AREAS``):

- ``holders``: the shell's layout the holder roots are read from (the display hook's ``_``,
  ``__``, ``___`` slots, the output cache ``Out`` / ``_oh`` / ``history_manager.output_hist``,
  ``last_execution_result``, ``user_ns_hidden``) is not what the agent expects: it names the
  holders it can read (``roots.shell_gaps``);
- ``models``: torch has no global module registration hooks (torch < 2.0): models are found by
  a bounded heap scan per inventory (``tracker.ModuleTracker.rescan``) and by the holder walk;
- ``owners``: a library's owner attributes (an Ultralytics trainer's or predictor's model, EMA,
  optimizer) are not where the agent looks: owners are found by the generic owner search;
- ``provenance``: torch cannot record allocation stacks (no
  ``torch.cuda.memory._record_memory_history`` taking ``enabled="state"``, torch < 2.1): the
  panel's origins are not available (``provenance.Recorder``).

The set is per loaded copy of the agent (module state, like the environment it describes):
a limit once noted stays for the kernel's life.
"""

import sys

from .util import short

AREAS = ("holders", "models", "owners", "provenance")
MAX_LIMITS = 32  # distinct limits kept (and sent); a further one is dropped

_limits = {}  # (area, library, version) -> {"area", "library", "version"}, in noting order


def version_of(module_name):
    """``__version__`` of an already imported module (str), ``"unknown"`` when it has none or
    is not imported: never imports anything."""
    try:
        module = sys.modules.get(module_name)
        version = getattr(module, "__version__", None) if module is not None else None
    except Exception:
        version = None
    return _text(version) if isinstance(version, str) and version else "unknown"


def _text(value):
    """``value`` as a plain str of at most 100 characters (a ``str`` subclass such as torch's
    ``TorchVersion`` copied without its methods; anything else: ``"unknown"``)."""
    return short(str.__str__(value), 100) if isinstance(value, str) else "unknown"


def note(area, library, version=None, module=None):
    """Record the limit ``area`` (one of ``AREAS``) caused by ``library`` (its name as users
    know it, str: ``"IPython"``, ``"torch"``, ``"Ultralytics"``) at ``version`` (str; None:
    ``version_of(module or library)``, e.g. ``note("owners", "Ultralytics",
    module="ultralytics")`` from owners.py). Idempotent; an unknown area or a full set is
    ignored; never raises. Returns True when the limit is new."""
    try:
        if area not in AREAS or len(_limits) >= MAX_LIMITS:
            return False
        if version is None:
            version = version_of(module or library)
        library = _text(library)
        version = _text(version)
        key = (area, library, version)
        if key in _limits:
            return False
        _limits[key] = {"area": area, "library": library, "version": version}
        return True
    except Exception:
        return False


def current():
    """The limits noted so far (list of ``{"area": str, "library": str, "version": str}``,
    in noting order; fresh dicts, safe to send)."""
    return [dict(entry) for entry in list(_limits.values())]


def noted(area):
    """Whether some limit of ``area`` was noted (bool)."""
    return any(key[0] == area for key in list(_limits))


def clear():
    """Forget every limit (tests)."""
    _limits.clear()
