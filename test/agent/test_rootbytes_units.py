"""In-process tests of what makes rebinding cells cheap without changing a figure:

- ``rootbytes`` counts a model whose storages it shares with nothing as one unit (its bytes per
  device in one step); ``tally_roots``/``root_rows`` without ``sizes``/``keysets`` count storage
  by storage, as before. Both must give the same rows (bytes, sole, shared, sharedWith, hidden),
  tallies and loose tensors, in the same order, on random roots with models that share
  storages, loose and graph tensors, one object named twice, and more sharers than
  ``sharedWith`` lists;
- ``collect_parts``'s bytes per listed model (``sizes``) are ``bytes_by_device`` of its keeps;
- ``children_fact`` looks for DataLoader holders (and asks NVML) only when a child is alive
  or none can be listed."""

import random
import types

import pytest
from conftest import load_agent

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def agent():
    return load_agent("_gpu_hygiene_agent_units")


class Obj:
    """A stand-in for a module or an object a tensor hangs off."""

    def __init__(self, label):
        self.label = label


class FakeOptimizer:
    pass


FAKE_TORCH = types.SimpleNamespace(optim=types.SimpleNamespace(Optimizer=FakeOptimizer))
NAMES = ["a", "b", "c", "_", "Out[3]", "_3", "tb"] + [f"v{i}" for i in range(20)]


def random_case(agent, rng):
    key = agent.storage.StorageKey
    walk = agent.walk
    devices = ["cpu", "cuda:0", "cuda:1"][: rng.randint(1, 3)]
    pool = [key(rng.choice(devices), i) for i in range(rng.randint(1, 60))]
    odd = rng.random() < 0.2  # one storage measured with two sizes (a resize in place)

    def nbytes(k):
        return (k.ptr * 7 % 13 + 1) * 100 + (rng.randint(0, 3) if odd else 0)

    tops = [Obj(i) for i in range(rng.randint(0, 6))]
    apart = rng.random() < 0.6  # models with storages of their own (as nearly always)
    own = {}
    for i, top in enumerate(tops):
        size = 0 if rng.random() < 0.1 else rng.randint(1, min(len(pool), 12))
        if apart:
            mine = [key(rng.choice(devices), 1000 * (i + 1) + j) for j in range(size)]
        else:
            mine = rng.sample(pool, size)
        own[id(top)] = {k: nbytes(k) for k in mine}
    if apart:  # loose tensors, graphs and optimizer state mostly elsewhere, now and then not
        pool = pool + [k for storages in own.values() for k in storages][: rng.randint(0, 3)]
    via_of = {}
    for i, top in enumerate(tops):
        if i and rng.random() < 0.3:
            via_of[id(top)] = agent.census.Via(id(tops[rng.randrange(i)]), f".p{i}")

    def listed(k, hops=0):
        while k in via_of and hops < 100:
            k = via_of[k].key
            hops += 1
        return k

    parent = {}
    mods = list(tops)
    for top in tops:
        for j in range(rng.randint(0, 2)):
            sub = Obj(f"{top.label}.{j}")
            parent[id(sub)] = top
            mods.append(sub)

    def owner(module):
        return parent.get(id(module), module)

    params = {}
    for storages in own.values():
        params.update(storages)
    groups = [Obj(f"g{i}") for i in range(3)] + [FakeOptimizer()]
    roots = []
    reaches = []
    for _ in range(rng.randint(0, 30)):
        kind = rng.choice(["variable", "variable", "output", "traceback"])
        name = rng.choice(NAMES)
        if reaches and rng.random() < 0.2:
            found = rng.choice(reaches)  # one object under two names
        else:
            found = walk.Reach()
            for module in rng.sample(mods, rng.randint(0, min(3, len(mods)))):
                via = rng.choice([None, None, *tops])
                found.modules.append(walk.ReachedModule(module, ".m", via, ".r" if via else ""))
            for k in rng.sample(pool, rng.randint(0, min(5, len(pool)))):
                via = id(rng.choice(tops)) if tops and rng.random() < 0.5 else None
                group = walk.Group(rng.choice(groups), ".g") if via and rng.random() < 0.7 else None
                big = walk.BigTensor(".t", {"shape": [1]}) if rng.random() < 0.3 else None
                found.storages[k] = walk.ReachedStorage(nbytes(k), via, group, big)
            reaches.append(found)
        roots.append((kind, name, found))
    graph_storages = {
        n: {k: nbytes(k) for k in rng.sample(pool, rng.randint(1, min(3, len(pool))))}
        for n in NAMES
        if rng.random() < 0.2
    }
    paths = {}
    for kind, name, found in roots:
        for module, suffix, _via, _rel in found.modules:
            paths.setdefault(id(owner(module)), {})[(kind, name)] = name + suffix
    stats = {k: agent.models.ModelStats(len(s), s, True) for k, s in own.items()}
    return types.SimpleNamespace(
        tops=[(top, i) for i, top in enumerate(tops)],
        stats=stats,
        listed=listed,
        via_of=via_of,
        owner=owner,
        params=params,
        roots=roots,
        graph_storages=graph_storages,
        holders=agent.census.Holders(paths, set(), via_of, {}, set()),
        paths=paths,
        truncated=rng.random() < 0.5,
    )


def ordered(value):
    """Dicts as item lists, so that comparing also compares their order."""
    if isinstance(value, dict):
        return [(repr(k), ordered(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [ordered(v) for v in value]
    return value


def root_figures(agent, case, units):
    parts = agent.census.collect_parts(
        case.tops, case.stats, case.roots, case.listed, case.via_of, case.params, FAKE_TORCH
    )
    for key, keep in parts.keeps.items():
        assert ordered(parts.sizes[key]) == ordered(agent.storage.bytes_by_device(keep))
        assert set(parts.keysets[key]) == set(keep)
    sizes, keysets = (parts.sizes, parts.keysets) if units else (None, None)
    rootbytes = agent.rootbytes
    per_root, attributed, loose, keepers = rootbytes.tally_roots(
        case.roots, parts.keeps, case.listed, case.owner, case.params, case.graph_storages,
        sizes, keysets,
    )  # fmt: skip
    tallies = {k: (t.by_device, sorted(t.models), t.tensors) for k, t in per_root.items()}
    cells = {("output", n): {3} for n in NAMES}
    rows, cut = rootbytes.root_rows(
        per_root, parts.keeps, case.holders, attributed, case.truncated, cells, keepers, sizes
    )
    return ordered([parts.lists, tallies, rows, cut, rootbytes.loose_tensors(loose)])


def test_models_as_units_give_the_figures_of_storages_one_by_one(agent):
    units_seen = 0
    for seed in range(1500):
        case = random_case(agent, random.Random(seed))
        assert root_figures(agent, case, True) == root_figures(agent, case, False), seed
        parts = agent.census.collect_parts(
            case.tops, case.stats, case.roots, case.listed, case.via_of, case.params, FAKE_TORCH
        )
        units_seen += len(agent.rootbytes.solo_units(parts.keysets, set()))
    assert units_seen > 1000  # the cases do exercise units, not only the fallback


def test_a_model_sharing_a_storage_is_counted_storage_by_storage(agent):
    key = agent.storage.StorageKey
    a, b, c = ({key("cpu", i): 10 for i in r} for r in (range(0, 3), range(2, 5), range(5, 8)))
    keysets = {1: frozenset(a), 2: frozenset(b), 3: frozenset(c)}
    assert agent.rootbytes.solo_units(keysets, set()) == {3}  # a and b share storage 2
    assert agent.rootbytes.solo_units(keysets, {key("cpu", 6)}) == set()  # c's is also loose
    assert agent.rootbytes.solo_units({1: frozenset()}, set()) == set()  # nothing to count


def test_children_fact_looks_for_holders_only_when_a_child_is_alive(agent, tmp_path):
    pid = 4_194_304 + 17  # above Linux's largest pid: no real process (psutil finds none)
    (tmp_path / str(pid) / "task" / str(pid)).mkdir(parents=True)
    (tmp_path / str(pid) / "task" / str(pid) / "children").write_text("")
    asked = []

    def roots():
        asked.append("roots")
        return []

    def nvml():
        asked.append("nvml")
        return {pid}

    fact = agent.children.children_fact(pid, roots, nvml, proc=str(tmp_path))
    assert fact["visible"] is True and fact["processes"] == [] and fact["holders"] == []
    assert asked == []  # nothing alive: no holder could be reported, no NVML list needed
    fact = agent.children.children_fact(pid, roots, nvml, proc=str(tmp_path / "none"))
    assert fact["visible"] is False and asked == ["roots"]  # not visible: holders still named
