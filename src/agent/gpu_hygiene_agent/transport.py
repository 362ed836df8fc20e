"""The agent's side of the comms: the open comms, one send lock for the main thread and the
sampler thread, and ``error`` messages sent once per comm (kept until a comm opens)."""

import contextlib
import contextvars
import threading

from .limits import MAX_PENDING_ERRORS, PROTOCOL
from .util import describe, drain, encodable


def check_message(data):
    """Raise unless ``data`` is a browser message body of this protocol."""
    if not isinstance(data, dict):
        raise TypeError("message data must be an object")
    if data.get("protocol") != PROTOCOL:
        raise ValueError(f"unsupported protocol {data.get('protocol')!r}"[:200])


def encodable_payload(value, depth=0):
    """A copy of a message (dicts, lists, strings, numbers) whose every string, keys included,
    UTF-8 can encode (``util.encodable``: a lone surrogate becomes its ``\\udXXX`` escape)."""
    cls = type(value)
    if cls is str:
        return encodable(value)
    if depth > 64:
        return None
    if cls is dict:
        return {
            encodable(k) if type(k) is str else k: encodable_payload(v, depth + 1)
            for k, v in value.items()
        }
    if cls is list or cls is tuple:
        return [encodable_payload(v, depth + 1) for v in value]
    return value


class Transport:
    """Open comms by id and what was sent on them."""

    def __init__(self):
        self.comms = {}  # comm_id -> comm
        self.sent_errors = {}  # comm_id -> set of (where, message)
        self.pending_errors = []  # (where, message) not yet seen by any comm
        self.send_lock = threading.RLock()
        self.parent = None  # the kernel's shell parent when the main thread last noted it

    def note_parent(self, kernel):
        """Remember the shell request ``kernel`` is handling (main thread: a cell's hooks, a
        comm open), for ``send`` from the sampler thread."""
        with contextlib.suppress(Exception):
            parent = kernel.get_parent()
            if isinstance(parent, dict):
                self.parent = parent

    def send(self, comm, payload):
        """``comm.send(payload)`` under the send lock. ipykernel 7.0 reads the parent header of
        every message from a ContextVar that only its own threads have set (7.1 falls back to
        the shell's context): from the sampler thread ``comm.send`` raises LookupError there.
        The thread then takes the parent the main thread noted last (``note_parent``; as
        ipykernel 6 and 7.1 do) and sends again. A payload UTF-8 cannot encode (a lone
        surrogate in some string: jupyter_client's packer raises) is sent again with every
        string made encodable (``encodable_payload``): one odd name never silences the comm."""
        with self.send_lock:
            try:
                self._send(comm, payload)
            except UnicodeError:
                self._send(comm, encodable_payload(payload))

    def _send(self, comm, payload):
        try:
            comm.send(payload)
        except LookupError:
            if not self._adopt_parent(comm):
                raise
            comm.send(payload)

    def _adopt_parent(self, comm):
        """Set, in this thread's context only, ipykernel 7.0's shell-parent ContextVar to the
        parent noted last ({} before any); False where the kernel keeps no such variable."""
        kernel = getattr(comm, "kernel", None)
        variable = getattr(kernel, "_shell_parent", None) if kernel is not None else None
        if not isinstance(variable, contextvars.ContextVar):
            return False
        variable.set(self.parent if self.parent is not None else {})
        return True

    def add(self, comm):
        """Let broadcasts and errors reach ``comm`` (after its ``hello`` was sent)."""
        self.sent_errors[comm.comm_id] = set()
        self.comms[comm.comm_id] = comm

    def forget(self, comm_id):
        self.comms.pop(comm_id, None)
        self.sent_errors.pop(comm_id, None)

    def broadcast(self, payload):
        """Send ``payload`` to every open comm; a comm that fails is dropped."""
        for comm_id, comm in list(self.comms.items()):
            try:
                self.send(comm, payload)
            except Exception:
                self.forget(comm_id)

    def error(self, where, exc):
        """Report an exception (or a message str) as an ``error`` message, once per comm;
        kept (at most ``MAX_PENDING_ERRORS``) while no comm is open. Never raises."""
        try:
            message = exc if isinstance(exc, str) else describe(exc)
            key = (where, message)
            payload = {"protocol": PROTOCOL, "type": "error", "where": where, "message": message}
            if not self.comms:
                if key not in self.pending_errors and len(self.pending_errors) < MAX_PENDING_ERRORS:
                    self.pending_errors.append(key)
                return
            for comm_id, comm in list(self.comms.items()):
                sent = self.sent_errors.setdefault(comm_id, set())
                if key in sent:
                    continue
                sent.add(key)
                with contextlib.suppress(Exception):
                    self.send(comm, payload)
        except Exception:
            pass

    def flush(self, install_errors):
        """Send the errors kept so far: ``install_errors`` (the package's list) first."""
        for where, message in drain(install_errors) + drain(self.pending_errors):
            self.error(where, message)

    def close_all(self):
        """Close every open comm from the kernel side (the browser then opens a new one)."""
        for comm in list(self.comms.values()):
            with contextlib.suppress(Exception):
                comm.on_msg(None)
                comm.on_close(None)
                comm.close()
        self.comms.clear()
