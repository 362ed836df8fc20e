"""Facts about model trees: the forest of top-level models among the tracked modules, the
parameters and storages of one tree (``model_stats``), its family and label, and the caches
that carry both from one inventory to the next."""

import contextlib
import weakref
from typing import NamedTuple

from . import peek, storage
from .storage import bytes_by_device, data_ptr, inner_tensors, numel
from .tracker import LiveModule
from .util import basename, contained, dict_values, vars_of


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


class Recheck(NamedTuple):
    """What a cell may have changed in the models of the last inventory, for
    ``StatsCache.measure`` (``census.build`` fills it from ``fingerprint.Since`` and the walks
    of the roots whose binding changed)."""

    tops: set  # ids of the top-level models a changed root reaches (through a module)
    storages: set  # StorageKeys a changed root reaches (through a tensor)
    tensors: set  # ids of the tensors a changed root reaches
    devices: set  # devices ("cuda:0") whose torch allocated or reserved bytes changed


class CachedForest(NamedTuple):
    key: tuple  # (tracker.changes, tracker.structure) when computed
    tops: list  # [(weakref, order)]
    parent: object  # Parents: id(descendant) -> weakref to its parent
    token: object  # this entry's own object: a callback of an older entry's refs is ignored


class CachedStats(NamedTuple):
    ref: object  # weak reference to the module
    structure: int  # tracker.structure when measured
    signature: list  # [TensorSig] of its parameters and buffers
    result: ModelStats
    totals: Totals  # totals_of(result)
    probe: tuple  # the TensorSig of its probe tensors (``probe_points``)
    tensors: frozenset  # ids of its parameters and buffers when measured


def children(module):
    """Direct child modules (list) from ``_modules``, read without user hooks (a dict
    subclass there is read through dict's own methods: ``util.dict_values``)."""
    mods = vars_of(module).get("_modules")
    if type(mods) is not dict:
        return [m for m in dict_values(mods) if m is not None]
    return [m for m in list(mods.values()) if m is not None] if mods else []


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


_GRAD_SLOTS = {}  # id(tensor class) -> (class, its ``_grad``, ``is_leaf``, ``retains_grad``)


def _grad_slots(cls):
    """(cls, its ``_grad``, ``is_leaf``, ``retains_grad`` as found on the class without running
    it), looked up once per class."""
    entry = _GRAD_SLOTS.get(id(cls))
    if entry is None or entry[0] is not cls:
        entry = _GRAD_SLOTS[id(cls)] = (
            cls,
            peek.static_class_attr(cls, "_grad"),
            peek.static_class_attr(cls, "is_leaf"),
            peek.static_class_attr(cls, "retains_grad"),
        )
    return entry


def tensor_grad(tensor):
    """A tensor's ``.grad`` (or None), read through torch's own ``_grad`` slot descriptor (a
    subclass's ``_grad``/``grad`` property is never called: None). A non-leaf tensor that does
    not retain its gradient has none: its ``_grad`` is not read at all, since torch warns when
    it is (a ``UserWarning`` the kernel would print into the user's cell: ``losses =
    [loss, ...]``); ``is_leaf`` and ``retains_grad`` are read through their slots too."""
    cls = type(tensor)
    _cls, descriptor, is_leaf, retains = _grad_slots(cls)
    if type(descriptor) is not peek.GETSET:
        return None
    try:
        if (
            type(is_leaf) is peek.GETSET
            and type(retains) is peek.GETSET
            and not is_leaf.__get__(tensor, cls)
            and not retains.__get__(tensor, cls)
        ):
            return None
        return descriptor.__get__(tensor, cls)
    except Exception:
        return None


def _unique_tensors(module):
    """({id: parameter}, {id: buffer}) of a module tree, read without user hooks. The tensors
    that a wrapper subclass among them keeps in its attributes (``storage.inner_tensors``: its
    data) count as buffers."""
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
        found = d.get("_parameters")
        for p in list(found.values()) if type(found) is dict else dict_values(found):
            if p is not None:
                params[id(p)] = p
        found = d.get("_buffers")
        for b in list(found.values()) if type(found) is dict else dict_values(found):
            if b is not None:
                buffers[id(b)] = b
        stack.extend(children(current))
    r = storage.reads()
    plain = r.plain if r is not None else frozenset()
    tensors = [*params.values(), *buffers.values()]
    if not plain.issuperset(map(id, map(type, tensors))):  # a subclass: maybe a wrapper
        for tensor in tensors:
            for inner in inner_tensors(tensor):
                if id(inner) not in params:
                    buffers[id(inner)] = inner
    return params, buffers


def model_stats(module, on_error=None, signature=None, layout=None):
    """``ModelStats`` of a module tree. A tensor torch cannot measure (lazy parameter, sparse
    layout, odd subclass) is left out and passed to ``on_error(exception)``. ``signature``: a
    list that gets the ``TensorSig`` of every parameter and buffer, parameters first
    (``tensors_unchanged`` checks it later); ``layout``: a list that gets the number of
    parameters among them, then the ids of the parameters and buffers."""
    params, buffers = _unique_tensors(module)
    if layout is not None:
        layout.append(len(params))
        layout.extend(params)
        layout.extend(buffers)
    count = 0
    storages = {}
    measure = storage.measure
    r = storage.reads()
    plain = r.plain if r is not None else frozenset()
    for p in params.values():
        try:
            count += r.numel(p) if id(type(p)) in plain else numel(p)
            measured = measure(p)
            if measured is not None:
                storages[measured.key] = measured.nbytes
            grad = tensor_grad(p)
            gptr = None
            if grad is not None:
                found = measure(grad)
                if found is not None:
                    storages[found.key] = found.nbytes
                gptr = found.ptr if found is not None else data_ptr(grad)
            if signature is not None:
                ptr = measured.ptr if measured is not None else data_ptr(p)
                signature.append(TensorSig(weakref.ref(p), ptr, gptr))
        except BaseException as exc:  # kept to this tensor (util.contained)
            if not contained(exc):
                raise
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append(TensorSig(dead_ref, 0, None))  # never unchanged: measure again
    non_leaf = False
    for b in buffers.values():
        try:
            measured = measure(b)
            if measured is not None:
                storages[measured.key] = measured.nbytes
            if signature is not None:
                ptr = measured.ptr if measured is not None else data_ptr(b)
                signature.append(TensorSig(weakref.ref(b), ptr, None))
                non_leaf = non_leaf or not is_leaf(b)
        except BaseException as exc:
            if not contained(exc):
                raise
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append(TensorSig(dead_ref, 0, None))
    if non_leaf:
        # a buffer computed from a parameter (a non-leaf tensor): the bulk re-check would read
        # its gradient, which torch warns about; measured anew at each inventory instead
        signature.append(TensorSig(dead_ref, 0, None))
    return ModelStats(count, storages, bool(params or buffers))


_SLOTS = {}  # (id(tensor class), attribute name) -> (class, torch's slot descriptor or None)


def tensor_slot(tensor, name, default=None):
    """A tensor's attribute ``name`` (``grad_fn``, ``requires_grad``...) read through torch's own
    slot descriptor, or ``default``: a subclass's property of that name is never called (the
    default then). Never raises."""
    cls = type(tensor)
    entry = _SLOTS.get((id(cls), name))
    if entry is None or entry[0] is not cls:
        slot = peek.static_class_attr(cls, name)
        entry = _SLOTS[(id(cls), name)] = (cls, slot if type(slot) is peek.GETSET else None)
    if entry[1] is None:
        return default
    try:
        return entry[1].__get__(tensor, cls)
    except Exception:
        return default


def grad_fn(tensor):
    """A tensor's ``grad_fn`` (or None) through torch's slot (``tensor_slot``)."""
    return tensor_slot(tensor, "grad_fn")


def is_leaf(tensor):
    """A tensor's ``is_leaf`` read through torch's slot (bool; True where it cannot be read)."""
    _cls, _grad, leaf, _retains = _grad_slots(type(tensor))
    if type(leaf) is not peek.GETSET:
        return True
    try:
        return bool(leaf.__get__(tensor, type(tensor)))
    except Exception:
        return True


def probe_points(signature, parameters):
    """The probe tensors of a model (tuple of ``TensorSig``): its first parameter, its last
    parameter and its last tensor (a buffer when it has any). ``.to()``, ``.half()`` and a
    backward pass change the first; a backward pass through the last layers only (a frozen
    backbone) changes the last parameter's gradient. ``parameters``: how many of the
    ``signature``'s entries are parameters."""
    if not signature:
        return ()
    points = {0, max(0, min(parameters, len(signature)) - 1), len(signature) - 1}
    return tuple(signature[i] for i in sorted(points))


def _same(older, newer):
    """Whether two tuples hold the very same objects, in order (bool; no ``==`` runs)."""
    return len(older) == len(newer) and all(a is b for a, b in zip(older, newer))


def _base_reads(tensors):
    """(data_ptr, grad getter) of torch's own tensor base class when every one of
    ``tensors`` reads its gradient through that class's ``_grad`` slot (the check
    ``tensor_grad`` makes, once per class) and none has the ``Python`` dispatch key (whose
    data pointer its ``__torch_dispatch__`` may answer), else None. Called unbound on each
    tensor, both run no Python code of a subclass. (A signature with a non-leaf buffer, whose
    gradient must not be read, ends with a dead entry: ``model_stats``.) Classes are told
    apart by id: a set of them would run a metaclass's ``__hash__`` and ``__eq__``."""
    r = storage.reads()
    if r is None:
        return None
    base = _BASE_READS.get("torch")
    if base is None or base[0] is not r.torch:
        names = storage._c_names(r.torch)
        tensor_base = names.get("TensorBase") or names.get("_TensorBase")
        grad = peek.class_dict(tensor_base).get("_grad") if tensor_base is not None else None
        if type(grad) is not peek.GETSET:
            return None
        base = _BASE_READS["torch"] = (r.torch, grad)
    _torch, grad = base
    if not r.plain.issuperset(map(id, map(type, tensors))):  # a subclass among them
        classes = {}
        for tensor in tensors:
            cls = type(tensor)
            if id(cls) in r.plain:
                continue
            if storage.python_dispatched(tensor, r):
                return None
            classes[id(cls)] = cls
        for cls in classes.values():
            if _grad_slots(cls)[1] is not grad:
                return None
    return r.data_ptr, grad.__get__


_BASE_READS = {}  # "torch" -> (torch, TensorBase._grad)


def tensors_unchanged(signature):
    """Whether every ``TensorSig`` of ``signature`` still holds: each tensor alive, at the same
    ``data_ptr()``, with a gradient at the same ``data_ptr()`` (or none, as before). Plain
    tensors and parameters are read in bulk through torch's base class (a model's ~350 in
    ~0.1 ms); a signature with a subclass that reads its gradient otherwise, one by one."""
    if not signature:
        return True
    try:
        refs, ptrs, gptrs = zip(*signature)
        tensors = [ref() for ref in refs]
        reads = _base_reads(tensors)
        if reads is None:
            return _unchanged_one_by_one(signature)
        data_ptr, grad_of = reads
        if tuple(map(data_ptr, tensors)) != ptrs:
            return False
        grads = map(grad_of, tensors)
        return tuple([g if g is None else data_ptr(g) for g in grads]) == gptrs
    except Exception:
        return False


def _unchanged_one_by_one(signature):
    """``tensors_unchanged`` read tensor by tensor (any subclass; a dead one: False)."""
    for ref, ptr, gptr in signature:
        tensor = ref()
        if tensor is None or data_ptr(tensor) != ptr:
            return False
        grad = tensor_grad(tensor)
        if (data_ptr(grad) if grad is not None else None) != gptr:
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
        if type(name) is str and name:
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


class Parents:
    """``Forest.parent`` of a cached forest: {id(descendant): the module it hangs off}, the
    modules read through weak references when asked for (``in``, ``[]``, ``get``, ``len``,
    ``items``); a dead one reads as missing."""

    __slots__ = ("_refs",)

    def __init__(self, refs):
        self._refs = refs  # id(descendant) -> weak reference to its parent

    def __contains__(self, key):
        return key in self._refs

    def __len__(self):
        return len(self._refs)

    def __iter__(self):
        return iter(self._refs)

    def get(self, key, default=None):
        ref = self._refs.get(key)
        module = ref() if ref is not None else None
        return default if module is None else module

    def __getitem__(self, key):
        module = self.get(key)
        if module is None:
            raise KeyError(key)
        return module

    def items(self):
        return [(k, m) for k, m in ((k, ref()) for k, ref in self._refs.items()) if m is not None]


class ForestCache:
    """The ``Forest`` of a tracker, kept between inventories under weak references while the
    tracker saw no module added or gone and no registration event (``changes``,
    ``structure``); a module tree edited without one (``del model.head``) is seen at the next
    event. The weak references call back when their module dies, which drops the cached
    forest (also for a module the tracker does not know, such as a deep copy's submodule):
    taking the cached forest costs no pass over the ~2,000 descendants of ten models."""

    def __init__(self, tracker):
        self.tracker = tracker
        self._cached = None  # CachedForest or None

    def forest(self):
        """The current ``Forest``: strong references, drop them before returning to the user
        (``parent`` may be a ``Parents``, read-only)."""
        tracker = self.tracker
        key = (tracker.changes, tracker.structure)
        cached = self._cached
        if cached is not None and cached.key == key and tracker.active:
            tops = [LiveModule(ref(), order) for ref, order in cached.tops]
            if all(m is not None for m, _o in tops):
                return Forest(tops, cached.parent)
        self._cached = None
        forest = module_forest(tracker.live())
        token = object()

        def gone(_ref, cache=self, token=token):
            current = cache._cached
            if current is not None and current.token is token:
                cache._cached = None

        try:
            self._cached = CachedForest(
                key,
                [(weakref.ref(m, gone), o) for m, o in forest.tops],
                Parents({k: weakref.ref(m, gone) for k, m in forest.parent.items()}),
                token,
            )
        except TypeError:
            self._cached = None
        return forest


class StatsCache:
    """``model_stats`` of the models of the last inventory, reused when nothing it read
    changed: no registration event since, and every parameter and buffer still alive with the
    same ``data_ptr()`` and the same gradient (``.to()``, ``.half()``, a backward pass change
    those).

    After a cell that only rebound names (``measure``'s ``recheck``), a model that no changed
    binding reaches and whose devices' allocated bytes did not change is re-checked by its
    probe tensors alone (``probe_points``): the standard by which an unchanged fingerprint
    re-sends the whole last inventory; the others, tensor by tensor."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.entries = {}  # id(module) -> CachedStats of the last inventory's models
        self.totals = {}  # id(module) -> Totals of the models of the last ``measure``
        self._union = None  # (tuple of ModelStats, their storages in one dict): ``union``

    def measure(self, tops, on_error, recheck=None):
        """{id(module): ModelStats} of the top-level models ``tops`` ([LiveModule]); the
        entries become those of these models, and ``totals`` their ``Totals``. A failure is
        passed to ``on_error``. ``recheck``: a ``Recheck`` (the last inventory's
        measurement of a model it does not name is re-checked by its probe tensors), or None
        (every measurement re-checked tensor by tensor)."""
        fresh = {}
        stats = {}
        totals = {}
        for module, _order in tops:
            try:
                stats[id(module)], totals[id(module)] = self._stats(
                    module, fresh, on_error, recheck
                )
            except BaseException as exc:  # kept to this model (util.contained)
                if not contained(exc):
                    raise
                on_error(exc)
        self.entries = fresh
        self.totals = totals
        return stats

    def _stats(self, module, fresh, on_error, recheck=None):
        """(ModelStats, Totals) of one model."""
        tracker = self.tracker
        cached = self.entries.get(id(module))
        if (
            cached is not None
            and tracker.active
            and cached.ref() is module
            and cached.structure == tracker.structure
            and self._unchanged(id(module), cached, recheck)
        ):
            fresh[id(module)] = cached
            return cached.result, cached.totals
        signature = []
        layout = []
        result = model_stats(module, on_error, signature, layout)
        totals = totals_of(result)
        with contextlib.suppress(TypeError):  # a module without weak references: not cached
            fresh[id(module)] = CachedStats(
                weakref.ref(module),
                tracker.structure,
                signature,
                result,
                totals,
                probe_points(signature, layout[0] if layout else 0),
                frozenset(layout[1:]),
            )
        return result, totals

    def union(self, stats):
        """The storages of all the measurements ``stats`` ({id: ModelStats}) in one dict
        ({StorageKey: nbytes}; read-only: it is kept for the next call with the same
        measurements, the usual case, which then costs no pass over ~3,600 storages)."""
        results = tuple(stats.values())
        kept = self._union
        if kept is not None and _same(kept[0], results):
            return kept[1]
        union = {}
        for entry in results:
            union.update(entry.storages)
        self._union = (results, union)
        return union

    @staticmethod
    def _unchanged(key, cached, recheck):
        """Whether the cached measurement ``cached`` of the model ``key`` still holds."""
        if (
            recheck is not None
            and key not in recheck.tops
            and (not recheck.storages or cached.totals.keys.isdisjoint(recheck.storages))
            and (not recheck.tensors or cached.tensors.isdisjoint(recheck.tensors))
            and (not recheck.devices or recheck.devices.isdisjoint(cached.totals.by_device))
        ):
            return tensors_unchanged(cached.probe)
        return tensors_unchanged(cached.signature)

    def measured_probe(self):
        """``probe()`` as the last ``measure`` found it (tuple, same shape), read from the
        signatures instead of the tensors: every entry was just measured or found unchanged
        at its first and last tensor (both are ``probe_points``)."""
        out = []
        for entry in list(self.entries.values()):
            signature = entry.signature
            for sig in (signature[0], signature[-1]) if signature else ():
                out.append((sig.ptr, sig.grad_ptr) if sig.ref is not dead_ref else None)
        return tuple(out)

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
                    grad = tensor_grad(tensor)
                    out.append((data_ptr(tensor), data_ptr(grad) if grad is not None else None))
                except Exception:
                    out.append(None)
        return tuple(out)
