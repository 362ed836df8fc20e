"""The sampler thread: pushes a ``sample`` every ``interval_ms``, also while a cell runs."""

import sys
import threading

from .limits import DEFAULT_INTERVAL_MS, MODULE_NAME, THREAD_NAME


class SamplerThread:
    """A daemon thread ("gpu-hygiene-sampler") that calls ``tick()`` every ``interval_ms``
    (``wake()`` makes it tick now). It ends on ``stop()``, and by itself once the package in
    ``sys.modules`` runs another agent than ``owner`` (one that could not stop this one)."""

    def __init__(self, owner, tick):
        self.owner = owner
        self.tick = tick
        self.interval_ms = DEFAULT_INTERVAL_MS
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.thread = None

    def ensure(self):
        """Start the thread unless it runs."""
        if self.thread is None or not self.thread.is_alive():
            self.stop_event.clear()
            self.thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self.thread.start()

    def alive(self):
        return self.thread is not None and self.thread.is_alive() and not self.stop_event.is_set()

    def wake(self):
        self.wake_event.set()

    def stop(self, timeout=5):
        """Stop the thread and wait for it (not when called from it)."""
        self.stop_event.set()
        self.wake_event.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _run(self):
        try:
            while not self.stop_event.is_set():
                current = getattr(sys.modules.get(MODULE_NAME), "_agent", None)
                if current is not None and current is not self.owner:
                    break  # replaced by another agent that could not stop this one
                self.tick()
                self.wake_event.wait(self.interval_ms / 1000.0)
                self.wake_event.clear()
        except BaseException:
            pass  # interpreter shutdown; never let a thread traceback reach stderr
