#!/usr/bin/env python3
"""Record what the agent's sampler would see of four training cells on a GPU (issue 15), into
``$OUT/trace.jsonl`` (test/fixtures/leak_trace_h200.jsonl is its run on an H200, torch 2.11):
a thread samples every 500 ms (allocated, the lowest of reads every 20 ms +-50% while a "cell"
runs as ``lo``, reserved, device used and total from ``cudaMemGetInfo``), as the agent's sampler
does; the cells are

- ``leak``: the scenario test/recordings/scenarios/leak-append-loss.py, 4 epochs of 10 steps
  paced 0.35 s, each step's held-out loss kept with its graph (~88 MiB a step);
- ``fixed``: the same with ``.item()``;
- ``cnn``: a healthy loop at full speed for 20 s (``loss.item()`` per step);
- ``stairs``: 7 epochs of 3 s of training, each followed by 6 held-out forwards kept with their
  graphs (~530 MiB an epoch).

Lines: samples ``{t, cell (null when idle), a, lo, r, u, T}`` (bytes, seconds since the epoch)
and events ``{ev: start|end|epoch, cell, t, epoch?}``. Compact because the device machine runs
the main checkout: it was sent as one command line."""

import json
import os
import random
import threading
import time

import torch

cuda = torch.cuda
nn = torch.nn
out = open(os.path.join(os.environ["OUT"], "trace.jsonl"), "w")  # noqa: SIM115 -- open for the run
busy = [None]


def write(**fields):
    out.write(json.dumps(fields) + "\n")


def sampler():
    next_tick = time.time()
    low = None
    while True:
        now = time.time()
        if now >= next_tick:
            a = cuda.memory_allocated(0)
            free, total = cuda.mem_get_info(0)
            low = a if low is None else min(low, a)
            write(
                t=now, cell=busy[0], a=a, lo=low, r=cuda.memory_reserved(0), u=total - free, T=total
            )
            low = None
            next_tick += 0.5
        elif busy[0]:
            v = cuda.memory_stats_as_nested_dict(0)["allocated_bytes"]["all"]["current"]
            low = v if low is None else min(low, v)
        wait = (
            0.02 * (0.5 + random.random())
            if busy[0]
            else max(0, min(0.02, next_tick - time.time()))
        )
        time.sleep(wait)


torch.zeros(1, device="cuda")
threading.Thread(target=sampler, daemon=True).start()
net = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 16 * 16, 10),
).cuda()  # fmt: skip
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
crit = nn.CrossEntropyLoss()
X = torch.randn(10, 64, 3, 64, 64, device="cuda")
Y = torch.randint(0, 10, (10, 64), device="cuda")
xv, yv = X[0], Y[0]
kept = []


def step(i):
    opt.zero_grad()
    loss = crit(net(X[i % 10]), Y[i % 10])
    loss.backward()
    opt.step()
    return loss.item()


def cell(name, body):
    time.sleep(1)
    busy[0] = name
    write(ev="start", cell=name, t=time.time())
    body()
    write(ev="end", cell=name, t=time.time())
    busy[0] = None


def leak(keep):
    for e in range(4):
        for s in range(10):
            step(s)
            v = crit(net(xv), yv)
            kept.append(v if keep else v.item())
            time.sleep(0.35)
        write(ev="epoch", cell=busy[0], t=time.time(), epoch=e + 1)


def cnn():
    end = time.time() + 20
    while time.time() < end:
        step(0)


def stairs():
    for e in range(7):
        end = time.time() + 3
        while time.time() < end:
            step(0)
        for s in range(6):
            kept.append(crit(net(X[s]), Y[s]))
        write(ev="epoch", cell=busy[0], t=time.time(), epoch=e + 1)


cell("leak", lambda: leak(True))
kept.clear()
cuda.empty_cache()
cell("fixed", lambda: leak(False))
cell("cnn", cnn)
cell("stairs", stairs)
kept.clear()
time.sleep(1.5)
out.close()
