"""What the case tests and the GPU truth check share: one kernel session per case notebook, the
ground truth read beside the agent (NVML and ``nvidia-smi`` from this process, torch inside the
kernel), and ``Rows``, the checks a test records (check | expected | measured | result).

A test states each expectation once, as a row or a plain ``assert``; the same test runs on the
CPU (``device`` "cpu": the kernel sees no CUDA device) and, marked ``gpu``, on an NVIDIA GPU
(``device`` "cuda"), where ``scripts/gpu_check.py`` turns its rows into ``docs/gpu-check.md``
(through the pytest plugin ``gpu_report.py``). Figures that only exist with CUDA (torch's
allocator, NVML) are checked in ``if s.cuda`` branches or with ``s.vram(...)``.

No torch here: this process creates no CUDA context (what "no context from the agent" measures);
torch runs in the kernels only.
"""

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import kernel_driver as kd

MiB = 2**20
SEVERAL_HUNDRED = (200 * MiB, 1000 * MiB)  # "several hundred MiB" (C11)
CLEAN_MARKER = "# gpu-hygiene: clear_gpu"
SAMPLE_FIELDS = ("used", "total", "process", "allocated", "reserved", "cached", "nonTorch")

log = logging.getLogger("gpu_hygiene.check")
log.setLevel(logging.INFO)


# --------------------------------------------------------------------------------------------
# rows


class Row(NamedTuple):
    """One check: ``ok`` True (pass), False (fail) or None (n/a: not carried by the protocol, or
    not run here)."""

    check: str
    expected: str
    measured: str
    ok: object


class Rows:
    """The rows one test records. A failed row does not stop the test (later rows are still
    measured, as the device report wants them all); the test fails at its end (conftest's
    ``pytest_pyfunc_call``) when any row failed."""

    def __init__(self, nodeid):
        self.nodeid = nodeid
        self.rows = []
        self.notes = []  # lines for the report's notes
        self.extras = {}  # e.g. the training curve, for the report

    def row(self, check, expected, measured, ok):
        row = Row(str(check), str(expected), str(measured), None if ok is None else bool(ok))
        self.rows.append(row)
        mark = {True: "pass", False: "FAIL", None: "n/a"}[row.ok]
        log.info("ROW [%s] %s | %s | %s", mark, row.check, row.expected, row.measured)
        return row.ok

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def failed(self):
        return [r for r in self.rows if r.ok is False]


class _Run:
    """What every session of this pytest process saw: the report's last rows."""

    def __init__(self):
        self.hangs = []  # "session In[n] 'first line'"
        self.agent_errors = {}  # session name -> agent `error` messages
        self.network = {}  # session name -> network events (audit hook)
        self.clean_cells = "not needed"  # where the clean cells came from (CleanCells)


RUN = _Run()


# --------------------------------------------------------------------------------------------
# figures


def worker_dir(name):
    """A folder under ``.make`` of this pytest process's own (``name``, suffixed with the xdist
    worker's id where pytest-xdist runs the tests in several processes), so that workers never
    compile into one another's output."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return kd.ROOT / ".make" / (f"{name}-{worker}" if worker else name)


def mib(value, digits=2):
    if value is None:
        return "None"
    return f"{value / MiB:.{digits}f} MiB"


def within(a, b, tol=MiB):
    return a is not None and b is not None and abs(a - b) <= tol


def sub(a, b):
    """a - b, or None when either is None."""
    return None if a is None or b is None else a - b


def dev0(sample, index=0):
    """One device's entry of a ``sample`` (all figures None when the sample lacks it)."""
    for entry in sample["devices"]:
        if entry["index"] == index:
            return entry
    return {"index": index, **dict.fromkeys(SAMPLE_FIELDS), "processHidden": None}


def on_dev(by_device, dev="cuda:0"):
    return (by_device or {}).get(dev, 0)


UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def message_size(text, before, after=""):
    """(bytes, half a unit of the last printed digit) of a size in a torch message, e.g.
    ``Tried to allocate 280.81 GiB`` (torch prints two decimals), or (None, None)."""
    found = re.search(before + r"(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB|TiB)" + after, text or "")
    if not found:
        return None, None
    unit = UNITS[found.group(2)]
    return int(float(found.group(1)) * unit), (0.005 * unit if "." in found.group(1) else 0)


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# --------------------------------------------------------------------------------------------
# ground truth from this process: NVML and nvidia-smi


class Nvml:
    """NVML as seen from this (driver) process: ground truth for the agent's figures. Without
    a driver or pynvml it has no devices (``count`` 0, ``error`` says why)."""

    def __init__(self):
        self.error = None
        self.count = 0
        self.handles = []
        try:
            import pynvml

            self.nv = pynvml
            pynvml.nvmlInit()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
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

    def free(self, i):
        """NVML v2 free bytes of device ``i`` (None without it)."""
        if i >= self.count:
            return None
        return int(
            self.nv.nvmlDeviceGetMemoryInfo(self.handles[i], version=self.nv.nvmlMemory_v2).free
        )

    def index_of(self, uuid):
        """NVML index of the device with this UUID (None when no device has it)."""
        for i in range(self.count):
            if uuid is not None and self.uuid(i) == uuid:
                return i
        return None

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


@functools.cache
def nvml():
    return Nvml()


def no_gpu_reason():
    """Why the ``gpu`` tests cannot run here (None when they can). Decided by NVML from this
    process, never by importing torch; ``GPU_HYGIENE_GPU=0`` skips them on a GPU machine."""
    if os.environ.get("GPU_HYGIENE_GPU") == "0":
        return "GPU_HYGIENE_GPU=0"
    found = nvml()
    if found.count == 0:
        return f"no NVIDIA GPU (NVML: {found.error or '0 devices'})"
    return None


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


def smi_utilization(index):
    """``nvidia-smi --query-gpu=utilization.gpu`` of device ``index``: percent (int)."""
    out = subprocess.run(
        [
            *("nvidia-smi", "--query-gpu=utilization.gpu"),
            *("--format=csv,noheader,nounits", "-i", str(index)),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip().splitlines()[0])


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


def smi_compute_apps(uuid=None):
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory``: {pid: MiB} (the sum of a
    pid's entries; None for a pid whose figure is "[N/A]"), on the device ``uuid`` only when
    given."""
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-compute-apps=gpu_uuid,pid,used_memory",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or (uuid is not None and parts[0] != uuid):
            continue
        try:
            pid, used = int(parts[1]), float(parts[2])
        except ValueError:  # "[N/A]"
            found[int(parts[1])] = None
            continue
        if pid in found and found[pid] is None:
            continue
        found[pid] = found.get(pid, 0.0) + used
    return found


# --------------------------------------------------------------------------------------------
# a kernel session


class CellFailed(AssertionError):
    pass


# Records network use in a kernel (an audit hook, before anything else runs there): the check
# runs offline and must see no download attempt, not even a failed one. A Unix-domain socket
# is no network: multiprocessing's DataLoader workers connect to their listener through one
# (seen on the H200, 2026-12-01).
NET_AUDIT = r"""
import socket, sys, types
m = sys.modules.setdefault("_gpu_check_net", types.ModuleType("_gpu_check_net"))
m.events = []
def hook(event, args, events=m.events, local=getattr(socket, "AF_UNIX", None)):
    if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request", "http.client.connect"):
        if event == "socket.connect" and local is not None:
            try:
                if args[0].family == local:
                    return
            except Exception:
                pass
        if len(events) < 50:
            try:
                events.append(f"{event} {args[:2]!r}"[:200])
            except Exception:
                events.append(event)
sys.addaudithook(hook)
"""

# Lets a test ask a kernel that stopped answering for every thread's stack (SIGUSR1).
FAULTS = r"""
import faulthandler, signal, sys, types
m = sys.modules.setdefault("_gpu_check_faults", types.ModuleType("_gpu_check_faults"))
m.file = open(PATH, "w")
faulthandler.register(signal.SIGUSR1, file=m.file, all_threads=True)
"""

# Ground truth measured in the kernel by the check itself (a private module, never in the user
# namespace, asked through silent requests, which run no post_run_cell): unique storage bytes
# on a device of a module's parameters, buffers and gradients, of an optimizer's state.
TRUTH = r"""
import sys, types
m = sys.modules.setdefault("_gpu_check_truth", types.ModuleType("_gpu_check_truth"))
def storages(tensors, device):
    out = {}
    for t in tensors:
        try:
            if t is None or str(t.device) != device:
                continue
            s = t.untyped_storage()
            if s.data_ptr() and s.nbytes():
                out[s.data_ptr()] = int(s.nbytes())
        except Exception:
            pass
    return out
def module_bytes(module, device="cuda:0"):
    if module is None:
        return None
    params = list(module.parameters())
    tensors = params + list(module.buffers()) + [p.grad for p in params]
    return sum(storages(tensors, device).values())
def optimizer_state_bytes(opt, device="cuda:0"):
    if opt is None:
        return None
    import torch
    state = [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    params = storages([p for g in opt.param_groups for p in g["params"]], device)
    return sum(n for k, n in storages(state, device).items() if k not in params)
def attr(obj, path):
    for name in path.split("."):
        obj = getattr(obj, name, None)
    return obj
m.module_bytes, m.optimizer_state_bytes, m.attr = module_bytes, optimizer_state_bytes, attr
"""
T = "__import__('sys').modules['_gpu_check_truth']"


@functools.cache
def kernel_environment():
    """Environment of every kernel: offline Ultralytics with a private settings folder that
    already holds the font it would otherwise try to fetch when checking a dataset (a copy of
    matplotlib's DejaVuSans under the name it looks for; plots are off, so it is never drawn)."""
    import importlib.util

    config = Path(tempfile.mkdtemp(prefix="gpu-check-yolo-"))
    (config / "Ultralytics").mkdir()
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None:
        font = Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        with contextlib.suppress(OSError):
            shutil.copyfile(font, config / "Ultralytics" / "Arial.ttf")
    return {"YOLO_OFFLINE": "true", "YOLO_CONFIG_DIR": str(config)}


# The bytes of every tensor storage alive in a kernel (and of their gradients), an expression
# for ``Kernel.evaluate``: the truth of a fix on the CPU, where no allocator counts.
LIVE = (
    "(lambda gc, torch: gc.collect() * 0 + sum({(str(t.device), t.untyped_storage().data_ptr()):"
    " t.untyped_storage().nbytes() for o in gc.get_objects() if isinstance(o, torch.Tensor)"
    " for t in (o, getattr(o, '_grad', None)) if t is not None and t.device.type != 'meta'}"
    ".values()))(__import__('gc'), __import__('torch'))"
)


class Session:
    """One real kernel with the agent injected and a comm open, a case notebook run cell by cell
    in it. ``device`` "cpu" hides every CUDA device from the kernel (the notebooks' ``DEV`` is
    then "cpu", bytes are reported under "cpu"); "cuda" leaves them visible (``dev`` "cuda:0").
    After every cell: the inventory the agent sent for it and (CUDA) a sample taken right after
    it."""

    def __init__(self, device, name, case=None, interval_ms=1000, env=None, audit=None):
        self.device = device
        self.cuda = device == "cuda"
        self.dev = "cuda:0" if self.cuda else "cpu"
        self.name = name
        self.interval_ms = interval_ms
        self.cells = kd.notebook_cells(kd.CASES_DIR / f"{case}.ipynb") if case else None
        self.count = 0
        self.inventories = {}
        self.samples_after = {}
        self.results = {}
        self.hung = False
        # the network audit hook serves the GPU report's row "network use in every kernel"; it
        # runs on every audited event (1.5 s more per kernel importing ultralytics on the CPU)
        self.audit = self.cuda if audit is None else audit
        log.info("\n===== session %s (%s)", name, device)
        kernel_env = dict(kernel_environment())
        if not self.cuda:
            kernel_env["CUDA_VISIBLE_DEVICES"] = ""
        self.kernel = kd.Kernel(env=dict(kernel_env, **(env or {})))
        self.stacks = Path(tempfile.gettempdir()) / f"gpu-check-stacks-{os.getpid()}-{id(self)}"
        # one silent request before the agent: the stack dump on SIGUSR1, the truth module and
        # (not where the agent's cost is measured: the hook runs on every event) the audit hook
        self.silent(
            f"exec({json.dumps(FAULTS)}, {{'PATH': {str(self.stacks)!r}}})\n"
            f"exec({json.dumps(TRUTH)}, {{}})\n"
            + (f"exec({json.dumps(NET_AUDIT)}, {{}})\n" if self.audit else "")
        )
        self.kernel.inject({"sampleIntervalMs": interval_ms})
        self.comm = self.kernel.open_comm(interval_ms)
        self.hello = self.comm.messages("hello")[0]
        self.pid = self.hello["pid"]

    def vram(self, ok):
        """``ok`` on CUDA; True on the CPU, where VRAM figures are n/a (the case README's
        "*(CUDA)* only applies with a GPU")."""
        return ok if self.cuda else True

    def run(self, number=None, code=None, expect_error=False, timeout=60):
        """Run the next cell: the case notebook's code cell ``number`` (1-based), or ``code`` in
        its place; returns (result, inventory sent after it). The execution count must equal
        ``number`` when one is given, and the inventory must be the one of that cell."""
        if code is None:
            code = self.cells[number - 1]
        n = len(self.comm.messages("inventory"))
        log.info("--- [%s] In[%d]:\n%s", self.name, self.count + 1, code)
        started = time.monotonic()
        try:
            result = self.kernel.run(code, timeout=timeout)
        except TimeoutError:
            self.hung = True
            RUN.hangs.append(f"{self.name} In[{self.count + 1}] {code.splitlines()[0][:60]!r}")
            self.dump_stacks()
            raise
        self.count += 1
        out = result.stdout + result.stderr
        if out:
            log.info("%s", out.rstrip("\n"))
        if result.error is not None:
            log.info("error: %s: %s", result.error["ename"], result.error["evalue"][:2000])
        log.info("(cell took %.1f s)", time.monotonic() - started)
        if result.execution_count != self.count or (number is not None and number != self.count):
            raise CellFailed(
                f"execution count {result.execution_count}, expected {number or self.count}"
            )
        if (result.error is not None) != expect_error:
            error = result.error or {}
            raise CellFailed(
                f"cell {self.count}: error {error.get('ename')}: {error.get('evalue')}"[:300]
                if error
                else f"cell {self.count}: no error"
            )
        inventory = self.comm.wait_for("inventory", n + 1, timeout=120)[n]
        if inventory["executionCount"] != self.count:
            raise CellFailed(f"inventory of cell {inventory['executionCount']} after {self.count}")
        self.inventories[self.count] = inventory
        self.results[self.count] = result
        # a sample right after the cell: its device figures exist with CUDA only (on the CPU a
        # sample lists no devices, and waiting for one would only slow the tests down)
        self.samples_after[self.count] = self.sample() if self.cuda else {"devices": []}
        return result, inventory

    def after(self, number):
        """This device's entry of the sample taken right after cell ``number``."""
        return dev0(self.samples_after[number])

    def sample(self):
        """A sample taken now: asked for, as the page does on a user's action (issue 40)."""
        return self.comm.request_sample(timeout=10)

    def evaluate(self, **expressions):
        return self.kernel.evaluate(**expressions)

    def torch_memory(self, index=0):
        if not self.cuda:
            return None, None
        got = self.evaluate(
            a=f"__import__('torch').cuda.memory_allocated({index})",
            r=f"__import__('torch').cuda.memory_reserved({index})",
        )
        return got["a"], got["r"]

    def python(self):
        """The kernel's Python version as (major, minor)."""
        return tuple(self.evaluate(v="tuple(__import__('sys').version_info[:2])")["v"])

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
            log.info("stacks of the kernel:\n%s", self.stacks.read_text())
        with contextlib.suppress(Exception):
            lines = []
            for task in sorted(Path(f"/proc/{self.pid}/task").iterdir()):
                info = []
                for name in ("comm", "wchan", "syscall"):
                    with contextlib.suppress(Exception):
                        info.append((task / name).read_text().strip()[:80])
                lines.append(f"  tid {task.name}: " + " | ".join(info))
            log.info("threads (comm | wchan | syscall nr args):\n%s", "\n".join(lines))

    def network(self):
        """Network use seen by the kernel's audit hook (list of str)."""
        return self.evaluate(n="__import__('sys').modules['_gpu_check_net'].events")["n"]

    def close(self):
        with contextlib.suppress(Exception):
            RUN.agent_errors[self.name] = self.comm.messages("error")
            for error in RUN.agent_errors[self.name]:
                log.info("agent error message in %s: %s", self.name, error)
        if self.hung:  # a kernel that does not answer is not asked to shut down
            with contextlib.suppress(Exception):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.kernel.shutdown()
            return
        with contextlib.suppress(Exception):
            if self.audit:
                events = self.network()
                RUN.network[self.name] = events
                if events:
                    log.info("network events in %s: %s", self.name, events)
        with contextlib.suppress(Exception):
            self.kernel.shutdown()
        with contextlib.suppress(OSError):
            self.stacks.unlink()


class Sessions:
    """The ``session`` fixture: ``session(case_or_name, **kwargs)`` opens a ``Session`` on the
    test's device; all are closed when the test ends (or before it runs again after a hang)."""

    def __init__(self, device, test_name):
        self.device = device
        self.test_name = test_name
        self.open = []

    def __call__(self, case=None, name=None, **kwargs):
        if case is not None and not (kd.CASES_DIR / f"{case}.ipynb").exists():
            import pytest

            pytest.skip(f"case notebook {kd.CASES_DIR / f'{case}.ipynb'} not available")
        label = f"{self.test_name}:{name or case or 'kernel'}"
        s = Session(self.device, label, case=case, **kwargs)
        self.open.append(s)
        return s

    def hung(self):
        return any(s.hung for s in self.open)

    def close_all(self):
        while self.open:
            self.open.pop().close()


# --------------------------------------------------------------------------------------------
# comparisons against the truth (CUDA only)


def snapshot(s, index=0):
    """The agent's figures and the ground truth at (about) the same moment: sample A, then NVML
    from this process, nvidia-smi and torch in the kernel, then sample B."""
    nv = nvml()
    a = dev0(s.sample(), index)
    used_v2, used_v1, total = nv.memory(index)
    smi = smi_used_mib(index) if nv.count else None
    proc = nv.process(index, s.pid)
    smi_proc = smi_process_mib(s.pid) if nv.count else None
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


def bands_row(label, a, torch_a, torch_r, nvml_process):
    """Row: the sample's bands against torch and NVML read at the same moment: cached =
    reserved - allocated, nonTorch = NVML process - reserved, processHidden false."""
    cached = sub(torch_r, torch_a)
    non_torch = sub(nvml_process, torch_r)
    ok = (
        a["cached"] is not None
        and a["cached"] == cached
        and a["nonTorch"] is not None
        and a["nonTorch"] == non_torch
        and a["processHidden"] is False
    )
    return (
        label,
        "cached = torch reserved - allocated; nonTorch = NVML process - torch reserved; "
        "processHidden false",
        f"cached {a['cached']} B (torch {cached}); nonTorch {a['nonTorch']} B = "
        f"{mib(a['nonTorch'])} (NVML - torch {non_torch}); processHidden {a['processHidden']}",
        ok,
    )


def hello_row(hello, nvml_index, label):
    """Row: hello.devices[0] is NVML device ``nvml_index`` (uuid, name, total, nvmlIndex)."""
    nv = nvml()
    dev = hello["devices"][0] if hello["devices"] else {}
    found = nv.index_of(dev.get("uuid"))
    ok = (
        dev.get("uuid") is not None
        and dev.get("uuid") == nv.uuid(nvml_index)
        and dev.get("name") == nv.name(nvml_index)
        and dev.get("total") == nv.memory(nvml_index)[2]
        and dev.get("index") == 0
        and dev.get("nvmlIndex") == nvml_index == found
    )
    return (
        label,
        f"index 0; uuid, name, total = NVML device {nvml_index}; nvmlIndex = {nvml_index} (the "
        "NVML index of that uuid)",
        f"index {dev.get('index')}, nvmlIndex {dev.get('nvmlIndex')} (NVML index of its uuid: "
        f"{found}); {dev.get('name')}, {mib(dev.get('total'), 0)}, uuid "
        f"{'=' if dev.get('uuid') == nv.uuid(nvml_index) else '!='} NVML; "
        f"{len(hello['devices'])} device(s) in hello",
        ok,
    )


def agent_vs_truth(check, s, label):
    """Row (CUDA only): the agent's sample equals torch and NVML right now, its bands included."""
    if not s.cuda:
        return
    a = dev0(s.sample())
    torch_a, torch_r = s.torch_memory()
    proc = nvml().process(0, s.pid)
    _label, _expected, bands, bands_ok = bands_row(label, a, torch_a, torch_r, proc)
    ok = (
        a["allocated"] is not None
        and a["allocated"] == torch_a
        and a["reserved"] == torch_r
        and a["process"] == proc
        and bands_ok
    )
    check.row(
        label,
        "sample allocated/reserved = torch, process = NVML; cached = reserved - allocated, "
        "nonTorch = process - reserved, processHidden false",
        f"allocated {a['allocated']} / {torch_a}, reserved {a['reserved']} / {torch_r}, process "
        f"{a['process']} / {proc}; {bands}",
        ok,
    )


# --------------------------------------------------------------------------------------------
# a dataset for model.train (test_gpu_truth.py, test_holders.py)


# Kernel code run before an Ultralytics training: the GPU machine may lack the polars wheel
# (54 MB), which the trainer imports only to read results.csv back into the checkpoint.
WITHOUT_POLARS = (
    "try:\n"
    "    import polars  # noqa: F401\n"
    "except ImportError:  # results.csv is then not read back (the only use of polars)\n"
    "    from ultralytics.engine.trainer import BaseTrainer\n"
    "    BaseTrainer.read_results_csv = lambda self: {}\n"
)


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


# --------------------------------------------------------------------------------------------
# the browser's clean-cell generator


class CleanCells:
    """The browser's clean-cell generator (``src/analysis/codegen/clean-cell.ts``): node and the
    compiled
    ``clean-cell.js`` (compiled here with the project's tsc when none is given), or cells generated
    elsewhere (``clean_cells``: a folder of ``<key>.py``). ``dump``: save every inventory given
    to it as ``<key>.json`` (for ``scripts/gpu_check.py --generate-clean-cells``)."""

    def __init__(self, node=None, cleanup_js=None, clean_cells=None, dump=None, compile_dir=None):
        self.dump = Path(dump) if dump else None
        self.dir = Path(clean_cells) if clean_cells else None
        self.generate = None
        if self.dir is not None:
            self.describe = f"pre-generated cells read from {self.dir}"
            RUN.clean_cells = self.describe
            return
        module = cleanup_js or kd.compile_cleanup(compile_dir or worker_dir("pytest-ts"))
        node = node or "node"
        node_version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.generate = kd.clean_cell_generator(module, node)
        self.describe = (
            f"generated by src/analysis/codegen/clean-cell.ts (compiled {Path(module).name}) "
            f"through node "
            f"{node_version} on this machine"
        )
        RUN.clean_cells = self.describe

    def __call__(self, inventory, key="clean"):
        key = re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-")
        if self.dump is not None:
            self.dump.mkdir(parents=True, exist_ok=True)
            (self.dump / f"{key}.json").write_text(json.dumps(inventory), encoding="utf-8")
        if self.dir is not None:
            cell = (self.dir / f"{key}.py").read_text(encoding="utf-8")
            problems = kd.clean_cell_shape(cell)
            assert not problems, f"clean cell {key}: " + "; ".join(problems)
            return cell
        return self.generate(inventory)  # checks the shape too
