"""What the loader and a newer copy of the agent call: ``install`` (keep a running agent of this
version, or remove any other copy's hooks and comm target and start an ``agent.Agent``) and
``uninstall``; and what the browser's install request evaluates after it: ``hello_now``."""

import contextlib
import json
import sys

from .agent import Agent
from .limits import AGENT_VERSION, COMM_TARGET, MAX_PENDING_ERRORS, MODULE_NAME
from .util import describe

# The package object this copy was loaded into (the loader registers it in sys.modules before
# it runs the submodules): it holds ``_agent`` and ``_install_errors``.
_package = sys.modules[__package__]


def _is_ours(module):
    """Whether a ``__module__`` is the agent's: the package, a submodule, or 0.2.0's module."""
    prefix = MODULE_NAME + "."
    return module == MODULE_NAME or (isinstance(module, str) and module.startswith(prefix))


def _sweep(shell):
    """Remove hooks and the comm target left by any other copy of the agent (another version
    whose ``uninstall`` failed or did not exist): callbacks defined in the single-file module
    ``_jupyterlab_gpu_hygiene_agent`` of 0.2.0 and before, or in any of its submodules."""
    for callbacks in list(shell.events.callbacks.values()):
        for fn in list(callbacks):
            func = getattr(fn, "__func__", fn)
            if _is_ours(getattr(func, "__module__", None)):
                with contextlib.suppress(ValueError):
                    callbacks.remove(fn)
    targets = shell.kernel.comm_manager.targets
    if targets.get(COMM_TARGET) is not None:
        targets.pop(COMM_TARGET, None)


def _keep(agent, config):
    """Keep a running agent of this version: new config, missing parts repaired."""
    try:
        agent.configure(config)
    except Exception as exc:
        agent.error("install", exc)
    agent.ensure()
    return "kept"


def install(config=None, previous=None):
    """Install the agent in the running IPython kernel; never raises.

    ``config``: dict from the loader (``{"sampleIntervalMs": int}``). ``previous``: the package
    (or 0.2.0 module) object that was in ``sys.modules`` before the loader ran (or None). A
    running agent of the same version is kept: it gets the config and is repaired if a part
    is missing, and the loader puts ``previous`` and its submodules back in ``sys.modules``.
    Another version is uninstalled first (its comms are closed, so the browser opens a new
    one). Returns ``"kept"``, ``"installed"`` or ``"failed"`` (the error is sent to the first
    comm that opens).
    """
    errors = _package._install_errors
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            raise RuntimeError("not running in an IPython kernel")
        if previous is not None and previous is not _package:
            prev_agent = getattr(previous, "_agent", None)
            same = getattr(previous, "AGENT_VERSION", None) == AGENT_VERSION
            if same and prev_agent is not None and not prev_agent.stop_event.is_set():
                return _keep(prev_agent, config)
            uninstall_previous = getattr(previous, "uninstall", None)
            if callable(uninstall_previous):
                with contextlib.suppress(Exception):
                    uninstall_previous()
        elif _package._agent is not None and not _package._agent.stop_event.is_set():
            return _keep(_package._agent, config)  # install() again on this very package
        _sweep(shell)
        agent = Agent(shell, None)
        try:
            agent.configure(config)
        except Exception as exc:
            errors.append(("install", describe(exc)))
        _package._agent = agent
        agent.start()
        return "installed"
    except Exception as exc:
        if len(errors) < MAX_PENDING_ERRORS:
            errors.append(("install", describe(exc)))
        return "failed"


def uninstall():
    """Stop the running agent of this package (hooks, comm target, thread, comms); never
    raises."""
    agent, _package._agent = _package._agent, None
    if agent is not None:
        with contextlib.suppress(Exception):
            agent.stop()


class HelloNow:
    """The running agent's ``hello`` (dict; ``{}`` when none runs) as IPython's display
    formatter shows it: ``application/json`` (``_repr_json_``) and the same JSON as
    ``text/plain`` (``repr``), for a formatter without JSON."""

    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message

    def _repr_json_(self):
        return self.message

    def __repr__(self):
        return json.dumps(self.message)


def hello_now():
    """The ``hello`` of the running agent, for the install request's user expression
    (``hello_now()`` on this package in ``sys.modules``): the browser reads it in the install's
    ``execute_reply`` and has the devices before the comm opens (the comm's own ``hello``
    follows). Never raises; binds nothing in the user namespace (IPython evaluates user
    expressions without the display hook: no ``_``, no ``Out``, no execution count)."""
    try:
        agent = _package._agent
        if agent is None or agent.stop_event.is_set():
            return HelloNow({})
        return HelloNow(agent.hello())
    except Exception:
        return HelloNow({})
