"""Who else is on the kernel's GPUs: the ``gpuProcesses`` fact (issue 12).

NVML's compute and graphics processes of each device the kernel sees
(``devices.DeviceSampler.process_lists``), merged by pid, each with its name, command line and
user read from ``/proc`` (or psutil when the kernel has it and there is no ``/proc``) for the
pids this OS can see, and whether those pids are this OS's at all (``namespace``). Read by the
sampler thread every 2 s; a message only when the list changed (pids, kinds, bytes rounded to
1 MiB, the kernel's own usage hidden or not) or ``RESEND_S`` passed, or a new comm opened.
Facts only: which process is one of the user's other kernels the browser finds out itself.
"""

import os
import time

from .limits import PROTOCOL
from .util import short

MAX_DEVICES = 16
MAX_PROCESSES = 64  # per device, largest ``used`` first
RESEND_S = 10.0  # an unchanged list is sent again after this long (s)
CMDLINE_TEXT = 200
NAME_TEXT = 100
MiB = 1 << 20


def merge(compute, graphics):
    """One device's processes from its NVML lists ([ProcessUse] each): [(pid, kind, used)],
    ``kind`` "compute", "graphics" or "both", ``used`` bytes or None, largest ``used`` first
    (None last, then by pid), at most ``MAX_PROCESSES``.

    A pid listed more than once in one list (a GPU in MIG mode is read per instance) has the
    sum of its entries (None when one of them is None). NVML gives a process's whole usage in
    each list, so a pid in both lists has the larger of the two figures, not their sum."""
    merged = {}
    for kind, procs in (("compute", compute), ("graphics", graphics)):
        sums = {}
        for pid, used in procs:
            if pid in sums:
                before = sums[pid]
                sums[pid] = None if before is None or used is None else before + used
            else:
                sums[pid] = used
        for pid, used in sums.items():
            if pid not in merged:
                merged[pid] = (kind, used)
                continue
            _kind, before = merged[pid]
            known = [u for u in (before, used) if u is not None]
            merged[pid] = ("both", max(known) if known else None)
    rows = [(pid, kind, used) for pid, (kind, used) in merged.items()]
    rows.sort(key=lambda row: (row[2] is None, -(row[2] or 0), row[0]))
    return rows[:MAX_PROCESSES]


def decide_namespace(own_listed, hidden, others_exist):
    """``namespace`` of ``gpuProcesses``: "host", "container" or "unknown".

    ``own_listed``: NVML lists the kernel's own pid on some device (NVML's pids are this
    OS's). ``hidden``: torch reserves memory on a device whose list lacks the kernel's pid (a
    sample's ``processHidden``: NVML's pids are another namespace's). ``others_exist``: whether
    any other listed pid exists here (True; also when no other pid is listed: nothing says
    otherwise), False (none does), None (no ``/proc`` and no psutil to look)."""
    if own_listed:
        return "host"
    if hidden or others_exist is False:
        return "container"
    if others_exist is None:
        return "unknown"
    return "host"


class ProcessReader:
    """Name, command line and user of a pid, from ``/proc`` (``proc``) or, where there is no
    ``/proc``, psutil when importable; ``source`` is "proc", "psutil" or None (decided at the
    first call). User names are looked up once per uid."""

    def __init__(self, proc="/proc"):
        self.proc = proc
        self._source = False  # not decided yet
        self._psutil = None
        self._users = {}  # uid -> user name (or the uid as text)

    @property
    def source(self):
        if self._source is False:
            if os.path.isdir(f"{self.proc}/{os.getpid()}"):
                self._source = "proc"
            else:
                try:
                    import psutil  # only when the kernel's environment has it

                    self._psutil = psutil
                    self._source = "psutil"
                except Exception:
                    self._source = None
        return self._source

    def exists(self, pid):
        """Whether ``pid`` is a process of this OS (bool), or None when it cannot be told."""
        source = self.source
        if source == "proc":
            try:
                os.stat(f"{self.proc}/{pid}")
            except FileNotFoundError:
                return False
            except OSError:
                return True  # there, but not ours to read
            return True
        if source == "psutil":
            try:
                return bool(self._psutil.pid_exists(pid))
            except Exception:
                return None
        return None

    def user(self, uid):
        if uid not in self._users:
            name = str(uid)
            try:
                import pwd  # POSIX only

                name = pwd.getpwuid(uid).pw_name
            except Exception:
                pass
            self._users[uid] = short(name, NAME_TEXT)
        return self._users[uid]

    def describe(self, pid):
        """(name, cmdline, user) of ``pid``, each a str or None where unreadable."""
        source = self.source
        if source == "proc":
            return self._from_proc(pid)
        if source == "psutil":
            return self._from_psutil(pid)
        return None, None, None

    def _from_proc(self, pid):
        base = f"{self.proc}/{pid}"
        name = cmdline = user = None
        try:
            user = self.user(os.stat(base).st_uid)
        except OSError:
            return None, None, None
        try:
            with open(f"{base}/comm", "rb") as f:
                name = short(f.read().decode(errors="replace").strip(), NAME_TEXT) or None
        except OSError:
            pass
        try:
            with open(f"{base}/cmdline", "rb") as f:
                raw = f.read(4 * CMDLINE_TEXT)
            text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            cmdline = short(text, CMDLINE_TEXT) or None
        except OSError:
            pass
        return name, cmdline, user

    def _from_psutil(self, pid):
        out = []
        try:
            process = self._psutil.Process(pid)
            with process.oneshot():
                for read, limit in (
                    (process.name, NAME_TEXT),
                    (lambda: " ".join(process.cmdline()), CMDLINE_TEXT),
                    (process.username, NAME_TEXT),
                ):
                    try:
                        out.append(short(read(), limit) or None)
                    except Exception:  # AccessDenied, gone meanwhile
                        out.append(None)
        except Exception:
            return None, None, None
        return tuple(out)


def _mib(used):
    return None if used is None else (used + MiB // 2) >> 20


class GpuProcesses:
    """The ``gpuProcesses`` message, for the sampler thread. ``poll`` reads NVML's lists and
    returns a message when one is due (changed, ``resend_s`` passed, or ``force``), else
    None. ``force``: set when a comm opens, so that it gets the list at the next read."""

    def __init__(self, pid, proc="/proc"):
        self.pid = pid
        self.reader = ProcessReader(proc)
        self.resend_s = RESEND_S
        self.force = False
        self.last_key = None
        self.last_sent = None  # time.monotonic() of the last message

    def poll(self, sampler, on_error=None):
        """A ``gpuProcesses`` message (dict) or None; ``sampler``: devices.DeviceSampler with
        NVML. NVML failures go to ``on_error(exception)`` (the device is left out)."""
        lists = sampler.process_lists(on_error)[:MAX_DEVICES]
        devices = [(entry.index, merge(entry.compute, entry.graphics)) for entry in lists]
        hidden = tuple(sorted(i for i, flag in sampler.hidden.items() if flag))
        rounded = tuple(
            (i, tuple((pid, kind, _mib(used)) for pid, kind, used in rows)) for i, rows in devices
        )
        key = (rounded, hidden)
        now = time.monotonic()
        stale = self.last_sent is None or not 0 <= now - self.last_sent < self.resend_s
        if key == self.last_key and not stale and not self.force:
            return None
        self.last_key = key
        self.last_sent = now
        self.force = False
        return self._message(devices, bool(hidden))

    def _message(self, devices, hidden):
        reader = self.reader
        pids = {pid for _i, rows in devices for pid, _k, _u in rows}
        own_listed = self.pid in pids
        others_exist = True
        if own_listed or hidden:
            pass  # decided without looking
        elif reader.source is None:
            others_exist = None
        elif pids:
            # a pid that cannot be told (None) is no sign of another namespace
            others_exist = any(reader.exists(pid) is not False for pid in pids)
        namespace = decide_namespace(own_listed, hidden, others_exist)
        names = {}
        if namespace == "host":  # elsewhere a pid here is another process than NVML's
            for pid in pids:
                names[pid] = reader.describe(pid)
        out = []
        for index, rows in devices:
            processes = []
            for pid, kind, used in rows:
                name, cmdline, user = names.get(pid, (None, None, None))
                processes.append(
                    {
                        "pid": pid,
                        "kind": kind,
                        "used": used,
                        "name": name,
                        "cmdline": cmdline,
                        "user": user,
                        "self": pid == self.pid,
                    }
                )
            out.append({"index": index, "processes": processes})
        return {
            "protocol": PROTOCOL,
            "type": "gpuProcesses",
            "t": time.time(),
            "pid": self.pid,
            "namespace": namespace,
            "devices": out,
        }
