/**
 * The liveness watch of one kernel: JupyterLab's server notices a killed
 * kernel process only when its restarter polls (every 3 s by default), so
 * when the agent's samples stop while the kernel is idle, the watch asks the
 * kernel for `kernel_info` and reports it dead if no answer comes in time.
 *
 * The watch owns its timer, the probe sequence and the back-off; what it
 * watches comes in as callbacks (see {@link LivenessWatch.IOptions}), so it
 * knows nothing of comms, kernel connections or models. `AgentConnection`
 * (src/connection.ts) creates one per kernel and forwards to it.
 */
import type { IDisposable } from '@lumino/disposable';

/**
 * How long past the sampler period the agent may stay silent before an idle
 * kernel is asked whether it is alive (ms).
 */
const SILENCE_MARGIN_MS = 250;
/**
 * How long an idle kernel has to answer that `kernel_info` request before it
 * counts as dead (ms). An idle kernel answers in a few milliseconds.
 */
const PROBE_TIMEOUT_MS = 700;
/** Longest wait between two probes of a kernel that answers but whose agent stays silent (ms). */
const PROBE_MAX_DELAY_MS = 60_000;

/**
 * Watches that a kernel whose agent samples every `sampleIntervalMs` is
 * alive.
 *
 * - {@link heard} whenever the agent speaks; {@link start} arms the watch
 *   (one timer, re-armed as it fires), {@link stop} disarms it and cancels a
 *   probe in flight.
 * - Silence longer than the sampler period plus 250 ms, while the kernel can
 *   be probed (idle, connected), starts a probe: no answer within 700 ms
 *   calls `dead('unresponsive')`; an answer calls `alive()` and probes again
 *   later, each wait twice the last (at least the sampler period, at most
 *   60 s), until the agent is heard again. An answer that comes after the
 *   kernel was reported dead calls `alive()` too: it was only slow.
 * - A kernel that cannot be probed (busy: its shell is taken, and a long C
 *   call may hold the interpreter; or the websocket is reconnecting) is
 *   looked at again one sampler period later, never probed.
 */
export class LivenessWatch implements IDisposable {
  constructor(options: LivenessWatch.IOptions) {
    this._options = options;
    this._sampleIntervalMs = options.sampleIntervalMs;
    this._now = options.now ?? Date.now;
  }

  /**
   * The agent's sampler period (ms). A change applies from the next time
   * the watch is armed.
   */
  get sampleIntervalMs(): number {
    return this._sampleIntervalMs;
  }
  set sampleIntervalMs(value: number) {
    this._sampleIntervalMs = value;
  }

  /** Whether disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * The agent spoke: it is alive, the back-off starts again from zero and a
   * probe in flight is cancelled. It does not arm the watch.
   */
  heard(): void {
    this._lastHeard = this._now();
    this._probeDelay = 0;
    this._quietUntil = 0;
    this._probe++;
  }

  /** Arm the watch; a no-op while armed or once disposed. */
  start(): void {
    if (this._timer !== null || this._isDisposed) {
      return;
    }
    this._timer = setTimeout(
      () => {
        this._timer = null;
        this._check();
      },
      Math.max(0, this._due() - this._now())
    );
  }

  /** Disarm the watch and cancel a probe in flight (its answer is ignored). */
  stop(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    this._probe++;
  }

  /** Stop for good: {@link start} does nothing afterwards. */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this.stop();
  }

  /**
   * When the next check is due (ms since the epoch): silence beyond the
   * sampler period plus {@link SILENCE_MARGIN_MS} is worth a probe, but not
   * before the back-off after a probe the kernel answered.
   */
  private _due(): number {
    return Math.max(
      this._lastHeard + this._sampleIntervalMs + SILENCE_MARGIN_MS,
      this._quietUntil
    );
  }

  /**
   * The timer fired: probe the kernel if the agent has been silent and the
   * kernel can be probed; otherwise arm again. An inactive watch stops here
   * (until {@link start}).
   */
  private _check(): void {
    const options = this._options;
    if (this._isDisposed || !options.isActive()) {
      return;
    }
    const now = this._now();
    if (now < this._due() || !options.canProbe()) {
      // Heard lately; or busy; or the websocket is reconnecting: look again later.
      if (now >= this._due()) {
        this._quietUntil = now + this._sampleIntervalMs;
      }
      this.start();
      return;
    }
    const probe = ++this._probe;
    let answered = false;
    let reported = false;
    const alive = () => {
      // Alive, only the agent is silent (its sampler stopped?): look again,
      // less and less often.
      this._probeDelay = Math.min(
        PROBE_MAX_DELAY_MS,
        Math.max(this._sampleIntervalMs, this._probeDelay * 2)
      );
      this._quietUntil = this._now() + this._probeDelay;
      options.alive();
      this.start();
    };
    options
      .probe()
      .then(ok => {
        answered = ok;
        if (
          answered &&
          reported &&
          probe === this._probe &&
          !this._isDisposed
        ) {
          alive(); // a late answer: it was only slow
        }
      })
      .catch(() => {
        // A restart or a disposed connection cancels the request.
      });
    setTimeout(() => {
      if (probe !== this._probe || this._isDisposed) {
        // Cancelled: the agent spoke, or the watch was stopped.
        return;
      }
      if (answered) {
        alive();
      } else if (options.isActive()) {
        reported = true;
        options.dead('unresponsive');
      }
    }, PROBE_TIMEOUT_MS);
  }

  private _options: LivenessWatch.IOptions;
  private _now: () => number;
  private _sampleIntervalMs: number;
  private _isDisposed = false;
  private _lastHeard = 0;
  private _probeDelay = 0;
  private _quietUntil = 0;
  /** Sequence of probes; bumping it cancels the one in flight. */
  private _probe = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
}

/** LivenessWatch statics. */
export namespace LivenessWatch {
  /** What the watch watches, and whom it tells. */
  export interface IOptions {
    /** The agent's sampler period (ms); see {@link LivenessWatch.sampleIntervalMs}. */
    sampleIntervalMs: number;
    /**
     * Whether the kernel is watched now (the agent is connected and reported
     * ready). Asked when the timer fires and before reporting a kernel dead;
     * while false nothing is probed or reported and the watch stays disarmed
     * until {@link LivenessWatch.start}.
     */
    isActive: () => boolean;
    /**
     * Whether the kernel may be probed now: idle and connected. A busy
     * kernel is never probed (the server's restarter tells when it dies).
     */
    canProbe: () => boolean;
    /**
     * Ask the kernel for `kernel_info`. Resolves to true when the kernel
     * answered, false (or rejects) when the request was cancelled. It need
     * not time out: the watch waits 700 ms (`PROBE_TIMEOUT_MS`) itself, and
     * takes a later answer as a sign of life.
     */
    probe: () => Promise<boolean>;
    /** The kernel did not answer a probe in time (while active). */
    dead: (reason: 'unresponsive') => void;
    /**
     * The kernel answered a probe: in time, or late, after `dead` was
     * called.
     */
    alive: () => void;
    /** Clock, ms since the epoch (default `Date.now`). */
    now?: () => number;
  }
}
