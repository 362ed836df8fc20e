"""Graph holders: user variables that keep autograd graphs alive (``losses.append(loss)``
instead of ``loss.item()``), and what dropping those graphs would free."""

import contextlib
import itertools
from typing import NamedTuple

from . import peek
from .fingerprint import shallow
from .limits import GRAPH_ITEMS, GRAPH_ITEMS_TOTAL, GRAPH_NODES, MAX_GRAPH_HOLDERS
from .models import grad_fn, is_leaf, tensor_slot
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
    saved: int  # of ``storages``, those saved for backward (not the tensors' own)


_SAVED_NAMES = {}  # autograd node type -> ((its "_saved_*" name, its "_raw_" twin or None),)


def saved_names(node_type):
    """The ``_saved_*`` attribute names of an autograd node type, each with the name of its
    ``_raw_saved_*`` twin where the type has one (a tensor slot), cached: ((name, raw or
    None),)."""
    names = _SAVED_NAMES.get(node_type)
    if names is None:
        try:
            found = set(dir(node_type))
            names = tuple(
                (a, "_raw" + a if "_raw" + a in found else None)
                for a in sorted(found)
                if a.startswith("_saved_")
            )
        except Exception:
            names = ()
        _SAVED_NAMES[node_type] = names
    return names


def saved_tensors(node, name, raw, tensor_type):
    """The tensors a node saved in slot ``name`` (list), read without unpacking them: a
    ``_raw_saved_*`` ``SavedTensor``'s ``data`` is what autograd stored, the tensor itself or,
    under ``saved_tensors_hooks`` (``save_on_cpu``, offloading), the object the pack hook made;
    its tensors are counted where they are (a CPU copy), and the unpack hook, the user's code,
    never runs. Only where torch has no ``SavedTensor.data`` (older releases) is the slot read
    the plain way, which unpacks. Empty once backward freed the slot."""
    if raw is not None:
        try:
            slot = getattr(node, raw)
        except Exception:
            return []
        items = slot if type(slot) is tuple or type(slot) is list else (slot,)
        out = []
        for item in items:
            try:
                data = item.data
            except AttributeError:
                break  # no SavedTensor.data on this torch: read the slot below
            except Exception:
                continue
            if type(data) is tuple or type(data) is list:
                out.extend(t for t in data if peek.is_a(t, tensor_type))
            elif peek.is_a(data, tensor_type):
                out.append(data)
        else:
            return out
    try:
        saved = getattr(node, name)
    except Exception:
        return []  # freed by backward, or not a tensor slot
    if peek.is_a(saved, tensor_type):
        return [saved]
    if type(saved) is tuple or type(saved) is list:
        return [t for t in saved if peek.is_a(t, tensor_type)]
    return []


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


def graph_holders(torch, variables, roots, params, reached, graphless):
    """User variables and output-cache entries keeping autograd graphs alive (the ``graphs``
    of an inventory), as ``GraphHolders``.

    ``variables``: [(name, value)] user variables; ``roots``: [(kind, name, walk.Reach)] of the
    roots' walks; ``params``: {storage key: nbytes} of the live models; ``reached``: {storage
    key: {(kind, name)}} of the roots' walks; ``graphless``: the memo of the last inventory
    (``GraphHolders.graphless``).

    A variable counts when it is a tensor with ``grad_fn`` whose graph saves tensors, or a
    list/tuple/dict/set holding such tensors directly or in containers nested once; else when
    its walk reached such tensors anywhere (an attribute, ``h.loss``; a container nested
    deeper). An output-cache object (``Out[7]``, ``_7``, ``_``: one entry for all its names)
    counts when its walk reached such tensors: a displayed ``sum(losses) / len(losses)`` keeps
    every graph of ``losses``. Bytes estimate what dropping the graphs would free: the tensors
    plus the unique storages the graphs' nodes saved for backward (``_saved_*``), without what
    lives anyway (leaf tensors that require grad, the models' storages, and storages another
    root reaches, such as a saved input batch ``xb``). Two holders whose graphs keep the same
    storages name each other in ``sharedWith``. At most ``GRAPH_NODES`` nodes per
    inventory."""
    tensor_type = torch.Tensor
    budget = [GRAPH_NODES]
    items_left = [GRAPH_ITEMS_TOTAL]
    memo = {}
    cut = False
    out = []
    walks = {(kind, name): found for kind, name, found in roots}
    for name, value in variables:
        if len(out) >= MAX_GRAPH_HOLDERS:
            cut = True
            break
        cls = type(value)
        found = []
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
                # not searched again; what the roots' walk found deeper still counts (below)
                memo[name] = sig
                cut = True
                found, path = [], name
            else:
                found, label, many = grad_tensors(value, tensor_type, items_left)
                cut = cut or many
                if many and not found:
                    memo[name] = sig
                path = name + (label or "")
        else:
            container = "object"
        walk_cut = False
        if not found:
            walked = walks.get(("variable", name))
            if walked is None or not walked.graphs:
                continue
            found, path, walk_cut = walked.graphs, name + _suffix(walked), walked.graphs_cut
        entry, partial = _entry(found, tensor_type, {("variable", name)}, params, reached, budget)
        cut = cut or partial or walk_cut
        if entry is not None and walk_cut:
            entry["truncated"] = True
        if entry is None:
            continue
        entry.update(name=short(name), path=short(path), container=container)
        out.append(entry)
    by_object = {}  # id(Reach) -> the output roots' names of that object
    for kind, name, found in roots:
        if kind == "output" and found.graphs:
            names = by_object.setdefault(id(found), (found, []))[1]
            if name not in names:  # ``_`` is in the namespace and the display hook
                names.append(name)
    for found, names in by_object.values():
        if len(out) >= MAX_GRAPH_HOLDERS:
            cut = True
            break
        me = {("output", n) for n in names}
        entry, partial = _entry(found.graphs, tensor_type, me, params, reached, budget)
        cut = cut or partial or found.graphs_cut
        if entry is None:
            continue
        if found.graphs_cut:
            entry["truncated"] = True
        # ``Out[N]`` first: the name that stays when the next cells move ``_``
        name = next((n for n in names if n.startswith("Out[")), names[0])
        entry.update(
            name=short(name),
            path=short(name + _suffix(found)),
            container=found.root_plain or "object",
            root="output",
            names=[short(n) for n in names],
            valueId=hex(found.root_id),
        )
        out.append(entry)
    shared_with(out)
    return GraphHolders(out, cut, memo)


def _suffix(walked):
    """The path suffix of a walk's graph tensors (``walk.Reach``): ``""`` only where they are
    the root or its direct items (what a fix cell can act on); else where they sit (``.loss``,
    ``['val']['epoch']``), or an ellipsis (U+2026) where that is no one place (two
    attributes)."""
    if walked.graph_direct:
        return ""
    return walked.graph_path or "\u2026"


def _entry(found, tensor_type, me, params, reached, budget):
    """(the ``graphs`` entry of the tensors ``found`` as ``me`` holds them, without its names,
    or None when their graphs save nothing (backward already ran); whether the node budget ran
    out). ``me``: the roots ({(kind, name)}) of the holder."""

    def lives_anyway(storage):
        return storage in params or not reached.get(storage, me) <= me

    storages, nodes, partial, saved = graph_bytes(found, tensor_type, lives_anyway, budget)
    if not saved:
        return None, partial  # graphs that save nothing: backward ran, or a view of a leaf
    fn = grad_fn(found[0])
    return {
        "count": len(found),
        "gradFn": short(peek.type_name(type(fn)), 100),
        "bytes": bytes_by_device(storages),
        "nodes": nodes,
        "truncated": partial,
        "storages": storages,  # for the census; removed before sending
    }, partial


def shared_with(entries):
    """Give each of ``entries`` (``graphs`` entries with ``storages``) whose graphs keep a
    storage another entry's also keep ``sharedWith``: those entries' names (list, at most 20)."""
    owners = {}
    for entry in entries:
        for storage in entry["storages"]:
            owners.setdefault(storage, []).append(entry)
    for entry in entries:
        others = {}
        for storage in entry["storages"]:
            for other in owners[storage]:
                if other is not entry:
                    others[id(other)] = other["name"]
        if others:
            entry["sharedWith"] = list(others.values())[:20]


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
        if is_leaf(tensor) and tensor_slot(tensor, "requires_grad", False):
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
    own = len(storages)
    nodes = 0
    while stack:
        if budget[0] <= 0:
            return GraphBytes(storages, nodes, True, len(storages) - own)
        budget[0] -= 1
        node = stack.pop()
        nodes += 1
        for name, raw in saved_names(type(node)):
            for saved in saved_tensors(node, name, raw, tensor_type):
                with contextlib.suppress(Exception):
                    add(saved)
        try:
            nexts = node.next_functions
        except Exception:
            nexts = ()
        for nxt, _index in nexts:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return GraphBytes(storages, nodes, False, len(storages) - own)
