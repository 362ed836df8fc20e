"""After every cell, the inventory the agent sends (re-sent while the fingerprint holds, else
built with its caches: the forest, the models' measurements, the walk's memos, and after a
cell that only rebound names the models re-checked by their probe tensors unless a changed
binding reaches them) is the one an agent without caches builds in the same state.

The cells are the ways a cell changes what an inventory says with and without rebinding a
name: new and rebound names, ``losses.append(loss)`` to an existing list, a backward pass
(also through the last layers only), ``.half()`` / ``.to()`` of an existing model (its
parameters keep their identity, their storages change), a submodule assigned as an attribute,
a parameter's ``.data`` replaced through a new name, ``del`` of one of two aliases, the output
cache, an exception's traceback, a model left only to the output cache. First in this process
on a fake shell, then in a real kernel through the comm."""

import gc
import time
import types

import pytest
from conftest import MODULE, load_agent, ultralytics_flops_copy
from kernel_driver import kernel_needs
from test_package import FakeShell

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(300)

# what differs between two inventories of the same state (``namespace``: how much of a large
# namespace this inventory read, not what it found)
TIMING = ("t", "seq", "durationMs", "skipped", "executionCount", "namespace")


def comparable(message):
    return {k: v for k, v in message.items() if k not in TIMING}


@pytest.fixture(scope="module")
def agent():
    return load_agent("_gpu_hygiene_agent_rebinding")


def _fail(t):
    scratch = t * 2  # noqa: F841 -- a tensor the traceback's frame keeps
    return 1 / 0


# (cell, how the agent's own inventory checked the model ``net``: "measure" (measured anew),
# "full" (its last measurement re-checked tensor by tensor), "probe" (by its probe tensors), or
# None (the inventory was re-sent, or net is gone))
CELLS = [
    (
        "net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),"
        " torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 2))\n"
        "other = torch.nn.Conv2d(3, 3, 3)\n"
        "x = torch.ones(4, 8)",
        "measure",
    ),
    ("alias = net", "full"),  # a new name that reaches net
    ("tmp = object()", "probe"),  # a rebinding that reaches no model
    ("pass", None),  # nothing changed: re-sent
    ("tmp = object()\nlosses = []", "probe"),
    ("losses.append(net(x).sum())", "probe"),  # an autograd graph kept, no new name
    ("loss = net(x).sum()\nloss.backward()", "measure"),  # gradients: the probe sees them
    ("net.half()", "measure"),  # storages change, the parameters keep their identity
    ("tmp = object()", "probe"),
    ("net.to(torch.float32)", "measure"),
    ("net[2] = torch.nn.Linear(16, 16)", "measure"),  # a registration event
    ("net.head = torch.nn.Linear(2, 2)", "measure"),
    # a middle layer (no probe tensor of net) through a new name
    ("layer = net[3]\nlayer.double()", "measure"),
    ("w = net[2].weight\nw.data = torch.zeros(16, 16)", "measure"),  # a middle parameter
    (
        "for p in list(net[0].parameters()) + list(net.head.parameters()):\n"
        "    p.requires_grad_(False)\n"
        "net[3].float()\n"
        "loss = net(x).sum()\n"
        "net.zero_grad()\n"
        "loss.backward()",
        "measure",
    ),
    ("del alias", "probe"),  # one of two aliases
    ("OUTPUT", "full"),  # the output cache names a submodule of net
    ("ERROR", "probe"),  # an exception whose traceback keeps tensors
    ("tmp = other", "probe"),
    ("del net, layer, w, p\nloss = None\nlosses.clear()", None),  # net[0] left to Out
]


class Cells:
    """Runs CELLS on a fake shell like a kernel: the code in the user namespace, then the
    agent's inventory (``build(reuse=True)``: re-sent while the fingerprint holds) and then
    the one of a new ``Inventory`` (no caches)."""

    def __init__(self, agent, tracker, padding=0):
        self.agent = agent
        self.tracker = tracker
        self.shell = FakeShell(torch=torch)
        self.shell.user_ns_hidden["torch"] = torch
        # variables that hold nothing (``v0 = [0]``...): past ``LARGE_NAMESPACE`` names the
        # agent reads only what each cell may have changed (``namespace``)
        self.shell.user_ns.update((f"v{i}", [i]) for i in range(padding))
        # IPython binds the display hook's names first (``_ = __ = ___ = ''`` at its start)
        self.shell.user_ns.update(_="", __="", ___="")
        self.errors = []
        self.inventory = agent.inventory.Inventory(
            self.shell, tracker, frozenset(), self.errors.append
        )
        self.count = 0

    def run(self, code):
        """Run one cell; returns the agent's inventory after it."""
        self.count += 1
        ns = self.shell.user_ns
        if code == "OUTPUT":
            self.shell.output(self.count, ns["net"][0])
        elif code == "ERROR":
            try:
                _fail(torch.ones(1 << 16))
            except ZeroDivisionError as exc:
                self.shell.last_execution_result = types.SimpleNamespace(
                    result=None, error_in_exec=exc
                )
        else:
            exec(compile(code, f"<cell {self.count}>", "exec"), ns)
            self.shell.user_ns_hidden.setdefault("__builtins__", ns["__builtins__"])
        return self.inventory.build(self.count, reuse=True, source=code)

    def full(self):
        """The inventory of a new ``Inventory``: everything walked and measured anew."""
        builder = self.agent.inventory.Inventory(
            self.shell, self.tracker, frozenset(), self.errors.append
        )
        return builder.fresh(self.count, time.perf_counter())


@pytest.mark.parametrize("padding", [0, 2500], ids=["small namespace", "large namespace"])
def test_each_cell_sends_the_inventory_of_a_full_recheck(agent, monkeypatch, padding):
    """The agent's inventory after each cell equals the one built without caches, and the
    models were re-checked the way the cell called for (so that the light re-checks are
    exercised, not only full ones). Also in a namespace past ``LARGE_NAMESPACE`` names, where
    the agent reads only the roots, the cell's names, the tail and a slice of the rest."""
    assert padding == 0 or padding > agent.namespace.LARGE_NAMESPACE
    tracker = agent.tracker.ModuleTracker()
    tracker.start(torch)
    checked = {}  # id(module) -> "full" | "probe": how its last measurement was re-checked
    measured = set()  # ids of the modules measured anew
    models = agent.models
    unchanged = models.StatsCache._unchanged
    stats_of = models.model_stats

    def spy_unchanged(key, cached, recheck):
        light = (
            recheck is not None
            and key not in recheck.tops
            and cached.totals.keys.isdisjoint(recheck.storages)
            and cached.tensors.isdisjoint(recheck.tensors)
            and recheck.devices.isdisjoint(cached.totals.by_device)
        )
        checked[key] = "probe" if light else "full"
        return unchanged(key, cached, recheck)

    def spy_stats(module, *args, **kwargs):
        measured.add(id(module))
        return stats_of(module, *args, **kwargs)

    monkeypatch.setattr(models.StatsCache, "_unchanged", staticmethod(spy_unchanged))
    monkeypatch.setattr(models, "model_stats", spy_stats)
    try:
        cells = Cells(agent, tracker, padding)
        seen = []
        for code, _expected in CELLS:
            checked.clear()
            measured.clear()
            sent = cells.run(code)
            net = cells.shell.user_ns.get("net")  # no reference kept past the cell
            key = id(net) if net is not None else None
            del net
            if sent["skipped"] or key is None:
                how = None
            elif key in measured:
                how = "measure"
            else:
                how = checked.get(key)
            assert comparable(sent) == comparable(cells.full()), code
            seen.append(how)
        assert not cells.errors
        assert seen == [expected for _code, expected in CELLS]
        # the deleted Sequential may sit in a reference cycle: alive, and so a model, until the
        # collector runs (the agent never collects); whether a collection came in between
        # depends on how much this process allocated before
        gc.collect()
        last = cells.full()
        # the last cells' facts: net[0] is a model of its own, held by the output cache only
        assert {m["className"] for m in last["models"]} == {"Linear", "Conv2d"}
        assert last["lastError"]["type"] == "ZeroDivisionError"
    finally:
        tracker.stop()


# ---- in a real kernel

HELPER = "_gpu_hygiene_rebinding_test"
# Runs in the kernel, in a module of its own: a post_run_cell callback registered after the
# agent's, which builds the inventory of a new Inventory (no caches) in the same state.
HELPER_SOURCE = f"""
import sys, time

full = []

def after(result=None):
    package = sys.modules[{MODULE!r}]
    agent = package._agent
    errors = []
    builder = package.inventory.Inventory(
        agent.shell, agent.tracker, agent.inventory.own_ids, errors.append
    )
    full.append((builder.fresh(None, time.perf_counter()), [repr(e) for e in errors]))

def take():
    return full.pop()

get_ipython().events.register("post_run_cell", after)
"""

KERNEL_CELLS = [
    "import torch\nfrom ultralytics import YOLO",
    "models = [YOLO('yolov8n.yaml') for _ in range(2)]\nmodel = models[0]",
    "alias = models[1]",
    "tmp = object()",
    "x_counter = 1",  # an int: the inventory is re-sent
    "net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))\nx = torch.ones(2, 8)",
    "losses = []",
    "losses.append(net(x).sum())",
    "models[1].half()",
    "tmp = object()",
    "models[1].to('cpu').float()",
    "head = models[1].model.model[-1]\nhead.half()",
    "head.float()\nmodel.layer = torch.nn.Linear(4, 4)",
    "net.extra = torch.nn.Linear(8, 8)",
    "del alias",
    "net",  # Out[n], _n and _
    "models[0].model.model[5]",  # a submodule in the output cache
    "def fail(t):\n    scratch = t * 2\n    1 / 0\nfail(torch.ones(1 << 16))",
    "tmp = x",
    "del model, models, head\nlosses.clear()",  # models[0]'s part held by Out only
]


@kernel_needs("ultralytics")
@ultralytics_flops_copy()
@pytest.mark.compat
def test_each_cell_sends_the_inventory_of_a_full_recheck_in_a_kernel(new_kernel):
    kernel = new_kernel(env={"YOLO_OFFLINE": "true"})
    kernel.inject()
    comm = kernel.open_comm(1000)
    kernel.execute(
        "import sys as _s, types as _t\n"
        f"_m = _s.modules.setdefault({HELPER!r}, _t.ModuleType({HELPER!r}))\n"
        f"exec({HELPER_SOURCE!r}, _m.__dict__)\n"
        "del _s, _t, _m",
        silent=True,
        store_history=False,
    )
    skipped = 0
    for code in KERNEL_CELLS:
        n = len(comm.messages("inventory"))
        kernel.run(code, timeout=120)
        sent = comm.wait_for("inventory", n + 1, timeout=60)[n]
        full, errors = kernel.evaluate(v=f"__import__('sys').modules[{HELPER!r}].take()")["v"]
        assert errors == []
        assert comparable(sent) == comparable(full), code
        skipped += bool(sent["skipped"])
    assert skipped >= 1
    assert full["lastError"]["type"] == "ZeroDivisionError"
    # models[1] is Out's (the .to() cell's result), models[0] only through its layer in Out
    assert {m["className"] for m in full["models"]} == {"Sequential", "YOLO", "Conv"}
