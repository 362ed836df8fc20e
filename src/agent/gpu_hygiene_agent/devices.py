"""Device memory figures: NVML (``pynvml``, only if importable) and torch's caching allocator
(only if torch is already imported and CUDA already initialised). Nothing here creates a CUDA
context: NVML does not, and torch is only asked once it has one.

MIG: a GPU in MIG mode is read through its MIG device handles (what NVML answers without
privileges), and a ``MIG-<uuid>`` entry of ``CUDA_VISIBLE_DEVICES`` is its own device."""

import contextlib
import os
import time
from typing import NamedTuple

from .util import cuda_initialized, describe, torch_module
from .visible import cuda_visible_targets, mig_instances, nvml_text


class Device(NamedTuple):
    """A CUDA device NVML sees."""

    index: int  # CUDA index (cuda:<index>), CUDA_VISIBLE_DEVICES applied
    handle: object  # NVML handle
    name: str
    total: int  # bytes
    uuid: object  # str or None
    nvml_index: int  # what nvidia-smi numbers (a MIG instance: its GPU's)
    mig: bool = False  # a MIG instance: ``handle`` is its MIG device handle
    # a whole GPU in MIG mode: its MIG instances' handles, whose process lists are read (the
    # GPU's own handle lists processes only for privileged callers)
    mig_handles: tuple = ()


class ProcessUse(NamedTuple):
    pid: int
    used: object  # bytes, or None where NVML does not say


class ProcessLists(NamedTuple):
    """One device's NVML process lists (``gpuProcesses``)."""

    index: int  # CUDA index
    compute: list  # [ProcessUse]
    graphics: list  # [ProcessUse]; [] where the driver does not list graphics processes


class _Listed(NamedTuple):
    """The compute processes read last for one device, and the device's used bytes then."""

    used: int  # NVML device memory used when the list was read
    processes: list  # [ProcessUse]
    at: float  # time.monotonic() of the read


# A sample re-reads the compute-process list (for this kernel's own usage) only when the
# device's used memory moved since the last read, or the list is this old (s): NVML answers
# memory in ~7 us and a process list in ~36 us (H200). The ``gpuProcesses`` read, every 2 s,
# takes a list read this recently (s) instead of reading it again.
LIST_MAX_AGE = 2.0
LIST_REUSE_AGE = 0.5
NVML_ERROR_NOT_SUPPORTED = 3
# nvmlDeviceGetProcessUtilization (this kernel's SM share) at most this often per device, s
SHARE_READ_S = 5.0
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13


class DeviceProcesses(NamedTuple):
    """One device's memory and compute processes, from NVML."""

    free: int  # bytes
    total: int  # bytes
    processes: list  # [ProcessUse]


class AllocatorMemory(NamedTuple):
    """torch's caching allocator on one device (bytes)."""

    allocated: int
    reserved: int


def torch_memory():
    """{device: AllocatorMemory} when CUDA is initialised, else None."""
    torch = torch_module()
    if not cuda_initialized(torch):
        return None
    out = {}
    for index in range(torch.cuda.device_count()):
        out[f"cuda:{index}"] = AllocatorMemory(*allocated_reserved(torch, index))
    return out


def allocated_reserved(torch, index):
    """torch's (allocated, reserved) bytes on device ``index`` (ints), from one read of the
    nested statistics dict: ``memory_allocated`` and ``memory_reserved`` each flatten the whole
    ``memory_stats`` dict in Python first (two of them cost ~10x this on the H200). Falls back
    to them where that dict is missing or shaped otherwise."""
    try:
        stats = torch.cuda.memory_stats_as_nested_dict(index)
        return (
            int(stats["allocated_bytes"]["all"]["current"]),
            int(stats["reserved_bytes"]["all"]["current"]),
        )
    except Exception:
        return int(torch.cuda.memory_allocated(index)), int(torch.cuda.memory_reserved(index))


def allocated_now(torch, index):
    """torch's allocated bytes on device ``index`` (int): from the nested statistics dict, which
    skips the flattening ``memory_allocated`` does (the agent reads it every ~20 ms while a cell
    runs); ``memory_allocated`` where that dict is missing or shaped otherwise."""
    try:
        stats = torch.cuda.memory_stats_as_nested_dict(index)
        return int(stats["allocated_bytes"]["all"]["current"])
    except Exception:
        return int(torch.cuda.memory_allocated(index))


def allocator_limit(torch, index, totals=None):
    """The caching allocator's cap on device ``index`` in bytes (int), or None when no cap is
    set (fraction 1.0) or torch cannot say (older torch without
    ``get_per_process_memory_fraction``, or an error). The cap is the fraction
    (``torch.cuda.set_per_process_memory_fraction``) times the device's total memory as torch
    knows it (``get_device_properties(index).total_memory``, kept in ``totals``, a dict, when
    given). Only call with CUDA initialised (both calls would initialise it otherwise)."""
    try:
        fraction = float(torch.cuda.get_per_process_memory_fraction(index))
        if not 0 <= fraction < 1:
            return None
        total = totals.get(index) if totals is not None else None
        if total is None:
            total = int(torch.cuda.get_device_properties(index).total_memory)
            if totals is not None:
                totals[index] = total
        return int(fraction * total)
    except Exception:
        return None


def _empty_entry(index, total):
    return {
        "index": index,
        "used": None,
        "total": total,
        "process": None,
        "allocated": None,
        "reserved": None,
        "allocatedMin": None,
        "limit": None,
        "utilization": None,
        "processUtilization": None,
    }


class DeviceSampler:
    """Device memory figures from NVML and from torch's caching allocator.

    ``devices``: [Device] for the CUDA devices NVML sees, in ``CUDA_VISIBLE_DEVICES`` order.
    ``nvml``: the pynvml module when initialised, else None, and then ``nvml_error`` (str)
    says why. ``hidden``: {CUDA index: bool}, the last sample's ``processHidden``.

    ``sample`` and ``process_lists`` run in the sampler thread; ``processes`` (for an
    inventory or an ``oom`` message) reads NVML afresh and shares nothing with them.
    """

    def __init__(self, pid=None):
        self.pid = os.getpid() if pid is None else pid
        self.nvml = None
        self.nvml_error = None
        self.devices = []
        self.hidden = {}
        self._memory_v2 = True
        self._listed = {}  # CUDA index -> _Listed: the last compute-process list read
        self._no_graphics = set()  # CUDA indices whose driver lists no graphics processes
        self._no_utilization = set()  # CUDA indices whose driver gives no utilisation (MIG)
        self._utilization_seen = {}  # CUDA index -> NVML timestamp (us) of the last sample read
        # CUDA index -> (monotonic s of the last process-utilisation read, its share or None)
        self._share_read = {}
        self._lows = {}  # CUDA index -> lowest allocated read since the last sample (read_low)
        self._totals = {}  # CUDA index -> total memory as torch knows it (allocator_limit)
        self._active = []  # CUDA indices where torch reserved memory at the last sample

    def start(self):
        """Initialise NVML and list the devices; failures end up in ``nvml_error``."""
        try:
            import pynvml  # nvidia-ml-py, only when the kernel's environment has it
        except Exception as exc:
            self.nvml_error = "nvidia-ml-py (pynvml) not importable: " + describe(exc, library=True)
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self.nvml_error = "NVML initialisation failed: " + describe(exc, library=True)
            return
        try:
            self.devices = self._list(pynvml)
            self.nvml = pynvml
        except Exception as exc:
            self.nvml_error = "NVML device query failed: " + describe(exc, library=True)
            self.devices = []
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()

    def _list(self, pynvml):
        handles = []
        uuids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            handles.append(handle)
            try:
                uuids.append(nvml_text(pynvml.nvmlDeviceGetUUID(handle)))
            except Exception:
                uuids.append(None)
        migs = [mig_instances(pynvml, handle) for handle in handles]
        mig_uuids = [
            (i, slot, uuid) for i, found in enumerate(migs) for slot, (_h, uuid) in enumerate(found)
        ]
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        targets = cuda_visible_targets(env, uuids, mig_uuids)
        devices = []
        for cuda_index, (nvml_index, slot) in enumerate(targets):
            if slot is None:
                handle, uuid, mig = handles[nvml_index], uuids[nvml_index], False
                instances = tuple(h for h, _uuid in migs[nvml_index])
            else:
                (handle, uuid), mig, instances = migs[nvml_index][slot], True, ()
            name = nvml_text(pynvml.nvmlDeviceGetName(handle))
            total = int(self._memory(pynvml, handle).total)
            devices.append(
                Device(cuda_index, handle, name, total, uuid, nvml_index, mig, instances)
            )
        return devices

    def stop(self):
        """Release NVML (``nvmlShutdown`` balances ``nvmlInit``)."""
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None

    def _memory(self, nvml, handle):
        # v2 struct: "used" excludes driver-reserved memory, as nvidia-smi shows it
        if self._memory_v2:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
            except Exception:
                self._memory_v2 = False  # old nvidia-ml-py or driver: v1 from now on
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def _read(self, nvml, device, function):
        """A process list of ``device`` ([ProcessUse]) through ``function`` (an NVML
        ``nvmlDeviceGet...RunningProcesses``): a GPU in MIG mode through each instance's handle
        (a process on two instances is listed twice, with its bytes on each)."""
        out = []
        for handle in device.mig_handles or (device.handle,):
            for p in function(handle):
                used = getattr(p, "usedGpuMemory", None)
                out.append(ProcessUse(int(p.pid), None if used is None else int(used)))
        return out

    def _compute(self, nvml, device, used, max_age):
        """The compute processes of ``device`` ([ProcessUse]): the last list read when the
        device's ``used`` bytes are the same as then and it is younger than ``max_age`` (s),
        else read now (and kept)."""
        now = time.monotonic()
        last = self._listed.get(device.index)
        if last is not None and last.used == used and 0 <= now - last.at < max_age:
            return last.processes
        procs = self._read(nvml, device, nvml.nvmlDeviceGetComputeRunningProcesses)
        self._listed[device.index] = _Listed(used, procs, now)
        return procs

    def _graphics(self, nvml, device, on_error):
        """The graphics processes of ``device`` ([ProcessUse]); [] from now on where the driver
        or pynvml has no such list, [] after another failure (passed to ``on_error``)."""
        if device.index in self._no_graphics:
            return []
        try:
            return self._read(nvml, device, nvml.nvmlDeviceGetGraphicsRunningProcesses)
        except Exception as exc:
            code = getattr(exc, "value", None)
            if isinstance(exc, AttributeError) or code in (
                getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED),
                getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND),
            ):
                self._no_graphics.add(device.index)
            elif on_error is not None:
                on_error(exc)
            return []

    def process_lists(self, on_error=None):
        """[ProcessLists] of the devices (compute and graphics processes, NVML), for
        ``gpuProcesses``; a device whose compute list fails is left out and the failure
        passed to ``on_error(exception)``. [] without NVML. Sampler thread only: the compute
        list a sample read less than ``LIST_REUSE_AGE`` s ago (memory unchanged) is reused."""
        nvml = self.nvml
        out = []
        if nvml is None:
            return out
        for device in self.devices:
            try:
                used = int(self._memory(nvml, device.handle).used)
                compute = self._compute(nvml, device, used, LIST_REUSE_AGE)
            except Exception as exc:
                if on_error is not None:
                    on_error(exc)
                continue
            out.append(ProcessLists(device.index, compute, self._graphics(nvml, device, on_error)))
        return out

    def processes(self, cuda_index):
        """``DeviceProcesses`` of one device from NVML (read now), or None without NVML or for
        an unknown index."""
        nvml = self.nvml
        for device in self.devices:
            if device.index != cuda_index or nvml is None:
                continue
            try:
                mem = self._memory(nvml, device.handle)
                procs = self._read(nvml, device, nvml.nvmlDeviceGetComputeRunningProcesses)
                return DeviceProcesses(int(mem.free), int(mem.total), procs)
            except Exception:
                return None
        return None

    def describe(self):
        """Devices for ``hello``: [{index (CUDA), nvmlIndex, name, total (bytes), uuid}]."""
        return [
            {
                "index": d.index,
                "nvmlIndex": d.nvml_index,
                "name": d.name,
                "total": d.total,
                "uuid": d.uuid,
            }
            for d in self.devices
        ]

    def reads_wanted(self):
        """Whether ``read_low`` has a device to read (bool): torch reserved memory on one at the
        last sample. A kernel without CUDA (or before its first CUDA tensor) is not woken every
        20 ms for nothing."""
        return bool(self._active)

    def read_low(self):
        """Read torch's allocated bytes on each device and keep the lowest since the last
        ``sample`` (its ``allocatedMin``); nothing when CUDA is not initialised. Sampler thread
        only (every ~20 ms while a cell runs); only the devices where torch reserved memory at
        the last sample (reading one costs ~20-100 us); never raises."""
        torch = torch_module()
        if not cuda_initialized(torch):
            return
        try:
            for index in self._active:
                value = allocated_now(torch, index)
                low = self._lows.get(index)
                self._lows[index] = value if low is None else min(low, value)
        except Exception:
            pass

    def sample(self, on_error=None):
        """Per-device figures for ``sample`` (list of dicts sorted by CUDA index): ``used`` /
        ``total`` device memory and ``process`` (this pid's share) from NVML, ``allocated`` /
        ``reserved`` from torch, ``cached`` (reserved - allocated) and ``nonTorch`` (process -
        reserved); bytes, None where not measurable. ``utilization`` / ``processUtilization``:
        percent of the device's time, NVML (``_utilization``). ``allocatedMin``: the lowest
        allocated of this sample and the ``read_low`` reads since the previous sample;
        ``limit``: the allocator's cap (``allocator_limit``) on a device where torch reserves
        memory, else None. ``processHidden``: NVML lists no process with this pid although
        torch reserves memory (another pid namespace). NVML failures are passed to
        ``on_error(exception)``. The compute-process list is read again only when the device's
        used memory moved or the last read is ``LIST_MAX_AGE`` s old (sampler thread only)."""
        devices = {}
        if self.nvml is not None:
            for device in self.devices:
                devices[device.index] = self._nvml_entry(device, on_error)
        torch = torch_module()
        if cuda_initialized(torch):
            for index in range(torch.cuda.device_count()):
                entry = devices.get(index)
                if entry is None:
                    entry = devices[index] = _empty_entry(index, None)
                allocated, entry["reserved"] = allocated_reserved(torch, index)
                entry["allocated"] = allocated
                low = self._lows.get(index)
                entry["allocatedMin"] = allocated if low is None else min(low, allocated)
                # only where this process holds memory (the device has its context)
                if entry["reserved"] > 0:
                    entry["limit"] = allocator_limit(torch, index, self._totals)
                # On the device (memory reserved) but NVML did not list our pid: another pid
                # namespace (containers). Unknown rather than 0.
                if entry["process"] == 0 and entry["reserved"] > 0:
                    entry["process"] = None
                    entry["processHidden"] = True
                    # NVML's pids are of another namespace: "0 %" would be made up
                    entry["processUtilization"] = None
        for entry in devices.values():
            allocated, reserved, process = entry["allocated"], entry["reserved"], entry["process"]
            entry["cached"] = reserved - allocated if reserved is not None else None
            # the part of this process's usage PyTorch does not hold: CUDA context, cuBLAS /
            # cuDNN workspaces and modules, other allocators
            both = process is not None and reserved is not None
            entry["nonTorch"] = max(0, process - reserved) if both else None
            entry.setdefault("processHidden", False)
        self.hidden = {i: entry["processHidden"] for i, entry in devices.items()}
        self._lows = {}
        self._active = [i for i, e in sorted(devices.items()) if e["reserved"]]
        return [devices[i] for i in sorted(devices)]

    def _nvml_entry(self, device, on_error):
        """The NVML part of one device's ``sample`` entry (dict)."""
        nvml = self.nvml
        entry = _empty_entry(device.index, device.total)
        try:
            mem = self._memory(nvml, device.handle)
            entry["used"] = int(mem.used)
            entry["total"] = int(mem.total)
            mine = 0
            unknown = False
            for proc in self._compute(nvml, device, entry["used"], LIST_MAX_AGE):
                if proc.pid == self.pid:
                    if proc.used is None:
                        unknown = True
                    else:
                        mine += proc.used
            entry["process"] = None if unknown else mine
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
        if device.index not in self._no_utilization:
            self._utilization(nvml, device, entry, on_error)
        return entry

    def _utilization(self, nvml, device, entry, on_error):
        """``utilization``: the percent of the last sample period in which a kernel ran on
        the device (``nvmlDeviceGetUtilizationRates``, what nvidia-smi shows as GPU-Util);
        ``processUtilization``: this process's SM share since the previous read, the mean of
        the samples ``nvmlDeviceGetProcessUtilization`` keeps for this pid (0 where it has
        samples of other processes only; None where it has none at all, or where NVML's pids
        are of another namespace: ``sample`` sets it None with ``processHidden``; clamped to
        0..100). That call costs 1.4 to 2.4 ms on an H100 (bench/nvml_cost.py --real, against
        9 us for the memory figures): it is made at most every ``SHARE_READ_S`` seconds per
        device, and the samples in between carry the share of the last read. A driver without
        them (a MIG instance, an old GPU) is not asked again; another failure goes to
        ``on_error``."""
        unsupported = (
            getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED),
            getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND),
        )
        try:
            rate = int(nvml.nvmlDeviceGetUtilizationRates(device.handle).gpu)
            entry["utilization"] = min(100, max(0, rate))
        except Exception as exc:
            if isinstance(exc, AttributeError) or getattr(exc, "value", None) in unsupported:
                self._no_utilization.add(device.index)
            elif on_error is not None:
                on_error(exc)
            return
        now = time.monotonic()
        last = self._share_read.get(device.index)
        if last is not None and now - last[0] < SHARE_READ_S:
            if last[1] is not None:
                entry["processUtilization"] = last[1]
            return
        self._share_read[device.index] = (now, None)
        since = self._utilization_seen.get(device.index, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(device.handle, since)
        except Exception as exc:
            code = getattr(exc, "value", None)
            if code == getattr(nvml, "NVML_ERROR_NOT_FOUND", NVML_ERROR_NOT_FOUND):
                return  # no process sample since the last read: unknown, not 0
            if not (isinstance(exc, AttributeError) or code in unsupported) and on_error:
                on_error(exc)
            return
        mine = []
        latest = since
        for item in samples:
            stamp = int(item.timeStamp)
            if stamp > latest:
                latest = stamp
            if item.pid == self.pid and stamp > since:
                mine.append(int(item.smUtil))
        self._utilization_seen[device.index] = latest
        share = min(100, max(0, round(sum(mine) / len(mine)) if mine else 0))
        self._share_read[device.index] = (now, share)
        entry["processUtilization"] = share
