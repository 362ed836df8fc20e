#!/usr/bin/env python3
"""GPU truth check of the kernel agent on real CUDA (issue 6).

Runs, on a machine with an NVIDIA GPU and offline, real IPython kernels through jupyter_client with
the agent injected exactly as the extension sends it (``test/agent/kernel_driver.py``, shared with
the agent tests), plays the browser's side of the comm, and compares what the agent reports with
NVML, ``nvidia-smi`` and torch measured at the same moment:

 1. no CUDA context from the agent (20 samples, then ``import torch`` without CUDA);
 2. the figures agree (device used = nvidia-smi, process = NVML per-process, allocated/reserved =
    torch) with two YOLO("yolov8n.yaml") models on cuda:0;
 3. stacking and the generated clean cell (allocated back to the one-model baseline, reserved
    drops, the CUDA context share reported and not counted as freed);
 4. live samples during a real ``model.train(...)`` on a generated dataset (>= 30 s);
 5. a real CUDA OOM inside a function: ``lastError`` and the generated clean cell;
 6. the agent's cost per cell and per sample, with 1 and 10 models on CUDA;
 7. the public cases test/cases C01, C03, C05, C08, C10, C11 with their byte expectations;
 8. with two or more GPUs: ``CUDA_VISIBLE_DEVICES=1`` maps the kernel's cuda:0 to NVML device 1.

It prints a markdown table (check | expected | measured | result) and writes the report to
``--report``. The clean cells are made by the browser's own TypeScript generator
(``src/analysis/cleanup.ts``), compiled to CommonJS and run through node (``--node``,
``--cleanup-js``; compiled here with the project's tsc when neither is given), or read from
``--clean-cells DIR`` (files ``<key>.py`` generated elsewhere from the inventories that
``--dump-inventories DIR`` saved on an earlier run: ``--generate-clean-cells INV OUT`` does that
where node is).

Missing Python packages (ipykernel, jupyter_client, IPython, ultralytics...) are installed from
``--wheels DIR`` (pip ``--no-index --no-deps`` into a private target directory that is put on
``PYTHONPATH`` for the kernels too). The script itself never imports torch, so it creates no CUDA
context of its own.
"""

import argparse
import contextlib
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "agent"))

import kernel_driver as kd  # noqa: E402 -- needs the path above

MiB = 2**20
NEEDED = ("ipykernel", "jupyter_client", "IPython", "ultralytics", "pynvml")
CLEAN_MARKER = "# gpu-hygiene: clear_gpu"
SEVERAL_HUNDRED = (200 * MiB, 1000 * MiB)  # "several hundred MiB" (C11)


# --------------------------------------------------------------------------------------------
# set-up


def ensure_packages(wheels):
    """Install what the kernels need from a wheel folder when it is not importable; returns the
    target directory used (or None)."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    if not wheels:
        sys.exit(f"missing Python packages {missing}: pass --wheels DIR (a folder of wheels)")
    target = Path(tempfile.gettempdir()) / "gpu-check-site"
    files = sorted(str(p) for p in Path(wheels).glob("*.whl"))
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"),
            *("--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target), *files),
        ],
        check=True,
    )
    sys.path.insert(0, str(target))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(target) + (os.pathsep + old if old else "")
    importlib.invalidate_caches()
    still = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if still:
        sys.exit(f"still missing after installing {wheels}: {still}")
    return target


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except Exception:
        return "not installed"


class Nvml:
    """NVML as seen from this (driver) process: ground truth for the agent's figures. Without
    a driver (a dry run on a machine without GPU) it has no devices and every GPU row fails."""

    def __init__(self):
        import pynvml

        self.nv = pynvml
        self.error = None
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.count = 0
            self.handles = []
            return
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]

    @staticmethod
    def _text(value):
        return value.decode() if isinstance(value, bytes) else str(value)

    def uuid(self, i):
        if i >= self.count:
            return None
        return self._text(self.nv.nvmlDeviceGetUUID(self.handles[i]))

    def name(self, i):
        if i >= self.count:
            return None
        return self._text(self.nv.nvmlDeviceGetName(self.handles[i]))

    def memory(self, i):
        """(v2 used, v1 used, total) in bytes."""
        if i >= self.count:
            return None, None, None
        v2 = self.nv.nvmlDeviceGetMemoryInfo(self.handles[i], version=self.nv.nvmlMemory_v2)
        v1 = self.nv.nvmlDeviceGetMemoryInfo(self.handles[i])
        return int(v2.used), int(v1.used), int(v2.total)

    def process(self, i, pid):
        """NVML's figure for ``pid`` on device ``i`` (bytes), or None when it has no entry."""
        found = None
        if i >= self.count:
            return None
        for proc in self.nv.nvmlDeviceGetComputeRunningProcesses(self.handles[i]):
            if proc.pid == pid:
                found = (found or 0) + int(proc.usedGpuMemory or 0)
        return found

    def driver(self):
        if self.error:
            return f"none ({self.error})"
        return self._text(self.nv.nvmlSystemGetDriverVersion())

    def cuda_driver(self):
        if self.error:
            return "none"
        v = self.nv.nvmlSystemGetCudaDriverVersion()
        return f"{v // 1000}.{v % 1000 // 10}"


def smi_used_mib(index):
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            str(index),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip())


def smi_process_mib(pid):
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = None
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            try:
                total = (total or 0.0) + float(parts[1])
            except ValueError:  # "[N/A]"
                return None
    return total


class CleanCells:
    """The browser's clean-cell generator: node + compiled cleanup.js, or pre-generated files."""

    def __init__(self, args):
        self.dump = Path(args.dump_inventories) if args.dump_inventories else None
        self.dir = Path(args.clean_cells) if args.clean_cells else None
        self.generate = None
        self.describe = ""
        if self.dir is not None:
            self.describe = f"pre-generated cells read from {self.dir}"
            return
        module = args.cleanup_js
        if module is None:
            module = kd.compile_cleanup(ROOT / ".make" / "gpu-check" / "js")
        node = args.node or "node"
        node_version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.generate = kd.clean_cell_generator(module, node)
        self.describe = (
            f"generated by src/analysis/cleanup.ts (compiled {Path(module).name}) through node "
            f"{node_version} on this machine"
        )

    def __call__(self, key, inventory):
        if self.dump is not None:
            self.dump.mkdir(parents=True, exist_ok=True)
            (self.dump / f"{key}.json").write_text(json.dumps(inventory), encoding="utf-8")
        if self.dir is not None:
            return (self.dir / f"{key}.py").read_text(encoding="utf-8")
        return self.generate(inventory)


# --------------------------------------------------------------------------------------------
# report


class Report:
    def __init__(self, log_path):
        self.rows = []
        self.notes = []
        self.log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 -- lives as long as the run

    def row(self, check, expected, measured, ok):
        """``ok``: True, False, or None (not measurable in protocol 1 / not run)."""
        self.rows.append((check, expected, measured, ok))
        mark = {True: "pass", False: "FAIL", None: "n/a"}[ok]
        self.write(f"ROW [{mark}] {check} | {expected} | {measured}")
        print(f"[{mark}] {check}: {measured}", flush=True)

    def note(self, text):
        self.notes.append(text)

    def write(self, text):
        self.log.write(text.rstrip("\n") + "\n")
        self.log.flush()

    def table(self):
        lines = ["| check | expected | measured | result |", "| --- | --- | --- | --- |"]
        for check, expected, measured, ok in self.rows:
            mark = {True: "pass", False: "**FAIL**", None: "n/a"}[ok]
            cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in (check, expected)]
            measured = str(measured).replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {cells[0]} | {cells[1]} | {measured} | {mark} |")
        return "\n".join(lines)


def mib(value, digits=2):
    if value is None:
        return "None"
    return f"{value / MiB:.{digits}f} MiB"


def within(a, b, tol=MiB):
    return a is not None and b is not None and abs(a - b) <= tol


def dev0(sample, index=0):
    for entry in sample["devices"]:
        if entry["index"] == index:
            return entry
    return None


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# --------------------------------------------------------------------------------------------
# a kernel session


class CellFailed(Exception):
    pass


# Records network use in a kernel (an audit hook, before anything else runs there): the check
# runs offline and must see no download attempt, not even a failed one.
NET_AUDIT = r"""
import sys, types
m = sys.modules.setdefault("_gpu_check_net", types.ModuleType("_gpu_check_net"))
m.events = []
def hook(event, args, events=m.events):
    if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request", "http.client.connect"):
        if len(events) < 50:
            try:
                events.append(f"{event} {args[:2]!r}"[:200])
            except Exception:
                events.append(event)
sys.addaudithook(hook)
"""


# Lets the script ask a kernel that stopped answering for every thread's stack (SIGUSR1).
FAULTS = r"""
import faulthandler, signal, sys, types
m = sys.modules.setdefault("_gpu_check_faults", types.ModuleType("_gpu_check_faults"))
m.file = open(PATH, "w")
faulthandler.register(signal.SIGUSR1, file=m.file, all_threads=True)
"""


class Session:
    """One real kernel with the agent injected and a comm open, run cell by cell."""

    def __init__(self, ctx, name, interval_ms=1000, env=None, audit=True):
        self.ctx = ctx
        self.name = name
        self.interval_ms = interval_ms
        ctx.report.write(f"\n===== session {name}")
        self.kernel = kd.Kernel(env=dict(ctx.kernel_env, **(env or {})))
        self.stacks = Path(tempfile.gettempdir()) / f"gpu-check-stacks-{name}-{os.getpid()}.txt"
        self.silent(f"exec({json.dumps(FAULTS)}, {{'PATH': {str(self.stacks)!r}}})")
        self.audit = audit
        if audit:  # not where the agent's cost is measured: the hook runs on every event
            self.silent(f"exec({json.dumps(NET_AUDIT)}, {{}})")
        self.kernel.inject({"sampleIntervalMs": interval_ms})
        self.comm = self.kernel.open_comm(interval_ms)
        self.hello = self.comm.messages("hello")[0]
        self.pid = self.hello["pid"]
        self.count = 0
        self.inventories = {}
        self.samples_after = {}
        self.cells = None
        self.hung = False

    def load(self, case_id):
        self.cells = kd.notebook_cells(kd.CASES_DIR / f"{case_id}.ipynb")

    def cell(self, code=None, number=None, expect_error=False, timeout=60):
        """Run a cell (``code``, or the case notebook's cell ``number``); returns (result,
        inventory sent after it) and records a fresh sample taken right after it."""
        if code is None:
            code = self.cells[number - 1]
        n = len(self.comm.messages("inventory"))
        self.ctx.report.write(f"--- [{self.name}] In[{self.count + 1}]:\n{code}")
        started = time.monotonic()
        try:
            result = self.kernel.run(code, timeout=timeout)
        except TimeoutError:
            self.hung = True
            self.ctx.hangs.append(f"{self.name} In[{self.count + 1}] {code.splitlines()[0][:60]!r}")
            self.dump_stacks()
            raise
        self.count += 1
        out = result.stdout + result.stderr
        if out:
            self.ctx.report.write(out)
        if result.error is not None:
            self.ctx.report.write(
                f"error: {result.error['ename']}: {result.error['evalue']}"[:2000]
            )
        self.ctx.report.write(f"(cell took {time.monotonic() - started:.1f} s)")
        if result.execution_count != self.count:
            raise CellFailed(f"execution count {result.execution_count} != {self.count}")
        if (result.error is not None) != expect_error:
            error = result.error or {}
            raise CellFailed(
                f"cell {self.count}: error {error.get('ename')}: {error.get('evalue')}"[:300]
                if error
                else f"cell {self.count}: no error"
            )
        inventory = self.comm.wait_for("inventory", n + 1, timeout=120)[n]
        self.inventories[self.count] = inventory
        self.samples_after[self.count] = self.sample()
        return result, inventory

    def sample(self):
        """A sample taken now: a ``configure`` wakes the sampler, which sends one at once."""
        before = len(self.comm.messages("sample"))
        self.comm.send({"protocol": 1, "type": "configure", "sampleIntervalMs": self.interval_ms})
        return self.comm.wait_for("sample", before + 1, timeout=10)[-1]

    def evaluate(self, **expressions):
        return self.kernel.evaluate(**expressions)

    def torch_memory(self, index=0):
        got = self.evaluate(
            a=f"__import__('torch').cuda.memory_allocated({index})",
            r=f"__import__('torch').cuda.memory_reserved({index})",
        )
        return got["a"], got["r"]

    def silent(self, code):
        result = self.kernel.execute(code, silent=True, store_history=False)
        if result.reply["status"] != "ok":
            raise CellFailed(f"silent request failed: {result.reply}")
        return result

    def dump_stacks(self):
        """Every thread's Python stack, system call and wait channel of a kernel that does not
        answer, into the log."""
        with contextlib.suppress(Exception):
            os.kill(self.pid, signal.SIGUSR1)
            time.sleep(2)
            self.ctx.report.write(f"stacks of the kernel:\n{self.stacks.read_text()}")
        with contextlib.suppress(Exception):
            lines = []
            for task in sorted(Path(f"/proc/{self.pid}/task").iterdir()):
                info = []
                for name in ("comm", "wchan", "syscall"):
                    with contextlib.suppress(Exception):
                        info.append((task / name).read_text().strip()[:80])
                lines.append(f"  tid {task.name}: " + " | ".join(info))
            self.ctx.report.write("threads (comm | wchan | syscall nr args):\n" + "\n".join(lines))

    def network(self):
        """Network use seen by the kernel's audit hook (list of str)."""
        return self.evaluate(n="__import__('sys').modules['_gpu_check_net'].events")["n"]

    def close(self):
        if self.hung:  # a kernel that does not answer is not asked to shut down
            with contextlib.suppress(Exception):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.kernel.shutdown()
            return
        with contextlib.suppress(Exception):
            if not self.audit:
                raise LookupError
            events = self.network()
            self.ctx.network[self.name] = events
            if events:
                self.ctx.report.write(f"network events in {self.name}: {events}")
        with contextlib.suppress(Exception):
            self.kernel.shutdown()


def snapshot(ctx, s, index=0):
    """The agent's figures and the ground truth at (about) the same moment: sample A, then NVML
    from this process, nvidia-smi and torch in the kernel, then sample B."""
    a = dev0(s.sample(), index)
    used_v2, used_v1, total = ctx.nvml.memory(index)
    smi = smi_used_mib(index)
    proc = ctx.nvml.process(index, s.pid)
    smi_proc = smi_process_mib(s.pid)
    torch_a, torch_r = s.torch_memory(index)
    b = dev0(s.sample(), index)
    return {
        "a": a,
        "b": b,
        "stable": all(a[k] == b[k] for k in ("allocated", "reserved", "process")),
        "nvml_used_v2": used_v2,
        "nvml_used_v1": used_v1,
        "nvml_total": total,
        "smi_used_mib": smi,
        "nvml_process": proc,
        "smi_process_mib": smi_proc,
        "torch_allocated": torch_a,
        "torch_reserved": torch_r,
    }


def run_check(ctx, title, fn):
    """Run one group of checks; an exception becomes a failed row. A group cut short by a
    kernel that stopped answering is run once more in fresh kernels (the hang is reported in
    its own row), its rows from the first attempt dropped."""
    for attempt in (1, 2):
        sessions = []

        def new_session(*args, _sessions=sessions, **kwargs):
            s = Session(ctx, *args, **kwargs)
            _sessions.append(s)
            return s

        started = time.monotonic()
        first_row = len(ctx.report.rows)
        hung = False
        try:
            fn(ctx, new_session)
        except Exception as exc:
            ctx.report.write(traceback.format_exc())
            hung = any(s.hung for s in sessions)
            if hung and attempt == 1 and not over_budget(ctx):
                del ctx.report.rows[first_row:]
                ctx.report.write(f"({title}: a kernel hung; running the group again)")
            else:
                ctx.report.row(
                    f"{title}: run", "completes", f"{type(exc).__name__}: {exc}"[:300], False
                )
                hung = False
        finally:
            for s in sessions:
                s.close()
            ctx.report.write(f"({title} took {time.monotonic() - started:.1f} s)")
        if not hung:
            return


def over_budget(ctx):
    budget = ctx.args.budget_s
    return budget is not None and time.monotonic() - ctx.started > budget


# --------------------------------------------------------------------------------------------
# 1. no context from the agent


def check_no_context(ctx, new_session):
    r = ctx.report
    s = new_session("no-context", interval_ms=250)
    samples = s.comm.wait_for("sample", 20, timeout=30)[:20]
    nvml_entries = [ctx.nvml.process(i, s.pid) for i in range(ctx.nvml.count)]
    mods = s.evaluate(torch="'torch' in __import__('sys').modules")
    procs = sorted({e["process"] for smp in samples for e in smp["devices"]}, key=str)
    torch_figs = {(e["allocated"], e["reserved"]) for smp in samples for e in smp["devices"]}
    ok = (
        all(p is None for p in nvml_entries)
        and procs == [0]
        and torch_figs == {(None, None)}
        and not mods["torch"]
        and s.hello["torch"] is None
        and all(len(smp["devices"]) == ctx.nvml.count for smp in samples)
    )
    r.row(
        "1a no context: agent injected, 20 samples (250 ms)",
        "no NVML entry for the kernel pid; samples: process 0, allocated/reserved null; "
        "torch not in sys.modules",
        f"NVML entries {nvml_entries}; sample process values {procs}; allocated/reserved "
        f"{sorted(torch_figs, key=str)}; torch imported: {mods['torch']}; hello.torch "
        f"{s.hello['torch']}",
        ok,
    )
    s.cell("import torch")
    n = len(s.comm.messages("sample"))
    later = s.comm.wait_for("sample", n + 8, timeout=30)[n:]
    nvml_entries = [ctx.nvml.process(i, s.pid) for i in range(ctx.nvml.count)]
    init = s.evaluate(init="__import__('torch').cuda.is_initialized()")["init"]
    procs = sorted({e["process"] for smp in later for e in smp["devices"]}, key=str)
    inv = s.inventories[1]
    ok = (
        all(p is None for p in nvml_entries)
        and procs == [0]
        and not init
        and inv["torchImported"]
        and not inv["cudaInitialized"]
    )
    r.row(
        "1b `import torch` (no CUDA use), 8 more samples",
        "still no NVML entry; process 0; torch.cuda.is_initialized() False",
        f"NVML entries {nvml_entries}; process values {procs}; is_initialized {init}; "
        f"inventory torchImported {inv['torchImported']} cudaInitialized "
        f"{inv['cudaInitialized']}",
        ok,
    )
    # control: the same pid does show up once the user touches CUDA
    s.cell("x = torch.zeros(1, device='cuda'); torch.cuda.synchronize()")
    snap = snapshot(ctx, s)
    ok = snap["nvml_process"] is not None and snap["a"]["process"] == snap["nvml_process"]
    r.row(
        "1c control: the user's first CUDA tensor",
        "the pid appears in NVML; sample.process = NVML figure",
        f"NVML {mib(snap['nvml_process'])}, sample {mib(snap['a']['process'])}",
        ok,
    )


# --------------------------------------------------------------------------------------------
# 2 + 3. figures agree; stacking and the generated clean cell (C01 cells, generated clean)


def check_stacking(ctx, new_session):
    r = ctx.report
    s = new_session("stacking")
    s.load("C01")
    s.cell(number=1)
    base = s.samples_after[1]
    s.cell(number=2)
    one_model = dev0(s.samples_after[2])
    s.cell(number=3)
    _, inventory = s.cell(number=4)

    hello = s.hello["devices"][0] if s.hello["devices"] else {}
    ok = (
        hello.get("uuid") is not None
        and hello.get("uuid") == ctx.nvml.uuid(0)
        and hello.get("name") == ctx.nvml.name(0)
        and hello.get("total") == ctx.nvml.memory(0)[2]
    )
    r.row(
        "2a hello.devices[0]",
        "uuid, name, total = NVML device 0",
        f"{hello.get('name')}, {mib(hello.get('total'), 0)}, uuid "
        f"{'=' if hello.get('uuid') == ctx.nvml.uuid(0) else '!='} NVML",
        ok,
    )
    snap = snapshot(ctx, s)
    a = snap["a"]
    r.write(f"snapshot: {json.dumps(snap)}")
    ok = (
        a["used"] is not None
        and abs(a["used"] / MiB - snap["smi_used_mib"]) <= 1
        and a["used"] == snap["nvml_used_v2"]
    )
    r.row(
        "2b two YOLO on cuda:0: sample.used vs nvidia-smi memory.used",
        "within 1 MiB (NVML v2 'used')",
        f"sample {mib(a['used'])}; nvidia-smi {snap['smi_used_mib']:.0f} MiB; NVML v2 "
        f"{mib(snap['nvml_used_v2'])} (v1 would say {mib(snap['nvml_used_v1'])})",
        ok,
    )
    ok = (
        a["process"] is not None
        and a["process"] == snap["nvml_process"]
        and snap["smi_process_mib"] is not None
        and abs(a["process"] / MiB - snap["smi_process_mib"]) <= 1
    )
    r.row(
        "2c sample.process vs NVML per-process",
        "= NVML usedGpuMemory for the kernel pid (nvidia-smi within 1 MiB)",
        f"sample {mib(a['process'])}; NVML {mib(snap['nvml_process'])}; nvidia-smi "
        f"{snap['smi_process_mib']} MiB",
        ok,
    )
    ok = (
        a["allocated"] == snap["torch_allocated"]
        and a["reserved"] == snap["torch_reserved"]
        and snap["stable"]
    )
    r.row(
        "2d sample.allocated/reserved vs torch",
        "= torch.cuda.memory_allocated()/memory_reserved()",
        f"sample {a['allocated']}/{a['reserved']} B; torch {snap['torch_allocated']}/"
        f"{snap['torch_reserved']} B",
        ok,
    )

    models = kd.model_by_order(inventory)
    older, newer = [*models, None, None][:2]
    ok = (
        len(models) == 2
        and all(m["label"] == "YOLO (yolov8n.yaml)" for m in models)
        and kd.holder_names(older) == {"Out[2]", "_2", "__"}
        and older["stale"]
        and kd.holder_names(newer) == {"model", "_", "_3", "Out[3]"}
        and not newer["stale"]
        and set(older["bytes"]) == {"cuda:0"}
    )
    r.row(
        "3a inventory after the re-run",
        "2 x YOLO (yolov8n.yaml) on cuda:0; older stale, held by Out[2], _2, __",
        "; ".join(
            f"{m['label']} {m['bytes']} held by {sorted(kd.holder_names(m))}"
            f"{' (stale)' if m['stale'] else ''}"
            for m in models
        ),
        ok,
    )
    before = dev0(s.sample())
    clean = ctx.clean("stacking", inventory)
    s.cell(clean)
    (cleaned,) = s.comm.messages("cleaned")
    after = dev0(s.samples_after[s.count])
    torch_a, torch_r = s.torch_memory()
    one = older["bytes"].get("cuda:0")
    ok = (
        cleaned["models"] == {"before": 2, "after": 1}
        and cleaned["freed"] == {"cuda:0": one}
        and within(after["allocated"], one_model["allocated"])
        and after["allocated"] == torch_a
    )
    r.row(
        "3b generated clean cell: allocated",
        "models 2 -> 1; freed = older model's bytes; allocated within 1 MiB of the one-model "
        "baseline",
        f"models {cleaned['models']}; freed {cleaned['freed']}; allocated {mib(after['allocated'])}"
        f" vs one-model baseline {mib(one_model['allocated'])} (torch {mib(torch_a)}); BASE "
        f"{mib(dev0(base)['allocated'])}",
        ok,
    )
    res = cleaned["reserved"]["cuda:0"]
    ok = res["after"] < res["before"] and after["reserved"] == torch_r == res["after"]
    r.row(
        "3c reserved after empty_cache",
        "drops",
        f"cleaned.reserved {mib(res['before'])} -> {mib(res['after'])}; sample "
        f"{mib(before['reserved'])} -> {mib(after['reserved'])}",
        ok,
    )
    ctx_before = before["process"] - before["reserved"]
    ctx_after = after["process"] - after["reserved"]
    ok = (
        within(ctx_before, ctx_after)
        and SEVERAL_HUNDRED[0] <= ctx_after <= SEVERAL_HUNDRED[1]
        and sum(cleaned["freed"].values()) == one
    )
    r.row(
        "3d CUDA context share (process - reserved)",
        "reported, several hundred MiB, unchanged by the clean, not in `freed`",
        f"{mib(ctx_before)} before, {mib(ctx_after)} after; freed counts only the model "
        f"({mib(sum(cleaned['freed'].values()))})",
        ok,
    )


# --------------------------------------------------------------------------------------------
# 4. live while training


def make_dataset(root, n_train=32, n_val=8, size=320):
    """Random images with one coloured box each and YOLO-format labels; returns data.yaml."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", n_train), ("val", n_val)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            img = (rng.random((size, size, 3)) * 255).astype("uint8")
            w, h = (int(v) for v in rng.integers(size // 8, size // 2, 2))
            x0, y0 = (int(v) for v in rng.integers(0, size - max(w, h), 2))
            img[y0 : y0 + h, x0 : x0 + w] = (255, 64, 0)
            Image.fromarray(img).save(root / "images" / split / f"{i}.jpg")
            (root / "labels" / split / f"{i}.txt").write_text(
                f"0 {(x0 + w / 2) / size:.6f} {(y0 + h / 2) / size:.6f} {w / size:.6f} "
                f"{h / size:.6f}\n"
            )
    data = root / "data.yaml"
    data.write_text(
        f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: box\n", encoding="utf-8"
    )
    return data


def check_training(ctx, new_session):
    r = ctx.report
    interval = 500
    root = Path(tempfile.mkdtemp(prefix="gpu-check-train-"))
    data = make_dataset(root / "data")
    s = new_session("training", interval_ms=interval)
    s.cell(
        "import torch\n"
        "from ultralytics import YOLO\n"
        "try:\n"
        "    import polars  # noqa: F401\n"
        "except ImportError:  # the check may run without the polars wheel: results.csv is then\n"
        "    # not read back into the checkpoint (the only use of polars in training)\n"
        "    from ultralytics.engine.trainer import BaseTrainer\n"
        "    BaseTrainer.read_results_csv = lambda self: {}\n"
        "model = YOLO('yolov8n.yaml').to('cuda:0')\n"
        "torch.cuda.synchronize()"
    )
    pre = dev0(s.sample())
    n = len(s.comm.messages("sample"))
    seconds = ctx.args.train_seconds
    started = time.time()
    result, inventory = s.cell(
        f"results = model.train(data={str(data)!r}, epochs=10000, time={seconds}/3600, "
        f"imgsz=320, batch=16, workers=0, device=0, amp=False, plots=False, "
        f"project={str(root / 'runs')!r}, name='train', exist_ok=True, verbose=False)",
        timeout=seconds + 300,
    )
    ended = time.time()
    post = dev0(s.samples_after[s.count])
    samples = [m for m in s.comm.messages("sample")[n:] if started <= m["t"] <= ended]
    busy = [m for m in samples if m["busy"]]
    times = [started] + [m["t"] for m in samples]
    gaps = [b - a for a, b in zip(times, times[1:])]
    curve = [(m["t"] - started, dev0(m)["allocated"]) for m in busy if dev0(m)]
    allocs = [a for _t, a in curve if a is not None]
    peak = max(allocs) if allocs else None
    log = result.stdout + result.stderr
    train_s = ended - started
    r.write(f"training curve (s, allocated): {curve}")
    ok = train_s >= 30 and busy and max(gaps) <= 2 * interval / 1000
    r.row(
        f"4a samples during model.train ({interval} ms interval)",
        f"training cell >= 30 s; samples throughout (busy); largest gap <= {2 * interval} ms",
        f"cell {train_s:.1f} s; {len(samples)} samples, {len(busy)} busy; largest gap "
        f"{max(gaps) * 1000:.0f} ms"
        f" (median {statistics.median(gaps) * 1000:.0f} ms)",
        ok,
    )
    rise = (peak or 0) - pre["allocated"]
    fall = (peak or 0) - post["allocated"]
    ok = peak is not None and rise >= 64 * MiB and fall >= rise / 2
    r.row(
        "4b allocated curve of the training",
        "rises during training (>= 64 MiB) and falls after it (by >= half the rise)",
        f"before {mib(pre['allocated'], 1)}, peak {mib(peak, 1)}, after "
        f"{mib(post['allocated'], 1)} (reserved after {mib(post['reserved'], 1)})",
        ok,
    )
    words = ("download", "http://", "https://")
    hits = [line for line in log.splitlines() if any(w in line.lower() for w in words)]
    net = s.network()
    ok = not hits and not net and result.error is None
    r.row(
        "4c nothing downloaded (YOLO_OFFLINE, amp=False, plots=False, font present)",
        "no download line in the training log; no socket/urllib use in the kernel (audit hook)",
        f"{len(hits)} log lines" + (f" ({hits[0][:100]})" if hits else "") + f"; {len(net)} "
        "network events" + (f" ({net[0]})" if net else ""),
        ok,
    )
    ctx.training_curve = curve
    if importlib.util.find_spec("polars") is None:
        r.note(
            "polars (a 54 MB wheel) is not installed here: the training cell replaces "
            "`BaseTrainer.read_results_csv` (its only use during training: reading results.csv "
            "back into each checkpoint) with one returning `{}`; import and model building do "
            "not need polars."
        )
    with contextlib.suppress(Exception):
        r.write(f"inventory after training: {json.dumps(inventory)[:4000]}")


# --------------------------------------------------------------------------------------------
# 5. a real CUDA OOM (C05 cells, generated clean right after the failure)


def oom_rows(r, label, inventory, base, sample):
    last = inventory["lastError"] or {}
    frames = {f["name"]: f for f in last.get("frames", [])}
    step = frames.get("train_step", {})
    ok = (
        last.get("type") == "OutOfMemoryError"
        and step.get("bytes") == {"cuda:0": 256 * MiB}
        and step.get("tensors") == 1
        and last.get("bytes") == {"cuda:0": 256 * MiB}
        and within(dev0(sample)["allocated"] - base, 256 * MiB)
    )
    r.row(
        label,
        "lastError OutOfMemoryError; frame train_step holds 256 MiB on cuda:0; allocated +256 MiB",
        f"{last.get('type')} ({last.get('message', '')[:40]}...); frames "
        f"{[(f['name'], f['bytes'], f['tensors']) for f in last.get('frames', [])]}; allocated "
        f"{mib(dev0(sample)['allocated'] - base, 2)} vs BASE",
        ok,
    )


def check_oom(ctx, new_session):
    r = ctx.report
    s = new_session("oom")
    s.load("C05")
    s.cell(number=1)
    base = dev0(s.samples_after[1])["allocated"]
    s.cell(number=2)
    _, inventory = s.cell(number=3, expect_error=True)
    oom_rows(r, "5a real CUDA OOM in train_step()", inventory, base, s.samples_after[3])
    s.cell(ctx.clean("oom", inventory))
    inventory = s.inventories[s.count]
    after = dev0(s.samples_after[s.count])
    torch_a, _ = s.torch_memory()
    alive = s.evaluate(alive="ACTS[-1]() is not None")["alive"]
    ok = (
        inventory["lastError"] is None
        and within(after["allocated"], base)
        and after["allocated"] == torch_a
        and not alive
    )
    r.row(
        "5b generated clean cell right after the OOM",
        "lastError gone; allocated within 1 MiB of BASE",
        f"lastError {inventory['lastError']}; allocated {mib(after['allocated'] - base)} vs BASE "
        f"(torch {mib(torch_a - base)}); activation alive {alive}",
        ok,
    )


# --------------------------------------------------------------------------------------------
# 6. cost


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


def check_cost(ctx, new_session):
    r = ctx.report
    s = new_session("cost", audit=False)
    s.cell("import torch\nfrom ultralytics import YOLO\nmodel = YOLO('yolov8n.yaml').to('cuda:0');")
    s.silent(f"exec({json.dumps(TIMING)}, {{}})")
    budget_cell = 100.0
    budget_sample = 5.0
    for models in (1, 10):
        if models == 10:
            s.cell("models = [YOLO('yolov8n.yaml').to('cuda:0') for _ in range(9)];")
            count = len(s.inventories[s.count]["models"])
            if count != 10:
                raise CellFailed(f"expected 10 models in the inventory, got {count}")
        s.silent("__import__('sys').modules['_gpu_check_timing'].walls.clear()")
        durations = []
        for i in range(ctx.args.cost_cells):
            _, inventory = s.cell(f"x = {i}")
            durations.append(inventory["durationMs"])
        walls = s.evaluate(w="__import__('sys').modules['_gpu_check_timing'].walls")["w"]
        costs = s.evaluate(c="__import__('sys').modules['_gpu_check_timing'].sample_cost(200)")["c"]
        ok = len(walls) == len(durations) and pct(walls, 0.95) <= budget_cell
        r.row(
            f"6a per-cell cost, {models} model(s) on CUDA ({len(durations)} cells)",
            f"inventory durationMs and post_run_cell wall: p95 <= {budget_cell:.0f} ms "
            "(budget set here)",
            f"durationMs p50 {pct(durations, 0.5):.1f} / p95 {pct(durations, 0.95):.1f} ms; "
            f"post_run_cell wall p50 {pct(walls, 0.5):.1f} / p95 {pct(walls, 0.95):.1f} ms",
            ok,
        )
        ok = pct(costs, 0.5) <= budget_sample
        r.row(
            f"6b one sample's cost, {models} model(s) on CUDA (200 samples)",
            f"p50 <= {budget_sample:.0f} ms (budget set here)",
            f"p50 {pct(costs, 0.5):.2f} / p95 {pct(costs, 0.95):.2f} / max {max(costs):.2f} ms",
            ok,
        )


# --------------------------------------------------------------------------------------------
# 7. the public cases


def agent_vs_truth(s, label, r):
    """Row: the agent's sample equals torch and NVML right now."""
    snap = snapshot_light(s)
    a = snap["a"]
    ok = (
        a["allocated"] == snap["torch_allocated"]
        and a["reserved"] == snap["torch_reserved"]
        and a["process"] == snap["nvml_process"]
    )
    r.row(
        label,
        "sample allocated/reserved = torch, process = NVML",
        f"allocated {a['allocated']} / {snap['torch_allocated']}, reserved {a['reserved']} / "
        f"{snap['torch_reserved']}, process {a['process']} / {snap['nvml_process']}",
        ok,
    )


def snapshot_light(s):
    a = dev0(s.sample())
    torch_a, torch_r = s.torch_memory()
    return {
        "a": a,
        "torch_allocated": torch_a,
        "torch_reserved": torch_r,
        "nvml_process": s.ctx.nvml.process(0, s.pid),
    }


def case_c01(ctx, new_session):
    r = ctx.report
    s = new_session("C01")
    s.load("C01")
    s.cell(number=1)
    base = dev0(s.samples_after[1])["allocated"]
    note_base = s.evaluate(b="BASE")["b"] * MiB
    s.cell(number=2)
    s.cell(number=3)
    _, inventory = s.cell(number=4)
    models = kd.model_by_order(inventory)
    older, newer = [*models, None, None][:2]
    ok = (
        len(models) == 2
        and older is not None
        and kd.holder_names(older) == {"Out[2]", "_2", "__"}
        and kd.holder_names(newer) == {"model", "_", "_3", "Out[3]"}
        and [m["stale"] for m in models] == [True, False]
        and {h["kind"] for h in older["holders"]} == {"output"}
    )
    r.row(
        "C01 after cell 3: models and holders",
        "2 live DetectionModel wrappers; older only Out[2], _2, __ (one stale, output cache); "
        "newer model, _, _3, Out[3]",
        "; ".join(f"{sorted(kd.holder_names(m))} stale={m['stale']}" for m in models),
        ok,
    )
    one = older["bytes"]["cuda:0"] if older else None
    ok = one is not None and abs(one - older["parameters"] * 4) < MiB and 10 * MiB < one < 14 * MiB
    r.row(
        "C01 'one' (model bytes on cuda:0)",
        "about 12 MiB (3.16 M fp32 parameters)",
        f"{mib(one)} for {older['parameters'] if older else '?'} parameters (+ BN buffers)",
        ok,
    )
    alloc = dev0(s.samples_after[3])["allocated"]
    ok = base == note_base and within(alloc - base, 2 * one)
    r.row(
        "C01 after cell 3: allocated",
        "BASE + 2 x one (within 1 MiB)",
        f"+{mib(alloc - base)} vs 2 x one = {mib(2 * one)} (BASE {mib(base)} = notebook's)",
        ok,
    )
    r.row(
        "C01 peak while cell 3 runs",
        "about BASE + 2 x one (hint welcome, not required)",
        "not in protocol 1 (samples carry no peak figure)",
        None,
    )
    s.cell(number=5)  # the notebook's reference clear_gpu cell
    _, inventory = s.cell(number=6)
    after = dev0(s.samples_after[5])["allocated"]
    ok = (
        len(inventory["models"]) == 1
        and kd.holder_names(inventory["models"][0]) == {"model"}
        and within(after - base, one)
    )
    r.row(
        "C01 after the reference clear_gpu cell",
        "1 instance (model); allocated within 1 MiB of BASE + one",
        f"{len(inventory['models'])} model(s), holders "
        f"{[sorted(kd.holder_names(m)) for m in inventory['models']]}; "
        f"allocated +{mib(after - base)}",
        ok,
    )
    agent_vs_truth(s, "C01 agent figures vs torch/NVML at the end", r)

    # control: a model cell that does not display the model
    c = new_session("C01-control")
    c.load("C01")
    c.cell(number=1)
    cell = "model = YOLO('yolov8n.yaml')\nmodel.to(DEV);"
    c.cell(cell)
    _, inventory = c.cell(cell)
    ok = len(inventory["models"]) == 1 and not inventory["models"][0]["stale"]
    r.row(
        "C01 control: cell ending with `;`, re-run",
        "1 instance, nothing stale (no warning)",
        f"{len(inventory['models'])} model(s), stale {[m['stale'] for m in inventory['models']]}",
        ok,
    )


def case_c03(ctx, new_session):
    r = ctx.report
    s = new_session("C03")
    s.load("C03")
    s.cell(number=1)
    base = dev0(s.samples_after[1])["allocated"]
    for n in (2, 3):
        s.cell(number=n)
    _, inventory = s.cell(number=4)
    models = inventory["models"]
    one = models[0]["bytes"].get("cuda:0") if models else None
    alloc = dev0(s.samples_after[4])["allocated"] - base
    ok = (
        len(models) == 1
        and kd.holder_names(models[0]) == {"_", "_3", "Out[3]"}
        and models[0]["stale"]
        and within(alloc, one)
    )
    r.row(
        "C03 after cell 4 (`model = None`)",
        "alive; holders _, _3, Out[3]; stale; allocated BASE + one",
        f"{len(models)} model(s), holders {[sorted(kd.holder_names(m)) for m in models]}; "
        f"allocated +{mib(alloc)} (one = {mib(one)})",
        ok,
    )
    for n in (5, 6, 7):
        _, inventory = s.cell(number=n)
    models = inventory["models"]
    ok = len(models) == 1 and kd.holder_names(models[0]) == {"_3", "Out[3]"}
    r.row(
        "C03 after cells 5-7",
        "holders reduced to _3, Out[3]",
        f"{[sorted(kd.holder_names(m)) for m in models]}",
        ok,
    )
    s.cell(number=8)
    _, inventory = s.cell(number=9)
    alloc = dev0(s.samples_after[9])["allocated"] - base
    alive = s.evaluate(a="yolo_ref() is not None")["a"]
    ok = inventory["models"] == [] and within(alloc, 0) and not alive
    r.row(
        "C03 after the reference clear_gpu cell",
        "dead; allocated within 1 MiB of BASE",
        f"{len(inventory['models'])} model(s); alive {alive}; allocated {mib(alloc)} vs BASE",
        ok,
    )


def case_c05(ctx, new_session):
    r = ctx.report
    s = new_session("C05")
    s.load("C05")
    s.cell(number=1)
    base = dev0(s.samples_after[1])["allocated"]
    s.cell(number=2)
    _, inventory = s.cell(number=3, expect_error=True)
    oom_rows(r, "C05 after cell 3 (OOM)", inventory, base, s.samples_after[3])
    measured = []
    ok = True
    for n in (4, 5, 6):
        _, inventory = s.cell(number=n)
        alive = s.evaluate(a="ACTS[-1]() is not None")["a"]
        frames = {f["name"]: f["bytes"] for f in (inventory["lastError"] or {}).get("frames", [])}
        alloc = dev0(s.samples_after[n])["allocated"] - base
        held = frames.get("train_step")
        measured.append(f"cell {n}: alive {alive}, train_step {held}, +{mib(alloc)}")
        ok = ok and alive and held == {"cuda:0": 256 * MiB} and within(alloc, 256 * MiB)
    r.row(
        "C05 cells 4-6 (gc, empty_cache, clear_frames; Python 3.12)",
        "unchanged: +256 MiB in frame train_step, act alive",
        "; ".join(measured),
        ok,
    )
    _, inventory = s.cell(number=7)
    s.cell(number=8)
    alloc = dev0(s.samples_after[7])["allocated"] - base
    alive = s.evaluate(a="ACTS[-1]() is not None")["a"]
    ok = inventory["lastError"] is None and within(alloc, 0) and not alive
    r.row(
        "C05 after the reference clear_gpu cell",
        "act dead; allocated within 1 MiB of BASE",
        f"lastError {inventory['lastError']}; alive {alive}; allocated {mib(alloc)} vs BASE",
        ok,
    )


def case_c08(ctx, new_session):
    r = ctx.report
    s = new_session("C08")
    s.load("C08")
    s.cell(number=1)
    _, inventory = s.cell(number=2)
    before = dev0(s.samples_after[2])["allocated"]
    note_before = s.evaluate(b="before")["b"] * MiB
    _, inventory = s.cell(number=3)
    growth = dev0(s.samples_after[3])["allocated"] - before
    ok = before == note_before and abs(growth - 1024 * MiB) <= 10 * MiB
    r.row(
        "C08 after cell 3: growth",
        "about 1024 MiB (4 x 256 MiB of graphs), within 1%",
        f"+{mib(growth)} by the agent's samples (notebook's `before` = sample: "
        f"{before == note_before})",
        ok,
    )
    models = inventory["models"]
    ok = len(models) == 1 and not models[0]["stale"] and kd.holder_names(models[0]) == {"net"}
    r.row(
        "C08 inventory after cell 3",
        "the net, held by `net`; nothing stale (no stale-model warning)",
        f"{[(m['label'], sorted(kd.holder_names(m)), m['stale']) for m in models]}",
        ok,
    )
    r.row(
        "C08 flag `val_losses` (4 CUDA tensors with grad_fn, about 1024 MiB)",
        "list of loss tensors with graphs named",
        "not in protocol 1 (graph/tensor holders are a later issue)",
        None,
    )
    s.cell(number=4)
    s.cell(number=5)
    after_clean = dev0(s.samples_after[5])["allocated"] - before
    s.cell(number=6)
    after_nograd = dev0(s.samples_after[6])["allocated"] - before
    ok = within(after_clean, 0) and within(after_nograd, 0)
    r.row(
        "C08 after `.item()` + clean, and under no_grad",
        "growth about 0 (within 1 MiB)",
        f"after clean {mib(after_clean)}; no_grad loop {mib(after_nograd)}",
        ok,
    )


def case_c10(ctx, new_session):
    r = ctx.report
    s = new_session("C10")
    s.load("C10")
    s.cell(number=1)
    b = dev0(s.samples_after[1])
    s.cell(number=2)
    c2 = dev0(s.samples_after[2])
    ok = within(c2["allocated"] - b["allocated"], 1024 * MiB) and within(
        c2["reserved"] - b["reserved"], 1024 * MiB
    )
    r.row(
        "C10 cell 2 (1 GiB tensor)",
        "allocated +1024, reserved +1024 MiB",
        f"allocated +{mib(c2['allocated'] - b['allocated'])}, reserved "
        f"+{mib(c2['reserved'] - b['reserved'])}",
        ok,
    )
    _, inventory = s.cell(number=3)
    c3 = dev0(s.samples_after[3])
    nvml3 = ctx.nvml.process(0, s.pid)
    ok = (
        within(c3["allocated"], b["allocated"])
        and c3["reserved"] == c2["reserved"]
        and within(c3["process"], c2["process"])
        and c3["process"] == nvml3
        and inventory["models"] == []
        and within(c3["reserved"] - c3["allocated"], 1024 * MiB + b["reserved"] - b["allocated"])
    )
    r.row(
        "C10 cell 3 (`del blob`)",
        "allocated +0; reserved still +1024 (cached band = reserved - allocated); NVML "
        "unchanged; 0 stale objects",
        f"allocated +{mib(c3['allocated'] - b['allocated'])}; reserved "
        f"+{mib(c3['reserved'] - b['reserved'])}; cached {mib(c3['reserved'] - c3['allocated'])};"
        f" process {mib(c2['process'])} -> {mib(c3['process'])} (NVML {mib(nvml3)}); "
        f"{len(inventory['models'])} models",
        ok,
    )
    s.cell(number=4)
    c4 = dev0(s.samples_after[4])
    drop = c3["process"] - c4["process"]
    ok = c4["reserved"] == b["reserved"] and abs(drop - 1024 * MiB) <= 10 * MiB
    r.row(
        "C10 cell 4 (`empty_cache()`)",
        "reserved back to its baseline; NVML process about 1024 MiB lower",
        f"reserved {mib(c4['reserved'])} (baseline {mib(b['reserved'])}); process "
        f"-{mib(drop)}; device used -{mib(c3['used'] - c4['used'])}",
        ok,
    )
    _, inventory = s.cell(ctx.clean("c10", inventory))
    (cleaned,) = s.comm.messages("cleaned")
    ok = cleaned["freed"] == {} and cleaned["models"] == {"before": 0, "after": 0}
    r.row(
        "C10 generated clean cell",
        "reports no leak (nothing freed, no models)",
        f"freed {cleaned['freed']}, models {cleaned['models']}",
        ok,
    )
    agent_vs_truth(s, "C10 agent figures vs torch/NVML at the end", r)


def case_c11(ctx, new_session):
    r = ctx.report
    s = new_session("C11")
    s.load("C11")
    s.cell(number=1)
    c1 = dev0(s.samples_after[1])
    nvml1 = ctx.nvml.process(0, s.pid)
    ok = nvml1 is None and c1["process"] == 0 and c1["allocated"] is None
    r.row(
        "C11 cell 1 (torch imported, no CUDA call)",
        "no NVML entry for the process",
        f"NVML {nvml1}; sample process {c1['process']}, allocated {c1['allocated']}",
        ok,
    )
    s.cell(number=2)
    c2 = dev0(s.samples_after[2])
    nvml2 = ctx.nvml.process(0, s.pid)
    ok = (
        c2["process"] == nvml2
        and SEVERAL_HUNDRED[0] <= c2["process"] <= SEVERAL_HUNDRED[1]
        and c2["reserved"] == 2 * MiB
    )
    r.row(
        "C11 cell 2 (first CUDA tensor)",
        "process about 610 MiB by NVML (several hundred), torch reserves 2 MiB",
        f"process {mib(c2['process'], 0)} (NVML {mib(nvml2, 0)}); reserved {mib(c2['reserved'])}",
        ok,
    )
    s.cell(number=3)
    c3 = dev0(s.samples_after[3])
    nvml3 = ctx.nvml.process(0, s.pid)
    ok = c3["process"] == nvml3 and SEVERAL_HUNDRED[0] <= c3["process"] <= SEVERAL_HUNDRED[1]
    r.row(
        "C11 cell 3 (cuBLAS / cuDNN loaded)",
        "process about 720 MiB by NVML; reserved about 32 MiB",
        f"process {mib(c3['process'], 0)} (NVML {mib(nvml3, 0)}); reserved {mib(c3['reserved'])}",
        ok,
    )
    _, inventory = s.cell(number=4)
    c4 = dev0(s.samples_after[4])
    share4 = c4["process"] - c4["reserved"]
    ok = SEVERAL_HUNDRED[0] <= share4 <= SEVERAL_HUNDRED[1]
    r.row(
        "C11 cell 4 (all deleted, empty_cache)",
        "NVML about unchanged; allocated 32 MiB (cuBLAS workspace); process - reserved several "
        "hundred MiB",
        f"process {mib(c4['process'], 0)} ({mib(c4['process'] - c3['process'], 0)} vs cell 3); "
        f"allocated {mib(c4['allocated'])}; reserved {mib(c4['reserved'])}; process - reserved "
        f"{mib(share4, 0)}",
        ok,
    )
    s.cell(ctx.clean("c11", inventory))
    (cleaned,) = s.comm.messages("cleaned")
    c5 = dev0(s.samples_after[5])
    share5 = c5["process"] - c5["reserved"]
    ok = cleaned["freed"] == {} and within(share4, share5)
    r.row(
        "C11 generated clean cell",
        "context share unchanged, nothing promised or freed",
        f"process - reserved {mib(share4, 0)} -> {mib(share5, 0)}; freed {cleaned['freed']}",
        ok,
    )
    agent_vs_truth(s, "C11 agent figures vs torch/NVML at the end", r)


# --------------------------------------------------------------------------------------------
# 8. CUDA_VISIBLE_DEVICES


def hexdigits(uuid):
    text = str(uuid).lower()
    text = text[4:] if text.startswith("gpu-") else text
    return "".join(c for c in text if c in "0123456789abcdef")


def check_visible_devices(ctx, new_session):
    r = ctx.report
    if ctx.nvml.count < 2:
        r.row(
            "8 CUDA_VISIBLE_DEVICES=1 mapping",
            "kernel's cuda:0 = NVML device 1",
            f"not run: this machine has {ctx.nvml.count} GPU",
            None,
        )
        return
    s = new_session("visible-devices", env={"CUDA_VISIBLE_DEVICES": "1"})
    hello = s.hello["devices"]
    s.cell(
        "import torch\n"
        "x = torch.empty(512 * 2**20, dtype=torch.uint8, device='cuda:0')\n"
        "torch.cuda.synchronize()"
    )
    torch_uuid = s.evaluate(u="str(__import__('torch').cuda.get_device_properties(0).uuid)")["u"]
    sample = s.sample()
    entry = dev0(sample)
    _used_v2, _v1, total = ctx.nvml.memory(1)
    smi = smi_used_mib(1)
    proc1 = ctx.nvml.process(1, s.pid)
    proc0 = ctx.nvml.process(0, s.pid)
    torch_a, torch_r = s.torch_memory()
    ok = (
        len(hello) == 1
        and hello[0]["uuid"] == ctx.nvml.uuid(1)
        and hello[0]["total"] == total
        and hexdigits(ctx.nvml.uuid(1)) == hexdigits(torch_uuid)
        and len(sample["devices"]) == 1
        and abs(entry["used"] / MiB - smi) <= 1
        and entry["process"] == proc1
        and proc0 is None
        and entry["allocated"] == torch_a
        and entry["reserved"] == torch_r
    )
    r.row(
        "8 CUDA_VISIBLE_DEVICES=1",
        "hello.devices[0].uuid = NVML device 1 (= torch cuda:0); figures = device 1's; no "
        "entry on device 0",
        f"hello {[(d['index'], d['uuid']) for d in hello]}; NVML dev 1 {ctx.nvml.uuid(1)}; torch "
        f"{torch_uuid}; used {mib(entry['used'], 0)} vs smi -i 1 {smi:.0f} MiB; process "
        f"{mib(entry['process'], 0)} vs NVML dev1 {mib(proc1, 0)}, dev0 {proc0}; allocated "
        f"{mib(entry['allocated'])}",
        ok,
    )


# --------------------------------------------------------------------------------------------
# main


CHECKS = {
    "stacking": ("2-3 figures, stacking, clean", check_stacking),
    "oom": ("5 OOM", check_oom),
    "training": ("4 training", check_training),
    "C01": ("C01", case_c01),
    "C03": ("C03", case_c03),
    "C05": ("C05", case_c05),
    "C08": ("C08", case_c08),
    "C10": ("C10", case_c10),
    "C11": ("C11", case_c11),
    "cost": ("6 cost", check_cost),
    "no-context": ("1 no context", check_no_context),
    "devices": ("8 CUDA_VISIBLE_DEVICES", check_visible_devices),
}


class Context:
    pass


def kernel_environment():
    """Environment of every kernel: offline Ultralytics with a private settings folder that
    already holds the font it would otherwise try to fetch when checking a dataset (a copy of
    matplotlib's DejaVuSans under the name it looks for; plots are off, so it is never drawn)."""
    config = Path(tempfile.mkdtemp(prefix="gpu-check-yolo-"))
    (config / "Ultralytics").mkdir()
    spec = importlib.util.find_spec("matplotlib")
    font = Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
    shutil.copyfile(font, config / "Ultralytics" / "Arial.ttf")
    return {"YOLO_OFFLINE": "true", "YOLO_CONFIG_DIR": str(config)}


def kernel_versions(ctx):
    """Versions as the kernel sees them (torch's CUDA, IPython...)."""
    k = kd.Kernel(env=ctx.kernel_env)
    try:
        return k.evaluate(
            torch="__import__('torch').__version__",
            cuda="__import__('torch').version.cuda",
            ipython="__import__('IPython').__version__",
            python="__import__('sys').version.split()[0]",
        )
    finally:
        k.shutdown()


def generate_only(inv_dir, out_dir, args):
    args.clean_cells = None
    args.dump_inventories = None
    clean = CleanCells(args)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(inv_dir).glob("*.json")):
        inventory = json.loads(path.read_text(encoding="utf-8"))
        (Path(out_dir) / f"{path.stem}.py").write_text(clean.generate(inventory), encoding="utf-8")
        print(f"{path.stem}.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default=str(ROOT / "docs" / "gpu-check.md"))
    parser.add_argument("--log", help="full log (cells, outputs); default .make/gpu-check.log")
    parser.add_argument("--wheels", help="wheel folder for missing packages (installed offline)")
    parser.add_argument("--node", help="node binary for the clean-cell generator")
    parser.add_argument("--cleanup-js", help="compiled src/analysis/cleanup.js (CommonJS)")
    parser.add_argument("--clean-cells", help="folder of pre-generated clean cells <key>.py")
    parser.add_argument("--dump-inventories", help="save the inventories given to the generator")
    parser.add_argument(
        "--generate-clean-cells",
        nargs=2,
        metavar=("INVENTORIES", "OUT"),
        help="only generate clean cells from saved inventories (where node is) and exit",
    )
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(CHECKS))
    parser.add_argument("--note", action="append", help="a line for the report's notes")
    parser.add_argument("--train-seconds", type=int, default=40)
    parser.add_argument("--budget-s", type=float, help="start no check group after this long")
    parser.add_argument("--cost-cells", type=int, default=60)
    args = parser.parse_args()

    if args.generate_clean_cells:
        generate_only(*args.generate_clean_cells, args)
        return 0

    started = time.monotonic()
    target = ensure_packages(args.wheels)
    report_path = Path(args.report)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log) if args.log else ROOT / ".make" / "gpu-check.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    ctx = Context()
    ctx.args = args
    ctx.report = Report(log_path)
    ctx.nvml = Nvml()
    ctx.training_curve = None
    ctx.network = {}
    ctx.hangs = []
    ctx.started = started
    ctx.kernel_env = kernel_environment()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        sys.exit(f"unknown checks {unknown}")
    needs_clean = any(n in names for n in ("stacking", "oom", "C10", "C11"))
    clean = CleanCells(args) if needs_clean else None
    ctx.clean = clean
    versions = kernel_versions(ctx)
    env = {
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "GPU": ", ".join(f"{i}: {ctx.nvml.name(i)}" for i in range(ctx.nvml.count)),
        "GPU memory": mib(ctx.nvml.memory(0)[2], 0),
        "driver": ctx.nvml.driver(),
        "CUDA (driver)": ctx.nvml.cuda_driver(),
        "torch": f"{versions['torch']} (CUDA {versions['cuda']})",
        "Python": versions["python"],
        "ipykernel": version("ipykernel"),
        "IPython": versions["ipython"],
        "jupyter_client": version("jupyter_client"),
        "ultralytics": version("ultralytics"),
        "nvidia-ml-py": version("nvidia-ml-py"),
        "polars": version("polars"),
        "agent": kd.agent_source().split('AGENT_VERSION = "')[1].split('"')[0],
        "machine": f"{platform.node()} {platform.machine()} {platform.release()}",
        "packages from wheels": str(target) if target else "no (all importable)",
        "clean cells": clean.describe if clean else "not needed",
    }
    for key, value in env.items():
        ctx.report.write(f"{key}: {value}")
    ctx.report.note(
        "Agent figures are compared in bytes and must be equal to torch's and NVML's unless the "
        "expected column gives a tolerance; case figures marked 'about' in test/cases/README.md "
        "get the tolerance written in the row."
    )
    ctx.report.note(
        "Kernels run with YOLO_OFFLINE=true and a private YOLO_CONFIG_DIR that already holds "
        "Arial.ttf (a copy of matplotlib's DejaVuSans): Ultralytics' dataset check would "
        "otherwise probe the network for that font even offline. Training uses amp=False "
        "(no AMP check model) and plots=False."
    )
    for name in names:
        title, fn = CHECKS[name]
        print(f"== {title}", flush=True)
        if over_budget(ctx):
            ctx.report.row(f"{title}", "runs", "not run: the run's time budget was spent", None)
            continue
        run_check(ctx, title, fn)
        write_report(ctx, report_path, env, started)  # also a partial report if cut short

    ctx.report.row(
        "kernels that stopped answering (cell timeout)",
        "none",
        f"{len(ctx.hangs)}"
        + (f": {'; '.join(ctx.hangs)} (stacks in the log)" if ctx.hangs else ""),
        not ctx.hangs,
    )
    if ctx.network or len(names) == len(CHECKS):
        used = {name: events for name, events in ctx.network.items() if events}
        ctx.report.row(
            "network use in every kernel (audit hook)",
            "none: nothing downloaded, not even tried",
            f"{len(ctx.network)} kernels, network events in {sorted(used) or 'none'}"
            + (f": {next(iter(used.values()))[0]}" if used else ""),
            not used,
        )
    summary = write_report(ctx, report_path, env, started)
    print()
    print(ctx.report.table())
    print(f"\n{summary}; report {report_path}, log {log_path}")
    return 1 if any(row[3] is False for row in ctx.report.rows) else 0


def write_report(ctx, path, env, started):
    rows = ctx.report.rows
    failed = sum(1 for row in rows if row[3] is False)
    passed = sum(1 for row in rows if row[3] is True)
    na = sum(1 for row in rows if row[3] is None)
    summary = f"{passed} pass, {failed} fail, {na} n/a"
    lines = [
        "# GPU check: the agent on real CUDA",
        "",
        "Written by `scripts/gpu_check.py` (`make gpu-check`): real IPython kernels started "
        "through jupyter_client, the agent injected exactly as the extension sends it, the "
        "browser's side of the comm played by the script; every agent figure compared with NVML, "
        "`nvidia-smi` and torch read at the same moment. Cases: `test/cases/README.md`, "
        "'extension should'. 'n/a': the figure is not carried by protocol 1, the check needs "
        "hardware this machine lacks, or the run's time budget (`--budget-s`) was spent first. "
        "Full log: `--log` (default .make/gpu-check.log).",
        "",
        "| | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in env.items()],
        f"| result | {summary}, {time.monotonic() - started:.0f} s |",
        "",
        ctx.report.table(),
        "",
    ]
    if ctx.training_curve:
        points = ctx.training_curve
        step = max(1, len(points) // 16)
        shown = points[::step] + ([points[-1]] if (len(points) - 1) % step else [])
        lines += [
            "Allocated during `model.train(...)` (agent samples, s since the cell started):",
            "",
            "| t (s) | " + " | ".join(f"{t:.1f}" for t, _a in shown) + " |",
            "| --- | " + " | ".join("---" for _ in shown) + " |",
            "| MiB | "
            + " | ".join("-" if a is None else f"{a / MiB:.0f}" for _t, a in shown)
            + " |",
            "",
        ]
    notes = ctx.report.notes + (ctx.args.note or [])
    if notes:
        lines += ["Notes:", "", *[f"- {note}" for note in notes]]
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    sys.exit(main())
