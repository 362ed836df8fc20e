"""Issue 16: what an old environment lacks, the agent degrades from, never breaks; each limit is
said once, as ``limits`` in ``hello`` and every ``inventory`` (docs/protocol.md), never in a cell.

The first tests load the agent in this process (``load_agent``): ``degrade.note``, the shell
layout check and the bounded heap scan on plain objects. The others use real kernels, real torch
(CPU) and IPython, where two old environments are *simulated* before the agent is installed,
because they cannot be installed here:

- torch < 2.0 (no wheel for Python 3.11): its global module registration hooks
  (``torch.nn.modules.module.register_module_*_registration_hook``) are deleted, so the agent
  finds models by its bounded heap scan per inventory (the ``models`` limit);
- an IPython whose ``user_ns_hidden`` is not the plain dict the agent reads: it is replaced by
  a dict subclass (IPython itself keeps working), so the agent tells variables from IPython's
  names by name only (the ``holders`` limit).
"""

import gc
import math
import sys
import types

import pytest
from conftest import MODULE, holder_names, load_agent, model_by_order

pytestmark = pytest.mark.timeout(300)

HELLO = "jupyterlab_gpu_hygiene_hello"
AGENT = f"__import__('sys').modules[{MODULE!r}]._agent"
UNREACHABLE = "unreachable from the namespace"

NO_HOOKS = (
    "import torch, torch.nn.modules.module as _mm\n"
    "for _n in ('register_module_module_registration_hook',\n"
    "           'register_module_parameter_registration_hook',\n"
    "           'register_module_buffer_registration_hook'):\n"
    "    delattr(_mm, _n)\n"
    "del _mm, _n"
)
NET = (
    "import gc, torch\n"
    "class Net(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = torch.nn.Linear(32, 32)\n"
    "        self.loop = {'me': self}   # a reference cycle\n"
)
# A model nothing in the namespace reaches: a reference cycle kept by a disabled collector;
# only a heap scan finds it.
CYCLE = NET + "def make_cycle():\n    Net()\ngc.disable()"


@pytest.fixture
def agent():
    return load_agent("_gpu_hygiene_agent_degrade")


def test_note_keeps_each_limit_once_and_never_raises(agent):
    degrade = agent.degrade
    degrade.clear()

    class TorchVersion(str):  # torch.__version__ is a str subclass
        def __str__(self):
            raise RuntimeError("never called")

    assert degrade.note("models", "torch", TorchVersion("1.13.1")) is True
    assert degrade.note("models", "torch", "1.13.1") is False  # the same limit
    assert degrade.note("cells", "torch", "1.13.1") is False  # not an area
    assert degrade.note("holders", object(), object()) is True  # odd values: "unknown"
    (first, second) = degrade.current()
    assert first == {"area": "models", "library": "torch", "version": "1.13.1"}
    assert type(first["version"]) is str
    assert second == {"area": "holders", "library": "unknown", "version": "unknown"}
    assert degrade.noted("models") and not degrade.noted("owners")
    # the version of a module never imported: never imported by note
    assert "gpu_hygiene_not_a_module" not in sys.modules
    degrade.note("owners", "Ultralytics", module="gpu_hygiene_not_a_module")
    assert degrade.current()[-1]["version"] == "unknown"
    assert "gpu_hygiene_not_a_module" not in sys.modules
    # bounded: at most MAX_LIMITS
    for i in range(2 * degrade.MAX_LIMITS):
        degrade.note("owners", f"lib{i}", "1")
    assert len(degrade.current()) == degrade.MAX_LIMITS
    degrade.clear()
    assert degrade.current() == []


class Shell:
    """The parts of an IPython shell the holder roots read, as the agent expects them."""

    def __init__(self, **user):
        self.user_ns = {"In": [""], "Out": {}, "__builtins__": __builtins__, **user}
        self.user_ns["_oh"] = self.user_ns["Out"]
        self.user_ns_hidden = {k: self.user_ns[k] for k in ("In", "Out", "_oh", "__builtins__")}
        self.displayhook = types.SimpleNamespace(_="", __="", ___="")
        self.history_manager = types.SimpleNamespace(output_hist=self.user_ns["Out"])
        self.last_execution_result = None


def test_a_shell_layout_of_another_shape_is_a_holders_limit(agent):
    roots, degrade = agent.roots, agent.degrade
    degrade.clear()
    value = [[1.5]]  # a list of lists: it could hold a tensor (a list of floats could not)
    shell = Shell(box=value)
    assert roots.note_shell_gaps(shell) == [] and degrade.current() == []
    # an older layout: no display hook slots, no last_execution_result, a user_ns_hidden that
    # is not a plain dict
    del shell.last_execution_result
    shell.displayhook = types.SimpleNamespace()
    shell.user_ns_hidden = type("HiddenNs", (dict,), {})(shell.user_ns_hidden)
    assert roots.shell_gaps(shell) == ["user_ns_hidden", "displayhook", "last_execution_result"]
    roots.note_shell_gaps(shell)
    assert [entry["area"] for entry in degrade.current()] == ["holders"]
    # the variables are still told from IPython's names (by name), the output cache still read
    shell.user_ns["Out"][3] = value
    shell.user_ns["_3"] = value
    assert roots.variable_roots(shell) == [("box", value)]
    assert ("Out[3]", value) in roots.output_roots(shell)
    assert ("_3", value) in roots.output_roots(shell)
    # a shell without user_ns_hidden at all
    del shell.user_ns_hidden
    assert "user_ns_hidden" in roots.shell_gaps(shell)
    assert roots.variable_roots(shell) == [("box", value)]
    degrade.clear()


def test_rescan_stops_at_its_bounds_and_skips_costly_listings(agent):
    class Module:  # torch.nn.Module's stand-in: the scan only tests issubclass
        pass

    fake_torch = types.SimpleNamespace(nn=types.SimpleNamespace(Module=Module))
    tracker = agent.tracker.ModuleTracker()
    tracker.scan_objects = 5000
    # no listing is "dear" in this part: on a loaded machine (make test's other processes) the
    # old generation's listing can outlast SCAN_LIST_MS, and the scans would skip it (tested
    # below on its own)
    tracker.scan_list_ms = 1e9
    kept = [Module() for _ in range(3)]
    gc.collect()  # into the old generation
    scan = tracker.rescan(fake_torch)
    assert scan.examined == 5000 and scan.complete is False and scan.old > 5000
    # within the cells the bound allows, every object is looked at: the modules are found
    for _ in range(math.ceil(scan.old / 2000) + 2):
        if len(tracker.live()) == 3:
            break
        # as between two cells of a kernel: the young generations collected, so the budget
        # reaches the old one (a pytest-xdist worker's own traffic would fill them otherwise)
        gc.collect()
        tracker.rescan(fake_torch)
    assert sorted(map(id, (m for m, _ in tracker.live()))) == sorted(map(id, kept))
    # a listing dearer than scan_list_ms: the next scans skip the old generation
    tracker.scan_list_ms = 1e-9
    # the young generations emptied first, so that this scan's budget reaches the old one's
    # listing (under pytest-xdist the worker's own traffic fills them between the calls)
    gc.collect()
    tracker.rescan(fake_torch)
    skipped = tracker.rescan(fake_torch)
    assert skipped.old == 0 and skipped.complete is False and skipped.examined < 5000
    # no time: nothing looked at beyond the first chunk
    tracker.scan_list_ms, tracker._old_skip, tracker.scan_ms = 1e9, 0, 0.0
    assert tracker.rescan(fake_torch).examined <= 4096 * 3


def start(new_kernel, setup):
    """A kernel where ``setup`` ran before the agent was installed; (kernel, comm, early hello)."""
    kernel = new_kernel()
    prepared = kernel.run(setup)
    assert prepared.error is None, prepared.error
    early = kernel.inject({"sampleIntervalMs": 1000}).reply["user_expressions"][HELLO]
    early = early["data"]["application/json"]  # the early hello (src/agent-chunk.ts)
    comm = kernel.open_comm(1000)
    return kernel, comm, early


def cell(kernel, comm, code):
    """Run a user cell that prints nothing; return the inventory sent after it."""
    n = len(comm.messages("inventory"))
    result = kernel.run(code)
    assert result.error is None, result.error
    assert result.stdout == "" and result.stderr == "", (result.stdout, result.stderr)
    return comm.wait_for("inventory", n + 1, timeout=60)[n], result


def scan_stats(kernel):
    """The tracker's last ``ScanStats`` as a dict, and whether the hooks are active."""
    values = kernel.evaluate(
        scan=f"{AGENT}.tracker.last_scan._asdict()",
        active=f"{AGENT}.tracker.active",
        each=f"{AGENT}.tracker.rescan_each_time",
    )
    return values["scan"], values["active"], values["each"]


def test_torch_without_registration_hooks_finds_models_by_a_bounded_heap_scan(new_kernel):
    kernel, comm, early = start(new_kernel, NO_HOOKS + "\n" + CYCLE)
    version = kernel.evaluate(v="torch.__version__")["v"]
    expected = [{"area": "models", "library": "torch", "version": version}]
    hello = comm.messages("hello")[0]
    assert early["limits"] == expected and hello["limits"] == expected

    # a model no name reaches, made in a cell: found by the scan after that cell
    inventory, _ = cell(kernel, comm, "make_cycle()")
    (hidden,) = inventory["models"]
    assert hidden["className"] == "Net"
    assert hidden["holders"] == [{"kind": "hidden", "name": UNREACHABLE, "path": UNREACHABLE}]
    scan, active, each = scan_stats(kernel)
    assert active is False and each is True
    assert 0 < scan["examined"] <= 500_000 and scan["ms"] < 2_000

    # a re-run cell: the earlier instance is stacked (held by its own cycle), both are found
    rerun = "model = Net()\nmodel.fc.weight.data.fill_(1.0)"
    cell(kernel, comm, rerun)
    inventory, _ = cell(kernel, comm, rerun)
    nets = [m for m in model_by_order(inventory) if m["className"] == "Net"]
    assert len(nets) == 3
    older, newer = nets[1], nets[2]
    assert holder_names(newer) == {"model"}
    assert holder_names(older) == {UNREACHABLE} and older["stale"] is True
    assert newer["parameters"] == 32 * 32 + 32

    # the limit arrives once: every inventory carries the same one entry
    inventories = comm.messages("inventory")
    assert all(m["limits"] == expected for m in inventories)
    assert comm.messages("error") == []


def test_the_heap_scan_keeps_its_bound_and_covers_the_heap_over_cells(new_kernel):
    kernel, comm, _ = start(new_kernel, NO_HOOKS + "\n" + NET)
    bound = 20_000
    # the bound lowered; the listing's skip turned off (scan_list_ms: a loaded machine's
    # listing time would make the number of cells vary)
    kernel.execute(
        f"[setattr({AGENT}.tracker, k, v) for k, v in "
        f"(('scan_objects', {bound}), ('scan_list_ms', 1e9), ('_old_skip', 0))]",
        silent=True,
        store_history=False,
    )
    # a model no name reaches (a module's global: the holder walk never enters module dicts),
    # in the old generation behind 60,000 newer objects: the scan's newest-first pass misses
    # it, its cursor pass reaches it within a few cells
    inventory, _ = cell(
        kernel,
        comm,
        "import json\njson._held = Net()\ngc.collect()\n"
        "pad = [[] for _ in range(60000)]\ngc.collect()",
    )
    scan, _, _ = scan_stats(kernel)
    assert scan["examined"] == bound and scan["complete"] is False and scan["old"] > 60_000
    # not in the first inventory: a full scan would have found it, this one stopped at its bound
    found = any(m["className"] == "Net" for m in inventory["models"])
    assert not found
    # every scan looks at no more than the bound; within the cells the bound allows for the
    # old generation's size, every object was looked at, so the model is found
    per_cell = bound // 4  # the least the cursor pass gets, young generations taking the rest
    cells = math.ceil(scan["old"] / per_cell) + 2
    for _ in range(cells):
        if found:
            break
        inventory, _ = cell(kernel, comm, "pass")
        scan, _, _ = scan_stats(kernel)
        assert scan["examined"] <= bound
        found = any(m["className"] == "Net" for m in inventory["models"])
    assert found, f"not found within {cells} cells"
    assert comm.messages("error") == []


def test_an_ipython_layout_it_cannot_read_limits_holders_and_keeps_naming_them(new_kernel):
    # simulated: user_ns_hidden of another shape (a dict subclass; IPython keeps using it)
    setup = (
        "get_ipython().user_ns_hidden = type('HiddenNs', (dict,), {})(get_ipython().user_ns_hidden)"
    )
    kernel, comm, early = start(new_kernel, setup)
    version = kernel.evaluate(v="__import__('IPython').__version__")["v"]
    expected = [{"area": "holders", "library": "IPython", "version": version}]
    assert early["limits"] == expected
    assert comm.messages("hello")[0]["limits"] == expected

    cell(kernel, comm, "import torch\nnet = torch.nn.Linear(16, 16)")
    shown = kernel.run("net")  # an output: Out[n], _n, _
    assert shown.error is None and shown.stdout == "" and shown.stderr == ""
    n = shown.execution_count
    inventory, _ = cell(kernel, comm, "box = {'net': net}")
    (model,) = inventory["models"]
    names = holder_names(model)
    assert {"net", "box", f"Out[{n}]", f"_{n}"} <= names
    assert {"__builtins__", "In", "Out", "_oh"}.isdisjoint(holder_names(model, "variable"))
    assert holder_names(model, "variable") == {"net", "box"}
    assert all(m["limits"] == expected for m in comm.messages("inventory"))
    assert comm.messages("error") == []
