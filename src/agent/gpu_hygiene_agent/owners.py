"""Owner objects: what a user variable that is a plain object (a hand-written trainer, a
Hugging Face ``Trainer``, a Lightning ``Trainer``) holds through its attributes, by kind, with
bytes per device (``owners`` of the inventory). Facts only: the browser decides which of its
models is the model and which are copies (``src/analysis/findings/owner-object.ts``).

Its own attributes are looked at first (``vars()`` of the object, never its class's attribute
hooks), in attribute order; then, breadth first, what they hold through plain objects and plain
containers, up to ``MAX_OWNER_DEPTH`` hops below the owner (a Lightning ``Trainer`` holds its
model and optimizers as ``trainer._accelerator_connector._strategy_flag._model`` and
``..._optimizers[0]``), within ``OWNER_VISITS``/``OWNER_EXAMINED`` per owner and
``OWNER_VISITS_TOTAL``/``OWNER_EXAMINED_TOTAL`` per inventory. Modules, optimizers and tensors
are never entered. What is found:

- ``model`` (a module: the top-level model it is in, its bytes and its gradients'), once per
  listed model, at its shortest path;
- ``optimizer`` (a ``torch.optim.Optimizer``: the tensors of its ``state``, not the
  parameters), once per state (a wrapper such as accelerate's ``AcceleratedOptimizer`` shares
  its inner optimizer's);
- ``tensor``: the tensors under one of the owner's own attributes (itself, a plain container
  of them, or further down), reported under that attribute.

Each storage is counted once per owner, the first holding found (shallowest, then in attribute
order) gets it."""

from collections import deque

from . import peek
from .limits import (
    MAX_OWNER_ATTRS,
    MAX_OWNER_DEPTH,
    MAX_OWNER_ITEMS,
    MAX_OWNERS,
    OWNER_EXAMINED,
    OWNER_EXAMINED_TOTAL,
    OWNER_VISITS,
    OWNER_VISITS_TOTAL,
)
from .models import _unique_tensors, tensor_grad
from .paths import key_label
from .storage import bytes_by_device, storage_of
from .util import LEAF_IDS, OPAQUE_TYPES, PLAIN_CONTAINERS, PLAIN_IDS, short, vars_of


def _is_plain_object(value, tensor_type, module_type):
    """Whether ``value`` can own things through attributes: not a leaf, a Python module,
    class or function, a container, a tensor or a module."""
    cls = type(value)
    if id(cls) in LEAF_IDS or issubclass(cls, OPAQUE_TYPES):
        return False
    return not issubclass(cls, (tensor_type, module_type, *PLAIN_CONTAINERS))


def _add(tensor, storages, seen):
    measured = storage_of(tensor)
    if measured is not None and measured.key not in seen:
        seen.add(measured.key)
        storages[measured.key] = measured.nbytes


def _is(value, cls):
    """``isinstance`` by the value's type only (an object's ``__class__`` may be a property)."""
    return cls is not None and issubclass(type(value), cls)


def _tensors_of(value, tensor_type):
    """Tensors of an attribute value: itself, or the items of a plain container (one level,
    at most ``MAX_OWNER_ITEMS``)."""
    if _is(value, tensor_type):
        return [value]
    if id(type(value)) in PLAIN_IDS:
        items = value.values() if type(value) is dict else value
        out = []
        for i, item in enumerate(items):
            if i >= MAX_OWNER_ITEMS:
                break
            if _is(item, tensor_type):
                out.append(item)
        return out
    return []


def optimizer_state(optimizer, optimizer_type):
    """An optimizer's ``state`` dict, read from instance dicts only: its own (``Optimizer``
    sets it in ``__init__``), else that of the optimizer it wraps (accelerate's
    ``AcceleratedOptimizer``, Lightning's ``LightningOptimizer``: their ``state`` is a property
    or ``__getattr__`` of theirs, never called); None when neither has one."""
    attrs = vars_of(optimizer)
    state = attrs.get("state")
    if peek.is_a(state, dict):
        return state
    for value in list(attrs.values())[:MAX_OWNER_ATTRS]:
        if value is not optimizer and peek.is_a(value, optimizer_type):
            state = vars_of(value).get("state")
            if peek.is_a(state, dict):
                return state
    return None


def _optimizer_state(optimizer, tensor_type, params, seen, optimizer_type=None):
    storages = {}
    state = optimizer_state(optimizer, optimizer_type)
    values = dict.values(state) if peek.is_a(state, dict) else ()
    for i, entry in enumerate(values):
        if i >= MAX_OWNER_ITEMS:
            break
        for tensor in _tensors_of(entry, tensor_type):
            measured = storage_of(tensor)
            if measured is not None and measured.key not in params:
                _add(tensor, storages, seen)
    return storages, state


def _grads(module):
    """{StorageKey: nbytes} of the gradients of a module's parameters."""
    storages = {}
    # from ``_parameters`` (models._unique_tensors), never an overridden ``parameters()``
    parameters, _buffers = _unique_tensors(module)
    for p in parameters.values():
        grad = tensor_grad(p)
        if grad is not None:
            _add(grad, storages, set())  # also in the model's bytes: a subset of them
    return storages


def _children(obj):
    """(label, value) of what ``obj`` holds: the items of a plain container (``[0]``,
    ``['key']``, at most ``MAX_OWNER_ITEMS``), else its instance attributes (``.name``, at most
    ``MAX_OWNER_ATTRS``)."""
    cls = type(obj)
    if cls is dict:
        items = list(obj.items())[:MAX_OWNER_ITEMS]
        return [(key_label(k), v) for k, v in items]
    if cls is list or cls is tuple:
        return [(f"[{i}]", v) for i, v in enumerate(obj[:MAX_OWNER_ITEMS])]
    if cls is set or cls is frozenset:
        return [("{\u2026}", v) for i, v in zip(range(MAX_OWNER_ITEMS), obj)]
    return [(f".{k}", v) for k, v in list(vars_of(obj).items())[:MAX_OWNER_ATTRS] if type(k) is str]


class _Budget:
    """What the owner walks of one inventory may still spend (``OWNER_*_TOTAL``)."""

    def __init__(self):
        self.visits = OWNER_VISITS_TOTAL
        self.examined = OWNER_EXAMINED_TOTAL


class _OwnerWalk:
    """The holdings of one owner object (``holds``, in the order found) and the listed models
    among them (``models``)."""

    def __init__(self, ctx, budget):
        self.ctx = ctx
        self.budget = budget
        self.holds = []
        self.seen = set()  # storages counted for this owner
        self.models = set()  # listed keys of the models held
        self.states = set()  # ids of the optimizer states counted
        self.groups = {}  # path of an own attribute -> its tensor hold
        self.queued = set()  # ids of the objects expanded or waiting to be

    def run(self, name, value):
        self.queued.add(id(value))
        queue = deque()
        self.expand(value, short(name), 0, None, queue)
        visits = examined = 0
        budget = self.budget
        while queue:
            if visits >= OWNER_VISITS or examined >= OWNER_EXAMINED:
                break
            if budget.visits <= 0 or budget.examined <= 0:
                break
            obj, path, depth, top = queue.popleft()
            visits += 1
            budget.visits -= 1
            n = self.expand(obj, path, depth, top, queue)
            examined += n
            budget.examined -= n
        return self.holds, self.models

    def expand(self, obj, path, depth, top, queue):
        """Look at what ``obj`` (``depth`` hops below the owner, at ``path``) holds; queue what
        can hold more. ``top``: (path, value) of the owner's own attribute it is under.
        Returns how many references were looked at."""
        ctx = self.ctx
        tensor_type = ctx["tensor"]
        module_type = ctx["module"]
        optimizer_type = ctx["optimizer"]
        container = id(type(obj)) in PLAIN_IDS
        children = _children(obj)
        for label, item in children:
            if id(type(item)) in LEAF_IDS:
                continue
            if container and _is(item, tensor_type):
                continue  # counted when the container was found
            item_path = short(path + label)
            item_top = top if top is not None else (item_path, item)
            if _is(item, module_type):
                self.model(item, item_path)
            elif _is(item, optimizer_type):
                self.optimizer(item, item_path)
            elif _is(item, tensor_type) or id(type(item)) in PLAIN_IDS:
                self.tensors(_tensors_of(item, tensor_type), item_top)
                if id(type(item)) in PLAIN_IDS:
                    self.push(item, item_path, depth + 1, item_top, queue)
            elif _is_plain_object(item, tensor_type, module_type):
                self.push(item, item_path, depth + 1, item_top, queue)
        return len(children)

    def push(self, item, path, depth, top, queue):
        key = id(item)
        if depth >= MAX_OWNER_DEPTH or key in self.queued or key in self.ctx["skip"]:
            return
        self.queued.add(key)
        queue.append((item, path, depth, top))

    def model(self, module, path):
        ctx = self.ctx
        top = ctx["owner"](module)
        key = ctx["listed"](id(top))
        entry = ctx["stats"].get(id(top))
        if key in self.models or entry is None or not entry.has_tensors:
            return
        self.models.add(key)
        fresh = {k: n for k, n in entry.storages.items() if k not in self.seen}
        self.seen.update(entry.storages)
        self.holds.append(
            {
                "path": path,
                "kind": "model",
                "id": ctx["ids"].get(id(top), hex(id(top))),
                "className": short(peek.type_name(type(top))),
                "parameters": entry.parameters,
                "bytes": bytes_by_device(fresh),
                "grads": bytes_by_device(_grads(top)),
            }
        )

    def optimizer(self, optimizer, path):
        storages, state = _optimizer_state(
            optimizer, self.ctx["tensor"], self.ctx["params"], self.seen, self.ctx["optimizer"]
        )
        key = id(state) if peek.is_a(state, dict) else id(optimizer)
        if key in self.states:
            return  # a wrapper of an optimizer already counted (or the other way round)
        self.states.add(key)
        self.holds.append(
            {
                "path": path,
                "kind": "optimizer",
                "className": short(peek.type_name(type(optimizer))),
                "bytes": bytes_by_device(storages),
            }
        )

    def tensors(self, tensors, top):
        params = self.ctx["params"]
        storages = {}
        for tensor in tensors:
            measured = storage_of(tensor)
            if measured is not None and measured.key not in params:
                _add(tensor, storages, self.seen)
        if not storages:
            return
        path, value = top
        hold = self.groups.get(path)
        if hold is None:
            hold = self.groups[path] = {
                "path": path,
                "kind": "tensor",
                "className": short(peek.type_name(type(value))),
                "bytes": {},
            }
            self.holds.append(hold)
        for device, nbytes in bytes_by_device(storages).items():
            hold["bytes"][device] = hold["bytes"].get(device, 0) + nbytes


def owner_facts(variables, torch, owner, listed, stats, params, ids, skip=(), hopeless=()):
    """The ``owners`` of the inventory ([dict], at most ``MAX_OWNERS``): the user variables
    (``variables``: [(name, value)]) that are plain objects holding at least one model through
    their attributes. ``owner(module)``: its top-level model; ``listed(id)``: the listed model a
    top belongs to; ``stats``: {id(top): ModelStats}; ``params``: every live model's storages;
    ``ids``: {id(top): its protocol id}; ``skip``: ids of objects never entered (namespaces,
    the kernel's machinery); ``hopeless``: names of the variables whose full holder walk
    reached no module (not looked at)."""
    ctx = {
        "tensor": torch.Tensor,
        "module": torch.nn.Module,
        "optimizer": getattr(getattr(torch, "optim", None), "Optimizer", None),  # torch's own
        "owner": owner,
        "listed": listed,
        "stats": stats,
        "params": params,
        "ids": ids,
        "skip": skip,
    }
    budget = _Budget()
    out = []
    for name, value in variables:
        if len(out) >= MAX_OWNERS:
            break
        if name in hopeless:
            continue
        try:
            if not _is_plain_object(value, ctx["tensor"], ctx["module"]):
                continue
            holds, models = _OwnerWalk(ctx, budget).run(name, value)
        except Exception:
            continue
        if models:
            out.append(
                {
                    "name": short(name),
                    "className": short(peek.type_name(type(value))),
                    "holds": holds,
                }
            )
    return out
