"""The kernel process's resident memory and the memory it may use, for the ``sample``'s
``ram``: what the finding severity weighs RAM bytes against (issue 28) and what a machine
without a GPU can still show (issue 29). Linux ``/proc`` and cgroup files, read without
importing anything; elsewhere ``None``."""

import os

_CGROUP_LIMITS = (
    "/sys/fs/cgroup/memory.max",  # cgroup v2: a number, or "max"
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",  # cgroup v1: a huge number when unset
)


def _page_size():
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4096


_PAGE = _page_size()


def process_rss(path="/proc/self/statm"):
    """Resident set size of this process in bytes (``/proc/self/statm``'s second field, the
    figure ``ps`` and jupyter-resource-usage show), or None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def ram_total(limits=_CGROUP_LIMITS):
    """Bytes of memory this process may use: the machine's physical memory, or its cgroup's
    limit when lower (a container, a JupyterHub spawner's mem_limit), or None where neither can
    be read."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * _PAGE
    except (ValueError, OSError, AttributeError):
        total = None
    for path in limits:
        try:
            with open(path, "rb") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limit = int(text)
            if total is None or limit < total:
                total = limit
    return total


class Ram:
    """The ``ram`` of a ``sample``: ``{"rss": bytes or None, "total": bytes or None}``; the
    total is read once (a cgroup limit rarely changes while a kernel runs)."""

    def __init__(self):
        self.total = ram_total()

    def fact(self):
        return {"rss": process_rss(), "total": self.total}
