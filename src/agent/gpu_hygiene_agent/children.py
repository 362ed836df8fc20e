"""Child processes of the kernel (DataLoader workers and the like): who they are, their RSS,
whether they hold a CUDA context, and (through ``workers``) which user names keep them alive:
the ``children`` fact.

Sources, cheapest first: ``/proc`` on Linux (``/proc/<pid>/task/<tid>/children``: only the
kernel's own descendants are read, never the whole process table), else ``psutil`` when the
kernel's environment has it (imported here, lazily, guarded), else nothing: the fact then says
``visible: false`` and why, so that the browser says the workers cannot be seen instead of
showing none. Whether a child holds a CUDA context: NVML's compute-process list when NVML
answers (``cudaSource: "nvml"``), else its open files under ``/dev/nvidia*`` (``"fd"``: a
child forked from a kernel that already has a context inherits those files, so this reads as
"may hold"), else unknown."""

import os
import re

from .util import short
from .workers import worker_holders

MAX_CHILDREN = 64  # processes reported
MAX_DEPTH = 4  # generations followed (workers of workers...)
MAX_FDS = 512  # open files looked at per process for /dev/nvidia*
CMDLINE_TEXT = 200
MAX_SCAN = 20000  # /proc entries looked at for orphans (once per agent)
WORKER_NAME = "pt_data_worker"  # what torch names its DataLoader worker processes
_CONTEXT_FILE = re.compile(r"/dev/nvidia(-uvm|\d+)$")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read(path, binary=False):
    with open(path, "rb" if binary else "r") as f:
        return f.read()


def _read_raw(path):
    """The bytes of a small ``/proc`` file through ``os.open``/``os.read``: ~2 us instead of
    the ~6 us of a text-mode ``open()`` (read once per thread of the kernel per inventory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


# ---- processes through /proc


def proc_children(pid, proc="/proc"):
    """Direct children of ``pid`` (list of int) from every thread's ``children`` file."""
    out = []
    for tid in os.listdir(f"{proc}/{pid}/task"):
        try:
            text = _read_raw(f"{proc}/{pid}/task/{tid}/children")
        except OSError:
            continue
        out.extend(int(p) for p in text.split())
    return out


def direct_children(pid, proc="/proc"):
    """The pids of ``pid``'s direct children, sorted, at most ``MAX_CHILDREN`` (a DataLoader
    worker is one), for the ``sample``'s ``children``: a few ``/proc`` reads, cheap enough for
    every sample. None where ``/proc`` cannot say (no ``/proc``, another OS)."""
    try:
        return sorted(proc_children(pid, proc))[:MAX_CHILDREN]
    except (OSError, ValueError):
        return None


def cuda_files(pid, proc="/proc"):
    """How many of ``pid``'s open files (at most ``MAX_FDS`` looked at) are the device files
    a CUDA context opens (``/dev/nvidia-uvm``, ``/dev/nvidia<N>``; not ``/dev/nvidiactl``,
    which NVML alone opens), or None when they cannot be read."""
    try:
        fds = os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return None
    found = 0
    for fd in fds[:MAX_FDS]:
        try:
            if _CONTEXT_FILE.match(os.readlink(f"{proc}/{pid}/fd/{fd}")):
                found += 1
        except OSError:
            continue
    return found


def proc_process(pid, proc="/proc"):
    """One process from ``/proc`` (dict, see ``children_fact``), or None when it is gone."""
    try:
        stat = _read(f"{proc}/{pid}/stat")
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        name = _read(f"{proc}/{pid}/comm").strip()
        cmdline = _read(f"{proc}/{pid}/cmdline", binary=True)
        rss = int(_read(f"{proc}/{pid}/statm").split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
    args = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return {
        "pid": int(pid),
        "ppid": ppid,
        "name": short(name or "?", 100),
        "cmdline": short(args or name or "?", CMDLINE_TEXT),
        "rss": rss,
        "zombie": state in ("Z", "X"),
        "cudaFiles": cuda_files(pid, proc),
    }


def proc_tree(pid, proc="/proc"):
    """(processes, truncated): the descendants of ``pid`` through ``/proc``, breadth first."""
    out = []
    level = [pid]
    truncated = False
    for _depth in range(MAX_DEPTH):
        following = []
        for parent in level:
            try:
                kids = proc_children(parent, proc)
            except OSError:
                continue
            for child in kids:
                if len(out) >= MAX_CHILDREN:
                    return out, True
                info = proc_process(child, proc)
                if info is not None:
                    out.append(info)
                    following.append(child)
        if not following:
            break
        level = following
    else:
        truncated = True
    return out, truncated


def orphan_workers(proc="/proc", uid=None):
    """DataLoader workers (``comm`` "pt_data_worker") of this user whose parent is gone (they
    were reparented to pid 1): left behind by a kernel that was restarted or killed while a
    worker was busy (a live worker exits by itself within 5 s of its kernel, between two
    batches). One pass over ``/proc`` (list of process dicts, as ``proc_process``); [] where
    there is no ``/proc``."""
    uid = os.getuid() if uid is None and hasattr(os, "getuid") else uid
    try:
        entries = os.listdir(proc)
    except OSError:
        return []
    out = []
    for entry in entries[:MAX_SCAN]:
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"{proc}/{entry}").st_uid != uid:
                continue
            if _read(f"{proc}/{entry}/comm").strip() != WORKER_NAME:
                continue
        except OSError:
            continue
        info = proc_process(int(entry), proc)
        if info is not None and not info["zombie"] and info["ppid"] in (0, 1):
            out.append(info)
            if len(out) >= MAX_CHILDREN:
                break
    return out


def still_running(processes, proc="/proc"):
    """The processes of ``processes`` (dicts) that still run, re-read (list)."""
    out = []
    for old in processes:
        info = proc_process(old["pid"], proc)
        if info is not None and not info["zombie"] and info["ppid"] == old["ppid"]:
            out.append(info)
    return out


# ---- processes through psutil


def psutil_tree(psutil, pid):
    """(processes, truncated): the descendants of ``pid`` through psutil (which scans the
    process table: slower than /proc, used where /proc is not there)."""
    out = []
    truncated = False
    for child in psutil.Process(pid).children(recursive=True):
        if len(out) >= MAX_CHILDREN:
            truncated = True
            break
        try:
            with child.oneshot():
                name = child.name()
                try:
                    args = " ".join(child.cmdline())
                except Exception:
                    args = ""
                rss = int(child.memory_info().rss)
                status = child.status()
                ppid = int(child.ppid())
        except Exception:
            continue  # gone, or not ours to read
        out.append(
            {
                "pid": int(child.pid),
                "ppid": ppid,
                "name": short(name or "?", 100),
                "cmdline": short(args or name or "?", CMDLINE_TEXT),
                "rss": rss,
                "zombie": status in ("zombie", "dead"),
                "cudaFiles": None,
            }
        )
    return out, truncated


def read_tree(pid, proc="/proc"):
    """(source, processes, truncated, reason): ``source`` "proc", "psutil" or None (then
    ``reason`` says why nothing could be seen)."""
    if os.path.isdir(f"{proc}/{pid}/task"):
        try:
            processes, truncated = proc_tree(pid, proc)
            return "proc", processes, truncated, None
        except OSError as exc:
            reason = f"/proc unreadable: {exc.__class__.__name__}"
    else:
        reason = "no /proc"
    try:
        import psutil  # only when the kernel's environment has it
    except Exception:
        return None, [], False, reason + " and psutil is not installed in the kernel"
    try:
        processes, truncated = psutil_tree(psutil, pid)
        return "psutil", processes, truncated, None
    except Exception as exc:
        return None, [], False, short(f"{reason}; psutil failed: {exc.__class__.__name__}", 200)


def _cuda_of(info, nvml_pids, inherited=False):
    """Replace ``zombie``/``cudaFiles`` of a process dict by ``cuda`` and ``cudaSource``.
    ``inherited``: the kernel itself has those device files open, so a forked child has them
    too without a context of its own (seen on an H200: forked DataLoader workers list
    /dev/nvidia-uvm and /dev/nvidia0 while NVML lists only the kernel); then open files say
    nothing (``cuda`` None) and only their absence does."""
    info.pop("zombie", None)
    files = info.pop("cudaFiles", None)
    if nvml_pids is not None:
        info["cuda"], info["cudaSource"] = info["pid"] in nvml_pids, "nvml"
    elif files is not None:
        info["cuda"] = None if files > 0 and inherited else files > 0
        info["cudaSource"] = "fd"
    else:
        info["cuda"], info["cudaSource"] = None, None
    return info


def children_fact(pid, roots_by_kind, nvml_pids=None, proc="/proc", orphans=()):
    """The ``children`` fact of an inventory (dict):

    ``visible`` (bool: the kernel's children could be listed), ``source`` ("proc", "psutil"
    or None), ``reason`` (why not visible, else None), ``truncated`` (more than
    ``MAX_CHILDREN`` or ``MAX_DEPTH``), ``processes``: [{pid, ppid, name, cmdline (at most 200
    characters), rss (bytes), cuda (bool or None: unknown), cudaSource ("nvml", "fd" or None)}],
    zombies left out, ``holders`` (``worker_holders``; pids that are not children any more
    are dropped from them) and ``orphans`` (``orphans``: process dicts from
    ``orphan_workers`` / ``still_running``, shaped like ``processes``).

    ``nvml_pids``: the pids NVML lists on any device (a set), or None without NVML, or a
    callable that returns it (called only when there is a child or an orphan to tell about).
    ``roots_by_kind``: as ``worker_holders``, or a callable that returns it: called only when
    the holders can matter (the children cannot be listed, or some are alive), since holders
    are reported only with pids of live children.
    """
    source, processes, truncated, reason = read_tree(pid, proc)
    if callable(nvml_pids):
        nvml_pids = nvml_pids() if processes or orphans else None
    inherited = bool(processes) and nvml_pids is None and bool(cuda_files(pid, proc))
    alive = [_cuda_of(info, nvml_pids, inherited) for info in processes if not info["zombie"]]
    if source is not None and not alive:
        holders = []  # what they would name is no child: all dropped below
    else:
        holders = worker_holders(roots_by_kind() if callable(roots_by_kind) else roots_by_kind)
    if source is not None:
        known = {p["pid"] for p in alive}
        for holder in holders:
            holder["pids"] = [p for p in holder["pids"] if p in known]
        holders = [h for h in holders if h["pids"]]
    return {
        "visible": source is not None,
        "source": source,
        "reason": reason,
        "truncated": bool(truncated),
        "processes": alive,
        "holders": holders,
        "orphans": [_cuda_of(dict(info), nvml_pids) for info in orphans],
    }


def nvml_pids(sampler, own_pid):
    """The pids NVML lists as compute processes on any device (set), or None: no NVML, a
    query failed, or NVML does not list ``own_pid`` (another pid namespace, or the kernel has
    no CUDA context: its list then says nothing about the children either way)."""
    if sampler.nvml is None:
        return None
    pids = set()
    for device in sampler.devices:
        found = sampler.processes(device.index)
        if found is None:
            return None
        pids.update(p.pid for p in found.processes)
    return pids if own_pid in pids else None
