"""Namespaces that tried to break the agent and the clean cell (found in review), in a real
kernel: messages stay within the browser's bounds, a user's own ``_7`` is a variable, a cut walk
never calls a named model stale, a deleted ``Out`` or an already deleted name break nothing."""

import pytest
from conftest import holder_names
from test_inventory import run_and_inventory, start

pytestmark = pytest.mark.timeout(150)


def test_messages_stay_within_the_browser_bounds(new_kernel):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    # 12 000 models, a 20 000-character variable name
    _, inventory = run_and_inventory(
        kernel,
        comm,
        "mods = [torch.nn.Linear(1, 1) for _ in range(12000)]\n"
        "globals()['x' * 20000] = torch.nn.Linear(2, 2)",
    )
    assert len(inventory["models"]) == 2000 and inventory["truncated"] is True
    long = [h["name"] for m in inventory["models"] for h in m["holders"] if len(h["name"]) > 500]
    assert long == [], [len(n) for n in long][:3]
    # two recursion tracebacks chained: more frames than the browser accepts
    failed = kernel.run(
        "del mods\n"
        "def f(n): return f(n + 1)\n"
        "def g(n): return g(n + 1)\n"
        "try:\n    f(0)\nexcept RecursionError:\n    g(0)"
    )
    assert failed.error["ename"] == "RecursionError"
    inventory = comm.wait_for("inventory", len(comm.messages("inventory")), timeout=120)[-1]
    assert 0 < len(inventory["lastError"]["frames"]) <= 500
    assert len(inventory["lastError"]["message"]) <= 500


def test_a_users_own_underscore_number_is_a_variable_and_survives_the_clean(
    new_kernel, generate_clean_cell
):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    _, inventory = run_and_inventory(kernel, comm, "_7 = torch.nn.Linear(8, 8)")
    (model,) = inventory["models"]
    assert holder_names(model, "variable") == {"_7"} and model["stale"] is False
    run_and_inventory(kernel, comm, generate_clean_cell(inventory))
    assert kernel.run("print(type(_7).__name__)").stdout == "Linear\n"


def test_a_cut_walk_never_calls_a_named_model_stale(new_kernel):
    kernel, comm = start(new_kernel)
    _, inventory = run_and_inventory(
        kernel,
        comm,
        "import torch\nbig = {i: i for i in range(10 ** 6)}\nbig['x'] = torch.nn.Linear(4, 4)",
    )
    (model,) = inventory["models"]
    assert inventory["truncated"] is True
    assert model["stale"] is False
    unknown = "not found: the walk bound was hit"
    assert model["holders"] == [{"kind": "hidden", "name": unknown, "path": unknown}]


def test_clean_frees_the_output_cache_after_del_out(new_kernel, generate_clean_cell):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    run_and_inventory(kernel, comm, "del Out")
    shown, _ = run_and_inventory(kernel, comm, "m2 = torch.nn.Linear(16, 16)\nm2")
    _, inventory = run_and_inventory(kernel, comm, "del m2")
    (model,) = inventory["models"]
    assert f"Out[{shown.execution_count}]" in holder_names(model) and model["stale"] is True
    _, inventory = run_and_inventory(kernel, comm, generate_clean_cell(inventory))
    assert inventory["models"] == []


def test_clean_cell_works_after_get_ipython_was_rebound(new_kernel, generate_clean_cell):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    run_and_inventory(kernel, comm, "torch.nn.Linear(16, 16)")
    _, inventory = run_and_inventory(kernel, comm, "get_ipython = None")
    (model,) = inventory["models"]
    assert model["stale"] is True
    cell, inventory = run_and_inventory(kernel, comm, generate_clean_cell(inventory))
    assert cell.error is None and inventory["models"] == []
    assert kernel.run("print(get_ipython)").stdout == "None\n"


def test_a_list_of_many_tensors_is_measured_up_to_the_bound(new_kernel):
    # a dataset kept as a list of tensors: each costs a few microseconds to measure, so the
    # agent measures at most MEASURED_TENSORS per inventory and says the figures are cut
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    _, inventory = run_and_inventory(
        kernel, comm, "data = [torch.zeros(4) for _ in range(30000)]\nnet = torch.nn.Linear(4, 4)"
    )
    assert inventory["truncated"] is True
    roots = {r["name"]: r for r in inventory["roots"]}
    assert roots["data"]["tensors"] == 20000 and roots["data"]["bytes"] == {"cpu": 20000 * 16}
    (net,) = inventory["models"]
    assert holder_names(net) == {"net"}  # still found: modules are not measured tensors
    # the next cell that changes nothing is not walked again
    _, inventory = run_and_inventory(kernel, comm, "pass")
    assert inventory["skipped"] is True
