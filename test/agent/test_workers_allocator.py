"""Issue 17 items 6 and 7 in a real kernel, on both devices (``[cuda]`` is marked ``gpu``):

- the ``allocator`` fact: null while CUDA is not initialised (the CPU run); on CUDA a segment
  split by a smaller tensor after a larger one was freed, compared with torch's own
  ``memory_stats`` read in the kernel at the same moment (within 1 MiB), before and after
  ``empty_cache()``;
- the ``children`` fact: DataLoader workers (``num_workers=2``) kept by a persistent loader and
  by an iterator left half consumed; the drop-workers cell the browser generates
  (``src/analysis/codegen/drop-workers-cell.ts`` through node) shuts them down and the inventory
  shows them gone
  within 5 s."""

import os
import time

import pytest
from checks import MiB, mib, within
from conftest import DEVICES

pytestmark = pytest.mark.timeout(300)

on_both = pytest.mark.parametrize("device", DEVICES)

KEYS = {
    "reserved": "reserved_bytes.all.current",
    "allocated": "allocated_bytes.all.current",
    "active": "active_bytes.all.current",
    "inactiveSplit": "inactive_split_bytes.all.current",
}
TRUTH = f"{{k: v for k, v in torch.cuda.memory_stats(0).items() if k in {tuple(KEYS.values())!r}}}"


def allocator_vs_truth(check, s, label, device):
    """Row: the inventory's allocator entry against torch's memory_stats read right after it."""
    inventory = s.comm.request_inventory()
    truth = s.evaluate(t=TRUTH)["t"]
    measured = {field: device_of(inventory)[field] for field in KEYS}
    ok = all(within(measured[f], truth[k]) for f, k in KEYS.items())
    releasable = device_of(inventory)["releasable"]
    expect = truth[KEYS["reserved"]] - truth[KEYS["active"]] - truth[KEYS["inactiveSplit"]]
    check.row(
        label,
        "allocator fact = torch.cuda.memory_stats(0) within 1 MiB; releasable = reserved - "
        "active - inactive split",
        ", ".join(f"{f} {mib(measured[f])} vs {mib(truth[k])}" for f, k in KEYS.items())
        + f"; releasable {mib(releasable)}",
        ok and within(releasable, expect),
    )
    return device_of(inventory)


def device_of(inventory):
    return inventory["allocator"]["devices"][0]


@on_both
def test_allocator_fact_matches_memory_stats(device, session, check):
    s = session(name="allocator")
    _, inventory = s.run(code="import torch")
    assert inventory["allocator"] is None  # CUDA not initialised: never asked
    if not s.cuda:
        _, inventory = s.run(code="x = torch.ones(1000)")
        check.row(
            "allocator fact without CUDA",
            "null (torch imported, CUDA not initialised)",
            repr(inventory["allocator"]),
            inventory["allocator"] is None and inventory["cudaInitialized"] is False,
        )
        return
    s.run(
        code="a = torch.empty(200 * 2**20, dtype=torch.uint8, device='cuda')\n"
        "del a\n"
        "b = torch.empty(50 * 2**20, dtype=torch.uint8, device='cuda')  # splits the segment"
    )
    split = allocator_vs_truth(
        check, s, "allocator: 50 MiB tensor in a freed 200 MiB segment", device
    )
    check.row(
        "allocator: the split segment's free part",
        "about 150 MiB inactive split (fragmented), not returnable",
        f"inactiveSplit {mib(split['inactiveSplit'])}, releasable {mib(split['releasable'])}",
        within(split["inactiveSplit"], 150 * MiB, 2 * MiB),
    )
    _, inventory = s.run(code="torch.cuda.empty_cache()")
    after = allocator_vs_truth(check, s, "allocator after empty_cache()", device)
    check.row(
        "empty_cache() cannot return the fragmented part",
        "inactive split unchanged; reserved falls by what was releasable",
        f"inactiveSplit {mib(split['inactiveSplit'])} -> {mib(after['inactiveSplit'])}; "
        f"reserved {mib(split['reserved'])} -> {mib(after['reserved'])}",
        after["inactiveSplit"] == split["inactiveSplit"]
        and within(split["reserved"] - after["reserved"], split["releasable"]),
    )
    assert inventory["allocator"]["expandableSegments"] is False


# --------------------------------------------------------------------------------------------
# DataLoader workers


@pytest.fixture(scope="module")
def drop_cell(browser_cells):
    """``generate(names, workers) -> str``: the browser's ``generateDropWorkersCell``
    (``src/analysis/codegen/drop-workers-cell.ts``, through node: the ``browser_cells`` fixture);
    ``value_ids``: {name: the holder's valueId}."""

    def generate(names, workers, value_ids=None):
        return browser_cells(
            "drop-workers-cell", "generateDropWorkersCell", list(names), workers, value_ids or {}
        )

    return generate


SETUP = (
    "import torch\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "ds = TensorDataset(torch.arange(512.0))"
)
PERSISTENT = (
    "train_loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)\n"
    "for i, batch in enumerate(train_loader):\n"
    "    if i == 3:\n"
    "        break  # an interrupted epoch: the persistent iterator keeps its workers"
)
HALF = "it = iter(DataLoader(ds, batch_size=4, num_workers=2))\nfirst = next(it)"


def alive(pid):
    """Whether ``pid`` runs (not gone, not a zombie), read from this process's /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


@on_both
def test_dataloader_workers_their_holders_and_the_drop_cell(device, session, check, drop_cell):
    s = session(name="workers")
    s.run(code=SETUP + ("\ntorch.ones(1, device='cuda')" if s.cuda else ""))
    s.run(code=PERSISTENT)
    _, inventory = s.run(code=HALF)
    children = inventory["children"]
    assert children["visible"] and children["source"] == "proc", children
    holders = {h["path"]: h for h in children["holders"]}
    procs = {p["pid"]: p for p in children["processes"]}
    pids = sorted({pid for h in children["holders"] for pid in h["pids"]})
    check.row(
        "DataLoader workers: count and holders",
        "4 workers, children of the kernel; train_loader (DataLoader, persistent) 2, "
        "it (_MultiProcessingDataLoaderIter) 2",
        f"{len(pids)} workers; "
        + "; ".join(
            f"{p} {h['className']} persistent={h['persistent']} {len(h['pids'])}"
            for p, h in holders.items()
        ),
        len(pids) == 4
        and set(holders) == {"train_loader", "it"}
        and holders["train_loader"]["persistent"] is True
        and holders["train_loader"]["className"] == "DataLoader"
        and holders["it"]["className"] == "_MultiProcessingDataLoaderIter"
        and len(holders["train_loader"]["pids"]) == len(holders["it"]["pids"]) == 2
        and all(procs[p]["ppid"] == s.pid for p in pids),
    )
    check.row(
        "DataLoader workers: RSS",
        "> 0 for each (from /proc/<pid>/statm)",
        ", ".join(mib(procs[p]["rss"], 0) for p in pids),
        all(procs[p]["rss"] > 0 for p in pids),
    )
    sources = {procs[p]["cudaSource"] for p in pids}
    check.row(
        "DataLoader workers: CUDA context",
        "none holds one (CPU data; on CUDA read from NVML's process list)",
        ", ".join(f"{procs[p]['cuda']} ({procs[p]['cudaSource']})" for p in pids),
        all(procs[p]["cuda"] is False for p in pids) if sources != {"fd"} or not s.cuda else None,
    )

    # the variable holders carry the id of what their names held (issue 31: the cell acts only
    # on those objects)
    held = s.evaluate(loader="hex(id(train_loader))", it="hex(id(it))")
    assert {p: h.get("valueId") for p, h in holders.items()} == {
        "train_loader": held["loader"],
        "it": held["it"],
    }
    code = drop_cell(
        ["train_loader", "it"], len(pids), {p: h["valueId"] for p, h in holders.items()}
    )
    _, after = s.run(code=code)
    started = time.monotonic()
    left = set(pids) & {p["pid"] for p in after["children"]["processes"]}
    while left and time.monotonic() - started < 5:
        time.sleep(0.25)
        again = s.comm.request_inventory()
        left = set(pids) & {p["pid"] for p in again["children"]["processes"]}
    waited = time.monotonic() - started
    check.row(
        "drop-workers cell: workers gone",
        "within 5 s of the cell's end, holders gone, names deleted",
        f"left {sorted(left)} after {waited:.2f} s; running per /proc: "
        f"{[p for p in pids if alive(p)]}",
        not left and not any(alive(p) for p in pids),
    )
    state = s.evaluate(
        loader="'train_loader' in get_ipython().user_ns",
        it="'it' in get_ipython().user_ns",
        fn="'_gpu_hygiene_drop_workers' in get_ipython().user_ns",
        ds="'ds' in get_ipython().user_ns",
    )
    assert state == {"loader": False, "it": False, "fn": False, "ds": True}
    # safe to re-run: the names are gone, nothing raises
    result, _ = s.run(code=code)
    assert result.error is None
    assert os.path.basename(code.splitlines()[0]) == "# gpu-hygiene: drop_workers"


STUCK = (
    "import time\n"
    "import torch\n"
    "from torch.utils.data import DataLoader, Dataset\n"
    "class Slow(Dataset):\n"
    "    def __len__(self):\n"
    "        return 100\n"
    "    def __getitem__(self, i):\n"
    "        if i >= 2:\n"
    "            time.sleep(120)  # busy: its watchdog looks for the kernel between batches\n"
    "        return torch.tensor(float(i))\n"
    "it = iter(DataLoader(Slow(), batch_size=1, num_workers=1))\n"
    "first = next(it)"
)


def parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_workers_a_killed_kernel_left_behind_are_listed_by_the_next_one(session, check):
    a = session(name="orphans-before")
    a.run(code=STUCK)
    (worker,) = a.evaluate(p="[w.pid for w in it._workers]")["p"]
    try:
        os.kill(a.pid, 9)  # the kernel dies; its busy worker does not
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(a.pid):
            time.sleep(0.1)
        ppid = parent(worker)
        while time.monotonic() < deadline and ppid == a.pid:  # reparenting follows the exit
            time.sleep(0.1)
            ppid = parent(worker)
        b = session(name="orphans-after")
        inventory = b.comm.messages("inventory")[0]
        orphans = {p["pid"]: p for p in inventory["children"]["orphans"]}
        check.row(
            "orphaned DataLoader worker after the kernel was killed",
            "listed by the next kernel's agent (pid, RSS > 0), not as its own child",
            f"worker {worker} reparented to {ppid}; orphans {sorted(orphans)}",
            (worker in orphans and orphans[worker]["rss"] > 0) if ppid == 1 else None,
        )
        assert worker not in {p["pid"] for p in inventory["children"]["processes"]}
        _, later = b.run(code="x = 1")
        assert worker in {p["pid"] for p in later["children"]["orphans"]} or ppid != 1
    finally:
        if alive(worker):
            os.kill(worker, 9)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(worker):
        time.sleep(0.1)
    inventory = b.comm.request_inventory()
    assert worker not in {p["pid"] for p in inventory["children"]["orphans"]}
