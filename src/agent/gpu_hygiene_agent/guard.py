"""What keeps the agent's work in the kernel's main thread (the IPython hooks, the comm handlers)
from ending, interrupting or printing into the user's session: ``guarded(work, on_error)``.

Every ``BaseException`` is caught: ``SystemExit`` or ``GeneratorExit`` raised by something the
agent reached must not end the kernel (IPython's ``events.trigger`` catches only ``Exception``
and ``KeyboardInterrupt``, and prints those), and nothing is printed: a failure becomes an
``error`` message (``on_error``).

The user's interrupt. ipykernel runs every shell request (a cell with its hooks, a comm message)
with ``signal.default_int_handler`` as the SIGINT handler (``Kernel.pre_handler_hook``), so
"Interrupt the kernel" raises ``KeyboardInterrupt`` wherever the main thread is, inside the
agent's hook too. While the agent works, ``guarded`` puts its own handler in place of that one
(only when it is ``default_int_handler``: a handler the user installed is left alone) and puts it
back after: the user's signal then raises ``UserInterrupt``, told apart from a
``KeyboardInterrupt`` that some object the agent reached raised (an error of the agent, reported
like any other). The agent stops its work at once (the inventory is not sent) and
``guarded`` returns True; the caller passes the interrupt on to the user's cell where that can
still mean something (``Agent.post_run_cell``: the cell's result says ``KeyboardInterrupt``,
its execute reply is an error and a "Run All" stops there, as if the signal had come while the
cell ran). Before a cell (``pre_run_cell``) the interrupt only cancels the agent's snapshot:
IPython offers a hook no way to keep the cell from running, and raising from it would print
IPython's "Error in callback" and run the cell anyway. Outside the main thread (the sampler)
signals never arrive, and ``guarded`` only catches.

A second SIGINT while the first is being handled is absorbed (the first already stops the
work); one that lands in the few bytecodes after the kernel's handler is put back reaches IPython
as it would without the agent."""

import contextlib
import signal
import threading


class UserInterrupt(KeyboardInterrupt):
    """The user's SIGINT, raised by the agent's own handler while the agent works."""


class _Handler:
    """The SIGINT handler ``guarded`` puts in place: raises ``UserInterrupt`` once."""

    __slots__ = ("hit",)

    def __init__(self):
        self.hit = False

    def __call__(self, _signum, _frame):
        if self.hit:
            return
        self.hit = True
        raise UserInterrupt()


def _handler():
    """Our handler, to put in place of ``default_int_handler`` (main thread only); None when
    the handler is something else or signals cannot be set here."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
    except Exception:
        return None
    return _Handler()


def _report(on_error, exc):
    with contextlib.suppress(Exception):
        on_error(exc)


def guarded(work, on_error):
    """Run ``work()``; never raises. Any exception (``BaseException`` included) goes to
    ``on_error(exc)``, except the user's interrupt, which stops ``work`` and makes ``guarded``
    return True (False otherwise)."""
    handler = _handler()
    installed = False
    interrupted = False
    try:
        try:
            if handler is not None:
                # inside the try: a signal right after this line is ours (UserInterrupt)
                installed = signal.signal(signal.SIGINT, handler) is not None
            work()
        except UserInterrupt:
            interrupted = True
        except KeyboardInterrupt as exc:
            if not installed:
                # the kernel's own handler (not replaced, or not yet): the agent runs no user
                # code, so this is the user's signal
                interrupted = True
            else:
                _report(on_error, exc)  # raised by something the agent reached
        except BaseException as exc:  # SystemExit, GeneratorExit...: never into the session
            _report(on_error, exc)
    except BaseException:  # our handler fired inside one of the except clauses above
        interrupted = True
    finally:
        if handler is not None and (installed or signal.getsignal(signal.SIGINT) is handler):
            with contextlib.suppress(BaseException):
                signal.signal(signal.SIGINT, signal.default_int_handler)
    return interrupted or (handler is not None and handler.hit)
