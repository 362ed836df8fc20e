"""The sampler thread: pushes a ``sample`` every ``interval_ms``, also while a cell runs, reads
the slower facts (``gpuProcesses``) at their own rate and, while a cell runs, reads torch's
allocated bytes between samples (the floor under a training loop's sawtooth)."""

import random
import sys
import threading
import time

from .limits import DEFAULT_INTERVAL_MS, MODULE_NAME, READ_MS, SLOW_INTERVAL_MS, THREAD_NAME


def _now_ms():
    return time.monotonic_ns() // 1000000


class SamplerThread:
    """A daemon thread ("gpu-hygiene-sampler") that calls ``tick()`` every ``interval_ms``
    (``wake()`` makes it tick now), ``slow()``, when given, at most every ``slow_ms``, and
    ``read()``, when given, between ticks while ``reading()`` is true: each wait before a read
    is drawn from ``read_ms * [0.5, 1.5)`` (its own random generator: the user's ``random``
    sequence is not touched), so that reads fall on random phases of a periodic training step
    instead of aliasing with it. A tick counts as a read (the sample reads allocated itself).

    Ticks keep a fixed rate (a wake starts a new one from now). ``slow`` runs right after the
    first tick at or after its time, so that it can use what that tick just read (with
    ``interval_ms`` above ``slow_ms`` it runs on its own time); when it returns False (it had
    nothing to do: no comm open) it runs again at the next tick. It ends on ``stop()``, and by
    itself once the package in ``sys.modules`` runs another agent than ``owner`` (one that
    could not stop this one)."""

    def __init__(self, owner, tick, slow=None, read=None, reading=None):
        self.owner = owner
        self.tick = tick
        self.slow = slow
        self.read = read
        self.reading = reading
        self.interval_ms = DEFAULT_INTERVAL_MS
        self.slow_ms = SLOW_INTERVAL_MS
        self.read_ms = READ_MS
        self.random = random.Random()
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
            next_tick = next_slow = next_read = _now_ms()
            while not self.stop_event.is_set():
                current = getattr(sys.modules.get(MODULE_NAME), "_agent", None)
                if current is not None and current is not self.owner:
                    break  # replaced by another agent that could not stop this one
                now = _now_ms()
                woken = self.wake_event.is_set()
                self.wake_event.clear()
                interval = self.interval_ms
                at = now  # this turn's time on the schedule
                ticked = False
                if woken or now >= next_tick:
                    if not woken and now - next_tick < interval:
                        at = next_tick  # on time: keep the rate
                    self.tick()
                    ticked = True
                    next_tick = at + interval
                    if next_tick <= _now_ms():  # a tick longer than the interval
                        next_tick = _now_ms() + interval
                if self.slow is not None and at >= next_slow and self.slow() is not False:
                    next_slow = at + self.slow_ms
                reading = self.read is not None and self._reading()
                if reading and not ticked and now >= next_read:
                    self.read()
                if reading and (ticked or now >= next_read):
                    next_read = _now_ms() + self.read_ms * (0.5 + self.random.random())
                until = next_tick
                if self.slow is not None and interval > self.slow_ms:
                    until = min(until, next_slow)
                if reading:
                    until = min(until, next_read)
                self.wake_event.wait(max(0, until - _now_ms()) / 1000.0)
        except BaseException:
            pass  # interpreter shutdown; never let a thread traceback reach stderr

    def _reading(self):
        try:
            return bool(self.reading is None or self.reading())
        except Exception:
            return False
