"""Provenance (issue 24): which notebook cell and line allocated the CUDA memory still alive.

Opt-in. Once the user's code has initialised CUDA (this module never does), the agent asks
PyTorch's caching allocator to keep, with every live block, the Python stack that allocated it
(``torch.cuda.memory._record_memory_history(enabled="state", stacks="python")``: the live
blocks' stacks only, no event trace). After each cell it reads
``torch.cuda.memory._snapshot()`` and reduces it here to the live blocks grouped by the notebook
cell and line that allocated them.

A frame belongs to a cell when its file name is one IPython compiled a cell under
(``get_ipython().compile._filename_map``: ``<ipython-input-N-...>`` in IPython, ipykernel's
temporary ``.../ipykernel_<pid>/<hash>.py`` files; the map gives the execution count). Of a
block's stack (innermost frame first) the innermost cell frame is its origin (a ``def`` in an
earlier cell is where the tensor was made), the outermost cell frame the cell that ran it
(``via``). Blocks allocated before recording began carry no frames (``untraced``); blocks whose
stack has no cell frame (a library's thread, an import) are grouped by their innermost frame
outside torch's own files.

Bounded: at most ``limits.PROVENANCE_BLOCKS`` blocks have their frames read per snapshot (the
largest) and ``limits.PROVENANCE_FRAMES`` frames per block; the rest are counted
(``skipped``), their bytes still summed. Pure: reads dicts and lists that torch built (plain
Python objects), imports nothing, calls nothing of the user's.
"""

import contextlib
import heapq
import linecache
import time
from typing import NamedTuple

from . import degrade
from .limits import (
    MAX_CELL_RUNS,
    MAX_ROOT_ORIGINS,
    MAX_SAME_CODE,
    MAX_TEXT,
    PROVENANCE_BLOCKS,
    PROVENANCE_FRAMES,
    PROVENANCE_GROUPS,
)
from .util import cuda_initialized, short

LIVE_STATE = "active_allocated"
_TORCH_PARTS = ("/torch/", "\\torch\\")


def _torch_file(filename):
    return any(part in filename for part in _TORCH_PARTS)


def _size_of(entry):
    return entry[0]


def _frame_fields(frame):
    """(filename, line, name) of one snapshot frame (a dict torch built), or None."""
    if type(frame) is not dict:
        return None
    filename = frame.get("filename")
    line = frame.get("line")
    if type(filename) is not str or type(line) is not int:
        return None
    name = frame.get("name")
    return filename, line, name if type(name) is str else ""


UNTRACED = ("untraced", None, None, None, None, None, None)


def block_origin(frames, cell_of, max_frames=PROVENANCE_FRAMES):
    """The origin of one block from its ``frames`` (innermost first): a tuple
    ``(kind, cell, line, file, name, via_cell, via_line)`` where kind is ``"cell"`` (cell and
    line of the innermost cell frame; ``via_*`` the outermost cell frame, None when the same),
    ``"other"`` (no cell frame: file, line and name of the innermost frame outside torch, or of
    the innermost frame) or ``"untraced"`` (no frames). The hot loop of a snapshot's reduction
    (44 frames a block in a real kernel): one lookup per frame; a frame torch did not build as
    a dict of str / int ends the block's reading (untraced)."""
    if type(frames) is not list or not frames:
        return UNTRACED
    if len(frames) > max_frames:
        frames = frames[:max_frames]
    get = cell_of.get
    inner = outer = None
    try:
        for frame in frames:  # the innermost cell frame, from the top
            if get(frame["filename"]) is not None:
                inner = frame
                break
        if inner is not None:
            for frame in reversed(frames):  # the outermost, from the bottom (IPython's frames)
                if get(frame["filename"]) is not None:
                    outer = frame
                    break
    except Exception:  # not a dict with a hashable "filename": not torch's own frame
        return UNTRACED
    if inner is not None:
        fields = _frame_fields(inner)
        if fields is None:
            return UNTRACED
        cell = get(fields[0])
        via = (None, None)
        if outer is not inner:
            end = _frame_fields(outer)
            if end is not None and (get(end[0]), end[1]) != (cell, fields[1]):
                via = (get(end[0]), end[1])
        return ("cell", cell, fields[1], fields[0], fields[2], via[0], via[1])
    first = None
    for frame in frames:  # no cell frame (a library's thread, an import): rare, read fully
        fields = _frame_fields(frame)
        if fields is None:
            continue
        if first is None:
            first = fields
        if not _torch_file(fields[0]):
            return ("other", None, fields[1], fields[0], fields[2], None, None)
    if first is None:
        return UNTRACED
    return ("other", None, first[1], first[0], first[2], None, None)


def _int_or(value, default=-1):
    return value if type(value) is int else default


def _group_order(item):
    """Largest first; equal bytes by device, kind, cell, line and name (a stable order from
    one inventory to the next, whatever order the snapshot lists its blocks in)."""
    (device, kind, cell, line, filename, name, _via_cell, _via_line), (size, _count) = item
    text = (filename if type(filename) is str else "", name if type(name) is str else "")
    return (-size, device, kind, _int_or(cell), _int_or(line), *text)


def reduce_snapshot(
    snapshot,
    cell_of,
    line_text=None,
    max_blocks=PROVENANCE_BLOCKS,
    max_groups=PROVENANCE_GROUPS,
    addresses=None,
    runs=None,
    cell_ids=None,
):
    """Reduce ``torch.cuda.memory._snapshot()`` (``snapshot``: a dict with ``segments``, each
    with ``device`` and ``blocks`` of ``size`` (bytes), ``state`` and ``frames``) to the live
    blocks grouped by origin.

    ``cell_of``: {cell file name: execution count}. ``line_text(file, line)``: the source line
    (str) or None; default none. ``runs``: {cell file name: [execution counts]} of the user
    cells that ran that very code (ipykernel names a cell's file by a hash of its text, so a
    re-run cell, or two cells of the same text, share one file and IPython's map keeps the last
    count): a group of such a file says ``sameCode`` (the other counts: its blocks may come
    from any of them). ``cell_ids``: {execution count: the notebook cell's id}, for the
    browser's link (``cellId``). A block without ``address`` (torch 2.1) is at its segment's
    ``address`` plus the sizes of the blocks before it.

    Returns ``{"groups": [...], "liveBytes", "liveBlocks", "read", "skipped", "skippedBytes",
    "untracedBytes", "untracedBlocks", "truncated"}`` (bytes are the blocks' ``size``, as
    ``torch.cuda.memory_allocated()`` counts them). Each group: ``{"device", "kind" ("cell" |
    "other"), "cell" (execution count or None), "line", "file" (None for a cell), "name" (the
    function, "<module>" for a cell's top level), "via" ({"cell", "line"} or None), "text",
    "bytes", "blocks"}``, largest first, at most ``max_groups`` (``truncated``: groups left
    out). ``addresses``: a dict to fill with {block address: (index of the block's group in
    ``groups``, the block's size)} (a storage's ``data_ptr`` is its block's address; with
    CUDA's unified virtual addressing no two devices, nor the host, share an address).
    Never raises on a malformed snapshot: what it cannot read is skipped."""
    groups = {}
    where = {}  # block address -> (group key, block size), when ``addresses`` is wanted
    live = []  # (size, device, address or None, frames) of every live block
    segments = snapshot.get("segments") if type(snapshot) is dict else None
    for segment in segments if type(segments) is list else ():
        if type(segment) is not dict:
            continue
        device = segment.get("device")
        device = device if type(device) is int else 0
        blocks = segment.get("blocks")
        offset = segment.get("address")
        offset = offset if type(offset) is int else None
        for block in blocks if type(blocks) is list else ():
            try:  # torch's dicts (a block missing a key, or not a dict: skipped)
                size = block["size"]
                state = block["state"]
            except Exception:
                offset = None
                continue
            at = offset
            if offset is not None:
                offset = offset + size if type(size) is int else None
            if state != LIVE_STATE or type(size) is not int or size < 0:
                continue
            address = block.get("address", at)
            live.append((size, device, address if type(address) is int else at, block))
    live_blocks = len(live)
    live_bytes = sum(entry[0] for entry in live)
    if live_blocks > max_blocks:  # the largest blocks first: most of the bytes are read
        live = heapq.nlargest(max_blocks, live, key=_size_of)
    read = len(live)
    skipped = live_blocks - read
    skipped_bytes = live_bytes - sum(entry[0] for entry in live)
    untraced_bytes = untraced_blocks = 0
    for size, device, address, block in live:
        origin = block_origin(block.get("frames"), cell_of)
        if origin[0] == "untraced":
            untraced_bytes += size
            untraced_blocks += 1
            continue
        key = (device, *origin)
        if addresses is not None and address is not None:
            where[address] = (key, size)
        entry = groups.get(key)
        if entry is None:
            groups[key] = [size, 1]
        else:
            entry[0] += size
            entry[1] += 1
    ordered = sorted(groups.items(), key=_group_order)
    rows = []
    index = {}
    for key, (size, count) in ordered[:max_groups]:
        index[key] = len(rows)
        device, kind, cell, line, filename, name, via_cell, via_line = key
        text = None
        if line_text is not None and filename is not None:
            try:
                text = line_text(filename, line)
            except Exception:
                text = None
            text = text.strip()[:MAX_TEXT] if type(text) is str else None
        same = None
        if kind == "cell" and runs is not None:
            same = [n for n in runs.get(filename, ()) if n != cell][-MAX_SAME_CODE:] or None
        cell_id = cell_ids.get(cell) if kind == "cell" and cell_ids is not None else None
        rows.append(
            {
                "device": device,
                "kind": kind,
                "cell": cell,
                "cellId": cell_id if type(cell_id) is str else None,
                "sameCode": same,
                "line": line,
                "file": None if kind == "cell" else filename[-MAX_TEXT:],
                "name": (name or "")[:MAX_TEXT],
                "via": None if via_cell is None else {"cell": via_cell, "line": via_line},
                "text": text or None,
                "bytes": size,
                "blocks": count,
            }
        )
    if addresses is not None:
        for address, (key, size) in where.items():
            if key in index:
                addresses[address] = (index[key], size)
    return {
        "groups": rows,
        "liveBytes": live_bytes,
        "liveBlocks": live_blocks,
        "read": read,
        "skipped": skipped,
        "skippedBytes": skipped_bytes,
        "untracedBytes": untraced_bytes,
        "untracedBlocks": untraced_blocks,
        "truncated": max(0, len(ordered) - max_groups),
    }


def cell_files(shell):
    """{cell file name: execution count} of the cells IPython compiled (its compiler's
    ``_filename_map``, a dict of str -> int IPython keeps); {} where this IPython has none."""
    compiler = getattr(shell, "compile", None)
    mapping = getattr(compiler, "_filename_map", None) if compiler is not None else None
    if type(mapping) is not dict:
        return {}
    return mapping


def source_line(filename, line):
    """Line ``line`` of ``filename`` from ``linecache`` (IPython puts every cell's text there
    under its file name), or None; never reads a file that is not already in the cache."""
    entry = linecache.cache.get(filename)
    if type(entry) is not tuple or len(entry) < 3 or type(entry[2]) is not list:
        return None
    lines = entry[2]
    if 1 <= line <= len(lines) and type(lines[line - 1]) is str:
        return lines[line - 1]
    return None


class Reading(NamedTuple):
    """One read of the recorded stacks: the ``provenance`` fact and the live blocks' origins
    by address (``{block address: (index in fact["groups"], block size)}``, for the roots)."""

    fact: dict
    origin_of: dict


class Recorder:
    """The opt-in recording of allocation stacks, one per agent.

    ``wanted`` comes from the browser's ``configure`` (``provenance: true``). Recording starts
    at the first hook (before or after a user cell) that finds torch imported and its CUDA
    state initialised by the user's code (this never initialises it), and stops when no longer
    wanted or when the agent stops. A recording the user's code had already started
    (``history_enabled``, or an event trace: ``recording_already``) is only read: ``byUser``,
    never changed or stopped; so is one the user's code takes over (an event trace appears while
    this agent records). A recording the user's code turns off (``history_enabled`` False) is
    ``stopped`` (``stopped_in``: the last cell run when it was seen): the live blocks' frames are
    still read, later blocks are untraced, and the agent does not start it again until the
    setting is turned off and on (its code chose to stop it); if the user's code records
    again, that recording is the user's. These are seen between cells: a cell that turns
    recording off and on again, or calls ``enabled="state"`` while the agent records, is not
    told apart (the agent then stops it when the setting goes off).
    Why it is not recording while wanted is ``reason``: ``"torch"`` (not imported), ``"cuda"``
    (no CUDA use yet), ``"unsupported"`` (this torch lacks
    ``torch.cuda.memory._record_memory_history`` with ``enabled="state"``, or refused it:
    ``error`` says what it raised; noted as the limit ``provenance``)."""

    def __init__(self):
        self.wanted = False
        self.on = False
        self.by_user = False  # the user's code started the recording: read it, never touch it
        self.since = None  # the execution count of the first cell run while recording
        self.stopped = False  # torch records no more: the user's code turned it off
        self.stopped_in = None  # the last cell run when that was seen (execution count)
        self.reason = None
        self.error = None
        self.runs = {}  # cell file name -> [execution counts that ran that text]
        self.cell_ids = {}  # execution count -> the notebook cell's id (pre_run_cell's info)

    def want(self, flag):
        self.wanted = bool(flag)

    def _api(self, torch):
        memory = getattr(getattr(torch, "cuda", None), "memory", None)
        record = getattr(memory, "_record_memory_history", None)
        snapshot = getattr(memory, "_snapshot", None)
        if callable(record) and callable(snapshot):
            return record, snapshot
        return None

    def note_cell(self, shell, count, cell_id):
        """Remember which file a user cell ran from and its cell id (after the cell; only
        while wanted): IPython's map keeps one count per file, the last."""
        if not self.wanted or type(count) is not int:
            return
        if len(self.cell_ids) >= MAX_CELL_RUNS:
            self.cell_ids.clear()
            self.runs.clear()
        if type(cell_id) is str:
            self.cell_ids[count] = cell_id[:MAX_TEXT]
        for filename, number in list(cell_files(shell).items()):
            if number == count and type(filename) is str:
                counts = self.runs.setdefault(filename, [])
                if count not in counts:
                    counts.append(count)
                    del counts[: -MAX_SAME_CODE - 1]

    def update(self, torch, next_count):
        """Start or stop recording as wanted (``next_count``: the execution count of the next
        cell to run, or None). Never raises."""
        try:
            if self.wanted and not self.on:
                self._start(torch, next_count)
            elif not self.wanted and self.on:
                self.stop(torch)
            elif self.on:
                self._check(torch, next_count)
            if not self.wanted:
                self.reason = None
        except Exception as exc:
            self.error = short(f"{type(exc).__name__}: {exc}", MAX_TEXT)

    def stop(self, torch):
        """Stop a recording this agent started (the setting turned off, the agent stopping);
        a user's is left as it is. Never raises."""
        started_here = self.on and not self.by_user and not self.stopped
        self.on = False
        self.by_user = False
        self.since = None
        self.stopped = False
        self.stopped_in = None
        if started_here:
            api = self._api(torch)
            if api is not None:
                with contextlib.suppress(Exception):
                    api[0](enabled=None)

    def _start(self, torch, next_count):
        self.by_user = False
        self.stopped = False
        self.stopped_in = None
        if torch is None:
            self.reason = "torch"
            return
        if not cuda_initialized(torch):
            self.reason = "cuda"
            return
        api = self._api(torch)
        if api is None:
            self._unsupported(None)
            return
        try:
            if history_enabled(torch) or recording_already(api[1]()):
                self.by_user = True
            else:
                api[0](enabled="state", context="state", stacks="python")
        except Exception as exc:  # torch 2.0's signature (enabled: bool, ...) or a refusal
            self._unsupported(exc)
            return
        self.on = True
        self.reason = None
        self.error = None
        self.since = None if self.by_user else next_count

    def _check(self, torch, next_count):
        """While reading: see whether torch still records (the user's code may have turned it
        off, or on again after that: then the recording is the user's)."""
        enabled = history_enabled(torch)
        if enabled is False and not self.stopped:
            self.stopped = True
            self.stopped_in = next_count - 1 if type(next_count) is int and next_count > 1 else None
        elif enabled is True and self.stopped:
            # the user's code records again: theirs, and the blocks of the gap are untraced
            self.stopped = False
            self.stopped_in = None
            self.by_user = True
            self.since = None

    def _say_who(self, fact):
        fact["byUser"] = self.by_user
        if self.stopped:
            fact["stopped"] = True
            fact["stoppedIn"] = self.stopped_in

    def _unsupported(self, exc):
        self.reason = "unsupported"
        if exc is not None:
            self.error = short(f"{type(exc).__name__}: {exc}", MAX_TEXT)
        degrade.note("provenance", "torch")

    def read(self, shell, torch):
        """The ``provenance`` fact of an inventory (a ``Reading``), or None when not wanted.
        While recording: ``reduce_snapshot`` of ``torch.cuda.memory._snapshot()`` with
        ``since``, ``byUser`` and ``costMs`` (the snapshot and its reduction, ms). What torch
        raises is the fact's ``error`` (no origins this time); never raises."""
        if not self.wanted:
            return None
        fact = {"recording": self.on, "since": self.since, "reason": self.reason}
        if self.error is not None:
            fact["error"] = self.error
        if not self.on:
            return Reading(fact, {})
        started = time.perf_counter()
        api = self._api(torch)
        if api is None:
            self.on = False
            self._unsupported(None)
            fact.update(recording=False, reason=self.reason)
            return Reading(fact, {})
        addresses = {}
        try:
            snapshot = api[1]()
            if not self.by_user and not self.stopped and recording_already(snapshot):
                self.by_user = True  # the user's code took it over (enabled="all"): theirs now
            reduced = reduce_snapshot(
                snapshot,
                cell_files(shell),
                source_line,
                addresses=addresses,
                runs=self.runs,
                cell_ids=self.cell_ids,
            )
        except Exception as exc:
            fact["error"] = short(f"{type(exc).__name__}: {exc}", MAX_TEXT)
            self._say_who(fact)
            return Reading(fact, {})
        fact.update(reduced)
        self._say_who(fact)
        fact["costMs"] = (time.perf_counter() - started) * 1000.0
        return Reading(fact, addresses)


def history_enabled(torch):
    """Whether torch's caching allocator records allocation history now (bool), from
    ``torch._C._cuda_isHistoryEnabled()`` (the current device's allocator, where torch has it);
    None where this torch cannot say, it raises, or torch's CUDA state is not initialised (the
    allocator is not set up before: asking would be the first CUDA use). Never raises."""
    if not cuda_initialized(torch):
        return None
    ask = getattr(getattr(torch, "_C", None), "_cuda_isHistoryEnabled", None)
    if not callable(ask):
        return None
    try:
        answer = ask()
    except Exception:
        return None
    return answer if type(answer) is bool else None


def recording_already(snapshot):
    """Whether a ``_snapshot()`` shows a recording with history, memory_viz's
    ``enabled="all"`` (bool): a device trace of more than one event. ``enabled="state"`` keeps
    a trace too, of at most one event (torch caps it at one entry), so the agent's own
    recording never reads as someone else's; a trace is cleared when recording is turned off.
    Live blocks' frames are no sign: they stay after any recording is turned off. A user's
    ``enabled="state"`` recording is told by ``history_enabled`` instead."""
    if type(snapshot) is not dict:
        return False
    traces = snapshot.get("device_traces")
    traces = traces if type(traces) is list else ()
    return any(type(trace) is list and len(trace) > 1 for trace in traces)


def kept_storages(kept, keeps):
    """What one root keeps as [(address, nbytes)] of its storages (``kept``: {StorageKey or
    model id: nbytes, or None for a model kept whole, whose storages are ``keeps[id]``}):
    plain ints, kept between inventories to read the origins again."""
    out = []
    for item, nbytes in kept.items():
        pairs = keeps.get(item, {}).items() if nbytes is None else ((item, nbytes),)
        for key, size in pairs:
            out.append((key[1], size))
    return out


def root_origins(storages, origin_of, shared=(), limit=MAX_ROOT_ORIGINS):
    """The origins of one root's CUDA storages (``storages``: ``kept_storages``; ``origin_of``:
    ``Reading.origin_of``: {address: (group index, block size)}; ``shared``: the addresses
    another holder keeps too): ``[{"group": index in the fact's groups, "bytes", "shared": of
    those bytes, what another holder keeps too (only when > 0)}]``, largest first, at most
    ``limit``; storages of no reported group are left out."""
    by_group = {}
    for address, size in storages:
        found = origin_of.get(address)
        # a block at that address at least the storage's size: the storage's own block (a
        # storage that moved and left its address to a smaller block is not matched)
        if found is not None and found[1] >= size:
            sums = by_group.setdefault(found[0], [0, 0])
            sums[0] += size
            if address in shared:
                sums[1] += size
    ordered = sorted(by_group.items(), key=lambda pair: -pair[1][0])[:limit]
    out = []
    for group, (size, also) in ordered:
        origin = {"group": group, "bytes": size}
        if also:
            origin["shared"] = also
        out.append(origin)
    return out
