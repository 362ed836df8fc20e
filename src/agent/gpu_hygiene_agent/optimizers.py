"""The optimizers user variables name (the ``optimizers`` of an inventory), and those that
outlive their model. ``del model`` with
``gc.collect()`` and ``torch.cuda.empty_cache()`` frees nothing while the optimizer is alive:
its ``param_groups`` keep every parameter, each parameter its ``.grad``, and its ``state`` the
moments (AdamW: two tensors the size of each parameter), so about four times the weights stay
with no module left to show them. A learning-rate scheduler (``sched.optimizer``), an
``accelerate`` wrapper and the like keep the optimizer in turn: they are named with it, since
deleting the optimizer alone would free nothing while they hold it.

Everything is read from instance ``__dict__``s and plain containers (``util.vars_of``), the
parameters' gradients through torch's own slot (``models.tensor_grad``): no property, no
``state_dict()``, no user code."""

import collections
import itertools

from . import peek
from .limits import MAX_OPTIMIZER_PARAMS, MAX_OPTIMIZERS
from .models import tensor_grad
from .storage import bytes_by_device, storage_of
from .util import LEAF_IDS, PLAIN_IDS, short, vars_of

_PARTS = ("parameters", "gradients", "state")
_OPTIMIZER, _OBJECT, _NOTHING = "optimizer", "object", "nothing"
_KINDS = {}  # id(class) -> (class, what it is here): one MRO walk per class, not per variable
_DEFAULTDICT = collections.defaultdict


def _plain_dict(value):
    """A dict or defaultdict exactly (by identity: a subclass, or a metaclass's ``==``, may
    run code)."""
    cls = type(value)
    return cls is dict or cls is _DEFAULTDICT


def _parameters(attrs, tensor_type):
    """The parameters of an optimizer's ``param_groups`` (list of tensors, each once, at most
    ``MAX_OPTIMIZER_PARAMS``)."""
    groups = attrs.get("param_groups")
    if type(groups) is not list:
        return []
    out = []
    seen = set()
    for group in groups:
        params = group.get("params") if type(group) is dict else None
        if type(params) not in (list, tuple):
            continue
        for param in params:
            if len(out) >= MAX_OPTIMIZER_PARAMS:
                return out
            if id(param) not in seen and peek.is_a(param, tensor_type):
                seen.add(id(param))
                out.append(param)
    return out


def _add(storages, tensor):
    measured = storage_of(tensor) if tensor is not None else None
    if measured is not None:
        storages[measured.key] = measured.nbytes


def _state(attrs, tensor_type, storages):
    """Add to ``storages`` the optimizer's state tensors (``state``: a dict keyed by parameter,
    whose keys are never hashed or compared here)."""
    state = attrs.get("state")
    if not _plain_dict(state):
        return
    for entry in itertools.islice(dict.values(state), MAX_OPTIMIZER_PARAMS):
        if type(entry) is not dict:
            continue
        for value in entry.values():
            if peek.is_a(value, tensor_type):
                _add(storages, value)


def _refers_to(value, optimizer):
    """Whether the user object ``value`` keeps ``optimizer`` in one of its own attributes
    (a scheduler's ``optimizer``, a wrapper's), or, for torch's ``GradScaler``, has state
    for it (``_per_optimizer_states`` is keyed by the optimizer's id)."""
    attrs = vars_of(value)
    if not attrs:
        return False
    for item in itertools.islice(attrs.values(), 200):
        if item is optimizer:
            return True
    states = attrs.get("_per_optimizer_states")
    return _plain_dict(states) and dict.__contains__(states, id(optimizer))


def _kind(cls, optimizer_type, tensor_type):
    """What a variable of class ``cls`` can be here: an optimizer, an object whose attributes
    may keep one, or nothing of either (a number, a string, a plain container, a tensor)."""
    entry = _KINDS.get(id(cls))
    if entry is not None and entry[0] is cls:
        return entry[1]
    if id(cls) in LEAF_IDS or id(cls) in PLAIN_IDS:
        kind = _NOTHING
    else:
        mro = peek.mro(cls)
        if any(k is optimizer_type for k in mro):
            kind = _OPTIMIZER
        elif any(k is tensor_type for k in mro):
            kind = _NOTHING
        else:
            kind = _OBJECT
    _KINDS[id(cls)] = (cls, kind)
    return kind


def optimizer_rows(variables, torch, params, reached):
    """The ``optimizers`` rows (list of dicts, largest first, at most ``MAX_OPTIMIZERS``): one
    per user variable that names a ``torch.optim.Optimizer``, with how many of its parameters
    are orphaned: in no live model (``params``: the live models' storages,
    ``models.StatsCache.union``) and reached by no root but the optimizer's own variable and
    the variables that keep it (``reached``: {StorageKey: {(kind, name)}} of the roots'
    walks). The model was deleted or rebound since the optimizer was made; parameters a
    variable names (``w = torch.randn(..., requires_grad=True)``, ``opt = SGD([w])``) are
    not orphaned.

    Row: {name, className, parameters: int (in its param_groups), orphaned: int (of those, in
    no live model), bytes: {device: int} (its state, and the orphaned parameters and their
    gradients, each storage once: what deleting it returns unless another holder keeps
    them), parts: {parameters|gradients|state: {device: int}} (a storage in the first part it
    belongs to), referencedBy: [names of the other user variables that keep the optimizer:
    schedulers, wrappers, a GradScaler with state for it]}."""
    optim = getattr(torch, "optim", None)
    optimizer_type = getattr(optim, "Optimizer", None) if optim is not None else None
    tensor_type = getattr(torch, "Tensor", None)
    if optimizer_type is None or tensor_type is None:
        return []
    # after every cell, on every name: one dict lookup per variable, an MRO walk per class
    cache = _KINDS
    found = []
    for name, value in variables:
        cls = type(value)
        entry = cache.get(id(cls))
        if entry is None or entry[0] is not cls:
            _kind(cls, optimizer_type, tensor_type)
            entry = cache[id(cls)]
        if entry[1] is _OPTIMIZER:
            found.append((name, value))
    if not found:
        return []
    # only objects (and other optimizers: a wrapper) can keep an optimizer in an attribute
    objects = [
        (name, value)
        for name, value in variables
        if _kind(type(value), optimizer_type, tensor_type) is not _NOTHING
    ]
    rows = []
    for name, value in found:
        keepers = [
            other for other, item in objects if item is not value and _refers_to(item, value)
        ][:8]
        own = {("variable", n) for n in (name, *keepers)}
        attrs = vars_of(value)
        parameters = _parameters(attrs, tensor_type)
        parts = {part: {} for part in _PARTS}
        orphaned = set()
        for param in parameters:
            measured = storage_of(param)
            if measured is None or measured.key in params:
                continue
            if not own.issuperset(reached.get(measured.key, ())):
                continue  # another root holds it: a named parameter, not a dead model's
            orphaned.add(id(param))
            parts["parameters"][measured.key] = measured.nbytes
            _add(parts["gradients"], tensor_grad(param))
        _state(attrs, tensor_type, parts["state"])
        every = {}
        for part in _PARTS:  # a storage in two parts (a tied gradient) counts in the first
            for key in list(parts[part]):
                if key in every:
                    del parts[part][key]
                else:
                    every[key] = parts[part][key]
        rows.append(
            {
                "name": short(name),
                "className": short(peek.type_name(type(value))),
                "parameters": len(parameters),
                "orphaned": len(orphaned),
                "bytes": bytes_by_device(every),
                "parts": {part: bytes_by_device(parts[part]) for part in _PARTS},
                "referencedBy": [short(other) for other in keepers],
            }
        )
    rows.sort(key=lambda row: -sum(row["bytes"].values()))
    return rows[:MAX_OPTIMIZERS]
