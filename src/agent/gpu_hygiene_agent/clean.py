"""What a clean cell (``# gpu-hygiene: clear_gpu``) freed: the models and allocator figures
before it (``snapshot``) and the ``cleaned`` message after it."""

import weakref
from typing import NamedTuple

from . import devices, models
from .limits import PROTOCOL
from .storage import bytes_by_device
from .util import contained


class SnapshotModel(NamedTuple):
    ref: object  # weak reference to the model
    by_device: dict  # {device: bytes} it held


class Snapshot(NamedTuple):
    models: list  # [SnapshotModel] with parameters or buffers
    memory: object  # devices.torch_memory() before the cell


def snapshot(tops, on_error):
    """The ``Snapshot`` before a clean cell (``tops``: [LiveModule] of the forest); a model
    that cannot be measured is passed to ``on_error`` and left out."""
    out = []
    for module, _order in tops:
        try:
            stats = models.model_stats(module)
        except BaseException as exc:  # kept to this model (util.contained)
            if not contained(exc):
                raise
            on_error(exc)
            continue
        if stats.has_tensors:
            out.append(SnapshotModel(weakref.ref(module), bytes_by_device(stats.storages)))
    return Snapshot(out, devices.torch_memory())


def models_left(tops):
    """How many of ``tops`` ([LiveModule]) hold parameters or buffers (int)."""
    after = 0
    for module, _order in tops:
        try:
            if models.model_stats(module).has_tensors:
                after += 1
        except BaseException as exc:
            if not contained(exc):
                raise
            after += 1
    return after


def cleaned(before, after, execution_count):
    """The ``cleaned`` message (dict): models before (``before``: Snapshot) and now (``after``:
    ``models_left``), the bytes of the models that are gone, torch's allocated and reserved
    before and after."""
    freed = {}
    for ref, by_device in before.models:
        if ref() is None:
            for device, nbytes in by_device.items():
                freed[device] = freed.get(device, 0) + nbytes
    before_mem = before.memory
    after_mem = devices.torch_memory()
    allocated = reserved = None
    if after_mem is not None:
        before_mem = before_mem or {}
        allocated = {}
        reserved = {}
        for device, (alloc, res) in after_mem.items():
            b_alloc, b_res = before_mem.get(device, (0, 0))
            allocated[device] = {"before": b_alloc, "after": alloc}
            reserved[device] = {"before": b_res, "after": res}
    return {
        "protocol": PROTOCOL,
        "type": "cleaned",
        "executionCount": execution_count,
        "models": {"before": len(before.models), "after": after},
        "freed": freed,
        "allocated": allocated,
        "reserved": reserved,
    }
