"""Issue 31, item 4, in a real kernel on the CPU: every fix cell acts on the object its finding
was built on, never on whatever the name holds by the time it runs.

The agent stamps each row a fix acts on with the ``valueId`` of what its variable held
(``hex(id())``): the ``variable`` roots (Move to CPU…, Delete…), the graph holders (Fix…:
detach) and the ``variable`` holders of DataLoader workers (Drop workers…), as it already did
for the models' holders (Delete model…, Clean GPU, Drop trainer…). The very cells the browser
generates (``src/analysis/codegen/*.ts``, ``src/analysis/memory/graph-holders.ts``, through
node) then run twice: after the name was rebound to a new object, with the old id (the new
object is left as it is, and the cell's output says so), and with the id of the new
inventory (the cell acts).
"""

import pytest

pytestmark = [pytest.mark.timeout(300), pytest.mark.compat]

KEPT = "changed since the finding: kept"


def row(rows, name):
    found = [r for r in rows if r.get("name") == name]
    assert len(found) == 1, rows
    return found[0]


def held_id(s, name):
    return s.evaluate(v=f"hex(id({name}))")["v"]


def output_of(result):
    return result.stdout + result.stderr


def test_variable_roots_and_graph_holders_carry_the_id_of_what_they_held(session, browser_cells):
    s = session(name="identity")
    _, inventory = s.run(
        code="import torch\n"
        "acts = {'a': torch.ones(2**18), 'b': torch.ones(2**18)}\n"
        "w = torch.ones(256, 256, requires_grad=True)\n"
        "losses = [(w * 2).relu().sum() for _ in range(3)]"
    )
    acts = row([r for r in inventory["roots"] if r["kind"] == "variable"], "acts")
    graph = row(inventory["graphs"], "losses")
    assert acts["valueId"] == held_id(s, "acts")
    assert graph["valueId"] == held_id(s, "losses")
    # an output root has no variable: no id
    assert all("valueId" not in r for r in inventory["roots"] if r["kind"] != "variable")

    # The names now hold other objects: the cells built on the old ones leave them alone.
    s.run(
        code="old_acts, old_losses = acts, losses\n"
        "acts = {'c': torch.zeros(3)}\n"
        "losses = [(w * 3).relu().sum()]"
    )
    delete = browser_cells(
        "tensor-cells", "generateDeleteVariableCell", "acts", acts["sole"], acts["valueId"]
    )
    result, _ = s.run(code=delete)
    assert f"# acts {KEPT}" in output_of(result)
    assert s.evaluate(v="sorted(acts)")["v"] == ["c"]

    move = browser_cells(
        "tensor-cells", "generateMoveToCpuCell", "acts", acts["sole"], acts["valueId"]
    )
    result, _ = s.run(code=move)
    assert f"# acts {KEPT}" in output_of(result)

    detach = browser_cells("../memory/graph-holders", "generateDetachCell", graph)
    result, _ = s.run(code=detach)
    assert f"# losses {KEPT}" in output_of(result)
    assert s.evaluate(v="[t.grad_fn is not None for t in losses]")["v"] == [True]

    # With the id of the new inventory, each cell acts.
    _, inventory = s.run(code="x = 1")
    graph = row(inventory["graphs"], "losses")
    assert graph["valueId"] == held_id(s, "losses")
    result, _ = s.run(code=browser_cells("../memory/graph-holders", "generateDetachCell", graph))
    assert KEPT not in output_of(result)
    assert s.evaluate(v="[t.grad_fn is None for t in losses]")["v"] == [True]

    acts = row([r for r in inventory["roots"] if r["kind"] == "variable"], "old_acts")
    delete = browser_cells(
        "tensor-cells", "generateDeleteVariableCell", "old_acts", acts["sole"], acts["valueId"]
    )
    result, _ = s.run(code=delete)
    assert KEPT not in output_of(result)
    assert s.evaluate(v="'old_acts' in dir()")["v"] is False
    # the user's other names are untouched
    assert s.evaluate(v="sorted(acts)")["v"] == ["c"]


def test_drop_cells_leave_a_rebound_name_alone(session, browser_cells):
    """Drop trainer… and Drop workers… with the id of an object the name no longer holds: the
    new object keeps its trainer and its name; with the current id they act. (The ids these
    cells get come from the inventory's holders: test_trained_model.py and
    test_workers_allocator.py check them.)"""
    s = session(name="identity-drop")
    s.run(
        code="import types\n"
        "yolo = types.SimpleNamespace(trainer=types.SimpleNamespace())\n"
        "loader = [1, 2]"
    )
    old_yolo, old_loader = held_id(s, "yolo"), held_id(s, "loader")
    s.run(code="yolo = types.SimpleNamespace(trainer=types.SimpleNamespace(epoch=3))\nloader = [3]")
    target = {"name": "yolo", "holds": ["its optimizer"], "bytes": 0, "valueId": old_yolo}
    result, _ = s.run(code=browser_cells("drop-trainer-cell", "generateDropTrainerCell", target))
    assert f"# yolo {KEPT}" in output_of(result)
    assert s.evaluate(v="yolo.trainer.epoch")["v"] == 3

    drop = browser_cells(
        "drop-workers-cell", "generateDropWorkersCell", ["loader"], 2, {"loader": old_loader}
    )
    result, _ = s.run(code=drop)
    assert f"# loader {KEPT}" in output_of(result)
    assert s.evaluate(v="loader")["v"] == [3]

    target["valueId"] = held_id(s, "yolo")
    result, _ = s.run(code=browser_cells("drop-trainer-cell", "generateDropTrainerCell", target))
    assert KEPT not in output_of(result)
    assert s.evaluate(v="yolo.trainer is None")["v"] is True
    drop = browser_cells(
        "drop-workers-cell",
        "generateDropWorkersCell",
        ["loader"],
        2,
        {"loader": held_id(s, "loader")},
    )
    result, _ = s.run(code=drop)
    assert KEPT not in output_of(result)
    assert s.evaluate(v="'loader' in dir()")["v"] is False
