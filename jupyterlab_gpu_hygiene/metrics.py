"""Prometheus metrics of this server's kernels: ``GET {base_url}gpu-hygiene/metrics`` (issue 25).

dcgm-exporter and nvitop export GPU memory per device or per process; an admin of a JupyterHub
asks which *kernels* sit idle holding VRAM. This endpoint answers that in the Prometheus text
format, built with ``prometheus_client`` (the library jupyter_server's own ``/metrics`` uses):

- the server reads NVML itself (nvidia-ml-py, when installed and a driver is there); no code runs
  in any kernel, and a kernel's VRAM is what NVML lists for the kernel's pid (its own process:
  not the DataLoader workers it started);
- the kernels, their pids, states and last activity come from the kernel manager, as
  ``gpu-hygiene/kernels`` lists them (``server.kernels_answer``);
- nothing runs between scrapes: the figures are read when Prometheus asks, so the cost is one
  NVML pass and one pass over the kernels per scrape (``bench/metrics.py`` measures it).

Metrics (gauges; bytes and seconds, as Prometheus names them):

- ``jupyter_gpu_hygiene_nvml_available``: 1 when NVML answered, else 0 (``reason`` label);
- ``jupyter_gpu_hygiene_device_memory_total_bytes`` / ``..._used_bytes`` {device, uuid, mig};
- ``jupyter_gpu_hygiene_kernel_info`` {kernel_id, kernel_name, execution_state[, path]}: 1;
  ``execution_state`` is jupyter_server's, but ``busy`` while a cell runs (``ExecutionActivity``:
  a control-channel or subshell request makes jupyter_server's say ``idle`` mid-cell);
  ``path`` (the notebook) only when ``GpuHygieneMetrics.notebook_paths`` is on (off by default,
  for privacy) and the user may read ``/api/sessions``;
- ``jupyter_gpu_hygiene_kernel_idle_seconds`` {kernel_id}: since the kernel last ran code, 0
  while a cell runs (``ExecutionActivity``: not jupyter_server's ``last_activity``, which any
  IOPub message moves: a comm's, a thread's output);
- ``jupyter_gpu_hygiene_kernel_vram_bytes`` {kernel_id, device, uuid, mig}: what NVML lists for
  the kernel's process on that device (a MIG slice is a device of its own, ``mig="1"``);
- ``jupyter_gpu_hygiene_kernel_idle_holding_vram`` {kernel_id}: 1 when the kernel has been idle
  at least ``GpuHygieneMetrics.idle_minutes`` and holds at least ``idle_min_mib`` MiB of VRAM,
  else 0: what an alert or a culler acts on (README, "On JupyterHub");
- ``jupyter_gpu_hygiene_kernel_stale_bytes`` {kernel_id}, ``..._kernel_findings`` {kernel_id,
  kind, severity} (a count), ``..._kernel_finding_bytes`` {kernel_id, kind} and
  ``..._kernel_findings_age_seconds`` {kernel_id}: the findings the page watching the kernel
  last reported (``findings.py``); absent for a kernel no page reported.

Authenticated and authorized like ``/api/kernels`` (auth resource ``kernels``, action ``read``):
a request without a token is refused (403), as every API request is.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.session import Session
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from tornado import web
from traitlets import Bool, Float
from traitlets.config import Configurable

from .findings import FindingsReports
from .server import AUTH_RESOURCE, _maybe_await, is_gateway, kernels_answer, local_pid

#: The route, under the server's ``base_url``.
ROUTE = ("gpu-hygiene", "metrics")
#: Every metric's name starts with this.
PREFIX = "jupyter_gpu_hygiene_"


class GpuHygieneMetrics(Configurable):
    """Settings of ``gpu-hygiene/metrics`` (``--GpuHygieneMetrics.<name>=…`` or
    ``c.GpuHygieneMetrics.<name>`` in ``jupyter_server_config.py``)."""

    notebook_paths = Bool(
        False,
        config=True,
        help="Label each kernel with its notebook's path (kernel_info{path=...}). Off by "
        "default: a path can say more about a user than an admin needs.",
    )
    idle_minutes = Float(
        30.0,
        config=True,
        help="A kernel idle at least this long (minutes) that holds at least idle_min_mib of "
        "VRAM is flagged by jupyter_gpu_hygiene_kernel_idle_holding_vram.",
    )
    idle_min_mib = Float(
        256.0,
        config=True,
        help="The VRAM (MiB, all devices) an idle kernel must hold to be flagged.",
    )
    cull_idle_holding = Bool(
        False,
        config=True,
        help="Shut down every kernel flagged by jupyter_gpu_hygiene_kernel_idle_holding_vram "
        "(idle at least idle_minutes by the server's own watch of its execute requests, "
        "holding at least idle_min_mib of VRAM), checked every cull_interval_s: an opt-in "
        "beside jupyter_server's cull_idle_timeout (which culls every idle kernel, holding "
        "VRAM or not, and counts any IOPub message as activity).",
    )
    cull_interval_s = Float(
        60.0,
        min=1.0,
        config=True,
        help="How often (seconds) cull_idle_holding looks for kernels to shut down.",
    )


@dataclass
class Device:
    """One device NVML lists: a GPU, or a MIG slice of one (``mig``)."""

    index: str
    uuid: str
    mig: bool
    total: int | None
    used: int | None
    #: {pid: bytes} of the processes NVML lists on it (None: NVML gives no figure).
    processes: dict[int, int | None] = field(default_factory=dict)
    #: Percent of NVML's last sample period in which a kernel ran (nvidia-smi's GPU-Util), or
    #: None where the driver gives none (a MIG slice).
    utilization: int | None = None


@dataclass
class NvmlReading:
    """What one NVML pass found: its devices, or why there are none."""

    devices: list[Device]
    error: str | None = None


class Nvml:
    """NVML, read by the server (nvidia-ml-py's ``pynvml``), initialised once on first use.

    ``module``: the NVML bindings (default: ``pynvml``, imported on first use). A machine
    without the package or without a driver gives a reading with no device and the error.
    """

    def __init__(self, module: Any = None) -> None:
        self._module = module
        self._ready = False
        #: Why NVML cannot be used, once known: not tried again (a driver does not appear
        #: while the server runs, and each try would load the library again).
        self._error: str | None = None

    def _nvml(self) -> Any:
        if self._module is None:
            import pynvml  # nvidia-ml-py; optional

            self._module = pynvml
        if not self._ready:
            self._module.nvmlInit()
            self._ready = True
        return self._module

    def read(self) -> NvmlReading:
        """Every device (MIG slices as devices of their own) and its processes."""
        if self._error is not None:
            return NvmlReading([], self._error)
        try:
            nvml = self._nvml()
        except ImportError as error:
            self._error = f"nvidia-ml-py not importable: {error}"
            return NvmlReading([], self._error)
        except Exception as error:  # NVMLError: no driver, no permission...
            self._error = f"NVML: {error}"
            return NvmlReading([], self._error)
        try:
            count = nvml.nvmlDeviceGetCount()
        except Exception as error:
            return NvmlReading([], f"NVML: {error}")
        devices: list[Device] = []
        for i in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                slices = _mig_slices(nvml, handle)
                if slices:
                    devices.extend(_device(nvml, h, f"{i}:{j}", mig=True) for j, h in slices)
                else:
                    devices.append(_device(nvml, handle, str(i), mig=False))
            except Exception:  # a device that fails is left out, the others are read
                continue
        return NvmlReading(devices)


def _mig_slices(nvml: Any, handle: Any) -> list[tuple[int, Any]]:
    """The MIG devices of a GPU in MIG mode, as (index, handle); [] otherwise."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception:  # not MIG-capable, or an old driver
        return []
    if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return []
    slices = []
    for j in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            slices.append((j, nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)))
        except Exception:  # an index without a slice
            continue
    return slices


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _memory(nvml: Any, handle: Any) -> Any:
    """A device's memory info, NVML's v2 struct where the bindings and driver have it: its
    ``used`` leaves out the driver's reserved memory, as nvidia-smi and the agent count it (v1
    counted 615 MiB on an idle H200)."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except Exception:  # an old driver: v1
            pass
    return nvml.nvmlDeviceGetMemoryInfo(handle)


def _device(nvml: Any, handle: Any, index: str, mig: bool) -> Device:
    """One device's memory and the processes on it (compute and graphics, by pid)."""
    memory = _memory(nvml, handle)
    processes: dict[int, int | None] = {}
    for lister in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            listed = getattr(nvml, lister)(handle)
        except Exception:  # not supported on this device or driver
            continue
        for process in listed:
            used = getattr(process, "usedGpuMemory", None)
            known = processes.get(process.pid)
            processes[process.pid] = (
                used if known is None else known if used is None else max(known, used)
            )
    try:
        utilization: int | None = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:  # a MIG slice, or a driver without the figure
        utilization = None
    return Device(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        mig=mig,
        total=int(memory.total),
        used=int(memory.used),
        processes=processes,
        utilization=utilization,
    )


#: How long (seconds) the culler waits for a kernel's main shell to answer a ``kernel_info_request``
#: before it shuts the kernel down: a free shell answers in milliseconds, one that runs a cell
#: only when the cell ends (``ExecutionActivity.main_shell_free``).
SHELL_PROBE_S = 5.0

#: The ``running`` key of an execution the watch did not see start: the main shell's state was
#: not known when the watch began (``ExecutionActivity.watch``).
UNKNOWN = "(before the watch)"


@dataclass
class _Watch:
    """One kernel's watch (``ExecutionActivity``)."""

    #: Its IOPub stream (a ZMQStream).
    stream: Any
    #: The session that reads its messages (the kernel's key).
    session: Any
    #: Epoch seconds of its last execution status, or of the watch's start.
    last: float
    #: The kernel's pid when the watch began (a restart starts a new watch).
    pid: int | None
    #: The execute requests that are running: {msg_id: subshell id (None: the main shell)},
    #: from their IOPub ``status: busy`` until their ``status: idle``; ``UNKNOWN`` until the
    #: main shell first answers (``watch``).
    running: dict[str, str | None] = field(default_factory=dict)
    #: The shell stream of a ``kernel_info_request`` not answered yet.
    probe: Any = None


class ExecutionActivity:
    """When each local kernel last ran code, and whether it runs code now, from its own IOPub
    stream (watched as jupyter_server's ``start_watching_activity`` watches it).

    A kernel runs code from the IOPub ``status: busy`` of an ``execute_request`` until the
    ``status: idle`` of that very request (its ``msg_id``): any shell's, a subshell's too.
    jupyter_server's ``execution_state`` is not used for that, nor ``last_activity`` for idle
    time: the state is whatever the last status message said, and a control-channel request
    (``usage_request``, ``list_subshell_request``, ``create_subshell_request``) or a comm on a
    subshell sends ``busy`` then ``idle`` while the main shell still runs a cell (ipykernel 7),
    so the state reads ``idle`` mid-cell; every IOPub message counts as activity, a comm's or a
    thread's output too.

    ``watch`` starts watching the kernels it is given (from the first scrape, and every
    ``poll_s`` from ``start``), ``forget`` drops those that are gone. A cell that started
    before the watch did is not seen start: the watch then asks the main shell once
    (``kernel_info_request``, answered only when no cell runs there) and counts the kernel as
    running code until it answers. Idle time counts from the watch's start until the kernel
    first runs code.
    """

    def __init__(self, clock=time.time) -> None:
        self._clock = clock
        self._watched: dict[str, _Watch] = {}

    def last_execution(self, kernel_id: str) -> float | None:
        """Epoch seconds of the kernel's last execution (or of its watch's start), or None when
        it is not watched (a gateway kernel, one that could not be watched)."""
        entry = self._watched.get(kernel_id)
        return None if entry is None else entry.last

    def executing(self, kernel_id: str) -> bool:
        """Whether the kernel runs code now: an execute request without its ``idle`` yet, or a
        main shell that has not answered since the watch began. False when it is not
        watched."""
        entry = self._watched.get(kernel_id)
        return entry is not None and bool(entry.running)

    def watch(self, kernel_manager: Any, kernel_ids: list[str]) -> None:
        """Watch every kernel of ``kernel_ids`` not watched yet (again after a restart: a new
        pid); stop watching the others."""
        if is_gateway(kernel_manager):
            return
        for kernel_id in list(self._watched):
            if kernel_id not in kernel_ids:
                self.forget(kernel_id)
        for kernel_id in kernel_ids:
            entry = self._watched.get(kernel_id)
            pid = local_pid(kernel_manager, kernel_id)
            if entry is not None and entry.pid == pid:
                continue
            self.forget(kernel_id)
            stream = None
            try:
                kernel = kernel_manager.get_kernel(kernel_id)
                session = Session(config=kernel.session.config, key=kernel.session.key)
                stream = kernel.connect_iopub()
                entry = _Watch(stream, session, self._clock(), pid, {UNKNOWN: None})
                stream.on_recv(self._recorder(entry))  # a ZMQStream (jupyter_server's)
                entry.probe = _ask_main_shell(kernel, session, lambda e=entry: _answered(e))
            except Exception:  # shut down meanwhile, no IOPub, or a socket without on_recv
                if stream is not None:
                    with contextlib.suppress(Exception):
                        stream.close()
                continue
            self._watched[kernel_id] = entry

    def _recorder(self, entry: _Watch):
        session = entry.session

        def record(msg_list: list) -> None:
            try:
                _idents, parts = session.feed_identities(msg_list)
                msg = session.deserialize(parts, content=False)
                if msg["header"].get("msg_type") != "status":
                    return
                parent = msg.get("parent_header") or {}
                state = session.unpack(msg["content"]).get("execution_state")
            except Exception:  # not a message of this session
                return
            if state == "starting":  # the kernel (re)starts: nothing of before runs
                entry.running.clear()
            if parent.get("msg_type") != "execute_request":
                return
            entry.last = self._clock()
            msg_id = parent.get("msg_id")
            if state == "busy":
                entry.running[msg_id] = parent.get("subshell_id")
            elif state == "idle":
                entry.running.pop(msg_id, None)

        return record

    async def main_shell_free(
        self, kernel_manager: Any, kernel_id: str, timeout: float = SHELL_PROBE_S
    ) -> bool:
        """Whether the kernel's main shell answers a ``kernel_info_request`` within ``timeout``
        seconds: it does so only between cells (a shell handles its requests one at a time),
        whatever a control or subshell request made its state say. False when it does not
        answer in time or cannot be asked."""
        answered = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not answered.done():
                answered.set_result(True)

        stream = None
        try:
            kernel = kernel_manager.get_kernel(kernel_id)
            session = Session(config=kernel.session.config, key=kernel.session.key)
            stream = _ask_main_shell(kernel, session, done)
            return await asyncio.wait_for(answered, timeout)
        except Exception:  # no answer in time, shut down meanwhile, no shell
            return False
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()

    def forget(self, kernel_id: str) -> None:
        """Stop watching ``kernel_id`` and close its streams."""
        entry = self._watched.pop(kernel_id, None)
        if entry is not None:
            for stream in (entry.stream, entry.probe):
                if stream is not None:
                    with contextlib.suppress(Exception):  # already closed with its kernel
                        stream.close()


def _answered(entry: _Watch) -> None:
    """The main shell answered the watch's ``kernel_info_request``: whatever ran there when the
    watch began is over."""
    entry.running.pop(UNKNOWN, None)
    if entry.probe is not None:
        with contextlib.suppress(Exception):
            entry.probe.close()
        entry.probe = None


def _ask_main_shell(kernel: Any, session: Any, on_reply) -> Any:
    """Send a ``kernel_info_request`` to ``kernel``'s main shell (no subshell) on a shell
    stream of its own and call ``on_reply()`` when its reply arrives; returns the stream (a
    ZMQStream), which the caller closes. jupyter_server counts neither message as activity
    (``untracked_message_types``)."""
    stream = kernel.connect_shell()
    request = session.msg("kernel_info_request", {})
    msg_id = request["header"]["msg_id"]

    def received(msg_list: list) -> None:
        try:
            _idents, parts = session.feed_identities(msg_list)
            reply = session.deserialize(parts, content=False)
        except Exception:  # not a message of this session
            return
        if (reply.get("parent_header") or {}).get("msg_id") == msg_id:
            on_reply()

    stream.on_recv(received)
    session.send(stream, request)
    return stream


def _idle_seconds(
    row: dict, now: float, last_execution: float | None, executing: bool = False
) -> float:
    """Seconds since the kernel last ran code (``ExecutionActivity``), 0 while it runs code
    (``executing``, the watch's) or its state says busy; a kernel not watched (behind a
    gateway) falls back to jupyter_server's ``last_activity``."""
    if executing or row.get("executionState") == "busy":
        return 0.0
    if last_execution is not None:
        return max(0.0, now - last_execution)
    if not row.get("lastActivity"):
        return 0.0
    try:
        last = datetime.datetime.fromisoformat(str(row["lastActivity"]).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if last.tzinfo is None:
        last = last.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, now - last.timestamp())


def metric_families(
    answer: dict,
    reading: NvmlReading,
    settings: GpuHygieneMetrics,
    now: float,
    activity: ExecutionActivity | None = None,
    reports: FindingsReports | None = None,
) -> list[GaugeMetricFamily]:
    """The endpoint's gauges for ``answer`` (``server.kernels_answer``: sessions listed only
    where their paths may be shown) and one NVML ``reading``, at ``now`` (epoch seconds), with
    the browser's last findings ``reports`` of the kernels that have one."""
    nvml = GaugeMetricFamily(
        PREFIX + "nvml_available",
        "1 when the server could read NVML (nvidia-ml-py and a driver), else 0.",
        labels=["reason"],
    )
    nvml.add_metric([reading.error or ""], 0 if reading.error else 1)
    device_labels = ["device", "uuid", "mig"]
    total = GaugeMetricFamily(
        PREFIX + "device_memory_total_bytes", "Memory of the device (NVML).", labels=device_labels
    )
    used = GaugeMetricFamily(
        PREFIX + "device_memory_used_bytes",
        "Memory in use on the device by every process (NVML).",
        labels=device_labels,
    )
    info = GaugeMetricFamily(
        PREFIX + "kernel_info",
        "One per kernel of this server (1); path only with GpuHygieneMetrics.notebook_paths.",
        labels=["kernel_id", "kernel_name", "execution_state", "path"],
    )
    idle = GaugeMetricFamily(
        PREFIX + "kernel_idle_seconds",
        "Seconds since the kernel last ran code (an execute request); 0 while it is busy.",
        labels=["kernel_id"],
    )
    vram = GaugeMetricFamily(
        PREFIX + "kernel_vram_bytes",
        "VRAM NVML lists for the kernel's process on the device.",
        labels=["kernel_id", *device_labels],
    )
    flagged = GaugeMetricFamily(
        PREFIX + "kernel_idle_holding_vram",
        f"1 when the kernel is idle at least {settings.idle_minutes:g} min and holds at least "
        f"{settings.idle_min_mib:g} MiB of VRAM (GpuHygieneMetrics.idle_minutes, "
        "idle_min_mib), else 0.",
        labels=["kernel_id"],
    )
    for device in reading.devices:
        labels = [device.index, device.uuid, "1" if device.mig else "0"]
        if device.total is not None:
            total.add_metric(labels, device.total)
        if device.used is not None:
            used.add_metric(labels, device.used)
    for row in answer.get("kernels", []):
        kernel_id = row["id"]
        paths = ",".join(s["path"] for s in row.get("sessions", []) if s.get("path"))
        running = activity is not None and activity.executing(kernel_id)
        execution_state = "busy" if running else row.get("executionState") or "unknown"
        info.add_metric([kernel_id, row.get("name") or "", execution_state, paths], 1)
        state = kernel_state(row, reading, settings, now, activity)
        idle.add_metric([kernel_id], state.idle_seconds)
        for device, figure in state.vram:
            labels = [kernel_id, device.index, device.uuid, "1" if device.mig else "0"]
            vram.add_metric(labels, figure)
        flagged.add_metric([kernel_id], 1 if state.idle_holding else 0)
    return [nvml, total, used, info, idle, vram, flagged, *findings_families(answer, reports, now)]


def findings_families(
    answer: dict, reports: FindingsReports | None, now: float
) -> list[GaugeMetricFamily]:
    """The gauges of the browser's findings reports (``findings.py``), for the kernels of
    ``answer`` that have one; the reports of kernels that are gone are forgotten."""
    stale = GaugeMetricFamily(
        PREFIX + "kernel_stale_bytes",
        "Bytes of the kernel's stale models, as the page watching it last reported.",
        labels=["kernel_id"],
    )
    count = GaugeMetricFamily(
        PREFIX + "kernel_findings",
        "The kernel's findings by kind and severity, as the page watching it last reported.",
        labels=["kernel_id", "kind", "severity"],
    )
    held = GaugeMetricFamily(
        PREFIX + "kernel_finding_bytes",
        "Bytes the kernel's findings of a kind hold (all devices), as last reported.",
        labels=["kernel_id", "kind"],
    )
    age = GaugeMetricFamily(
        PREFIX + "kernel_findings_age_seconds",
        "Seconds since the page watching the kernel last reported its findings.",
        labels=["kernel_id"],
    )
    if reports is None:
        return [stale, count, held, age]
    ids = {row["id"] for row in answer.get("kernels", [])}
    reports.keep_only(ids)
    for kernel_id in sorted(ids):
        report = reports.get(kernel_id)
        if report is None:
            continue
        stale.add_metric([kernel_id], report.body["staleBytes"])
        age.add_metric([kernel_id], max(0.0, now - report.at))
        counts: dict[tuple[str, str], int] = {}
        sizes: dict[str, int] = {}
        for finding in report.body["findings"]:
            key = (finding["kind"], finding["severity"])
            counts[key] = counts.get(key, 0) + 1
            sizes[finding["kind"]] = sizes.get(finding["kind"], 0) + finding["bytes"]
        for (kind, severity), n in sorted(counts.items()):
            count.add_metric([kernel_id, kind, severity], n)
        for kind, size in sorted(sizes.items()):
            held.add_metric([kernel_id, kind], size)
    return [stale, count, held, age]


@dataclass
class KernelState:
    """One kernel as the metrics and the culler see it."""

    #: Seconds since it last ran code (0 while busy).
    idle_seconds: float
    #: (device, bytes) for each device where NVML lists its pid with a figure.
    vram: list[tuple[Device, int]]
    #: Idle at least ``idle_minutes`` and holding at least ``idle_min_mib`` (all devices).
    idle_holding: bool


def kernel_state(
    row: dict,
    reading: NvmlReading,
    settings: GpuHygieneMetrics,
    now: float,
    activity: ExecutionActivity | None = None,
) -> KernelState:
    """The ``KernelState`` of the kernel ``row`` (a row of ``server.kernels_answer``) at ``now``
    (epoch seconds), from one NVML ``reading``."""
    kernel_id = row["id"]
    last = activity.last_execution(kernel_id) if activity else None
    seconds = _idle_seconds(row, now, last, bool(activity and activity.executing(kernel_id)))
    pid = row.get("pid")
    vram = [
        (device, device.processes[pid])
        for device in reading.devices
        # listed without a figure (None: some drivers, MIG without privileges): no sample
        if pid is not None and device.processes.get(pid) is not None
    ]
    held = sum(figure for _device, figure in vram)
    return KernelState(
        seconds,
        vram,
        seconds >= settings.idle_minutes * 60 and held >= settings.idle_min_mib * 2**20,
    )


def _ran_since(
    kernel_manager: Any, activity: ExecutionActivity, kernel_id: str, now: float
) -> bool:
    """Whether the kernel runs code now, or ran code after ``now`` (epoch seconds), by the
    execution watch and the kernel manager's state; a kernel that is gone counts as busy (it
    is not shut down)."""
    try:
        state = kernel_manager.get_kernel(kernel_id).execution_state
    except Exception:  # shut down meanwhile
        return True
    last = activity.last_execution(kernel_id)
    return state == "busy" or activity.executing(kernel_id) or (last is not None and last > now)


async def cull_idle_holding(
    kernel_manager: Any,
    nvml: Nvml,
    settings: GpuHygieneMetrics,
    activity: ExecutionActivity,
    log: Any,
) -> list[str]:
    """Shut down every local kernel of ``kernel_manager`` that ``kernel_state`` flags as idle
    and holding VRAM (``GpuHygieneMetrics.cull_idle_holding``); returns their ids. Before its
    shutdown each one's main shell is asked whether it is free (``main_shell_free``: no
    answer within ``SHELL_PROBE_S``, a cell runs there, and it is kept), then it is looked at
    again (``_ran_since``: running code, or a cell since the listing, and it is kept); a
    culled kernel is logged at warning level with its idle minutes and VRAM. A kernel that
    fails to shut down is logged and left; nothing raises."""
    if is_gateway(kernel_manager):
        return []
    answer = await kernels_answer(kernel_manager, None)
    activity.watch(kernel_manager, [k["id"] for k in answer["kernels"]])
    reading = await asyncio.get_running_loop().run_in_executor(None, nvml.read)
    now = time.time()
    culled = []
    for row in answer["kernels"]:
        state = kernel_state(row, reading, settings, now, activity)
        if not state.idle_holding:
            continue
        if _ran_since(kernel_manager, activity, row["id"], now):
            continue  # it started a cell while the others were listed or shut down
        if not await activity.main_shell_free(kernel_manager, row["id"]):
            log.info(
                "jupyterlab_gpu_hygiene: not culling kernel %s: its main shell did not answer "
                "in %g s (a cell runs)",
                row["id"],
                SHELL_PROBE_S,
            )
            continue
        if _ran_since(kernel_manager, activity, row["id"], now):
            continue
        held = sum(figure for _device, figure in state.vram)
        log.warning(
            "jupyterlab_gpu_hygiene: culling kernel %s: idle %.1f min, holding %.0f MiB of VRAM "
            "(GpuHygieneMetrics.cull_idle_holding)",
            row["id"],
            state.idle_seconds / 60,
            held / 2**20,
        )
        try:
            await _maybe_await(kernel_manager.shutdown_kernel(row["id"]))
        except Exception as error:  # gone meanwhile, or its shutdown failed
            log.warning("jupyterlab_gpu_hygiene: culling kernel %s failed: %s", row["id"], error)
            continue
        activity.forget(row["id"])
        culled.append(row["id"])
    return culled


class _Families:
    """A collector of families built beforehand (one scrape's)."""

    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self._families = families

    def collect(self):
        return iter(self._families)


def exposition(families: list[GaugeMetricFamily]) -> bytes:
    """The Prometheus text format of ``families`` (``prometheus_client.generate_latest``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


class GpuHygieneMetricsHandler(APIHandler):
    """``GET {base_url}gpu-hygiene/metrics``: the gauges above, read at each scrape. A scrape is
    no user's activity: it does not move the server's ``last_activity`` (``_track_activity``),
    which JupyterHub's idle culler reads."""

    auth_resource = AUTH_RESOURCE
    _track_activity = False

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def get(self) -> None:
        settings: GpuHygieneMetrics = self.settings["gpu_hygiene_metrics"]
        nvml: Nvml = self.settings["gpu_hygiene_nvml"]
        paths = settings.notebook_paths and await _maybe_await(
            self.authorizer.is_authorized(self, self.current_user, "read", "sessions")
        )
        answer = await kernels_answer(self.kernel_manager, self.session_manager if paths else None)
        activity: ExecutionActivity = self.settings["gpu_hygiene_activity"]
        activity.watch(self.kernel_manager, [k["id"] for k in answer["kernels"]])
        # NVML calls may take a while (a GPU without persistence mode): off the event loop
        reading = await asyncio.get_running_loop().run_in_executor(None, nvml.read)
        reports: FindingsReports = self.settings["gpu_hygiene_findings"]
        families = metric_families(answer, reading, settings, time.time(), activity, reports)
        body = exposition(families)
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.set_header("Cache-Control", "no-store")
        # not APIHandler.finish, which sets Content-Type: application/json over it (Prometheus 3
        # refuses that type) and cannot be told otherwise before jupyter_server 2.4
        # (set_content_type); the rest of what it does is moving last_activity, which a scrape
        # must not do (_track_activity)
        web.RequestHandler.finish(self, body)
