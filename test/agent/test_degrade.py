"""Issue 16: what an old environment lacks, the agent degrades from, never breaks; each limit is
said once, as ``limits`` in ``hello`` and every ``inventory`` (docs/protocol.md), never in a cell.

Real kernels, real torch (CPU) and IPython. Two old environments are *simulated* in the kernel
before the agent is installed, because they cannot be installed here:

- torch < 2.0 (no wheel for Python 3.11): its global module registration hooks
  (``torch.nn.modules.module.register_module_*_registration_hook``) are deleted, so the agent
  finds models by its bounded heap scan per inventory (the ``models`` limit);
- an IPython whose ``user_ns_hidden`` is not the plain dict the agent reads: it is replaced by
  a dict subclass (IPython itself keeps working), so the agent tells variables from IPython's
  names by name only (the ``holders`` limit).
"""

import math

import pytest
from conftest import MODULE, holder_names, model_by_order

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
