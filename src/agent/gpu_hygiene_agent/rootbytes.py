"""Bytes per root: every storage counted once under the first root that reaches it (``bytes``,
the attribution whose sum with ``unattributed`` is torch's allocated), what each root keeps alone
and with others (``sole``, ``shared``, ``sharedWith``), the ``hidden`` row of the models no root
reaches, and the largest loose tensors. Fed by ``census.build`` with the roots' walks; no walk of
its own.

A model whose storages no other model and no loose tensor shares (``solo_units``: nearly always)
is counted as one item with its bytes per device, not storage by storage: a root reaching ten
YOLOv8n models costs ten steps instead of ~3,600 (tally_roots + root_rows: 3.0 -> 0.3 ms per
inventory at 2e6 objects x 10 models, same figures)."""

from typing import NamedTuple

from .limits import HIDDEN_HOLDER, MAX_ROOTS, MAX_SHARED_WITH, MAX_TENSORS, UNKNOWN_HOLDER
from .util import short


class Loose(NamedTuple):
    """A big tensor under no model, for ``tensors``."""

    nbytes: int
    kind: str  # the root's kind
    path: str  # holder name + path suffix
    meta: dict  # paths.tensor_meta


class RootTally:
    """Bytes of one root while ``tally_roots`` counts them."""

    __slots__ = ("by_device", "holders", "kept", "models", "tensors")

    def __init__(self):
        self.by_device = {}  # device -> bytes first attributed to this root
        self.models = set()  # ids of the listed models it reaches
        self.tensors = 0  # storages under no model first attributed to it
        self.kept = {}  # item -> nbytes (None: a unit) of everything it keeps (``sharing``)
        self.holders = set()  # its holder keys (``holder_key``)


class Sharing(NamedTuple):
    """What one root keeps alone and with others (``sharing``)."""

    sole: dict  # device -> bytes no other holder keeps: what deleting it returns
    shared: dict  # device -> bytes it keeps that at least one other holder keeps too
    shared_with: list  # names of other roots keeping some of ``shared`` (variables first)


_SOLO = []  # [(keysets' values, their union, their overlap)] of the last ``solo_units``


def solo_units(keysets, extras):
    """The listed models whose storages are theirs alone (set of ids): in no other listed
    model's ``keeps`` and among no root's loose or graph storages (``extras``: a set), and at
    least one. ``keysets``: Parts.keysets. Every storage of such a model is kept by the same
    holders (those of the roots that reach the model), so the census counts it as one unit:
    its precomputed bytes in one step instead of each storage once per root. Sets' stored
    hashes keep these tests cheap (no StorageKey is hashed again), and the overlap of the
    models' sets is kept for the next call with the same sets (the measurements' own
    frozensets while the models are unchanged)."""
    sets = tuple(keysets.values())
    memo = _SOLO[0] if _SOLO else None
    same = memo is not None and len(memo[0]) == len(sets)
    if same and all(a is b for a, b in zip(memo[0], sets)):
        seen, overlap = memo[1], memo[2]
    else:
        seen = set()
        overlap = set()
        for keys in sets:
            if not seen.isdisjoint(keys):
                overlap |= seen & keys
            seen |= keys
        _SOLO[:] = [(sets, seen, overlap)]
    if extras:
        overlap = overlap | (seen & extras)
    return {key for key, keys in keysets.items() if keys and overlap.isdisjoint(keys)}


def _add_item(out, item, nbytes, sizes):
    """Add one ``kept`` item to ``out`` ({device: bytes}): a storage (``nbytes``) or a unit
    (``nbytes`` None: ``sizes[item]``)."""
    if nbytes is None:
        for device, size in sizes[item].items():
            out[device] = out.get(device, 0) + size
    else:
        out[item[0]] = out.get(item[0], 0) + nbytes


def tally_roots(roots, keeps, listed, owner, params, graph_storages, sizes=None, keysets=None):
    """Bytes per root, every storage counted once, in root order: ({(kind, name):
    RootTally}, attributed storages, {storage: Loose}, keepers: see ``keep``).

    With ``sizes`` and ``keysets`` (Parts.sizes / Parts.keysets) a model of ``solo_units`` is
    one item, its id, wherever a storage key would be (in ``kept`` with the value None,
    ``attributed`` and ``keepers``); ``sizes[id]`` are its bytes. The figures are those of the
    storages one by one: all of the unit's storages have the same keepers and are attributed
    together, and they would take one block of a root's ``kept``, where the unit is."""
    keepers = {}
    attributed = set()
    per_root = {}
    loose = {}
    found_extras = []  # per root: ({storage: nbytes} loose storages, graph storages or None)
    extras = set()
    for kind, name, found in roots:
        mine = {}
        for storage, (nbytes, via, _group, _big) in found.storages.items():
            if via is None and storage not in params:
                mine[storage] = nbytes
        graph = graph_storages.get((kind, name))
        found_extras.append((mine, graph))
        extras.update(mine)
        if graph:
            extras.update(graph)
    solo = solo_units(keysets, extras) if keysets is not None and sizes is not None else ()
    for (kind, name, found), (mine, graph) in zip(roots, found_extras):
        tally = per_root.get((kind, name))
        if tally is None:
            tally = per_root[(kind, name)] = RootTally()
        kept = {}
        for module, _suffix, _via, _rel in found.modules:
            home = listed(id(owner(module)))
            if home in keeps:
                tally.models.add(home)
                if home in solo:
                    kept[home] = None  # the unit: its bytes are sizes[home]
                else:
                    kept.update(keeps[home])
        storages = found.storages
        for storage, nbytes in mine.items():
            kept[storage] = nbytes
            if storage not in attributed:
                tally.tensors += 1
            big = storages[storage].big
            if big is not None and storage not in loose:
                loose[storage] = Loose(nbytes, kind, name + big.path, big.meta)
        if graph:
            kept.update(graph)
        tally.kept.update(kept)
        key = holder_key(kind, name, found)
        tally.holders.add(key)
        keep(keepers, key, name, kept)
        by_device = tally.by_device
        for item, nbytes in kept.items():
            if item not in attributed:
                attributed.add(item)
                _add_item(by_device, item, nbytes, sizes)
    return per_root, attributed, loose, keepers


def holder_key(kind, name, found):
    """Who a walked root is for sharing: a variable or a traceback frame by its name; an
    output-cache entry by the object it names (its ``Reach``: the walk of one object is done
    once), so that ``Out[7]``, ``_7`` and ``_`` naming one object are one holder (a cell's
    cache entries, dropped together)."""
    if kind == "output":
        return (kind, id(found))
    return (kind, name)


def keep(keepers, key, name, kept):
    """Note in ``keepers`` ({StorageKey or unit: {holder key: the first root name of that
    holder}}) that the holder ``key`` (root ``name``) keeps the items ``kept``."""
    for storage in kept:
        holders = keepers.get(storage)
        if holders is None:
            keepers[storage] = {key: name}
        elif key not in holders:
            holders[key] = name


def sharing(per_root, keepers, sizes=None):
    """{(kind, name): Sharing} from the roots' ``kept`` items and ``keepers`` (``keep``), no
    new walk; every item once per root (``sizes``: the units' bytes, see ``tally_roots``)."""
    out = {}
    for root, tally in per_root.items():
        sole = {}
        shared = {}
        others = set()
        for storage, nbytes in tally.kept.items():
            holders = keepers.get(storage, ())
            if len(holders) > 1:
                _add_item(shared, storage, nbytes, sizes)
                if len(others) < 2 * MAX_SHARED_WITH:
                    others.update(n for k, n in holders.items() if k not in tally.holders)
            else:
                _add_item(sole, storage, nbytes, sizes)
        with_ = sorted(others, key=lambda n: (n.startswith("_") or n.startswith("Out["), n))
        out[root] = Sharing(sole, shared, [short(n) for n in with_[:MAX_SHARED_WITH]])
        tally.kept = {}
        tally.holders = set()
    return out


def root_rows(
    per_root, keeps, holders, attributed, truncated, cells=None, keepers=None, sizes=None
):
    """(roots, cut): the ``roots`` of the message, largest first, at most ``MAX_ROOTS``; the
    models no root reaches are one ``hidden`` row. ``cells``: {(kind, name): execution
    counts} of the output roots (``cells`` of their rows); ``keepers``: for ``sole`` and
    ``shared`` (``sharing``); ``sizes``: the units' bytes (``tally_roots``)."""
    cells = cells or {}
    shares = sharing(per_root, keepers or {}, sizes)
    hidden = {}
    hidden_models = set()
    for key, keep in keeps.items():
        if key in holders.paths:
            continue
        hidden_models.add(key)
        if key in attributed:  # a unit some root attributed already (all its storages)
            continue
        for storage, nbytes in keep.items():
            if storage not in attributed:
                attributed.add(storage)
                hidden[storage[0]] = hidden.get(storage[0], 0) + nbytes
    rows = []
    for (kind, name), tally in per_root.items():
        share = shares[(kind, name)]
        if tally.by_device or tally.models or share.sole or share.shared:
            row = {
                "kind": kind,
                "name": short(name),
                "bytes": tally.by_device,
                "sole": share.sole,
                "shared": share.shared,
                "sharedWith": share.shared_with,
                "models": len(tally.models),
                "tensors": tally.tensors,
            }
            if kind == "output":
                row["cells"] = sorted(cells.get((kind, name), ()))
            rows.append(row)
    if hidden_models:
        rows.append(
            {
                "kind": "hidden",
                "name": UNKNOWN_HOLDER if truncated else HIDDEN_HOLDER,
                "bytes": hidden,
                "sole": dict(hidden),
                "shared": {},
                "sharedWith": [],
                "models": len(hidden_models),
                "tensors": 0,
            }
        )
    rows.sort(key=lambda r: sum(r["bytes"].values()), reverse=True)
    cut = len(rows) > MAX_ROOTS
    del rows[MAX_ROOTS:]
    return rows, cut


def unattributed(rows, memory):
    """{device: allocated bytes no root row accounts for} (``memory``: devices.torch_memory())."""
    out = {}
    for device, (allocated, _reserved) in (memory or {}).items():
        total = sum(r["bytes"].get(device, 0) for r in rows)
        out[device] = max(0, allocated - total)
    return out


def loose_tensors(loose):
    """The ``tensors`` of the message: the largest loose tensors, at most ``MAX_TENSORS``."""
    largest = sorted(loose.items(), key=lambda item: item[1].nbytes, reverse=True)
    return [
        {
            "path": short(entry.path),
            "kind": entry.kind,
            "device": storage[0],
            "bytes": entry.nbytes,
            **entry.meta,
        }
        for storage, entry in largest[:MAX_TENSORS]
    ]
