#!/usr/bin/env python3
"""What the agent's reduction of an allocator snapshot costs per cell (issue 24), on this machine
and without a GPU: ``provenance.reduce_snapshot`` over snapshots shaped like
``torch.cuda.memory._snapshot()`` with ``stacks="python"`` (every live block with its frames,
innermost first: 20 frames of torch and library files, 2 notebook-cell frames, 22 frames of
IPython and ipykernel below them, from 40 source lines of 8 cells), at 1e4 and 1e5 live
blocks, against a baseline measured in the same run: the least any reader of the snapshot
must do (sum the live blocks' sizes). Past ``limits.PROVENANCE_BLOCKS`` the largest blocks
are read. The snapshot's own cost (``_snapshot()`` building those dicts in C++) is measured
on the GPU by ``bench/provenance_gpu.py``.

    .venv/bin/python bench/provenance_cost.py [--reps 5]
"""

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "agent"))

import kernel_driver as kd

CELLS = {f"/tmp/ipykernel_1/{n}.py": n for n in range(1, 9)}


def snapshot(blocks):
    """A snapshot of ``blocks`` live 512 B blocks (and as many freed ones), 4096 a segment."""
    files = list(CELLS)
    library = [
        {
            "filename": f"/venv/lib/python3.12/site-packages/torch/nn/modules/m{i}.py",
            "line": i,
            "name": "forward",
        }
        for i in range(20)
    ]
    # below the cell: IPython, ipykernel, asyncio, tornado and runpy (22 frames in the stack a
    # real kernel recorded on the GPU, test/fixtures/provenance_snapshot.json.gz)
    kernel = [
        {
            "filename": f"/venv/lib/python3.12/site-packages/ipykernel/k{i}.py",
            "line": i,
            "name": "run",
        }
        for i in range(22)
    ]
    segments = []
    for start in range(0, blocks, 4096):
        rows = []
        for i in range(start, min(blocks, start + 4096)):
            cell = files[i % 8]
            frames = [
                *library,
                {"filename": cell, "line": 1 + i % 5, "name": "step"},
                {"filename": files[(i + 1) % 8], "line": 2, "name": "<module>"},
                *kernel,
            ]
            rows.append(
                {"address": 4096 * i, "size": 512, "state": "active_allocated", "frames": frames}
            )
            rows.append({"address": 4096 * i + 512, "size": 512, "state": "inactive", "frames": []})
        segments.append({"device": 0, "blocks": rows})
    return {"segments": segments, "device_traces": [[]]}


def median_ms(fn, reps):
    """Median wall time of ``fn()``, ms, with the cyclic collector off: the agent reads the
    snapshot inside an inventory, which pauses it (``inventory.collector_paused``); left on,
    its passes over the snapshot's million dicts would be most of the time."""
    times = []
    gc.collect()
    gc.disable()
    try:
        return _median(fn, reps, times)
    finally:
        gc.enable()


def _median(fn, reps, times):
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    agent = kd.load_agent()
    reduce = agent.provenance.reduce_snapshot

    def baseline(snap):
        total = 0
        for segment in snap["segments"]:
            for block in segment["blocks"]:
                if block["state"] == "active_allocated":
                    total += block["size"]
        return total

    print(
        f"{'live blocks':>12} {'baseline ms':>12} {'agent ms':>9} {'read':>7} {'skipped':>8}"
        f" {'ratio':>6} {'all read ms':>12}"
    )
    for blocks in (10_000, 100_000):
        snap = snapshot(blocks)
        base = median_ms(lambda snap=snap: baseline(snap), args.reps)
        # as the agent reads it: the bound, the addresses for the roots' origins
        agent_ms = median_ms(lambda snap=snap: reduce(snap, CELLS, addresses={}), args.reps)
        every = median_ms(
            lambda snap=snap: reduce(snap, CELLS, addresses={}, max_blocks=10**9), args.reps
        )
        result = reduce(snap, CELLS)
        assert result["liveBlocks"] == blocks, result["liveBlocks"]
        print(
            f"{blocks:>12,} {base:>12.2f} {agent_ms:>9.2f} {result['read']:>7,}"
            f" {result['skipped']:>8,} {agent_ms / base:>6.1f} {every:>12.2f}"
        )


if __name__ == "__main__":
    main()
