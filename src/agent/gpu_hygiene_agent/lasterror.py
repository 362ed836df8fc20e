"""The ``lastError`` of an inventory: the last exception and the frames of its traceback,
each walked as a root (what a failed ``model.train()`` keeps alive)."""

import sys

from . import peek, roots
from .storage import bytes_by_device, storage_of
from .util import contained, describe, frame_name, short


def walk_last_error(shell, walker, found_roots, optimizer_type, skips=None):
    """Walk the last traceback with ``walker`` (a walk.Walker): appends (``"traceback"``,
    ``"last traceback (<frame>)"``, Reach) to ``found_roots`` and returns the ``lastError``
    dict (or None when there is no last exception). A frame or exception whose walk fails is
    left out and counted in ``skips`` (``peek.Skips``)."""
    excs = roots.exceptions(shell)
    frames = roots.traceback_frames(shell, excs)
    if not frames and not excs:
        return None
    total = {}
    frame_entries = []
    for frame in frames:
        name = frame_name(frame.f_code)
        try:
            found = walker.reach(frame, storage_of, optimizer_type)
        except BaseException as exc:  # kept to this frame or exception (util.contained)
            if not contained(exc):
                raise
            if skips is not None:
                skips.add("walk failed")
            continue
        found_roots.append(("traceback", f"last traceback ({name})", found))
        storages = {key: value.nbytes for key, value in found.storages.items()}
        total.update(storages)
        frame_entries.append(
            {
                "name": short(name),
                "bytes": bytes_by_device(storages),
                "tensors": len(storages),
            }
        )
    innermost = frame_name(frames[-1].f_code) if frames else "exception"
    for exc in excs:
        try:
            found = walker.reach(exc, storage_of, optimizer_type)
        except BaseException as exc:  # kept to this frame or exception (util.contained)
            if not contained(exc):
                raise
            if skips is not None:
                skips.add("walk failed")
            continue
        found_roots.append(("traceback", f"last traceback ({innermost})", found))
        total.update({key: value.nbytes for key, value in found.storages.items()})
    if excs:
        kind = peek.type_name(type(excs[0]))
        message = describe(excs[0])[len(kind) + 2 :]
    else:
        last_type = getattr(sys, "last_type", None)
        kind = peek.type_name(last_type) if last_type is not None else ""
        message = ""
    del frames, excs
    return {
        "type": short(kind),
        "message": short(message),
        "frames": frame_entries,
        "bytes": bytes_by_device(total),
    }
