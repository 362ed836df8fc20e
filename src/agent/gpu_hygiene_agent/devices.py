"""Device memory figures: NVML (``pynvml``, only if importable) and torch's caching allocator
(only if torch is already imported and CUDA already initialised). Nothing here creates a CUDA
context: NVML does not, and torch is only asked once it has one."""

import contextlib
import os
import re
from typing import NamedTuple

from .util import cuda_initialized, describe, torch_module


class Device(NamedTuple):
    """A CUDA device NVML sees."""

    index: int  # CUDA index (cuda:<index>), CUDA_VISIBLE_DEVICES applied
    handle: object  # NVML handle
    name: str
    total: int  # bytes
    uuid: object  # str or None
    nvml_index: int  # what nvidia-smi numbers


class ProcessUse(NamedTuple):
    pid: int
    used: object  # bytes, or None where NVML does not say


class DeviceProcesses(NamedTuple):
    """One device's memory and compute processes, from NVML."""

    free: int  # bytes
    total: int  # bytes
    processes: list  # [ProcessUse]


class AllocatorMemory(NamedTuple):
    """torch's caching allocator on one device (bytes)."""

    allocated: int
    reserved: int


def cuda_visible_nvml_indices(env_value, nvml_uuids):
    """Map CUDA device indices to NVML device indices, following ``CUDA_VISIBLE_DEVICES``.

    ``env_value``: the variable's value (str) or None when unset. ``nvml_uuids``: list of the
    NVML devices' UUID strings, by NVML index (length = NVML device count).
    Returns a list of NVML indices; position ``i`` is CUDA device ``i``. Entries are integer
    indices or UUIDs (``GPU-...``, a unique prefix is enough); like CUDA, the list ends at the
    first entry that is invalid, unknown or repeated. NVML and CUDA are assumed to enumerate
    devices in the same (PCI bus) order, which is CUDA's order with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and in practice on single-model machines.
    """
    count = len(nvml_uuids)
    if env_value is None:
        return list(range(count))
    result = []
    for token in env_value.split(","):
        token = token.strip()
        if not token:
            break
        if re.fullmatch(r"[+-]?\d+", token):
            index = int(token)
            if index < 0 or index >= count:
                break
        else:
            wanted = token if token.upper().startswith(("GPU-", "MIG-")) else "GPU-" + token
            matches = [i for i, uuid in enumerate(nvml_uuids) if uuid and uuid.startswith(wanted)]
            if len(matches) != 1:
                break
            index = matches[0]
        if index in result:
            break
        result.append(index)
    return result


def torch_memory():
    """{device: AllocatorMemory} when CUDA is initialised, else None."""
    torch = torch_module()
    if not cuda_initialized(torch):
        return None
    out = {}
    for index in range(torch.cuda.device_count()):
        out[f"cuda:{index}"] = AllocatorMemory(
            int(torch.cuda.memory_allocated(index)),
            int(torch.cuda.memory_reserved(index)),
        )
    return out


def _text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _empty_entry(index, total):
    return {
        "index": index,
        "used": None,
        "total": total,
        "process": None,
        "allocated": None,
        "reserved": None,
    }


class DeviceSampler:
    """Device memory figures from NVML and from torch's caching allocator.

    ``devices``: [Device] for the CUDA devices NVML sees, in ``CUDA_VISIBLE_DEVICES`` order.
    ``nvml``: the pynvml module when initialised, else None, and then ``nvml_error`` (str)
    says why.
    """

    def __init__(self, pid=None):
        self.pid = os.getpid() if pid is None else pid
        self.nvml = None
        self.nvml_error = None
        self.devices = []
        self._memory_v2 = True

    def start(self):
        """Initialise NVML and list the devices; failures end up in ``nvml_error``."""
        try:
            import pynvml  # nvidia-ml-py, only when the kernel's environment has it
        except Exception as exc:
            self.nvml_error = "nvidia-ml-py (pynvml) not importable: " + describe(exc)
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self.nvml_error = "NVML initialisation failed: " + describe(exc)
            return
        try:
            self.devices = self._list(pynvml)
            self.nvml = pynvml
        except Exception as exc:
            self.nvml_error = "NVML device query failed: " + describe(exc)
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
                uuids.append(_text(pynvml.nvmlDeviceGetUUID(handle)))
            except Exception:
                uuids.append(None)
        order = cuda_visible_nvml_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), uuids)
        devices = []
        for cuda_index, nvml_index in enumerate(order):
            handle = handles[nvml_index]
            name = _text(pynvml.nvmlDeviceGetName(handle))
            total = int(self._memory(pynvml, handle).total)
            devices.append(Device(cuda_index, handle, name, total, uuids[nvml_index], nvml_index))
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

    def processes(self, cuda_index):
        """``DeviceProcesses`` of one device from NVML, or None without NVML or for an unknown
        index."""
        nvml = self.nvml
        for device in self.devices:
            if device.index != cuda_index or nvml is None:
                continue
            try:
                mem = self._memory(nvml, device.handle)
                procs = [
                    ProcessUse(
                        int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)
                    )
                    for p in nvml.nvmlDeviceGetComputeRunningProcesses(device.handle)
                ]
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

    def sample(self, on_error=None):
        """Per-device figures for ``sample`` (list of dicts sorted by CUDA index): ``used`` /
        ``total`` device memory and ``process`` (this pid's share) from NVML, ``allocated`` /
        ``reserved`` from torch, ``cached`` (reserved - allocated) and ``nonTorch`` (process -
        reserved); bytes, None where not measurable. ``processHidden``: NVML lists no process
        with this pid although torch reserves memory (another pid namespace). NVML failures are
        passed to ``on_error(exception)``."""
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
                entry["allocated"] = int(torch.cuda.memory_allocated(index))
                entry["reserved"] = int(torch.cuda.memory_reserved(index))
                # On the device (memory reserved) but NVML did not list our pid: another pid
                # namespace (containers). Unknown rather than 0.
                if entry["process"] == 0 and entry["reserved"] > 0:
                    entry["process"] = None
                    entry["processHidden"] = True
        for entry in devices.values():
            allocated, reserved, process = entry["allocated"], entry["reserved"], entry["process"]
            entry["cached"] = reserved - allocated if reserved is not None else None
            # the part of this process's usage PyTorch does not hold: CUDA context, cuBLAS /
            # cuDNN workspaces and modules, other allocators
            both = process is not None and reserved is not None
            entry["nonTorch"] = max(0, process - reserved) if both else None
            entry.setdefault("processHidden", False)
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
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(device.handle):
                if proc.pid == self.pid:
                    used = getattr(proc, "usedGpuMemory", None)
                    if used is None:
                        unknown = True
                    else:
                        mine += int(used)
            entry["process"] = None if unknown else mine
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
        return entry
