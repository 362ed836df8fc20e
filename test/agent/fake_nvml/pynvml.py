"""A fake ``pynvml`` (nvidia-ml-py) for the agent tests: this machine has no GPU, so only NVML is
mocked here; everything else the agent reads (``/proc``, the kernel, IPython) is real.

The kernel tests put this folder first on the kernel's ``PYTHONPATH`` and describe the devices
in a JSON file named by ``FAKE_NVML_CONFIG``; the file is re-read whenever it changes (write a
new file and ``os.replace`` it), so a test changes the process list while the kernel runs. The
in-process tests load this file under another name and call ``set_config`` instead.

```
{"devices": [{"name": str, "uuid": str, "total": int, "used": int,
              "compute": [Process], "graphics": [Process],
              "migMode": 0 | 1,                  # nvmlDeviceGetMigMode's current mode
              "mig": [{"name", "uuid", "total", "used", "compute", "graphics"}],
              "graphicsError": int | null,       # NVML error code of the graphics list
              "utilization": int,                # GPU-Util %; absent: NOT_SUPPORTED
              "processUtilization": [{"pid": int | "self", "sm": int}]}],   # absent: NOT_FOUND
 "delayUs": {"memory": float, "processes": float,   # busy-wait per call (cost emulation)
             "utilization": float}}
Process = {"pid": int | "self", "used": int | null}  # "self": os.getpid() of the caller
```

``nvmlDeviceGetProcessUtilization`` stamps each listed sample with the time of the call (us) and
answers NOT_FOUND when none is newer than the timestamp it is given, as NVML does.

Only what the agent calls exists. ``CALLS`` counts the calls by function name.
"""

import collections
import json
import os
import time

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_DEVICE_MIG_ENABLE = 1
nvmlMemory_v2 = 0x02000028

CALLS = collections.Counter()
_state = {"stamp": None, "config": {"devices": []}}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


class _Handle:
    def __init__(self, path):
        self.path = path  # (device index,) or (device index, mig index)


class _Memory:
    def __init__(self, total, used):
        self.total = total
        self.used = used
        self.free = total - used


class _Utilization:
    def __init__(self, gpu):
        self.gpu = gpu
        self.memory = 0


class _ProcessUtilization:
    def __init__(self, pid, stamp, sm):
        self.pid = pid
        self.timeStamp = stamp
        self.smUtil = sm
        self.memUtil = 0
        self.encUtil = 0
        self.decUtil = 0


class _Process:
    def __init__(self, pid, used):
        self.pid = pid
        self.usedGpuMemory = used
        self.gpuInstanceId = 0xFFFFFFFF
        self.computeInstanceId = 0xFFFFFFFF


def set_config(config):
    """Use ``config`` (the dict the JSON file would hold) from now on, without a file."""
    _state["config"] = config
    _state["stamp"] = None


def _config():
    path = os.environ.get("FAKE_NVML_CONFIG")
    if not path:
        return _state["config"]
    try:
        st = os.stat(path)
    except OSError:
        return _state["config"]
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    if stamp != _state["stamp"]:
        with open(path) as f:
            _state["config"] = json.load(f)
        _state["stamp"] = stamp
    return _state["config"]


def _spin(kind):
    delay = _config().get("delayUs", {}).get(kind)
    if delay:
        end = time.perf_counter() + delay / 1e6
        while time.perf_counter() < end:
            pass


def _entry(handle):
    devices = _config()["devices"]
    try:
        entry = devices[handle.path[0]]
        if len(handle.path) == 2:
            entry = entry["mig"][handle.path[1]]
    except (IndexError, KeyError, TypeError, AttributeError):
        raise NVMLError(NVML_ERROR_NOT_FOUND) from None
    return entry


def _processes(entry, kind):
    out = []
    for p in entry.get(kind, ()):
        pid = os.getpid() if p["pid"] == "self" else int(p["pid"])
        out.append(_Process(pid, p.get("used")))
    return out


def nvmlInit():
    CALLS["nvmlInit"] += 1
    _config()


def nvmlShutdown():
    CALLS["nvmlShutdown"] += 1


def nvmlDeviceGetCount():
    CALLS["nvmlDeviceGetCount"] += 1
    return len(_config()["devices"])


def nvmlDeviceGetHandleByIndex(index):
    CALLS["nvmlDeviceGetHandleByIndex"] += 1
    if not 0 <= index < len(_config()["devices"]):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _Handle((index,))


def nvmlDeviceGetUUID(handle):
    CALLS["nvmlDeviceGetUUID"] += 1
    return _entry(handle)["uuid"]


def nvmlDeviceGetName(handle):
    CALLS["nvmlDeviceGetName"] += 1
    return _entry(handle)["name"]


def nvmlDeviceGetMemoryInfo(handle, version=None):
    CALLS["nvmlDeviceGetMemoryInfo"] += 1
    _spin("memory")
    entry = _entry(handle)
    return _Memory(int(entry["total"]), int(entry.get("used", 0)))


def nvmlDeviceGetComputeRunningProcesses(handle):
    CALLS["nvmlDeviceGetComputeRunningProcesses"] += 1
    _spin("processes")
    return _processes(_entry(handle), "compute")


def nvmlDeviceGetGraphicsRunningProcesses(handle):
    CALLS["nvmlDeviceGetGraphicsRunningProcesses"] += 1
    _spin("processes")
    entry = _entry(handle)
    if entry.get("graphicsError") is not None:
        raise NVMLError(entry["graphicsError"])
    return _processes(entry, "graphics")


def nvmlDeviceGetUtilizationRates(handle):
    CALLS["nvmlDeviceGetUtilizationRates"] += 1
    _spin("utilization")
    entry = _entry(handle)
    if "utilization" not in entry:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return _Utilization(int(entry["utilization"]))


def nvmlDeviceGetProcessUtilization(handle, timeStamp):
    CALLS["nvmlDeviceGetProcessUtilization"] += 1
    _spin("utilization")
    stamp = time.time_ns() // 1000
    samples = [
        _ProcessUtilization(os.getpid() if p["pid"] == "self" else int(p["pid"]), stamp, p["sm"])
        for p in _entry(handle).get("processUtilization", ())
    ]
    if not samples or stamp <= timeStamp:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return samples


def nvmlDeviceGetMigMode(handle):
    CALLS["nvmlDeviceGetMigMode"] += 1
    entry = _entry(handle)
    if "migMode" not in entry:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [entry["migMode"], entry["migMode"]]


def nvmlDeviceGetMaxMigDeviceCount(handle):
    CALLS["nvmlDeviceGetMaxMigDeviceCount"] += 1
    return 7 if _entry(handle).get("migMode") else 0


def nvmlDeviceGetMigDeviceHandleByIndex(handle, index):
    CALLS["nvmlDeviceGetMigDeviceHandleByIndex"] += 1
    entry = _entry(handle)
    if not 0 <= index < len(entry.get("mig", ())):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _Handle((handle.path[0], index))
