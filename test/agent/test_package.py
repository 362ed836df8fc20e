"""In-process tests of the agent's units that need no kernel: roots, the walk, graph holders
and the census, with a fake IPython shell and real CPU torch tensors and modules. The package
is loaded the way the loader registers it (``load_agent``, under a private name).

The last test builds the same inventories with the 0.2.0 single-file agent (the fixture copy
that test_injection replaces) and checks that the package sends the same messages: the split
into modules changed no figure (the facts added since, ``allocator`` and ``children``, are left
out). Drop it when a message is meant to change."""

import contextlib
import importlib.util
import re
import sys
import time
import types

import pytest
from conftest import ROOT, load_agent

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(120)

OLD_AGENT = ROOT / "test" / "agent" / "fixtures" / "agent_0_2_0" / "gpu_hygiene_agent.py"


@pytest.fixture(scope="module")
def agent():
    return load_agent("_gpu_hygiene_agent_units")


class FakeShell:
    """What the agent reads of an IPython shell."""

    def __init__(self, **user):
        self.user_ns = {"In": [""], "Out": {}, "_oh": None, "get_ipython": None, **user}
        self.user_ns["_oh"] = self.user_ns["Out"]
        self.user_ns_hidden = {"In": self.user_ns["In"], "Out": self.user_ns["Out"]}
        self.user_global_ns = self.user_ns
        self.displayhook = types.SimpleNamespace()
        vars(self.displayhook).update({"_": None, "__": None, "___": None})
        self.history_manager = types.SimpleNamespace(output_hist=self.user_ns["Out"])
        self.events = types.SimpleNamespace(callbacks={})
        self.InteractiveTB = types.SimpleNamespace(tb=None)
        self.display_pub = object()
        self.last_execution_result = None
        self.kernel = types.SimpleNamespace(comm_manager=types.SimpleNamespace(targets={}))

    def output(self, n, value):
        """``Out[n] = value`` shown by cell ``n``: ``_n``, ``_`` and the display hook's slot."""
        self.user_ns["Out"][n] = value
        self.user_ns[f"_{n}"] = value
        self.user_ns["_"] = value
        vars(self.displayhook)["_"] = value


@pytest.fixture
def tracker(agent):
    tracker = agent.tracker.ModuleTracker()
    tracker.start(torch)
    yield tracker
    tracker.stop()


def build(agent, shell, tracker, errors=None):
    """One full inventory of ``shell`` by a fresh ``Inventory``."""
    builder = agent.inventory.Inventory(shell, tracker, frozenset(), (errors or []).append)
    return builder.fresh(None, time.perf_counter())


# ---- roots


def test_roots_tell_variables_from_ipython_names_and_the_output_cache(agent):
    data = [[1]]
    shown = [[2]]
    shell = FakeShell(data=data, n=3, _i1="x", _7=[[7]], ids=[1, 2], np=types, f=len)
    shell.output(2, shown)
    shell.user_ns_hidden["hidden"] = shell.user_ns["hidden"] = [[0]]
    shell.last_execution_result = types.SimpleNamespace(result=shown, error_in_exec=None)
    variables = agent.roots.variable_roots(shell)
    # a user's own _7 (no Out[7]) is a variable; hidden names are IPython's; what can hold
    # nothing is no root: ints, a list of ints, a module, a builtin function
    assert [name for name, _value in variables] == ["data", "_7"]
    outputs = agent.roots.output_roots(shell)
    assert [(name, value is shown) for name, value in outputs] == [
        ("_2", True),
        ("_", True),
        ("_", True),  # the display hook's slot
        ("Out[2]", True),
        ("_", True),  # the last result
    ]


def test_exceptions_and_their_frames_are_roots(agent):
    def fail(batch):
        activation = [batch]
        raise ValueError(activation)

    try:
        try:
            fail(1)
        except ValueError as inner:
            raise KeyError("outer") from inner
    except KeyError as exc:
        outer = exc
    shell = FakeShell()
    shell.last_execution_result = types.SimpleNamespace(result=None, error_in_exec=outer)
    excs = agent.roots.exceptions(shell)
    assert [type(e).__name__ for e in excs] == ["KeyError", "ValueError"]
    frames = agent.roots.traceback_frames(shell, excs)
    # the test's frame is in both tracebacks: once
    assert [f.f_code.co_name for f in frames] == [
        "test_exceptions_and_their_frames_are_roots",
        "fail",
    ]


def test_skip_ids_cover_namespaces_and_module_dicts(agent):
    shell = FakeShell()
    dicts = agent.roots.ModuleDicts()
    skip = agent.roots.skip_ids(shell, {12345}, dicts)
    assert {id(shell.user_ns), id(shell.user_ns_hidden), id(shell.displayhook), 12345} <= skip
    assert id(vars(sys.modules["json"])) in skip
    assert dicts.ids() is dicts.ids()  # cached while sys.modules does not grow


# ---- walk


def test_the_walk_reaches_models_and_tensors_and_names_the_path(agent):
    model = torch.nn.Linear(4, 4)
    blob = torch.zeros(1 << 18)  # 1 MiB: a big tensor, named
    small = torch.zeros(3)
    state = {"nets": [model], "cache": (lambda: blob), "x": small}
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    found = walker.reach(state, agent.storage.storage_of)
    assert found.complete and not walker.truncated
    assert [(r.module is model, r.path, r.via) for r in found.modules] == [
        (True, "['nets'][0]", None)
    ]
    by_size = {r.nbytes: r for r in found.storages.values()}
    assert set(by_size) == {1 << 20, 12}
    big = by_size[1 << 20].big
    assert big.path == "['cache']<closure>" and big.meta["shape"] == [1 << 18]
    assert by_size[12].big is None and by_size[12].via is None
    assert walker.reach(state, agent.storage.storage_of) is found  # walked once per root


def test_tensors_under_an_expanded_model_are_grouped_by_what_they_hang_off(agent):
    model = torch.nn.Linear(2, 2)
    model.trainer = types.SimpleNamespace(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    model.trainer.history = [torch.ones(5)]
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    walker.expand_module = lambda module: module is model
    walker.module_internals = agent.models.module_internals(torch)
    found = walker.reach({"m": model}, agent.storage.storage_of, torch.optim.Optimizer)
    groups = {r.nbytes: r.group for r in found.storages.values() if r.via == id(model)}
    assert groups[20].path == ".trainer"  # the history list hangs off the trainer
    assert all(r.via == id(model) for r in found.storages.values())


def test_plain_functions_cost_no_visit_and_functions_with_state_are_followed(agent):
    blob = torch.zeros(1 << 18)

    def plain(x):
        return x

    def defaults(x, cache=[blob]):  # noqa: B006 -- the leak this walk must see
        return x

    callbacks = {"on_fit_start": [plain] * 3, "on_train_end": [plain]}
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    found = walker.reach(callbacks, agent.storage.storage_of)
    # the dict and its two lists: the four functions are not visits
    assert found.complete and walker.visits == 3 and not found.storages
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    found = walker.reach({"hooks": [plain, defaults]}, agent.storage.storage_of)
    (reached,) = found.storages.values()
    assert reached.nbytes == 1 << 20 and reached.big.path.startswith("['hooks'][1]")


def test_a_root_too_big_for_the_bounds_is_cut_and_said_so(agent):
    many = [{"i": [i]} for i in range(agent.limits.ROOT_VISITS + 10)]
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    found = walker.reach(many, agent.storage.storage_of)
    assert found.complete is False and walker.truncated is True


def test_the_storage_cache_follows_moved_data(agent):
    tensor = torch.zeros(10)
    first = agent.storage.measure(tensor)
    assert agent.storage.measure(tensor) is first  # cached
    tensor.data = torch.zeros(20)
    second = agent.storage.measure(tensor)
    assert second.nbytes == 80 and second.key != first.key


# ---- graphs


def test_graph_holders_report_kept_graphs_only(agent):
    weight = torch.ones(8, 8, requires_grad=True)
    losses = [(weight @ torch.ones(8, 8)).sum() for _ in range(3)]
    done = (weight * 2).sum()
    done.backward()
    variables = [("losses", losses), ("done", done), ("weight", weight)]
    found = agent.graphs.graph_holders(torch, variables, [], {}, {}, {})
    assert [g["name"] for g in found.graphs] == ["losses"]
    (graph,) = found.graphs
    assert graph["container"] == "list" and graph["count"] == 3
    assert graph["gradFn"] == "SumBackward0" and graph["truncated"] is False
    assert graph["bytes"]["cpu"] >= 3 * 4  # the losses themselves at least
    assert found.cut is False and found.graphless == {}


# ---- census


def test_the_census_attributes_models_to_holders_and_counts_each_storage_once(agent, tracker):
    named = torch.nn.Linear(16, 16)
    stale = torch.nn.Linear(32, 32)
    named.optimizer = torch.optim.Adam(named.parameters())
    named(torch.ones(1, 16)).sum().backward()
    named.optimizer.step()  # Adam state: exp_avg, exp_avg_sq per parameter
    shell = FakeShell(model=named, alias={"m": named})
    shell.output(3, stale)
    tracker.add(named)
    tracker.add(stale)
    errors = []
    inventory = build(agent, shell, tracker, errors)
    assert errors == []
    models = {m["id"]: m for m in inventory["models"]}
    first = models[protocol_id(agent, tracker, named)]
    second = models[protocol_id(agent, tracker, stale)]
    assert {(h["kind"], h["name"]) for h in first["holders"]} == {
        ("variable", "model"),
        ("variable", "alias"),
    }
    assert first["stale"] is False
    assert {h["kind"] for h in second["holders"]} == {"output"} and second["stale"] is True
    weights = (16 * 16 + 16) * 4
    assert first["bytes"] == {"cpu": 2 * weights}  # parameters and their gradients
    (part,) = first["parts"]  # Adam's state: exp_avg, exp_avg_sq (and step) per parameter
    assert (part["kind"], part["path"], part["className"]) == ("optimizer", "optimizer", "Adam")
    assert part["bytes"]["cpu"] >= 2 * weights
    roots = {(r["kind"], r["name"]): r for r in inventory["roots"]}
    # the first root that reaches a storage gets it: "model" has weights, grads and state
    assert roots[("variable", "model")]["bytes"]["cpu"] == 2 * weights + part["bytes"]["cpu"]
    assert roots[("variable", "model")]["models"] == 1
    # the second holder reaches the same model, with no byte left to count
    assert roots[("variable", "alias")] == {
        "kind": "variable",
        "name": "alias",
        "bytes": {},
        "sole": {},  # deleting alias frees nothing: model names the same model
        "shared": roots[("variable", "model")]["shared"],
        "sharedWith": ["model"],
        "models": 1,
        "tensors": 0,
        "valueId": hex(id(shell.user_ns["alias"])),  # what a fix cell checks before acting
    }
    # both keep the whole model (weights, grads, Adam's state): shared, nothing sole
    assert roots[("variable", "model")]["sole"] == {}
    assert roots[("variable", "model")]["shared"] == roots[("variable", "model")]["bytes"]
    assert inventory["truncated"] is False and inventory["graphs"] == []


def test_a_model_no_root_reaches_is_one_hidden_row(agent, tracker):
    orphan = torch.nn.Linear(8, 8)
    tracker.add(orphan)
    inventory = build(agent, FakeShell(), tracker)
    (model,) = [m for m in inventory["models"] if m["id"] == protocol_id(agent, tracker, orphan)]
    assert model["holders"] == [
        {"kind": "hidden", "name": agent.limits.HIDDEN_HOLDER, "path": agent.limits.HIDDEN_HOLDER}
    ]
    hidden = [r for r in inventory["roots"] if r["kind"] == "hidden"]
    assert hidden and hidden[0]["models"] >= 1
    del orphan


def test_a_new_model_at_a_dead_models_address_is_not_the_old_model(agent, tracker):
    """CPython hands a freed address to the next object of its size: the ids must still differ
    (the browser keys dismissed toasts and stacked pairs on them)."""
    shell = FakeShell()
    shell.user_ns["model"] = torch.nn.Linear(8, 8)
    tracker.add(shell.user_ns["model"])
    (old,) = build(agent, shell, tracker)["models"]
    address = id(shell.user_ns.pop("model"))
    for _ in range(200):
        fresh = torch.nn.Linear(8, 8)
        if id(fresh) == address:
            break
    else:
        pytest.skip("no new module was given the freed address")
    shell.user_ns["model"] = fresh
    tracker.add(fresh)
    (new,) = build(agent, shell, tracker)["models"]
    assert new["id"] != old["id"] and new["order"] > old["order"]
    assert new["id"].startswith(f"{address:#x}-")


def test_census_steps_compose(agent):
    """``census.build`` over hand-made roots: a part model reached through a listed one."""
    outer = torch.nn.Linear(4, 4)
    inner = torch.nn.Linear(2, 2)
    outer.ema = types.SimpleNamespace(copy=inner)
    walker = agent.walk.Walker(torch.Tensor, torch.nn.Module, set())
    walker.expand_module = lambda module: True
    walker.module_internals = agent.models.module_internals(torch)
    roots = [("variable", "outer", walker.reach(outer, agent.storage.storage_of))]
    forest = agent.models.module_forest(
        [agent.tracker.LiveModule(outer, 0), agent.tracker.LiveModule(inner, 1)]
    )
    stats = agent.models.StatsCache(types.SimpleNamespace(active=False, structure=0))
    result = agent.census.build(
        roots, False, False, torch, [("outer", outer)], forest, stats, {}, print
    )
    (model,) = result.models  # inner is a part of outer, not a second model
    assert model["parts"][0]["kind"] == "model" and model["parts"][0]["path"] == "ema.copy"
    assert model["parts"][0]["bytes"] == {"cpu": (2 * 2 + 2) * 4}
    assert result.roots[0]["bytes"] == {"cpu": (4 * 4 + 4 + 2 * 2 + 2) * 4}
    assert result.cut is False


# ---- the split changed no message


@contextlib.contextmanager
def old_agent():
    spec = importlib.util.spec_from_file_location("_gpu_hygiene_agent_0_2_0", OLD_AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


# facts the single-file agent never had (issue 17): the allocator split, child processes, owner
# objects, the limits of the environment (issue 16), kept errors and optimizers (issue 23), and
# holders that reach only a submodule (``submodule: true``; checked on their own below)
NEW_FACTS = ("allocator", "children", "owners", "limits", "unread", "keptErrors", "optimizers")


def protocol_id(agent, tracker, module):
    """The ``id`` the inventory gives a tracked ``module``."""
    return agent.census.model_id(module, tracker.order(module))


def _address_ids(value):
    """``value`` with the models' ids cut to the address the single-file agent sent (the
    package adds ``-<order>``, so that a reused address is never the same model)."""
    if isinstance(value, dict):
        return {k: _address_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_address_ids(v) for v in value]
    if isinstance(value, str) and re.fullmatch(r"0x[0-9a-f]+-\d+", value):
        return value.rsplit("-", 1)[0]
    return value


def _comparable(message):
    """The message without its timing, and without what the single-file agent did not report:
    ``NEW_FACTS``, the roots' ``sole``,
    ``shared`` and ``cells`` (and the rows only those fill), the holders' ``submodule``
    (checked on their own below), and the ``valueId`` of holders, roots and graphs."""
    out = {k: v for k, v in message.items() if k not in ("t", "seq", "durationMs", *NEW_FACTS)}
    new = ("sole", "shared", "sharedWith", "cells", "valueId")
    if "graphs" in message:
        out["graphs"] = [{k: v for k, v in g.items() if k != "valueId"} for g in message["graphs"]]
    out["roots"] = [
        {k: v for k, v in r.items() if k not in new}
        for r in message.get("roots", [])
        if r["bytes"] or r["models"]
    ]
    out["models"] = [
        {
            **m,
            "holders": [
                {k: v for k, v in h.items() if k not in ("submodule", "valueId")}
                for h in m["holders"]
            ],
        }
        for m in message["models"]
    ]
    return out


def test_inventories_are_the_ones_of_the_single_file_agent(agent):
    with old_agent() as old:
        shell = FakeShell()
        old_agent_ = old.Agent(shell, None)
        new_tracker = agent.tracker.ModuleTracker()
        old_agent_.tracker.start(torch)
        new_tracker.start(torch)
        new = agent.inventory.Inventory(shell, new_tracker, frozenset(), print)
        try:
            states = []

            def compare():
                before = old_agent_._inventory(None, time.perf_counter())
                after = new.fresh(None, time.perf_counter())
                assert _comparable(_address_ids(after)) == _comparable(before)
                assert new.fingerprint() == old_agent_._fingerprint()
                states.append(after)

            net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            net.trainer = types.SimpleNamespace(
                optimizer=torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                ema=torch.nn.Linear(8, 2),
                batch=torch.ones(1 << 18),
            )
            shell.user_ns.update(model=net, other=torch.nn.Conv2d(3, 3, 3), x=torch.ones(300000))
            compare()
            loss = net(torch.ones(4, 8)).sum()
            loss.backward()
            net.trainer.optimizer.step()
            shell.user_ns["losses"] = [net(torch.ones(4, 8)).sum() for _ in range(3)]
            shell.output(4, net[0])
            compare()
            (held,) = [m for m in states[-1]["models"] if m["className"] == "Sequential"]
            pieces = {h["name"] for h in held["holders"] if h.get("submodule")}
            assert pieces == {"Out[4]", "_4", "_"}  # they hold net[0], not net
            del shell.user_ns["other"]
            shell.output(5, torch.nn.Linear(64, 64))  # a stale model in the output cache
            try:
                (lambda t: 1 / 0)(torch.ones(1 << 18))
            except ZeroDivisionError as exc:
                shell.last_execution_result = types.SimpleNamespace(result=None, error_in_exec=exc)
            compare()
            assert any(m["stale"] for m in states[-1]["models"])
            assert states[-1]["lastError"]["type"] == "ZeroDivisionError"
            assert states[1]["graphs"] and states[0]["tensors"]
        finally:
            old_agent_.tracker.stop()
            new_tracker.stop()
