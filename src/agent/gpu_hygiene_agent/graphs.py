"""Graph holders: user variables that keep autograd graphs alive (``losses.append(loss)``
instead of ``loss.item()``), and what dropping those graphs would free."""

import contextlib
import itertools
from typing import NamedTuple

from . import peek
from .fingerprint import shallow
from .limits import GRAPH_ITEMS, GRAPH_ITEMS_TOTAL, GRAPH_NODES, MAX_GRAPH_HOLDERS
from .paths import edge_label, key_label
from .storage import bytes_by_device, storage_of
from .util import PLAIN_IDS, short


class GraphHolders(NamedTuple):
    """What ``graph_holders`` found."""

    graphs: list  # ``graphs`` entries of the inventory, each with "storages" for the census
    cut: bool  # a bound was hit
    graphless: dict  # name -> shallow(value) of cut searches that found nothing (next memo)


class GradTensors(NamedTuple):
    tensors: list  # tensors with grad_fn
    label: object  # path suffix of the one nested container holding them all, or None
    cut: bool  # the items allowed were not enough


class GraphBytes(NamedTuple):
    storages: dict  # {StorageKey: nbytes} the graphs keep, without what lives anyway
    nodes: int  # autograd nodes visited
    cut: bool  # the node budget ran out


def grad_fn(tensor):
    """``tensor.grad_fn`` or None; never raises."""
    try:
        return tensor.grad_fn
    except Exception:
        return None


_SAVED_NAMES = {}  # autograd node type -> tuple of its "_saved_*" attribute names


def saved_names(node_type):
    """The ``_saved_*`` attribute names (tuple) of an autograd node type, cached."""
    names = _SAVED_NAMES.get(node_type)
    if names is None:
        try:
            names = tuple(a for a in dir(node_type) if a.startswith("_saved_"))
        except Exception:
            names = ()
        _SAVED_NAMES[node_type] = names
    return names


def size_hint(container):
    """Items in a container and in the containers nested in it, counted up to
    ``GRAPH_ITEMS + 1`` (int): enough to tell whether a search of ``GRAPH_ITEMS`` was cut."""
    total = len(container)
    values = container.values() if type(container) is dict else container
    for item in itertools.islice(values, GRAPH_ITEMS + 1):
        if total > GRAPH_ITEMS:
            break
        if id(type(item)) in PLAIN_IDS:
            total += len(item)
    return total


def graph_holders(torch, variables, params, reached, graphless):
    """User variables keeping autograd graphs alive (the ``graphs`` of an inventory), as
    ``GraphHolders``.

    ``variables``: [(name, value)] user variables; ``params``: {storage key: nbytes} of the
    live models; ``reached``: {storage key: {(kind, name)}} of the roots' walks;
    ``graphless``: the memo of the last inventory (``GraphHolders.graphless``). A variable
    counts when it is a tensor with ``grad_fn`` whose graph saves tensors, or a
    list/tuple/dict/set holding such tensors directly or in containers nested once. Bytes
    estimate what dropping the graphs would free: the tensors plus the unique storages the
    graphs' nodes saved for backward (``_saved_*``), without what lives anyway (leaf tensors
    that require grad, the models' storages, and storages another root reaches, such as a
    saved input batch ``xb``). At most ``GRAPH_NODES`` nodes per inventory."""
    tensor_type = torch.Tensor
    budget = [GRAPH_NODES]
    items_left = [GRAPH_ITEMS_TOTAL]
    memo = {}
    cut = False
    out = []
    for name, value in variables:
        if len(out) >= MAX_GRAPH_HOLDERS:
            cut = True
            break
        cls = type(value)
        if issubclass(cls, tensor_type):
            container = "tensor"
            found = [value] if grad_fn(value) is not None else []
            path = name
        elif id(cls) in PLAIN_IDS:
            container = peek.type_name(cls)
            # a big container whose cut search found nothing, unchanged one level deep
            # since: not searched again (as for the holder walk's fruitless roots)
            sig = shallow(value)
            if graphless.get(name) == sig:
                memo[name] = sig
                cut = True
                continue
            found, label, many = grad_tensors(value, tensor_type, items_left)
            cut = cut or many
            if many and not found:
                memo[name] = sig
            path = name + (label or "")
        else:
            continue
        if not found:
            continue
        me = {("variable", name)}

        def lives_anyway(storage, me=me):
            return storage in params or reached.get(storage, me) != me

        storages, nodes, partial = graph_bytes(found, tensor_type, lives_anyway, budget)
        cut = cut or partial
        if container == "tensor" and len(storages) <= 1:
            continue  # a lone tensor whose graph saves nothing (backward already ran)
        fn = grad_fn(found[0])
        out.append(
            {
                "name": short(name),
                "path": short(path),
                "container": container,
                "count": len(found),
                "gradFn": short(peek.type_name(type(fn)), 100),
                "bytes": bytes_by_device(storages),
                "nodes": nodes,
                "truncated": partial,
                "storages": storages,  # for the census; removed before sending
            }
        )
    return GraphHolders(out, cut, memo)


def _items(container):
    if type(container) is dict:
        return container.items()
    return ((None, item) for item in container)


def grad_tensors(value, tensor_type, budget):
    """Tensors with ``grad_fn`` in a container and in containers nested once in it
    (``GradTensors``).

    Looks at no more than ``GRAPH_ITEMS`` items, nor than ``budget[0]`` (the items left to
    this inventory, decreased). ``label``: the path suffix of the nested container when all of
    them sit in one (``"['loss']"``), else None; ``cut`` when the items allowed were not
    enough."""
    found = []
    homes = set()
    label = None
    seen = 0
    allowed = max(0, min(GRAPH_ITEMS, budget[0]))
    for key, item in itertools.islice(_items(value), allowed):
        seen += 1
        cls = type(item)
        if issubclass(cls, tensor_type):
            if grad_fn(item) is not None:
                found.append(item)
                homes.add(None)
        elif id(cls) in PLAIN_IDS:
            for _inner_key, inner in itertools.islice(_items(item), allowed - seen):
                seen += 1
                if issubclass(type(inner), tensor_type) and grad_fn(inner) is not None:
                    if id(item) not in homes:
                        homes.add(id(item))
                        label = edge_label(value, item, None) if key is None else None
                        label = label or key_label(key)
                    found.append(inner)
        if seen >= allowed:
            break
    budget[0] -= seen
    if len(homes) != 1 or None in homes:
        label = None
    return GradTensors(found, label, seen >= allowed and seen < size_hint(value))


def graph_bytes(tensors, tensor_type, lives_anyway, budget):
    """``GraphBytes`` of the graphs behind ``tensors``; storages for which
    ``lives_anyway(key)`` is true are left out.

    ``grad_fn`` and ``next_functions`` hand out new Python objects for the nodes, so the
    visited ones are kept (``seen`` maps id to node) until the walk ends: otherwise a
    later node can be created at a freed one's address and be taken for visited."""
    storages = {}

    def add(tensor):
        if tensor.is_leaf and tensor.requires_grad:
            return
        measured = storage_of(tensor)
        if measured is not None and not lives_anyway(measured.key):
            storages[measured.key] = measured.nbytes

    stack = []
    seen = {}
    for tensor in tensors:
        with contextlib.suppress(Exception):
            add(tensor)
        fn = grad_fn(tensor)
        if fn is not None and id(fn) not in seen:
            seen[id(fn)] = fn
            stack.append(fn)
    nodes = 0
    while stack:
        if budget[0] <= 0:
            return GraphBytes(storages, nodes, True)
        budget[0] -= 1
        node = stack.pop()
        nodes += 1
        for attr in saved_names(type(node)):
            try:
                saved = getattr(node, attr)
            except Exception:
                continue  # freed by backward, or not a tensor slot
            if peek.is_a(saved, tensor_type):
                with contextlib.suppress(Exception):
                    add(saved)
            elif type(saved) is tuple or type(saved) is list:
                for item in saved:
                    if peek.is_a(item, tensor_type):
                        with contextlib.suppress(Exception):
                            add(item)
        try:
            nexts = node.next_functions
        except Exception:
            nexts = ()
        for nxt, _index in nexts:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return GraphBytes(storages, nodes, False)
