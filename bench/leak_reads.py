#!/usr/bin/env python3
"""What the in-cell leak trend's reads cost and see, on a GPU (issue 15): the agent's sampler
reads torch's allocated bytes every ~20 ms while a cell runs (``allocatedMin``, the floor under
a training loop's sawtooth). Run on a CUDA machine with torch (no Jupyter needed: the agent's
device module and sampler thread are loaded as the loader registers them):

    python bench/leak_reads.py --json out.json

1. Read costs, median and p95 over 2000 calls (us): ``torch.cuda.memory_allocated``, the
   agent's ``allocated_now`` (the nested statistics dict, no flattening), ``allocator_limit``,
   one ``DeviceSampler.sample()`` and one ``read_low()``.
2. What the reads cost a training loop: a small CNN with AdamW and a ``loss.item()`` per step
   (~tens of ms per step), timed with no sampler, then with the agent's sampler thread ticking
   every second and reading every 20 ms (alternated, 3 rounds each).
3. What a training loop's allocated memory looks like: reads every 1 ms for a few seconds of a
   healthy loop and of one that keeps its losses (``losses.append(loss)``); per second the true
   floor (lowest 1 ms read), what the agent's 20 ms reads find (``allocatedMin``) and one
   sample's value, and the fraction of the time within 5% of the step's amplitude above the
   floor.
4. ``limit``: with ``set_per_process_memory_fraction(0.5)``, the sample's ``limit`` against
   0.5 x ``total_memory``; and that sampling before any CUDA use creates no context.
"""

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test" / "agent"))
from kernel_driver import load_agent

MiB = 2**20


def timed(fn, reps=2000):
    out = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - start) / 1000)
    out.sort()
    p95 = out[int(0.95 * len(out))]
    return {"median_us": round(statistics.median(out), 2), "p95_us": round(p95, 2)}


def build(torch, width=64):
    nn = torch.nn
    layers = []
    channels = 3
    for out_ch in (width, width * 2, width * 4, width * 4):
        layers += [nn.Conv2d(channels, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU()]
        layers += [nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU()]
        layers.append(nn.MaxPool2d(2))
        channels = out_ch
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10)]
    return nn.Sequential(*layers).cuda()


def loop(torch, model, opt, steps, batch=64, keep=None):
    x = torch.randn(batch, 3, 160, 160, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if keep is not None:
            keep.append(loss)  # the leak: the loss with its graph
        loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    agent = load_agent("_leak_reads_agent")
    devices = agent.devices
    import torch

    out = {"torch": torch.__version__}
    # 4a. no context before CUDA is used
    sampler = devices.DeviceSampler()
    sampler.start()
    out["nvml"] = sampler.nvml is not None
    before = sampler.sample()
    out["no_context_before_use"] = {
        "cuda_initialized": torch.cuda.is_initialized(),
        "entries": before,
    }
    torch.zeros(1, device="cuda")
    out["device"] = torch.cuda.get_device_name(0)
    total = torch.cuda.get_device_properties(0).total_memory
    # 1. read costs
    sampler.sample()
    out["cost"] = {
        "memory_allocated": timed(lambda: torch.cuda.memory_allocated(0)),
        "allocated_now": timed(lambda: devices.allocated_now(torch, 0)),
        "allocator_limit": timed(lambda: devices.allocator_limit(torch, 0, {})),
        "read_low": timed(sampler.read_low),
        "sample": timed(sampler.sample, 500),
    }
    # 2. training loop overhead
    model = build(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loop(torch, model, opt, 20)
    torch.cuda.synchronize()

    def step_ms(steps=150):
        start = time.perf_counter()
        loop(torch, model, opt, steps)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000 / steps

    class Owner:
        pass

    owner = Owner()
    ticks = []
    thread = agent.sampler.SamplerThread(
        owner, lambda: ticks.append(sampler.sample()), None, sampler.read_low, lambda: True
    )
    rounds = {"off": [], "on": []}
    for _ in range(3):
        rounds["off"].append(step_ms())
        thread.ensure()
        rounds["on"].append(step_ms())
        thread.stop()
        thread.thread = None
    out["loop_ms_per_step"] = {k: [round(v, 3) for v in vs] for k, vs in rounds.items()}
    off, on = statistics.median(rounds["off"]), statistics.median(rounds["on"])
    out["loop_overhead_pct"] = round(100 * (on - off) / off, 2)
    out["samples_while_on"] = len(ticks)
    lows = [t[0]["allocatedMin"] < t[0]["allocated"] for t in ticks if t]
    out["samples_whose_min_is_below_the_sample"] = f"{sum(lows)}/{len(lows)}"

    # 3. traces: 1 ms reads
    def trace(keep, seconds=4.0):
        reads = []
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                reads.append((time.perf_counter(), devices.allocated_now(torch, 0)))
                time.sleep(0.001)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            loop(torch, model, opt, 5, keep=keep)
        stop.set()
        th.join()
        t0 = reads[0][0]
        per_second = []
        for second in range(int(seconds)):
            window = [v for t, v in reads if second <= t - t0 < second + 1]
            if not window:
                continue
            low, high = min(window), max(window)
            sub = window[::20]
            near = sum(1 for v in window if v - low <= 0.05 * max(1, high - low)) / len(window)
            per_second.append(
                {
                    "floor_mib": round(low / MiB, 1),
                    "min_of_20ms_reads_mib": round(min(sub) / MiB, 1),
                    "one_sample_mib": round(sub[len(sub) // 2] / MiB, 1),
                    "peak_mib": round(high / MiB, 1),
                    "near_floor_fraction": round(near, 3),
                }
            )
        return {"reads": len(reads), "per_second": per_second}

    out["trace_healthy"] = trace(None)
    keep = []
    out["trace_leak"] = trace(keep)
    del keep
    # 4b. limit
    torch.cuda.set_per_process_memory_fraction(0.5, 0)
    entry = sampler.sample()[0]
    out["limit"] = {"sample": entry["limit"], "expected": int(0.5 * total), "total": total}
    torch.cuda.set_per_process_memory_fraction(1.0, 0)
    out["limit_after_reset"] = sampler.sample()[0]["limit"]
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
