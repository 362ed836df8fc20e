"""The running agent: wires the tracker, the inventory builder, the device sampler, the sampler
thread and the comms to IPython's hooks and to the comm target (``lifecycle`` installs and
removes it)."""

import contextlib
import itertools
import os
import sys
import threading
import time

from . import children, clean, degrade, guard, inventory, oom, roots
from .devices import DeviceSampler
from .gpuprocs import GpuProcesses
from .limits import (
    AGENT_VERSION,
    CLEAN_MARKER,
    COMM_TARGET,
    MIN_INTERVAL_MS,
    PROTOCOL,
)
from .progress import ProgressReader
from .quiet import Quiet
from .ram import Ram
from .sampler import SamplerThread
from .tracker import ModuleTracker
from .transport import Transport, check_message
from .util import torch_module, vars_of

# The package object this copy was loaded into (the loader registers it in sys.modules before
# it runs the submodules): it holds ``_agent`` and ``_install_errors``.
_package = sys.modules[__package__]


def interrupt_cell(shell, result):
    """Pass the user's interrupt, which came while the agent worked after a cell, on to that
    cell: its ``ExecutionResult`` gets ``error_in_exec = KeyboardInterrupt()`` (ipykernel then
    replies ``status: error``, ``ename: KeyboardInterrupt``, and a "Run All" stops there) and
    IPython shows the ``KeyboardInterrupt`` as it shows one raised in a cell. A cell that
    failed already keeps its own error."""
    if result is None or not user_cell(getattr(result, "info", None)):
        return
    state = vars_of(result)
    if state.get("error_in_exec") is not None or state.get("error_before_exec") is not None:
        return
    interrupt = KeyboardInterrupt()
    result.error_in_exec = interrupt
    shell.showtraceback((KeyboardInterrupt, interrupt, None))


def user_cell(info):
    """Whether an IPython run is a user's cell (bool). Another extension's probe (a variable
    inspector's query after each cell) runs with ``store_history=False``; IPython skips the
    cell hooks only for ``silent=True``, so the agent tells them apart itself."""
    return getattr(info, "store_history", True) is not False


class Agent:
    """One installed agent: comm target, IPython hooks, sampler thread, module tracker."""

    def __init__(self, shell, config):
        self.shell = shell
        self.kernel = shell.kernel
        self.comm_manager = self.kernel.comm_manager
        self.busy = False
        self.tracker = ModuleTracker()
        self.transport = Transport()
        self.comms = self.transport.comms  # comm_id -> comm (the transport's dict)
        self.devices = DeviceSampler()
        self.sampler = SamplerThread(
            self, self._tick, self._slow_tick, self.devices.read_low, self._reading
        )
        self.stop_event = self.sampler.stop_event
        self.sample_seq = itertools.count(1)
        self.clean_snapshot = None
        self.cell_id = None  # the running user cell's id, as pre_run_cell's info gives it
        self.progress = ProgressReader(self.tracker)  # the Ultralytics trainer's epoch
        self.pid = os.getpid()
        self.gpu_processes = GpuProcesses(self.pid)
        self.ram = Ram()  # the sample's RAM figures
        self.quiet = Quiet()  # between cells, a sample only when this kernel's figures moved
        own = (self, self.kernel, self.comm_manager, self.tracker, self.comms, self.transport)
        self.inventory = inventory.Inventory(
            shell, self.tracker, frozenset(map(id, own)), self._inventory_error
        )
        self.inventory.nvml_pids = self._nvml_pids
        self.configure(config)

    # ---- lifecycle

    def start(self):
        """Initialise NVML, register the comm target and hooks, start the sampler."""
        self.devices.start()
        roots.note_shell_gaps(self.shell)  # the ``holders`` limit, known at start
        try:
            self.inventory.scan_orphans()  # here: the first inventory answers a comm_open
        except Exception as exc:
            self.error("install", exc)
        self.ensure_tracking()
        self.inventory.collections.install()
        self.ensure()

    def ensure(self):
        """Make sure exactly one of each: comm target, pre/post_run_cell hook, sampler thread."""
        if self.comm_manager.targets.get(COMM_TARGET) != self.on_comm_open:
            self.comm_manager.register_target(COMM_TARGET, self.on_comm_open)
        events = self.shell.events
        for name, fn in self._hooks():
            callbacks = events.callbacks.get(name, [])
            while callbacks.count(fn) > 1:
                callbacks.remove(fn)
            if fn not in callbacks:
                events.register(name, fn)
        self.sampler.ensure()

    def _hooks(self):
        return (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell))

    def alive(self):
        """Whether the sampler runs (bool)."""
        return self.sampler.alive()

    def stop(self):
        """Undo ``start``: hooks, comm target, thread, torch hooks; close the open comms."""
        self.sampler.stop_event.set()
        self.sampler.wake()
        events = self.shell.events
        for name, fn in self._hooks():
            callbacks = events.callbacks.get(name, [])
            while fn in callbacks:
                callbacks.remove(fn)
        with contextlib.suppress(Exception):
            if self.comm_manager.targets.get(COMM_TARGET) == self.on_comm_open:
                self.comm_manager.unregister_target(COMM_TARGET, self.on_comm_open)
        self.transport.close_all()
        self.inventory.recorder.stop(torch_module())  # a recording this agent started
        self.inventory.collections.uninstall()
        self.tracker.stop()
        self.sampler.stop()
        self.devices.stop()

    def configure(self, config):
        """Apply a ``configure`` body / loader config: ``sampleIntervalMs`` (int ms, min 250),
        ``provenance`` (bool: record allocation stacks, ``provenance.Recorder``)."""
        if not config:
            return
        if not isinstance(config, dict):
            raise TypeError("configuration must be an object")
        if "sampleIntervalMs" in config:
            value = config["sampleIntervalMs"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"sampleIntervalMs must be a number, got {value!r}"[:200])
            self.sampler.interval_ms = max(MIN_INTERVAL_MS, int(value))
            self.sampler.wake()
        if "provenance" in config:
            value = config["provenance"]
            if type(value) is not bool:
                raise ValueError(f"provenance must be true or false, got {value!r}"[:200])
            self.inventory.recorder.want(value)
            self.update_recording()

    # ---- messaging

    def broadcast(self, payload):
        """Send ``payload`` to every open comm; a comm that fails is dropped."""
        self.transport.broadcast(payload)

    def error(self, where, exc):
        """Report an exception (or a message str) as an ``error`` message, once per comm."""
        self.transport.error(where, exc)

    def on_comm_open(self, comm, msg):
        """Comm target: remember the comm, apply its ``configure`` data, answer ``hello`` and
        ``inventory``."""
        guard.guarded(lambda: self._open(comm, msg), self._comm_error)

    def _open(self, comm, msg):
        self.transport.note_parent(self.kernel)
        comm.on_msg(self.on_comm_msg)
        comm.on_close(self.on_comm_close)
        # Holding the send lock until the inventory is sent keeps the sampler's first
        # sample behind it (the inventory's /proc reads release the GIL).
        with self.transport.send_lock:
            self._answer_open(comm, msg)
        self.sampler.wake()

    def _answer_open(self, comm, msg):
        self.transport.send(comm, self.hello())
        # Only now does the sampler see the comm: hello is always its first message.
        self.transport.add(comm)
        self.gpu_processes.force = True  # the new comm gets the list at the next read
        self.quiet.forget()  # and a sample, whatever it says
        data = msg.get("content", {}).get("data") or {}
        try:
            check_message(data)
            if data.get("type") == "configure":
                self.configure(data)
        except Exception as exc:
            self.error("comm", exc)
        self.transport.flush(_package._install_errors)
        self.ensure_tracking()
        message = self.build_inventory(None)
        if message is not None:
            self.transport.send(comm, message)
        self._remember_wrappers()

    def on_comm_msg(self, msg):
        """Handle ``configure`` and ``inventory`` requests from the browser (an interrupt
        while it runs only stops it: no cell waits for it)."""
        guard.guarded(lambda: self._comm_msg(msg), self._comm_error)

    def _comm_msg(self, msg):
        content = msg.get("content", {})
        data = content.get("data") or {}
        check_message(data)
        kind = data.get("type")
        if kind == "configure":
            self.configure(data)
        elif kind == "sample":
            self._answer_sample(self.comms.get(content.get("comm_id")))
        elif kind == "inventory":
            self.ensure_tracking()
            message = self.build_inventory(None)
            comm = self.comms.get(content.get("comm_id"))
            if message is not None and comm is not None:
                self.transport.send(comm, message)
        else:
            raise ValueError(f"unknown message type {kind!r}"[:200])

    def _answer_sample(self, comm):
        """A user asked for fresh figures (the page opened the gauge's popup or the panel where
        the server cannot read this kernel's GPU): a ``sample`` and a ``gpuProcesses`` now, on
        the comm that asked."""
        if comm is None:
            return
        payload = self.sample()
        self.transport.send(comm, payload)
        if self.devices.nvml is not None:
            self.gpu_processes.force = True
            listed = self.gpu_processes.poll(self.devices, self._nvml_error)
            if listed is not None:
                self.transport.send(comm, listed)

    def on_comm_close(self, msg):
        """Forget a comm the browser closed."""
        guard.guarded(
            lambda: self.transport.forget(msg.get("content", {}).get("comm_id")), self._comm_error
        )

    def hello(self):
        """The ``hello`` message (dict)."""
        torch = torch_module()
        version = None
        if torch is not None:
            version = getattr(torch, "__version__", None)
            version = str(version) if version is not None else None
        return {
            "protocol": PROTOCOL,
            "type": "hello",
            "agentVersion": AGENT_VERSION,
            "python": sys.version.split()[0],
            "pid": self.pid,
            "torch": version,
            "nvml": self.devices.nvml is not None,
            "nvmlError": self.devices.nvml_error,
            "devices": self.devices.describe(),
            "limits": degrade.current(),
        }

    # ---- IPython hooks

    def pre_run_cell(self, info=None):
        """``pre_run_cell``: busy; snapshot models before a clean cell. Not for a probe
        without history (``user_cell``). The user's interrupt meanwhile cancels the snapshot
        only (``guard``: a hook cannot keep the cell from running)."""
        guard.guarded(lambda: self._pre_run_cell(info), self._clean_error)

    def _pre_run_cell(self, info):
        if not user_cell(info):
            return
        self.transport.note_parent(self.kernel)
        self.progress.cell_started(threading.get_ident(), time.time())
        self.busy = True
        self.sampler.wake()
        self.update_recording()
        cell_id = getattr(info, "cell_id", None)  # ipykernel >= 6.? with a notebook front end
        self.cell_id = cell_id if type(cell_id) is str else None
        raw = getattr(info, "raw_cell", None)
        self.clean_snapshot = None
        if isinstance(raw, str) and CLEAN_MARKER in raw and self.comms:
            self.ensure_tracking()
            tops = self.inventory.forests.forest().tops
            with inventory.no_torch_function():  # a tensor subclass's Python never runs
                self.clean_snapshot = clean.snapshot(tops, self._clean_error)
            del tops

    def post_run_cell(self, result=None):
        """``post_run_cell``: idle; send ``inventory`` (and ``cleaned`` after a clean cell).
        Not for a probe without history (``user_cell``). Never raises; the user's interrupt
        meanwhile stops the inventory and is passed on to the cell (``interrupt_cell``)."""
        if guard.guarded(lambda: self._post_run_cell(result), self._inventory_error):
            guard.guarded(lambda: interrupt_cell(self.shell, result), self._inventory_error)

    def _post_run_cell(self, result):
        if not user_cell(getattr(result, "info", None)):
            return
        self.busy = False
        self.gpu_processes.force = True  # a fresh list of the GPU's processes after each cell
        self.quiet.forget()  # and the sample that says the cell ended
        try:
            self._after_cell(result)
        finally:
            # the idle sample after the cell's messages: woken earlier, the sampler thread
            # takes the GIL from the inventory being built (about 1 ms of the hook's wall time
            # at 2e6 objects x 10 models, bench/bench.py)
            self.sampler.wake()

    def _after_cell(self, result):
        snapshot, self.clean_snapshot = self.clean_snapshot, None
        self.update_recording()  # the cell may have been the first to use CUDA
        count = getattr(result, "execution_count", None)
        count = count if isinstance(count, int) and not isinstance(count, bool) else None
        self.inventory.recorder.note_cell(self.shell, count, self.cell_id)
        if not self.comms:
            return
        self.ensure_tracking()
        raw = getattr(getattr(result, "info", None), "raw_cell", None)
        message = self.build_inventory(
            count, reuse=snapshot is None, source=raw if type(raw) is str else None
        )
        if message is not None:
            self.broadcast(message)
            if not message.get("skipped"):
                # the same models as the last full inventory otherwise (same fingerprint)
                self._remember_wrappers()
        error = vars_of(result).get("error_in_exec") if result is not None else None
        if message is not None and oom.is_cuda_oom(error):
            try:
                self.broadcast(oom.oom_message(error, count, message, self.devices, self.pid))
            except Exception as exc:
                self.error("inventory", exc)
        if snapshot is not None:
            try:
                self.broadcast(self._cleaned(snapshot, count))
            except Exception as exc:
                self.error("clean", exc)

    def _cleaned(self, snapshot, count):
        tops = self.inventory.forests.forest().tops
        with inventory.no_torch_function():
            after = clean.models_left(tops)
        del tops
        return clean.cleaned(snapshot, after, count)

    def _remember_wrappers(self):
        """Give the progress reader the Ultralytics wrappers among the top-level models (the
        forest the inventory just used, cached)."""
        try:
            if self.tracker.active or self.tracker.rescan_each_time:
                tops = self.inventory.forests.forest().tops
                self.progress.remember([module for module, _order in tops])
                del tops
        except Exception as exc:
            self.error("inventory", exc)

    def update_recording(self):
        """Start or stop recording allocation stacks as configured (``provenance``); the
        cell it starts before is the shell's current execution count."""
        count = getattr(self.shell, "execution_count", None)
        count = count if type(count) is int else None
        self.inventory.recorder.update(torch_module(), count)

    def ensure_tracking(self):
        """Start module tracking once torch has been imported (by the user)."""
        try:
            if self.tracker.active and not self.tracker.rescan_each_time:
                return
            torch = torch_module()
            if torch is None:
                return
            if self.tracker.rescan_each_time:
                self.tracker.rescan(torch)  # bounded (the ``models`` limit)
            else:
                self.tracker.start(torch)
        except Exception as exc:
            self.error("inventory", exc)

    # ---- samples and inventories

    def _tick(self):
        """One turn of the sampler thread: a ``sample`` to every open comm while a cell runs;
        between cells only the first one and those whose own figures moved (``quiet``: an idle
        kernel sends nothing, so idle cullers see it idle)."""
        if self.comms:
            try:
                payload = self.sample()
            except Exception as exc:
                self.error("sample", exc)
                return
            if not self.quiet.wants(payload):
                self.quiet.skipped += 1
                return
            self.broadcast(payload)
            self.quiet.sent(payload)

    def _reading(self):
        """Whether the sampler thread reads allocated between samples: while a user cell runs,
        a comm listens and torch holds memory on a device (at the last sample)."""
        return self.busy and bool(self.comms) and self.devices.reads_wanted()

    def _slow_tick(self):
        """The sampler thread's slower turn (every 2 s): ``gpuProcesses`` to every open comm
        while a cell runs, when the list changed or 10 s passed; between cells only once after
        each cell and for a new comm (``force``): the other processes' memory moves without
        this kernel, and the server extension reads it. False when there was nothing to do
        (no comm, no NVML), so that it runs again at the next tick."""
        if not self.comms or self.devices.nvml is None:
            return False
        if not self.busy and not self.gpu_processes.force:
            return True
        try:
            payload = self.gpu_processes.poll(self.devices, self._nvml_error)
        except Exception as exc:
            self.error("nvml", exc)
        else:
            if payload is not None:
                self.broadcast(payload)
        return True

    def sample(self):
        """The ``sample`` message (dict): NVML and torch allocator figures, in bytes, and
        while a cell trains an Ultralytics model its ``progress`` (``progress.ProgressReader``:
        read first, before NVML's calls release the GIL)."""
        t = time.time()
        busy = bool(self.busy)
        progress = self.progress.read() if busy else None
        message = {
            "protocol": PROTOCOL,
            "type": "sample",
            "t": t,
            "seq": next(self.sample_seq),
            "busy": busy,
            "devices": self.devices.sample(self._nvml_error),
            "ram": self.ram.fact(),
        }
        kids = children.direct_children(self.pid)
        if kids is not None:
            message["children"] = kids
        if progress is not None:
            message["progress"] = progress
        return message

    def build_inventory(self, execution_count, reuse=False, source=None):
        """The ``inventory`` message (dict), or None (an ``error`` was sent): see
        ``inventory.Inventory.build`` (``source``: the cell's text)."""
        return self.inventory.build(execution_count, reuse, source)

    def _nvml_pids(self):
        return children.nvml_pids(self.devices, self.pid)

    def _nvml_error(self, exc):
        self.error("nvml", exc)

    def _inventory_error(self, exc):
        self.error("inventory", exc)

    def _clean_error(self, exc):
        self.error("clean", exc)

    def _comm_error(self, exc):
        self.error("comm", exc)
