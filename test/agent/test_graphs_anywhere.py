"""Issue 28, item 2, in a real kernel on both devices: autograd graphs are counted wherever a
tensor with a ``grad_fn`` is held, not only in a variable that is a tensor or a list of them.

- A displayed output: an evaluation loop without ``no_grad`` whose mean is shown
  (``sum(val_losses) / len(val_losses)``) keeps every graph of the list through the mean's own
  graph. ``Out[N]`` is a graph holder (``root: "output"``, all of IPython's names of it), the two
  holders name each other (``sharedWith``), and after ``del val_losses`` the output still keeps
  them: reported, never "nothing held". The browser's Fix… cell for the list detaches the
  shown output too, and frees the graphs' bytes.
- An attribute (``run.loss``), a container nested twice (``history['val']['epoch'][0]``): found
  by the roots' walk, their path named.

What the graphs saved is known independently of the agent: the cells record, with
``torch.autograd.graph.saved_tensors_hooks``, the storage of every tensor saved for backward
(``SAVED``: {storage: bytes}). The truth of a fix is the same as ``test_llm_holders``': every
live storage on the CPU (within 1 KiB: after ``del val_losses`` the output's fix frees 8 B more
than that inventory counted, not traced), ``torch.cuda.memory_allocated()`` within 1 MiB on
CUDA.
"""

import pytest
from checks import MiB
from conftest import DEVICES
from test_llm_holders import SETUP, freed_row, run_fix

pytestmark = [pytest.mark.timeout(300)]

on_both = pytest.mark.parametrize("device", DEVICES)

# The storages each graph saved for backward, recorded as autograd packs them ({(device,
# pointer): bytes}; the leaf weight, which lives anyway, left out).
RECORD = (
    "\nSAVED = {}\n"
    "def _pack(t):\n"
    "    if not (t.is_leaf and t.requires_grad):\n"
    "        s = t.untyped_storage()\n"
    "        SAVED[(str(t.device), s.data_ptr())] = s.nbytes()\n"
    "    return t.detach()  # t itself would make a cycle through a saved output\n"
    "recording = torch.autograd.graph.saved_tensors_hooks(_pack, lambda t: t)"
)


def record(s):
    """Set up the kernel: torch, ``DEV``, and ``recording`` (what graphs save, in ``SAVED``)."""
    s.run(code=SETUP.format(dev=s.dev) + RECORD)


# An evaluation loop without torch.no_grad(): each loss keeps its graph (4 MiB of inputs and
# 4 MiB of activations per batch on either device).
EVALUATE = (
    "w = torch.randn(512, 512, device=DEV, requires_grad=True)\n"
    "val_losses = []\n"
    "with recording:\n"
    "    for i in range(8):\n"
    "        xb = torch.randn(2048, 512, device=DEV)\n"
    "        val_losses.append(((xb @ w).tanh() ** 2).mean())\n"
    "del xb"
)


def fix_and_check(s, check, receipt, label, cell, n, expected, cpu_tol=0):
    """Run a Fix… cell the browser generated; the rows: what it freed (``truth``) against
    ``expected``, and its receipt's figure against what it freed; then no graph holder is
    left, and ``Out[n]`` keeps its value under all of IPython's names of it, without its
    graph."""
    shown = s.evaluate(v=f"Out[{n}].item()")["v"]
    before, after, inventory, claimed = run_fix(s, cell, receipt)
    freed_row(check, s, label, before, after, expected, cpu_tol=cpu_tol, claimed=claimed)
    assert inventory["graphs"] == []
    got = s.evaluate(v=f"Out[{n}].item()", same=f"_{n} is Out[{n}]", graph=f"_{n}.grad_fn is None")
    assert got == {"v": shown, "same": True, "graph": True}


def graphs_by_name(inventory):
    return {g["name"]: g for g in inventory["graphs"]}


@on_both
def test_a_displayed_mean_keeps_the_lists_graphs_and_fix_detaches_both(
    device, session, browser_cells, browser_receipt, check
):
    s = session(name="graphs-output")
    record(s)
    s.run(code=EVALUATE)
    saved = s.evaluate(n="sum(SAVED.values())")["n"]
    assert saved == 16 * 4 * MiB  # 8 inputs and 8 activations of 2048 x 512 float32
    result, inventory = s.run(code="sum(val_losses) / len(val_losses)")
    n = result.execution_count
    graphs = graphs_by_name(inventory)
    out = graphs[f"Out[{n}]"]
    assert out["root"] == "output" and out["path"] == f"Out[{n}]"
    assert {f"Out[{n}]", f"_{n}", "_"} <= set(out["names"])
    assert out["count"] == 1 and out["container"] == "tensor"
    listed = graphs["val_losses"]
    assert listed["count"] == 8 and listed["container"] == "list"
    assert listed["sharedWith"] == [f"Out[{n}]"] and out["sharedWith"] == ["val_losses"]
    # what the graphs saved, plus the losses themselves (8 scalars) and the mean (1)
    assert listed["bytes"][s.dev] == saved + 8 * 4
    assert saved <= out["bytes"][s.dev] <= saved + 64
    # the roots' bytes count the graphs once: the list first, the output's names after it
    roots = {(r["kind"], r["name"]): r for r in inventory["roots"]}
    assert roots[("variable", "val_losses")]["bytes"][s.dev] == saved + 8 * 4

    _, inventory = s.run(code="del val_losses")
    (out,) = inventory["graphs"]  # the output still keeps every graph: never "nothing held"
    assert out["name"] == f"Out[{n}]" and "sharedWith" not in out
    assert saved <= out["bytes"][s.dev] <= saved + 64
    held = sum(sum(r["bytes"].values()) for r in inventory["roots"] if r["kind"] == "output")
    assert held >= saved
    # the output's own Fix…: IPython's names of it get the value without the graph
    cell = browser_cells("../memory/graph-holders", "generateDetachCell", out)
    fix_and_check(
        s,
        check,
        browser_receipt,
        "28.2 Fix… of a displayed mean frees what its graphs saved",
        cell,
        n,
        out["bytes"][s.dev] - 4,  # the mean itself (4 B) stays, detached
        cpu_tol=1024,  # 8 B more go than this inventory counted (not traced)
    )

    # again with the list named: the list's Fix… detaches the shown output too
    s.run(code=EVALUATE)
    result, inventory = s.run(code="sum(val_losses) / len(val_losses)")
    n = result.execution_count
    graphs = graphs_by_name(inventory)
    listed, out = graphs["val_losses"], graphs[f"Out[{n}]"]
    cell = browser_cells("../memory/graph-holders", "generateDetachCell", listed, [out])
    fix_and_check(
        s,
        check,
        browser_receipt,
        "28.2 Fix… of a list whose mean is displayed frees what both graphs saved",
        cell,
        n,
        out["bytes"][s.dev] - 4,  # the output's graphs hold the list's: the larger figure
    )
    assert s.evaluate(g="all(t.grad_fn is None for t in val_losses)")["g"] is True


@on_both
def test_graphs_under_an_attribute_or_nested_twice_are_found(device, session):
    s = session(name="graphs-attribute")
    record(s)
    _, inventory = s.run(
        code="class Run:\n"
        "    pass\n"
        "run = Run()\n"
        "w = torch.randn(512, 512, device=DEV, requires_grad=True)\n"
        "with recording:\n"
        "    xb = torch.randn(1024, 512, device=DEV)\n"
        "    run.loss = (xb @ w).relu().sum()\n"
        "    before = sum(SAVED.values())\n"
        "    history = {'val': {'epoch': [(torch.randn(1024, 512, device=DEV) @ w).sigmoid()"
        ".mean()]}}\n"
        "del xb"
    )
    saved = s.evaluate(a="before", b="sum(SAVED.values()) - before")
    graphs = graphs_by_name(inventory)
    attr, nested = graphs["run"], graphs["history"]
    assert (attr["path"], attr["container"], attr["count"]) == ("run.loss", "object", 1)
    assert (nested["path"], nested["container"]) == ("history['val']['epoch'][0]", "dict")
    # relu saves its output (2 MiB) and mm its input (2 MiB); sigmoid its output and mm its input
    assert attr["bytes"][s.dev] == saved["a"] + 4
    assert nested["bytes"][s.dev] == saved["b"] + 4
    # two attributes: no one place holds them, and nothing a Fix… cell can act on
    _, inventory = s.run(code="run.acc = (torch.randn(256, 512, device=DEV) @ w).exp().sum()")
    attr = graphs_by_name(inventory)["run"]
    assert (attr["path"], attr["container"], attr["count"]) == ("run…", "object", 2)
    _, inventory = s.run(code="run.loss = run.loss.item()\nrun.acc = 0\nhistory.clear()")
    assert inventory["graphs"] == []
