"""CUDA out-of-memory errors: telling them apart, reading the figures of their message, and
the ``oom`` message that says what held the memory when one happened."""

import contextlib
import re
import sys

from . import devices, peek
from .limits import MAX_MODELS, PROTOCOL
from .util import cuda_initialized, describe, short, torch_module

_UNITS = {"b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE = r"(\d+(?:\.\d+)?)\s*(bytes|[KMGT]i?B|B)"


def _size(number, unit):
    """Bytes (int) of e.g. ("20.00", "MiB"); torch prints binary units, "GB" is read as GiB."""
    unit = unit.lower()
    if len(unit) == 2:  # "GB": binary, as torch means it
        unit = unit[0] + "ib"
    return int(float(number) * _UNITS.get(unit, 1))


def parse_oom_message(text):
    """Figures in a CUDA out-of-memory message (dict of int or None): ``requested`` ("Tried
    to allocate 20.00 MiB"), ``gpu`` (the CUDA index in "GPU 0"), ``total`` and ``free``
    (torch >= 2.1: "GPU 0 has a total capacity of 79.19 GiB of which 3.19 MiB is free";
    1.x: "(GPU 0; 15.78 GiB total capacity; ...; 3.19 MiB free; ...)"). Lenient: what is
    missing is None."""
    out = {"requested": None, "gpu": None, "total": None, "free": None}
    if not isinstance(text, str):
        return out
    match = re.search(r"Tried to allocate " + _SIZE, text)
    if match:
        out["requested"] = _size(*match.groups())
    match = re.search(r"GPU (\d+)", text)
    if match:
        out["gpu"] = int(match.group(1))
    match = re.search(r"total capacity of " + _SIZE + r" of which " + _SIZE + " is free", text)
    if match:
        out["total"] = _size(*match.group(1, 2))
        out["free"] = _size(*match.group(3, 4))
    else:
        total = re.search(_SIZE + r" total capacity", text)
        free = re.search(_SIZE + r" free", text)
        if total:
            out["total"] = _size(*total.groups())
        if free:
            out["free"] = _size(*free.groups())
    return out


def is_cuda_oom(exc):
    """Whether ``exc`` is a CUDA out-of-memory error: ``torch.OutOfMemoryError`` (by class
    name, torch is not imported here) or a message with "CUDA" and "out of memory"."""
    if not peek.is_a(exc, BaseException):
        return False
    if any(peek.type_name(cls) == "OutOfMemoryError" for cls in peek.mro(type(exc))):
        return True
    text = peek.exc_message(exc)  # None: only the exception's own code could give it
    return text is not None and "out of memory" in text and "CUDA" in text


def _device_index(parsed, torch, sampler):
    index = parsed["gpu"]
    if index is None and cuda_initialized(torch):
        with contextlib.suppress(Exception):
            index = int(torch.cuda.current_device())
    if index is None and sampler.devices:
        index = sampler.devices[0].index
    return index


def _stale_models(inventory, on_device):
    stale = []
    for model in inventory.get("models", ()):
        if model.get("stale"):
            nbytes = on_device(model["bytes"]) + sum(
                on_device(p["bytes"]) for p in model.get("parts", ())
            )
            stale.append({"id": model["id"], "label": model["label"], "bytes": nbytes})
    return stale


def oom_message(exc, execution_count, inventory, sampler, pid):
    """The ``oom`` message (dict) for a cell that failed with a CUDA out-of-memory error:
    figures parsed from the message, NVML (``sampler``: devices.DeviceSampler) and torch now,
    and what the inventory says holds memory on that device."""
    text = describe(exc)
    kind = peek.type_name(type(exc))
    message = text[len(kind) + 2 :] if text.startswith(kind + ": ") else text
    full = peek.exc_message(exc)
    if full is None:
        full = message
    parsed = parse_oom_message(full)
    torch = torch_module()
    index = _device_index(parsed, torch, sampler)
    device = f"cuda:{index}" if index is not None else None
    nvml = sampler.processes(index) if index is not None else None
    process = None
    others = []
    free = parsed["free"]
    total = parsed["total"]
    if nvml is not None:
        free = nvml.free if free is None else free
        total = nvml.total if total is None else total
        for pid_, used in nvml.processes:
            if pid_ == pid:
                process = (process or 0) + used if used is not None else process
            else:
                others.append({"pid": pid_, "used": used})
    memory = devices.torch_memory() or {}
    allocated, reserved = memory.get(device, (None, None))

    def on_device(by_device):
        return int(by_device.get(device, 0)) if device is not None else 0

    last_error = inventory.get("lastError")
    ultralytics = sys.modules.get("ultralytics")
    version = getattr(ultralytics, "__version__", None) if ultralytics else None
    torch_version = getattr(torch, "__version__", None) if torch is not None else None
    return {
        "protocol": PROTOCOL,
        "type": "oom",
        "executionCount": execution_count,
        "errorType": short(kind),
        "message": short(message),
        "device": device,
        "requested": parsed["requested"],
        "free": free,
        "total": total,
        "process": process,
        "processes": others[:64],
        "allocated": allocated,
        "reserved": reserved,
        "stale": _stale_models(inventory, on_device)[:MAX_MODELS],
        "traceback": on_device(last_error["bytes"]) if last_error else 0,
        "graphs": sum(on_device(g["bytes"]) for g in inventory.get("graphs", ())),
        "torch": short(str(torch_version), 64) if torch_version is not None else None,
        "ultralytics": short(str(version), 64) if version is not None else None,
    }
