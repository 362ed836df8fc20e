"""A stand-in for PyTorch's CUDA allocation-stack recording, for a kernel on a machine without a
GPU (issue 24's CPU tests): run once in the kernel by a silent request, before the agent looks.

What cannot exist here is CUDA: ``torch.cuda.is_initialized()``, the caching allocator's
``torch.cuda.memory._record_memory_history``, ``torch._C._cuda_isHistoryEnabled()`` and
``torch.cuda.memory._snapshot()``. This module replaces those four on the kernel's real torch,
and records, the way the allocator does, the Python stack (innermost frame first, ``{"filename",
"line", "name"}``) of every tensor whose storage a torch call created while recording is on (a
``TorchFunctionMode`` that stays entered: torch's own recorder sees every allocation, this one
the outputs of torch calls made from Python). ``_snapshot()`` lists every live CPU storage (the
tensors ``gc`` tracks, and their gradients) as an ``active_allocated`` block of device 0 at its
``data_ptr``, with the frames recorded for it or none, and ``device_traces`` the events kept
while recording (``trace``: every one with ``enabled="all"``, the last one with ``"state"``;
dropped when turned off; a snapshot noted after it is taken, as torch keeps them). ``CALLS``
(the ``enabled`` of each ``_record_memory_history`` call) is bound on ``torch.cuda.memory`` as
``_fake_calls``. The real recorder is exercised by the same tests' ``[cuda]`` variants on a GPU.
"""

import gc
import sys
import warnings
import weakref

import torch
from torch.overrides import TorchFunctionMode

CALLS = []
TRACE = []  # alloc events, kept while recording with enabled="all" (memory_viz's history)
RECORDED = {}  # data_ptr -> (weak reference to the tensor, frames)
STATE = {"on": False, "all": False}
HERE = __file__ if "__file__" in globals() else "<fake_cuda_history>"


def frames_of(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        if code.co_filename != HERE:
            out.append({"filename": code.co_filename, "line": frame.f_lineno, "name": code.co_name})
        frame = frame.f_back
    return out


class Recording(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if STATE["on"]:
            for tensor in result if isinstance(result, (tuple, list)) else (result,):
                if type(tensor) is torch.Tensor or type(tensor) is torch.nn.Parameter:
                    ptr = tensor.untyped_storage().data_ptr()
                    known = RECORDED.get(ptr)
                    if ptr and (known is None or known[0]() is None):
                        RECORDED[ptr] = (weakref.ref(tensor), frames_of(sys._getframe(1)))
                        trace({"action": "alloc", "addr": ptr})
        return result


def trace(event):
    """Keep an event as torch does while recording: every one with ``enabled="all"``, the last
    one only with ``enabled="state"`` (its trace is capped at one entry)."""
    if STATE["on"]:
        TRACE.append(event)
        if not STATE["all"]:
            del TRACE[:-1]


def record(enabled="all", context="all", stacks="all", **_options):
    CALLS.append(enabled)
    STATE["on"] = enabled is not None
    STATE["all"] = enabled == "all"
    if enabled is None:
        TRACE.clear()  # torch drops the trace when recording is turned off


def snapshot(device=None):
    with warnings.catch_warnings():  # ``_grad`` of a non-leaf tensor warns
        warnings.simplefilter("ignore")
        return _snapshot()


def _snapshot():
    storages = {}
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor):
            for tensor in (obj, obj._grad):
                if tensor is not None and tensor.device.type == "cpu":
                    storage = tensor.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
    blocks = [
        {
            "address": ptr,
            "size": size,
            "requested_size": size,
            "state": "active_allocated",
            "frames": RECORDED[ptr][1] if ptr in RECORDED else [],
        }
        for ptr, size in storages.items()
        if ptr
    ]
    done = {"segments": [{"device": 0, "blocks": blocks}], "device_traces": [list(TRACE)]}
    trace({"action": "snapshot", "addr": 0})  # torch notes each snapshot after taking it
    return done


torch.cuda.is_initialized = lambda: True
torch.cuda.memory._record_memory_history = record
torch.cuda.memory._snapshot = snapshot
torch._C._cuda_isHistoryEnabled = lambda: STATE["on"]
torch.cuda.memory._fake_calls = CALLS
Recording().__enter__()
