#!/usr/bin/env python3
"""What one ``sample`` and one ``gpuProcesses`` read cost in the agent, with a fake NVML
(``test/agent/fake_nvml/pynvml.py``; no GPU needed): the agent's own Python work around the
NVML calls, and how many NVML calls each makes. ``--delay`` makes every fake call busy-wait
for what the real call took on an H200 (memory info 7 us, a process list 36 us: docs/DESIGN),
so that fewer calls show as less time; the real figures are measured on the device.

    .venv/bin/python bench/nvml_cost.py                  # the work tree's agent
    .venv/bin/python bench/nvml_cost.py --ref HEAD~3     # the agent of a commit (before/after)
    .venv/bin/python bench/nvml_cost.py --ref HEAD~3 --save-modules old.json  # carry it to a GPU
    python bench/nvml_cost.py --real --modules old.json  # that agent there (no git needed)
    .venv/bin/python bench/nvml_cost.py --delay          # with emulated NVML latencies
    python bench/nvml_cost.py --real                     # the real pynvml, on a GPU machine
    python bench/nvml_cost.py --real --json cost.json    # the figures also as JSON (GPU check)

It loads the agent in this process (``load_agent``) and times, in this thread:

- ``sample (list unchanged)``: ``DeviceSampler.sample()`` while device memory does not move
  (the agent may reuse the last process list);
- ``sample (memory moving)``: the device's used bytes change before every call (the list is
  read again);
- ``sample (list read again)``: the sampler's last list is forgotten before every call, as when
  the device's memory moved (the list is read again; also with ``--real``);
- ``gpuProcesses read, unchanged``: ``GpuProcesses.poll`` when nothing changed (no message);
- ``gpuProcesses read, sent``: ``poll`` that builds a message (``/proc`` reads of each pid);
- ``gpuProcesses read, memory moving``: ``poll`` while the device's used bytes change (the
  compute list is read again; the processes' own bytes stay, so no message);
- ``gpuProcesses read, list read again``: ``poll`` with the last list forgotten (as above).

Each figure: median and p95 over ``--reps`` calls, in microseconds. With ``--real`` (the real
pynvml and driver: the memory cannot be made to move, so those rows are left out; "list read
again" stands for them) it also times the raw NVML calls and prints each device's MIG mode and
graphics list. ``--json FILE`` writes the figures as JSON too (the GPU check reads them).
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "agent"))

import kernel_driver as kd  # noqa: E402 -- needs the path above

FAKE_DIR = ROOT / "test" / "agent" / "fake_nvml"

MiB = 1 << 20


def modules_at(ref):
    """The agent's modules at a git ref ([(name, text)], as ``kd.agent_modules``)."""
    rel = kd.AGENT_DIR.relative_to(kd.ROOT)

    def show(name):
        return subprocess.run(
            ["git", "show", f"{ref}:{rel}/{name}.py"],
            cwd=kd.ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    init = show("__init__")
    names = None
    for line in init.split("MODULES = (", 1)[1].split(")", 1)[0].splitlines():
        line = line.strip().strip(",").strip('"')
        if line:
            names = (names or []) + [line]
    return [(name, show(name)) for name in [*names, "__init__"]]


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def timed(fn, reps, before=None):
    out = []
    for _ in range(reps):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e6)
    return out


def _process_utilization(pynvml, handle):
    """One ``nvmlDeviceGetProcessUtilization`` read of the last second's samples (NOT_FOUND, no
    sample in it, counts as a read: the agent meets it too)."""
    try:
        return pynvml.nvmlDeviceGetProcessUtilization(handle, int(time.time() * 1e6) - 1_000_000)
    except pynvml.NVMLError:
        return None


def real_calls(pynvml, sampler, reps, rows, seen=None):
    """The raw NVML calls on each device (rows as ``measure``'s), and what they answer (also
    appended to ``seen``, one line a device)."""
    for device in sampler.devices:
        handle = device.handle
        try:
            mig = pynvml.nvmlDeviceGetMigMode(handle)
        except Exception as exc:
            mig = repr(exc)
        try:
            graphics = [
                (p.pid, p.usedGpuMemory)
                for p in pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle)
            ]
        except Exception as exc:
            graphics = repr(exc)
        compute = [
            (p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        ]
        line = (
            f"device {device.index} {device.name}: MIG mode {mig}, mig handles "
            f"{len(getattr(device, 'mig_handles', ()))}, compute {compute}, graphics {graphics}"
        )
        print(line)
        if seen is not None:
            seen.append(line)
        for label, fn in (
            ("memory info", lambda h=handle: sampler._memory(pynvml, h)),
            ("compute list", lambda h=handle: pynvml.nvmlDeviceGetComputeRunningProcesses(h)),
            ("graphics list", lambda h=handle: pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)),
            ("utilization", lambda h=handle: pynvml.nvmlDeviceGetUtilizationRates(h)),
            ("process utilization", lambda h=handle: _process_utilization(pynvml, h)),
        ):
            try:
                values = timed(fn, reps)
            except Exception as exc:
                print(f"  {label}: {exc!r}")
                continue
            rows.append(
                (f"NVML {label} (device {device.index})", pct(values, 0.5), pct(values, 0.95), {})
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="git ref of the agent (default: the work tree)")
    parser.add_argument(
        "--save-modules",
        metavar="FILE",
        help="write the agent of --ref to FILE as JSON [[name, text]] and exit (for --modules)",
    )
    parser.add_argument(
        "--modules",
        metavar="FILE",
        help="the agent from a --save-modules FILE (a machine without the git history)",
    )
    parser.add_argument("--reps", type=int, default=5000)
    parser.add_argument("--processes", type=int, default=6, help="processes on the device")
    parser.add_argument("--delay", action="store_true", help="emulate NVML call latencies")
    parser.add_argument("--real", action="store_true", help="the real pynvml (GPU machine)")
    parser.add_argument("--json", help="also write the figures to this file (JSON)")
    args = parser.parse_args()
    if args.save_modules:
        pairs = modules_at(args.ref) if args.ref else kd.agent_modules()
        Path(args.save_modules).write_text(json.dumps(pairs), encoding="utf-8")
        return
    if not args.real:
        sys.path.insert(0, str(FAKE_DIR))  # this process only

    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(max(0, args.processes - 2))]
    try:
        procs = [{"pid": "self", "used": 900 * MiB}, {"pid": os.getppid(), "used": 300 * MiB}]
        procs += [{"pid": p.pid, "used": (i + 1) * 100 * MiB} for i, p in enumerate(sleepers)]
        config = {
            "devices": [
                {
                    "name": "Fake H200",
                    "uuid": "GPU-fake-0000",
                    "total": 140 * 1024 * MiB,
                    "used": 4096 * MiB,
                    "compute": procs,
                    "graphics": [],
                    "migMode": 0,
                    # agent 0.13.0 reads GPU-Util and this process's SM share in each sample
                    "utilization": 87,
                    "processUtilization": [{"pid": "self", "sm": 80}],
                }
            ],
            # the utilisation reads' latency is measured with --real (not emulated here)
            "delayUs": {"memory": 7, "processes": 36} if args.delay else {},
        }
        if not args.real:
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            Path(path).write_text(json.dumps(config))
            os.environ["FAKE_NVML_CONFIG"] = path
        import pynvml

        if not hasattr(pynvml, "CALLS"):  # the real one: count nothing
            pynvml.CALLS = collections.Counter()

        if args.modules:
            modules = [tuple(pair) for pair in json.loads(Path(args.modules).read_text("utf-8"))]
        else:
            modules = modules_at(args.ref) if args.ref else None
        label = args.ref or (f"modules of {args.modules}" if args.modules else "work tree")
        agent = kd.load_agent("_gpu_hygiene_nvml_cost", modules)
        sampler = agent.devices.DeviceSampler()
        sampler.start()
        if sampler.nvml is not pynvml:
            sys.exit(f"no NVML: {sampler.nvml_error}")
        rows = []
        seen = []
        if args.real:
            real_calls(pynvml, sampler, args.reps, rows, seen)

        def measure(label, fn, before=None):
            pynvml.CALLS.clear()
            values = timed(fn, args.reps, before)
            calls = {k: v / args.reps for k, v in pynvml.CALLS.items()}
            rows.append((label, pct(values, 0.5), pct(values, 0.95), calls))

        measure("sample (list unchanged)", sampler.sample)
        state = {"used": 4096 * MiB}

        def move():
            # the fake re-reads its file when its mtime changes: change memory in place instead
            state["used"] += MiB
            pynvml._state["config"]["devices"][0]["used"] = state["used"]

        if not args.real:
            measure("sample (memory moving)", sampler.sample, move)

        def forget():
            sampler._listed.clear()  # as when the device's used memory moved

        listed = isinstance(getattr(sampler, "_listed", None), dict)  # an agent without: none
        if listed:
            measure("sample (list read again)", sampler.sample, forget)
        gpuprocs = getattr(agent, "gpuprocs", None)
        if gpuprocs is not None:
            reader = gpuprocs.GpuProcesses(os.getpid())
            errors = []
            reader.poll(sampler, errors.append)
            measure("gpuProcesses read, unchanged", lambda: reader.poll(sampler, errors.append))

            def force():
                reader.force = True

            measure("gpuProcesses read, sent", lambda: reader.poll(sampler, errors.append), force)
            if not args.real:
                measure(
                    "gpuProcesses read, memory moving",
                    lambda: reader.poll(sampler, errors.append),
                    move,
                )
            if listed:
                measure(
                    "gpuProcesses read, list read again",
                    lambda: reader.poll(sampler, errors.append),
                    forget,
                )
            assert not errors, errors
        nvml = "real NVML" if args.real else f"fake NVML, delay {args.delay}"
        print(f"agent: {label}, {args.processes} processes, {nvml}")
        print(f"{'figure':34} {'p50 us':>8} {'p95 us':>8}  NVML calls per call")
        for label, p50, p95, calls in rows:
            text = ", ".join(f"{k.replace('nvmlDeviceGet', '')} {v:g}" for k, v in calls.items())
            print(f"{label:34} {p50:8.1f} {p95:8.1f}  {text}")
        if args.json:
            record = {
                "agent": label,
                "nvml": nvml,
                "processes": args.processes,
                "reps": args.reps,
                "devices": seen,
                "rows": [
                    {"label": label, "p50_us": p50, "p95_us": p95, "calls": calls}
                    for label, p50, p95, calls in rows
                ],
            }
            Path(args.json).write_text(json.dumps(record, indent=1), encoding="utf-8")
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
