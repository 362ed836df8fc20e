"""Facts about model trees: the forest of top-level models among the tracked modules, the
parameters and storages of one tree (``model_stats``), its family and label, and the caches
that carry both from one inventory to the next."""

import contextlib
import weakref
from typing import NamedTuple

from .storage import add_storage, bytes_by_device
from .tracker import LiveModule
from .util import basename, vars_of


class Forest(NamedTuple):
    """Tracked modules split into top-level models and descendants."""

    tops: list  # [LiveModule] that are no descendant of another tracked live module
    parent: dict  # id(descendant) -> the module it hangs off (through ``_modules``)


class ModelStats(NamedTuple):
    """Parameters and memory of one module tree."""

    parameters: int  # elements of the unique parameters
    storages: dict  # {StorageKey: nbytes} of parameters, buffers and gradients, each once
    has_tensors: bool  # at least one parameter or buffer


class Totals(NamedTuple):
    """What the census reads of a ``ModelStats`` as a whole, computed once per measurement
    (``StatsCache.totals``): a model's storages are added in one step (``rootbytes``), and a
    set's stored hashes make its overlap tests with other models cheap."""

    by_device: dict  # bytes_by_device(storages)
    keys: frozenset  # frozenset(storages)


def totals_of(stats):
    """``Totals`` of a ``ModelStats``."""
    return Totals(bytes_by_device(stats.storages), frozenset(stats.storages))


class TensorSig(NamedTuple):
    """What ``tensors_unchanged`` re-checks of one parameter or buffer."""

    ref: object  # weak reference to the tensor (``dead_ref``: never unchanged)
    ptr: int  # its data_ptr()
    grad_ptr: object  # its gradient's data_ptr(), or None


class CachedForest(NamedTuple):
    key: tuple  # (tracker.changes, tracker.structure) when computed
    tops: list  # [(weakref, order)]
    parent: dict  # id(descendant) -> weakref to its parent


class CachedStats(NamedTuple):
    ref: object  # weak reference to the module
    structure: int  # tracker.structure when measured
    signature: list  # [TensorSig] of its parameters and buffers
    result: ModelStats
    totals: Totals  # totals_of(result)


def children(module):
    """Direct child modules (list) from ``_modules``, read without user hooks."""
    mods = vars_of(module).get("_modules")
    if not mods:
        return []
    try:
        return [m for m in list(mods.values()) if m is not None]
    except Exception:
        return []


def module_forest(live):
    """Split tracked modules (``live``: [LiveModule]) into a ``Forest``: ``tops`` the modules
    that are no descendant (through ``_modules``) of another, ``parent`` {id(descendant):
    parent module}."""
    parent = {}
    for module, _order in live:
        stack = [module]
        while stack:
            current = stack.pop()
            for child in children(current):
                if id(child) in parent or child is module:
                    continue
                parent[id(child)] = current
                stack.append(child)
    tops = [LiveModule(m, o) for m, o in live if id(m) not in parent]
    return Forest(tops, parent)


def dead_ref():
    return None


def _unique_tensors(module):
    """({id: parameter}, {id: buffer}) of a module tree, read without user hooks."""
    params = {}
    buffers = {}
    seen = set()
    stack = [module]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        d = vars_of(current)
        for p in list((d.get("_parameters") or {}).values()):
            if p is not None:
                params[id(p)] = p
        for b in list((d.get("_buffers") or {}).values()):
            if b is not None:
                buffers[id(b)] = b
        stack.extend(children(current))
    return params, buffers


def model_stats(module, on_error=None, signature=None):
    """``ModelStats`` of a module tree. A tensor torch cannot measure (lazy parameter, sparse
    layout, odd subclass) is left out and passed to ``on_error(exception)``. ``signature``: a
    list that gets the ``TensorSig`` of every parameter and buffer (``tensors_unchanged``
    checks it later)."""
    params, buffers = _unique_tensors(module)
    count = 0
    storages = {}
    for p in params.values():
        try:
            count += int(p.numel())
            add_storage(p, storages)
            grad = getattr(p, "_grad", None)  # .grad without the non-leaf warning
            if grad is not None:
                add_storage(grad, storages)
            if signature is not None:
                gptr = grad.data_ptr() if grad is not None else None
                signature.append(TensorSig(weakref.ref(p), p.data_ptr(), gptr))
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append(TensorSig(dead_ref, 0, None))  # never unchanged: measure again
    for b in buffers.values():
        try:
            add_storage(b, storages)
            if signature is not None:
                signature.append(TensorSig(weakref.ref(b), b.data_ptr(), None))
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append(TensorSig(dead_ref, 0, None))
    return ModelStats(count, storages, bool(params or buffers))


def tensors_unchanged(signature):
    """Whether every ``TensorSig`` of ``signature`` still holds."""
    try:
        for ref, ptr, gptr in signature:
            tensor = ref()
            if tensor is None or tensor.data_ptr() != ptr:
                return False
            grad = getattr(tensor, "_grad", None)
            if (grad.data_ptr() if grad is not None else None) != gptr:
                return False
    except Exception:
        return False
    return True


def model_family(cls_module):
    """``"ultralytics"``, ``"transformers"`` or ``"torch"`` from a class's ``__module__``."""
    if cls_module.startswith("ultralytics"):
        return "ultralytics"
    if cls_module.startswith("transformers"):
        return "transformers"
    return "torch"


def model_label(module, class_name, family):
    """Short human label (str): ``"YOLO (yolov8n.yaml)"`` for an Ultralytics wrapper built from
    ``yolov8n.yaml``, ``"BertModel (bert-base-uncased)"`` for transformers, else the class."""
    d = vars_of(module)
    if family == "ultralytics":
        for attr in ("cfg", "ckpt_path", "model_name"):
            name = basename(d.get(attr))
            if name:
                return f"{class_name} ({name})"
        yaml = d.get("yaml")
        if type(yaml) is dict:
            name = basename(yaml.get("yaml_file"))
            if name:
                return f"{class_name} ({name})"
    elif family == "transformers":
        config = d.get("config")
        name = vars_of(config).get("_name_or_path") if config is not None else None
        if isinstance(name, str) and name:
            return f"{class_name} ({name})"
    return class_name


_INTERNALS = []  # [frozenset] once computed


def module_internals(torch):
    """Keys (frozenset of str) that ``torch.nn.Module.__init__`` puts in every module's
    ``__dict__``: parameters, buffers, submodules, hook dicts, ``training``."""
    if not _INTERNALS:
        keys = set(vars_of(torch.nn.Module()))
        keys.update(("_parameters", "_buffers", "_modules"))
        _INTERNALS.append(frozenset(keys))
    return _INTERNALS[0]


class ForestCache:
    """The ``Forest`` of a tracker, kept between inventories under weak references while the
    tracker saw no module added or gone and no registration event (``changes``,
    ``structure``); a module tree edited without one (``del model.head``) is seen at the next
    event."""

    def __init__(self, tracker):
        self.tracker = tracker
        self._cached = None  # CachedForest or None

    def forest(self):
        """The current ``Forest``: strong references, drop them before returning to the user."""
        tracker = self.tracker
        key = (tracker.changes, tracker.structure)
        cached = self._cached
        if cached is not None and cached.key == key and tracker.active:
            tops = [LiveModule(ref(), order) for ref, order in cached.tops]
            parent = {k: ref() for k, ref in cached.parent.items()}
            alive = all(m is not None for m in parent.values())
            if alive and all(m is not None for m, _o in tops):
                return Forest(tops, parent)
        forest = module_forest(tracker.live())
        try:
            self._cached = CachedForest(
                key,
                [(weakref.ref(m), o) for m, o in forest.tops],
                {k: weakref.ref(m) for k, m in forest.parent.items()},
            )
        except TypeError:
            self._cached = None
        return forest


class StatsCache:
    """``model_stats`` of the models of the last inventory, reused when nothing it read
    changed: no registration event since, and every parameter and buffer still alive with the
    same ``data_ptr()`` and the same gradient (``.to()``, ``.half()``, a backward pass change
    those)."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.entries = {}  # id(module) -> CachedStats of the last inventory's models
        self.totals = {}  # id(module) -> Totals of the models of the last ``measure``

    def measure(self, tops, on_error):
        """{id(module): ModelStats} of the top-level models ``tops`` ([LiveModule]); the
        entries become those of these models, and ``totals`` their ``Totals``. A failure is
        passed to ``on_error``."""
        fresh = {}
        stats = {}
        totals = {}
        for module, _order in tops:
            try:
                stats[id(module)], totals[id(module)] = self._stats(module, fresh, on_error)
            except Exception as exc:
                on_error(exc)
        self.entries = fresh
        self.totals = totals
        return stats

    def _stats(self, module, fresh, on_error):
        """(ModelStats, Totals) of one model."""
        tracker = self.tracker
        cached = self.entries.get(id(module))
        if (
            cached is not None
            and tracker.active
            and cached.ref() is module
            and cached.structure == tracker.structure
            and tensors_unchanged(cached.signature)
        ):
            fresh[id(module)] = cached
            return cached.result, cached.totals
        signature = []
        result = model_stats(module, on_error, signature)
        totals = totals_of(result)
        with contextlib.suppress(TypeError):  # a module without weak references: not cached
            fresh[id(module)] = CachedStats(
                weakref.ref(module), tracker.structure, signature, result, totals
            )
        return result, totals

    def probe(self):
        """The first and last parameter or buffer of each model measured by the last
        inventory, as (data_ptr, gradient's data_ptr) (tuple): a backward pass, ``.to()`` or
        ``.half()`` changes them also where torch's allocated bytes cannot tell (CPU)."""
        out = []
        for entry in list(self.entries.values()):
            signature = entry.signature
            for sig in (signature[0], signature[-1]) if signature else ():
                tensor = sig.ref()
                if tensor is None:
                    out.append(None)
                    continue
                try:
                    grad = getattr(tensor, "_grad", None)
                    out.append((tensor.data_ptr(), grad.data_ptr() if grad is not None else None))
                except Exception:
                    out.append(None)
        return tuple(out)
