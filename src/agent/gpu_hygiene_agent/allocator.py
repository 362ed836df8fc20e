"""PyTorch's caching allocator, split the way ``torch.cuda.empty_cache()`` sees it: what it can
return (segments that hold no live block) and what it cannot (free blocks split off a segment
that still holds a live tensor: fragmentation). Read only once CUDA is already initialised;
never creates a CUDA context."""

import os

from .util import cuda_initialized, torch_module

# The current value of each memory_stats() key the fact reports (bytes or counts).
_KEYS = {
    "reserved": "reserved_bytes.all.current",
    "allocated": "allocated_bytes.all.current",
    "active": "active_bytes.all.current",
    "inactiveSplit": "inactive_split_bytes.all.current",
    "segments": "segment.all.current",
    "allocRetries": "num_alloc_retries",
}


def expandable_segments(value=None):
    """Whether ``PYTORCH_CUDA_ALLOC_CONF`` (``value``, default the environment's; also the
    newer name ``PYTORCH_ALLOC_CONF``) turns ``expandable_segments`` on (bool). Options are
    ``key:value`` pairs separated by commas; the last one wins."""
    if value is None:
        value = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get(
            "PYTORCH_ALLOC_CONF", ""
        )
    on = False
    for option in str(value).split(","):
        key, _, setting = option.partition(":")
        if key.strip() == "expandable_segments":
            on = setting.strip().lower() == "true"
    return on


def device_stats(index, stats):
    """One device's entry from a ``memory_stats()`` dict (dict of ints; bytes unless said):
    ``reserved``, ``allocated``, ``active`` (allocated plus blocks freed but still in use by a
    stream), ``inactiveSplit`` (free blocks of segments that still hold an active block:
    ``empty_cache()`` cannot return them), ``releasable`` (reserved - active - inactiveSplit:
    the segments that are entirely free, what ``empty_cache()`` returns), ``segments`` and
    ``allocRetries`` (counts: cudaMalloc retries after freeing the cache, a sign of
    fragmentation)."""
    entry = {"index": index}
    for field, key in _KEYS.items():
        value = stats.get(key, 0)
        entry[field] = max(0, int(value)) if isinstance(value, (int, float)) else 0
    entry["releasable"] = max(0, entry["reserved"] - entry["active"] - entry["inactiveSplit"])
    return entry


def allocator_fact():
    """The ``allocator`` fact of an inventory (dict), or None when torch is not imported or
    CUDA not initialised: ``{expandableSegments: bool, devices: [device_stats]}``. One
    ``torch.cuda.memory_stats_as_nested_dict(i)`` per device (a dict built by torch)."""
    torch = torch_module()
    if not cuda_initialized(torch):
        return None
    cuda = torch.cuda
    devices = []
    for index in range(int(cuda.device_count())):
        devices.append(device_stats(index, _stats(cuda, index)))
    return {"expandableSegments": expandable_segments(), "devices": devices}


def _stats(cuda, index):
    """The ``memory_stats()`` keys the fact reports ({dotted key: value}), read from
    ``memory_stats_as_nested_dict`` (``memory_stats`` flattens all ~100 keys in Python first);
    ``memory_stats`` itself where the nested dict is missing or shaped otherwise."""
    try:
        nested = cuda.memory_stats_as_nested_dict(index)
        out = {}
        for key in _KEYS.values():
            value = nested
            for part in key.split("."):
                value = value[part]
            out[key] = value
        return out
    except Exception:
        return cuda.memory_stats(index) or {}
