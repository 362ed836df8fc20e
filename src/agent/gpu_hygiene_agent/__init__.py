"""Kernel-side agent of jupyterlab-gpu-hygiene (comm protocol 2, see docs/protocol.md).

The browser sends the modules of this package as text, in one payload, and runs them through
``src/agent/loader.py`` in a silent execute request. The loader registers them in
``sys.modules`` as the package ``_jupyterlab_gpu_hygiene_agent`` and its submodules (no file is
written, ``sys.path`` is not touched), in the order of ``MODULES``, then runs this file in the
package object last; the agent never binds a name in the user namespace.

What it does:

- registers the comm target ``jupyterlab_gpu_hygiene.v1``; every open comm gets ``hello``,
  ``inventory``, the ``sample`` stream of the sampler thread, ``cleaned`` and ``error``
  (``transport``);
- a daemon thread ("gpu-hygiene-sampler", ``sampler``) pushes device memory figures
  (``devices``: NVML through ``pynvml`` when importable, torch's caching allocator when torch is
  imported *and* CUDA is already initialised) every ``sampleIntervalMs``, also while a cell
  runs, and every 2 s the processes NVML lists on those devices (``gpuprocs``: a
  ``gpuProcesses`` message when the list changed or 10 s passed);
- an IPython ``post_run_cell`` hook sends an inventory (``inventory``) of the live top-level
  ``torch.nn.Module`` instances (``tracker``, ``models``) and of who holds them: user
  variables, the output cache, the last traceback (``roots``, ``lasterror``), walked by
  ``walk``, counted by ``census`` and ``graphs``; the same inventory is re-sent while the
  ``fingerprint`` of the kernel's state is unchanged; after a CUDA out-of-memory error an
  ``oom`` message follows (``oom``);
- a ``pre_run_cell`` hook marks the kernel busy and, for a cell containing the marker
  ``# gpu-hygiene: clear_gpu``, snapshots the models so that a ``cleaned`` message can say
  what the cell freed (``clean``).

Rules it keeps: stdlib only at import time; it never imports torch, ultralytics or anything
that would create a CUDA context; it never prints and never lets an exception reach a user
cell (errors become ``error`` messages, each distinct one sent once per comm); what an old
environment lacks (IPython's layout, torch's registration hooks, a library's attributes) it
degrades from and says once, as ``limits`` in ``hello`` and ``inventory`` (``degrade``); it
keeps no strong reference to a user object between cells. All memory figures are bytes (int).

Package attributes that other copies of the agent, the loader and the tests read:
``AGENT_VERSION``, ``PROTOCOL``, ``install``, ``uninstall``, ``hello_now`` (what the install
request's user expression evaluates), ``_agent`` (the running
``agent.Agent`` or None), ``_install_errors`` ((where, message) pairs no comm has seen yet) and
``LOAD_ERROR`` (set by the loader).
"""

# The submodules in dependency order: each imports only modules listed before it. The build
# (scripts/embed-agent.mjs) and the tests (test/agent/kernel_driver.py) read this tuple.
MODULES = (
    "limits",
    "peek",
    "util",
    "ram",
    "degrade",
    "progress",
    "storage",
    "provenance",
    "tracker",
    "models",
    "paths",
    "walk",
    "outside",
    "roots",
    "namespace",
    "visible",
    "devices",
    "gpuprocs",
    "allocator",
    "workers",
    "children",
    "fingerprint",
    "graphs",
    "hooks",
    "owners",
    "errors",
    "optimizers",
    "rootbytes",
    "census",
    "lasterror",
    "inventory",
    "transport",
    "quiet",
    "sampler",
    "oom",
    "clean",
    "guard",
    "agent",
    "lifecycle",
)

from .lifecycle import hello_now, install, uninstall  # noqa: E402 -- after MODULES (the build reads it)
from .limits import AGENT_VERSION, PROTOCOL  # noqa: E402

__all__ = ["AGENT_VERSION", "MODULES", "PROTOCOL", "hello_now", "install", "uninstall"]

LOAD_ERROR = None
_agent = None
_install_errors = []
