"""Caught exceptions kept in user variables (the ``keptErrors`` of an inventory). A stored
exception (``err = e`` in an ``except``, an out-of-memory retry loop that appends the errors it
caught) keeps its traceback, the traceback keeps every frame it passed through, and each frame
keeps its locals: the activations of a failed forward pass stay alive long after the error was
handled, through ``err.__traceback__`` and not through ``sys.last_*``. ``walk`` enters those
frames and notes every storage reached through one (``Reach.errors``); this module groups them
per exception and per frame, with the largest local of each frame."""

from . import peek
from .limits import MAX_KEPT_ERROR_FRAMES, MAX_KEPT_ERRORS
from .storage import bytes_by_device
from .util import short


def kept_errors(roots, params):
    """The ``keptErrors`` rows (list of dicts, largest first, at most ``MAX_KEPT_ERRORS``):
    one per exception a ``variable`` root keeps, with the bytes of the tensors reached through
    its traceback's frames and through nowhere else first (``roots``: [(kind, name, Reach)] in
    attribution order; ``params``: the live models' storages, which a frame keeping a model
    does not make this finding's). Bytes are whole storages, each counted once per exception.

    Row: {name: the variable, path: the exception's path from it ("err", "errors[2]"),
    type: the exception's class name, frames: [{name: the function, local: the path of its
    largest tensor from the frame (".acts"), bytes: {device: int}}] (largest first, at most
    ``MAX_KEPT_ERROR_FRAMES``), bytes: {device: int}, tensors: int}."""
    rows = []
    for kind, name, found in roots:
        if kind != "variable" or not found.errors:
            continue
        # id(error) -> [KeptByError, {frame: {key: nbytes}}, {frame: (nbytes, local)}]
        by_error = {}
        storages = found.storages
        for key, kept in found.errors.items():
            reached = storages.get(key)
            if reached is None or reached.via is not None or key in params:
                continue
            entry = by_error.get(id(kept.error))
            if entry is None:
                entry = by_error[id(kept.error)] = [kept, {}, {}]
            nbytes = reached.nbytes
            entry[1].setdefault(kept.frame, {})[key] = nbytes
            largest = entry[2].get(kept.frame)
            if largest is None or nbytes > largest[0]:
                entry[2][kept.frame] = (nbytes, kept.local)
        for kept, frames, largest in by_error.values():
            every = {}
            for keys in frames.values():
                every.update(keys)
            rows.append(
                {
                    "name": short(name),
                    "path": short(name + kept.path),
                    "type": short(peek.type_name(type(kept.error))),
                    "frames": [
                        {
                            "name": short(frame),
                            "local": short(largest[frame][1]),
                            "bytes": bytes_by_device(keys),
                        }
                        for frame, keys in sorted(
                            frames.items(), key=lambda item: -sum(item[1].values())
                        )[:MAX_KEPT_ERROR_FRAMES]
                    ],
                    "bytes": bytes_by_device(every),
                    "tensors": len(every),
                }
            )
    rows.sort(key=lambda row: -sum(row["bytes"].values()))
    return rows[:MAX_KEPT_ERRORS]
