"""Who keeps the kernel's DataLoader worker processes alive: the loaders and iterators among
the user variables and the output cache, and the pids of their live workers (``children``
joins them with the processes it lists).

The holders: DataLoader iterators (``torch.utils.data.dataloader._MultiProcessingDataLoaderIter``:
``_workers`` is its list of ``multiprocessing`` processes) and DataLoaders that keep one
(``persistent_workers=True`` keeps ``_iterator``; a subclass may keep it under another
attribute), found by class name (torch is never imported) in the user variables and the output
cache and one level inside them (items of a list/tuple/dict, attributes of an object). Skipped
at no cost while ``torch.utils.data.dataloader`` is not imported. Objects are read through
their ``__dict__`` only (``vars_of``): no user code runs."""

import sys

from . import peek
from .util import short, vars_of

MAX_WORKERS = 64  # worker pids read per iterator
MAX_LEVEL_ITEMS = 64  # items / attributes of one root looked at for a loader or iterator
MAX_HOLDERS = 32
ITER_CLASS = "_MultiProcessingDataLoaderIter"
LOADER_CLASS = "DataLoader"
DATALOADER_MODULE = "torch.utils.data.dataloader"


def _kind(cls, kinds):
    """ "iterator", "loader" or None for a class (memoised in ``kinds``)."""
    entry = kinds.get(id(cls))  # by id: a class's metaclass may define __hash__/__eq__
    kind = entry[1] if entry is not None and entry[0] is cls else 0
    if kind == 0:
        kind = None
        try:
            for base in peek.mro(cls):
                namespace = peek.class_dict(base)
                name = namespace.get("__qualname__")
                name = name if type(name) is str else peek.type_name(base)
                module = namespace.get("__module__")
                if type(module) is not str:
                    continue
                if module == DATALOADER_MODULE and name == ITER_CLASS:
                    kind = "iterator"
                    break
                if module == DATALOADER_MODULE and name == LOADER_CLASS:
                    kind = "loader"
                    break
        except Exception:
            kind = None
        kinds[id(cls)] = (cls, kind)
    return kind


def worker_pids(iterator):
    """Pids (list of int) of an iterator's live worker processes (``_workers``), read without
    running its code: each ``multiprocessing.Process``'s ``_popen.pid``, left out once
    ``_popen.returncode`` is set (joined) or the iterator was shut down."""
    attrs = vars_of(iterator)
    if attrs.get("_shutdown") is True:
        return []
    workers = attrs.get("_workers")
    if type(workers) is not list:
        return []
    pids = []
    for worker in workers[:MAX_WORKERS]:
        popen = vars_of(worker).get("_popen")
        if popen is None:
            continue
        popen_attrs = vars_of(popen)
        pid = popen_attrs.get("pid")
        if type(pid) is int and popen_attrs.get("returncode") is None:
            pids.append(pid)
    return pids


def _holder(kind, name, path, obj, kinds):
    """A holder dict for a loader or iterator ``obj``, or None when it keeps no worker."""
    what = _kind(type(obj), kinds)
    if what is None:
        return None
    if what == "iterator":
        iterators = [obj]
        persistent = vars_of(obj).get("_persistent_workers") is True
    else:
        attrs = vars_of(obj)
        persistent = attrs.get("persistent_workers") is True
        iterators = [
            v for v in list(attrs.values())[:MAX_LEVEL_ITEMS] if _kind(type(v), kinds) == "iterator"
        ]
    pids = [pid for it in iterators for pid in worker_pids(it)]
    if not pids:
        return None
    return {
        "kind": kind,
        "name": name,
        "path": short(path, 300),
        "className": short(peek.type_name(type(obj)), 100),
        "persistent": persistent,
        "pids": pids,
    }


def _inside(value):
    """(suffix, item) pairs one level inside a root: container items, object attributes."""
    cls = type(value)
    if cls is dict:
        for key, item in list(value.items())[:MAX_LEVEL_ITEMS]:
            # only keys whose repr runs no user code
            yield "[" + peek.key_text(key) + "]", item
    elif cls is list or cls is tuple:
        for i, item in enumerate(value[:MAX_LEVEL_ITEMS]):
            yield f"[{i}]", item
    elif not issubclass(cls, type):  # type(), not isinstance: never a user's __class__
        for attr, item in list(vars_of(value).items())[:MAX_LEVEL_ITEMS]:
            if type(attr) is str:
                yield "." + attr, item


def _candidates(kind, name, value, kinds):
    """[(holder dict, object)] for one root: the root itself, else what is one level in it."""
    found = _holder(kind, name, name, value, kinds)
    if found is not None:
        return [(found, value)]
    out = []
    for suffix, item in _inside(value):
        hit = _holder(kind, name, name + suffix, item, kinds)
        if hit is not None:
            out.append((hit, item))
    return out


def worker_holders(roots_by_kind):
    """The loaders and iterators that keep worker processes alive (list of holder dicts:
    ``kind`` "variable"/"output", ``name`` the root, ``path``, ``className``, ``persistent``,
    ``pids``), from ``roots_by_kind``: [(kind, [(name, value)])]. [] at once while torch's
    dataloader module is not imported."""
    if DATALOADER_MODULE not in sys.modules:
        return []
    kinds = {}
    out = []
    seen = set()
    for kind, pairs in roots_by_kind:
        for name, value in pairs:
            if len(out) >= MAX_HOLDERS:
                return out
            if type(name) is not str:
                continue
            try:
                candidates = _candidates(kind, name, value, kinds)
            except Exception:
                continue  # an object that breaks even these reads holds no worker we can name
            for hit, obj in candidates:
                key = (id(obj), hit["name"])
                if key not in seen:
                    seen.add(key)
                    out.append(hit)
    return out
