"""What the agent reports on a real NVIDIA GPU, against NVML, ``nvidia-smi`` and torch, where no
CPU counterpart exists (the acceptance cases' own CUDA checks are in test_cases.py, ``[cuda]``):

 1. no CUDA context from the agent (20 samples, then ``import torch`` without CUDA);
 4. live samples during a real ``model.train(...)`` on a generated dataset (>= 30 s), and the
    trainer's EMA copy and optimizer state reported as the model's parts;
 6. the agent's cost per cell (cells that change nothing, cells that rebind names; share of
    skipped inventories) and per sample, with 1 and 10 models on CUDA;
 8. with two or more GPUs: ``CUDA_VISIBLE_DEVICES=1`` maps the kernel's cuda:0 to NVML device 1.
 29.4. the utilisation a sample carries while a cell multiplies matrices, and after it, against
    ``nvidia-smi``'s GPU-Util polled meanwhile.

All marked ``gpu``: skipped where NVML sees no NVIDIA GPU. ``scripts/gpu_check.py`` runs them
and writes their rows to docs/gpu-check.md.
"""

import importlib.util
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import pytest
from checks import (
    WITHOUT_POLARS,
    CellFailed,
    MiB,
    T,
    bands_row,
    dev0,
    hello_row,
    make_dataset,
    mib,
    nvml,
    on_dev,
    pct,
    smi_used_mib,
    smi_utilization,
    snapshot,
)
from conftest import holder_names

pytestmark = pytest.mark.gpu


# --------------------------------------------------------------------------------------------
# 1. no context from the agent


@pytest.mark.timeout(300)
def test_no_cuda_context_from_the_agent(session, check):
    nv = nvml()
    s = session(name="no-context", interval_ms=250)
    samples = s.comm.wait_for("sample", 20, timeout=30)[:20]
    nvml_entries = [nv.process(i, s.pid) for i in range(nv.count)]
    mods = s.evaluate(torch="'torch' in __import__('sys').modules")
    entries = [e for smp in samples for e in smp["devices"]]
    procs = sorted({e["process"] for e in entries}, key=str)
    torch_figs = {(e["allocated"], e["reserved"], e["cached"], e["nonTorch"]) for e in entries}
    check.row(
        "1a no context: agent injected, 20 samples (250 ms)",
        "no NVML entry for the kernel pid; samples: process 0, allocated/reserved/cached/"
        "nonTorch null, processHidden false; torch not in sys.modules",
        f"NVML entries {nvml_entries}; sample process values {procs}; allocated/reserved/cached/"
        f"nonTorch {sorted(torch_figs, key=str)}; torch imported: {mods['torch']}; hello.torch "
        f"{s.hello['torch']}",
        nv.count > 0
        and all(p is None for p in nvml_entries)
        and procs == [0]
        and torch_figs == {(None, None, None, None)}
        and all(e["processHidden"] is False for e in entries)
        and not mods["torch"]
        and s.hello["torch"] is None
        and all(len(smp["devices"]) == nv.count for smp in samples),
    )
    _, inv = s.run(code="import torch")
    n = len(s.comm.messages("sample"))
    later = s.comm.wait_for("sample", n + 8, timeout=30)[n:]
    nvml_entries = [nv.process(i, s.pid) for i in range(nv.count)]
    init = s.evaluate(init="__import__('torch').cuda.is_initialized()")["init"]
    procs = sorted({e["process"] for smp in later for e in smp["devices"]}, key=str)
    check.row(
        "1b `import torch` (no CUDA use), 8 more samples",
        "still no NVML entry; process 0; torch.cuda.is_initialized() False; inventory "
        "unattributed {} (CUDA not initialised)",
        f"NVML entries {nvml_entries}; process values {procs}; is_initialized {init}; "
        f"inventory torchImported {inv['torchImported']} cudaInitialized "
        f"{inv['cudaInitialized']} unattributed {inv['unattributed']}",
        nv.count > 0
        and all(p is None for p in nvml_entries)
        and procs == [0]
        and not init
        and inv["torchImported"]
        and not inv["cudaInitialized"]
        and inv["unattributed"] == {},
    )
    # control: the same pid does show up once the user touches CUDA
    s.run(code="x = torch.zeros(1, device='cuda'); torch.cuda.synchronize()")
    snap = snapshot(s)
    check.row(
        "1c control: the user's first CUDA tensor",
        "the pid appears in NVML; sample.process = NVML figure",
        f"NVML {mib(snap['nvml_process'])}, sample {mib(snap['a']['process'])}",
        snap["nvml_process"] is not None and snap["a"]["process"] == snap["nvml_process"],
    )


# --------------------------------------------------------------------------------------------
# 4. live while training


@pytest.mark.timeout(900)
def test_live_samples_during_training(session, check, request):
    interval = 500
    seconds = request.config.getoption("train_seconds")
    root = Path(tempfile.mkdtemp(prefix="gpu-check-train-"))
    data = make_dataset(root / "data")
    s = session(name="training", interval_ms=interval)
    s.run(
        code="import torch\n"
        "from ultralytics import YOLO\n"
        + WITHOUT_POLARS
        + "model = YOLO('yolov8n.yaml').to('cuda:0')\n"
        "torch.cuda.synchronize()"
    )
    pre = dev0(s.sample())
    n = len(s.comm.messages("sample"))
    started = time.time()
    result, inventory = s.run(
        code=f"results = model.train(data={str(data)!r}, epochs=10000, time={seconds}/3600, "
        f"imgsz=320, batch=16, workers=0, device=0, amp=False, plots=False, "
        f"project={str(root / 'runs')!r}, name='train', exist_ok=True, verbose=False)",
        timeout=seconds + 300,
    )
    ended = time.time()
    post = s.after(s.count)
    samples = [m for m in s.comm.messages("sample")[n:] if started <= m["t"] <= ended]
    busy = [m for m in samples if m["busy"]]
    times = [started] + [m["t"] for m in samples]
    gaps = [b - a for a, b in zip(times, times[1:])]
    curve = [(m["t"] - started, dev0(m)["allocated"]) for m in busy if dev0(m)]
    allocs = [a for _t, a in curve if a is not None]
    peak = max(allocs) if allocs else None
    log = result.stdout + result.stderr
    train_s = ended - started
    check.extras["training_curve"] = curve
    check.row(
        f"4a samples during model.train ({interval} ms interval)",
        f"training cell >= 30 s; samples throughout (busy); largest gap <= {2 * interval} ms",
        f"cell {train_s:.1f} s; {len(samples)} samples, {len(busy)} busy; largest gap "
        f"{max(gaps) * 1000:.0f} ms"
        f" (median {statistics.median(gaps) * 1000:.0f} ms)",
        train_s >= 30 and busy and max(gaps) <= 2 * interval / 1000,
    )
    rise = (peak or 0) - pre["allocated"]
    fall = (peak or 0) - post["allocated"]
    check.row(
        "4b allocated curve of the training",
        "rises during training (>= 64 MiB) and falls after it (by >= half the rise)",
        f"before {mib(pre['allocated'], 1)}, peak {mib(peak, 1)}, after "
        f"{mib(post['allocated'], 1)} (reserved after {mib(post['reserved'], 1)})",
        peak is not None and rise >= 64 * MiB and fall >= rise / 2,
    )
    words = ("download", "http://", "https://")
    hits = [line for line in log.splitlines() if any(w in line.lower() for w in words)]
    net = s.network()
    check.row(
        "4c nothing downloaded (YOLO_OFFLINE, amp=False, plots=False, font present)",
        "no download line in the training log; no socket/urllib use in the kernel (audit hook)",
        f"{len(hits)} log lines" + (f" ({hits[0][:100]})" if hits else "") + f"; {len(net)} "
        "network events" + (f" ({net[0]})" if net else ""),
        not hits and not net and result.error is None,
    )
    if importlib.util.find_spec("polars") is None:
        check.note(
            "polars (a 54 MB wheel) is not installed here: the training cell replaces "
            "`BaseTrainer.read_results_csv` (its only use during training: reading results.csv "
            "back into each checkpoint) with one returning `{}`; import and model building do "
            "not need polars."
        )
    truth = s.evaluate(
        ema=f"{T}.module_bytes({T}.attr(model, 'trainer.ema.ema'))",
        train=f"{T}.module_bytes({T}.attr(model, 'trainer.model'))",
        opt=f"{T}.optimizer_state_bytes({T}.attr(model, 'trainer.optimizer'))",
        opt_class=f"type({T}.attr(model, 'trainer.optimizer')).__name__",
        own=f"{T}.module_bytes(model)",
    )
    listed = [m for m in inventory["models"] if "model" in holder_names(m, "variable")]
    parts = {p["path"]: p for p in (listed[0]["parts"] if listed else [])}
    ema = parts.get("trainer.ema.ema", {})
    opt = parts.get("trainer.optimizer", {})
    check.row(
        "4d parts of the trained YOLO model (inventory after model.train)",
        "trainer.ema.ema: kind model, bytes on cuda:0 = the EMA copy's parameters + buffers "
        "(about one model: trainer.model's bytes); trainer.optimizer: kind optimizer, bytes on "
        "cuda:0 = its state (measured in the kernel)",
        f"parts {[(p['path'], p['kind'], p['className'], p['bytes']) for p in parts.values()]}; "
        f"kernel: EMA {truth['ema']} B, trainer.model {truth['train']} B, "
        f"{truth['opt_class']} state {truth['opt']} B, the wrapper's own {truth['own']} B; "
        f"model bytes {listed[0]['bytes'] if listed else None}; truncated {inventory['truncated']}",
        len(listed) == 1
        and ema.get("kind") == "model"
        and truth["ema"]
        and on_dev(ema.get("bytes")) == truth["ema"]
        and opt.get("kind") == "optimizer"
        and opt.get("className") == truth["opt_class"]
        and truth["opt"]
        and on_dev(opt.get("bytes")) == truth["opt"],
    )


# --------------------------------------------------------------------------------------------
# 6. cost

# issue 3's cost goals: per-cell p95 <= 10 ms (cells that change nothing), sampler thread <= 0.2 %
# of one core at 1 Hz (= 2 ms per sample); cells that rebind names: the budget set here
GOAL_CELL_P95_MS = 10.0
GOAL_SAMPLE_MEAN_MS = 2.0
BUDGET_REBIND_P95_MS = 100.0

TIMING = r"""
import sys, time, types
from IPython import get_ipython
m = sys.modules.setdefault("_gpu_check_timing", types.ModuleType("_gpu_check_timing"))
m.walls = []
agent = sys.modules["_jupyterlab_gpu_hygiene_agent"]._agent
callbacks = get_ipython().events.callbacks["post_run_cell"]
def before(result=None, m=m, clock=time.perf_counter):
    m.t0 = clock()
def after(result=None, m=m, clock=time.perf_counter):
    m.walls.append((clock() - m.t0) * 1000.0)
i = callbacks.index(agent.post_run_cell)
callbacks.insert(i, before)
callbacks.insert(i + 2, after)
def sample_cost(n, agent=agent, clock=time.perf_counter):
    out = []
    for _ in range(n):
        t0 = clock()
        agent.sample()
        out.append((clock() - t0) * 1000.0)
    return out
m.sample_cost = sample_cost
"""
TIMING_MODULE = "__import__('sys').modules['_gpu_check_timing']"
# the cells timed: like bench/bench.py, cells that change nothing the agent looks at (an int
# binding) and cells that rebind names to new objects (every inventory walked again)
COST_CELLS = (
    ("no-op", "x_counter += 1"),
    ("rebinding", "tmp = object()\nalias = models[x_counter % len(models)]\nx_counter += 1"),
)


@pytest.mark.timeout(900)
def test_cost_per_cell_and_per_sample(session, check, request):
    cells = request.config.getoption("cost_cells")
    s = session(name="cost", audit=False)
    s.run(
        code="import torch\nfrom ultralytics import YOLO\n"
        "models = [YOLO('yolov8n.yaml').to('cuda:0')]\nx_counter = 0\ntmp = None\nalias = None"
    )
    s.silent(f"exec({json.dumps(TIMING)}, {{}})")
    for count in (1, 10):
        if count == 10:
            s.run(code="models += [YOLO('yolov8n.yaml').to('cuda:0') for _ in range(9)]")
            found = len(s.inventories[s.count]["models"])
            if found != 10:
                raise CellFailed(f"expected 10 models in the inventory, got {found}")
        for _ in range(3):  # warm-up
            s.run(code="x_counter += 1")
        for kind, code in COST_CELLS:
            s.silent(f"{TIMING_MODULE}.walls.clear()")
            inventories = [s.run(code=code)[1] for _ in range(cells)]
            walls = s.evaluate(w=f"{TIMING_MODULE}.walls")["w"]
            durations = [inv["durationMs"] for inv in inventories]
            skipped = sum(1 for inv in inventories if inv["skipped"])
            n = len(inventories)
            measured = (
                f"post_run_cell wall p50 {pct(walls, 0.5):.2f} / p95 {pct(walls, 0.95):.2f} / max "
                f"{max(walls, default=float('nan')):.2f} ms; inventory durationMs p50 "
                f"{pct(durations, 0.5):.2f} / p95 {pct(durations, 0.95):.2f} ms; skipped "
                f"{skipped}/{n}; truncated {sum(1 for inv in inventories if inv['truncated'])}/{n}"
            )
            if kind == "no-op":
                ok = len(walls) == n and pct(walls, 0.95) <= GOAL_CELL_P95_MS and skipped == n
                expected = (
                    f"p95 <= {GOAL_CELL_P95_MS:.0f} ms (issue 3's goal); every inventory skipped "
                    "(nothing changed)"
                )
            else:
                ok = len(walls) == n and pct(walls, 0.95) <= BUDGET_REBIND_P95_MS and skipped == 0
                expected = (
                    f"p95 <= {BUDGET_REBIND_P95_MS:.0f} ms (budget set here); no inventory "
                    "skipped (bindings changed)"
                )
            check.row(
                f"6a per-cell cost, {kind} cells, {count} model(s) on CUDA", expected, measured, ok
            )
        costs = s.evaluate(c=f"{TIMING_MODULE}.sample_cost(200)")["c"]
        mean = statistics.fmean(costs)
        check.row(
            f"6b one sample's cost, {count} model(s) on CUDA (200 samples, main thread)",
            f"mean <= {GOAL_SAMPLE_MEAN_MS:.0f} ms (issue 3: sampler <= 0.2 % of a core at 1 Hz)",
            f"mean {mean:.3f} / p50 {pct(costs, 0.5):.3f} / p95 {pct(costs, 0.95):.3f} / max "
            f"{max(costs):.3f} ms",
            mean <= GOAL_SAMPLE_MEAN_MS,
        )


# --------------------------------------------------------------------------------------------
# 8. CUDA_VISIBLE_DEVICES


def hexdigits(uuid):
    text = str(uuid).lower()
    text = text[4:] if text.startswith("gpu-") else text
    return "".join(c for c in text if c in "0123456789abcdef")


@pytest.mark.timeout(300)
def test_cuda_visible_devices_maps_to_the_nvml_device(session, check):
    nv = nvml()
    if nv.count < 2:
        note = os.environ.get("GPU_CHECK_DEVICES_NOTE")  # scripts/gpu_check.py --devices-note
        check.row(
            "8 CUDA_VISIBLE_DEVICES=1 mapping",
            "kernel's cuda:0 = NVML device 1",
            f"not run: this machine has {nv.count} GPU(s); it needs 2 (the nvidia-h200-x2 kind)"
            + (f": {note}" if note else ""),
            None,
        )
        return
    s = session(name="visible-devices", env={"CUDA_VISIBLE_DEVICES": "1"})
    hello = s.hello["devices"]
    s.run(
        code="import torch\n"
        "x = torch.empty(512 * 2**20, dtype=torch.uint8, device='cuda:0')\n"
        "torch.cuda.synchronize()"
    )
    torch_uuid = s.evaluate(u="str(__import__('torch').cuda.get_device_properties(0).uuid)")["u"]
    sample = s.sample()
    entry = dev0(sample)
    _used_v2, _v1, total = nv.memory(1)
    smi = smi_used_mib(1)
    proc1 = nv.process(1, s.pid)
    proc0 = nv.process(0, s.pid)
    torch_a, torch_r = s.torch_memory()
    check.row(
        "8a CUDA_VISIBLE_DEVICES=1",
        "hello.devices[0].uuid = NVML device 1 (= torch cuda:0); figures = device 1's; no "
        "entry on device 0",
        f"hello {[(d['index'], d['uuid']) for d in hello]}; NVML dev 1 {nv.uuid(1)}; torch "
        f"{torch_uuid}; used {mib(entry['used'], 0)} vs smi -i 1 {smi:.0f} MiB; process "
        f"{mib(entry['process'], 0)} vs NVML dev1 {mib(proc1, 0)}, dev0 {proc0}; allocated "
        f"{mib(entry['allocated'])}",
        len(hello) == 1
        and hello[0]["uuid"] == nv.uuid(1)
        and hello[0]["total"] == total
        and hexdigits(nv.uuid(1)) == hexdigits(torch_uuid)
        and len(sample["devices"]) == 1
        and abs(entry["used"] / MiB - smi) <= 1
        and entry["process"] == proc1
        and proc0 is None
        and entry["allocated"] == torch_a
        and entry["reserved"] == torch_r,
    )
    check.row(*hello_row(s.hello, 1, "8b CUDA_VISIBLE_DEVICES=1: hello.devices[0].nvmlIndex"))
    check.row(*bands_row("8c CUDA_VISIBLE_DEVICES=1: sample bands", entry, torch_a, torch_r, proc1))


# --------------------------------------------------------------------------------------------
# 29.4 utilisation beside memory


@pytest.mark.timeout(300)
def test_utilisation_while_a_cell_multiplies_matrices(session, check):
    s = session(name="utilisation", interval_ms=500)
    s.run(
        code="import time, torch\n"
        "a = torch.randn(8192, 8192, device='cuda:0')\n"
        "torch.cuda.synchronize()"
    )
    smi = []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            smi.append((time.time(), smi_utilization(0)))
            time.sleep(0.5)

    poller = threading.Thread(target=poll, daemon=True)
    n = len(s.comm.messages("sample"))
    poller.start()
    started = time.time()
    try:
        s.run(
            code="end = time.time() + 10\nwhile time.time() < end:\n    b = a @ a\n"
            "torch.cuda.synchronize()",
            timeout=120,
        )
    finally:
        stop.set()
        poller.join(10)
    ended = time.time()
    # the first 2 s left out: NVML's figures cover the last sample period (up to ~1 s)
    busy = [
        dev0(m)
        for m in s.comm.messages("sample")[n:]
        if m["busy"] and started + 2 <= m["t"] <= ended and dev0(m)
    ]
    util = [d.get("utilization") for d in busy]
    mine = [d.get("processUtilization") for d in busy]
    smi_busy = [u for t, u in smi if started + 2 <= t <= ended]
    agent_median = statistics.median([u for u in util if u is not None] or [-1])
    lowest = min((u for u in util if u is not None), default=None)
    smi_median = statistics.median(smi_busy or [-1])
    check.row(
        "29.4a GPU-Util while a cell multiplies 8192 x 8192 matrices for 10 s",
        "every busy sample has it; median >= 80 % and within 10 points of nvidia-smi's "
        "utilization.gpu polled meanwhile",
        f"{len(busy)} busy samples, {util.count(None)} without; agent median {agent_median} % "
        f"(min {lowest}); nvidia-smi median {smi_median} % over {len(smi_busy)} reads",
        busy and None not in util and agent_median >= 80 and abs(agent_median - smi_median) <= 10,
    )
    shares = [u for u in mine if u is not None]
    check.row(
        "29.4b this kernel's share (nvmlDeviceGetProcessUtilization, its pid)",
        "median of the samples that have one >= 50 %; at least half the busy samples have one",
        f"{len(shares)} of {len(busy)} samples, median {statistics.median(shares or [-1])} %, "
        f"values {shares[:12]}",
        len(shares) * 2 >= len(busy) and statistics.median(shares or [-1]) >= 50,
    )
    time.sleep(3)
    idle = dev0(s.sample())
    check.row(
        "29.4c after the cell, 3 s idle",
        "GPU-Util <= 10 % (no other process on the GPU); this kernel's share 0 or none",
        f"utilization {idle.get('utilization')} %, this kernel {idle.get('processUtilization')}, "
        f"nvidia-smi {smi_utilization(0)} %",
        idle.get("utilization") is not None
        and idle["utilization"] <= 10
        and idle.get("processUtilization") in (0, None),
    )
