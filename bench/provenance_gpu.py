#!/usr/bin/env python3
"""Issue 24 on a GPU (run through ``device``; CI never runs it): what recording allocation
stacks costs and what it records, written to ``$OUT/provenance_gpu.json`` (figures) and
``$OUT/provenance_snapshot.json.gz`` (a recorded snapshot of a real ipykernel, the fixture
``test/fixtures/provenance_snapshot.json.gz``).

1. ``context``: in fresh processes, whether ``torch.cuda.memory._record_memory_history``
   called before any CUDA use initialises torch's CUDA state or puts the process on the GPU
   (NVML), and whether blocks allocated afterwards carry frames; the same once CUDA is in use.
2. ``kernel``: a real kernel (jupyter_client) runs notebook-like cells with recording on
   (turned on after the first cell, as the agent does); the snapshot, IPython's
   ``compile._filename_map``, the cells and ``torch.cuda.memory_allocated()`` are saved.
3. ``cost``: per allocation (alloc + free of a 1 KiB tensor) and per training step (a small CNN)
   with recording off and on, alternated in this process (ratios against the baseline of the
   same run); ``_snapshot()`` and the agent's ``provenance.reduce_snapshot`` at 1e4 and 1e5 live
   blocks allocated from a cell-like file.

4. ``agent``: the agent's own ``costMs`` in a real kernel at 1e4 and 1e5 live blocks, and a
   re-sent inventory's duration with provenance on and off.

Usage there: ``python3 bench/provenance_gpu.py [context] [kernel] [cost] [agent]`` (default:
all; needs torch with CUDA, pynvml, and for steps 2 and 4 ipykernel and jupyter_client).
"""

import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "agent"))
OUT = Path(os.environ.get("OUT", "."))

PROBE = r"""
import json, os, sys
import pynvml, torch
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used
pids = lambda: sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h))
first = sys.argv[1] == "cuda-first"
res = {"order": sys.argv[1], "pid": os.getpid(), "pidsBefore": pids(), "usedBefore": used()}
if first:
    torch.zeros(1, device="cuda")
torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")
res.update(initializedAfterRecord=torch.cuda.is_initialized(), pidsAfterRecord=pids(),
           usedAfterRecord=used())
def make():
    return torch.empty(1 << 20, device="cuda")
x = make()
snap = torch.cuda.memory._snapshot()
live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
res["liveBlocks"] = len(live)
res["framesOfLast"] = [f for b in live if b["size"] == 4 << 20 for f in b.get("frames", [])][:4]
res["snapshotKeys"] = sorted(snap)
print(json.dumps(res))
"""

CELLS = [
    "import torch\nmodel = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),"
    " torch.nn.Linear(4096, 1024)).cuda()",
    "x = torch.randn(512, 1024, device='cuda')\nfeats = []",
    "def step(batch):\n    y = model(batch)\n    return y.relu()",
    "for _ in range(8):\n    feats.append(step(x))",
    "loss = model(x).pow(2).mean()\nloss.backward()",
    "def fail():\n    t = torch.ones(1 << 22, device='cuda')\n    raise ValueError('boom')\n"
    "try:\n    fail()\nexcept ValueError as e:\n    err = e",
    "kept = [torch.empty(1 << 18, device='cuda') for _ in range(4)]",
]
ENABLE = (
    "import torch as _t\n"
    "_t.cuda.memory._record_memory_history(enabled='state', context='state', stacks='python')\n"
    "del _t"
)
DUMP = r"""
def _dump(path):
    import gzip, json, torch
    snap = torch.cuda.memory._snapshot()
    segments = [
        {"device": s["device"], "address": s["address"], "total_size": s["total_size"],
         "blocks": [{k: b[k] for k in ("address", "size", "requested_size", "state", "frames")
                     if k in b} for b in s["blocks"]]}
        for s in snap["segments"]
    ]
    ip = get_ipython()
    data = {"segments": segments, "filename_map": dict(ip.compile._filename_map),
            "execution_count": ip.execution_count,
            "memory_allocated": torch.cuda.memory_allocated(),
            "torch": torch.__version__, "compiler": type(ip.compile).__module__ + "." +
            type(ip.compile).__name__}
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
"""


def context():
    rows = []
    for order in ("record-first", "cuda-first"):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, order], capture_output=True, text=True, timeout=120
        )
        row = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
        row["rc"] = done.returncode
        if done.returncode:
            row["stderr"] = done.stderr[-2000:]
        rows.append(row)
    return rows


def kernel():
    import kernel_driver as kd

    k = kd.Kernel()
    try:
        sources = {}
        first = k.run(CELLS[0])
        sources[first.execution_count] = CELLS[0]
        k.execute(ENABLE, silent=True, store_history=False)
        for cell in CELLS[1:]:
            result = k.run(cell)
            assert result.reply["status"] == "ok", result.reply
            sources[result.execution_count] = cell
        k.execute(DUMP, silent=True, store_history=False)
        path = OUT / "provenance_snapshot.json.gz"
        done = k.execute(f"_dump({str(path)!r})", silent=True, store_history=False)
        assert done.reply["status"] == "ok", done.reply
        with gzip.open(path, "rt") as f:
            data = json.load(f)
        data["cells"] = {str(n): text for n, text in sources.items()}
        with gzip.open(path, "wt") as f:
            json.dump(data, f)
        return {"cells": len(sources), "segments": len(data["segments"]), "path": path.name}
    finally:
        k.shutdown()


def median_ms(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def cost():
    import kernel_driver as kd
    import torch

    agent = kd.load_agent()
    cuda = torch.cuda
    record = cuda.memory._record_memory_history
    torch.zeros(1, device="cuda")
    res = {"torch": torch.__version__, "device": cuda.get_device_name(0)}

    def allocs(n=20000):
        for _ in range(n):
            torch.empty(256, device="cuda")
        cuda.synchronize()

    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    data = torch.randn(64, 3, 64, 64, device="cuda")
    target = torch.randint(0, 10, (64,), device="cuda")

    def train(steps=100):
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(data), target)
            loss.backward()
            opt.step()
        cuda.synchronize()

    allocs(2000)
    train(10)
    runs = {"alloc_off": [], "alloc_on": [], "train_off": [], "train_on": []}
    for _ in range(3):
        record(None)
        runs["alloc_off"].append(median_ms(allocs, 1))
        runs["train_off"].append(median_ms(train, 1))
        record(enabled="state", context="state", stacks="python")
        runs["alloc_on"].append(median_ms(allocs, 1))
        runs["train_on"].append(median_ms(train, 1))
    record(None)
    res["runs_ms"] = runs
    off, on = statistics.median(runs["alloc_off"]), statistics.median(runs["alloc_on"])
    res["alloc_us"] = {"off": off / 20, "on": on / 20, "extra": (on - off) / 20}
    off, on = statistics.median(runs["train_off"]), statistics.median(runs["train_on"])
    res["train_step_ms"] = {"off": off / 100, "on": on / 100, "ratio": on / off}

    name = "/tmp/ipykernel_0/bench_cell.py"
    code = compile(
        "def fill(n):\n    return [torch.empty(256, device='cuda') for _ in range(n)]", name, "exec"
    )
    scope = {"torch": torch}
    exec(code, scope)
    for n in (10000, 100000):
        record(enabled="state", context="state", stacks="python")
        kept = scope["fill"](n)
        snap_ms = median_ms(cuda.memory._snapshot)
        snap = cuda.memory._snapshot()
        reduce_ms = median_ms(
            lambda snap=snap: agent.provenance.reduce_snapshot(snap, {name: 7}, addresses={})
        )
        reduced = agent.provenance.reduce_snapshot(snap, {name: 7})
        record(None)
        plain_ms = median_ms(cuda.memory._snapshot)
        res[f"blocks_{n}"] = {
            "snapshot_ms": snap_ms,
            "reduce_ms": reduce_ms,
            "snapshot_after_stop_ms": plain_ms,  # frames stay with the live blocks
            "liveBlocks": reduced["liveBlocks"],
            "read": reduced["read"],
            "skipped": reduced["skipped"],
            "top": reduced["groups"][:1],
            "allocated": cuda.memory_allocated(),
            "liveBytes": reduced["liveBytes"],
        }
        del kept, snap
        cuda.empty_cache()
    return res


def agent_cost():
    """The agent's own figure, in a real kernel with the agent injected and provenance on: the
    inventory's ``provenance.costMs`` (snapshot + reduction) and ``durationMs`` after a cell
    that keeps 1e4, then 9e4 more (1e5 in all) small CUDA tensors; then ``pass`` cells (a re-sent
    inventory) with provenance on and off, alternated: the read's share of a cell's cost."""
    import kernel_driver as kd

    k = kd.Kernel()
    try:
        k.inject({"sampleIntervalMs": 1000})
        comm = k.open_comm(1000)

        def cell(code):
            n = len(comm.messages("inventory"))
            result = k.run(code, timeout=300)
            assert result.reply["status"] == "ok", result.reply
            return comm.wait_for("inventory", n + 1, timeout=300)[n]

        def configure(on):
            comm.send(
                {
                    "protocol": kd.PROTOCOL,
                    "type": "configure",
                    "sampleIntervalMs": 1000,
                    "provenance": on,
                }
            )

        cell("import torch\nwarm = torch.zeros(1, device='cuda')")
        configure(True)
        res = {}
        for n, label in ((10000, "1e4"), (90000, "1e5")):
            inv = cell(f"kept{n} = [torch.empty(256, device='cuda') for _ in range({n})]")
            fact = inv["provenance"]
            res[label] = {
                "liveBlocks": fact["liveBlocks"],
                "read": fact["read"],
                "skipped": fact["skipped"],
                "costMs": fact["costMs"],
                "inventoryMs": inv["durationMs"],
                "groups": [
                    (g["cell"], g["line"], g["bytes"], g["blocks"]) for g in fact["groups"][:3]
                ],
            }
        on, off = [], []
        for _ in range(5):
            configure(True)
            on.append(cell("pass")["durationMs"])
            configure(False)
            off.append(cell("pass")["durationMs"])
        res["pass_on_ms"] = on
        res["pass_off_ms"] = off
        return res
    finally:
        k.shutdown()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    report = {}
    only = sys.argv[1:] or ["context", "kernel", "cost", "agent"]
    steps = {"context": context, "kernel": kernel, "cost": cost, "agent": agent_cost}
    for name, step in ((n, steps[n]) for n in only):
        start = time.perf_counter()
        try:
            report[name] = step()
        except Exception as exc:  # one step's failure must not lose the others' figures
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
        report[name + "_s"] = round(time.perf_counter() - start, 1)
        print(name, json.dumps(report[name])[:3000], flush=True)
    (OUT / "provenance_gpu.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
