"""The census of one inventory: from what each root reaches (``walk.Reach``) and the forest of
models to the ``models`` (with holders and parts), ``roots`` (bytes per root, every storage
counted once), ``unattributed``, ``tensors`` (loose tensors) and ``graphs`` of the message.

``build`` runs the steps in order; each step is a function of what the earlier ones
returned. The roots are gone through three times: who reaches what (``attribute``), the parts
and kept storages of each model (``collect_parts``), the bytes per root (``tally_roots``)."""

from typing import NamedTuple

from . import devices, errors, graphs, models, optimizers, owners, peek, provenance, rootbytes
from .limits import (
    BIG_TENSOR,
    HIDDEN_HOLDER,
    MAX_HOLDERS,
    MAX_MODELS,
    MAX_PARTS,
    UNKNOWN_HOLDER,
)
from .storage import bytes_by_device
from .util import short


class Via(NamedTuple):
    """How a top-level model is reached only through another model."""

    key: int  # id of the top-level model above
    path: str  # path suffix from it


class Holders(NamedTuple):
    """Who reaches each top-level model and each storage (``attribute``)."""

    paths: dict  # id(top) -> {(kind, name): holder path}
    direct: set  # ids of tops some root reaches not through another model
    via_of: dict  # id(top) -> Via
    reached: dict  # StorageKey -> {(kind, name)} of the roots whose walk reached it
    pieces: set  # (id(top), kind, name): that root reaches only submodules of the top


class Parts(NamedTuple):
    """Parts and kept storages of the listed models (``collect_parts``); read-only: a model's
    ``keeps`` and ``sizes`` may be its measurement's own dicts."""

    lists: dict  # id(listed model) -> [part dict]
    keeps: dict  # id(listed model) -> {StorageKey: nbytes}: own storages and parts
    sizes: dict  # id(listed model) -> bytes_by_device(keeps[id])
    keysets: dict  # id(listed model) -> set or frozenset of the keys of keeps[id]


class Census(NamedTuple):
    models: list
    roots: list
    unattributed: dict
    tensors: list
    graphs: list
    owners: list  # owners.owner_facts
    kept_errors: list  # errors.kept_errors
    optimizers: list  # optimizers.optimizer_rows
    root_storages: object  # RootStorages when origins were asked for, else None
    cut: bool  # a message bound or a graph search bound was hit
    graphless: dict  # the graph search's memo for the next inventory


class RootStorages(NamedTuple):
    """What the roots keep, as plain ints kept between inventories to read the origins again
    (re-sent inventories: the same roots keep the same storages)."""

    by_root: dict  # (kind, row name) -> provenance.kept_storages; None: two roots cut alike
    shared: frozenset  # addresses of the storages more than one holder keeps


def shared_addresses(keepers, keeps):
    """The addresses of the storages more than one holder keeps (``keepers``:
    ``rootbytes.keep``'s, by holder key: ``Out[7]``, ``_7`` and ``_`` naming one object are one
    holder; an item that is a model's id stands for its storages, ``keeps[id]``)."""
    out = set()
    for item, holders in keepers.items():
        if len(holders) > 1:
            unit = keeps.get(item) if type(item) is int else None
            if unit is not None:
                out.update(key[1] for key in unit)
            else:
                out.add(item[1])
    return frozenset(out)


def owner_finder(parent):
    """``owner(module)``: the top-level model a module belongs to (``parent``: Forest.parent)."""

    def owner(module):
        current = module
        above = parent.get(id(current))
        hops = 0
        while above is not None and hops < 10000:
            current = above
            above = parent.get(id(current))
            hops += 1
        return current

    return owner


def attribute(roots, owner):
    """``Holders`` of the roots ([(kind, name, Reach)] in attribution order)."""
    paths = {}
    direct = set()
    via_of = {}
    reached = {}
    pieces = set()
    for kind, name, found in roots:
        for module, suffix, via, rel in found.modules:
            top = owner(module)
            held = paths.setdefault(id(top), {})
            via_top = owner(via) if via is not None else None
            # A root that reaches a submodule (a loop variable, a list of layers) keeps that
            # submodule alive, not the model above it: a piece holder, unless the same root
            # also reaches the model itself (or through another model's attributes).
            whole = module is top or (via_top is not None and via_top is not top)
            piece = (id(top), kind, name)
            if (kind, name) not in held:
                held[(kind, name)] = name + suffix
                if not whole:
                    pieces.add(piece)
            elif whole and piece in pieces:
                held[(kind, name)] = name + suffix
                pieces.discard(piece)
            if via_top is None or via_top is top:
                direct.add(id(top))
            elif id(top) not in via_of:
                via_of[id(top)] = Via(id(via_top), rel)
        for storage in found.storages:
            reached.setdefault(storage, set()).add((kind, name))
    return Holders(paths, direct, via_of, reached, pieces)


def lister(holders):
    """``listed(key)``: the listed model a top belongs to (its own id when it is listed). A
    top that some root reaches through another model's plain attributes is that model's part,
    also when a root names it directly (``ema = model.trainer.ema.ema``: ``ema`` is a holder of
    the part, not a second model). Models that reach each other (a cycle of ``via_of``) are
    one model where exactly one of them is reached by a root not through another model
    (``direct``): that one is listed, the others are its parts (Ultralytics 8.1-8.2's
    predictor: ``model.predictor.model`` is an ``AutoBackend`` that registers the wrapper's own
    network and keeps it as its plain attribute ``weights`` too); else they all stay listed."""
    via_of = holders.via_of
    direct = holders.direct

    def listed(key, hops=0):
        chain = [key]
        at = {key: 0}  # position in chain
        while key in via_of and hops < 100:
            key = via_of[key].key
            if key in at:
                # a cycle (with the start, or further on: a trainer's model under a wrapper
                # that reaches its predictor's backend and back): its one direct member, else
                # the member met first (listed: its own cycle leads back to it)
                homes = [k for k in chain[at[key] :] if k in direct]
                return homes[0] if len(homes) == 1 else key
            at[key] = len(chain)
            chain.append(key)
            hops += 1
        return key

    return listed


def part_holders(key, home, paths):
    """The holders of the part ``key`` that reach it other than through its listed model
    ``home`` ([holder dict]; ``paths``: Holders.paths)."""
    home_paths = paths.get(home, {})
    out = []
    for (kind, name), path in paths.get(key, {}).items():
        base = home_paths.get((kind, name))
        if base is not None and path.startswith(base) and path[len(base) : len(base) + 1] in ".[":
            continue
        out.append({"kind": kind, "name": short(name), "path": short(path)})
    return out[:MAX_HOLDERS]


def is_optimizer(obj, torch):
    try:
        return peek.is_a(obj, torch.optim.Optimizer)
    except Exception:
        return False


def part_path(key, home, via_of):
    """The path from the listed model ``home`` to the top ``key`` under it, through the tops
    between them (``.predictor.model.backend.model``: the predictor's AutoBackend, then its
    backend's copy), not only from the nearest one."""
    path = via_of[key].path
    current = via_of[key].key
    hops = 0
    while current != home and current in via_of and hops < 100:
        path = via_of[current].path + path
        current = via_of[current].key
        hops += 1
    return path


def collect_parts(tops, stats, roots, listed, via_of, params, torch, paths=None, totals=None):
    """``Parts``: models and tensors under a listed model, each storage counted once.
    ``stats``: {id(top): ModelStats}; ``params``: the storages of every live model;
    ``paths``: Holders.paths (for the holders that name a part directly); ``totals``:
    {id(top): models.Totals} (StatsCache.totals; computed here where missing)."""
    totals = _totals_getter(stats, totals)
    lists = {}
    # counted, keeps and sizes start as the measurements' own (read-only) containers and are
    # copied (own_counted, own_keeps) before their first change: most models gain nothing
    # (3,600 storages of ten models not copied three times per inventory)
    counted = {}  # id(listed) -> set of storage keys already in its bytes or parts
    keeps = {}
    sizes = {}
    owned = set()  # ("counted" or "keeps", id(listed)) of the containers copied already
    added = {}  # id(listed) -> set of the keys put in keeps after its own storages

    def own_counted(home):
        if ("counted", home) not in owned:
            owned.add(("counted", home))
            counted[home] = set(counted[home])
        return counted[home]

    def own_keeps(home):
        if ("keeps", home) not in owned:
            owned.add(("keeps", home))
            keeps[home] = dict(keeps[home])
            sizes[home] = dict(sizes[home])
        return keeps[home]

    for module, _order in tops:
        key = id(module)
        if key not in stats or not stats[key].has_tensors or listed(key) != key:
            continue
        counted[key] = totals(key).keys
        lists[key] = []
        keeps[key] = stats[key].storages
        sizes[key] = totals(key).by_device
    for module, _order in tops:
        key = id(module)
        home = listed(key)
        if home == key or home not in counted or key not in stats or not stats[key].has_tensors:
            continue
        storages = stats[key].storages
        fresh = {k: n for k, n in storages.items() if k not in counted[home]}
        own_counted(home).update(storages)
        path = part_path(key, home, via_of).lstrip(".")
        part = {
            "path": short(path or peek.type_name(type(module))),
            "kind": "model",
            "className": short(peek.type_name(type(module))),
            "bytes": bytes_by_device(fresh),
        }
        named = part_holders(key, home, paths or {})
        if named:
            part["holders"] = named
        lists[home].append(part)
    groups = {}  # (id(listed), id(group)) -> part dict
    for _kind, _name, found in roots:
        for storage, (nbytes, via, group, _big) in found.storages.items():
            if via is None:
                continue
            home = listed(via)
            if home in keeps:
                if keeps[home].get(storage) != nbytes:
                    _put(own_keeps(home), sizes[home], storage, nbytes)
                added.setdefault(home, set()).add(storage)
            # a storage of a live model's own tensors is that model's, wherever found
            if group is None or home not in counted or storage in counted[home]:
                continue
            if storage in params:
                continue
            own_counted(home).add(storage)
            part = groups.get((home, id(group.obj)))
            if part is None:
                part = groups[(home, id(group.obj))] = _group_part(group, torch)
                lists[home].append(part)
            device = storage[0]
            part["bytes"][device] = part["bytes"].get(device, 0) + nbytes
    for module, _order in tops:
        key = id(module)
        home = listed(key)
        if home != key and home in keeps and key in stats:
            keys = totals(key).keys
            more = added.setdefault(home, set())
            keep = own_keeps(home)
            size = sizes[home]
            if totals(home).keys.isdisjoint(keys) and more.isdisjoint(keys):
                keep.update(stats[key].storages)
                for device, nbytes in totals(key).by_device.items():
                    size[device] = size.get(device, 0) + nbytes
            else:
                for storage, nbytes in stats[key].storages.items():
                    _put(keep, size, storage, nbytes)
            more.update(keys)
    keysets = {}
    for key in keeps:
        more = added.get(key)
        keysets[key] = totals(key).keys | more if more else totals(key).keys
    return Parts(lists, keeps, sizes, keysets)


def _totals_getter(stats, totals):
    """``totals(key)``: the ``models.Totals`` of ``stats[key]``, from ``totals`` or computed
    (and kept) here."""
    known = dict(totals) if totals else {}

    def get(key):
        found = known.get(key)
        if found is None:
            found = known[key] = models.totals_of(stats[key])
        return found

    return get


def _put(keep, size, storage, nbytes):
    """``keep[storage] = nbytes``, with ``size`` (bytes_by_device(keep)) kept right."""
    old = keep.get(storage)
    if old != nbytes:
        size[storage[0]] = size.get(storage[0], 0) + nbytes - (old or 0)
        keep[storage] = nbytes


def _group_part(group, torch):
    obj = group.obj
    return {
        "path": short(group.path.lstrip(".") or peek.type_name(type(obj))),
        "kind": "optimizer" if is_optimizer(obj, torch) else "tensor",
        "className": short(peek.type_name(type(obj))),
        "bytes": {},
    }


def model_entries(tops, stats, holders, parts, truncated, totals=None):
    """(models, cut): the ``models`` of the message, oldest first, at most ``MAX_MODELS``
    (the largest kept; ``cut`` when some were left out). ``totals``: as ``collect_parts``."""
    totals = _totals_getter(stats, totals)
    out = []
    pieces = {}  # id(top) -> {(kind, name)} of its piece holders
    for top, kind, name in holders.pieces:
        pieces.setdefault(top, set()).add((kind, name))
    for module, order in tops:
        key = id(module)
        if key not in parts.lists:
            continue
        entry = model_entry(
            module,
            order,
            holders.paths.get(key, {}),
            stats[key],
            parts.lists[key][:MAX_PARTS],
            truncated,
            pieces.get(key, ()),
            totals(key).by_device,
        )
        if entry is not None:
            out.append(entry)
    if len(out) <= MAX_MODELS:
        return out, False
    # keep the largest; the rest is said to be cut
    out.sort(key=lambda m: sum(m["bytes"].values()), reverse=True)
    del out[MAX_MODELS:]
    out.sort(key=lambda m: m["order"])
    return out, True


_KIND_ORDER = {"variable": 0, "output": 1, "traceback": 2}


def model_id(module, order):
    """A model's ``id`` in the protocol (str): its address and creation order. The address
    alone is reused once a model dies, and a new model must never be taken for an old one
    (a dismissed toast, a stacked pair)."""
    return f"{id(module):#x}-{order}"


def model_entry(
    module, order, holder_paths, stats, parts, truncated=False, pieces=(), by_device=None
):
    """One entry of ``models`` (dict), or None for a model without parameters or buffers.
    ``holder_paths``: {(kind, name): path}; ``stats``: its ModelStats; ``parts``: [part];
    ``pieces``: the (kind, name) of the holders that reach only submodules of it (they are
    reported with ``submodule: true`` and do not make it named); ``by_device``: its bytes
    per device when known (models.Totals)."""
    cls = type(module)
    class_name = peek.type_name(cls)
    cls_module = peek.type_module(cls)
    if not stats.has_tensors:
        return None
    family = models.model_family(cls_module)
    pairs = sorted(holder_paths.items(), key=lambda p: _KIND_ORDER.get(p[0][0], 3))
    holders = [
        {"kind": kind, "name": short(name), "path": short(path)}
        if (kind, name) not in pieces
        else {"kind": kind, "name": short(name), "path": short(path), "submodule": True}
        for (kind, name), path in pairs[:MAX_HOLDERS]
    ]
    unknown = False
    if not holders:
        # Nothing reached it. After a cut walk that proves nothing: a name may still hold it,
        # so it is not called stale (nothing offers to free it).
        unknown = truncated
        name = UNKNOWN_HOLDER if unknown else HIDDEN_HOLDER
        holders = [{"kind": "hidden", "name": name, "path": name}]
    return {
        "id": model_id(module, order),
        "order": order,
        "className": short(class_name),
        "module": short(cls_module),
        "family": family,
        "label": short(models.model_label(module, class_name, family)),
        "parameters": stats.parameters,
        "bytes": dict(by_device) if by_device is not None else bytes_by_device(stats.storages),
        # small tensor groups (a stride, a loss's constants) are counted in the roots' bytes
        # but not listed
        "parts": [
            p for p in parts if p["kind"] != "tensor" or sum(p["bytes"].values()) >= BIG_TENSOR
        ],
        "holders": holders,
        "stale": not unknown
        and not any(h["kind"] == "variable" and not h.get("submodule") for h in holders),
    }


def recheck(roots, since, owner):
    """The ``models.Recheck`` of a cell that changed ``since`` (a ``fingerprint.Since``; None:
    None, every model re-checked tensor by tensor): the top-level models and the storages that
    the roots whose binding changed reach, the tensors they reach (a parameter named by a new
    binding: ``w = net[2].weight; w.data = ...``), and the devices whose allocated bytes
    changed. ``roots``: [(kind, name, Reach)]; ``owner``: ``owner_finder``."""
    if since is None:
        return None
    tops = set()
    storages = set()
    tensors = set()
    for kind, name, found in roots:
        if since.root_changed(kind, name):
            for reached in found.modules:
                tops.add(id(owner(reached.module)))
            storages.update(found.storages)
            tensors.update(found.tensors)
    return models.Recheck(tops, storages, tensors, set(since.devices))


def add_origins(rows, storages, origin_of):
    """Set ``origins`` (``provenance.root_origins``) on the root rows that have any
    (``storages``: a ``RootStorages``; a row whose name two roots were cut to gets none,
    rather than the other's); drop stale ones. An origin's ``shared``: its bytes that another
    holder keeps too."""
    for row in rows:
        row.pop("origins", None)
    if not origin_of or storages is None:
        return
    for row in rows:
        found = provenance.root_origins(
            storages.by_root.get((row["kind"], row["name"])) or (), origin_of, storages.shared
        )
        if found:
            row["origins"] = found


def build(
    roots,
    truncated,
    cuda,
    torch,
    variables,
    forest,
    stats_cache,
    graphless,
    on_error,
    cells=None,
    skip=(),
    since=None,
    origin_of=None,
):
    """The ``Census``. ``roots``: [(kind, name, Reach)] in attribution order; ``variables``: the
    user variables [(name, value)]; ``forest``: models.Forest; ``stats_cache``:
    models.StatsCache; ``graphless``: the graph search's memo of the last inventory;
    ``on_error(exc)``: where a model that cannot be measured is reported; ``cells``: the
    output roots' execution counts ({(kind, name): set}); ``skip``: ids of the objects the walk
    never enters (the owner objects' walk neither); ``since``: what changed since the last
    inventory (``fingerprint.Since``, see ``recheck``), or None; ``origin_of``: the live blocks'
    origins (``provenance.Reading.origin_of``) when provenance is recorded: each root row gets
    its ``origins``."""
    tops, parent = forest
    owner = owner_finder(parent)
    holders = attribute(roots, owner)
    listed = lister(holders)
    stats = stats_cache.measure(tops, on_error, recheck(roots, since, owner))
    params = stats_cache.union(stats)  # read-only
    found = graphs.graph_holders(torch, variables, roots, params, holders.reached, graphless)
    graph_storages = {}  # (kind, root name) -> {storage: nbytes} its graphs keep
    for graph in found.graphs:
        storages = graph.pop("storages")
        if graph.get("root") == "output":
            for name in graph["names"]:
                graph_storages[("output", name)] = storages
        else:
            graph_storages[("variable", graph["name"])] = storages
    totals = stats_cache.totals
    parts = collect_parts(
        tops, stats, roots, listed, holders.via_of, params, torch, holders.paths, totals
    )
    model_list, models_cut = model_entries(tops, stats, holders, parts, truncated, totals)
    per_root, attributed, loose, keepers = rootbytes.tally_roots(
        roots, parts.keeps, listed, owner, params, graph_storages, parts.sizes, parts.keysets
    )
    storages = None
    if origin_of is not None:  # provenance asked for: kept for re-sent inventories too
        by_root = {}
        for (kind, name), tally in per_root.items():
            key = (kind, short(name))
            # two long names cut to one row name: the rows cannot be told apart
            by_root[key] = (
                None if key in by_root else provenance.kept_storages(tally.kept, parts.keeps)
            )
        storages = RootStorages(by_root, shared_addresses(keepers, parts.keeps))
    rows, rows_cut = rootbytes.root_rows(
        per_root, parts.keeps, holders, attributed, truncated, cells, keepers, parts.sizes
    )
    add_origins(rows, storages, origin_of)
    memory = devices.torch_memory() if cuda else None
    return Census(
        model_list,
        rows,
        rootbytes.unattributed(rows, memory),
        rootbytes.loose_tensors(loose),
        found.graphs,
        owners.owner_facts(
            variables,
            torch,
            owner,
            listed,
            stats,
            params,
            {id(m): model_id(m, o) for m, o in tops},
            skip,
            # a variable whose whole walk reached no module holds no model
            {n for k, n, f in roots if k == "variable" and f.complete and not f.modules},
        ),
        errors.kept_errors(roots, params),
        optimizers.optimizer_rows(variables, torch, params, holders.reached),
        storages,
        models_cut or rows_cut or found.cut,
        found.graphless,
    )
