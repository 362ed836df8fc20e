"""When an idle kernel may speak (issue 40): never on a timer, only when its own figures change.

Every IOPub message a kernel sends moves jupyter_server's ``last_activity`` of that kernel, and
through the server's ``last_activity`` JupyterHub's idle culler's view of the user: a sample a
second kept every watched kernel, and its user's server, "active" forever. So the sampler thread
still reads the figures at its interval, but between cells it sends a ``sample`` only when a
figure that this kernel alone moves has changed since the last sample sent:

- per device: this process's NVML usage (``process``), torch's ``allocated`` / ``reserved`` and
  cap (``limit``), ``processHidden``, and this process's SM share (``processUtilization``; no
  share and 0 % are one: NVML says "no sample" or "0" of a process that computes nothing,
  depending on what others do);
- the kernel's resident memory (``ram.rss``), by at least ``RSS_STEP`` from the last one sent
  (the figure moves by a few pages as the interpreter runs; the screen shows MiB);
- its direct child processes (``children``: a DataLoader worker that starts or exits).

The device's own figures (memory used by every process, GPU-Util, other processes) change
without this kernel doing anything: they are not this kernel's to report between cells, the
server extension reads them (``gpu-hygiene/kernels``' ``devices``). While a user cell runs every
sample is sent (the in-cell leak watch, progress); the first sample after a cell always is (it
says the cell ended)."""

MiB = 1 << 20
RSS_STEP = MiB  # resident-memory change (bytes) that counts between cells


def _share(value):
    """A process's SM share for comparison: None (no NVML sample) and 0 are both "idle"."""
    return value or 0


def own_figures(sample):
    """The figures of ``sample`` (a ``sample`` message dict) that only this kernel moves, apart
    from ``ram.rss`` (compared with a tolerance): a hashable tuple."""
    devices = tuple(
        (
            entry.get("index"),
            entry.get("process"),
            entry.get("allocated"),
            entry.get("reserved"),
            entry.get("limit"),
            bool(entry.get("processHidden")),
            _share(entry.get("processUtilization")),
        )
        for entry in sample.get("devices") or ()
    )
    children = sample.get("children")
    return devices, tuple(children) if children is not None else None


def _rss(sample):
    ram = sample.get("ram")
    return ram.get("rss") if isinstance(ram, dict) else None


class Quiet:
    """Decides, sample by sample, whether one is sent (``wants``), and remembers the last one
    sent (``sent``). Used by the sampler thread only (no lock)."""

    def __init__(self):
        self.last = None  # own_figures of the last sample sent
        self.last_rss = None
        self.last_busy = False
        self.skipped = 0  # samples read and not sent (for the tests and the bench)

    def wants(self, sample):
        """Whether ``sample`` is sent: always while a cell runs (``busy``), the first one, the
        first after a cell, and one whose own figures changed."""
        if sample.get("busy") or self.last is None or self.last_busy:
            return True
        if own_figures(sample) != self.last:
            return True
        rss, before = _rss(sample), self.last_rss
        if (rss is None) != (before is None):
            return True
        return rss is not None and abs(rss - before) >= RSS_STEP

    def sent(self, sample):
        """``sample`` went out: what the next ones are compared with."""
        self.last = own_figures(sample)
        self.last_rss = _rss(sample)
        self.last_busy = bool(sample.get("busy"))

    def forget(self):
        """The next sample is sent whatever it says (a comm opened, a user asked)."""
        self.last = None
