"""In-process tests of the allocator and children facts (``allocator.py``, ``children.py``,
``workers.py``): torch's caching allocator through a fake ``torch`` module with
``memory_stats`` (this machine has no CUDA), and the kernel's child processes with real CPU
DataLoader workers, through ``/proc``, through psutil, and with neither."""

import os
import sys
import time
import types

import pytest
from conftest import load_agent

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20


@pytest.fixture(scope="module")
def agent():
    return load_agent("_gpu_hygiene_agent_facts")


def fake_torch(stats, initialized=True):
    """A module shaped like torch for the allocator: ``cuda.is_initialized``,
    ``device_count``, ``memory_stats(i)``; every call is recorded."""
    calls = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: initialized,
        device_count=lambda: len(stats),
        memory_stats=lambda i: calls.append(i) or stats[i],
    )
    torch = types.ModuleType("torch")
    torch.cuda = cuda
    return torch, calls


def stats(reserved, allocated, active, inactive_split, segments=3, retries=0):
    return {
        "reserved_bytes.all.current": reserved,
        "allocated_bytes.all.current": allocated,
        "active_bytes.all.current": active,
        "inactive_split_bytes.all.current": inactive_split,
        "segment.all.current": segments,
        "num_alloc_retries": retries,
        "reserved_bytes.all.peak": 10 * reserved,  # other keys are ignored
    }


def nested(flat):
    """``memory_stats_as_nested_dict``'s shape of a ``memory_stats`` dict."""
    out = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


# ---- allocator


def test_the_fact_reads_the_nested_dict_as_memory_stats_would(agent, monkeypatch):
    flat = [stats(1024 * MiB, 200 * MiB, 210 * MiB, 96 * MiB, 5, 2)]
    torch, calls = fake_torch(flat)
    monkeypatch.setitem(sys.modules, "torch", torch)
    from_flat = agent.allocator.allocator_fact()
    assert calls == [0]
    torch.cuda.memory_stats_as_nested_dict = lambda i: (
        calls.append(("nested", i)) or nested(flat[i])
    )
    assert agent.allocator.allocator_fact() == from_flat
    assert calls == [0, ("nested", 0)]  # the flattened memory_stats is not called


def test_allocator_splits_the_cache_into_returnable_and_fragmented(agent, monkeypatch):
    torch, calls = fake_torch(
        [stats(1024 * MiB, 200 * MiB, 210 * MiB, 96 * MiB, 5, 2), stats(0, 0, 0, 0, 0)]
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    fact = agent.allocator.allocator_fact()
    assert calls == [0, 1]
    assert fact == {
        "expandableSegments": False,
        "devices": [
            {
                "index": 0,
                "reserved": 1024 * MiB,
                "allocated": 200 * MiB,
                "active": 210 * MiB,
                "inactiveSplit": 96 * MiB,
                "releasable": (1024 - 210 - 96) * MiB,
                "segments": 5,
                "allocRetries": 2,
            },
            {
                "index": 1,
                "reserved": 0,
                "allocated": 0,
                "active": 0,
                "inactiveSplit": 0,
                "releasable": 0,
                "segments": 0,
                "allocRetries": 0,
            },
        ],
    }


def test_allocator_is_null_without_an_initialised_cuda_and_never_asks_torch(agent, monkeypatch):
    torch, calls = fake_torch([stats(1, 1, 1, 0)], initialized=False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert agent.allocator.allocator_fact() is None
    assert calls == []
    monkeypatch.delitem(sys.modules, "torch")
    assert agent.allocator.allocator_fact() is None


def test_allocator_tolerates_missing_keys(agent, monkeypatch):
    torch, _ = fake_torch([{}])
    monkeypatch.setitem(sys.modules, "torch", torch)
    (device,) = agent.allocator.allocator_fact()["devices"]
    assert device["reserved"] == device["releasable"] == 0


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("expandable_segments:True", True),
        ("max_split_size_mb:64, expandable_segments:true", True),
        ("expandable_segments:True,expandable_segments:False", False),
        ("expandable_segments:False", False),
        ("", False),
        ("garbage", False),
    ],
)
def test_expandable_segments_setting(agent, value, on):
    assert agent.allocator.expandable_segments(value) is on


def test_expandable_segments_from_the_environment(agent, monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    assert agent.allocator.expandable_segments() is True
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
    assert agent.allocator.expandable_segments() is False


# ---- children


@pytest.fixture
def loaders():
    """A persistent DataLoader half way through an epoch and an iterator left half consumed,
    two CPU workers each; shut down at the end."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.arange(256.0))
    loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    it = iter(DataLoader(ds, batch_size=4, num_workers=2))
    next(it)
    yield loader, it
    it._shutdown_workers()
    loader._iterator._shutdown_workers()


def test_children_through_proc_name_the_workers_and_their_holders(agent, loaders):
    loader, it = loaders
    roots = [("variable", [("train_loader", loader), ("it", it), ("box", {"k": it}), ("n", 3)])]
    started = time.perf_counter()
    fact = agent.children.children_fact(os.getpid(), roots)
    cost = time.perf_counter() - started
    assert fact["visible"] and fact["source"] == "proc" and fact["reason"] is None
    procs = {p["pid"]: p for p in fact["processes"]}
    loader_pids = sorted(w.pid for w in loader._iterator._workers)
    it_pids = sorted(w.pid for w in it._workers)
    assert set(loader_pids + it_pids) <= set(procs)
    for pid in loader_pids + it_pids:
        p = procs[pid]
        assert p["ppid"] == os.getpid()
        assert p["rss"] > 0
        assert p["cuda"] is False and p["cudaSource"] == "fd"
        assert p["name"] == "pt_data_worker"  # torch names its workers' threads so
    holders = {h["path"]: h for h in fact["holders"]}
    assert set(holders) == {"train_loader", "it", "box['k']"}
    assert holders["train_loader"] == {
        "kind": "variable",
        "name": "train_loader",
        "path": "train_loader",
        "className": "DataLoader",
        "persistent": True,
        "pids": sorted(holders["train_loader"]["pids"]),
    }
    assert sorted(holders["train_loader"]["pids"]) == loader_pids
    assert sorted(holders["it"]["pids"]) == it_pids
    assert holders["it"]["className"] == "_MultiProcessingDataLoaderIter"
    assert holders["it"]["persistent"] is False
    assert cost < 0.05, f"one read took {cost * 1000:.1f} ms"

    # after the iterator's shutdown its workers are gone and nothing holds them
    it._shutdown_workers()
    fact = agent.children.children_fact(os.getpid(), roots)
    assert {h["path"] for h in fact["holders"]} == {"train_loader"}
    assert not set(it_pids) & {p["pid"] for p in fact["processes"]}


def test_children_through_psutil_where_proc_is_not_there(agent, loaders):
    pytest.importorskip("psutil")
    loader, _ = loaders
    fact = agent.children.children_fact(
        os.getpid(), [("variable", [("train_loader", loader)])], proc="/nonexistent"
    )
    assert fact["visible"] and fact["source"] == "psutil"
    pids = {w.pid for w in loader._iterator._workers}
    seen = {p["pid"]: p for p in fact["processes"]}
    assert pids <= set(seen)
    assert all(seen[p]["rss"] > 0 and seen[p]["cuda"] is None for p in pids)
    assert fact["holders"][0]["pids"] == sorted(pids) or set(fact["holders"][0]["pids"]) == pids


def test_children_without_proc_nor_psutil_are_not_visible_but_holders_are_named(
    agent, loaders, monkeypatch
):
    loader, _ = loaders
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    fact = agent.children.children_fact(
        os.getpid(), [("variable", [("train_loader", loader)])], proc="/nonexistent"
    )
    assert fact["visible"] is False and fact["source"] is None
    assert fact["reason"] == "no /proc and psutil is not installed in the kernel"
    assert fact["processes"] == []
    # the holders come from Python objects: their pids are kept (unverified)
    assert [h["name"] for h in fact["holders"]] == ["train_loader"]
    assert len(fact["holders"][0]["pids"]) == 2


def test_nvml_says_which_children_hold_a_cuda_context(agent, loaders):
    loader, _ = loaders
    pids = [w.pid for w in loader._iterator._workers]
    fact = agent.children.children_fact(
        os.getpid(), [("variable", [("l", loader)])], nvml_pids={os.getpid(), pids[0]}
    )
    cuda = {p["pid"]: (p["cuda"], p["cudaSource"]) for p in fact["processes"]}
    assert cuda[pids[0]] == (True, "nvml") and cuda[pids[1]] == (False, "nvml")


def test_nvml_pids_are_trusted_only_when_nvml_lists_the_kernel(agent):
    procs = agent.devices.DeviceProcesses(0, 0, [agent.devices.ProcessUse(7, 1)])
    sampler = types.SimpleNamespace(
        nvml=object(), devices=[types.SimpleNamespace(index=0)], processes=lambda i: procs
    )
    assert agent.children.nvml_pids(sampler, 7) == {7}
    assert agent.children.nvml_pids(sampler, 8) is None  # another pid namespace
    sampler.nvml = None
    assert agent.children.nvml_pids(sampler, 7) is None


def test_holders_cost_nothing_before_torch_dataloader_is_imported(agent, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch.utils.data.dataloader", raising=False)
    assert agent.workers.worker_holders([("variable", [("x", object())])]) == []


def test_a_fake_proc_tree_is_followed_and_zombies_left_out(agent, tmp_path):
    def proc(pid, ppid, comm, state="S", kids=()):
        base = tmp_path / str(pid)
        (base / "task" / str(pid)).mkdir(parents=True)
        (base / "task" / str(pid) / "children").write_text(" ".join(map(str, kids)) + " ")
        (base / "stat").write_text(f"{pid} ({comm} (x)) {state} {ppid} 1 1\n")
        (base / "comm").write_text(comm + "\n")
        (base / "cmdline").write_bytes(b"python\0-m\0worker\0")
        (base / "statm").write_text("100 25 3 1 0 10 0\n")
        (base / "fd").mkdir()

    proc(10, 1, "kernel", kids=(11, 12))
    proc(11, 10, "forkserver", kids=(13,))
    proc(12, 10, "gone", state="Z")
    proc(13, 11, "worker")
    os.symlink("/dev/nvidia-uvm", tmp_path / "13" / "fd" / "5")
    os.symlink("/dev/nvidiactl", tmp_path / "11" / "fd" / "5")
    fact = agent.children.children_fact(10, [], proc=str(tmp_path))
    page = os.sysconf("SC_PAGE_SIZE")
    assert [(p["pid"], p["ppid"], p["name"]) for p in fact["processes"]] == [
        (11, 10, "forkserver"),
        (13, 11, "worker"),
    ]
    assert fact["processes"][1]["cmdline"] == "python -m worker"
    assert fact["processes"][1]["rss"] == 25 * page
    # a context opens nvidia-uvm; nvidiactl alone is NVML's
    assert [p["cuda"] for p in fact["processes"]] == [False, True]


def test_orphaned_workers_are_this_users_pt_data_workers_under_pid_1(agent, tmp_path):
    def proc(pid, ppid, comm):
        base = tmp_path / str(pid)
        base.mkdir()
        (base / "stat").write_text(f"{pid} ({comm}) S {ppid} 1 1\n")
        (base / "comm").write_text(comm + "\n")
        (base / "cmdline").write_bytes(b"python\0-m\0ipykernel_launcher\0")
        (base / "statm").write_text("100 25 3 1 0 10 0\n")
        (base / "fd").mkdir()

    proc(20, 1, "pt_data_worker")  # its kernel is gone
    proc(21, 300, "pt_data_worker")  # a live kernel's worker
    proc(22, 1, "python3")  # not a worker
    (tmp_path / "self").mkdir()
    orphans = agent.children.orphan_workers(str(tmp_path))
    assert [p["pid"] for p in orphans] == [20]
    assert agent.children.orphan_workers(str(tmp_path), uid=os.getuid() + 1) == []
    fact = agent.children.children_fact(20, [], proc=str(tmp_path), orphans=orphans)
    assert fact["orphans"][0]["pid"] == 20 and fact["orphans"][0]["cuda"] is False
    assert "zombie" not in fact["orphans"][0]
    (tmp_path / "20" / "stat").write_text("20 (pt_data_worker) Z 1 1 1\n")
    assert agent.children.still_running(orphans, str(tmp_path)) == []


def test_device_files_a_fork_inherits_say_nothing(agent, tmp_path):
    """A kernel with a CUDA context has /dev/nvidia-uvm open; its forked workers list it too
    without a context of their own (seen on an H200, where NVML listed only the kernel): with
    no NVML to ask, such a child's context is unknown, and one without the files has none."""

    def proc(pid, ppid, kids=(), files=()):
        base = tmp_path / str(pid)
        (base / "task" / str(pid)).mkdir(parents=True)
        (base / "task" / str(pid) / "children").write_text(" ".join(map(str, kids)))
        (base / "stat").write_text(f"{pid} (p) S {ppid} 1 1\n")
        (base / "comm").write_text("p\n")
        (base / "cmdline").write_bytes(b"p\0")
        (base / "statm").write_text("1 1 0 0 0 0 0\n")
        (base / "fd").mkdir()
        for i, target in enumerate(files):
            os.symlink(target, base / "fd" / str(i))

    proc(10, 1, kids=(11, 12), files=("/dev/nvidia-uvm", "/dev/nvidia0"))
    proc(11, 10, files=("/dev/nvidia-uvm", "/dev/nvidia0"))
    proc(12, 10)
    fact = agent.children.children_fact(10, [], proc=str(tmp_path))
    assert [(p["pid"], p["cuda"], p["cudaSource"]) for p in fact["processes"]] == [
        (11, None, "fd"),
        (12, False, "fd"),
    ]
    # NVML, where it lists the kernel, decides
    fact = agent.children.children_fact(10, [], nvml_pids={10}, proc=str(tmp_path))
    assert [p["cuda"] for p in fact["processes"]] == [False, False]
