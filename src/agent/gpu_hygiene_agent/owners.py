"""Owner objects: what a user variable that is a plain object (a hand-written trainer, a
Hugging Face ``Trainer``, a Lightning ``Trainer``) holds through its own attributes, by kind,
with bytes per device (``owners`` of the inventory). Facts only: the browser decides which of
its models is the model and which are copies (``src/analysis/findings/owner-object.ts``).

One level of attributes is looked at (``vars()`` of the object, never its class's attribute
hooks): ``model`` (a module: the top-level model it is in, its bytes and its gradients'),
``optimizer`` (a ``torch.optim.Optimizer``: the tensors of its ``state``, not the parameters),
``tensor`` (a tensor, or a plain container of tensors one level deep). Each storage is counted
once per owner, in attribute order."""

from .limits import MAX_OWNER_ATTRS, MAX_OWNER_ITEMS, MAX_OWNERS
from .storage import bytes_by_device, storage_of
from .util import LEAF_TYPES, OPAQUE_TYPES, PLAIN_CONTAINERS, short, vars_of


def _is_plain_object(value, tensor_type, module_type):
    """Whether ``value`` can own things through attributes: not a leaf, a Python module,
    class or function, a container, a tensor or a module."""
    cls = type(value)
    if cls in LEAF_TYPES or issubclass(cls, OPAQUE_TYPES):
        return False
    return not issubclass(cls, (tensor_type, module_type, *PLAIN_CONTAINERS))


def _add(tensor, storages, seen):
    measured = storage_of(tensor)
    if measured is not None and measured.key not in seen:
        seen.add(measured.key)
        storages[measured.key] = measured.nbytes


def _tensors_of(value, tensor_type):
    """Tensors of an attribute value: itself, or the items of a plain container (one level,
    at most ``MAX_OWNER_ITEMS``)."""
    if isinstance(value, tensor_type):
        return [value]
    if type(value) in PLAIN_CONTAINERS:
        items = value.values() if isinstance(value, dict) else value
        out = []
        for i, item in enumerate(items):
            if i >= MAX_OWNER_ITEMS:
                break
            if isinstance(item, tensor_type):
                out.append(item)
        return out
    return []


def _optimizer_state(optimizer, tensor_type, params, seen):
    storages = {}
    state = getattr(optimizer, "state", None)
    values = state.values() if isinstance(state, dict) else ()
    for i, entry in enumerate(values):
        if i >= MAX_OWNER_ITEMS:
            break
        for tensor in _tensors_of(entry, tensor_type):
            measured = storage_of(tensor)
            if measured is not None and measured.key not in params:
                _add(tensor, storages, seen)
    return storages


def _grads(module):
    """{StorageKey: nbytes} of the gradients of a module's parameters."""
    storages = {}
    try:
        parameters = list(module.parameters())
    except Exception:
        return storages
    for p in parameters:
        grad = getattr(p, "_grad", None)  # .grad without the non-leaf warning
        if grad is not None:
            _add(grad, storages, set())  # also in the model's bytes: a subset of them
    return storages


def owner_facts(variables, torch, owner, listed, stats, params, ids):
    """The ``owners`` of the inventory ([dict], at most ``MAX_OWNERS``): the user variables
    (``variables``: [(name, value)]) that are plain objects holding at least one model through
    an attribute. ``owner(module)``: its top-level model; ``listed(id)``: the listed model a
    top belongs to; ``stats``: {id(top): ModelStats}; ``params``: every live model's storages;
    ``ids``: {id(top): its protocol id}."""
    tensor_type = torch.Tensor
    module_type = torch.nn.Module
    optimizer_type = getattr(getattr(torch, "optim", None), "Optimizer", None)
    out = []
    for name, value in variables:
        if len(out) >= MAX_OWNERS:
            break
        try:
            if not _is_plain_object(value, tensor_type, module_type):
                continue
            attrs = list(vars_of(value).items())[:MAX_OWNER_ATTRS]
        except Exception:
            continue
        holds = []
        seen = set()  # storages counted for this owner
        models = set()
        for attr, item in attrs:
            if not isinstance(attr, str) or type(item) in LEAF_TYPES:
                continue
            path = short(f"{name}.{attr}")
            if isinstance(item, module_type):
                top = owner(item)
                key = listed(id(top))
                entry = stats.get(id(top))
                if key in models or entry is None or not entry.has_tensors:
                    continue
                models.add(key)
                fresh = {k: n for k, n in entry.storages.items() if k not in seen}
                seen.update(entry.storages)
                holds.append(
                    {
                        "path": path,
                        "kind": "model",
                        "id": ids.get(id(top), hex(id(top))),
                        "className": short(type(top).__name__),
                        "parameters": entry.parameters,
                        "bytes": bytes_by_device(fresh),
                        "grads": bytes_by_device(_grads(top)),
                    }
                )
            elif optimizer_type is not None and isinstance(item, optimizer_type):
                state = _optimizer_state(item, tensor_type, params, seen)
                holds.append(
                    {
                        "path": path,
                        "kind": "optimizer",
                        "className": short(type(item).__name__),
                        "bytes": bytes_by_device(state),
                    }
                )
            else:
                storages = {}
                for tensor in _tensors_of(item, tensor_type):
                    measured = storage_of(tensor)
                    if measured is not None and measured.key not in params:
                        _add(tensor, storages, seen)
                if storages:
                    holds.append(
                        {
                            "path": path,
                            "kind": "tensor",
                            "className": short(type(item).__name__),
                            "bytes": bytes_by_device(storages),
                        }
                    )
        if models:
            out.append(
                {"name": short(name), "className": short(type(value).__name__), "holds": holds}
            )
    return out
