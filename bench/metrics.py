#!/usr/bin/env python3
"""The cost of one scrape of ``gpu-hygiene/metrics`` with simulated kernels (issue 25).

``--kernels`` kernels (default 50), each with a pid that NVML lists on one of ``--gpus`` GPUs
beside ``--others`` other processes per GPU; half of them idle for an hour. NVML is simulated (a
fake ``pynvml`` answering from memory: this measures the server's own work, not the driver's),
and the kernel rows are shaped as ``server.kernels_answer`` returns them. One scrape is what the
handler does: ``Nvml.read()``, ``metric_families``, ``exposition`` (prometheus_client's text
format).

Baseline, measured in the same run: ``prometheus_client.generate_latest`` of the process's default
registry (what jupyter_server's own ``/metrics`` serializes, with this process's metrics).

Prints per-scrape time (median, p95, in ms), the ratio to the baseline, and the share of one CPU
core at Prometheus' default scrape interval (60 s) and at a common 15 s; then the cost of the
execution watch between scrapes (one IOPub message's header read per agent sample: one a second
per kernel). The issue's budget: under 1 % of a core with 50 kernels.

Usage: ``python bench/metrics.py [--kernels 50] [--gpus 8] [--others 4] [--scrapes 2000]``.
"""

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_client.session import Session
from prometheus_client import REGISTRY, generate_latest

from jupyterlab_gpu_hygiene.metrics import (
    ExecutionActivity,
    GpuHygieneMetrics,
    Nvml,
    exposition,
    metric_families,
)


class SimulatedNvml:
    """The pynvml calls ``Nvml.read`` makes, answered from memory: ``gpus`` GPUs, each listing
    its share of ``pids`` and ``others`` processes that are no kernel."""

    def __init__(self, gpus, pids, others):
        self.gpus = gpus
        self.by_gpu = {g: [] for g in range(gpus)}
        for i, pid in enumerate(pids):
            self.by_gpu[i % gpus].append(SimpleNamespace(pid=pid, usedGpuMemory=(i + 1) << 28))
        for g in range(gpus):
            for j in range(others):
                self.by_gpu[g].append(
                    SimpleNamespace(pid=900_000 + 100 * g + j, usedGpuMemory=1 << 30)
                )

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMigMode(self, handle):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")  # no MIG: the common case

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-{handle:08d}"

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=80 << 30, used=40 << 30)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self.by_gpu[handle]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return []


def kernels(count):
    """``kernels_answer``'s shape: ``count`` kernels, half idle for an hour, half busy."""
    now = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for i in range(count):
        last = now - datetime.timedelta(hours=1 if i % 2 else 0)
        rows.append(
            {
                "id": f"kernel-{i:04d}",
                "name": "python3",
                "pid": 10_000 + i,
                "executionState": "idle" if i % 2 else "busy",
                "lastActivity": last.isoformat().replace("+00:00", "Z"),
                "connections": 1,
                "sessions": [],
            }
        )
    return {"kernels": rows, "gateway": False, "sessionsHidden": True}


def timed(fn, runs):
    """Per-call seconds of ``fn``, ``runs`` times (after 20 warm-up calls)."""
    for _ in range(20):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--others", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=2000)
    args = parser.parse_args(argv)

    answer = kernels(args.kernels)
    nvml = Nvml(SimulatedNvml(args.gpus, [k["pid"] for k in answer["kernels"]], args.others))
    settings = GpuHygieneMetrics()

    def scrape():
        return exposition(metric_families(answer, nvml.read(), settings, time.time()))

    body = scrape()
    ours = timed(scrape, args.scrapes)
    base = timed(lambda: generate_latest(REGISTRY), args.scrapes)

    def p95(xs):
        return sorted(xs)[int(0.95 * (len(xs) - 1))]

    med, med_base = statistics.median(ours), statistics.median(base)
    print(
        f"gpu-hygiene/metrics, {args.kernels} simulated kernels on {args.gpus} GPUs "
        f"({args.others} other processes each), {args.scrapes} scrapes, {len(body)} bytes a scrape"
    )
    print(f"  one scrape:   median {med * 1e3:.3f} ms, p95 {p95(ours) * 1e3:.3f} ms")
    print(
        f"  baseline (generate_latest of the default registry, jupyter_server's /metrics): "
        f"median {med_base * 1e3:.3f} ms; ratio {med / med_base:.1f}x"
    )
    for interval in (60, 15):
        print(
            f"  share of one core at a {interval} s scrape interval: "
            f"{100 * med / interval:.4f} % (budget 1 %)"
        )

    # Between scrapes: ExecutionActivity reads each IOPub message of every kernel (its header
    # only), as jupyter_server's own activity watch does. A kernel with the agent's comm open
    # sends one sample a second: 50 kernels, 50 messages a second.
    session = Session(key=b"bench")
    message = session.msg("comm_msg", {"comm_id": "c", "data": {"t": 0}})
    frames = session.serialize(message)
    activity = ExecutionActivity()
    record = activity._recorder([None, 0.0], session)
    per_message = statistics.median(timed(lambda: record(frames), args.scrapes * 10))
    print(
        f"  between scrapes, one IOPub message read: median {per_message * 1e6:.1f} us; "
        f"{args.kernels} kernels sending one sample a second: "
        f"{100 * per_message * args.kernels:.4f} % of one core"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
