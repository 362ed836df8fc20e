"""Another extension's probes are not user cells (issue 5, item 9), in a real kernel over the
real comm: a variable inspector or a completion helper sends its own execute requests between
the user's cells. Such a request must not produce an inventory (a row in the cells table, a
point of the leak trend), must not mark the samples taken while it runs as ``busy`` and must not
change the execution count.

Two kinds of probe are found in the wild: ``silent=True, store_history=False`` (no IPython
hooks run at all) and ``silent=False, store_history=False`` (what jupyterlab-variableInspector
sends after every cell: IPython runs ``pre_run_cell``/``post_run_cell`` for it, and IPython 9
hands ``post_run_cell`` the *next* execution count)."""

import time

import pytest

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.compat]

INTERVAL_MS = 250
# long enough for the sampler to take a few samples while the probe runs
PROBE = (
    "import json as _probe_json, time as _probe_time\n"
    "_probe_time.sleep(1.0)\n"
    "_probe_json.dumps(sorted(k for k in globals() if not k.startswith('_')))"
)


def start(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    first = kernel.run("a = 1")
    assert first.execution_count == 1
    comm.wait_for("inventory", 2)  # the comm_open's and the cell's
    return kernel, comm


SKIPPED = "__import__('sys').modules['_jupyterlab_gpu_hygiene_agent']._agent.quiet.skipped"


def probe(kernel, comm, silent):
    """Run the probe like another extension; returns (reply, new inventories, samples during,
    samples the sampler read and held back meanwhile). Not a user cell, so not busy: the agent
    sends no sample while it runs unless the kernel's figures move (issue 40)."""
    time.sleep(2 * INTERVAL_MS / 1000)
    kernel.pump(0)
    skipped = kernel.evaluate(n=SKIPPED)["n"]
    inventories = len(comm.messages("inventory"))
    samples = len(comm.messages("sample"))
    began = time.time()
    result = kernel.execute(PROBE, silent=silent, store_history=False)
    ended = time.time()
    time.sleep(2 * INTERVAL_MS / 1000)  # anything the probe's post_run_cell would send
    new_inventories = comm.messages("inventory")[inventories:]
    during = [s for s in comm.messages("sample")[samples:] if began <= s["t"] <= ended]
    held_back = kernel.evaluate(n=SKIPPED)["n"] - skipped
    return result, new_inventories, during, held_back


def then_a_user_cell_is_cell_2(kernel, comm):
    before = len(comm.messages("inventory"))
    result = kernel.run("b = 2")
    assert result.execution_count == 2
    inventories = comm.wait_for("inventory", before + 1)
    counts = [inventory["executionCount"] for inventory in inventories]
    # exactly one inventory says "cell 2": the user's
    assert counts.count(2) == 1, counts
    assert counts[-1] == 2


def test_a_silent_probe_is_not_a_user_cell(new_kernel, capsys):
    kernel, comm = start(new_kernel)
    result, inventories, during, held_back = probe(kernel, comm, silent=True)
    with capsys.disabled():
        print(
            f"\nsilent probe: {len(inventories)} inventories, "
            f"{sum(s['busy'] for s in during)}/{len(during)} samples busy, "
            f"execution count {kernel.evaluate(n='get_ipython().execution_count')['n']}"
        )
    assert result.reply["status"] == "ok"
    assert result.iopub == []  # silent: nothing on IOPub but status
    assert inventories == []
    # the sampler read while the probe ran and took it for idle: nothing busy was sent
    assert held_back >= 2 and not any(s["busy"] for s in during), (held_back, during)
    assert kernel.evaluate(n="get_ipython().execution_count")["n"] == 2  # cell 2 comes next
    assert result.reply["execution_count"] == 1
    then_a_user_cell_is_cell_2(kernel, comm)


def test_a_probe_without_history_is_not_a_user_cell(new_kernel, capsys):
    kernel, comm = start(new_kernel)
    result, inventories, during, held_back = probe(kernel, comm, silent=False)
    with capsys.disabled():
        print(
            f"\nnon-silent probe without history: {len(inventories)} inventories "
            f"(executionCount {[i['executionCount'] for i in inventories]}), "
            f"{sum(s['busy'] for s in during)}/{len(during)} samples busy"
        )
    assert result.reply["status"] == "ok"
    assert kernel.evaluate(n="get_ipython().execution_count")["n"] == 2
    # the sampler read while the probe ran and took it for idle: nothing busy was sent
    assert held_back >= 2 and not any(s["busy"] for s in during), (held_back, during)
    assert inventories == [], [i["executionCount"] for i in inventories]
    then_a_user_cell_is_cell_2(kernel, comm)
