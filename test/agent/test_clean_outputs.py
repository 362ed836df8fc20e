"""The clean cell drops output-cache entries that hold (CUDA) tensors no variable names.

Issue 17, item 3: a displayed tensor is held by ``_``, ``__``, ``___``, ``_N`` and ``Out[N]``; the
agent attributes its bytes to the first root walked (usually a slot ``_``, which does not say
which cell it is). The browser's unrestricted plan (``planClean`` in
``src/analysis/codegen/clean-cell.ts``)
drops every output-cache entry whose root holds CUDA bytes, and for the slots the ``Out`` entries
that are their values. Here the tensors are on the CPU; the inventory's output roots are relabelled
``cuda:0`` before the generator sees them, so the very cell the extension would insert on a GPU
runs in a real kernel.
"""

import pytest

pytestmark = pytest.mark.timeout(150)


def start(new_kernel, interval_ms=1000):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": interval_ms})
    comm = kernel.open_comm(interval_ms)
    return kernel, comm


def run_and_inventory(kernel, comm, code):
    n = len(comm.messages("inventory"))
    result = kernel.run(code)
    assert result.error is None, result.error
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    return result, inventory


def on_cuda(inventory):
    """The inventory as if its roots held their bytes on cuda:0."""
    for root in inventory["roots"]:
        for field in ("bytes", "sole", "shared"):
            if root.get(field):
                root[field] = {"cuda:0": sum(root[field].values())}
    return inventory


def test_clean_drops_displayed_tensors_and_keeps_a_named_one(new_kernel, generate_clean_cell):
    kernel, comm = start(new_kernel)
    run_and_inventory(
        kernel,
        comm,
        "import weakref, torch\n"
        "refs = []\n"
        "def make():\n"
        "    t = torch.ones(2**18)\n"
        "    refs.append(weakref.ref(t))\n"
        "    return t",
    )
    run_and_inventory(kernel, comm, "make()")  # refs[0]: only the output cache
    run_and_inventory(kernel, comm, "make()")  # refs[1]: only the output cache
    run_and_inventory(kernel, comm, "kept = make()")  # refs[2]: a variable
    _, inventory = run_and_inventory(kernel, comm, "kept")  # displayed too
    outputs = {r["name"] for r in inventory["roots"] if r["kind"] == "output"}
    assert outputs and outputs <= {"_", "__", "___", "Out[2]", "Out[3]", "_2", "_3"} | {
        "Out[5]",
        "_5",
    }
    cells = {r["name"]: r["cells"] for r in inventory["roots"] if r["kind"] == "output"}
    assert cells["_"] == [5] and cells["__"] == [3] and cells["___"] == [2]
    clean = generate_clean_cell(on_cuda(inventory))
    assert "out_keys=(2, 3)" in clean  # cell [5] shows kept: never planned
    assert "ns.pop(" not in clean  # no variable is deleted
    run_and_inventory(kernel, comm, clean)
    state = kernel.run(
        "print([r() is None for r in refs], 'kept' in dir(), kept.shape[0], 2 in Out, 3 in Out)"
    ).stdout
    assert state == "[True, True, False] True 262144 False False\n"
